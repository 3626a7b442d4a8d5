package claim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/random"
)

// The claim flow tests run on the in-memory ports (infra/mem: store,
// queue, provisioner), a ghfake GitHub over httptest and an injected
// clock: no emulator. infra/contract holds infra/mem to the DynamoDB and
// SQS adapters' rules; e2e_test.go keeps the two paths that need the real
// adapters (EC2 + SSM on moto, the claims queue's redrive policy).

const (
	installation = int64(4242)
	repo         = "octo-org/octo-repo"
	seed1        = 7
)

// clock is the injected clock. It starts near real time because
// ghinstallation decides token refresh on the wall clock, and only moves
// forward, when a test says so.
func newClock() *clocktest.Clock { return clocktest.New(time.Now().UTC().Truncate(time.Second)) }

// logBuf collects every log line of a test (claimer and provisioners).
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// decisions returns the decoded log lines whose "decision" is set.
func (l *logBuf) decisions(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			continue // EMF lines share nothing with decisions
		}
		if _, ok := m["decision"]; ok {
			out = append(out, m)
		}
	}
	return out
}

// count returns how many decision lines say decision.
func (l *logBuf) count(t *testing.T, decision string) int {
	t.Helper()
	n := 0
	for _, d := range l.decisions(t) {
		if d["decision"] == decision {
			n++
		}
	}
	return n
}

// checkLogs fails the test when any log line carries a JIT config or an
// installation token.
func checkLogs(t *testing.T, logs string, configs []string) {
	if strings.Contains(logs, "ghs_") {
		t.Errorf("a log line carries an installation token (ghs_…)")
	}
	for _, c := range configs {
		if c != "" && strings.Contains(logs, c) {
			t.Errorf("a log line carries a JIT config")
		}
		if len(c) > 24 && strings.Contains(logs, c[:24]) {
			t.Errorf("a log line carries part of a JIT config")
		}
	}
}

// spy wraps a provisioner: it remembers every JIT config it was handed (so
// the log check knows what must never appear) and lets a test inject a
// failure or a crash before the provisioner runs, or act after it.
type spy struct {
	next claim.Provisioner

	mu      sync.Mutex
	configs []string
	calls   int
	before  func(n int) error // n: 1-based call number; nil error lets the call through
	after   func(n int)       // runs after the provisioner succeeded
}

func (s *spy) Provision(ctx context.Context, req pool.Request) (pool.Result, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.configs = append(s.configs, req.JITConfig)
	before, after := s.before, s.after
	s.mu.Unlock()
	if before != nil {
		if err := before(n); err != nil {
			return pool.Result{}, err
		}
	}
	res, err := s.next.Provision(ctx, req)
	if err == nil && after != nil {
		after(n)
	}
	return res, err
}

func (s *spy) Cleanup(ctx context.Context, req pool.Request) error {
	return s.next.Cleanup(ctx, req)
}

func (s *spy) Running(ctx context.Context, req pool.Request) (string, error) {
	return s.next.Running(ctx, req)
}

func (s *spy) set(before func(int) error, after func(int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before, s.after = before, after
}

func (s *spy) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *spy) Configs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.configs...)
}

// esm is the SQS event source mapping in front of the in-memory claims
// queue: it receives what was sent (and raw bodies a test puts there), and
// settles each invocation as ReportBatchItemFailures does: a message not
// reported is deleted, a reported one is visible again (the test moves
// time itself, so "again" is at once), and a crashed invocation's
// messages stay hidden for the queue's visibility timeout, past the end of
// any test. Delays are recorded by mem.Queue, not applied, for the same
// reason.
type esm struct {
	q *mem.Queue

	mu     sync.Mutex
	synced int // mem.Queue sends already taken in
	seq    int
	msgs   []*simMsg
}

type simMsg struct {
	id, body, receipt string
	state             int // available, inFlight, gone
	receives          int // ApproximateReceiveCount
}

const (
	available = iota
	inFlight
	gone
)

func (e *esm) sync() {
	sent := e.q.Sent()
	for _, s := range sent[e.synced:] {
		b, _ := json.Marshal(s.Msg)
		e.msgs = append(e.msgs, &simMsg{id: s.ID, body: string(b)})
	}
	e.synced = len(sent)
}

// raw puts body on the queue as it is (malformed bodies included).
func (e *esm) raw(body string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sync()
	e.seq++
	e.msgs = append(e.msgs, &simMsg{id: fmt.Sprintf("raw-%d", e.seq), body: body})
}

// receive takes up to n available messages, each with a fresh receipt.
func (e *esm) receive(n int) []events.SQSMessage {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sync()
	var out []events.SQSMessage
	for _, m := range e.msgs {
		if len(out) == n {
			break
		}
		if m.state != available {
			continue
		}
		e.seq++
		m.receives++
		m.state, m.receipt = inFlight, fmt.Sprintf("rh-%s-%d", m.id, e.seq)
		out = append(out, events.SQSMessage{MessageId: m.id, ReceiptHandle: m.receipt, Body: m.body, EventSource: "aws:sqs",
			Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives)}})
	}
	return out
}

// settle applies the invocation's answer to its batch.
func (e *esm) settle(batch []events.SQSMessage, resp events.SQSEventResponse, crashed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if crashed {
		return // in flight until the visibility timeout
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, b := range batch {
		for _, m := range e.msgs {
			if m.id == b.MessageId && m.receipt == b.ReceiptHandle && m.state == inFlight {
				m.state = gone
				if failed[m.id] {
					m.state = available
				}
			}
		}
	}
}

type harness struct {
	clock  *clocktest.Clock
	store  *mem.Store
	queue  *mem.Queue
	esm    *esm
	prov   *mem.Provisioner
	spy    *spy
	gh     *ghfake.Server
	ghURL  string
	logs   *logBuf
	log    *slog.Logger
	pools  []pool.Pool
	msgSeq atomic.Int64

	crashed atomic.Bool
}

type setupOpt struct {
	ec2         bool // the pool is an EC2 pool (else dispatch)
	checkQueued bool
	groupID     int64
	ghOpts      []ghfake.Option
}

// setup builds a fresh world for one test: in-memory store, queue and
// provisioner on the injected clock, a ghfake GitHub, one pool.
func setup(t *testing.T, o setupOpt) *harness {
	t.Helper()
	h := &harness{clock: newClock(), logs: &logBuf{}, store: mem.NewStore(job.Timing{}), prov: mem.NewProvisioner()}
	h.log = obs.NewLogger(h.logs, "debug")
	h.queue = mem.NewQueue(h.clock.Now)
	h.esm = &esm{q: h.queue}
	h.spy = &spy{next: h.prov}

	h.gh = ghfake.New(append([]ghfake.Option{ghfake.WithClock(h.clock.Now), ghfake.WithAppID(appID)}, o.ghOpts...)...)
	ts := httptest.NewServer(h.gh)
	t.Cleanup(ts.Close)
	h.ghURL = ts.URL

	p := pool.Pool{Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunnerGroupID: 1, CheckQueued: o.checkQueued,
		Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/dispatch"}}
	if o.ec2 {
		p.Provisioner = pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: "lt-0123456789abcdef0", LaunchTemplateVersion: "$Default"}
	}
	if o.groupID != 0 {
		p.RunnerGroupID = o.groupID
	}
	h.pools = []pool.Pool{p}
	t.Cleanup(func() { checkLogs(t, h.logs.String(), h.spy.Configs()) })
	return h
}

// crash ends the calling goroutine as a dying Lambda would end: nothing
// after this point of the claim runs, no deferred decision is logged, and
// the invocation's messages are neither deleted nor reported.
func (h *harness) crash() {
	h.crashed.Store(true)
	runtime.Goexit()
}

type claimerOpt struct {
	concurrency int
	seed        uint64
	instance    string
	lease       time.Duration
	// safety and reserve override SafetyMargin and HandOffReserve.
	safety, reserve time.Duration
	store           claim.Store // nil: h.store
	queue           claim.Queue // nil: h.queue
	github          func(claim.GitHub) claim.GitHub
	rates           func(claim.RateState) claim.RateState
	noTransport     bool // a GitHub client without the rate transport, and no Rates
}

// claimer returns a new claimer "process": its own GitHub client, its own
// rate memory, sharing the world of h.
func (h *harness) claimer(t *testing.T, o claimerOpt) *claim.Claimer {
	t.Helper()
	if o.seed == 0 {
		o.seed = seed1
	}
	gh, tracker := newGitHub(t, h.store, h.ghURL, h.clock.Now, !o.noTransport)
	d := claim.Config{
		Pools: h.pools, Concurrency: o.concurrency, InstanceID: o.instance, Lease: o.lease,
		SafetyMargin: o.safety, HandOffReserve: o.reserve,
		Store: h.store, Queue: h.queue, GitHub: gh, Provisioner: h.spy, Policy: newPolicy(), Rates: tracker,
		Now: h.clock.Now, Rand: random.New(o.seed), Logger: h.log,
		Metrics: obs.NewMetrics(h.logs, map[string]string{"function": "claimer"}, h.clock.Now),
	}
	if o.noTransport {
		d.Rates = nil
	}
	if o.store != nil {
		d.Store = o.store
	}
	if o.queue != nil {
		d.Queue = o.queue
	}
	if o.github != nil {
		d.GitHub = o.github(gh)
	}
	if o.rates != nil {
		d.Rates = o.rates(tracker)
	}
	c, err := claim.New(d)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (h *harness) newRecord(id int64) job.Record {
	return job.Record{
		JobID: id, RunID: id * 10, Repo: repo, InstallationID: installation,
		Labels: []string{"self-hosted", "linux"}, Pool: h.pools[0].Name,
	}
}

// record creates job id's record, queued, with no message.
func (h *harness) record(t *testing.T, id int64) job.Record {
	t.Helper()
	r, err := h.store.CreateJob(context.Background(), h.newRecord(id), h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Queued, as a released retry leaves it.
	r = h.get(t, id)
	r.State, r.DueAt = job.Queued, job.Millis(h.clock.Now())
	r.SweepAt = r.DueAt + h.store.Timing().QueuedGrace.Milliseconds()
	h.store.Put(r)
	return r
}

// seed records job id as the webhook would: the record, then its message.
func (h *harness) seed(t *testing.T, id int64) job.Record {
	t.Helper()
	r := h.record(t, id)
	if err := h.queue.Send(context.Background(), job.Message{JobID: id, Version: r.Version}, 0); err != nil {
		t.Fatal(err)
	}
	return r
}

func (h *harness) get(t *testing.T, id int64) job.Record {
	t.Helper()
	r, err := h.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// markDone is the webhook's in_progress/completed for job id.
func (h *harness) markDone(t *testing.T, id int64, runner string) {
	t.Helper()
	if _, err := h.store.MarkDone(context.Background(), job.Report{JobID: id, Repo: repo, InstallationID: installation, RunnerName: runner}, h.clock.Now()); err != nil {
		t.Error(err)
	}
}

// receive takes exactly n messages from the claims queue.
func (h *harness) receive(t *testing.T, n int) []events.SQSMessage {
	t.Helper()
	out := h.esm.receive(n)
	if len(out) != n {
		t.Fatalf("received %d messages from the claims queue, want %d", len(out), n)
	}
	return out
}

// receiveNone asserts that the claims queue holds no visible message.
func (h *harness) receiveNone(t *testing.T) {
	t.Helper()
	if res := h.esm.receive(10); len(res) != 0 {
		t.Fatalf("claims queue holds %d messages, want none: first %s", len(res), res[0].Body)
	}
}

// invoke runs one Lambda invocation of c over msgs with a 60 s budget on
// the injected clock, and settles the batch as the event source mapping.
func (h *harness) invoke(t *testing.T, c *claim.Claimer, msgs ...events.SQSMessage) events.SQSEventResponse {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), h.clock.Now().Add(60*time.Second))
	defer cancel()
	return h.invokeCtx(t, ctx, c, msgs...)
}

func (h *harness) invokeCtx(t *testing.T, ctx context.Context, c *claim.Claimer, msgs ...events.SQSMessage) events.SQSEventResponse {
	t.Helper()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("req-%d", h.msgSeq.Add(1))})
	h.crashed.Store(false)
	resp, err := c.Handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatalf("handle: %v", err)
	}
	h.esm.settle(msgs, resp, h.crashed.Load())
	return resp
}

// lastSend is the latest SendMessage on the claims queue.
func (h *harness) lastSend(t *testing.T) mem.Sent {
	t.Helper()
	s := h.queue.Sent()
	if len(s) == 0 {
		t.Fatal("nothing was sent")
	}
	return s[len(s)-1]
}

// instances counts the live machines of job id.
func (h *harness) instances(id int64) int { return len(h.prov.Machines(id)) }

// hasParameter reports whether runner's JIT config is stored (the EC2
// adapter's SSM parameter).
func (h *harness) hasParameter(runner string) bool {
	_, ok := h.prov.Config(runner)
	return ok
}

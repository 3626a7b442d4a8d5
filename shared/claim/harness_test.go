package claim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/store"
)

const (
	installation = int64(4242)
	repo         = "octo-org/octo-repo"
	seed1, seed2 = 7, 11
)

// clock is the injected clock. It starts near real time because
// ghinstallation decides token refresh on the wall clock, and only moves
// forward, when a test says so.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now().UTC().Truncate(time.Second)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// sent is one SendMessage the claimer made on the claims queue.
type sent struct {
	msg   job.Message
	delay time.Duration
}

// sqsRecorder passes every call through to the emulator's real queue, but
// records the delays asked for and sends with none: moto honours delays in
// wall-clock time, and these tests move time with the injected clock. The
// visibility changes (RetryAfter) are recorded and applied as "now" for
// the same reason.
type sqsRecorder struct {
	api *sqs.Client

	mu         sync.Mutex
	sends      []sent
	visibility map[string]time.Duration // receipt → requested visibility
}

func (r *sqsRecorder) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opt ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	var m job.Message
	if err := json.Unmarshal([]byte(aws.ToString(in.MessageBody)), &m); err != nil {
		return nil, err
	}
	cp := *in
	cp.DelaySeconds = 0
	out, err := r.api.SendMessage(ctx, &cp, opt...)
	if err == nil {
		r.mu.Lock()
		r.sends = append(r.sends, sent{msg: m, delay: time.Duration(in.DelaySeconds) * time.Second})
		r.mu.Unlock()
	}
	return out, err
}

func (r *sqsRecorder) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opt ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return r.api.DeleteMessage(ctx, in, opt...)
}

func (r *sqsRecorder) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opt ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	r.mu.Lock()
	r.visibility[aws.ToString(in.ReceiptHandle)] = time.Duration(in.VisibilityTimeout) * time.Second
	r.mu.Unlock()
	cp := *in
	cp.VisibilityTimeout = 0
	return r.api.ChangeMessageVisibility(ctx, &cp, opt...)
}

func (r *sqsRecorder) Sends() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.sends...)
}

func (r *sqsRecorder) Visibility(receipt string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.visibility[receipt]
	return d, ok
}

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

// lines returns the decoded log lines whose "decision" is set.
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

// spy wraps the real provisioner: it remembers every JIT config it was
// handed (so the log check knows what must never appear) and lets a test
// inject a failure or a crash before the real adapter runs.
type spy struct {
	next claim.Provisioner

	mu      sync.Mutex
	configs []string
	calls   int
	before  func(n int) error // n: 1-based call number; nil error lets the call through
	after   func(n int)       // runs after the real adapter succeeded
}

func (s *spy) Provision(ctx context.Context, req provision.Request) (provision.Result, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.configs = append(s.configs, req.JITConfig)
	before, after := s.before, s.after
	s.mu.Unlock()
	if before != nil {
		if err := before(n); err != nil {
			return provision.Result{}, err
		}
	}
	res, err := s.next.Provision(ctx, req)
	if err == nil && after != nil {
		after(n)
	}
	return res, err
}

func (s *spy) Cleanup(ctx context.Context, req provision.Request) error {
	return s.next.Cleanup(ctx, req)
}

func (s *spy) Running(ctx context.Context, req provision.Request) (string, error) {
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

// crash ends the calling goroutine as a dying Lambda would end: nothing
// after this point of the claim runs, no deferred decision is logged.
func crash() { runtime.Goexit() }

type harness struct {
	clock    *clock
	cfg      aws.Config
	store    *store.Store
	sqs      *sqs.Client
	rec      *sqsRecorder
	queue    *queue.Queue
	queueURL string
	dlqURL   string
	ec2      *ec2.Client
	gh       *ghfake.Server
	ghURL    string
	logs     *logBuf
	log      *slog.Logger
	spy      *spy
	pools    []pool.Pool
	dispatch string // dispatch pool's queue URL
	msgSeq   atomic.Int64
}

type setupOpt struct {
	ec2         bool // the pool provisions EC2 instances (else dispatch)
	checkQueued bool
	groupID     int64
	ghOpts      []ghfake.Option
}

// setup builds a fresh world for one test: the template's table and
// queues on moto, a ghfake GitHub, a pool, and the real provisioner
// behind a spy.
func setup(t *testing.T, o setupOpt) *harness {
	t.Helper()
	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	cfg := srv.ConfigForTest(t)
	h := &harness{clock: newClock(), cfg: cfg, logs: &logBuf{}}
	h.log = obs.NewLogger(h.logs, "debug")
	h.store = store.New(dynamodb.NewFromConfig(cfg), stack.TableName, store.Options{})
	h.sqs = sqs.NewFromConfig(cfg)
	h.rec = &sqsRecorder{api: h.sqs, visibility: map[string]time.Duration{}}
	h.queueURL = stack.QueueURL
	h.dlqURL = stack.DLQURL
	h.queue = queue.New(h.rec, stack.QueueURL)
	h.ec2 = ec2.NewFromConfig(cfg)

	h.gh = ghfake.New(append([]ghfake.Option{ghfake.WithClock(h.clock.Now), ghfake.WithAppID(appID)}, o.ghOpts...)...)
	ts := httptest.NewServer(h.gh)
	t.Cleanup(ts.Close)
	h.ghURL = ts.URL

	p := pool.Pool{Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunnerGroupID: 1, CheckQueued: o.checkQueued}
	if o.groupID != 0 {
		p.RunnerGroupID = o.groupID
	}
	ctx := context.Background()
	reg := provision.Registry{}
	if o.ec2 {
		p.Provisioner = pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: h.launchTemplate(t), LaunchTemplateVersion: "$Default"}
		reg[pool.ProvisionerEC2] = provision.NewEC2(h.ec2, ssm.NewFromConfig(cfg), h.log)
	} else {
		out, err := h.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(emulator.StackName("dispatch-" + t.Name()))})
		if err != nil {
			t.Fatal(err)
		}
		h.dispatch = aws.ToString(out.QueueUrl)
		p.Provisioner = pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: h.dispatch}
		reg[pool.ProvisionerDispatch] = provision.NewDispatch(h.sqs, h.log)
	}
	h.pools = []pool.Pool{p}
	h.spy = &spy{next: reg}

	t.Cleanup(func() { h.checkLogs(t) })
	return h
}

// launchTemplate creates an EC2 launch template in moto for the test.
func (h *harness) launchTemplate(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	imgs, err := h.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{})
	if err != nil || len(imgs.Images) == 0 {
		t.Fatalf("describe images: %v (%d images)", err, len(imgs.Images))
	}
	name := emulator.StackName("lt-" + t.Name())
	_, err = h.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:      imgs.Images[0].ImageId,
			InstanceType: ec2types.InstanceTypeT4gMicro,
		},
	})
	if err != nil {
		t.Fatalf("create launch template: %v", err)
	}
	return name
}

// checkLogs fails the test when any log line carries a JIT config or an
// installation token.
func (h *harness) checkLogs(t *testing.T) {
	logs := h.logs.String()
	if strings.Contains(logs, "ghs_") {
		t.Errorf("a log line carries an installation token (ghs_…)")
	}
	for _, c := range h.spy.Configs() {
		if c != "" && strings.Contains(logs, c) {
			t.Errorf("a log line carries a JIT config")
		}
		if len(c) > 24 && strings.Contains(logs, c[:24]) {
			t.Errorf("a log line carries part of a JIT config")
		}
	}
}

type claimerOpt struct {
	concurrency int
	seed        uint64
	instance    string
	store       claim.Store // nil: h.store
}

// claimer returns a new claimer "process": its own GitHub client, its own
// rate memory, sharing the world of h.
func (h *harness) claimer(t *testing.T, o claimerOpt) *claim.Claimer {
	t.Helper()
	if o.seed == 0 {
		o.seed = seed1
	}
	gh, rates := newGitHub(t, h)
	var st claim.Store = h.store
	if o.store != nil {
		st = o.store
	}
	c, err := claim.New(claim.Deps{
		Store:       st,
		Queue:       h.queue,
		GitHub:      gh,
		Provisioner: h.spy,
		Policy:      newPolicy(),
		Rates:       rates,
		Now:         h.clock.Now,
		Rand:        rand.New(rand.NewPCG(o.seed, seed2)),
		Log:         h.log,
		Metrics:     obs.NewMetrics(h.logs, map[string]string{"function": "claimer"}, h.clock.Now),
	}, claim.Options{Pools: h.pools, Concurrency: o.concurrency, InstanceID: o.instance})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// seed records job id as the webhook would (pending, message, queued).
func (h *harness) seed(t *testing.T, id int64) job.Record {
	t.Helper()
	ctx := context.Background()
	r, err := h.store.CreateJob(ctx, job.Record{
		JobID: id, RunID: id * 10, Repo: repo, InstallationID: installation,
		Labels: []string{"self-hosted", "linux"}, Pool: h.pools[0].Name,
	}, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.queue.Send(ctx, job.Message{JobID: id, Version: r.Version}, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.store.MarkQueued(ctx, id, r.Version, h.clock.Now(), h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	return r
}

// record creates job id's record, queued, with no message.
func (h *harness) record(t *testing.T, id int64) {
	t.Helper()
	ctx := context.Background()
	r, err := h.store.CreateJob(ctx, job.Record{
		JobID: id, RunID: id * 10, Repo: repo, InstallationID: installation,
		Labels: []string{"self-hosted", "linux"}, Pool: h.pools[0].Name,
	}, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.MarkQueued(ctx, id, r.Version, h.clock.Now(), h.clock.Now()); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) get(t *testing.T, id int64) job.Record {
	t.Helper()
	r, err := h.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// receive takes exactly n messages from the claims queue.
func (h *harness) receive(t *testing.T, n int) []events.SQSMessage {
	t.Helper()
	var out []events.SQSMessage
	for tries := 0; len(out) < n && tries < 10; tries++ {
		res, err := h.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(h.queueURL), MaxNumberOfMessages: int32(min(10, n-len(out))), WaitTimeSeconds: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			out = append(out, events.SQSMessage{
				MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
				EventSource: "aws:sqs",
			})
		}
	}
	if len(out) != n {
		t.Fatalf("received %d messages from the claims queue, want %d", len(out), n)
	}
	return out
}

// receiveNone asserts that the claims queue holds no visible message.
func (h *harness) receiveNone(t *testing.T) {
	t.Helper()
	res, err := h.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(h.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 0 {
		t.Fatalf("claims queue holds %d messages, want none: first %s", len(res.Messages), aws.ToString(res.Messages[0].Body))
	}
}

// invoke runs one Lambda invocation of c over msgs with a 60 s budget on
// the injected clock.
func (h *harness) invoke(t *testing.T, c *claim.Claimer, msgs ...events.SQSMessage) events.SQSEventResponse {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), h.clock.Now().Add(60*time.Second))
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("req-%d", h.msgSeq.Add(1))})
	resp, err := c.Handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatalf("handle: %v", err)
	}
	return resp
}

// lastSend is the claimer's latest SendMessage on the claims queue.
func (h *harness) lastSend(t *testing.T) sent {
	t.Helper()
	s := h.rec.Sends()
	if len(s) == 0 {
		t.Fatal("nothing was sent")
	}
	return s[len(s)-1]
}

// instances counts pending or running instances tagged with job id.
func (h *harness) instances(t *testing.T, id int64) int {
	t.Helper()
	out, err := h.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + provision.TagJobID), Values: []string{fmt.Sprint(id)}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range out.Reservations {
		n += len(r.Instances)
	}
	return n
}

// dispatched returns the dispatch messages sent for the pool.
func (h *harness) dispatched(t *testing.T) []provision.DispatchMessage {
	t.Helper()
	var out []provision.DispatchMessage
	for {
		res, err := h.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(h.dispatch), MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			return out
		}
		for _, m := range res.Messages {
			var d provision.DispatchMessage
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
}

// hasParameter reports whether the SSM parameter holding runner's JIT
// config exists.
func (h *harness) hasParameter(t *testing.T, runner string) bool {
	t.Helper()
	_, err := ssm.NewFromConfig(h.cfg).GetParameter(context.Background(), &ssm.GetParameterInput{Name: aws.String(provision.ParameterName(runner))})
	var nf *ssmtypes.ParameterNotFound
	switch {
	case err == nil:
		return true
	case errors.As(err, &nf):
		return false
	}
	t.Fatalf("GetParameter %s: %v", runner, err)
	return false
}

// SendMessageBatch passes through unrecorded: the claimer sends one message
// at a time (queue.SQS carries it for the reclaimer).
func (r *sqsRecorder) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return r.api.SendMessageBatch(ctx, in, opt...)
}

package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/store"
)

// The integration tests run the handler over the real store and queue, with
// real SDK clients, against the template's table and queue on moto: the
// adapter path end to end. The handler's decisions are the flow tests'
// (handler_test.go, on infra/mem); the store's conditions are the contract
// suite's (infra/contract, run on moto by shared/store). What is left here
// is what only the wire shows: the requests a delivery really sends,
// conditional puts racing on the emulator, and that a skipped delivery
// leaves the table empty.

// The adapters implement the webhook's ports.
var (
	_ Store = (*store.Store)(nil)
	_ Queue = (*queue.Queue)(nil)
)

// world is one deployed stack with a handler over it.
type world struct {
	h       *Handler
	read    *store.Store // over the uncounted client: the test's own reads
	ddb     *dynamodb.Client
	sqs     *sqs.Client
	stack   *emulator.Stack
	wire    *wire
	retries *emulator.Retries
}

// wire counts the AWS requests the handler's clients send, by operation
// (X-Amz-Target: "DynamoDB_20120810.PutItem", "AmazonSQS.SendMessage").
// The SDK's own retry of a request that failed is one request of the
// handler's: it is counted once, and noted (retried), since a send retried
// that way may have been delivered twice, as on AWS. A retry is told by the
// SDK's invocation id (Amz-Sdk-Invocation-Id, one per operation, the same
// on each of its attempts), not by the answer: on a loaded box the emulator
// sometimes answers a 5xx after doing the work, and a response can also fail
// after its status line (a body cut short fails the DynamoDB CRC32 check,
// and the SDK tries again), which no status code shows.
type wire struct {
	next    aws.HTTPClient
	mu      sync.Mutex
	ops     []string
	calls   map[string]bool // invocation ids seen since the last take
	retried []string
	seen    []string // every request with its outcome, for a failure's message
}

func (c *wire) Do(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	if _, after, ok := strings.Cut(op, "."); ok {
		op = after
	}
	id := r.Header.Get("Amz-Sdk-Invocation-Id")
	c.mu.Lock()
	if id != "" && c.calls[id] {
		c.retried = append(c.retried, op)
	} else {
		c.ops = append(c.ops, op)
		if c.calls == nil {
			c.calls = map[string]bool{}
		}
		c.calls[id] = true
	}
	c.mu.Unlock()
	resp, err := c.next.Do(r)
	c.mu.Lock()
	if err != nil {
		c.seen = append(c.seen, op+": "+err.Error())
	} else {
		c.seen = append(c.seen, op+": "+resp.Status)
	}
	c.mu.Unlock()
	return resp, err
}

// take returns the operations sent since the last take, the SDK's retries
// of failed requests apart.
func (c *wire) take() []string {
	ops, _ := c.takeRetried()
	return ops
}

// takeRetried is take, with the operations the SDK retried.
func (c *wire) takeRetried() (ops, retried []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops, retried = c.ops, c.retried
	c.ops, c.retried, c.calls = nil, nil, nil
	return ops, retried
}

// outcomes returns every request since the last call with its answer.
func (c *wire) outcomes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.seen
	c.seen = nil
	return out
}

// cutBody fails its first read as a connection closed under it would.
type cutBody struct{}

func (cutBody) Read([]byte) (int, error) {
	return 0, errors.New("read tcp: use of closed network connection")
}
func (cutBody) Close() error { return nil }

// answers is an HTTP client that replays one answer per request, in turn.
type answers []func() *http.Response

func (a *answers) Do(*http.Request) (*http.Response, error) {
	next := (*a)[0]
	*a = (*a)[1:]
	return next(), nil
}

// TestWireCountsARetryOnce: a DynamoDB refusal whose body is cut short
// after its status line (seen once on a loaded box: the SDK read the 400,
// lost the body, and tried the put again) is one PutItem of the handler's
// and one retry, as the SDK's invocation id says; its status alone would
// have made the retry look like a second put.
func TestWireCountsARetryOnce(t *testing.T) {
	refused := `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`
	next := answers{
		func() *http.Response {
			return &http.Response{StatusCode: 400, Status: "400 Bad Request", Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}}, Body: cutBody{}}
		},
		func() *http.Response {
			return &http.Response{StatusCode: 400, Status: "400 Bad Request", Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}}, Body: io.NopCloser(strings.NewReader(refused))}
		},
	}
	w := &wire{next: &next}
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"), HTTPClient: w,
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 3})
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("t"),
		Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "job#1"}}})
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("put: %v, want the refusal of its retry", err)
	}
	ops, retried := w.takeRetried()
	if !slices.Equal(ops, []string{"PutItem"}) || !slices.Equal(retried, []string{"PutItem"}) {
		t.Errorf("counted %v, retried %v; want one PutItem, retried once (on the wire: %q)", ops, retried, w.outcomes())
	}
}

// setupWorld deploys a stack of its own; the handler's clients send
// through a wire counter, the test's own reads do not.
func setupWorld(t *testing.T) *world {
	t.Helper()
	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	cfg := srv.ConfigForTest(t)
	w := &world{ddb: dynamodb.NewFromConfig(cfg), sqs: sqs.NewFromConfig(cfg), stack: stack}
	counted := cfg.Copy()
	w.wire = &wire{next: cfg.HTTPClient}
	if w.wire.next == nil {
		w.wire.next = awshttp.NewBuildableClient()
	}
	// The wire sees each try; retries counts the SDK's, for messages.
	w.retries = &emulator.Retries{Next: w.wire.next}
	w.wire.next = w.retries
	counted.HTTPClient = w.wire
	w.read = store.New(w.ddb, stack.TableName, store.Options{})
	h, err := New(Config{Secrets: [][]byte{[]byte(localSecret)}, Pools: testPools,
		Store: store.New(dynamodb.NewFromConfig(counted), stack.TableName, store.Options{}),
		Queue: queue.New(sqs.NewFromConfig(counted), stack.QueueURL), Now: func() time.Time { return testNow }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	return w
}

func (w *world) deliver(t *testing.T, name, guid string, mod func(map[string]any)) int {
	t.Helper()
	m := payload(t, name)
	if mod != nil {
		mod(m)
	}
	resp, err := w.h.Handle(context.Background(), signedRequest("workflow_job", guid, compact(t, m)))
	if err != nil {
		t.Errorf("Handle: %v", err)
	}
	return resp.StatusCode
}

// received drains the claims queue and returns the messages' bodies, copies and all.
func (w *world) received(t *testing.T) []string {
	t.Helper()
	var out []string
	for {
		res, err := w.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &w.stack.QueueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600,
		})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(res.Messages) == 0 {
			return out
		}
		for _, m := range res.Messages {
			out = append(out, aws.ToString(m.Body))
		}
	}
}

// messages receives every message on the queue. A copy of one is the
// SDK's retry of a send the emulator had done, its answer cut on a busy
// box, when the wire saw SendMessage sent it again that many times: it is the one
// message (as the claimer takes it), and only one is returned. Every other
// copy stays, for the test to count.
func (w *world) messages(t *testing.T) []job.Message {
	t.Helper()
	bodies, copies := emulator.WithoutRetried(w.retries, w.received(t), func(b string) string { return b }, "SendMessage")
	if copies > 0 {
		t.Logf("messages: %d copied by the SDK's retries of SendMessage", copies)
	}
	var msgs []job.Message
	for _, b := range bodies {
		msg, err := queue.Decode(b)
		if err != nil {
			t.Fatalf("message %q: %v", b, err)
		}
		msgs = append(msgs, msg)
	}
	return msgs
}

// keys lists the pk of every item in the table (one table per test).
func (w *world) keys(t *testing.T) []string {
	t.Helper()
	out, err := w.ddb.Scan(context.Background(), &dynamodb.ScanInput{TableName: &w.stack.TableName, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	for _, it := range out.Items {
		pks = append(pks, it["pk"].(*ddbtypes.AttributeValueMemberS).Value)
	}
	return pks
}

// wantOne checks that the table holds job 29679449's record alone, in state.
func wantOne(t *testing.T, w *world, state job.State) job.Record {
	t.Helper()
	if keys := w.keys(t); len(keys) != 1 || keys[0] != job.Key(29679449) {
		t.Fatalf("items %v, want the record of job 29679449 alone (no dedup keys)", keys)
	}
	rec, err := w.read.Get(context.Background(), 29679449)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != state {
		t.Fatalf("record %+v, want state %s", rec, state)
	}
	return rec
}

// TestIntegrationRequestsOnTheWire: a job's deliveries, as GitHub sends
// them, cost on the wire what the flow tests count on infra/mem.
func TestIntegrationRequestsOnTheWire(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	steps := []struct {
		name, payload, guid string
		code                int
		ops                 []string
		state               job.State
	}{
		{name: "queued", payload: "queued", guid: "q1", code: 202, ops: []string{"PutItem", "SendMessage"}, state: job.Pending},
		{name: "queued redelivered", payload: "queued", guid: "q1", code: 200, ops: []string{"PutItem"}, state: job.Pending},
		{name: "queued under a new GUID", payload: "queued", guid: "q2", code: 200, ops: []string{"PutItem"}, state: job.Pending},
		{name: "in_progress", payload: "in_progress", guid: "p1", code: 202, ops: []string{"UpdateItem"}, state: job.Done},
		{name: "completed", payload: "completed", guid: "c1", code: 202, ops: []string{"UpdateItem"}, state: job.Done},
	}
	for _, st := range steps {
		if code := w.deliver(t, st.payload, st.guid, nil); code != st.code {
			t.Fatalf("%s: status %d, want %d", st.name, code, st.code)
		}
		ops := w.wire.take()
		seen := w.wire.outcomes()
		if !slices.Equal(ops, st.ops) {
			t.Errorf("%s: requests %v, want %v (on the wire: %q)", st.name, ops, st.ops, seen)
		}
		rec := wantOne(t, w, st.state)
		if st.name == "queued" {
			if rec.Version != 1 || rec.Pool != "linux-x64" || rec.ExpiresAt != testNow.Add(store.DefaultRecordTTL).Unix() {
				t.Errorf("record %+v: want version 1, pool linux-x64, expires_at creation + record TTL", rec)
			}
			if msgs := w.messages(t); len(msgs) != 1 || msgs[0] != (job.Message{JobID: 29679449, Version: 1}) {
				t.Fatalf("messages %+v, want exactly one for job 29679449 v1", msgs)
			}
		}
		if st.name == "in_progress" && (rec.RunnerName != "linux-x64-29679449" || rec.Version != 2 || rec.SweepShard != "") {
			t.Errorf("record %+v: want runner linux-x64-29679449, version 2, off the sweep index", rec)
		}
	}
	if msgs := w.messages(t); len(msgs) != 0 {
		t.Fatalf("later deliveries sent %+v, want nothing", msgs)
	}
}

// TestIntegrationConcurrentDeliveries: many deliveries of one job at once
// (GitHub's redelivery job, a manual click) race at the conditional put on
// the emulator: exactly one records and sends.
func TestIntegrationConcurrentDeliveries(t *testing.T) {
	t.Parallel()
	const n = 20
	w := setupWorld(t)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code := w.deliver(t, "queued", fmt.Sprintf("guid-%02d", i%3), nil)
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if codes[http.StatusAccepted] != 1 || codes[http.StatusOK] != n-1 {
		t.Errorf("answers %v, want one 202 and %d 200s", codes, n-1)
	}
	wantOne(t, w, job.Pending)
	if msgs := w.messages(t); len(msgs) != 1 {
		t.Fatalf("%d messages, want 1: %+v", len(msgs), msgs)
	}
}

// A job we do not serve writes nothing, whatever the action, so the
// operator's fix followed by GitHub's Redeliver (the same GUID) gets the
// job claimed.
func TestIntegrationSkipWritesNothingAndRedeliveryIsReDecided(t *testing.T) {
	t.Parallel()
	publicOK := slices.Clone(testPools)
	publicOK[0].AllowPublic = true
	tests := []struct {
		name   string
		mod    func(map[string]any)
		before func(*Config) // the misconfiguration
		fix    func(*Config)
	}{
		{
			name:   "no pool matches",
			before: func(c *Config) { c.Pools = testPools[1:] },
			fix:    func(c *Config) { c.Pools = testPools },
		},
		{
			name:   "owner not allowed",
			before: func(c *Config) { c.AllowedOwners = []string{"other-org"} },
			fix:    func(c *Config) { c.AllowedOwners = []string{"other-org", "octo-org"} },
		},
		{
			name:   "public repository refused",
			mod:    func(m map[string]any) { set(m, "repository.visibility", "public") },
			before: func(c *Config) { c.Pools = testPools },
			fix:    func(c *Config) { c.Pools = publicOK },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := setupWorld(t)
			tt.before(&w.h.cfg)
			for i := range 2 { // a redelivery before the fix is skipped again
				if code := w.deliver(t, "queued", guid, tt.mod); code != http.StatusOK {
					t.Fatalf("skipped delivery %d: status %d, want 200", i, code)
				}
			}
			if code := w.deliver(t, "waiting", "w-"+guid, tt.mod); code != http.StatusOK {
				t.Fatalf("waiting: status %d, want 200", code)
			}
			if ops := w.wire.take(); len(ops) != 0 {
				t.Fatalf("skipped deliveries sent %v, want no request", ops)
			}
			if keys := w.keys(t); len(keys) != 0 {
				t.Fatalf("a skipped delivery wrote %v, want nothing", keys)
			}
			if msgs := w.messages(t); len(msgs) != 0 {
				t.Fatalf("a skipped delivery sent %+v", msgs)
			}
			tt.fix(&w.h.cfg)
			if code := w.deliver(t, "queued", guid, tt.mod); code != http.StatusAccepted {
				t.Fatalf("redelivery after the fix: status %d, want 202", code)
			}
			if rec := wantOne(t, w, job.Pending); rec.Pool != "linux-x64" {
				t.Errorf("record pool %q, want linux-x64", rec.Pool)
			}
			if msgs := w.messages(t); len(msgs) != 1 || msgs[0].JobID != 29679449 {
				t.Fatalf("messages %+v, want one for job 29679449", msgs)
			}
		})
	}
}

// TestIntegrationRunnerTaken: on the emulator, an in_progress for job B
// naming the runner we made for job A (claimed) marks B done and sends A
// back for a new attempt: on the wire, B's update, A's read, A's
// conditional take-back and A's message.
func TestIntegrationRunnerTaken(t *testing.T) {
	t.Parallel()
	w := setupWorld(t)
	ctx := context.Background()
	const a = int64(29679400)
	if _, err := w.read.CreateJob(ctx, job.Record{JobID: a, Repo: "octo-org/octo-repo", InstallationID: 42, Pool: "linux-x64",
		Labels: []string{"self-hosted", "linux", "x64"}}, testNow.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	l, _, err := w.read.Acquire(ctx, a, 1, "claimer-1", testNow.Add(-50*time.Minute), testNow.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	taken := job.RunnerName("linux-x64", a)
	if err := w.read.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: taken}, testNow.Add(-59*time.Minute)); err != nil {
		t.Fatal(err)
	}
	w.wire.take()

	if code := w.deliver(t, "in_progress", "p-taken", func(m map[string]any) { set(m, "workflow_job.runner_name", taken) }); code != 202 {
		t.Fatalf("status %d, want 202", code)
	}
	if ops, want := w.wire.take(), []string{"UpdateItem", "GetItem", "UpdateItem", "SendMessage"}; !slices.Equal(ops, want) {
		t.Errorf("requests %v, want %v", ops, want)
	}
	got, err := w.read.Get(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != job.Queued || got.Version != l.Version+1 || got.Replacements != 1 || got.SweepShard == "" {
		t.Errorf("A: %+v, want queued at v%d, one replacement, in the sweep index", got, l.Version+1)
	}
	if msgs := w.messages(t); len(msgs) != 1 || msgs[0] != (job.Message{JobID: a, Version: got.Version, Attempt: 1}) {
		t.Errorf("messages %+v, want one for A at v%d", msgs, got.Version)
	}
	if b, err := w.read.Get(ctx, 29679449); err != nil || b.State != job.Done || b.RunnerName != taken {
		t.Errorf("B: %+v, %v; want done by %s", b, err, taken)
	}
}

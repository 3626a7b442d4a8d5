package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/store"
)

// localSecret signs the events/ fixtures; the README names it.
const localSecret = "ghclaim-local-secret"

// testNow is the injected clock of every unit test.
var testNow = time.Date(2026, 11, 30, 9, 0, 1, 0, time.UTC)

var testPools = []pool.Pool{{
	Name: "linux-x64", Labels: []string{"self-hosted", "linux", "x64"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
	Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "http://127.0.0.1:1/000000000000/dispatch"},
}, {
	Name: "public-arm", Labels: []string{"self-hosted", "linux", "arm64", "public"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
	AllowPublic: true,
	Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "http://127.0.0.1:1/000000000000/dispatch"},
}}

// payload returns the named testdata/payloads document as a generic map, so a
// test can break one field of a real GitHub shape.
func payload(t testing.TB, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "payloads", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// compact encodes v the way GitHub sends it (no indentation).
func compact(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// set puts v at a dotted path of m ("workflow_job.id"); a nil v with
// remove deletes the key instead.
func set(m map[string]any, path string, v any) map[string]any {
	parts := strings.Split(path, ".")
	cur := m
	for _, p := range parts[:len(parts)-1] {
		cur = cur[p].(map[string]any)
	}
	cur[parts[len(parts)-1]] = v
	return m
}

func del(m map[string]any, path string) map[string]any {
	parts := strings.Split(path, ".")
	cur := m
	for _, p := range parts[:len(parts)-1] {
		cur = cur[p].(map[string]any)
	}
	delete(cur, parts[len(parts)-1])
	return m
}

// signedRequest is a Function URL request as GitHub's delivery arrives:
// lower-case headers, signed with localSecret.
func signedRequest(event, guid string, body []byte) events.LambdaFunctionURLRequest {
	return events.LambdaFunctionURLRequest{
		Version: "2.0",
		RawPath: "/",
		Headers: map[string]string{
			"content-type":        "application/json",
			"user-agent":          "GitHub-Hookshot/6b02022",
			"x-github-event":      event,
			"x-github-delivery":   guid,
			"x-hub-signature-256": SignatureValue(body, []byte(localSecret)),
		},
		RequestContext: events.LambdaFunctionURLRequestContext{
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/"},
		},
		Body: string(body),
	}
}

// fakeStore records every call; errors and answers are programmed per method.
type fakeStore struct {
	mu sync.Mutex

	seen      bool
	seenErr   error
	putErr    error
	createErr error
	queuedErr error
	doneErr   error
	donePrev  job.State

	calls      []string
	deliveries []store.Delivery
	created    []job.Record
	queued     []int64
	done       []store.Done
}

func (f *fakeStore) record(c string) {
	f.calls = append(f.calls, c)
}

func (f *fakeStore) DeliverySeen(_ context.Context, guid string, _ time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("DeliverySeen")
	return f.seen, f.seenErr
}

func (f *fakeStore) PutDelivery(_ context.Context, d store.Delivery, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("PutDelivery")
	if f.putErr != nil {
		return f.putErr
	}
	f.deliveries = append(f.deliveries, d)
	return nil
}

func (f *fakeStore) CreateJob(_ context.Context, r job.Record, now time.Time) (job.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("CreateJob")
	if f.createErr != nil {
		return job.Record{}, f.createErr
	}
	r.State, r.Version, r.CreatedAt = job.Pending, 1, job.Millis(now)
	f.created = append(f.created, r)
	return r, nil
}

func (f *fakeStore) MarkQueued(_ context.Context, id, version int64, due, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(fmt.Sprintf("MarkQueued(%d,v%d,due=%s)", id, version, due.Format(time.RFC3339)))
	if f.queuedErr != nil {
		return f.queuedErr
	}
	f.queued = append(f.queued, id)
	return nil
}

func (f *fakeStore) MarkDone(_ context.Context, d store.Done, now time.Time) (job.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("MarkDone")
	f.done = append(f.done, d)
	if f.doneErr != nil {
		return "", f.doneErr
	}
	return f.donePrev, nil
}

func (f *fakeStore) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// writes are the calls that change the table.
func (f *fakeStore) writes() []string {
	var w []string
	for _, c := range f.Calls() {
		if c != "DeliverySeen" {
			w = append(w, c)
		}
	}
	return w
}

type fakeQueue struct {
	mu   sync.Mutex
	err  error
	sent []job.Message
	hits int
}

func (q *fakeQueue) Send(_ context.Context, m job.Message, delay time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.hits++
	if q.err != nil {
		return q.err
	}
	if delay != 0 {
		return fmt.Errorf("fake queue: webhook sent with delay %s, want 0", delay)
	}
	q.sent = append(q.sent, m)
	return nil
}

type fixture struct {
	h    *Handler
	st   *fakeStore
	q    *fakeQueue
	logs *bytes.Buffer
}

// setup builds a handler over fakes; mod adjusts its config.
func setup(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	cfg := Config{Secrets: [][]byte{[]byte(localSecret)}, Pools: testPools, MaxBodyBytes: 64 << 10}
	if mod != nil {
		mod(&cfg)
	}
	f := &fixture{st: &fakeStore{}, q: &fakeQueue{}, logs: &bytes.Buffer{}}
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: f.logs}, nil))
	h, err := New(cfg, f.st, f.q, func() time.Time { return testNow }, log)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

func (f *fixture) do(t testing.TB, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, Reply) {
	t.Helper()
	resp, err := f.h.Handle(context.Background(), req)
	if err != nil {
		t.Fatalf("Handle returned an error (Lambda would answer 502): %v", err)
	}
	var r Reply
	if err := json.Unmarshal([]byte(resp.Body), &r); err != nil {
		t.Fatalf("reply body %q is not JSON: %v", resp.Body, err)
	}
	if ct := resp.Headers["content-type"]; ct != "application/json" {
		t.Errorf("content-type = %q, want application/json", ct)
	}
	return resp, r
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

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
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
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
}, {
	// An organisation's pool first, a repository-scoped one with the same
	// labels after it (user accounts have no organisation runners).
	Name: "mac-org", Labels: []string{"self-hosted", "macos"}, Scope: pool.ScopeOrg, RunnerGroupID: 1,
	Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "http://127.0.0.1:1/000000000000/dispatch"},
}, {
	Name: "mac-repo", Labels: []string{"self-hosted", "macos"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
	Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "http://127.0.0.1:1/000000000000/dispatch"},
}, {
	Name: "org-only", Labels: []string{"self-hosted", "orgonly"}, Scope: pool.ScopeOrg, RunnerGroupID: 1,
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

// flakyStore is infra/mem's job store (as strict as DynamoDB, held to the
// same contract) with failures a test can inject per method. A failed call
// is a request too: requests counts it.
type flakyStore struct {
	*mem.Store

	mu      sync.Mutex
	fail    map[string]error
	failed  int
	reports []job.Report
}

func (f *flakyStore) failure(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[method]; err != nil {
		f.failed++
		return err
	}
	return nil
}

func (f *flakyStore) CreateJob(ctx context.Context, r job.Record, now time.Time) (job.Record, error) {
	if err := f.failure("CreateJob"); err != nil {
		return job.Record{}, err
	}
	return f.Store.CreateJob(ctx, r, now)
}

func (f *flakyStore) MarkDone(ctx context.Context, d job.Report, now time.Time) (job.State, error) {
	f.mu.Lock()
	f.reports = append(f.reports, d)
	f.mu.Unlock()
	if err := f.failure("MarkDone"); err != nil {
		return "", err
	}
	return f.Store.MarkDone(ctx, d, now)
}

func (f *flakyStore) Get(ctx context.Context, id int64) (job.Record, error) {
	if err := f.failure("Get"); err != nil {
		return job.Record{}, err
	}
	return f.Store.Get(ctx, id)
}

func (f *flakyStore) Recheck(ctx context.Context, read job.Record, due time.Time, check job.Check, now time.Time) (job.Record, error) {
	if err := f.failure("Recheck"); err != nil {
		return job.Record{}, err
	}
	return f.Store.Recheck(ctx, read, due, check, now)
}

// requests is every store request the handler made (every method of its
// port), failed ones included.
func (f *flakyStore) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Store.Calls("CreateJob") + f.Store.Calls("MarkDone") + f.Store.Calls("Get") + f.Store.Calls("Swap") + f.Store.Calls("Recheck") + f.failed
}

type fixture struct {
	h    *Handler
	st   *flakyStore
	q    *mem.Queue
	logs *bytes.Buffer
	// sends counts the queue's Send calls, failed ones included; sendErr
	// fails them.
	sends   atomic.Int32
	sendErr error
}

// requests is every AWS request the deliveries so far cost: the store's
// and the queue's.
func (f *fixture) requests() int { return f.st.requests() + int(f.sends.Load()) }

// setup builds a handler over infra/mem's store and queue on the clock
// testNow; mod adjusts its config.
func setup(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	cfg := Config{Secrets: [][]byte{[]byte(localSecret)}, Pools: testPools, MaxBodyBytes: 64 << 10}
	if mod != nil {
		mod(&cfg)
	}
	now := func() time.Time { return testNow }
	f := &fixture{st: &flakyStore{Store: mem.NewStore(job.Timing{}), fail: map[string]error{}}, q: mem.NewQueue(now), logs: &bytes.Buffer{}}
	f.q.Fail = func(method string) error {
		if method != "Send" {
			return fmt.Errorf("the webhook called %s; it only sends", method)
		}
		f.sends.Add(1)
		return f.sendErr
	}
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: f.logs}, nil))
	cfg.Store, cfg.Queue, cfg.Now, cfg.Logger = f.st, f.q, now, log
	h, err := New(cfg)
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

package webhook

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
)

const guid = "72d3162e-cc78-11e3-81ab-4c9367dc0958"

func TestHandleRefusesWithoutWriting(t *testing.T) {
	t.Parallel()
	body := compact(t, payload(t, "queued"))
	sig := SignatureValue(body, []byte(localSecret))
	digest := strings.TrimPrefix(sig, "sha256=")
	withHeaders := func(mod func(h map[string]string)) events.LambdaFunctionURLRequest {
		r := signedRequest("workflow_job", guid, body)
		mod(r.Headers)
		return r
	}
	tests := []struct {
		name string
		req  events.LambdaFunctionURLRequest
		code int
		text string
	}{
		{name: "GET", req: func() events.LambdaFunctionURLRequest {
			r := signedRequest("workflow_job", guid, body)
			r.RequestContext.HTTP.Method = "GET"
			return r
		}(), code: http.StatusMethodNotAllowed, text: "method GET not allowed"},
		{name: "no signature", req: withHeaders(func(h map[string]string) { delete(h, "x-hub-signature-256") }), code: 401, text: "missing X-Hub-Signature-256"},
		{name: "sha1 header only", req: withHeaders(func(h map[string]string) {
			delete(h, "x-hub-signature-256")
			h["x-hub-signature"] = "sha1=" + strings.Repeat("ab", 20)
		}), code: 401, text: "only a sha1 signature"},
		{name: "sha1 value in the sha256 header", req: withHeaders(func(h map[string]string) { h["x-hub-signature-256"] = "sha1=" + digest[:40] }), code: 401, text: "only a sha1 signature"},
		{name: "wrong prefix", req: withHeaders(func(h map[string]string) { h["x-hub-signature-256"] = "md5=" + digest }), code: 401, text: "malformed"},
		{name: "odd-length digest", req: withHeaders(func(h map[string]string) { h["x-hub-signature-256"] = sig[:len(sig)-1] }), code: 401, text: "malformed"},
		{name: "non-hex digest", req: withHeaders(func(h map[string]string) { h["x-hub-signature-256"] = "sha256=" + strings.Repeat("g", 64) }), code: 401, text: "malformed"},
		{name: "signed with another secret", req: withHeaders(func(h map[string]string) {
			h["x-hub-signature-256"] = SignatureValue(body, []byte("someone-else"))
		}), code: 401, text: "does not match"},
		{name: "tampered body", req: func() events.LambdaFunctionURLRequest {
			r := signedRequest("workflow_job", guid, body)
			r.Body = strings.Replace(r.Body, "29679449", "29679450", 1)
			return r
		}(), code: 401, text: "does not match"},
		{name: "empty body unsigned", req: func() events.LambdaFunctionURLRequest {
			r := signedRequest("workflow_job", guid, nil)
			delete(r.Headers, "x-hub-signature-256")
			return r
		}(), code: 401, text: "missing"},
		{name: "body over the cap", req: signedRequest("workflow_job", guid, append(body, make([]byte, 64<<10)...)), code: http.StatusRequestEntityTooLarge, text: "65536-byte cap"},
		{name: "base64 body over the cap", req: func() events.LambdaFunctionURLRequest {
			big := append(append([]byte{}, body...), make([]byte, 64<<10)...)
			r := signedRequest("workflow_job", guid, big)
			r.Body, r.IsBase64Encoded = base64.StdEncoding.EncodeToString(big), true
			return r
		}(), code: http.StatusRequestEntityTooLarge, text: "cap"},
		{name: "invalid base64", req: func() events.LambdaFunctionURLRequest {
			r := signedRequest("workflow_job", guid, body)
			r.Body, r.IsBase64Encoded = "not*base64!", true
			return r
		}(), code: 400, text: "not valid base64"},
		{name: "base64 flag on a plain body", req: func() events.LambdaFunctionURLRequest {
			r := signedRequest("workflow_job", guid, body)
			r.IsBase64Encoded = true
			return r
		}(), code: 400, text: "not valid base64"},
		{name: "no event header", req: withHeaders(func(h map[string]string) { delete(h, "x-github-event") }), code: 400, text: "X-GitHub-Event"},
		{name: "no delivery header", req: withHeaders(func(h map[string]string) { delete(h, "x-github-delivery") }), code: 400, text: "X-GitHub-Delivery"},
	}
	for _, bp := range badPayloads(t) {
		if errors.Is(mustFail(Parse(bp.body)), ErrUnknownAction) {
			continue // answered 2xx: TestHandleUnknownActionIsNotAFailedDelivery
		}
		tests = append(tests, struct {
			name string
			req  events.LambdaFunctionURLRequest
			code int
			text string
		}{name: "payload " + bp.name, req: signedRequest("workflow_job", guid, bp.body), code: 400, text: bp.text})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			resp, r := f.do(t, tt.req)
			if resp.StatusCode != tt.code {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tt.code, resp.Body)
			}
			if r.Status != StatusError || !strings.Contains(r.Message, tt.text) {
				t.Errorf("reply = %+v, want status error and a message saying %q", r, tt.text)
			}
			if n := f.requests(); n != 0 {
				t.Errorf("%d requests, want none", n)
			}
			if tt.code == http.StatusMethodNotAllowed && resp.Headers["allow"] != "POST" {
				t.Errorf("allow header = %q, want POST", resp.Headers["allow"])
			}
		})
	}
}

func TestHandleHeaderNamesInAnyCase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		canon func(string) string
	}{
		{name: "lower", canon: strings.ToLower},
		{name: "canonical", canon: func(s string) string { return http.CanonicalHeaderKey(s) }},
		{name: "GitHub's spelling", canon: func(s string) string {
			return map[string]string{"x-github-event": "X-GitHub-Event", "x-github-delivery": "X-GitHub-Delivery", "x-hub-signature-256": "X-Hub-Signature-256"}[s]
		}},
		{name: "upper", canon: strings.ToUpper},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			req := signedRequest("workflow_job", guid, compact(t, payload(t, "queued")))
			h := map[string]string{}
			for k, v := range req.Headers {
				if c := tt.canon(k); c != "" {
					k = c
				}
				h[k] = v
			}
			req.Headers = h
			resp, _ := f.do(t, req)
			if resp.StatusCode != http.StatusAccepted || len(f.q.Sent()) != 1 {
				t.Fatalf("status %d, %d sends; want 202 and 1 send (%s)", resp.StatusCode, len(f.q.Sent()), resp.Body)
			}
		})
	}
}

func TestHandlePingAndOtherEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		event  string
		body   []byte
		code   int
		status string
	}{
		{name: "ping", event: "ping", body: compact(t, payload(t, "ping")), code: 200, status: StatusOK},
		{name: "push is ignored", event: "push", body: []byte(`{"ref":"refs/heads/main"}`), code: 202, status: StatusIgnored},
		{name: "workflow_run is ignored", event: "workflow_run", body: []byte(`{"action":"requested"}`), code: 202, status: StatusIgnored},
		{name: "other events are not parsed", event: "installation", body: []byte(`not json at all`), code: 202, status: StatusIgnored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			resp, r := f.do(t, signedRequest(tt.event, guid, tt.body))
			if resp.StatusCode != tt.code || r.Status != tt.status {
				t.Fatalf("got %d %+v, want %d %s", resp.StatusCode, r, tt.code, tt.status)
			}
			if n := f.requests(); n != 0 {
				t.Fatalf("%d requests, want none", n)
			}
		})
	}
}

// recorded is the record the queued fixture creates at testNow.
var recorded = job.Record{
	JobID: 29679449, RunID: 10416386539, Repo: "octo-org/octo-repo", InstallationID: 42,
	Labels: []string{"self-hosted", "linux", "x64"}, Pool: "linux-x64",
	State: job.Pending, Version: 1, CreatedAt: job.Millis(testNow), UpdatedAt: job.Millis(testNow), DueAt: job.Millis(testNow),
	ExpiresAt: testNow.Add(job.DefaultRecordTTL).Unix(), SweepShard: job.Shard(29679449, job.DefaultShards),
	SweepAt: job.Millis(testNow.Add(job.DefaultPendingGrace)),
	History: []job.Transition{{At: job.Millis(testNow), To: job.Pending, Actor: job.ActorWebhook}},
}

func TestHandleQueued(t *testing.T) {
	t.Parallel()
	dbErr := errors.New("dynamodb: ProvisionedThroughputExceededException: secret-internal-detail")
	tests := []struct {
		name     string
		prepare  func(f *fixture)
		body     func(t testing.TB) []byte
		code     int
		status   string
		text     string
		requests int  // AWS requests of the delivery, failed ones included
		sent     bool // the claim message went out
		pending  bool // the record is the one created, still pending
		logged   string
		// public and userOwned: the repository as the created record
		// describes it, for the claimer's check of the recorded pool.
		public, userOwned bool
	}{
		{
			name: "matching job: the record's conditional put, then the message",
			code: 202, status: StatusAccepted, text: "pool linux-x64",
			requests: 2, sent: true, pending: true, logged: "enqueued",
		},
		{
			name: "labels match case-insensitively",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{"Self-Hosted", "LINUX"}))
			},
			code: 202, status: StatusAccepted, requests: 2, sent: true, logged: "enqueued",
		},
		{
			name:    "job already recorded (a redelivery, a new GUID): one refused put, no second message",
			prepare: func(f *fixture) { f.st.Put(recorded) },
			code:    200, status: StatusDuplicate, text: "already recorded",
			requests: 1, pending: true, logged: "duplicate_job",
		},
		{
			name: "in_progress got here first: the done record refuses the late queued",
			prepare: func(f *fixture) {
				f.st.Put(job.Record{JobID: 29679449, State: job.Done, Version: 1, ExpiresAt: testNow.Add(time.Hour).Unix()})
			},
			code: 200, status: StatusDuplicate, requests: 1, logged: "duplicate_job",
		},
		{
			name: "a record past its TTL counts as absent: the job is recorded anew",
			prepare: func(f *fixture) {
				f.st.Put(job.Record{JobID: 29679449, State: job.Done, Version: 4, ExpiresAt: testNow.Add(-time.Second).Unix()})
			},
			code: 202, status: StatusAccepted, requests: 2, sent: true, pending: true, logged: "enqueued",
		},
		{
			name: "no pool matches: nothing touched",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{"ubuntu-latest"}))
			},
			code: 200, status: StatusIgnored, text: "no pool matches labels [ubuntu-latest]", logged: "skip",
		},
		{
			name: "no labels: nothing touched",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{}))
			},
			code: 200, status: StatusIgnored, text: "no pool matches", logged: "skip",
		},
		{
			name: "public repo refused by a private pool",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "repository.visibility", "public"))
			},
			code: 200, status: StatusIgnored, text: "is public and pool linux-x64 does not allow", logged: "skip",
		},
		{
			name: "public repo accepted by a pool that allows it",
			body: func(t testing.TB) []byte {
				m := set(payload(t, "queued"), "repository.visibility", "public")
				return compact(t, set(m, "workflow_job.labels", []any{"self-hosted", "arm64", "public"}))
			},
			code: 202, status: StatusAccepted, text: "pool public-arm", requests: 2, sent: true, logged: "enqueued", public: true,
		},
		{
			name: "an organisation's repository: the organisation's pool",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{"self-hosted", "macos"}))
			},
			code: 202, status: StatusAccepted, text: "pool mac-org", requests: 2, sent: true, logged: "enqueued",
		},
		{
			name: "a user's repository: past the organisation's pool to the repository-scoped one",
			body: func(t testing.TB) []byte {
				m := set(payload(t, "queued"), "workflow_job.labels", []any{"self-hosted", "macos"})
				return compact(t, set(m, "repository.owner.type", "User"))
			},
			code: 202, status: StatusAccepted, text: "pool mac-repo", requests: 2, sent: true, logged: "enqueued", userOwned: true,
		},
		{
			name: "a user's repository and only an organisation's pool: nothing touched",
			body: func(t testing.TB) []byte {
				m := set(payload(t, "queued"), "workflow_job.labels", []any{"self-hosted", "orgonly"})
				return compact(t, set(m, "repository.owner.type", "User"))
			},
			code: 200, status: StatusIgnored, text: "pool org-only registers runners at the organisation, and octo-org is a user account", logged: "skip",
		},
		{
			name:    "owner not allowed",
			prepare: func(f *fixture) { f.h.cfg.AllowedOwners = []string{"other-org"} },
			code:    200, status: StatusIgnored, text: "owner octo-org is not allowed", logged: "skip",
		},
		{
			name:    "owner allowed case-insensitively",
			prepare: func(f *fixture) { f.h.cfg.AllowedOwners = []string{"other-org", "OCTO-ORG"} },
			code:    202, status: StatusAccepted, requests: 2, sent: true, logged: "enqueued",
		},
		{
			name: "skip even when the job is recorded: re-decided, nothing touched",
			prepare: func(f *fixture) {
				f.st.Put(recorded)
				f.st.fail["CreateJob"] = dbErr
			},
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{"gpu"}))
			},
			code: 200, status: StatusIgnored, text: "no pool matches", logged: "skip",
		},
		{
			name:    "create fails: 500, nothing sent",
			prepare: func(f *fixture) { f.st.fail["CreateJob"] = dbErr },
			code:    500, status: StatusError, requests: 1, logged: "create_failed",
		},
		{
			name:    "send fails: the record stays pending for the reclaimer, still 202",
			prepare: func(f *fixture) { f.sendErr = errors.New("sqs: AWS.SimpleQueueService.NonExistentQueue") },
			code:    202, status: StatusAccepted, requests: 2, pending: true, logged: "pending_send_failed",
		},
		{
			name: "waiting: nothing touched",
			body: func(t testing.TB) []byte { return compact(t, payload(t, "waiting")) },
			code: 200, status: StatusIgnored, text: "waiting", logged: "skip_waiting",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			if tt.prepare != nil {
				tt.prepare(f)
			}
			body := compact(t, payload(t, "queued"))
			if tt.body != nil {
				body = tt.body(t)
			}
			resp, r := f.do(t, signedRequest("workflow_job", guid, body))
			if resp.StatusCode != tt.code || r.Status != tt.status || !strings.Contains(r.Message, tt.text) {
				t.Fatalf("got %d %+v, want %d %s saying %q", resp.StatusCode, r, tt.code, tt.status, tt.text)
			}
			if got := f.requests(); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
			sent := f.q.Sent()
			if !tt.sent && len(sent) != 0 {
				t.Errorf("sent %+v, want nothing", sent)
			}
			if tt.sent {
				want := job.Message{JobID: 29679449, Version: 1, Attempt: 0}
				if len(sent) != 1 || sent[0].Msg != want || sent[0].Delay != 0 {
					t.Errorf("sent %+v, want one %+v without delay", sent, want)
				}
				if got := f.st.Records()[29679449]; got.Public != tt.public || got.UserOwned != tt.userOwned {
					t.Errorf("record says public %v, user-owned %v; want %v, %v", got.Public, got.UserOwned, tt.public, tt.userOwned)
				}
			}
			if tt.pending {
				got := f.st.Records()[29679449]
				if want := recorded; !reflect.DeepEqual(got, want) {
					t.Errorf("record:\n got %+v\nwant %+v", got, want)
				}
			}
			logs := f.logs.String()
			if !strings.Contains(logs, `"outcome":"`+tt.logged+`"`) {
				t.Errorf("logs do not carry outcome %q:\n%s", tt.logged, logs)
			}
			if tt.code >= 500 && strings.Contains(resp.Body, "secret-internal-detail") {
				t.Errorf("5xx body %s leaks internal error text", resp.Body)
			}
		})
	}
}

// TestRequestsPerDelivery is the cost of each kind of delivery, as issue 11
// sets it: a served queued job 2 requests (put, send), its redelivery 1
// (the refused put), in_progress and completed of a served job 1 (the
// upsert), and anything for a job no pool serves (here a GitHub-hosted
// job's) 0. The deliveries run in order on one store, as GitHub sends
// them.
func TestRequestsPerDelivery(t *testing.T) {
	t.Parallel()
	served := func(t testing.TB, action string) []byte { return compact(t, payload(t, action)) }
	unserved := func(t testing.TB, action string) []byte { // a GitHub-hosted job
		m := set(payload(t, action), "workflow_job.labels", []any{"ubuntu-latest"})
		if action != "queued" {
			set(m, "workflow_job.runner_name", "GitHub Actions 2")
		}
		return compact(t, m)
	}
	steps := []struct {
		name     string
		guid     string
		body     func(t testing.TB, action string) []byte
		action   string
		code     int
		requests int
		state    job.State // the served job's record after the step
	}{
		{name: "queued", guid: "g-1", body: served, action: "queued", code: 202, requests: 2, state: job.Pending},
		{name: "queued redelivered, same GUID", guid: "g-1", body: served, action: "queued", code: 200, requests: 1, state: job.Pending},
		{name: "queued again, new GUID", guid: "g-2", body: served, action: "queued", code: 200, requests: 1, state: job.Pending},
		{name: "in_progress", guid: "g-3", body: served, action: "in_progress", code: 202, requests: 1, state: job.Done},
		{name: "completed", guid: "g-4", body: served, action: "completed", code: 202, requests: 1, state: job.Done},
		{name: "completed redelivered", guid: "g-4", body: served, action: "completed", code: 202, requests: 1, state: job.Done},
		{name: "queued of a job no pool serves", guid: "h-1", body: unserved, action: "queued", code: 200, requests: 0, state: job.Done},
		{name: "in_progress of a job no pool serves", guid: "h-2", body: unserved, action: "in_progress", code: 200, requests: 0, state: job.Done},
		{name: "completed of a job no pool serves", guid: "h-3", body: unserved, action: "completed", code: 200, requests: 0, state: job.Done},
	}
	f := setup(t, nil)
	for _, st := range steps {
		before := f.requests()
		resp, _ := f.do(t, signedRequest("workflow_job", st.guid, st.body(t, st.action)))
		if resp.StatusCode != st.code {
			t.Fatalf("%s: status %d (%s), want %d", st.name, resp.StatusCode, resp.Body, st.code)
		}
		if got := f.requests() - before; got != st.requests {
			t.Errorf("%s: %d requests, want %d", st.name, got, st.requests)
		}
		if got := f.st.Records()[29679449].State; got != st.state {
			t.Errorf("%s: record %s, want %s", st.name, got, st.state)
		}
	}
	if n := len(f.q.Sent()); n != 1 {
		t.Errorf("%d claim messages for one job, want 1", n)
	}
}

func TestHandleInProgressAndCompleted(t *testing.T) {
	t.Parallel()
	dbErr := errors.New("dynamodb: InternalServerError")
	queued := func(f *fixture) {
		f.st.Put(job.Record{JobID: 29679449, State: job.Queued, Version: 1, Pool: "linux-x64"})
	}
	tests := []struct {
		name           string
		payload        string
		noInstallation bool   // the payload has no installation key
		nullLabel      bool   // the payload's labels hold a null (GitHub's schema allows it in completed)
		runner         string // the runner the payload names, when not the job's own
		prepare        func(f *fixture)
		code           int
		status         string
		requests       int
		state          job.State // the record after the delivery; "" for none
		logged         string
	}{
		{name: "in_progress moves the record to done", payload: "in_progress", prepare: queued,
			code: 202, status: StatusAccepted, requests: 1, state: job.Done, logged: "done"},
		{name: "in_progress on the runner of another job of ours, unknown to us: done, the other job looked up", payload: "in_progress", prepare: queued,
			runner: "linux-x64-29679400", code: 202, status: StatusAccepted, requests: 2, state: job.Done, logged: OutcomeRunnerTakenStale},
		{name: "in_progress before queued creates it done, with its pool", payload: "in_progress",
			code: 202, status: StatusAccepted, requests: 1, state: job.Done, logged: "done_created"},
		{name: "completed after claimed: done, out of the liveness check", payload: "completed",
			prepare: func(f *fixture) { f.st.Put(job.Record{JobID: 29679449, State: job.Claimed, Version: 2}) },
			code:    202, status: StatusAccepted, requests: 1, state: job.Done, logged: "done"},
		{name: "completed after failed: terminal is fine", payload: "completed",
			prepare: func(f *fixture) { f.st.Put(job.Record{JobID: 29679449, State: job.Failed, Version: 3}) },
			code:    202, status: StatusAccepted, requests: 1, state: job.Failed, logged: "already_terminal"},
		{name: "completed with a null label after claimed: done", payload: "completed", nullLabel: true,
			prepare: func(f *fixture) { f.st.Put(job.Record{JobID: 29679449, State: job.Claimed, Version: 2}) },
			code:    202, status: StatusAccepted, requests: 1, state: job.Done, logged: "done"},
		{name: "completed with a null label before queued creates it done", payload: "completed", nullLabel: true,
			code: 202, status: StatusAccepted, requests: 1, state: job.Done, logged: "done_created"},
		{name: "store fails: 500", payload: "completed", prepare: func(f *fixture) { f.st.fail["MarkDone"] = dbErr },
			code: 500, status: StatusError, requests: 1, logged: "mark_done_failed"},
		{name: "a job no pool serves: nothing touched", payload: "in_progress", prepare: func(f *fixture) { f.h.cfg.Pools = testPools[1:] },
			code: 200, status: StatusIgnored, logged: "skip"},
		{name: "an owner not allowed: nothing touched", payload: "completed", prepare: func(f *fixture) { f.h.cfg.AllowedOwners = []string{"other-org"} },
			code: 200, status: StatusIgnored, logged: "skip"},
		{name: "in_progress without installation is applied", payload: "in_progress", noInstallation: true, prepare: queued,
			code: 202, status: StatusAccepted, requests: 1, state: job.Done, logged: "done"},
		{name: "completed without installation is applied", payload: "completed", noInstallation: true,
			code: 202, status: StatusAccepted, requests: 1, state: job.Done, logged: "done_created"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			if tt.prepare != nil {
				tt.prepare(f)
			}
			m, inst := payload(t, tt.payload), int64(42)
			if tt.noInstallation {
				del(m, "installation")
				inst = 0
			}
			if tt.nullLabel {
				set(m, "workflow_job.labels", []any{"self-hosted", "linux", nil, "x64"})
			}
			runner := "linux-x64-29679449"
			if tt.runner != "" {
				runner = tt.runner
				set(m, "workflow_job.runner_name", runner)
			}
			resp, r := f.do(t, signedRequest("workflow_job", guid, compact(t, m)))
			if resp.StatusCode != tt.code || r.Status != tt.status {
				t.Fatalf("got %d %+v, want %d %s", resp.StatusCode, r, tt.code, tt.status)
			}
			if got := f.requests(); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
			if n := len(f.q.Sent()); n != 0 {
				t.Errorf("%d sends, want none", n)
			}
			rec, found := f.st.Records()[29679449]
			if got := rec.State; got != tt.state {
				t.Errorf("record state %q (found %v), want %q", got, found, tt.state)
			}
			if tt.requests >= 1 {
				want := job.Report{JobID: 29679449, RunID: 10416386539, Repo: "octo-org/octo-repo", InstallationID: inst,
					Labels: []string{"self-hosted", "linux", "x64"}, Pool: "linux-x64", RunnerName: runner}
				if len(f.st.reports) != 1 || !reflect.DeepEqual(f.st.reports[0], want) {
					t.Errorf("MarkDone with %+v, want %+v", f.st.reports, want)
				}
			}
			if tt.logged == "done_created" && (rec.Pool != "linux-x64" || rec.RunnerName != "linux-x64-29679449" || rec.Repo != "octo-org/octo-repo") {
				t.Errorf("created done record %+v lacks the job's pool, runner or repo", rec)
			}
			if !strings.Contains(f.logs.String(), `"outcome":"`+tt.logged+`"`) {
				t.Errorf("logs do not carry outcome %q:\n%s", tt.logged, f.logs)
			}
		})
	}
}

func TestHandleBase64Body(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	body := compact(t, payload(t, "queued"))
	req := signedRequest("workflow_job", guid, body)
	req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	resp, r := f.do(t, req)
	if resp.StatusCode != http.StatusAccepted || r.Status != StatusAccepted || len(f.q.Sent()) != 1 {
		t.Fatalf("got %d %+v and %d sends, want 202 accepted and 1 send", resp.StatusCode, r, len(f.q.Sent()))
	}
}

func TestHandleRotatedSecrets(t *testing.T) {
	t.Parallel()
	body := compact(t, payload(t, "ping"))
	for _, signer := range []string{"new-secret", localSecret} {
		t.Run(signer, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *Config) { c.Secrets = [][]byte{[]byte("new-secret"), []byte(localSecret)} })
			req := signedRequest("ping", guid, body)
			req.Headers["x-hub-signature-256"] = SignatureValue(body, []byte(signer))
			if resp, _ := f.do(t, req); resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200 (%s)", resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestHandleLogs: one line per decision with the ids, never the secret or the body.
func TestHandleLogs(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	m := set(payload(t, "queued"), "workflow_job.head_sha", "body-marker-0123456789")
	f.do(t, signedRequest("workflow_job", guid, compact(t, m)))
	bad := signedRequest("workflow_job", "bad-guid", compact(t, m))
	bad.Headers["x-hub-signature-256"] = SignatureValue([]byte("x"), []byte(localSecret))
	f.do(t, bad)
	logs := strings.TrimSpace(f.logs.String())
	for _, leak := range []string{localSecret, "body-marker-0123456789"} {
		if strings.Contains(logs, leak) {
			t.Fatalf("logs contain %q:\n%s", leak, logs)
		}
	}
	lines := strings.Split(logs, "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2 (one per decision):\n%s", len(lines), logs)
	}
	for _, want := range []string{`"delivery_id":"` + guid + `"`, `"job_id":29679449`, `"action":"queued"`, `"outcome":"enqueued"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("decision line %s lacks %s", lines[0], want)
		}
	}
	if !strings.Contains(lines[1], `"outcome":"bad_signature"`) || !strings.Contains(lines[1], `"delivery_id":"bad-guid"`) {
		t.Errorf("rejection line %s lacks its outcome or delivery id", lines[1])
	}
}

// deadlineStore fails the test unless every store call runs under a deadline.
type deadlineStore struct {
	*mem.Store
	t *testing.T
}

func (d deadlineStore) CreateJob(ctx context.Context, r job.Record, now time.Time) (job.Record, error) {
	if _, ok := ctx.Deadline(); !ok {
		d.t.Error("CreateJob called without a deadline")
	}
	return d.Store.CreateJob(ctx, r, now)
}

func TestHandleRunsUnderABudget(t *testing.T) {
	t.Parallel()
	st := deadlineStore{Store: mem.NewStore(job.Timing{}), t: t}
	h, err := New(Config{Secrets: [][]byte{[]byte(localSecret)}, Pools: testPools, Store: st, Queue: mem.NewQueue(time.Now), Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	if h.cfg.Budget != DefaultBudget || DefaultBudget >= 10*time.Second {
		t.Fatalf("budget %s: want the default %s, under GitHub's 10 s", h.cfg.Budget, DefaultBudget)
	}
	resp, _ := h.Handle(context.Background(), signedRequest("workflow_job", guid, compact(t, payload(t, "queued"))))
	if resp.StatusCode != http.StatusAccepted || st.Calls("CreateJob") != 1 {
		t.Fatalf("got %d after %d creates, want 202 after 1", resp.StatusCode, st.Calls("CreateJob"))
	}
}

func TestNewRefusesUnusableConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		text string
	}{
		{name: "no secrets", cfg: Config{Pools: testPools}, text: "Config.Secrets has no usable secret"},
		{name: "only empty secrets", cfg: Config{Pools: testPools, Secrets: [][]byte{{}}}, text: "Config.Secrets has no usable secret"},
		{name: "no pools", cfg: Config{Secrets: [][]byte{[]byte("s")}}, text: "Config.Pools is required"},
		{name: "no store", cfg: Config{Secrets: [][]byte{[]byte("s")}, Pools: testPools, Store: nil}, text: "Config.Store is required"},
		{name: "no queue", cfg: Config{Secrets: [][]byte{[]byte("s")}, Pools: testPools, Store: mem.NewStore(job.Timing{})}, text: "Config.Queue is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("New = %v, want an error saying %q", err, tt.text)
			}
		})
	}
}

// TestHandleHTTPAPIEvent: API Gateway HTTP API (payload format 2.0) events
// have the Function URL's JSON shape, so the same handler serves them.
func TestHandleHTTPAPIEvent(t *testing.T) {
	t.Parallel()
	body := compact(t, payload(t, "queued"))
	api := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /webhook", RawPath: "/webhook",
		Headers: signedRequest("workflow_job", guid, body).Headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: "POST /webhook", Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/webhook"},
		},
		Body: string(body),
	}
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(compact(t, api), &req); err != nil {
		t.Fatal(err)
	}
	f := setup(t, nil)
	if resp, _ := f.do(t, req); resp.StatusCode != http.StatusAccepted || len(f.q.Sent()) != 1 {
		t.Fatalf("HTTP API event: %d %s, %d sends; want 202 and 1 send", resp.StatusCode, resp.Body, len(f.q.Sent()))
	}
}

// TestRunnerNameIsBoundedOnTheRecord: an in_progress whose runner_name is
// longer than any runner's (here 410 KB, within the body limit) is applied:
// the record keeps the name cut to MaxRunnerName. Kept whole, it made an
// item over DynamoDB's 400 KB, refused on every delivery (500s) and the
// record never reached done.
func TestRunnerNameIsBoundedOnTheRecord(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.MaxBodyBytes = 1 << 20 })
	m := set(payload(t, "in_progress"), "workflow_job.runner_name", strings.Repeat("é", 205*1024))
	resp, r := f.do(t, signedRequest("workflow_job", guid, compact(t, m)))
	if resp.StatusCode != 202 || r.Status != StatusAccepted {
		t.Fatalf("got %d %+v, want 202 accepted", resp.StatusCode, r)
	}
	rec, ok := f.st.Records()[29679449]
	if !ok || rec.State != job.Done || len(rec.RunnerName) > MaxRunnerName || !utf8.ValidString(rec.RunnerName) || rec.RunnerName == "" {
		t.Fatalf("record %v (runner_name of %d bytes), want done with a name of at most %d bytes, valid UTF-8", ok, len(rec.RunnerName), MaxRunnerName)
	}
}

// TestCompletedWithANullLabelStopsALateQueued: GitHub reports a job
// completed (cancelled before any runner took it) with a null among its
// labels, as its schema allows, before the job's queued arrives. The
// report is applied, so the late queued finds the job done and no claim
// starts a runner and a machine for a job that is over.
func TestCompletedWithANullLabelStopsALateQueued(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := set(payload(t, "completed"), "workflow_job.labels", []any{"self-hosted", "linux", "x64", nil})
	set(c, "workflow_job.runner_name", nil)
	if resp, r := f.do(t, signedRequest("workflow_job", "guid-completed", compact(t, c))); resp.StatusCode != 202 {
		t.Fatalf("completed: got %d %+v, want 202", resp.StatusCode, r)
	}
	if resp, r := f.do(t, signedRequest("workflow_job", "guid-queued", compact(t, payload(t, "queued")))); resp.StatusCode != 200 || r.Status != StatusDuplicate {
		t.Fatalf("late queued: got %d %+v, want 200 %s", resp.StatusCode, r, StatusDuplicate)
	}
	if sent := f.q.Sent(); len(sent) != 0 {
		t.Errorf("a job GitHub reported completed was sent to the claimer: %+v", sent)
	}
	if rec := f.st.Records()[29679449]; rec.State != job.Done {
		t.Errorf("record %+v, want done", rec)
	}
}

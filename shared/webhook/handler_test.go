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

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/store"
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
			if calls := f.st.Calls(); len(calls) != 0 {
				t.Errorf("store calls = %v, want none", calls)
			}
			if f.q.hits != 0 {
				t.Errorf("queue sends = %d, want none", f.q.hits)
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
			if resp.StatusCode != http.StatusAccepted || len(f.q.sent) != 1 {
				t.Fatalf("status %d, %d sends; want 202 and 1 send (%s)", resp.StatusCode, len(f.q.sent), resp.Body)
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
			if calls := f.st.Calls(); len(calls) != 0 || f.q.hits != 0 {
				t.Fatalf("store calls %v, %d sends; want nothing", calls, f.q.hits)
			}
		})
	}
}

func TestHandleQueued(t *testing.T) {
	t.Parallel()
	dbErr := errors.New("dynamodb: ProvisionedThroughputExceededException: secret-internal-detail")
	due := testNow.Format(time.RFC3339)
	queuedCall := "MarkQueued(29679449,v1,due=" + due + ")"
	tests := []struct {
		name      string
		prepare   func(f *fixture)
		body      func(t testing.TB) []byte
		code      int
		status    string
		text      string
		calls     []string
		sends     int
		created   *job.Record
		logged    string // an outcome the decision's log line carries
		delivered bool   // a dedup key was written
	}{
		{
			name: "matching job: record, message, queued, dedup key last",
			code: 202, status: StatusAccepted, text: "pool linux-x64",
			calls:   []string{"DeliverySeen", "CreateJob", queuedCall, "PutDelivery"},
			sends:   1,
			created: &job.Record{JobID: 29679449, RunID: 10416386539, Repo: "octo-org/octo-repo", InstallationID: 42, Labels: []string{"self-hosted", "linux", "x64"}, Pool: "linux-x64", State: job.Pending, Version: 1, CreatedAt: job.Millis(testNow)},
			logged:  "enqueued", delivered: true,
		},
		{
			name: "labels match case-insensitively",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{"Self-Hosted", "LINUX"}))
			},
			code: 202, status: StatusAccepted,
			calls: []string{"DeliverySeen", "CreateJob", queuedCall, "PutDelivery"},
			sends: 1, logged: "enqueued", delivered: true,
		},
		{
			name:    "duplicate delivery does nothing else",
			prepare: func(f *fixture) { f.st.seen = true },
			code:    200, status: StatusDuplicate,
			calls: []string{"DeliverySeen"}, logged: "duplicate_delivery",
		},
		{
			name:    "dedup read fails: handled as unseen, no 500 to redeliver by hand",
			prepare: func(f *fixture) { f.st.seenErr = dbErr },
			code:    202, status: StatusAccepted,
			calls: []string{"DeliverySeen", "CreateJob", queuedCall, "PutDelivery"},
			sends: 1, logged: "dedup_read_failed", delivered: true,
		},
		{
			name: "no pool matches: the table is not touched",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{"ubuntu-latest"}))
			},
			code: 200, status: StatusIgnored, text: "no pool matches labels [ubuntu-latest]",
			logged: "skip",
		},
		{
			name: "no labels: the table is not touched",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{}))
			},
			code: 200, status: StatusIgnored, text: "no pool matches",
			logged: "skip",
		},
		{
			name: "public repo refused by a private pool",
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "repository.visibility", "public"))
			},
			code: 200, status: StatusIgnored, text: "is public and pool linux-x64 does not allow",
			logged: "skip",
		},
		{
			name: "public repo accepted by a pool that allows it",
			body: func(t testing.TB) []byte {
				m := set(payload(t, "queued"), "repository.visibility", "public")
				return compact(t, set(m, "workflow_job.labels", []any{"self-hosted", "arm64", "public"}))
			},
			code: 202, status: StatusAccepted, text: "pool public-arm",
			calls: []string{"DeliverySeen", "CreateJob", queuedCall, "PutDelivery"}, sends: 1, logged: "enqueued", delivered: true,
		},
		{
			name:    "owner not allowed",
			prepare: func(f *fixture) { f.h.cfg.AllowedOwners = []string{"other-org"} },
			code:    200, status: StatusIgnored, text: "owner octo-org is not allowed",
			logged: "skip",
		},
		{
			name:    "owner allowed case-insensitively",
			prepare: func(f *fixture) { f.h.cfg.AllowedOwners = []string{"other-org", "OCTO-ORG"} },
			code:    202, status: StatusAccepted,
			calls: []string{"DeliverySeen", "CreateJob", queuedCall, "PutDelivery"}, sends: 1, logged: "enqueued", delivered: true,
		},
		{
			name: "skip even when the delivery was seen: re-decided, nothing read or written",
			prepare: func(f *fixture) {
				f.st.seen, f.st.seenErr, f.st.putErr = true, dbErr, dbErr
			},
			body: func(t testing.TB) []byte {
				return compact(t, set(payload(t, "queued"), "workflow_job.labels", []any{"gpu"}))
			},
			code: 200, status: StatusIgnored, text: "no pool matches",
			logged: "skip",
		},
		{
			name:    "job already recorded under another GUID: no second message",
			prepare: func(f *fixture) { f.st.createErr = store.ErrExists },
			code:    200, status: StatusDuplicate, text: "already recorded",
			calls: []string{"DeliverySeen", "CreateJob", "PutDelivery"}, logged: "duplicate_job", delivered: true,
		},
		{
			name:    "create fails: 500, nothing sent, no dedup key",
			prepare: func(f *fixture) { f.st.createErr = dbErr },
			code:    500, status: StatusError,
			calls: []string{"DeliverySeen", "CreateJob"}, logged: "create_failed",
		},
		{
			name:    "send fails: record stays pending, still 202",
			prepare: func(f *fixture) { f.q.err = errors.New("sqs: AWS.SimpleQueueService.NonExistentQueue") },
			code:    202, status: StatusAccepted,
			calls: []string{"DeliverySeen", "CreateJob", "PutDelivery"}, logged: "pending_send_failed", delivered: true,
		},
		{
			name:    "a claimer was faster: conflict on MarkQueued is fine",
			prepare: func(f *fixture) { f.st.queuedErr = store.ErrConflict },
			code:    202, status: StatusAccepted,
			calls: []string{"DeliverySeen", "CreateJob", queuedCall, "PutDelivery"}, sends: 1, logged: "enqueued", delivered: true,
		},
		{
			name:    "MarkQueued fails: logged, still 202",
			prepare: func(f *fixture) { f.st.queuedErr = dbErr },
			code:    202, status: StatusAccepted,
			calls: []string{"DeliverySeen", "CreateJob", queuedCall, "PutDelivery"}, sends: 1, logged: "mark_queued_failed", delivered: true,
		},
		{
			name:    "dedup key already written by a concurrent duplicate",
			prepare: func(f *fixture) { f.st.putErr = store.ErrDuplicate },
			code:    202, status: StatusAccepted,
			calls: []string{"DeliverySeen", "CreateJob", queuedCall, "PutDelivery"}, sends: 1, logged: "enqueued",
		},
		{
			name:    "dedup write fails after the record: logged, still 202",
			prepare: func(f *fixture) { f.st.putErr = dbErr },
			code:    202, status: StatusAccepted,
			calls: []string{"DeliverySeen", "CreateJob", queuedCall, "PutDelivery"}, sends: 1, logged: "dedup_write_failed",
		},
		{
			name: "waiting: the table is not touched",
			body: func(t testing.TB) []byte { return compact(t, payload(t, "waiting")) },
			code: 200, status: StatusIgnored, text: "waiting",
			logged: "skip_waiting",
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
			if got := f.st.Calls(); !reflect.DeepEqual(got, tt.calls) {
				t.Errorf("store calls:\n got %v\nwant %v", got, tt.calls)
			}
			if len(f.q.sent) != tt.sends {
				t.Errorf("sends = %d, want %d", len(f.q.sent), tt.sends)
			}
			if tt.sends == 1 {
				if want := (job.Message{JobID: 29679449, Version: 1, Attempt: 0}); f.q.sent[0] != want {
					t.Errorf("message = %+v, want %+v", f.q.sent[0], want)
				}
			}
			if tt.created != nil && (len(f.st.created) != 1 || !reflect.DeepEqual(f.st.created[0], *tt.created)) {
				t.Errorf("created:\n got %+v\nwant [%+v]", f.st.created, *tt.created)
			}
			if tt.delivered {
				want := store.Delivery{GUID: guid, Event: "workflow_job", Action: string(mustParse(t, body).Action)}
				if len(f.st.deliveries) != 1 || f.st.deliveries[0] != want {
					t.Errorf("dedup keys = %+v, want [%+v]", f.st.deliveries, want)
				}
			} else if len(f.st.deliveries) != 0 {
				t.Errorf("dedup keys = %+v, want none", f.st.deliveries)
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

func mustParse(t testing.TB, body []byte) Job {
	t.Helper()
	j, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestHandleInProgressAndCompleted(t *testing.T) {
	t.Parallel()
	dbErr := errors.New("dynamodb: InternalServerError")
	tests := []struct {
		name           string
		payload        string
		noInstallation bool // the payload has no installation key
		prepare        func(f *fixture)
		code           int
		status         string
		calls          []string
		logged         string
	}{
		{name: "in_progress moves the record to done", payload: "in_progress", prepare: func(f *fixture) { f.st.donePrev = job.Queued },
			code: 202, status: StatusAccepted, calls: []string{"DeliverySeen", "MarkDone", "PutDelivery"}, logged: "done"},
		{name: "in_progress before queued creates it done", payload: "in_progress",
			code: 202, status: StatusAccepted, calls: []string{"DeliverySeen", "MarkDone", "PutDelivery"}, logged: "done_created"},
		{name: "completed after claimed: terminal is fine", payload: "completed", prepare: func(f *fixture) { f.st.doneErr = store.ErrTerminal },
			code: 202, status: StatusAccepted, calls: []string{"DeliverySeen", "MarkDone", "PutDelivery"}, logged: "already_terminal"},
		{name: "store fails: 500, no dedup key", payload: "completed", prepare: func(f *fixture) { f.st.doneErr = dbErr },
			code: 500, status: StatusError, calls: []string{"DeliverySeen", "MarkDone"}, logged: "mark_done_failed"},
		{name: "duplicate delivery", payload: "completed", prepare: func(f *fixture) { f.st.seen = true },
			code: 200, status: StatusDuplicate, calls: []string{"DeliverySeen"}, logged: "duplicate_delivery"},
		{name: "jobs of no pool are recorded done too", payload: "in_progress", prepare: func(f *fixture) { f.h.cfg.Pools = testPools[1:] },
			code: 202, status: StatusAccepted, calls: []string{"DeliverySeen", "MarkDone", "PutDelivery"}, logged: "done_created"},
		{name: "in_progress without installation is applied", payload: "in_progress", noInstallation: true, prepare: func(f *fixture) { f.st.donePrev = job.Claimed },
			code: 202, status: StatusAccepted, calls: []string{"DeliverySeen", "MarkDone", "PutDelivery"}, logged: "done"},
		{name: "completed without installation is applied", payload: "completed", noInstallation: true,
			code: 202, status: StatusAccepted, calls: []string{"DeliverySeen", "MarkDone", "PutDelivery"}, logged: "done_created"},
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
			resp, r := f.do(t, signedRequest("workflow_job", guid, compact(t, m)))
			if resp.StatusCode != tt.code || r.Status != tt.status {
				t.Fatalf("got %d %+v, want %d %s", resp.StatusCode, r, tt.code, tt.status)
			}
			if got := f.st.Calls(); !reflect.DeepEqual(got, tt.calls) {
				t.Errorf("store calls:\n got %v\nwant %v", got, tt.calls)
			}
			if f.q.hits != 0 {
				t.Errorf("sends = %d, want none", f.q.hits)
			}
			if tt.code == 202 {
				want := store.Done{JobID: 29679449, RunID: 10416386539, Repo: "octo-org/octo-repo", InstallationID: inst,
					Labels: []string{"self-hosted", "linux", "x64"}, RunnerName: "linux-x64-29679449"}
				if len(f.st.done) != 1 || !reflect.DeepEqual(f.st.done[0], want) {
					t.Errorf("MarkDone with %+v, want %+v", f.st.done, want)
				}
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
	if resp.StatusCode != http.StatusAccepted || r.Status != StatusAccepted || len(f.q.sent) != 1 {
		t.Fatalf("got %d %+v and %d sends, want 202 accepted and 1 send", resp.StatusCode, r, len(f.q.sent))
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
	*fakeStore
	t *testing.T
}

func (d deadlineStore) DeliverySeen(ctx context.Context, g string, now time.Time) (bool, error) {
	if _, ok := ctx.Deadline(); !ok {
		d.t.Error("DeliverySeen called without a deadline")
	}
	return d.fakeStore.DeliverySeen(ctx, g, now)
}

func TestHandleRunsUnderABudget(t *testing.T) {
	t.Parallel()
	st := deadlineStore{fakeStore: &fakeStore{seen: true}, t: t}
	h, err := New(Config{Secrets: [][]byte{[]byte(localSecret)}, Pools: testPools}, st, &fakeQueue{}, func() time.Time { return testNow }, discard())
	if err != nil {
		t.Fatal(err)
	}
	if h.cfg.Budget != DefaultBudget || DefaultBudget >= 10*time.Second {
		t.Fatalf("budget %s: want the default %s, under GitHub's 10 s", h.cfg.Budget, DefaultBudget)
	}
	resp, _ := h.Handle(context.Background(), signedRequest("workflow_job", guid, compact(t, payload(t, "queued"))))
	if resp.StatusCode != 200 || len(st.Calls()) != 1 {
		t.Fatalf("got %d after %v, want a 200 duplicate", resp.StatusCode, st.Calls())
	}
}

func TestNewRefusesUnusableConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		text string
	}{
		{name: "no secrets", cfg: Config{Pools: testPools}, text: "no usable secret"},
		{name: "only empty secrets", cfg: Config{Pools: testPools, Secrets: [][]byte{{}}}, text: "no usable secret"},
		{name: "no pools", cfg: Config{Secrets: [][]byte{[]byte("s")}}, text: "no runner pools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg, &fakeStore{}, &fakeQueue{}, time.Now, discard())
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
	if resp, _ := f.do(t, req); resp.StatusCode != http.StatusAccepted || len(f.q.sent) != 1 {
		t.Fatalf("HTTP API event: %d %s, %d sends; want 202 and 1 send", resp.StatusCode, resp.Body, len(f.q.sent))
	}
}

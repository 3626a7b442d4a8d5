package claim_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestAppRefusedKeepsTheJob: GitHub refusing the installation token
// exchange itself (the App's key rotated on GitHub while the secret holds
// the old one: 401; the installation removed, or an id of another App's:
// 404; the installation suspended: 403) is a fault of the App's
// credentials or installation, an operator's to fix, not the job's. The
// job is retried on the ladder (one decision line per failed attempt
// naming the cause, no credential in it), claimed once the cause is
// fixed, and abandoned at the maximum age if it never is. Before, each
// job tried in that window was failed for good (non_retryable), to be
// retried by hand one by one. A refusal of the job's own call (a
// repository the installation does not cover: 404) still fails the job.
func TestAppRefusedKeepsTheJob(t *testing.T) {
	t.Parallel()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		refuse func(h *harness)
		fix    func(h *harness) // nil: never fixed, abandoned at max age
		reason string           // the stored error's start
		failed bool             // the job's own refusal: failed for good
	}{
		{name: "App key rotated on GitHub (401)", reason: "github token 401",
			refuse: func(h *harness) { h.gh.SetPublicKey(&other.PublicKey) },
			fix:    func(h *harness) { h.gh.SetPublicKey(nil) }}, // the secret updated: the fake checks no signature again
		{name: "installation suspended (403)", reason: "github token 403",
			refuse: func(h *harness) { h.gh.Suspend(installation) },
			fix:    func(h *harness) { h.gh.Unsuspend(installation) }},
		{name: "installation removed (404)", reason: "github token 404",
			refuse: func(h *harness) { h.gh.Uninstall(installation) }},
		{name: "the job's repository not covered (404 on its own call)", reason: "github 404", failed: true,
			refuse: func(h *harness) { h.gh.SetInstallation(installation, "octo-org", true, "another-repo") }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			c := h.claimer(t, claimerOpt{instance: "app-refused"})
			id := int64(9600 + i)
			tt.refuse(h)
			h.seed(t, id)
			h.invoke(t, c, h.receive(t, 1)...)

			r := h.get(t, id)
			if !strings.HasPrefix(r.LastError, tt.reason) {
				t.Fatalf("last_error %q, want it to start %q", r.LastError, tt.reason)
			}
			if tt.failed {
				if r.State != job.Failed || r.LastErrorClass != "non_retryable" {
					t.Fatalf("record %s class %q, want failed non_retryable: the job's own call was refused", r.State, r.LastErrorClass)
				}
				if got := emftest.Select(emftest.Parse(t, []byte(h.logs.String())), "app_refused", nil); len(got) != 0 {
					t.Errorf("app_refused %v for the job's own refusal, want none", got)
				}
				return
			}
			if r.State != job.Queued || r.LastErrorClass != "unknown_retryable" || r.Attempt != 1 {
				t.Fatalf("record %s class %q attempt %d (%q), want queued unknown_retryable after attempt 1: the App's credentials, not the job, were refused",
					r.State, r.LastErrorClass, r.Attempt, r.LastError)
			}
			s := h.lastSend(t)
			if s.Msg.Version != r.Version || s.Delay < 24*time.Second || s.Delay > 37*time.Second {
				t.Fatalf("sent version %d delay %s, want version %d on the ladder's first rung (30 s ± 20 %%)", s.Msg.Version, s.Delay, r.Version)
			}
			if n := h.spy.Calls(); n != 0 || len(h.gh.Runners()) != 0 {
				t.Fatalf("%d provisioning calls, runners %v: want none", n, h.gh.Runners())
			}
			retries := 0
			for _, d := range h.logs.decisions(t) {
				if d["decision"] != "retry" {
					continue
				}
				retries++
				if d["cause"] != "github_app" || !strings.HasPrefix(d["reason"].(string), tt.reason) || d["level"] != "ERROR" {
					t.Errorf("retry line %v: want level ERROR, cause github_app and the reason %q…", d, tt.reason)
				}
			}
			if retries != 1 {
				t.Errorf("%d retry lines, want one for the failed attempt", retries)
			}
			// Counted for AppRefusedAlarm: the give-up alarm would page
			// only past the maximum age.
			if got := emftest.Select(emftest.Parse(t, []byte(h.logs.String())), "app_refused", nil); len(got) != 1 || got[0].Values[0] != 1 {
				t.Errorf("app_refused points %v, want one count of 1", got)
			}
			if logs := h.logs.String(); strings.Contains(logs, "eyJhbGciOi") || strings.Contains(logs, "PRIVATE KEY") {
				t.Errorf("a log line carries the App's JWT or key")
			}

			if tt.fix != nil {
				tt.fix(h)
				h.clock.Set(s.At.Add(s.Delay))
				h.invoke(t, c, h.receive(t, 1)...)
				if r := h.get(t, id); r.State != job.Claimed || r.Attempt != 2 {
					t.Fatalf("after the fix: record %s attempt %d (%q), want claimed at attempt 2", r.State, r.Attempt, r.LastError)
				}
				return
			}
			// Never fixed: retried on the ladder until the maximum age.
			for n := 0; n < 30 && h.get(t, id).State == job.Queued; n++ {
				s := h.lastSend(t)
				h.clock.Set(s.At.Add(s.Delay))
				h.invoke(t, c, h.receive(t, 1)...)
			}
			r = h.get(t, id)
			first := job.FromMillis(r.FirstFailureAt)
			if r.State != job.Abandoned || h.clock.Now().Sub(first) <= backoff.DefaultMaxAge {
				t.Fatalf("record %s (%q) %s after its first failure, want abandoned past max age %s",
					r.State, r.LastError, h.clock.Now().Sub(first), backoff.DefaultMaxAge)
			}
		})
	}
}

// TestAppRefusedCostsOneExchange: while GitHub refuses the App's token
// exchange, a batch of jobs of the installation asks GitHub once, not once
// per claim attempt, and, with check_queued, not twice per attempt (the
// job status check, refused, is claimed past, and the registration asked
// again): the App's refusal is held (shared/ghapp). The job whose attempt
// met GitHub's refusal is retried on the ladder as AppRefused and counted
// (app_refused); the others met only the held copy, no request: no
// attempt and no new refusal (DESIGN.md: attempt counts the attempts that
// reached GitHub), deferred past the hold's end like a remembered rate
// limit. Once the key is fixed every job is claimed at its next try.
func TestAppRefusedCostsOneExchange(t *testing.T) {
	t.Parallel()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 6
	for _, tc := range []struct {
		checkQueued bool
		concurrency int
	}{{false, 1}, {true, 1}, {false, 4}} {
		// At 4 workers, claims wait for the exchange one of them started:
		// the refusal is that claim's own answer only.
		t.Run(fmt.Sprintf("check_queued=%v,workers=%d", tc.checkQueued, tc.concurrency), func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{checkQueued: tc.checkQueued})
			c := h.claimer(t, claimerOpt{concurrency: tc.concurrency})
			h.gh.SetPublicKey(&other.PublicKey) // the App's key rotated on GitHub
			for i := range int64(jobs) {
				h.seed(t, 9700+i)
				h.gh.SetJob("octo-org", "octo-repo", ghfake.Job{ID: 9700 + i, Status: "queued"})
			}
			refused := h.clock.Now()
			h.invoke(t, c, h.receive(t, jobs)...)
			if got := h.gh.Stats().TokenRequests[installation]; got != 1 {
				t.Errorf("%d token exchanges for %d claim attempts GitHub refused, want 1", got, jobs)
			}
			if got := emftest.Select(emftest.Parse(t, []byte(h.logs.String())), "app_refused", nil); len(got) != 1 {
				t.Errorf("app_refused points %v, want one: the one refusal GitHub answered", got)
			}
			attempted, deferred := 0, 0
			before := map[int64]int{}
			for i := range int64(jobs) {
				r := h.get(t, 9700+i)
				before[9700+i] = r.Attempt
				switch {
				case r.State == job.Queued && r.Attempt == 1 && r.LastErrorClass == "unknown_retryable" && strings.HasPrefix(r.LastError, "github token 401"):
					attempted++
				case r.State == job.Queued && r.Attempt == 0 && r.LastErrorClass == "unknown_retryable" && strings.HasPrefix(r.LastError, "deferred: github token 401"):
					deferred++
				default:
					t.Fatalf("job %d: record %s attempt %d class %q (%q), want queued: retried after GitHub's refusal, or deferred after the held one",
						9700+i, r.State, r.Attempt, r.LastErrorClass, r.LastError)
				}
			}
			if attempted != 1 || deferred != jobs-1 {
				t.Errorf("%d jobs attempted and %d deferred, want 1 and %d", attempted, deferred, jobs-1)
			}
			last := time.Time{}
			for _, s := range h.queue.Sent() {
				if s.Delay == 0 {
					continue
				}
				if s.Arrival().Before(refused.Add(holdEnd)) {
					t.Errorf("a retry or deferral arrives %s after the refusal, want no sooner than the hold's end and the snap jitter (%s)", s.Arrival().Sub(refused), holdEnd)
				}
				if s.Arrival().After(last) {
					last = s.Arrival()
				}
			}

			// Fixed (the secret holds the key GitHub has): every job is
			// claimed at its next try, the attempted one at attempt 2, the
			// deferred ones at their first.
			h.gh.SetPublicKey(nil)
			h.clock.Set(last)
			h.invoke(t, c, h.receive(t, jobs)...)
			for i := range int64(jobs) {
				if r := h.get(t, 9700+i); r.State != job.Claimed || r.Attempt != before[9700+i]+1 {
					t.Errorf("job %d after the fix: record %s attempt %d (%q), want claimed at attempt %d", 9700+i, r.State, r.Attempt, r.LastError, before[9700+i]+1)
				}
			}
			if got := h.gh.Stats().TokenRequests[installation]; got != 2 {
				t.Errorf("%d token exchanges in all, want 2: the refused one and the fixed one", got)
			}
		})
	}
}

// holdEnd is the earliest a job refused by the App's token exchange comes
// back: shared/ghapp's 20 s hold plus the snap jitter's minimum for a
// deferred one (the ladder's first rung, 24 s at least, for the other).
const holdEnd = 20*time.Second + backoff.SnapJitterMin

// TestHeldRefusalDefersByTheRefusalsAge: while the App stays refused, other
// jobs' attempts keep renewing ghapp's short hold, so a claim that met only
// the held copy is deferred by a quarter of the time its job has been
// failing (up to the ladder's top rung), not just to the hold's end: a few
// dozen returns over an hour's refusal instead of one every half minute.
// A job with no failure before comes back just after the hold.
func TestHeldRefusalDefersByTheRefusalsAge(t *testing.T) {
	t.Parallel()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{concurrency: 1})
	h.gh.SetPublicKey(&other.PublicKey) // the App's key rotated on GitHub
	now := h.clock.Now()
	for _, tt := range []struct {
		id     int64
		failed time.Duration // how long the job has been failing; 0: never
	}{{9810, 0}, {9811, 0}, {9812, 4 * time.Minute}, {9813, time.Hour}} {
		r := h.record(t, tt.id)
		if tt.failed > 0 {
			r.FirstFailureAt = job.Millis(now.Add(-tt.failed))
			h.store.Put(r)
		}
		if err := h.queue.Send(context.Background(), job.Message{JobID: tt.id, Version: r.Version}, 0); err != nil {
			t.Fatal(err)
		}
	}
	msgs := h.receive(t, 4)
	slices.SortFunc(msgs, func(a, b events.SQSMessage) int { return cmp.Compare(jobOf(t, a.Body), jobOf(t, b.Body)) })
	h.invoke(t, c, msgs...) // 9810 meets GitHub's refusal, the others its held copy
	if r := h.get(t, 9810); r.Attempt != 1 {
		t.Fatalf("job 9810: attempt %d, want 1: it met GitHub's own refusal", r.Attempt)
	}
	arrival := map[int64]time.Duration{}
	for _, s := range h.queue.Sent() {
		if s.Delay > 0 {
			arrival[s.Msg.JobID] = s.Arrival().Sub(now)
		}
	}
	for id, want := range map[int64]time.Duration{9811: 20 * time.Second, 9812: time.Minute, 9813: 10 * time.Minute} {
		if r := h.get(t, id); r.Attempt != 0 || !strings.HasPrefix(r.LastError, "deferred: github token 401") {
			t.Errorf("job %d: attempt %d (%q), want deferred after the held refusal", id, r.Attempt, r.LastError)
		}
		// Plus the snap jitter; whole seconds of SQS delay.
		if got := arrival[id]; got < want+backoff.SnapJitterMin-time.Second || got > want+backoff.SnapJitterMax+time.Second {
			t.Errorf("job %d back after %s, want %s plus the snap jitter (%s–%s)", id, got, want, backoff.SnapJitterMin, backoff.SnapJitterMax)
		}
	}
}

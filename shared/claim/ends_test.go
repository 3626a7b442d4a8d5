package claim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestRateLimitedStatusCheckSpendsNoJITCall: with check_queued, a job-status
// check that GitHub rate-limits ends the attempt as a rate limit: the JIT
// call would be refused too, so it is not made. A 429 is the case that
// matters: go-github v62 does not type it, so it has no pre-request check
// of its own that would block the JIT call anyway.
func TestRateLimitedStatusCheckSpendsNoJITCall(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{checkQueued: true})
	c := h.claimer(t, claimerOpt{})
	h.gh.SetJob("octo-org", "octo-repo", ghfake.Job{ID: 9501, Status: "queued"})
	h.gh.Fail(ghfake.RouteJob, 1, ghfake.TooManyRequests(2*time.Minute))
	h.seed(t, 9501)
	if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	if n := h.gh.Stats().JITCalls; n != 0 {
		t.Fatalf("%d JIT calls, want 0 after a rate-limited status check", n)
	}
	r := h.get(t, 9501)
	if r.State != job.Queued || r.LastErrorClass != "rate_limit" || r.Attempt != 1 {
		t.Fatalf("record %s class %q attempt %d, want queued, rate_limit, attempt 1", r.State, r.LastErrorClass, r.Attempt)
	}
	if d := h.lastSend(t).Delay; d < 2*time.Minute+5*time.Second || d > 2*time.Minute+25*time.Second {
		t.Fatalf("re-sent with delay %s, want Retry-After 2m + [5s, 25s)", d)
	}
}

// TestAbandonDeletesTheRegisteredRunner: an attempt past the maximum age
// whose provisioning failed (retryably) abandons the job and removes the
// runner it registered, so no offline registration is left behind.
func TestAbandonDeletesTheRegisteredRunner(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{})
	const id = 9502
	ctx := context.Background()
	now := h.clock.Now()
	// The job has been failing for 91 minutes: a record at attempt 5 whose
	// first failure is past the 90 m maximum age, and its message.
	if _, err := h.store.CreateJob(ctx, h.newRecord(id), now); err != nil {
		t.Fatal(err)
	}
	l, _, err := h.store.Acquire(ctx, id, 1, "earlier", now.Add(time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Release(ctx, l, job.Retry{Version: 3, Attempt: 5, FirstFailureAt: now.Add(-91 * time.Minute), Due: now,
		ErrorClass: "server_side", Error: "capacity"}, now); err != nil {
		t.Fatal(err)
	}
	if err := h.queue.Send(ctx, job.Message{JobID: id, Version: 3, Attempt: 5}, 0); err != nil {
		t.Fatal(err)
	}
	h.spy.set(func(int) error {
		return awsErr("RunInstances", "InsufficientInstanceCapacity", "no capacity")
	}, nil)

	if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	r := h.get(t, id)
	if r.State != job.Abandoned || r.Attempt != 6 {
		t.Fatalf("record %s attempt %d (%s), want abandoned attempt 6", r.State, r.Attempt, r.LastError)
	}
	if st := h.gh.Stats(); st.JITCalls != 1 {
		t.Fatalf("%d JIT calls, want 1 (this attempt registered a runner)", st.JITCalls)
	}
	if rs := h.gh.Runners(); len(rs) != 0 {
		t.Fatalf("runners %v left after abandoning, want none", rs)
	}
	h.receiveNone(t)
}

// TestStaleChainHopsToItsNotBefore: a long delay travels as a chain of
// 900 s hops (not_before). A hop reads nothing: it is re-sent as it is,
// even when the record has moved on (here: a newer message took over at
// version 3), and stops at the first look after its not_before, where the
// lease write's refusal makes it a duplicate (see the package doc: a read
// per hop would cost more than the few hops it saves).
func TestStaleChainHopsToItsNotBefore(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{})
	const id = 9503
	ctx := context.Background()
	now := h.clock.Now()
	h.record(t, id)
	l, _, err := h.store.Acquire(ctx, id, 1, "earlier", now.Add(time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Release(ctx, l, job.Retry{Version: 3, Attempt: 1, FirstFailureAt: now, Due: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	stale := job.Message{JobID: id, Version: 1, Attempt: 0, NotBefore: job.Millis(now.Add(20 * time.Minute))}
	if err := h.queue.Send(ctx, stale, 0); err != nil {
		t.Fatal(err)
	}
	reads := h.store.Calls("Get") + h.store.Calls("Acquire")
	if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	if n := h.store.Calls("Get") + h.store.Calls("Acquire") - reads; n != 0 {
		t.Fatalf("the hop made %d store requests, want none", n)
	}
	if hop := h.lastSend(t); hop.Msg != stale || hop.Delay != 900*time.Second {
		t.Fatalf("hop sent %+v after %s, want %+v after 900s", hop.Msg, hop.Delay, stale)
	}
	h.clock.Advance(20 * time.Minute)
	sends := len(h.queue.Sent())
	if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	if n := len(h.queue.Sent()); n != sends {
		t.Fatalf("%d messages sent past not_before, want none: the stale chain ends there", n-sends)
	}
	if n := h.logs.count(t, "duplicate"); n != 1 {
		t.Fatalf("%d duplicate decisions, want 1", n)
	}
	if r := h.get(t, id); r.State != job.Queued || r.Version != 3 {
		t.Fatalf("record %s v%d, want queued v3 untouched", r.State, r.Version)
	}
	h.receiveNone(t)
}

// TestRateLimitLearntFromAnErrorIsRecorded: a rate limit the claimer learns
// only from an error (no transport fed the tracker: go-github's own
// pre-request check answers without a request, or, as here, a process
// without the rate transport) is recorded and shared, so the next claimer
// defers instead of calling GitHub.
func TestRateLimitLearntFromAnErrorIsRecorded(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	reset := h.clock.Now().Add(30 * time.Minute).Truncate(time.Second)
	h.gh.SetRateLimit(installation, 5000, 0, reset)
	c := h.claimer(t, claimerOpt{instance: "no-transport", noTransport: true})
	h.seed(t, 9504)
	h.invoke(t, c, h.receive(t, 1)...)
	if r := h.get(t, 9504); r.State != job.Queued || r.LastErrorClass != "rate_limit" {
		t.Fatalf("record %s class %q, want queued after a rate limit", r.State, r.LastErrorClass)
	}
	got, err := h.store.LoadRate(context.Background(), installation)
	if err != nil {
		t.Fatalf("shared rate reading: %v, want the limit learnt from the error", err)
	}
	if got.Remaining != 0 || !got.ResetAt.Equal(reset) || !got.ObservedAt.Equal(h.clock.Now().Truncate(time.Millisecond)) {
		t.Fatalf("shared reading %+v, want remaining 0 until %v observed now", got, reset)
	}
}

// TestAppBudgetIsNotTheInstallations: the installation token exchange is
// billed to the App's own budget. When that is spent, the claim is retried
// later, but the installation is not recorded as exhausted: the claimers
// holding a token go on. Before, the exchange's reset was recorded and
// shared as the installation's, and every claimer of the installation
// deferred until it (up to an hour, counted toward MAX_AGE).
func TestAppBudgetIsNotTheInstallations(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	h.gh.SetAppRateLimit(5000, 0, h.clock.Now().Add(45*time.Minute).Truncate(time.Second))
	c := h.claimer(t, claimerOpt{instance: "app-budget", noTransport: true})
	h.seed(t, 9505)
	h.invoke(t, c, h.receive(t, 1)...)
	r := h.get(t, 9505)
	if r.State != job.Queued || r.LastErrorClass != "rate_limit" || !strings.HasPrefix(r.LastError, "github token rate limit") {
		t.Fatalf("record %s class %q error %q, want queued after the token exchange's rate limit", r.State, r.LastErrorClass, r.LastError)
	}
	if got, err := h.store.LoadRate(context.Background(), installation); err == nil && got.Remaining == 0 {
		t.Fatalf("shared reading %+v: the App's budget recorded as the installation's", got)
	}
}

package claim_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

func noCalls(t *testing.T, s ghfake.Stats, when string) {
	t.Helper()
	total := 0
	for _, n := range s.Calls {
		total += n
	}
	for _, n := range s.TokenRequests {
		total += n
	}
	if total != 0 {
		t.Fatalf("%s: GitHub was called (calls %v, token requests %v), want no call at all", when, s.Calls, s.TokenRequests)
	}
}

// TestRateExhaustedNoGitHubCall: a fresh shared reading of remaining 0
// with the reset 40 min ahead keeps every claimer (two processes here)
// away from GitHub, token endpoint included, until the reset; the message
// is chained through not_before; after reset + jitter the claim goes
// through.
func TestRateExhaustedNoGitHubCall(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	ctx := context.Background()
	a := h.claimer(t, claimerOpt{instance: "a", seed: 1})
	b := h.claimer(t, claimerOpt{instance: "b", seed: 2})
	now := h.clock.Now()
	reset := now.Add(40 * time.Minute)
	h.gh.SetRateLimit(installation, 5000, 0, reset)
	if err := h.store.SaveRate(ctx, installation, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: reset, ObservedAt: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	const id = 2001
	h.seed(t, id)

	h.invoke(t, a, h.receive(t, 1)...)
	noCalls(t, h.gh.Stats(), "deferral")
	r := h.get(t, id)
	if r.State != job.Queued || r.Attempt != 0 || r.FirstFailureAt != job.Millis(now) || r.LastErrorClass != "rate_limit" {
		t.Fatalf("record %s attempt %d first_failure_at %d class %q, want queued, attempt 0 (not an attempt), first_failure_at %d (the deferral starts the max-age clock), rate_limit",
			r.State, r.Attempt, r.FirstFailureAt, r.LastErrorClass, job.Millis(now))
	}
	s := h.lastSend(t)
	nb := job.FromMillis(s.Msg.NotBefore)
	if s.Delay != 900*time.Second || nb.Before(reset.Add(5*time.Second)) || !nb.Before(reset.Add(25*time.Second)) {
		t.Fatalf("sent delay %s not_before reset%+v, want 900s and reset + [5s, 25s)", s.Delay, nb.Sub(reset))
	}
	if s.Msg.Version != r.Version || s.Msg.Attempt != 0 {
		t.Fatalf("sent version %d attempt %d, want record version %d attempt 0", s.Msg.Version, s.Msg.Attempt, r.Version)
	}
	if job.FromMillis(r.DueAt) != nb {
		t.Errorf("due_at %s, want not_before %s", job.FromMillis(r.DueAt), nb)
	}

	// Two hops of the chain, one per claimer: no GitHub, no record change.
	for i, cl := range []*claim.Claimer{b, a} {
		h.clock.Advance(900 * time.Second)
		h.invoke(t, cl, h.receive(t, 1)...)
		noCalls(t, h.gh.Stats(), "chained hop")
		hop := h.lastSend(t)
		if hop.Msg != s.Msg {
			t.Fatalf("hop %d re-sent %+v, want the same message %+v", i+1, hop.Msg, s.Msg)
		}
		if want := min(nb.Sub(h.clock.Now()), 900*time.Second); hop.Delay < want || hop.Delay > want+time.Second {
			t.Fatalf("hop %d delay %s, want %s", i+1, hop.Delay, want)
		}
		if got := h.get(t, id); got.Version != r.Version || got.UpdatedAt != r.UpdatedAt {
			t.Fatalf("hop %d changed the record (version %d → %d)", i+1, r.Version, got.Version)
		}
	}

	h.clock.Set(nb)
	h.invoke(t, b, h.receive(t, 1)...)
	if got := h.get(t, id); got.State != job.Claimed || got.Attempt != 1 {
		t.Fatalf("after the reset: record %s attempt %d, want claimed attempt 1", got.State, got.Attempt)
	}
	if h.gh.Stats().JITCalls != 1 {
		t.Fatalf("JIT calls %d, want 1", h.gh.Stats().JITCalls)
	}
}

// TestRateLimitLearntIsShared: a 403 with X-RateLimit-Remaining 0 seen by
// one claimer defers the next claimer's job without any GitHub call.
func TestRateLimitLearntIsShared(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	a := h.claimer(t, claimerOpt{instance: "a", seed: 1})
	b := h.claimer(t, claimerOpt{instance: "b", seed: 2})
	reset := h.clock.Now().Add(30 * time.Minute)
	h.gh.SetRateLimit(installation, 5000, 0, reset)
	h.seed(t, 2101)
	h.seed(t, 2102)
	msgs := h.receive(t, 2)

	h.invoke(t, a, msgs[0])
	first := h.get(t, jobOf(t, msgs[0].Body))
	if first.State != job.Queued || first.Attempt != 1 || first.LastErrorClass != "rate_limit" {
		t.Fatalf("first job: %s attempt %d class %q, want queued attempt 1 rate_limit", first.State, first.Attempt, first.LastErrorClass)
	}
	if nb := job.FromMillis(h.lastSend(t).Msg.NotBefore); nb.Before(reset.Add(5*time.Second)) || !nb.Before(reset.Add(25*time.Second)) {
		t.Fatalf("first job not_before reset%+v, want reset + [5s, 25s)", nb.Sub(reset))
	}
	before := h.gh.Stats()
	h.clock.Advance(time.Second)
	h.invoke(t, b, msgs[1])
	after := h.gh.Stats()
	if after.JITCalls != before.JITCalls || len(after.TokenRequests) != len(before.TokenRequests) || after.TokenRequests[installation] != before.TokenRequests[installation] {
		t.Fatalf("second claimer called GitHub: before %+v after %+v", before, after)
	}
	second := h.get(t, jobOf(t, msgs[1].Body))
	if second.State != job.Queued || second.Attempt != 0 {
		t.Fatalf("second job: %s attempt %d, want queued attempt 0 (deferred, not an attempt)", second.State, second.Attempt)
	}
}

func jobOf(t *testing.T, body string) int64 {
	t.Helper()
	m, err := job.DecodeMessage(body)
	if err != nil {
		t.Fatal(err)
	}
	return m.JobID
}

// TestGarbledResetIsCapped: GitHub (or a proxy before it) answers the
// exhaustion with a reset hours or centuries ahead (milliseconds read as
// seconds). The claim waits at most an hour and the snap jitter (a
// chained message), and a second claimer, reading the shared exhaustion
// with that reset, does not trust it: it asks GitHub itself. Before, the
// wait overflowed into a negative delay, and each deferral re-sent the
// message at once, over and over.
func TestGarbledResetIsCapped(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	a := h.claimer(t, claimerOpt{instance: "a", seed: 1})
	b := h.claimer(t, claimerOpt{instance: "b", seed: 2})
	now := h.clock.Now()
	h.gh.SetRateLimit(installation, 5000, 0, time.Unix(now.UnixMilli(), 0))
	h.seed(t, 2111)
	h.seed(t, 2112)
	msgs := h.receive(t, 2)

	h.invoke(t, a, msgs[0])
	s := h.lastSend(t)
	nb := job.FromMillis(s.Msg.NotBefore)
	if s.Delay != 900*time.Second || nb.Before(now.Add(time.Hour)) || !nb.Before(now.Add(time.Hour+25*time.Second)) {
		t.Fatalf("deferral sent with delay %v, not_before now%+v; want 900 s and not_before an hour plus [5 s, 25 s) ahead", s.Delay, nb.Sub(now))
	}
	before := h.gh.Stats().JITCalls
	h.invoke(t, b, msgs[1])
	if h.gh.Stats().JITCalls != before+1 {
		t.Fatalf("the second claimer trusted a reset hours ahead and did not ask GitHub")
	}
}

package claim_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// ghCalls is every request GitHub has seen, token requests included.
func ghCalls(s ghfake.Stats) int {
	n := 0
	for _, c := range s.Calls {
		n += c
	}
	for _, c := range s.TokenRequests {
		n += c
	}
	return n
}

// TestDeferralsCountTowardMaxAge: a job that keeps meeting an exhausted
// budget is deferred without an attempt (attempt unchanged, no GitHub
// call), but the deferrals count toward the maximum age: the first one
// starts the clock when no failure did, later ones keep it, and the
// deferral past the maximum age abandons the job, with the provisioner's
// cleanup of what an earlier attempt left.
func TestDeferralsCountTowardMaxAge(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name string
		// earlier: an attempt failed (retryably) after its provisioner
		// wrote the runner's SSM parameter, before the deferrals began.
		earlier bool
	}{
		{name: "never attempted"},
		{name: "after a failed attempt", earlier: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: tc.earlier})
			ctx := context.Background()
			c := h.claimer(t, claimerOpt{})
			id := int64(9701 + i)
			runner := job.RunnerName(h.pools[0].Name, id)
			h.seed(t, id)
			attempt, first := 0, time.Time{}
			if tc.earlier {
				// RunInstances fails after the adapter stored the config.
				h.prov.Fail(awsErr("RunInstances", "InsufficientInstanceCapacity", "no capacity"), 1)
				attempt, first = 1, h.clock.Now()
				h.invoke(t, c, h.receive(t, 1)...)
				if r := h.get(t, id); r.State != job.Queued || r.Attempt != 1 || r.FirstFailureAt != job.Millis(first) {
					t.Fatalf("after the failed attempt: record %s attempt %d first_failure_at %d, want queued, 1, %d",
						r.State, r.Attempt, r.FirstFailureAt, job.Millis(first))
				}
				if !h.hasParameter(runner) {
					t.Fatal("the failed attempt left no parameter to clean up")
				}
				h.clock.Advance(h.lastSend(t).Delay)
			}

			deferrals := 0
			for {
				if deferrals > 20 {
					t.Fatalf("still deferred after %d deferrals and %s: the maximum age never applies", deferrals, h.clock.Now().Sub(first))
				}
				now := h.clock.Now()
				reset := now.Add(10 * time.Minute)
				h.gh.SetRateLimit(installation, 5000, 0, reset)
				if err := h.store.SaveRate(ctx, installation, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: reset, ObservedAt: now}); err != nil {
					t.Fatal(err)
				}
				calls := ghCalls(h.gh.Stats())
				if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
					t.Fatalf("batch item failures %v", resp.BatchItemFailures)
				}
				if n := ghCalls(h.gh.Stats()) - calls; n != 0 {
					t.Fatalf("deferral %d called GitHub %d times, want none", deferrals+1, n)
				}
				if first.IsZero() {
					first = now // the first deferral starts the clock
				}
				r := h.get(t, id)
				if now.Sub(first) > backoff.DefaultMaxAge {
					if r.State != job.Abandoned || r.Attempt != attempt || r.LastErrorClass != "rate_limit" {
						t.Fatalf("past the maximum age: record %s attempt %d class %q, want abandoned, attempt %d, rate_limit",
							r.State, r.Attempt, r.LastErrorClass, attempt)
					}
					break
				}
				deferrals++
				if r.State != job.Queued || r.Attempt != attempt || r.FirstFailureAt != job.Millis(first) {
					t.Fatalf("deferral %d (%s after the first): record %s attempt %d first_failure_at %d, want queued, attempt %d, first_failure_at %d",
						deferrals, now.Sub(first), r.State, r.Attempt, r.FirstFailureAt, attempt, job.Millis(first))
				}
				s := h.lastSend(t)
				if s.Msg.Attempt != attempt || s.Delay < reset.Sub(now) {
					t.Fatalf("deferral %d sent attempt %d delay %s, want attempt %d and at least the reset (%s)",
						deferrals, s.Msg.Attempt, s.Delay, attempt, reset.Sub(now))
				}
				h.clock.Advance(s.Delay)
			}
			if deferrals < 2 {
				t.Fatalf("%d deferrals before the job was abandoned, want several", deferrals)
			}
			if tc.earlier && h.hasParameter(runner) {
				t.Error("the earlier attempt's parameter is still there after the job was abandoned")
			}
			h.receiveNone(t)
		})
	}
}

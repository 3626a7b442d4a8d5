package claim_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestGiveUpAsksWhetherTheJobRan: a job retried to the maximum age is
// asked about once before it is abandoned. Here its pool stopped allowing
// public repositories while it was queued, and the webhook skipped the
// report that it was cancelled (or taken by a runner): abandoned, it paged
// for a job that did not wait in vain. GitHub saying in progress or
// completed marks it done; still queued, or the question failing, or the
// installation's budget refused, it is abandoned as before.
func TestGiveUpAsksWhetherTheJobRan(t *testing.T) {
	t.Parallel()
	for i, tt := range []struct {
		name     string
		status   string // at GitHub ("": unknown to it)
		arm      func(h *harness)
		state    job.State
		decision string
		asked    int // job status requests at the give-up
	}{
		{name: "completed at GitHub: done", status: "completed", state: job.Done, decision: claim.DecisionDone, asked: 1},
		{name: "in progress at GitHub: done", status: "in_progress", state: job.Done, decision: claim.DecisionDone, asked: 1},
		{name: "still queued: abandoned", status: "queued", state: job.Abandoned, decision: claim.DecisionAbandoned, asked: 1},
		{name: "the question fails: abandoned", status: "completed", state: job.Abandoned, decision: claim.DecisionAbandoned, asked: 1,
			arm: func(h *harness) { h.gh.Fail(ghfake.RouteJob, 1, ghfake.ServerError(http.StatusBadGateway)) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			id := int64(68100 + i)
			h.pools[0].AllowPublic = true
			seedDescribed(t, h, id, true, false)
			h.pools[0].AllowPublic = false
			owner, name := ownerName()
			h.gh.SetRepo(owner, name, ghfake.Repo{Visibility: "public"})
			c := h.claimer(t, claimerOpt{})
			h.invoke(t, c, h.receive(t, 1)...)
			if got := h.get(t, id); got.State != job.Queued || got.FirstFailureAt == 0 {
				t.Fatalf("first attempt: %s (%s), want queued for a retry with its failure clock started", got.State, got.LastError)
			}
			if tt.status != "" {
				setJob(h, id, tt.status)
			}
			if tt.arm != nil {
				tt.arm(h)
			}
			h.clock.Advance(job.DefaultMaxAge + time.Minute)
			asked, decided := h.gh.Stats().Calls[ghfake.RouteJob], h.logs.count(t, tt.decision)
			h.invoke(t, c, h.receive(t, 1)...)
			if got := h.get(t, id); got.State != tt.state || h.logs.count(t, tt.decision)-decided != 1 {
				t.Fatalf("at the maximum age: %s (%s), want %s by %s", got.State, got.LastError, tt.state, tt.decision)
			}
			if n := h.gh.Stats().Calls[ghfake.RouteJob] - asked; n != tt.asked {
				t.Errorf("%d job status requests, want %d", n, tt.asked)
			}
		})
	}
}

// TestRateLimitedGiveUpAsksNothing: a job given up on a rate limit does
// not spend a request of the refused budget on the question.
func TestRateLimitedGiveUpAsksNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	const id = 68200
	h.seed(t, id)
	setJob(h, id, "completed")
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway))
	c := h.claimer(t, claimerOpt{})
	h.invoke(t, c, h.receive(t, 1)...)
	h.clock.Advance(job.DefaultMaxAge + time.Minute)
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.TooManyRequests(0))
	asked := h.gh.Stats().Calls[ghfake.RouteJob]
	h.invoke(t, c, h.receive(t, 1)...)
	if got := h.get(t, id); got.State != job.Abandoned || got.LastErrorClass != "rate_limit" {
		t.Fatalf("at the maximum age: %s [%s] (%s), want abandoned on the rate limit", got.State, got.LastErrorClass, got.LastError)
	}
	if n := h.gh.Stats().Calls[ghfake.RouteJob] - asked; n != 0 {
		t.Errorf("%d job status requests on a rate-limited give-up, want none", n)
	}
}

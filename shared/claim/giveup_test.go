package claim_test

import (
	"errors"
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
// completed marks it done; still queued, or the question failing, it is
// abandoned as before (a budget refused: TestRateLimitedGiveUpAsksNothing).
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
			refusedPublic(t, h, "public", id)
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

// TestRateLimitedGiveUpAsksNothing: a job given up on GitHub's rate limit
// does not spend a request on the question: on the installation's budget,
// the limit's block, recorded by the failed attempt, halts it; on the
// App's token exchange (the App's own budget, not the installation's rate
// state), the question would need another exchange, and is not asked.
func TestRateLimitedGiveUpAsksNothing(t *testing.T) {
	t.Parallel()
	for i, route := range []string{ghfake.RouteRepoJIT, ghfake.RouteAccessToken} {
		t.Run(route, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			id := int64(68200 + i)
			h.seed(t, id)
			setJob(h, id, "completed")
			h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway))
			h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
			h.clock.Advance(job.DefaultMaxAge + time.Minute)
			h.gh.Fail(route, 1, ghfake.TooManyRequests(time.Minute))
			asked := h.gh.Stats().Calls[ghfake.RouteJob]
			h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
			if got := h.get(t, id); got.State != job.Abandoned || got.LastErrorClass != "rate_limit" {
				t.Fatalf("at the maximum age: %s [%s] (%s), want abandoned on the rate limit", got.State, got.LastErrorClass, got.LastError)
			}
			if n := h.gh.Stats().Calls[ghfake.RouteJob] - asked; n != 0 {
				t.Errorf("%d job status requests on a rate-limited give-up, want none", n)
			}
		})
	}
}

// TestGiveUpDoneKeepsTheRunnerThatHasTheJob: the give-up's attempt
// registered its runner and its provisioning failed; GitHub says the job
// is in progress, so it is done. The attempt's runner is cleaned up as a
// give-up's is when idle (the job runs elsewhere: it is spare), and kept
// when it is busy (it took the job: it is the one running it).
func TestGiveUpDoneKeepsTheRunnerThatHasTheJob(t *testing.T) {
	t.Parallel()
	for i, tt := range []struct {
		name string
		busy bool
	}{{name: "idle: removed"}, {name: "busy with the job: kept", busy: true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			id := int64(68300 + i)
			name := job.RunnerName("linux", id)
			h.seed(t, id)
			h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway))
			c := h.claimer(t, claimerOpt{})
			h.invoke(t, c, h.receive(t, 1)...)
			setJob(h, id, "in_progress")
			h.spy.set(func(int) error {
				if tt.busy {
					if err := h.gh.SetRunner(name, "online", true); err != nil {
						panic(err)
					}
				}
				return errors.New("dispatch: sqs: InternalError")
			}, nil)
			h.clock.Advance(job.DefaultMaxAge + time.Minute)
			h.invoke(t, c, h.receive(t, 1)...)
			if got := h.get(t, id); got.State != job.Done {
				t.Fatalf("at the maximum age: %s (%s), want done: GitHub says the job is in progress", got.State, got.LastError)
			}
			if _, registered := h.gh.RunnerByName(name); registered != tt.busy {
				t.Errorf("runner %s registered %v, want %v", name, registered, tt.busy)
			}
		})
	}
}

// TestGiveUpQuestionMeetsASecondaryLimit: a job no pool has the labels of
// is retried without calling GitHub until the maximum age; its give-up's
// question, its only call, is answered with GitHub's secondary rate limit.
// The job is abandoned as before, and the block is shared: the next job's
// claim, in another process, waits instead of meeting the same refusal.
func TestGiveUpQuestionMeetsASecondaryLimit(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	const id, next = int64(68400), int64(68401)
	labels := h.pools[0].Labels
	h.seed(t, id)
	h.pools[0].Labels = []string{"self-hosted", "gpu"} // relabelled: no pool has the job's labels
	c := h.claimer(t, claimerOpt{})
	h.invoke(t, c, h.receive(t, 1)...)
	h.clock.Advance(job.DefaultMaxAge + time.Minute)
	h.gh.Fail(ghfake.RouteJob, 1, ghfake.SecondaryRateLimit(2*time.Minute))
	asked := h.gh.Stats().Calls[ghfake.RouteJob]
	h.invoke(t, c, h.receive(t, 1)...)
	if got := h.get(t, id); got.State != job.Abandoned || h.gh.Stats().Calls[ghfake.RouteJob]-asked != 1 {
		t.Fatalf("at the maximum age: %s (%s), asked %d times; want abandoned after one refused question",
			got.State, got.LastError, h.gh.Stats().Calls[ghfake.RouteJob]-asked)
	}
	h.pools[0].Labels = labels
	h.seed(t, next)
	jit := h.gh.Stats().JITCalls
	h.invoke(t, h.claimer(t, claimerOpt{instance: "another"}), h.receive(t, 1)...)
	if got := h.get(t, next); got.State != job.Queued || h.gh.Stats().JITCalls != jit {
		t.Errorf("the next job: %s (%s), %d JIT calls; want deferred without calling GitHub while the block lasts",
			got.State, got.LastError, h.gh.Stats().JITCalls-jit)
	}
}

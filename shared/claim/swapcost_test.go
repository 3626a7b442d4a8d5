package claim_test

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestSwappedJobLooksForNoLastRunner: job A's runner was taken by another
// job (the webhook's Swap: replacements and replacements_base both one
// up). A's next claim registers a runner of its own; releasePrevious is
// an operator retry's, and a swapped job's last runner is busy on the
// other job: looking for it is a GitHub listing per attempt for nothing.
func TestSwappedJobLooksForNoLastRunner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, setupOpt{ec2: true})
	const id = int64(9791)
	h.seed(t, id)
	h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
	first := h.get(t, id)
	if err := h.gh.SetRunner(first.RunnerName, "online", true); err != nil {
		t.Fatal(err)
	}
	swapped, err := h.store.Swap(ctx, first, h.clock.Now(), "runner taken", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if swapped.Replacements != 1 || swapped.ReplacementsBase != 1 || swapped.Attempt == 0 {
		t.Fatalf("swapped: replacements %d base %d attempt %d", swapped.Replacements, swapped.ReplacementsBase, swapped.Attempt)
	}
	if err := h.queue.Send(ctx, job.Message{JobID: id, Version: swapped.Version}, 0); err != nil {
		t.Fatal(err)
	}
	before := h.gh.Stats().Calls[ghfake.RouteRepoRunners]
	h.invoke(t, h.claimer(t, claimerOpt{instance: "next"}), h.receive(t, 1)...)
	if got := h.get(t, id); got.State != job.Claimed {
		t.Fatalf("after the swap: %s", got.State)
	}
	if n := h.gh.Stats().Calls[ghfake.RouteRepoRunners] - before; n != 0 {
		t.Errorf("the swapped job's claim listed runners %d times, want 0", n)
	}
}

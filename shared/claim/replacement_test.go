package claim_test

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestReplacementOfTakenRunner: job A's runner was taken by another job
// (busy, its machine at work on that job) and A was sent back for a new
// attempt (the webhook's or the reclaimer's take-back, replacements 1).
// The new attempt registers <pool>-<A>-r1 and starts a machine of its own;
// the taken runner and its machine are left running. Before, the attempt
// met the busy name (409, reused) and claimed nothing new: A waited.
func TestReplacementOfTakenRunner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, setupOpt{ec2: true})
	const id = 9301
	h.seed(t, id)
	h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
	first := h.get(t, id)
	if first.State != job.Claimed || first.RunnerName != job.RunnerName("linux", id) {
		t.Fatalf("first attempt: %s runner %q, want claimed by %s", first.State, first.RunnerName, job.RunnerName("linux", id))
	}
	oldMachines := h.prov.Machines(id)
	if len(oldMachines) != 1 {
		t.Fatalf("first attempt machines %v, want one", oldMachines)
	}
	if err := h.gh.SetRunner(first.RunnerName, "online", true); err != nil { // taken by job B
		t.Fatal(err)
	}
	taken, err := h.store.TakeBack(ctx, first, job.Queued, h.clock.Now(), "runner taken", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.queue.Send(ctx, job.Message{JobID: id, Version: taken.Version, Attempt: taken.Attempt}, 0); err != nil {
		t.Fatal(err)
	}

	h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
	want := job.RunnerNameAt("linux", id, 1)
	if got := h.get(t, id); got.State != job.Claimed || got.RunnerName != want {
		t.Fatalf("replacement: %s runner %q, want claimed by %s", got.State, got.RunnerName, want)
	}
	if _, ok := h.gh.RunnerByName(want); !ok {
		t.Fatalf("runners %v, want %s registered", h.gh.Runners(), want)
	}
	if old, ok := h.gh.RunnerByName(first.RunnerName); !ok || !old.Busy {
		t.Fatalf("the taken runner %s: %+v (present %v), want left registered and busy", first.RunnerName, old, ok)
	}
	live := h.prov.Machines(id)
	if len(live) != 2 {
		t.Fatalf("live machines %+v, want the taken runner's and a new one", live)
	}
	if live[0].ID != oldMachines[0].ID || live[1].RunnerName != want {
		t.Fatalf("live machines %+v, want %s still running and a new one for %s", live, oldMachines[0].ID, want)
	}
}

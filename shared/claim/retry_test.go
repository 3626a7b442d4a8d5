package claim_test

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestOperatorRetryGetsARunnerOfItsOwn: job A's runner was taken by
// another job (busy at work on it) and A was abandoned at its bounds. An
// operator retries A (ghclaim retry: Store.Requeue). The retried attempt
// must register a runner and start a machine of its own; under the last
// attempt's name, GitHub's 409 would find that busy runner and the claim
// would take it for A's own, leaving A with no runner until the liveness
// check a grace later.
func TestOperatorRetryGetsARunnerOfItsOwn(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = 9391
	first := retryAbandoned(t, h, id, true, "")
	got := h.get(t, id)
	if got.State != job.Claimed || got.RunnerName == first.RunnerName {
		t.Fatalf("after the retry: %s by %q, want claimed by a runner of its own (not %q, busy elsewhere)", got.State, got.RunnerName, first.RunnerName)
	}
	if r, ok := h.gh.RunnerByName(got.RunnerName); !ok || r.Busy {
		t.Errorf("the retry's runner %q: registered %v, busy %v; want a new idle one", got.RunnerName, ok, r.Busy)
	}
	if n := h.instances(id); n != 2 {
		t.Errorf("%d machines for the job, want 2 (the first attempt's, at work elsewhere, and the retry's)", n)
	}
}

// TestOperatorRetryRemovesTheIdleLastRunner: when the last attempt's
// runner is idle (its removal failed when the job was abandoned), the
// retry removes it and ends its machine before registering its own, so the
// job does not keep two idle runners and two machines. Also when the pool
// was renamed before the retry (linux → linux-v2): the retry claims in
// linux-v2, and the last runner it removes is still named after linux.
func TestOperatorRetryRemovesTheIdleLastRunner(t *testing.T) {
	t.Parallel()
	for i, rename := range []string{"", "linux-v2"} {
		t.Run("renamed="+rename, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			id := int64(9392 + 10*i)
			first := retryAbandoned(t, h, id, false, rename)
			got := h.get(t, id)
			if got.State != job.Claimed || got.RunnerName == first.RunnerName || (rename != "" && got.Pool != rename) {
				t.Fatalf("after the retry: %s in pool %q by %q, want claimed by a runner of its own", got.State, got.Pool, got.RunnerName)
			}
			if _, ok := h.gh.RunnerByName(first.RunnerName); ok {
				t.Errorf("the last attempt's idle runner %q is still registered beside %q", first.RunnerName, got.RunnerName)
			}
			if n := h.instances(id); n != 1 {
				t.Errorf("%d machines for the job, want 1 (the last attempt's ended)", n)
			}
		})
	}
}

// retryAbandoned claims job id, makes its runner busy (at work on another
// job) or idle, abandons the job and retries it as an operator would
// (Store.Requeue and the claim message), then runs the retry's claim,
// with the pool renamed to rename first unless it is "". It returns the
// first attempt's record.
func retryAbandoned(t *testing.T, h *harness, id int64, busy bool, rename string) job.Record {
	t.Helper()
	ctx := context.Background()
	h.seed(t, id)
	h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
	first := h.get(t, id)
	if first.State != job.Claimed {
		t.Fatalf("first attempt: %s", first.State)
	}
	if err := h.gh.SetRunner(first.RunnerName, "online", busy); err != nil {
		t.Fatal(err)
	}
	abandoned, err := h.store.TakeBack(ctx, first, job.Abandoned, h.clock.Now(), "abandoned past the cap", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rename != "" {
		p := h.pools[0]
		p.Name = rename
		h.pools = []pool.Pool{p}
	}
	retried, err := h.store.Requeue(ctx, job.Requeue{Read: abandoned, By: "alice", Due: h.clock.Now()}, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.queue.Send(ctx, job.Message{JobID: id, Version: retried.Version}, 0); err != nil {
		t.Fatal(err)
	}
	h.invoke(t, h.claimer(t, claimerOpt{instance: "retry"}), h.receive(t, 1)...)
	return first
}

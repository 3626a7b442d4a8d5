package claim_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
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
	first := retryAbandoned(t, h, id, true, nil)
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
// linux-v2, and the last runner it removes is still named after linux; and
// when that runner was registered at the organisation and the record does
// not say so (a pool that moved to the repositories with its rename): it
// is looked for at both scopes, not taken for gone at the repository.
// And when the retry's first attempt counted and failed before it came to
// the release (the renamed pool's repository read refused with a 502):
// the next attempt releases it.
func TestOperatorRetryRemovesTheIdleLastRunner(t *testing.T) {
	t.Parallel()
	renamed := func(h *harness, _ int64) { renameTo(h, "linux-v2") }
	tests := []struct {
		name   string
		scope  string // the first attempt's pool's
		change func(*harness, int64)
		pool   string // the retry's
		again  bool   // the retry's first attempt fails: claim once more
	}{
		{name: "same pool", pool: "linux"},
		{name: "renamed", change: renamed, pool: "linux-v2"},
		{name: "renamed, from the organisation, scope not recorded", scope: pool.ScopeOrg, pool: "linux-v2",
			change: func(h *harness, id int64) {
				renameTo(h, "linux-v2")
				h.pools[0].Scope = pool.ScopeRepo
				r, err := h.store.Get(context.Background(), id)
				if err != nil || r.Scope != pool.ScopeOrg {
					panic(fmt.Sprintf("record %+v (%v): want the scope the first attempt recorded, org", r, err))
				}
				r.Scope = ""
				h.store.Put(r)
			}},
		{name: "renamed, the retry's first attempt failed", pool: "linux-v2", again: true,
			change: func(h *harness, _ int64) {
				renameTo(h, "linux-v2")
				h.gh.Fail(ghfake.RouteRepo, 1, ghfake.ServerError(http.StatusBadGateway))
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			if tt.scope != "" {
				h.pools[0].Scope = tt.scope
			}
			id := int64(9392 + 10*i)
			first := retryAbandoned(t, h, id, false, tt.change)
			if tt.again {
				if r := h.get(t, id); r.State != job.Queued || r.Attempt != 1 {
					t.Fatalf("the retry's first attempt: %s, attempt %d; want queued after one failed attempt", r.State, r.Attempt)
				}
				h.clock.Advance(15 * time.Minute)
				h.invoke(t, h.claimer(t, claimerOpt{instance: "again"}), h.receive(t, 1)...)
			}
			got := h.get(t, id)
			if got.State != job.Claimed || got.RunnerName == first.RunnerName || got.Pool != tt.pool {
				t.Fatalf("after the retry: %s in pool %q by %q, want claimed in %s by a runner of its own", got.State, got.Pool, got.RunnerName, tt.pool)
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
// after change (nil for none) between the abandonment and the retry. It
// returns the first attempt's record.
func retryAbandoned(t *testing.T, h *harness, id int64, busy bool, change func(*harness, int64)) job.Record {
	t.Helper()
	return retryAbandonedBy(t, h, id, busy, change, claimerOpt{instance: "retry"})
}

// retryAbandonedBy is retryAbandoned with the retry's claimer built from o.
func retryAbandonedBy(t *testing.T, h *harness, id int64, busy bool, change func(*harness, int64), o claimerOpt) job.Record {
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
	if change != nil {
		change(h, id)
	}
	retried, err := h.store.Requeue(ctx, job.Requeue{Read: abandoned, By: "alice", Due: h.clock.Now()}, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.queue.Send(ctx, job.Message{JobID: id, Version: retried.Version}, 0); err != nil {
		t.Fatal(err)
	}
	h.invoke(t, h.claimer(t, o), h.receive(t, 1)...)
	return first
}

// diesAfterMove is a store whose Move lands and whose claimer then dies.
type diesAfterMove struct {
	claim.Store
	h *harness
}

func (d diesAfterMove) Move(ctx context.Context, l job.Lease, pool, scope string, now time.Time) error {
	if err := d.Store.Move(ctx, l, pool, scope, now); err != nil {
		return err
	}
	d.h.crash()
	return nil
}

// TestOperatorRetryReleasesTheLastRunnerAfterAMove: the pool was renamed
// (linux → linux-v2) before an operator retried the job, whose last
// runner linux-<id> is idle. The retry's first attempt moves the record to
// linux-v2 and then ends before its release of linux-<id>: its claimer
// dies right after the move (Store.Move), or the job status check is
// rate-limited and the attempt retried (the retry records linux-v2). The
// next attempt must still find and remove linux-<id> (the record's runner
// name), not look for linux-v2-<id>, which never existed: else the job
// has two runners and two machines.
func TestOperatorRetryReleasesTheLastRunnerAfterAMove(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		dies        bool
		checkQueued bool
		change      func(*harness, int64)
	}{
		{name: "dies after the move", dies: true,
			change: func(h *harness, _ int64) { renameTo(h, "linux-v2") }},
		{name: "status check rate-limited after the move", checkQueued: true,
			change: func(h *harness, _ int64) {
				renameTo(h, "linux-v2")
				h.gh.Fail(ghfake.RouteJob, 1, ghfake.TooManyRequests(time.Second))
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true, checkQueued: tt.checkQueued})
			id := int64(9492 + 10*i)
			setJob(h, id, "queued")
			o := claimerOpt{instance: "retry"}
			if tt.dies {
				o.store = diesAfterMove{Store: h.store, h: h}
			}
			first := retryAbandonedBy(t, h, id, false, tt.change, o)
			moved := h.get(t, id)
			if moved.Pool != "linux-v2" || (moved.State != job.Claiming && moved.State != job.Queued) {
				t.Fatalf("after the retry's first attempt: %s in pool %q, want claiming or queued in linux-v2", moved.State, moved.Pool)
			}
			if _, ok := h.gh.RunnerByName(first.RunnerName); !ok {
				t.Fatalf("the last runner %s is gone already: the case needs it left by the first attempt", first.RunnerName)
			}
			if tt.dies {
				h.esm.redeliver()
				h.clock.Set(job.FromMillis(moved.LeaseExpiresAt).Add(time.Second))
			} else {
				h.clock.Advance(15 * time.Minute)
			}
			h.invoke(t, h.claimer(t, claimerOpt{instance: "next"}), h.receive(t, 1)...)
			got := h.get(t, id)
			if got.State != job.Claimed || got.Pool != "linux-v2" {
				t.Fatalf("after the next attempt: %s in pool %q, want claimed in linux-v2", got.State, got.Pool)
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

package claim_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestLeaseOutlivesTheInvocation: LEASE_DURATION is configurable and
// nothing ties it to the function's timeout. With a lease shorter than the
// invocation (20 s here, 60 s invocation), a claimer still provisioning
// 30 s in holds an expired lease: the reclaimer takes the job back and
// re-enqueues it while the first claimer's machine is being started, so a
// second claimer registers (deleting the first runner as offline) and
// provisions again. The lease must never end before the invocation can.
func TestLeaseOutlivesTheInvocation(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	const id = 9501
	h.seed(t, id)
	seeded := len(h.rec.Sends())
	gh, rates := newGitHub(t, h)
	c, err := claim.New(claim.Deps{
		Store: h.store, Queue: h.queue, GitHub: gh, Provisioner: h.spy, Policy: newPolicy(), Rates: rates,
		Now: h.clock.Now, Rand: rand.New(rand.NewPCG(seed1, seed2)), Log: h.log,
		Metrics: obs.NewMetrics(h.logs, map[string]string{"function": "claimer"}, h.clock.Now),
	}, claim.Options{Pools: h.pools, InstanceID: "short-lease", Lease: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var rep reclaim.Report
	h.spy.set(func(n int) error {
		if n == 1 {
			// 30 s into the 60 s invocation, a reclaimer pass runs.
			h.clock.Advance(30 * time.Second)
			rc := reclaim.New(h.store, h.queue, reclaim.Config{Now: h.clock.Now, Rand: rand.New(rand.NewPCG(1, 2)), Logger: h.log})
			var err error
			if rep, err = rc.Run(context.Background()); err != nil {
				t.Errorf("reclaimer pass: %v", err)
			}
		}
		return nil
	}, nil)
	resp := h.invoke(t, c, h.receive(t, 1)...)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v, want none", resp.BatchItemFailures)
	}
	if n := rep.RequeuedTotal(); n != 0 {
		t.Errorf("the reclaimer re-enqueued %d jobs during a live claim, want 0", n)
	}
	if r := h.get(t, id); r.State != job.Claimed {
		t.Errorf("record %s v%d, want claimed by the live claimer", r.State, r.Version)
	}
	if s := h.rec.Sends()[seeded:]; len(s) != 0 {
		t.Errorf("claims queue got %d new messages (%v), want none", len(s), s)
	}
}

package claim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
)

// sweep is a reclaimer pass over the in-memory store, as shared/reclaim
// makes it: every record of the sweep index stale by now is taken back
// with a conditional write on the state and version read (a claiming
// record only once its lease has expired) and re-enqueued. It returns how
// many were re-enqueued.
func (h *harness) sweep(t *testing.T) int {
	t.Helper()
	ctx, now, n := context.Background(), h.clock.Now(), 0
	for _, shard := range h.store.Shards() {
		p, err := h.store.Stale(ctx, shard, now, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Records {
			v, err := h.store.TakeBack(ctx, r, job.Queued, now, "stale", now)
			if errors.Is(err, job.ErrConflict) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := h.queue.Send(ctx, job.Message{JobID: r.JobID, Version: v.Version, Attempt: v.Attempt}, 0); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

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
	seeded := len(h.queue.Sent())
	// The message waited in a backlog until the record's sweep_at (the
	// pending grace) passed: the reclaimer's pass sees the record, and
	// only the live lease keeps it from taking the job back. (Without the
	// wait the pass found nothing whatever the lease, and the test passed
	// with the lease left at LEASE_DURATION.)
	h.clock.Advance(h.store.Timing().PendingGrace + time.Second)
	c := h.claimer(t, claimerOpt{instance: "short-lease", lease: 20 * time.Second})
	requeued := 0
	h.spy.set(func(n int) error {
		if n == 1 {
			// 30 s into the 60 s invocation, a reclaimer pass runs.
			h.clock.Advance(30 * time.Second)
			requeued = h.sweep(t)
		}
		return nil
	}, nil)
	resp := h.invoke(t, c, h.receive(t, 1)...)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v, want none", resp.BatchItemFailures)
	}
	if n := requeued; n != 0 {
		t.Errorf("the reclaimer re-enqueued %d jobs during a live claim, want 0", n)
	}
	if r := h.get(t, id); r.State != job.Claimed {
		t.Errorf("record %s v%d, want claimed by the live claimer", r.State, r.Version)
	}
	if s := h.queue.Sent()[seeded:]; len(s) != 0 {
		t.Errorf("claims queue got %d new messages (%v), want none", len(s), s)
	}
}

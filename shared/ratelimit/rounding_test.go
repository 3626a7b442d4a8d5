package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestTrackerAndItemAgreeAtTheCrossing: process A shares an exhaustion
// counted on a whole millisecond; process B, just over Crossing later, is
// answered a higher count of the same window (the limit rose). The tracker
// and the shared item must decide alike. Before, Supersedes compared
// nanoseconds and the item milliseconds: 30 s and half a millisecond later,
// B's tracker took its count as newer and recorded it as shared, while the
// item kept the exhaustion, and every other claimer deferred to the reset
// while B called GitHub.
func TestTrackerAndItemAgreeAtTheCrossing(t *testing.T) {
	t.Parallel()
	for _, after := range []time.Duration{ratelimit.Crossing + 500*time.Microsecond, ratelimit.Crossing + 1500*time.Microsecond} {
		ctx := context.Background()
		st := mem.NewStore(job.Timing{})
		const inst = 77
		exhausted := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt, ObservedAt: t0}
		if err := st.SaveRate(ctx, inst, exhausted); err != nil {
			t.Fatal(err)
		}
		at := t0.Add(after)
		b := ratelimit.NewTracker(st, ratelimit.DefaultPersistRule(), func() time.Time { return at })
		b.Observe(inst, ratelimit.Reading{Limit: 15000, Remaining: 400, ResetAt: resetAt, ObservedAt: at})
		if _, err := b.Persist(ctx, inst); err != nil {
			t.Fatal(err)
		}
		own, err := b.Current(ctx, inst)
		if err != nil {
			t.Fatal(err)
		}
		shared, err := st.LoadRate(ctx, inst)
		if err != nil {
			t.Fatal(err)
		}
		if shared.Remaining != own.Remaining {
			t.Errorf("+%s: B holds remaining %d, the shared item %d: the processes decide apart", after, own.Remaining, shared.Remaining)
		}
	}
}

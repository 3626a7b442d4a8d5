package claim_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// countingRates is the process's rate state, counting reads of the
// shared rate#<installation> item (Current).
type countingRates struct {
	claim.RateState
	current atomic.Int32
}

func (c *countingRates) Current(ctx context.Context, inst int64) (ratelimit.Reading, error) {
	c.current.Add(1)
	return c.RateState.Current(ctx, inst)
}

// TestSharedRateReadOncePerRefresh: a warm claimer working through a batch
// reads the shared rate item at most once per RateRefresh per installation,
// and again once RateRefresh has passed with no newer reading of its own
// (its last GitHub response is as old), so it learns within seconds of an
// exhaustion another instance saw, without a read per message.
func TestSharedRateReadOncePerRefresh(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	rates := &countingRates{}
	c := h.claimer(t, claimerOpt{instance: "refresh", concurrency: 1, rates: func(r claim.RateState) claim.RateState {
		rates.RateState = r
		return rates
	}})
	for _, id := range []int64{9401, 9402, 9403} {
		h.seed(t, id)
	}
	if resp := h.invoke(t, c, h.receive(t, 3)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	for _, id := range []int64{9401, 9402, 9403} {
		if r := h.get(t, id); r.State != job.Claimed {
			t.Fatalf("job %d %s, want claimed", id, r.State)
		}
	}
	if n := rates.current.Load(); n != 1 {
		t.Fatalf("shared rate read %d times for a batch of 3 within RateRefresh, want 1", n)
	}
	if n := h.store.Calls("LoadRate"); n != 1 {
		t.Fatalf("rate item read %d times from the store, want 1", n)
	}

	h.clock.Advance(claim.DefaultRateRefresh)
	h.seed(t, 9404)
	h.invoke(t, c, h.receive(t, 1)...)
	if n := rates.current.Load(); n != 2 {
		t.Fatalf("shared rate read %d times in all, want 2: once RateRefresh has passed it is read again", n)
	}
}

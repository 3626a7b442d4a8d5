package claim_test

import (
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestSharedRateReadOnlyWhenOwnReadingIsNotEnough: the shared rate item
// is read only when this process's own reading is unknown, RateRefresh old
// or older, or Low (at most 10 % of the limit left); a fresh ample reading
// is enough, because other claimers write the item on every 10 % drop and
// on exhaustion. Each case is a new claimer process whose tracker holds
// the given reading, claiming one job.
func TestSharedRateReadOnlyWhenOwnReadingIsNotEnough(t *testing.T) {
	t.Parallel()
	reading := func(remaining int, age time.Duration) func(now time.Time) ratelimit.Reading {
		return func(now time.Time) ratelimit.Reading {
			return ratelimit.Reading{Limit: 5000, Remaining: remaining, ResetAt: now.Add(30 * time.Minute), ObservedAt: now.Add(-age)}
		}
	}
	tests := []struct {
		name  string
		own   func(now time.Time) ratelimit.Reading // nil: cold, no reading
		reads int
		state job.State // the job after the claim (zero: claimed)
	}{
		{name: "fresh and ample", own: reading(4000, time.Second), reads: 0},
		{name: "fresh, just above the threshold", own: reading(501, time.Second), reads: 0},
		// A concurrent worker's response lands after this message's now.
		{name: "observed just after now", own: reading(4000, -time.Second), reads: 0},
		{name: "observed RateRefresh ahead (a skewed clock)", own: reading(4000, -claim.DefaultRateRefresh), reads: 1},
		{name: "fresh but low", own: reading(500, time.Second), reads: 1},
		{name: "fresh and exhausted", own: reading(0, time.Second), reads: 1, state: job.Queued},
		{name: "RateRefresh old", own: reading(4000, claim.DefaultRateRefresh), reads: 1},
		{name: "stale", own: reading(4000, claim.DefaultRateRefresh+time.Minute), reads: 1},
		{name: "cold", reads: 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			var tracker *ratelimit.Tracker
			c := h.claimer(t, claimerOpt{instance: "own", concurrency: 1, rates: func(r claim.RateState) claim.RateState {
				tracker = r.(*ratelimit.Tracker)
				return r
			}})
			if tt.own != nil {
				tracker.Observe(installation, tt.own(h.clock.Now()))
			}
			id := int64(9501 + i)
			h.seed(t, id)
			if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("batch item failures %v", resp.BatchItemFailures)
			}
			want := tt.state
			if want == "" {
				want = job.Claimed
			}
			if r := h.get(t, id); r.State != want {
				t.Fatalf("job %d %s, want %s", id, r.State, want)
			}
			if n := h.store.Calls("LoadRate"); n != tt.reads {
				t.Fatalf("rate item read %d times, want %d", n, tt.reads)
			}
		})
	}
}

// TestSharedRateReadAtMostOncePerRefreshWhenLow: a claimer whose budget
// stays low reads the shared item before its claims, yet never more than
// once per RateRefresh, whatever the number of workers and messages.
func TestSharedRateReadAtMostOncePerRefreshWhenLow(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	h.gh.SetRateLimit(installation, 5000, 400, h.clock.Now().Add(time.Hour))
	c := h.claimer(t, claimerOpt{instance: "low", concurrency: 4})
	next := int64(9601)
	claimN := func(n int) {
		t.Helper()
		for range n {
			h.seed(t, next)
			next++
		}
		if resp := h.invoke(t, c, h.receive(t, n)...); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch item failures %v", resp.BatchItemFailures)
		}
	}
	steps := []struct {
		advance time.Duration
		claims  int
		reads   int // in all, after the step
	}{
		{0, 4, 1},                                      // cold: one read for the whole batch
		{claim.DefaultRateRefresh / 2, 2, 1},           // low, but read less than RateRefresh ago
		{claim.DefaultRateRefresh / 2, 3, 2},           // low, RateRefresh since the last read
		{claim.DefaultRateRefresh - time.Second, 1, 2}, // low, read again only after RateRefresh
	}
	for i, s := range steps {
		h.clock.Advance(s.advance)
		claimN(s.claims)
		if n := h.store.Calls("LoadRate"); n != s.reads {
			t.Fatalf("step %d: rate item read %d times in all, want %d", i, n, s.reads)
		}
	}
	for id := int64(9601); id < next; id++ {
		if r := h.get(t, id); r.State != job.Claimed {
			t.Fatalf("job %d %s, want claimed", id, r.State)
		}
	}
}

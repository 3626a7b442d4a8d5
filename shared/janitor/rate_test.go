package janitor_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestSharedRateReadOnlyWhenOwnReadingIsNotEnough: the janitor reads an
// installation's shared rate item before asking GitHub only when its own
// reading (from its last pass's calls) is unknown, stale or Low, and then
// at most once per refresh interval, like the claimer (ratelimit.Gate).
func TestSharedRateReadOnlyWhenOwnReadingIsNotEnough(t *testing.T) {
	t.Parallel()
	type pass struct {
		advance time.Duration // before the pass
		reads   int           // of the shared item, in all after it
	}
	tests := []struct {
		name      string
		remaining int // the installation's budget at GitHub (0: the stand-in's default)
		passes    []pass
	}{
		{name: "ample", passes: []pass{
			{0, 1},                             // cold
			{time.Second, 1},                   // own reading from the last pass, fresh and ample
			{ratelimit.DefaultRefresh * 12, 2}, // stale
		}},
		{name: "low", remaining: 300, passes: []pass{
			{0, 1},
			{time.Second, 1},                  // Low, but read less than a refresh ago
			{ratelimit.DefaultRefresh, 2},     // Low, a refresh since the last read
			{ratelimit.DefaultRefresh / 2, 2}, // and not again within one
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			if tt.remaining > 0 {
				f.fake.SetRateLimit(inst, 5000, tt.remaining, t0.Add(time.Hour))
			}
			j := f.janitor(t, nil) // one process: its passes share the tracker
			for i, p := range tt.passes {
				f.now = f.now.Add(p.advance)
				calls := f.fake.Stats().InstallationCalls[inst]
				rep, err := j.Run(context.Background())
				if err != nil || rep.ScopesListed != 1 {
					t.Fatalf("pass %d: %+v, %v: want the installation's repository listed", i, rep, err)
				}
				if f.fake.Stats().InstallationCalls[inst] == calls {
					t.Fatalf("pass %d made no call for the installation", i)
				}
				if n := f.store.Calls("LoadRate"); n != p.reads {
					t.Errorf("pass %d: shared rate item read %d times in all, want %d", i, n, p.reads)
				}
			}
		})
	}
}

// TestJanitorSharesAnExhaustionItObserves: when a pass's own GitHub calls
// exhaust an installation's budget, the janitor writes that to the shared
// item, where every claimer finds it before calling GitHub.
func TestJanitorSharesAnExhaustionItObserves(t *testing.T) {
	t.Parallel()
	f := setup(t)
	reset := t0.Add(30 * time.Minute)
	f.fake.SetRateLimit(inst, 5000, 1, reset) // the repository list takes the last call

	f.run(t, nil)

	if n := f.store.Calls("SaveRate"); n != 1 {
		t.Errorf("shared rate item written %d times, want 1", n)
	}
	got, err := f.store.LoadRate(context.Background(), inst)
	if err != nil {
		t.Fatalf("shared reading: %v, want the exhaustion the pass saw", err)
	}
	if !got.Exhausted(f.now) || !got.ResetAt.Equal(reset) {
		t.Errorf("shared reading %+v, want exhausted until %s", got, reset)
	}

	// Another janitor (a new process) learns it from the shared item.
	f.rates = ratelimit.NewTracker(f.store, ratelimit.DefaultPersistRule(), func() time.Time { return f.now })
	before := f.fake.Stats().InstallationCalls[inst]
	if rep := f.run(t, nil); rep.RateLimited != 1 {
		t.Errorf("next pass %+v, want the installation rate limited", rep)
	}
	if n := f.fake.Stats().InstallationCalls[inst] - before; n != 0 {
		t.Errorf("%d calls for the exhausted installation, want 0", n)
	}
}

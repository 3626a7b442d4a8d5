package reclaim_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// deadPastMaxAge has job id claiming under an expired lease of a claimer
// that died, failing since long before max age: the pass abandons it and
// removes its leftovers (runner first, at GitHub).
func (l *live) deadPastMaxAge(t *testing.T, id int64) {
	t.Helper()
	ctx := context.Background()
	old := t0.Add(-2 * time.Hour)
	ls := l.claiming(t, id, old, old.Add(lease))
	must(t, l.store.Release(ctx, ls, job.Retry{Version: ls.Version + 1, Attempt: 4, FirstFailureAt: old, Due: old.Add(time.Minute)}, old.Add(time.Second)))
	if _, _, err := l.store.Acquire(ctx, id, ls.Version+1, "claimer-dead", old.Add(2*time.Minute), old.Add(time.Minute)); err != nil {
		t.Fatalf("Acquire %d: %v", id, err)
	}
}

// coldRates gives the reclaimer a tracker of a fresh process: no reading
// of its own (the client's transport still feeds the old one), so every
// rate question depends on the shared item.
func (l *live) coldRates() {
	l.rates = ratelimit.NewTracker(l.store, ratelimit.DefaultPersistRule(), l.clock.Now)
}

// TestSharedRateReadOncePerPass: a pass with several candidates of one
// installation (liveness checks, or abandons whose leftovers are removed)
// reads the shared rate#<installation> item at most once, whether this
// process has no reading of its own or a Low one, and an exhausted shared
// reading still keeps every one of them off GitHub.
func TestSharedRateReadOncePerPass(t *testing.T) {
	t.Parallel()
	ids := []int64{710, 711, 712}
	exhausted := func(t *testing.T, l *live) {
		rd := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(time.Hour), ObservedAt: t0.Add(-time.Minute)}
		must(t, l.store.SaveRate(context.Background(), 42, rd))
	}
	blocked := func(t *testing.T, l *live) {
		must(t, l.store.SaveBlock(context.Background(), 42, t0.Add(2*time.Minute), 2*time.Minute))
	}
	tests := []struct {
		name    string
		abandon bool                        // the candidates are abandons (leftovers), not liveness checks
		before  func(t *testing.T, l *live) // before the candidates are made
		after   func(t *testing.T, l *live) // after
		calls   bool                        // GitHub is asked
		report  func(r reclaim.Report) bool
	}{
		{name: "liveness, own reading low",
			before: func(t *testing.T, l *live) { l.fake.SetRateLimit(42, 5000, 300, t0.Add(time.Hour)) },
			calls:  true, report: func(r reclaim.Report) bool { return r.Requeued[reclaim.RunnerLost] == len(ids) }},
		{name: "liveness, no own reading",
			after: func(t *testing.T, l *live) { l.coldRates() },
			calls: true, report: func(r reclaim.Report) bool { return r.Requeued[reclaim.RunnerLost] == len(ids) }},
		{name: "liveness, shared reading exhausted",
			after:  func(t *testing.T, l *live) { exhausted(t, l); l.coldRates() },
			report: func(r reclaim.Report) bool { return r.LivenessRateLimited == len(ids) && len(r.Requeued) == 0 }},
		{name: "leftovers, no own reading", abandon: true,
			calls: true, report: func(r reclaim.Report) bool { return r.Abandoned == len(ids) && r.CleanedUp == len(ids) }},
		{name: "leftovers, shared reading exhausted", abandon: true, after: exhausted,
			report: func(r reclaim.Report) bool { return r.Abandoned == len(ids) && r.CleanupRateLimited == len(ids) }},
		{name: "liveness, shared secondary-limit block",
			after:  func(t *testing.T, l *live) { blocked(t, l); l.coldRates() },
			report: func(r reclaim.Report) bool { return r.LivenessRateLimited == len(ids) && len(r.Requeued) == 0 }},
		{name: "leftovers, shared secondary-limit block", abandon: true, after: blocked,
			report: func(r reclaim.Report) bool { return r.Abandoned == len(ids) && r.CleanupRateLimited == len(ids) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			if tt.before != nil {
				tt.before(t, l)
			}
			for _, id := range ids {
				if tt.abandon {
					l.deadPastMaxAge(t, id)
				} else {
					l.claimed(t, id, t0.Add(-liveGrace-time.Second))
				}
			}
			if tt.after != nil {
				tt.after(t, l)
			}
			loads, calls := l.store.Calls("LoadRate"), l.fake.Stats().InstallationCalls[42]

			rep := l.run(t, l.reclaimer(t, nil))

			if !tt.report(rep) {
				t.Fatalf("report %+v", rep)
			}
			if n := l.store.Calls("LoadRate") - loads; n > 1 {
				t.Errorf("shared rate item read %d times in a pass with %d candidates of one installation, want at most 1", n, len(ids))
			}
			if n := l.fake.Stats().InstallationCalls[42] - calls; (n > 0) != tt.calls {
				t.Errorf("%d GitHub calls for the installation, want some: %t", n, tt.calls)
			}
		})
	}
}

// TestReclaimerSharesAnExhaustionItObserves: when the pass's own GitHub
// calls exhaust the installation's budget, the reclaimer writes that to
// the shared item (claimers stop calling GitHub at once instead of each
// learning it from a 403), and its later candidates of that installation
// stay off GitHub.
func TestReclaimerSharesAnExhaustionItObserves(t *testing.T) {
	t.Parallel()
	tests := []passCase{
		{name: "liveness check",
			report: func(r reclaim.Report) bool { return r.LivenessRateLimited == 1 }},
		{name: "leftover removal", abandon: true,
			report: func(r reclaim.Report) bool { return r.Abandoned == 2 && r.CleanupRateLimited == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			l.candidates(t, tt.abandon, 720, 721)
			// One call left: the pass's first GitHub answer says 0.
			reset := t0.Add(30 * time.Minute)
			l.fake.SetRateLimit(42, 5000, 1, reset)
			l.clock.Advance(time.Second) // the answer is newer than the claim's
			saves := l.store.Calls("SaveRate")

			rep := l.run(t, l.reclaimer(t, nil))

			if !tt.report(rep) {
				t.Errorf("report %+v: want the second candidate kept off GitHub", rep)
			}
			if n := l.store.Calls("SaveRate") - saves; n != 1 {
				t.Errorf("shared rate item written %d times, want 1", n)
			}
			got, err := l.store.LoadRate(context.Background(), 42)
			if err != nil {
				t.Fatalf("shared reading: %v, want the exhaustion the pass saw", err)
			}
			if !got.Exhausted(l.clock.Now()) || !got.ResetAt.Equal(reset) {
				t.Errorf("shared reading %+v, want exhausted until %s", got, reset)
			}
		})
	}
}

// TestReclaimerRecordsASecondaryLimitItMeets: GitHub refuses the pass's
// first call with a secondary limit that names no wait (a 403 whose
// message alone says so, which the rate transport cannot tell from a
// permission error): the installation is blocked for a minute, so the
// pass's next candidate of it stays off GitHub, and the block is shared
// for the claimers.
func TestReclaimerRecordsASecondaryLimitItMeets(t *testing.T) {
	t.Parallel()
	tests := []passCase{
		{name: "liveness check",
			report: func(r reclaim.Report) bool { return r.LivenessFailed == 1 && r.LivenessRateLimited == 1 }},
		{name: "leftover removal", abandon: true,
			report: func(r reclaim.Report) bool { return r.CleanupFailed == 1 && r.CleanupRateLimited == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			l.candidates(t, tt.abandon, 730, 731)
			l.fake.Fail(ghfake.RouteRepoRunners, 1, ghfake.SecondaryRateLimit(0))
			calls := l.fake.Stats().InstallationCalls[42]

			rep := l.run(t, l.reclaimer(t, nil))

			if !tt.report(rep) {
				t.Errorf("report %+v: want the first call refused and the second candidate kept off GitHub", rep)
			}
			if n := l.fake.Stats().InstallationCalls[42] - calls; n != 1 {
				t.Errorf("%d GitHub calls for the installation, want the refused one only", n)
			}
			got, err := l.store.LoadRate(context.Background(), 42)
			if want := l.clock.Now().Add(ratelimit.MinBlock); err != nil || !got.BlockedUntil.Equal(want) {
				t.Errorf("shared rate item %+v (%v), want blocked until %v", got, err, want)
			}
		})
	}
}

// candidates makes ids the pass's candidates of installation 42: abandons
// whose leftovers are removed, or claimed jobs due for a liveness check.
func (l *live) candidates(t *testing.T, abandon bool, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		if abandon {
			l.deadPastMaxAge(t, id)
		} else {
			l.claimed(t, id, t0.Add(-liveGrace-time.Second))
		}
	}
}

// passCase is a pass over two candidates of one installation, liveness
// checks or abandons, and what its report must say.
type passCase struct {
	name    string
	abandon bool
	report  func(r reclaim.Report) bool
}

// TestLivenessDeferredToTheResume: a liveness check the installation's
// rate limit holds up is due again when GitHub may be asked, plus the
// claimers' snap jitter: neither a grace early (it would be deferred
// again) nor a fixed minute late (a block of seconds kept a job without a
// runner for a minute, longer than `make test`'s short chaos run waited).
func TestLivenessDeferredToTheResume(t *testing.T) {
	t.Parallel()
	const id = int64(730)
	tests := []struct {
		name   string
		resume time.Time
		halt   func(t *testing.T, l *live, resume time.Time)
	}{
		{name: "budget exhausted past the grace", resume: t0.Add(time.Hour),
			halt: func(t *testing.T, l *live, resume time.Time) {
				must(t, l.store.SaveRate(context.Background(), 42, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resume, ObservedAt: t0.Add(-time.Minute)}))
			}},
		{name: "secondary-limit block ending within the grace", resume: t0.Add(3 * time.Second),
			halt: func(t *testing.T, l *live, resume time.Time) {
				must(t, l.store.SaveBlock(context.Background(), 42, resume, time.Minute))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			l.claimed(t, id, t0.Add(-liveGrace-time.Second))
			tt.halt(t, l, tt.resume)
			l.coldRates()

			rep := l.run(t, l.reclaimer(t, nil))

			got := l.get(t, id)
			if rep.LivenessRateLimited != 1 || got.State != job.Claimed {
				t.Fatalf("record %+v, report %+v: want the check deferred", got, rep)
			}
			due := job.FromMillis(got.SweepAt)
			if lo, hi := tt.resume.Add(backoff.SnapJitterMin), tt.resume.Add(backoff.SnapJitterMax); due.Before(lo) || !due.Before(hi) {
				t.Errorf("checked again at %s, want in [%s, %s): the resume %s plus the snap jitter", due, lo, hi, tt.resume)
			}
		})
	}
}

// TestLivenessMeetingTheLimitWaitsForItsEnd: a check whose own GitHub call
// meets a secondary limit is due again at the block's end plus the snap
// jitter, like one deferred before calling; any other failed call moves it
// one grace (a broken installation costs one call per grace).
func TestLivenessMeetingTheLimitWaitsForItsEnd(t *testing.T) {
	t.Parallel()
	const id = int64(740)
	block := 5 * time.Second
	tests := []struct {
		name   string
		fail   func(l *live)
		lo, hi time.Time
	}{
		{name: "runner lookup: 429 with Retry-After",
			fail: func(l *live) { l.fake.Fail(ghfake.RouteRepoRunners, 1, ghfake.TooManyRequests(block)) },
			lo:   t0.Add(block + backoff.SnapJitterMin), hi: t0.Add(block + backoff.SnapJitterMax)},
		{name: "job status: secondary-limit 403",
			fail: func(l *live) {
				must(t, l.fake.SetRunner(job.RunnerName("linux", id), "offline", false))
				l.fake.Fail(ghfake.RouteJob, 1, ghfake.SecondaryRateLimit(block))
			},
			lo: t0.Add(block + backoff.SnapJitterMin), hi: t0.Add(block + backoff.SnapJitterMax)},
		{name: "runner lookup: 502, one grace",
			fail: func(l *live) { l.fake.Fail(ghfake.RouteRepoRunners, 1, ghfake.ServerError(502)) },
			lo:   t0.Add(liveGrace), hi: t0.Add(liveGrace + time.Nanosecond)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			l.claimed(t, id, t0.Add(-liveGrace-time.Second))
			tt.fail(l)

			rep := l.run(t, l.reclaimer(t, nil))

			got := l.get(t, id)
			if rep.LivenessFailed != 1 || got.State != job.Claimed {
				t.Fatalf("record %+v, report %+v: want the check failed and kept", got, rep)
			}
			if due := job.FromMillis(got.SweepAt); due.Before(tt.lo) || !due.Before(tt.hi) {
				t.Errorf("checked again at t0+%s, want in [t0+%s, t0+%s)", due.Sub(t0), tt.lo.Sub(t0), tt.hi.Sub(t0))
			}
		})
	}
}

// ticking moves the clock on a second before each runner lookup: a pass's
// calls take time, while the pass reads its now once.
type ticking struct {
	reclaim.GitHub
	l *live
}

func (g ticking) FindRunner(ctx context.Context, inst int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	g.l.clock.Advance(time.Second)
	return g.GitHub.FindRunner(ctx, inst, scope, owner, repo, name)
}

// TestCapLengthBlockHoldsForThePass: a block of the full cap (an hour: what
// a repeated limit doubles to) met a second into a pass ends a little more
// than the cap after the pass's now; it still keeps the pass's later
// candidates off GitHub, rather than being taken for a skewed clock's.
func TestCapLengthBlockHoldsForThePass(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	for _, id := range []int64{750, 751, 752} {
		l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	}
	l.fake.Fail(ghfake.RouteRepoRunners, 1, ghfake.TooManyRequests(ratelimit.MaxBlock))
	before := l.fake.Stats().Calls[ghfake.RouteRepoRunners]

	rep := l.run(t, l.reclaimer(t, func(c *reclaim.Config) { c.GitHub = ticking{GitHub: l.gh, l: l} }))

	if n := l.fake.Stats().Calls[ghfake.RouteRepoRunners] - before; n != 1 {
		t.Errorf("%d runner lookups, want 1: GitHub was called again during the hour's block (report %+v)", n, rep)
	}
	if rep.LivenessRateLimited != 2 {
		t.Errorf("report %+v, want the two later checks deferred", rep)
	}
}

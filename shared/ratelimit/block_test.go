package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

func TestBlockUntil(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		retryAfter time.Duration
		want       time.Time
	}{
		{"GitHub's Retry-After", 90 * time.Second, t0.Add(90 * time.Second)},
		{"none named: a minute", 0, t0.Add(ratelimit.MinBlock)},
		{"longer than the cap: the cap", 3 * time.Hour, t0.Add(ratelimit.MaxBlock)},
	} {
		if got := ratelimit.BlockUntil(t0, tt.retryAfter); !got.Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestHalted(t *testing.T) {
	t.Parallel()
	exhausted := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(10 * time.Minute), ObservedAt: t0.Add(-time.Second)}
	ample := ratelimit.Reading{Limit: 5000, Remaining: 4000, ResetAt: t0.Add(10 * time.Minute), ObservedAt: t0.Add(-time.Second)}
	blocked := func(r ratelimit.Reading, d time.Duration) ratelimit.Reading {
		r.BlockedUntil = t0.Add(d)
		return r
	}
	for _, tt := range []struct {
		name   string
		r      ratelimit.Reading
		halted bool
		resume time.Time
	}{
		{"ample, no block", ample, false, time.Time{}},
		{"ample but blocked", blocked(ample, time.Minute), true, t0.Add(time.Minute)},
		{"a block alone, no primary reading", blocked(ratelimit.Reading{}, time.Minute), true, t0.Add(time.Minute)},
		{"block passed", blocked(ample, -time.Second), false, time.Time{}},
		{"block ends now", blocked(ample, 0), false, time.Time{}},
		{"a cap-length block met after now was read: held", blocked(ample, ratelimit.MaxBlock+time.Minute), true, t0.Add(ratelimit.MaxBlock + time.Minute)},
		{"block beyond the cap and the lag: a skewed clock's", blocked(ample, ratelimit.MaxBlock+ratelimit.NowLag+time.Second), false, time.Time{}},
		{"exhausted: its reset", exhausted, true, t0.Add(10 * time.Minute)},
		{"exhausted and blocked past the reset: the block", blocked(exhausted, 20*time.Minute), true, t0.Add(20 * time.Minute)},
		{"exhausted and blocked before the reset: the reset", blocked(exhausted, time.Minute), true, t0.Add(10 * time.Minute)},
	} {
		if got := tt.r.Halted(t0); got != tt.halted {
			t.Errorf("%s: halted %v, want %v", tt.name, got, tt.halted)
		}
		if got := tt.r.ResumeAt(t0); !got.Equal(tt.resume) {
			t.Errorf("%s: resume at %v, want %v", tt.name, got, tt.resume)
		}
	}
}

// TestTrackerBlock: a secondary limit's block is kept apart from the
// primary reading: it neither clobbers the reading nor is lost to a newer
// one, and the later of two blocks holds.
func TestTrackerBlock(t *testing.T) {
	t.Parallel()
	tr := ratelimit.NewTracker(newFakeStore(), ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	if _, ok := tr.Latest(installation); ok {
		t.Fatal("a reading before any was observed")
	}
	tr.Observe(installation, ratelimit.Reading{BlockedUntil: t0.Add(time.Minute)})
	got, ok := tr.Latest(installation)
	if !ok || !got.Halted(t0) || got.Known() {
		t.Fatalf("after a block alone: %+v, %v; want a halted reading with no primary fields", got, ok)
	}

	primary := ratelimit.Reading{Limit: 5000, Remaining: 4000, ResetAt: resetAt, ObservedAt: t0}
	tr.Observe(installation, primary)
	got, _ = tr.Latest(installation)
	if got.Remaining != 4000 || !got.BlockedUntil.Equal(t0.Add(time.Minute)) {
		t.Errorf("after a newer primary reading: %+v; want remaining 4000 and the block kept", got)
	}

	tr.Observe(installation, ratelimit.Reading{BlockedUntil: t0.Add(30 * time.Second)})
	got, _ = tr.Latest(installation)
	if got.Remaining != 4000 || !got.BlockedUntil.Equal(t0.Add(time.Minute)) {
		t.Errorf("after an earlier block: %+v; want the later block and the reading kept", got)
	}

	next := ratelimit.Reading{Limit: 5000, Remaining: 5000, ResetAt: resetAt.Add(time.Hour), ObservedAt: t0.Add(time.Second)}
	tr.Observe(installation, next)
	got, _ = tr.Latest(installation)
	if got.Remaining != 5000 || !got.BlockedUntil.Equal(t0.Add(time.Minute)) {
		t.Errorf("after a new window: %+v; want its budget and the block kept", got)
	}
}

// TestBlockIsShared: one process meets a secondary limit; another that
// asks the gate learns it from the shared item and stops calling, and the
// block is written once, however often its holder persists, and survives
// the primary readings written after it.
func TestBlockIsShared(t *testing.T) {
	t.Parallel()
	s, clk, a, b := twoProcesses()
	ctx := context.Background()

	a.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 4000, ResetAt: resetAt, ObservedAt: t0})
	until := ratelimit.BlockUntil(t0, 2*time.Minute)
	a.Observe(installation, ratelimit.Reading{BlockedUntil: until})
	for range 3 {
		if _, err := a.Persist(ctx, installation); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.blocks) != 1 || !s.blocks[0].Equal(until) {
		t.Errorf("blocks written %v, want one, until %v", s.blocks, until)
	}

	// A later primary reading of a's is written; the item keeps the block.
	clk.Advance(40 * time.Second)
	a.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 3900, ResetAt: resetAt, ObservedAt: clk.Now()})
	if _, err := a.Persist(ctx, installation); err != nil {
		t.Fatal(err)
	}
	if len(s.saves) < 2 || len(s.blocks) != 1 {
		t.Errorf("saves %d, blocks %d; want the new reading written and no second block", len(s.saves), len(s.blocks))
	}

	got, err := ratelimit.NewGate(b, 0).Reading(ctx, installation, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Halted(clk.Now()) || !got.ResumeAt(clk.Now()).Equal(until) || got.Remaining != 3900 {
		t.Errorf("the other process reads %+v; want halted until %v with the newest reading", got, until)
	}
	// b learnt the block from the item: it has nothing of its own to share.
	if wrote, err := b.Persist(ctx, installation); err != nil || len(s.blocks) != 1 {
		t.Errorf("the reader wrote (%v, %v), blocks %d; want no block written back", wrote, err, len(s.blocks))
	}

	clk.Advance(2 * time.Minute)
	if got, _ := b.Latest(installation); got.Halted(clk.Now()) {
		t.Errorf("still halted after the block: %+v", got)
	}
}

// TestRepeatedSecondaryLimitsWaitLonger: GitHub asks for exponentially
// longer waits while secondary limits continue. A limit met again soon
// after the last block ended doubles its length (at least GitHub's new
// Retry-After, at most MaxBlock); a refusal of a call made during a block
// (in flight when it began) is not a repeat, and after a quiet
// RepeatWindow the next block starts from GitHub's wait again.
func TestRepeatedSecondaryLimitsWaitLonger(t *testing.T) {
	t.Parallel()
	tr := ratelimit.NewTracker(newFakeStore(), ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	block := func(at time.Time, retryAfter time.Duration) ratelimit.Reading {
		tr.Observe(installation, ratelimit.Block(at, retryAfter))
		got, _ := tr.Latest(installation)
		return got
	}
	check := func(what string, got ratelimit.Reading, met time.Time, length time.Duration) {
		t.Helper()
		if got.BlockedFor != length || !got.BlockedUntil.Equal(met.Add(length)) {
			t.Errorf("%s: blocked for %s until %v, want %s from %v", what, got.BlockedFor, got.BlockedUntil, length, met)
		}
	}
	at := t0
	check("first", block(at, 0), at, time.Minute)
	// A call in flight when it began, refused meanwhile: GitHub's newer
	// wait holds, not doubled.
	at = at.Add(20 * time.Second)
	check("a call refused during it", block(at, 0), at, time.Minute)
	for i, want := range []time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute} {
		end, _ := tr.Latest(installation)
		at = end.BlockedUntil.Add(15 * time.Second) // the deferred jobs come back and are refused again
		check(fmt.Sprintf("repeat %d", i+1), block(at, 0), at, want)
	}
	end, _ := tr.Latest(installation)
	at = end.BlockedUntil.Add(time.Second)
	check("a longer Retry-After than the doubling", block(at, 30*time.Minute), at, 30*time.Minute)
	end, _ = tr.Latest(installation)
	at = end.BlockedUntil.Add(time.Second)
	check("doubling capped", block(at, 0), at, ratelimit.MaxBlock)
	end, _ = tr.Latest(installation)
	at = end.BlockedUntil.Add(ratelimit.RepeatWindow + time.Second)
	check("after a quiet window: GitHub's wait again", block(at, 0), at, time.Minute)
}

// TestRepeatDoublesAcrossProcesses: the length travels with the shared
// block, so a process that learnt another's block from the item doubles
// from it when it meets the limit again after the block.
func TestRepeatDoublesAcrossProcesses(t *testing.T) {
	t.Parallel()
	s, clk, a, b := twoProcesses()
	ctx := context.Background()
	a.Observe(installation, ratelimit.Block(t0, 0))
	if _, err := a.Persist(ctx, installation); err != nil {
		t.Fatal(err)
	}
	clk.Advance(ratelimit.MinBlock + 15*time.Second)
	if rd, err := ratelimit.NewGate(b, 0).Reading(ctx, installation, clk.Now()); err != nil || rd.Halted(clk.Now()) || rd.BlockedFor != ratelimit.MinBlock {
		t.Fatalf("b before its call: %+v (%v), want a's ended 1m block, not halted", rd, err)
	}
	b.Observe(installation, ratelimit.Block(clk.Now(), 0))
	if _, err := b.Persist(ctx, installation); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadRate(ctx, installation)
	if err != nil || got.BlockedFor != 2*ratelimit.MinBlock || !got.BlockedUntil.Equal(clk.Now().Add(2*ratelimit.MinBlock)) {
		t.Errorf("shared block %+v (%v), want b's repeat: 2m from now", got, err)
	}
}

// twoProcesses are two processes' trackers sharing one store, on one clock.
func twoProcesses() (*fakeStore, *clocktest.Clock, *ratelimit.Tracker, *ratelimit.Tracker) {
	s := newFakeStore()
	clk := clocktest.New(t0)
	return s, clk, ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), clk.Now), ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), clk.Now)
}

// TestBlockMergeKeepsTheDoublingLevel: the level a repeat doubles from
// survives a refusal met near the end of a long block, in one process
// (Observe), from the shared item (Current), and through a process that
// never read the item before writing its own block (Persist merges first);
// an old block long over does not lend its level to a fresh one.
func TestBlockMergeKeepsTheDoublingLevel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := ratelimit.Block(t0, 4*time.Minute) // a block already doubled to 4m
	nearEnd := ratelimit.Block(long.BlockedUntil.Add(-30*time.Second), 0)

	t.Run("one process", func(t *testing.T) {
		t.Parallel()
		tr := ratelimit.NewTracker(newFakeStore(), ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
		tr.Observe(installation, long)
		tr.Observe(installation, nearEnd)
		got, _ := tr.Latest(installation)
		if got.BlockedFor != 4*time.Minute || !got.BlockedUntil.Equal(nearEnd.BlockedUntil) {
			t.Errorf("after a refusal near the end: %+v, want its later end, at the 4m level", got)
		}
	})
	t.Run("from the shared item", func(t *testing.T) {
		t.Parallel()
		s, clk, a, _ := twoProcesses()
		a.Observe(installation, long)
		// Another process's fresh block, just after a's ended, is a repeat of it.
		fresh := ratelimit.Block(long.BlockedUntil.Add(10*time.Second), 0)
		s.items[installation] = fresh
		clk.Set(fresh.BlockedUntil.Add(-30 * time.Second))
		got, err := a.Current(ctx, installation)
		if err != nil || got.BlockedFor != 8*time.Minute || !got.BlockedUntil.Equal(blockStart(fresh).Add(8*time.Minute)) {
			t.Errorf("merged %+v (%v), want the repeat doubled to 8m from its start", got, err)
		}
	})
	t.Run("a writer that never read the item", func(t *testing.T) {
		t.Parallel()
		s, clk, a, b := twoProcesses()
		a.Observe(installation, long)
		if _, err := a.Persist(ctx, installation); err != nil {
			t.Fatal(err)
		}
		clk.Set(blockStart(nearEnd))
		b.Observe(installation, nearEnd)
		if _, err := b.Persist(ctx, installation); err != nil {
			t.Fatal(err)
		}
		if got := s.items[installation]; got.BlockedFor != 4*time.Minute || !got.BlockedUntil.Equal(nearEnd.BlockedUntil) {
			t.Errorf("stored %+v, want b's later end at a's 4m level", got)
		}
	})
	t.Run("an old block lends no level", func(t *testing.T) {
		t.Parallel()
		tr := ratelimit.NewTracker(newFakeStore(), ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
		fresh := ratelimit.Block(long.BlockedUntil.Add(ratelimit.RepeatWindow+time.Minute), 0)
		tr.Observe(installation, fresh)
		tr.Observe(installation, long) // learnt late, e.g. from an old shared item
		got, _ := tr.Latest(installation)
		if got.BlockedFor != ratelimit.MinBlock || !got.BlockedUntil.Equal(fresh.BlockedUntil) {
			t.Errorf("merged %+v, want the fresh 1m block alone", got)
		}
	})
}

// blockStart is when GitHub imposed r's block.
func blockStart(r ratelimit.Reading) time.Time { return r.BlockedUntil.Add(-r.BlockedFor) }

// TestACallThatGoesThroughEndsTheRepeats: a limit is "continuing" only
// while no call goes through: one answered without a rate limit after the
// block ended means it lifted, and the next limit starts from GitHub's
// wait again rather than doubling.
func TestACallThatGoesThroughEndsTheRepeats(t *testing.T) {
	t.Parallel()
	tr := ratelimit.NewTracker(newFakeStore(), ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	first := ratelimit.Block(t0, 0)
	tr.Observe(installation, first)
	ok := ratelimit.Reading{Limit: 5000, Remaining: 3999, ResetAt: resetAt, ObservedAt: first.BlockedUntil.Add(5 * time.Second), PassedAt: first.BlockedUntil.Add(5 * time.Second)}
	tr.Observe(installation, ok)
	next := ratelimit.Block(first.BlockedUntil.Add(20*time.Second), 0)
	tr.Observe(installation, next)
	got, _ := tr.Latest(installation)
	if got.BlockedFor != ratelimit.MinBlock || !got.BlockedUntil.Equal(next.BlockedUntil) {
		t.Errorf("after a call went through: %+v, want GitHub's plain minute, not doubled", got)
	}
}

// TestACallThatWentThroughElsewhereEndsTheRepeats: a call another process
// got through after the block is shared with its reading, so this process
// does not take its own next limit for a repeat.
func TestACallThatWentThroughElsewhereEndsTheRepeats(t *testing.T) {
	t.Parallel()
	s, clk, a, b := twoProcesses()
	ctx := context.Background()
	first := ratelimit.Block(t0, 0)
	a.Observe(installation, first)
	if _, err := a.Persist(ctx, installation); err != nil {
		t.Fatal(err)
	}
	// a's call goes through after the block, and a shares its reading.
	clk.Set(first.BlockedUntil.Add(ratelimit.DefaultPersistRule().MaxInterval))
	a.Observe(installation, ratelimit.Reading{Limit: 5000, Remaining: 3990, ResetAt: resetAt, ObservedAt: clk.Now(), PassedAt: clk.Now()})
	if wrote, err := a.Persist(ctx, installation); err != nil || !wrote {
		t.Fatalf("a shared its reading: %v, %v; want written", wrote, err)
	}
	if got := s.items[installation]; !got.PassedAt.Equal(clk.Now()) {
		t.Fatalf("stored passed_at %v, want %v", got.PassedAt, clk.Now())
	}
	// b reads the item, then meets a limit of its own.
	clk.Advance(5 * time.Second)
	if _, err := ratelimit.NewGate(b, 0).Reading(ctx, installation, clk.Now()); err != nil {
		t.Fatal(err)
	}
	b.Observe(installation, ratelimit.Block(clk.Now(), 0))
	if got, _ := b.Latest(installation); got.BlockedFor != ratelimit.MinBlock {
		t.Errorf("b's block %+v, want GitHub's plain minute: a call went through at a since the last block", got)
	}
}

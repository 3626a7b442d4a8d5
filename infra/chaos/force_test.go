package chaos

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/random"
)

// TestForceFirst: with ForceFirst, the first call faults, the first
// invocation is killed, the first delivery is duplicated, the first machine
// never boots and the second one's runner dies, whatever the draws (rates
// so low the draws alone would give none), and only once; an injection
// switched off stays off.
func TestForceFirst(t *testing.T) {
	t.Parallel()
	tiny := Config{ForceFirst: true, FaultRate: 1e-9, KillRate: 1e-9, DuplicateRate: 1e-9, NeverBootRate: 1e-9, DieRate: 1e-9, OutageWindow: time.Second}
	off := Config{ForceFirst: true, FaultRate: 0, KillRate: -1, DuplicateRate: -1, NeverBootRate: -1, DieRate: -1, OutageWindow: -1}
	unforced := tiny
	unforced.ForceFirst = false
	tests := []struct {
		name  string
		cfg   Config
		want  int // faults, kills, duplicates, never-booted and dead machines
		fates []fate
	}{
		{name: "forced", cfg: tiny, want: 1, fates: []fate{fateNeverBoots, fateDies, fateBoots, fateBoots}},
		{name: "switched off", cfg: off, want: 0, fates: []fate{fateBoots, fateBoots, fateBoots, fateBoots}},
		{name: "not forced", cfg: unforced, want: 0, fates: []fate{fateBoots, fateBoots, fateBoots, fateBoots}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := NewInjector(random.New(1), max(tc.cfg.FaultRate, 0), nil)
			fl := newFleet(1)
			plans := Plan(random.New(2), 10)
			var f forced
			f.arm(tc.cfg, in, fl, plans, 40*time.Millisecond)

			faults := 0
			for range 100 {
				if _, ok := in.Draw(TargetDynamoDB, "test"); ok {
					faults++
				}
			}
			kills, dups := 0, 0
			for range 100 {
				if f.kill.CompareAndSwap(true, false) {
					kills++
				}
				if f.duplicate.CompareAndSwap(true, false) {
					dups++
				}
			}
			for name, got := range map[string]int{"faults": faults, "kills": kills, "duplicates": dups} {
				if got != tc.want {
					t.Errorf("%s = %d, want %d", name, got, tc.want)
				}
			}
			for i, want := range tc.fates {
				got, _ := fl.draw(int64(i+1), max(tc.cfg.NeverBootRate, 0), max(tc.cfg.DieRate, 0))
				if got != want {
					t.Errorf("machine %d: fate %s, want %s", i+1, got, want)
				}
			}
			if got := f.outage != nil; got != (tc.want == 1) {
				t.Errorf("forced outage armed: %v, want %v", got, tc.want == 1)
			}
		})
	}
}

// TestOutagePlan: the forced outage begins with the first Plain job planned
// at or after OutageAt (only the redeliverer can bring it in), else the first
// job then, else the last.
func TestOutagePlan(t *testing.T) {
	t.Parallel()
	mk := func(scripts ...Script) []*plan {
		out := make([]*plan, len(scripts))
		for i, s := range scripts {
			out[i] = &plan{Job: Job{ID: int64(i)}, Script: s, rnd: rand.New(rand.NewPCG(1, 2))}
		}
		return out
	}
	step := 40 * time.Millisecond
	tests := []struct {
		name    string
		scripts []Script
		at      time.Duration
		want    int64
	}{
		{name: "first plain at or after", scripts: []Script{Plain, Early, Finished, Plain, Plain}, at: 2 * step, want: 3},
		{name: "plain exactly at", scripts: []Script{Plain, Early, Plain}, at: 2 * step, want: 2},
		{name: "no plain after: first job then", scripts: []Script{Plain, Early, Cancelled}, at: step, want: 1},
		{name: "none after: the last job", scripts: []Script{Plain, Early}, at: 10 * step, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := outagePlan(mk(tc.scripts...), step, tc.at).Job.ID; got != tc.want {
				t.Errorf("outage plan = job %d, want %d", got, tc.want)
			}
		})
	}
}

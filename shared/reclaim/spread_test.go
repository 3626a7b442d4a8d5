package reclaim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// slots returns the slot index of each delay: floor(d × m / W).
func slots(ds []time.Duration) []int {
	m := len(ds)
	w := Window(m)
	out := make([]int, m)
	for i, d := range ds {
		out[i] = int(int64(d) * int64(m) / int64(w))
	}
	return out
}

// maxPerSecond is the most delays in any window [t, t+1s); the maximum is
// reached by a window starting at one of the delays.
func maxPerSecond(ds []time.Duration) int {
	s := slices.Clone(ds)
	slices.Sort(s)
	most := 0
	for i := range s {
		n := 0
		for j := i; j < len(s) && s[j] < s[i]+time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

func TestWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    int
		want time.Duration
	}{
		{name: "none", m: 0, want: 0},
		{name: "one", m: 1, want: 2 * time.Second},
		{name: "ten", m: 10, want: 20 * time.Second},
		{name: "fifteen reaches the cap", m: 15, want: 30 * time.Second},
		{name: "sixteen is capped", m: 16, want: 30 * time.Second},
		{name: "thousands are capped", m: 5000, want: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Window(tt.m); got != tt.want {
				t.Errorf("Window(%d) = %s, want %s", tt.m, got, tt.want)
			}
		})
	}
}

func TestSpreadEdges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    int
		want []time.Duration
	}{
		{name: "no jobs, no delays", m: 0, want: nil},
		{name: "negative count, no delays", m: -3, want: nil},
		{name: "a single job recovers at once", m: 1, want: []time.Duration{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(50) {
				got := Spread(tt.m, seeded(seed))
				if !slices.Equal(got, tt.want) {
					t.Fatalf("seed %d: Spread(%d) = %v, want %v", seed, tt.m, got, tt.want)
				}
			}
		})
	}
}

// TestSpreadProperties checks the contract over m = 2…200 and many seeds:
// every delay in [0, W), exactly one job per slot, at most 3 jobs in any
// 1 s window (also after SQS's round-up to whole seconds) for m ≤ 60.
func TestSpreadProperties(t *testing.T) {
	t.Parallel()
	for m := 2; m <= 200; m++ {
		w := Window(m)
		for seed := range uint64(60) {
			ds := Spread(m, seeded(seed))
			if len(ds) != m {
				t.Fatalf("m=%d seed=%d: got %d delays, want %d", m, seed, len(ds), m)
			}
			for i, d := range ds {
				if d < 0 || d >= w {
					t.Fatalf("m=%d seed=%d: delay[%d] = %s, want in [0, %s)", m, seed, i, d, w)
				}
			}
			ss := slots(ds)
			sorted := slices.Clone(ss)
			slices.Sort(sorted)
			for k, s := range sorted {
				if s != k {
					t.Fatalf("m=%d seed=%d: slots %v, want each of 0…%d exactly once", m, seed, ss, m-1)
				}
			}
			if m > 60 {
				continue
			}
			if got := maxPerSecond(ds); got > 3 {
				t.Fatalf("m=%d seed=%d: %d jobs in one 1 s window, want ≤ 3 (delays %v)", m, seed, got, ds)
			}
			perSecond := map[time.Duration]int{}
			for _, d := range ds {
				perSecond[(d+time.Second-1)/time.Second]++ // SQS DelaySeconds
			}
			for sec, n := range perSecond {
				if n > 3 {
					t.Fatalf("m=%d seed=%d: %d jobs get DelaySeconds=%d, want ≤ 3", m, seed, n, sec)
				}
			}
		}
	}
}

// TestSpreadOrderChanges: the slot order is random on every pass, so no job
// is always first. Two passes with different randomness assign slots
// differently (for m ≥ 3 several seeds give several orders).
func TestSpreadOrderChanges(t *testing.T) {
	t.Parallel()
	for m := 3; m <= 200; m++ {
		orders := map[string]bool{}
		firstSlots := map[int]bool{}
		for seed := range uint64(12) {
			ss := slots(Spread(m, seeded(seed)))
			orders[fmtInts(ss)] = true
			firstSlots[ss[0]] = true
		}
		if len(orders) < 2 {
			t.Errorf("m=%d: 12 seeds gave %d slot assignment(s), want several", m, len(orders))
		}
		if len(firstSlots) < 2 {
			t.Errorf("m=%d: job 0 always got slot %v, want it to move between passes", m, firstSlots)
		}
	}
	a, b := slots(Spread(10, seeded(1))), slots(Spread(10, seeded(2)))
	if slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 gave the same assignment %v, want different", a)
	}
}

// TestSpreadOffsetsAreRandom: the offset inside a slot comes from Float64,
// so a job is not pinned to its slot's start.
func TestSpreadOffsetsAreRandom(t *testing.T) {
	t.Parallel()
	ds := Spread(4, fixedRand{perm: []int{2, 0, 3, 1}, f: 0.5})
	want := []time.Duration{5 * time.Second, 1 * time.Second, 7 * time.Second, 3 * time.Second}
	if !slices.Equal(ds, want) {
		t.Errorf("Spread(4) = %v, want %v (slot start + half a 2 s slot)", ds, want)
	}
	ds = Spread(2, fixedRand{perm: []int{1, 0}, f: 0.9999999999999999})
	if ds[0] >= 4*time.Second || ds[1] >= 2*time.Second {
		t.Errorf("Spread(2) with Float64 ≈ 1 = %v, want each delay below its slot's end", ds)
	}
}

type fixedRand struct {
	perm []int
	f    float64
}

func (r fixedRand) Perm(int) []int   { return slices.Clone(r.perm) }
func (r fixedRand) Float64() float64 { return r.f }
func (r fixedRand) IntN(n int) int   { return int(r.f * float64(n)) } // completes random.Source; Spread draws none

func fmtInts(xs []int) string {
	b := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		b = append(b, byte(x), byte(x>>8), ',')
	}
	return string(b)
}

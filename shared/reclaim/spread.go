package reclaim

import (
	"github.com/ghclaim/ghclaim/shared/random"
	"math/bits"
	"time"
)

// Spread parameters (DESIGN.md, reclaimer).
const (
	// SlotPerJob is the window each released job adds.
	SlotPerJob = 2 * time.Second
	// MaxWindow caps the window: past it, recovering quickly matters more
	// than thinning the load further.
	MaxWindow = 30 * time.Second
)

// Window is the span Spread uses for m jobs: min(m × SlotPerJob, MaxWindow).
func Window(m int) time.Duration {
	if m <= 0 {
		return 0
	}
	if m >= int(MaxWindow/SlotPerJob) {
		return MaxWindow
	}
	return time.Duration(m) * SlotPerJob
}

// Spread returns the delays of m jobs released at once; result i is the
// delay of job i.
//
// Why: after an outage the reclaimer (or a claimer hitting its deadline)
// releases many jobs in the same instant. Sent with no delay they would
// start M claimers at once, M cold starts and M GitHub calls that time out
// together, fail together and come back together on the same ladder rung:
// the timeout/retry loop feeds itself. So the window W = Window(m) is cut
// into m equal slots, a random permutation assigns slots to jobs (no job
// is always first or always last across passes) and each job gets a
// uniformly random offset inside its slot. A single job is the common case
// (one claimer died) and gets exactly 0: there is no herd to thin, and it
// must recover at once.
//
// Density: each slot holds exactly one job, and for m ≤ 60 a slot is at
// least 0.5 s wide (2 s for m ≤ 15, 30 s/m ≥ 0.5 s for 15 < m ≤ 60). A
// 1 s window touching four consecutive slots would contain the two middle
// ones whole, ≥ 1 s of slots strictly inside a 1 s span: impossible. So no
// 1 s window holds more than 3 jobs. SQS rounds delays up to whole seconds;
// the delays that round to k lie in (k-1 s, k s], again a 1 s span, so the
// bound survives the rounding.
//
// rnd must not be nil. Spread does no I/O and keeps no state.
func Spread(m int, rnd random.Source) []time.Duration {
	if m <= 0 {
		return nil
	}
	out := make([]time.Duration, m)
	if m == 1 {
		return out
	}
	w := uint64(Window(m))
	for i, slot := range rnd.Perm(m) {
		// Integer slot bounds, so slots tile [0, W) exactly, with no
		// float rounding pushing a job into its neighbour's slot.
		lo := mulDiv(w, uint64(slot), uint64(m))
		hi := mulDiv(w, uint64(slot)+1, uint64(m))
		d := lo + uint64(rnd.Float64()*float64(hi-lo))
		if d >= hi { // Float64 < 1, but the product can round up
			d = hi - 1
		}
		out[i] = time.Duration(d)
	}
	return out
}

// mulDiv is a×b/c without overflow (a×b/c < a here, so it fits).
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}

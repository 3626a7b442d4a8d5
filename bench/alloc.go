package bench

import "runtime"

// allocs runs f runs times and returns the mean number of heap
// allocations and bytes per run, for the whole process (the HTTP client's
// goroutines included: they are part of what a delivery costs). Unlike
// testing.AllocsPerRun it keeps GOMAXPROCS, so the transport behaves as it
// does in the other measurements, and it stops at the first error.
func allocs(runs int, f func() error) (float64, float64, error) {
	if runs <= 0 {
		return 0, 0, nil
	}
	if err := f(); err != nil { // warm: first-use allocations are not per delivery
		return 0, 0, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	runtime.ReadMemStats(&after)
	return round(float64(after.Mallocs-before.Mallocs)/float64(runs), 1),
		round(float64(after.TotalAlloc-before.TotalAlloc)/float64(runs), 0), nil
}

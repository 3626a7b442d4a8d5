package emulator

import (
	"strings"
	"sync"
	"testing"
)

// RoundIDs apart are the job ids (and installation ids) of two runs of a
// test on an emulator that outlives them: above every id a test picks, so
// no run meets a record of an earlier one, and a multiple of 64, so an id
// keeps its sweep shard under every shard count the tests use.
const RoundIDs = 100_000_000

// runs counts the runs of each test function in this process.
var runs = struct {
	sync.Mutex
	n map[string]int64
}{n: map[string]int64{}}

// Round is which run of t's test function this is in the process, 0 for
// the first: go test -count=N runs every test N times against an emulator
// and stack a TestMain started, whose records, messages and resources
// outlive a run. Call it once per run, from the test function itself.
func Round(t *testing.T) int64 {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("Round called from the subtest %s: call it once, from the test function", t.Name())
	}
	runs.Lock()
	defer runs.Unlock()
	r := runs.n[t.Name()]
	runs.n[t.Name()] = r + 1
	return r
}

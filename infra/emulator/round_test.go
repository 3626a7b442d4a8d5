package emulator

import "testing"

// TestRoundCountsRunsOfATestFunction: each call from one test function is
// the next run, as go test -count=N makes them (this test's own runs
// included, so it counts from its first answer).
func TestRoundCountsRunsOfATestFunction(t *testing.T) {
	first := Round(t)
	for i := int64(1); i < 3; i++ {
		if got := Round(t); got != first+i {
			t.Fatalf("call %d: Round = %d, want %d", i+1, got, first+i)
		}
	}
}

package cli

import (
	"fmt"
	"strings"
	"testing"
)

// TestRetryIDsFromStdinAreNotCut: "retry -" read at most 1 MiB of standard
// input and parsed what it got: a longer list lost its tail silently, and
// the id the cut fell in became another, shorter id (a different job, or
// none), retried in its place. A list that does not fit is refused whole,
// before anything is written.
func TestRetryIDsFromStdinAreNotCut(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	want := map[int64]bool{}
	for i := int64(0); b.Len() <= 1<<20; i++ {
		id := 1000000000000 + i
		want[id] = true
		fmt.Fprintf(&b, "%d\n", id)
	}
	c := New(Config{Stdin: strings.NewReader(b.String())})
	ids, err := c.retryIDs([]string{"-"})
	if err != nil {
		return // refused whole: nothing retried
	}
	for _, id := range ids {
		if !want[id] {
			t.Fatalf("retry would retry job %d, which is not in the list (an id cut at the read limit)", id)
		}
	}
	if len(ids) != len(want) {
		t.Fatalf("got %d ids, want all %d or a refusal", len(ids), len(want))
	}
}

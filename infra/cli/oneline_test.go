package cli

import (
	"testing"
	"unicode/utf8"
)

// oneLine cuts at a byte offset: a last error with non-ASCII text (GitHub
// and AWS messages quote names, “curly quotes”, accents) is printed with
// half a character, invalid UTF-8 on the operator's terminal.
func TestOneLineKeepsUTF8(t *testing.T) {
	t.Parallel()
	in := "422 Validation Failed: runner group “linux-éé” not found in the organisation’s settings"
	for max := 20; max <= 60; max++ {
		if got := oneLine(in, max); !utf8.ValidString(got) {
			t.Fatalf("oneLine(%q, %d) = %q: not valid UTF-8", in, max, got)
		}
	}
}

package names

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestSafeIsTheExpressionsItReplaced: Safe answers as the regular
// expressions it replaced did, on edge cases and on 20,000 random strings
// per form (lengths around the bound, bytes from the class, its neighbours,
// a newline and non-ASCII).
func TestSafeIsTheExpressionsItReplaced(t *testing.T) {
	forms := []struct {
		max        int
		alnumFirst bool
		re         *regexp.Regexp
	}{
		{40, true, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$`)},  // pool names
		{100, true, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)}, // runner names, owners
		{100, false, regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)},          // repository names
	}
	alphabet := []byte("aZ09-_./:@ \n\x00\xff" + "é")
	edges := []string{"", "a", "-", "_a", ".a", "a-", "a\n", "\na", "a b", "a/b", "é", "A.B_C-D",
		strings.Repeat("a", 39), strings.Repeat("a", 40), strings.Repeat("a", 41),
		strings.Repeat("a", 99), strings.Repeat("a", 100), strings.Repeat("a", 101), "-" + strings.Repeat("a", 99)}
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range forms {
		cases := append([]string(nil), edges...)
		for range 20000 {
			n := r.IntN(f.max + 3)
			b := make([]byte, n)
			for i := range b {
				b[i] = "abcXYZ019-_."[r.IntN(12)]
			}
			if n > 0 && r.IntN(3) == 0 { // one byte from anywhere
				b[r.IntN(n)] = alphabet[r.IntN(len(alphabet))]
			}
			cases = append(cases, string(b))
		}
		accepted := 0
		for _, s := range cases {
			got, want := Safe(s, f.max, f.alnumFirst), f.re.MatchString(s)
			if got != want {
				t.Fatalf("Safe(%q, %d, %v) = %v, %s says %v", s, f.max, f.alnumFirst, got, f.re, want)
			}
			if got {
				accepted++
			}
		}
		if accepted < len(cases)/10 || accepted > len(cases)*9/10 {
			t.Errorf("%s: %d of %d cases accepted: the cases do not test both answers", f.re, accepted, len(cases))
		}
	}
}

func BenchmarkSafe(b *testing.B) {
	name := "ghclaim-runner-1234567890-" + strings.Repeat("x", 40)
	for range b.N {
		if !Safe(name, 100, true) {
			b.Fatal(name)
		}
	}
}

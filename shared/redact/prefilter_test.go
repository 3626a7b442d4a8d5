package redact

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// everyPattern is String without its prefilters: all four expressions on
// every string. String must answer exactly as it does.
func everyPattern(s string) string {
	if len(s) < 16 {
		return s
	}
	s = pemKey.ReplaceAllString(s, Mask)
	s = ghToken.ReplaceAllString(s, Mask)
	s = jwt.ReplaceAllString(s, Mask)
	return longRun.ReplaceAllStringFunc(s, maskRun)
}

// fragments are the pieces the corpus is built of: each pattern's
// openings, near misses of them, separators and runs.
var fragments = []string{
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "ghx_", "gh", "g", "h_", "github_pat_", "github_pa", "github_", "ggh",
	"eyJ", "ey", "J", "eyj",
	"-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "-----BEGIN ", "-----BEGIN CERTIFICATE-----",
	"\n", " ", "-", ".", "_", ":", "/", "=", "+", "[", "é", "\"",
	"AbC", "xyz", "0123456789", "Zz9",
}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"

// corpus is n strings of fragments and runs of longRun's alphabet (up to
// 40 characters, so both sides of 32), from a fixed seed.
func corpus(n int) []string {
	r := rand.New(rand.NewPCG(11, 2026))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			if r.IntN(3) == 0 {
				for range 1 + r.IntN(40) {
					b.WriteByte(alphabet[r.IntN(len(alphabet))])
				}
				continue
			}
			b.WriteString(fragments[r.IntN(len(fragments))])
		}
		out[i] = b.String()
	}
	return out
}

// TestPrefiltersChangeNothing: String, which runs a pattern only when its
// prefilter lets the string through, masks exactly what running every
// pattern masks, over a corpus in which each pattern matches many times
// (and long runs both with and without all three character classes).
func TestPrefiltersChangeNothing(t *testing.T) {
	t.Parallel()
	matched := map[string]int{}
	for _, s := range corpus(30000) {
		if got, want := String(s), everyPattern(s); got != want {
			t.Fatalf("String(%q)\n got %q\nwant %q (every pattern run)", s, got, want)
		}
		if len(s) < 16 {
			continue
		}
		for name, re := range map[string]interface{ MatchString(string) bool }{"pem": pemKey, "token": ghToken, "jwt": jwt} {
			if re.MatchString(s) {
				matched[name]++
			}
		}
		switch {
		case mayHoldRun(s):
			matched["masked run"]++
		case longRun.MatchString(s):
			matched["kept run"]++
		}
	}
	for _, name := range []string{"pem", "token", "jwt", "masked run", "kept run"} {
		if matched[name] < 100 {
			t.Errorf("the corpus matched %s %d times: too few to test its prefilter", name, matched[name])
		}
	}
}

// FuzzPrefiltersChangeNothing is TestPrefiltersChangeNothing on inputs
// the fuzzer makes (go test -fuzz FuzzPrefiltersChangeNothing ./shared/redact).
func FuzzPrefiltersChangeNothing(f *testing.F) {
	for _, s := range corpus(64) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := String(s), everyPattern(s); got != want {
			t.Fatalf("String(%q)\n got %q\nwant %q (every pattern run)", s, got, want)
		}
	})
}

// ordinary are attributes of ordinary lines: a delivery GUID, a URL, a
// runner name with an outcome. No pattern masks anything in them.
var ordinary = []string{
	"e2c2a976-a5e7-4cd5-88a0-41979c3e51ef",
	"https://api.github.com/repos/octo-org/hello-world/actions/runs/10000000042",
	"linux-x64-1000000042-r2 claimed_reused",
}

// BenchmarkString is String on ordinary attributes; BenchmarkEveryPattern
// is what they cost without the prefilters.
func BenchmarkString(b *testing.B) {
	for b.Loop() {
		for _, s := range ordinary {
			_ = String(s)
		}
	}
}

func BenchmarkEveryPattern(b *testing.B) {
	for b.Loop() {
		for _, s := range ordinary {
			_ = everyPattern(s)
		}
	}
}

// BenchmarkName is Name on the names a decision line carries.
func BenchmarkName(b *testing.B) {
	names := []string{"linux-x64", "BuildFarm-Ubuntu22-Large-29679449123", "ContosoCorp/Platform-Runner-Images2"}
	for b.Loop() {
		for _, s := range names {
			_ = Name(s)
		}
	}
}

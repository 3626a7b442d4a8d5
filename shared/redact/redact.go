// Package redact removes secret-shaped text from strings bound for a log
// line or a job record: GitHub tokens, JWTs (the App's), PEM private keys
// and long credential-like runs such as a JIT config or key material.
//
// Why: the functions never log a secret they hold, but an upstream error
// text can carry one they did not choose to write (a proxy's or GitHub's
// message quoting the Authorization header, an AWS validation message
// quoting a parameter value). Those texts are logged and stored as
// last_error, so they pass through String first (shared/failure for
// Reason, shared/obs for every log attribute).
//
// Decisions:
//   - Shapes, not values: this package holds no secret and needs none, so
//     it works on any error from any dependency.
//   - A "long run" is 32 or more characters of the base64/base64url/hex
//     alphabet with an upper-case letter, a lower-case letter and a digit:
//     random credentials have all three; ids, ARNs, paths and words do not
//     reach that length without a separator. An AWS request id of that
//     shape is redacted too, an acceptable loss.
//   - It must never do I/O or keep state.
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces each secret-shaped part.
const Mask = "[redacted]"

var (
	pemKey = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)(-----END [A-Z ]*PRIVATE KEY-----|$)`)
	// GitHub's token prefixes (ghp_, gho_, ghu_, ghs_, ghr_) and
	// fine-grained personal access tokens.
	ghToken = regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9_]+|github_pat_[A-Za-z0-9_]+)`)
	// A JWT, or any base64url JSON object: header "eyJ", then its parts.
	jwt     = regexp.MustCompile(`eyJ[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]*){0,2}`)
	longRun = regexp.MustCompile(`[A-Za-z0-9+/=_\-]{32,}`)
)

// String returns s with every secret-shaped part replaced by Mask.
//
// Each pattern runs only when s holds what every match of it must (its
// fixed opening, or a long run mixing case and digits): most strings a
// log line carries (ids, names, outcomes, URLs) hold none, and String runs
// on every attribute of every line, so they cost a scan instead of four
// regular expressions. The result is the same as running all four.
func String(s string) string {
	if len(s) < 16 {
		return s
	}
	if strings.Contains(s, "-----BEGIN ") {
		s = pemKey.ReplaceAllString(s, Mask)
	}
	if mayHoldToken(s) {
		s = ghToken.ReplaceAllString(s, Mask)
	}
	if strings.Contains(s, "eyJ") {
		s = jwt.ReplaceAllString(s, Mask)
	}
	if !mayHoldRun(s) {
		return s
	}
	return longRun.ReplaceAllStringFunc(s, maskRun)
}

// Name returns s, a text that names a pool, a runner, an account or a
// repository, as it is when it is shaped like such a name (a letter or
// digit, then up to 99 letters, digits, '_', '.' or '-'; a repository's
// is an owner so shaped and a name of 1 to 100 of those characters,
// joined by one '/') and holds no token or JWT where String would find
// one (a token prefix at a word's start, "eyJ" at the start of the text
// or of a word); else String(s). A long name mixing case and digits (the
// pool "BuildFarm-Ubuntu22-Large", its runner
// "BuildFarm-Ubuntu22-Large-29679449123", the repository
// "ContosoCorp/Platform-Runner-Images2") has the shape String masks as a
// credential, and a log line that hides which runner or repository it
// means is no use. Some secrets are not name-shaped or are caught (a JIT
// config is longer than any name, a PEM key holds spaces, a token or a
// JWT starts with its opening), but not all: an AWS secret access key
// without '+' is name-shaped, with one '/' repository-shaped. Name is
// only for attributes that hold names by construction (shared/obs's
// list), never for arbitrary text.
func Name(s string) string {
	owner, name, repo := strings.Cut(s, "/")
	if nameShaped(owner, false) && (!repo || nameShaped(name, true)) &&
		!(mayHoldToken(s) && ghToken.MatchString(s)) && !(strings.Contains(s, "eyJ") && jwtWord.MatchString(s)) {
		return s
	}
	return String(s)
}

// jwtWord is a JWT's opening at the start of a text or of a word in it.
var jwtWord = regexp.MustCompile(`(^|[^A-Za-z0-9])eyJ`)

// nameShaped reports whether s has the shape of a pool's, runner's or
// account's name (shared/pool's grammar; GitHub's for accounts), or, with
// anyLead, of a repository's name (which may start with '.', '_' or '-':
// ".github").
func nameShaped(s string, anyLead bool) bool {
	if len(s) == 0 || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (i > 0 || anyLead) && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// maskRun is Mask for a run with an upper-case letter, a lower-case letter
// and a digit, else the run.
func maskRun(run string) string {
	if strings.ContainsAny(run, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") &&
		strings.ContainsAny(run, "abcdefghijklmnopqrstuvwxyz") &&
		strings.ContainsAny(run, "0123456789") {
		return Mask
	}
	return run
}

// mayHoldToken reports whether s holds an opening ghToken matches:
// "github_pat_", or "gh" then one of p, o, u, s, r then "_".
func mayHoldToken(s string) bool {
	if strings.Contains(s, "github_pat_") {
		return true
	}
	for i := strings.Index(s, "gh"); i >= 0; {
		rest := s[i+2:]
		if len(rest) >= 2 && strings.IndexByte("pousr", rest[0]) >= 0 && rest[1] == '_' {
			return true
		}
		j := strings.Index(rest, "gh")
		if j < 0 {
			return false
		}
		i += 2 + j
	}
	return false
}

// mayHoldRun reports whether s holds a run longRun matches whose
// characters String masks: 32 or more in a row of its alphabet, with an
// upper-case letter, a lower-case letter and a digit among them. (A
// greedy run of one character class matches whole maximal runs.) UUIDs
// and URL paths are long runs without all three.
func mayHoldRun(s string) bool {
	const upper, lower, digit = 1, 2, 4
	run, has := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z':
			has |= upper
		case 'a' <= c && c <= 'z':
			has |= lower
		case '0' <= c && c <= '9':
			has |= digit
		case c == '+' || c == '/' || c == '=' || c == '_' || c == '-':
		default:
			run, has = 0, 0
			continue
		}
		if run++; run >= 32 && has == upper|lower|digit {
			return true
		}
	}
	return false
}

// inputRun is a run long enough to be a credential whatever its case mix.
var inputRun = regexp.MustCompile(`[A-Za-z0-9+/=_]{20,}`)

// Input returns s, a text that quotes configuration input back (a start-up
// error describing a bad value), with String's redactions and every run of
// 20 or more characters of the credential alphabet masked, whatever its
// case mix: a secret pasted into the wrong variable must not be quoted, and
// a webhook secret as GitHub generates it (40 lower-case hex characters)
// has no upper-case letter, so String's mixed-case rule lets it through.
// Bad values worth quoting (a duration, a number, a level, a URL) are
// short or broken up by '.', ':', '-' or ' ' ('-' is left out of the run so
// that UUIDs and hyphenated names survive; hex and base64 secrets have none).
func Input(s string) string {
	return inputRun.ReplaceAllString(String(s), Mask)
}

// Error returns err with its text passed through String, for an error a
// handler returns (Lambda logs it); errors.Is and errors.As still see err.
// Error(nil) is nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return redacted{err}
}

type redacted struct{ err error }

func (r redacted) Error() string { return String(r.err.Error()) }
func (r redacted) Unwrap() error { return r.err }

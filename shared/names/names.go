// Package names checks the short names ghclaim takes from its configuration
// and from GitHub's payloads (pool, runner, owner and repository names):
// ASCII letters, digits, '-', '_' and '.', up to a length.
//
// A loop, not a regular expression: Go compiles a counted repeat such as
// {0,99} into a hundred copies of its class, and the four such expressions
// the functions held cost 2,000 allocations and 1.5–2 ms of every cold start
// (GODEBUG=inittrace=1), before any name was checked.
package names

// Safe reports whether s is 1 to max bytes of ASCII letters, digits, '-',
// '_' and '.', the first a letter or digit when alnumFirst.
func Safe(s string, max int, alnumFirst bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '_' || c == '.':
			if i == 0 && alnumFirst {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Package clock owns the one clock type of the tree: a Func returning now.
//
// Time is an input (STYLE.md 4): every component that reads the time takes
// a Func, production passes time.Now (or nil, which constructors read as
// time.Now), tests pass infra/clocktest's manual clock. A function type
// rather than an interface, so time.Now and a test clock's method value
// are both a Func with no adapter. Callers read it once per invocation and
// pass the instant down.
package clock

import "time"

// Func returns the current instant.
type Func func() time.Time

// Or returns f, or time.Now when f is nil: the one place a default clock
// is chosen.
func Or(f Func) Func {
	if f == nil {
		return time.Now
	}
	return f
}

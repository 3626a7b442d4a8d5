// Package clock owns the one clock type of the tree: a Func returning now.
//
// Time is an input (STYLE.md 4): every component that reads the time takes
// a Func, production passes time.Now (or nil, which constructors read as
// time.Now), tests pass infra/clocktest's manual clock. A function type
// rather than an interface, so time.Now and a test clock's method value
// are both a Func with no adapter. Callers read it once per invocation and
// pass the instant down.
package clock

import (
	"context"
	"time"
)

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

// Sleep waits d, or returns ctx's error as soon as ctx is done: the one
// real wait, for the places that hold on purpose (a batch to its second, a
// retry of unprocessed keys); tests inject their own.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

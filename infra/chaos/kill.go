package chaos

import (
	"context"
	"runtime"
	"sync"
)

// Invocation is one function invocation that may be killed. A kill ends the
// goroutine that reached the kill point (runtime.Goexit, nothing after it
// runs), cancels the invocation's context, and makes every later call of the
// invocation fail without reaching its service: what is left of a Lambda
// that crashed or timed out.
type Invocation struct {
	in *Injector

	mu     sync.Mutex
	calls  int
	killAt int  // 1-based call number; 0: never
	after  bool // kill after the call reached the service
	killed bool
	cancel context.CancelFunc
}

// NewInvocation returns an invocation that is killed at its killAt-th
// external call (0: never), after that call took effect when after is set.
// cancel cancels the invocation's context.
func NewInvocation(in *Injector, killAt int, after bool, cancel context.CancelFunc) *Invocation {
	return &Invocation{in: in, killAt: killAt, after: after, cancel: cancel}
}

// Killed reports whether the invocation was killed.
func (v *Invocation) Killed() bool {
	if v == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.killed
}

type invocationKey struct{}

// WithInvocation returns ctx carrying v, so the decorators find the
// invocation a call belongs to.
func WithInvocation(ctx context.Context, v *Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, v)
}

func invocationFrom(ctx context.Context) *Invocation {
	v, _ := ctx.Value(invocationKey{}).(*Invocation)
	return v
}

// step is called at the start of every external call. It returns
// context.Canceled when the invocation is already dead, and reports
// whether this call is the kill point (and whether to kill before it).
func (v *Invocation) step() (dead error, killBefore, killAfter bool) {
	if v == nil {
		return nil, false, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.killed {
		return context.Canceled, false, false
	}
	v.calls++
	if v.killAt == 0 || v.calls != v.killAt {
		return nil, false, false
	}
	return nil, !v.after, v.after
}

// kill ends the calling goroutine; it never returns.
func (v *Invocation) kill() {
	v.mu.Lock()
	v.killed = true
	v.mu.Unlock()
	if v.in != nil {
		v.in.countKill()
	}
	v.cancel()
	runtime.Goexit()
}

// do runs one external call of target t through the injector and the
// invocation's kill point, counted for caller. f performs the real call.
func do[T any](ctx context.Context, in *Injector, t Target, caller, op string, f func(context.Context) (T, error)) (T, error) {
	var zero T
	v := invocationFrom(ctx)
	dead, killBefore, killAfter := v.step()
	if dead != nil {
		return zero, dead
	}
	if killBefore {
		v.kill()
	}
	var kind Kind
	var fault bool
	if in != nil { // nil: a kill point only (faults come from elsewhere)
		kind, fault = in.Draw(t, caller)
	}
	if fault && kind != AfterEffect {
		if killAfter {
			v.kill()
		}
		return zero, errorFor(t, kind, op)
	}
	out, err := f(ctx)
	if killAfter {
		v.kill()
	}
	if fault && err == nil {
		return zero, errorFor(t, kind, op)
	}
	return out, err
}

package ghapp_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// readings records what rate transports observe, in order.
type readings struct {
	mu   sync.Mutex
	list []ratelimit.Reading
}

func (r *readings) Observe(_ int64, rd ratelimit.Reading) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rd)
}

// all returns a copy of what was observed so far.
func (r *readings) all() []ratelimit.Reading {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ratelimit.Reading(nil), r.list...)
}

// wrap is a Config.Wrap that records into r, timed by now.
func (r *readings) wrap(now clock.Func) func(int64, http.RoundTripper) http.RoundTripper {
	return func(id int64, base http.RoundTripper) http.RoundTripper {
		return ratelimit.NewTransport(base, id, r, now)
	}
}

// setupAhead is setup with the stand-in and the client on one clock far
// ahead of the wall clock, by which go-github times its own memory of a
// limit (a reset an hour after this clock is still ahead of it), and the
// installations' and the App's rate transports recording into seen.
func setupAhead(t *testing.T, fake ...ghfake.Option) (f fixture, clk *clocktest.Clock, seen *readings) {
	t.Helper()
	clk, seen = clocktest.New(time.Date(2100, 1, 2, 3, 4, 5, 0, time.UTC)), &readings{}
	f = setup(t, option{
		fake: append([]ghfake.Option{ghfake.WithClock(clk.Now)}, fake...),
		cfg: func(c *ghapp.Config) {
			c.Now, c.Wrap = clk.Now, seen.wrap(clk.Now)
			c.WrapApp = func(base http.RoundTripper) http.RoundTripper { return seen.wrap(clk.Now)(0, base) }
		},
	})
	return f, clk, seen
}

package ghapp_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// clocked is a fixture whose client and stand-in share a manual clock.
func clocked(t *testing.T) (fixture, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	f := setup(t, option{
		fake: []ghfake.Option{ghfake.WithClock(clk.Now)},
		cfg:  func(c *ghapp.Config) { c.Now = clk.Now },
	})
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
	return f, clk
}

// anyCall is one of the installation's calls, in turn: the claimer's
// check and registration, the reclaimer's runner lookup, the janitor's
// repository list.
func anyCall(c *ghapp.Client, n int) error {
	ctx := context.Background()
	var err error
	switch n % 4 {
	case 0:
		_, err = c.JobStatus(ctx, inst, "octo", "hello", 7)
	case 1:
		_, err = c.GenerateJIT(ctx, inst, repoJIT(fmt.Sprintf("held-%d", n)))
	case 2:
		_, err = c.FindRunner(ctx, inst, ghapp.ScopeRepo, "octo", "hello", "held")
	case 3:
		_, err = c.Repositories(ctx, inst)
	}
	return err
}

// TestRefusedExchangeIsHeld: GitHub refusing the token exchange (the App's
// key rotated on GitHub, the installation suspended or removed) is
// answered from memory for RefusalHold: every call of the installation in
// that window fails at once with GitHub's refusal, classified as when it
// came (AppRefused, the claimer's and reclaimer's cue), for one exchange.
// Before, each call asked again: a key rotation with hundreds of queued
// jobs was hundreds of refused exchanges a minute. After the window the
// next call asks GitHub again, and once the cause is fixed it is served.
func TestRefusedExchangeIsHeld(t *testing.T) {
	t.Parallel()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, pub := testKey(t)
	tests := []struct {
		name   string
		refuse func(f *ghfake.Server)
		fix    func(f *ghfake.Server) // nil: nothing fixes it
		status int
		says   string
	}{
		{name: "401 key rotated on GitHub", status: 401, says: "A JSON web token could not be decoded",
			refuse: func(f *ghfake.Server) { f.SetPublicKey(&other.PublicKey) },
			fix:    func(f *ghfake.Server) { f.SetPublicKey(pub) }}, // the old key put back
		{name: "403 installation suspended", status: 403, says: "This installation has been suspended",
			refuse: func(f *ghfake.Server) { f.Suspend(inst) },
			fix:    func(f *ghfake.Server) { f.Unsuspend(inst) }},
		{name: "404 installation removed", status: 404, says: "Not Found",
			refuse: func(f *ghfake.Server) { f.Uninstall(inst) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, clk := clocked(t)
			t0 := clk.Now()
			tt.refuse(f.fake)
			// refused calls once; heldUntil is zero when the call must
			// meet GitHub's own answer, else when the held copy it must
			// meet ends (marked Remembered: no request reached GitHub).
			refused := func(when string, n int, heldUntil time.Time) {
				t.Helper()
				err := anyCall(f.client, n)
				fl := failure.Classify(err)
				if err == nil || !fl.AppRefused || fl.Status != tt.status || !strings.Contains(fl.Reason, tt.says) {
					t.Fatalf("%s: call %d: err %v, classified %+v; want GitHub's refusal %d %q, AppRefused", when, n, err, fl, tt.status, tt.says)
				}
				if fl.Remembered != !heldUntil.IsZero() || !fl.ResetAt.Equal(heldUntil) {
					t.Fatalf("%s: call %d: remembered %v until %s, want held until %s (zero: GitHub's own answer)", when, n, fl.Remembered, fl.ResetAt, heldUntil)
				}
				var er *github.ErrorResponse
				if !errors.As(err, &er) || er.Response.Request.Header.Get("Authorization") != "" || strings.Contains(err.Error(), "eyJ") {
					t.Fatalf("%s: call %d: %v: want a go-github error without the App's JWT", when, n, err)
				}
			}
			exchanges := func(when string, want int) {
				t.Helper()
				if got := f.fake.Stats().TokenRequests[inst]; got != want {
					t.Fatalf("%s: %d token exchanges, want %d", when, got, want)
				}
			}

			const calls = 12
			refused("the exchange", 0, time.Time{})
			for n := 1; n < calls; n++ {
				refused("within the hold", n, t0.Add(ghapp.RefusalHold))
			}
			clk.Set(t0.Add(ghapp.RefusalHold - time.Millisecond))
			refused("at the hold's last moment", 0, t0.Add(ghapp.RefusalHold))
			exchanges("after 13 calls within the hold", 1)

			clk.Set(t0.Add(ghapp.RefusalHold))
			refused("after the hold, still refused", 1, time.Time{})
			exchanges("after the hold", 2)
			if tt.fix == nil {
				return
			}
			// Fixed on GitHub: the refusal held since the second exchange
			// is answered until its hold ends, then GitHub is asked again.
			tt.fix(f.fake)
			clk.Set(t0.Add(2*ghapp.RefusalHold - time.Millisecond))
			refused("fixed, within the second hold", 2, t0.Add(2*ghapp.RefusalHold))
			exchanges("fixed, within the second hold", 2)
			clk.Set(t0.Add(2 * ghapp.RefusalHold))
			for n := range calls {
				if err := anyCall(f.client, n); err != nil && !errors.Is(err, ghapp.ErrRunnerNotFound) {
					t.Fatalf("fixed, after the second hold: call %d: %v, want it served", n, err)
				}
			}
			exchanges("fixed, after the second hold", 3)
		})
	}
}

// TestPassingExchangeFailuresAreNotHeld: an exchange that failed for a
// reason that may pass at once (GitHub's 5xx, a connection reset) is not
// remembered: the very next call asks again, and is served. A rate limit
// is held (TestRateLimitedExchangeIsHeldForTheApp).
func TestPassingExchangeFailuresAreNotHeld(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		fault ghfake.Fault
		class failure.Class
	}{
		{"502", ghfake.ServerError(http.StatusBadGateway), failure.ServerSide},
		{"503 unicorn", ghfake.ServerError(http.StatusServiceUnavailable), failure.ServerSide},
		{"connection reset", ghfake.ConnectionReset(), failure.Network},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, _ := clocked(t)
			f.fake.Fail(ghfake.RouteAccessToken, 1, tt.fault)
			err := anyCall(f.client, 0)
			if fl := failure.Classify(err); err == nil || fl.Class != tt.class || fl.AppRefused {
				t.Fatalf("first call: %v (%+v), want %v, not AppRefused", err, fl, tt.class)
			}
			if err := anyCall(f.client, 0); err != nil {
				t.Fatalf("second call at the same instant: %v, want a new exchange, served", err)
			}
			if got := f.fake.Stats().TokenRequests[inst]; got != 2 {
				t.Fatalf("%d token exchanges, want 2: the failure was held", got)
			}
		})
	}
}

// TestRateLimitedExchangeIsHeldForTheApp: GitHub rate-limits the token
// exchange of one installation (charged to the App, whatever the
// installation). Until the wait it names (its Retry-After, else a minute,
// GitHub's least), that installation's calls are refused from memory, and
// every other installation's get the same answer held (Remembered,
// ResetAt the wait's end: the claimer defers it, no attempt): no exchange
// is made. Then the next exchange is made and served. go-github held only
// a 403 with Retry-After, for one installation, and nothing held a 429: a
// backlog of N jobs made N exchanges a minute into the limit (a review
// found it). Other installations show the App's hold alone: go-github's
// memory of the first one's 403 runs on the wall clock.
func TestRateLimitedExchangeIsHeldForTheApp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		fault ghfake.Fault
		wait  time.Duration
	}{
		{"429 with Retry-After", ghfake.TooManyRequests(90 * time.Second), 90 * time.Second},
		{"429 without Retry-After", ghfake.TooManyRequests(0), time.Minute},
		{"403 secondary limit with Retry-After", ghfake.SecondaryRateLimit(2 * time.Minute), 2 * time.Minute},
		{"403 secondary limit without Retry-After: a minute, not the window's reset", ghfake.SecondaryRateLimit(0), time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, clk := clocked(t)
			t0 := clk.Now()
			f.fake.Fail(ghfake.RouteAccessToken, 1, tt.fault)
			if fl := failure.Classify(anyCall(f.client, 0)); fl.Class != failure.RateLimit || fl.Remembered {
				t.Fatalf("first call: %+v, want GitHub's rate limit, not from memory", fl)
			}
			other := func(id int64) error {
				_, err := f.client.Repositories(context.Background(), id)
				return err
			}
			clk.Set(t0.Add(tt.wait - time.Millisecond))
			for n := range 4 {
				if fl := failure.Classify(anyCall(f.client, n)); fl.Class != failure.RateLimit || !fl.Remembered {
					t.Errorf("call %d within the wait: %+v, want the limit from memory", n, fl)
				}
			}
			err := other(inst + 1)
			if fl := failure.Classify(err); fl.Class != failure.RateLimit || !fl.Remembered || !fl.TokenExchange ||
				!fl.ResetAt.Equal(t0.Add(tt.wait)) || fl.RetryAfter != 0 {
				t.Errorf("another installation within the wait: %v (%+v), want the exchange's limit held until %s", err, fl, t0.Add(tt.wait))
			}
			if got := f.fake.Stats().TokenRequests; got[inst] != 1 || got[inst+1] != 0 {
				t.Fatalf("token exchanges %v within the wait, want the first alone", got)
			}
			clk.Set(t0.Add(tt.wait))
			if err := other(inst + 2); err != nil {
				t.Fatalf("after the wait: %v, want a new exchange, served", err)
			}
			if got := f.fake.Stats().TokenRequests[inst+2]; got != 1 {
				t.Errorf("%d token exchanges after the wait, want 1", got)
			}
		})
	}
}

// TestHeldCopyRetryAfterEndsWithTheHold: a held copy of the exchange's
// secondary limit (403, Retry-After 120 s) handed to another installation
// 100 s into the hold says 20 s, the hold's rest: go-github remembers a
// limit for its Retry-After from the moment it reads it, so GitHub's
// original 120 s held that installation's client until well past the
// App's hold (a review found it).
func TestHeldCopyRetryAfterEndsWithTheHold(t *testing.T) {
	t.Parallel()
	f, clk := clocked(t)
	t0 := clk.Now()
	f.fake.Fail(ghfake.RouteAccessToken, 1, ghfake.SecondaryRateLimit(2*time.Minute))
	if fl := failure.Classify(anyCall(f.client, 0)); fl.Class != failure.RateLimit {
		t.Fatalf("first call: %+v, want GitHub's secondary limit", fl)
	}
	clk.Set(t0.Add(100 * time.Second))
	_, err := f.client.Repositories(context.Background(), inst+1)
	var are *github.AbuseRateLimitError
	if !errors.As(err, &are) || are.RetryAfter == nil || *are.RetryAfter != 20*time.Second {
		t.Fatalf("held copy 100 s into a 120 s hold: %v (%+v), want Retry-After 20 s", err, are)
	}
}

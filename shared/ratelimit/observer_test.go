package ratelimit_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestTransportObservesOnlyRealReadings: the transport itself hands its
// observer only readings from a live response's core rate headers. Any
// observer (not only the Tracker, which also drops unknown readings) must
// never see a response without headers, a cached response (its headers are
// as old as the cache entry), another resource's budget or a 401's (GitHub
// could not tie the request to a budget of ours).
func TestTransportObservesOnlyRealReadings(t *testing.T) {
	t.Parallel()
	core := func(h http.Header) {
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.Itoa(resetEpoch))
		h.Set("X-RateLimit-Resource", "core")
	}
	tests := []struct {
		name    string
		headers func(h http.Header)
		status  int
		want    int // observations
	}{
		{"core headers", core, http.StatusForbidden, 1},
		{"no rate headers (502 from a proxy)", func(http.Header) {}, http.StatusBadGateway, 0},
		{"no rate headers (200)", func(http.Header) {}, http.StatusOK, 0},
		{"served from a cache", func(h http.Header) { core(h); h.Set("X-From-Cache", "1") }, http.StatusOK, 0},
		{"another resource's budget", func(h http.Header) { core(h); h.Set("X-RateLimit-Resource", "search") }, http.StatusOK, 0},
		// GitHub's 401 shows the unauthenticated budget of the address.
		{"a 401's headers (nobody's budget)", func(h http.Header) { core(h); h.Set("X-RateLimit-Limit", "60") }, http.StatusUnauthorized, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := observe(t, tt.status, tt.headers)
			if len(got) != tt.want {
				t.Fatalf("%d observations %+v, want %d", len(got), got, tt.want)
			}
			if tt.want == 1 {
				want := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt, ObservedAt: t0}
				if !got[0].Equal(want) {
					t.Fatalf("observed %+v, want %+v", got[0], want)
				}
			}
		})
	}
}

// TestTransportObservesBlocks: a 429, or a 403 with Retry-After, that is
// not the primary budget at 0 is a secondary limit's block of the whole
// installation, read from the status and Retry-After alone; a plain 403
// (a permission error, for all the transport can tell) and a primary
// exhaustion are not.
func TestTransportObservesBlocks(t *testing.T) {
	t.Parallel()
	h := func(kv ...string) func(http.Header) {
		return func(hd http.Header) {
			for i := 0; i < len(kv); i += 2 {
				hd.Set(kv[i], kv[i+1])
			}
		}
	}
	rate := []string{"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4000", "X-RateLimit-Reset", strconv.Itoa(resetEpoch)}
	tests := []struct {
		name      string
		headers   func(http.Header)
		status    int
		block     time.Time // zero: none
		remaining int       // -1: no primary reading
	}{
		{"403 with Retry-After", h(append(rate, "Retry-After", "120")...), http.StatusForbidden, t0.Add(2 * time.Minute), 4000},
		{"429 with Retry-After", h("Retry-After", "30"), http.StatusTooManyRequests, t0.Add(30 * time.Second), -1},
		{"429 without Retry-After: a minute", h(rate...), http.StatusTooManyRequests, t0.Add(ratelimit.MinBlock), 4000},
		{"429 with an HTTP-date Retry-After", h("Retry-After", t0.Add(90*time.Second).Format(http.TimeFormat)), http.StatusTooManyRequests, t0.Add(90 * time.Second), -1},
		{"Retry-After beyond the cap", h("Retry-After", "86400"), http.StatusTooManyRequests, t0.Add(ratelimit.MaxBlock), -1},
		{"Retry-After that overflows nanoseconds", h("Retry-After", "18446744074"), http.StatusTooManyRequests, t0.Add(ratelimit.MaxBlock), -1},
		{"403 without Retry-After", h(rate...), http.StatusForbidden, time.Time{}, 4000},
		{"primary exhaustion", h("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.Itoa(resetEpoch)), http.StatusTooManyRequests, time.Time{}, 0},
		{"another resource's 429", h("Retry-After", "30", "X-RateLimit-Resource", "search"), http.StatusTooManyRequests, time.Time{}, -1},
		{"200 with Retry-After", h(append(rate, "Retry-After", "30")...), http.StatusOK, time.Time{}, 4000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := observe(t, tt.status, tt.headers)
			if tt.block.IsZero() && tt.remaining < 0 {
				if len(got) != 0 {
					t.Fatalf("observed %+v, want nothing", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("observed %d readings, want 1", len(got))
			}
			r := got[0]
			if !r.BlockedUntil.Equal(tt.block) {
				t.Errorf("blocked until %v, want %v", r.BlockedUntil, tt.block)
			}
			if tt.remaining < 0 && r.Known() || tt.remaining >= 0 && (!r.Known() || r.Remaining != tt.remaining) {
				t.Errorf("primary reading %+v, want remaining %d (-1: none)", r, tt.remaining)
			}
			// Only an answer that was no rate limit says a call went through.
			if passed := tt.status != http.StatusForbidden && tt.status != http.StatusTooManyRequests; r.PassedAt.Equal(t0) != passed || !passed && !r.PassedAt.IsZero() {
				t.Errorf("passed at %v, want the answer's time: %v", r.PassedAt, passed)
			}
		})
	}
}

// observe answers one request through a Transport with status and the
// headers set, and returns what the transport handed its observer.
func observe(t *testing.T, status int, headers func(http.Header)) []ratelimit.Reading {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers(w.Header())
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"message":"You have exceeded a secondary rate limit."}`)
	}))
	t.Cleanup(srv.Close)
	var got []ratelimit.Reading
	obs := ratelimit.ObserverFunc(func(id int64, r ratelimit.Reading) {
		if id != installation {
			t.Errorf("observed installation %d, want %d", id, installation)
		}
		got = append(got, r)
	})
	c := &http.Client{Transport: ratelimit.NewTransport(srv.Client().Transport, installation, obs, func() time.Time { return t0 })}
	resp, err := c.Post(srv.URL+"/repos/octo/repo/actions/runners/generate-jitconfig", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d passed through", resp.StatusCode, status)
	}
	return got
}

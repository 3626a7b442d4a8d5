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
// as old as the cache entry) or another resource's budget.
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tt.headers(w.Header())
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, `{"message":"x"}`)
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
			resp, err := c.Get(srv.URL + "/repos/octo/repo/actions/runners")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d passed through", resp.StatusCode, tt.status)
			}
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

package ghapp_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestEdgePageKeepsTheReading: GitHub's front end answers 503 with its
// HTML "unicorn" page and no rate headers (ghfake). The installation's
// last reading stands (a missing header is no reading, never remaining 0
// or a reset), and the error is a server-side failure whose reason is
// the status, not the page nor anything of the request's credentials.
func TestEdgePageKeepsTheReading(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		observed []ratelimit.Reading
	)
	f := setup(t, option{cfg: func(c *ghapp.Config) {
		c.Wrap = func(id int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, id, ratelimit.ObserverFunc(func(_ int64, r ratelimit.Reading) {
				mu.Lock()
				defer mu.Unlock()
				observed = append(observed, r)
			}), nil)
		}
	}})
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
	ctx := context.Background()
	if _, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7); err != nil {
		t.Fatal(err)
	}
	f.fake.Fail(ghfake.RouteJob, 1, ghfake.ServerError(http.StatusServiceUnavailable))
	_, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7)
	if err == nil {
		t.Fatal("no error, want the 503")
	}
	mu.Lock()
	if len(observed) != 1 || observed[0].Remaining != 4999 {
		t.Errorf("readings %+v, want only the first call's (4999 left)", observed)
	}
	mu.Unlock()
	fl := failure.Classify(err)
	if fl.Class != failure.ServerSide || fl.Status != http.StatusServiceUnavailable {
		t.Errorf("classified %v %d, want server_side 503", fl.Class, fl.Status)
	}
	for _, bad := range []string{"<", "Unicorn", "ghs_", "token"} {
		if strings.Contains(fl.Reason, bad) || strings.Contains(err.Error(), bad) {
			t.Errorf("reason %q / error %q holds %q", fl.Reason, err, bad)
		}
	}
	if !strings.HasSuffix(fl.Reason, "Service Unavailable") {
		t.Errorf("reason %q, want it to end in the status's text", fl.Reason)
	}
}

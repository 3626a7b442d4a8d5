package ghapp_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
)

// TestPrimaryLimit429: a spent budget answered 429 (GitHub sends 403 or
// 429), which go-github v62 does not type, is still the budget spent
// until its reset: the reading is exhausted and no secondary limit's
// block, and the failure names the reset, not a secondary limit's minute.
func TestPrimaryLimit429(t *testing.T) {
	t.Parallel()
	f, clk, seen := setupAhead(t, ghfake.WithPrimaryLimitStatus(http.StatusTooManyRequests))
	reset := clk.Now().Add(20 * time.Minute)
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
	f.fake.SetRateLimit(inst, 5000, 0, reset)

	_, err := f.client.JobStatus(context.Background(), inst, "octo", "hello", 7)
	fl := failure.Classify(err)
	if fl.Class != failure.RateLimit || fl.Status != http.StatusTooManyRequests || !fl.ResetAt.Equal(reset) || fl.Secondary() {
		t.Errorf("classified %+v, want rate_limit 429 until %s, not secondary", fl, reset)
	}
	observed := seen.all()
	if len(observed) != 1 {
		t.Fatalf("readings %+v, want one", observed)
	}
	if r := observed[0]; !r.Exhausted(clk.Now()) || r.Blocked(clk.Now()) || !r.ResetAt.Equal(reset) {
		t.Errorf("reading %+v, want exhausted until %s and no block", r, reset)
	}
}

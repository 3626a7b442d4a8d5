package redeliver_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/redeliver"
)

// TestBeyondHonoursTheRateFloor: every answer's X-RateLimit-* is checked
// before the next call and the pass stops below MinRemaining. The page
// that met the window's edge left the App budget below the floor: the
// look at the next page (per_page=1) is not made, the gap reported. It was
// made, and the pass reported no stop.
func TestBeyondHonoursTheRateFloor(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.PerPage = 2
	f.cfg.MinRemaining = 50
	f.fake.SetWebhook(answer(200), "s")
	f.record("ok-1", "workflow_job", 200, time.Minute)
	if first := f.run(t); first.Mark.ID == 0 {
		t.Fatalf("first pass = %+v, want a mark", first)
	}
	for i := range 5 {
		f.record(fmt.Sprintf("lost-%d", i), "workflow_job", 503, 0)
	}
	f.clock.add(redeliver.DefaultWindow + time.Hour)
	// At the floor: one page may be read, which leaves 49 < 50.
	f.fake.SetAppRateLimit(5000, 50, f.clock.now().Add(30*time.Minute))
	before := f.fake.Stats().Calls[ghfake.RouteDeliveries]
	rep := f.run(t)
	calls := f.fake.Stats().Calls[ghfake.RouteDeliveries] - before
	if calls > 1 {
		t.Errorf("pass = %+v: %d delivery-log calls, the budget at %d after the first (floor 50); want no call below the floor",
			rep, calls, 50-1)
	}
}

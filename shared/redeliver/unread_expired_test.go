package redeliver_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/redeliver"
)

// TestUnreadFailedDeliveryAgedOutIsReported: a failed delivery the
// redeliverer never got to read (every pass stopped at the App's rate
// floor before its first page, longer than the window) is met above the
// mark past the window's edge: it counts as expired, logged, paged. The
// read once stopped there without a log line, a count or a page, and its
// job waited 24 h for a runner.
func TestUnreadFailedDeliveryAgedOutIsReported(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.MinRemaining = 50
	f.fake.SetWebhook(answer(200), "s")
	f.fake.SetAppRateLimit(5000, 45, t0.Add(4*time.Hour)) // under the floor until the reset
	f.record("ok-1", "workflow_job", 200, time.Minute)
	first := f.run(t)
	if first.Mark.ID == 0 {
		t.Fatalf("first pass = %+v, want a mark", first)
	}
	f.clock.add(time.Minute)
	lost := f.record("lost", "workflow_job", 503, 0) // the endpoint failed this queued delivery
	f.clock.add(4 * time.Minute)
	if rep := f.run(t); rep.Stopped != redeliver.StopRateFloor || rep.Pages != 0 {
		t.Fatalf("pass under the floor = %+v, want stopped before its first page", rep)
	}
	// The budget comes back after the reset, past the 3 h window of "lost".
	f.clock.add(4 * time.Hour)
	rep := f.run(t)
	if f.fake.Redeliveries(lost.GUID) != 0 {
		t.Fatalf("lost was redelivered: nothing to report")
	}
	if rep.Expired == 0 {
		t.Errorf("pass after the reset = %+v: failed delivery %s (log id %d) above the mark (%d) aged out unread and "+
			"is dropped without a count, a log line or a page (Expired 0)", rep, lost.GUID, lost.ID, first.Mark.ID)
	}
}

// TestUnreadDeliveriesBeyondAPageAreAGap: when the deliveries that aged
// out unread run past the page that met the window's edge, the pass does
// not page through them (nothing can be redelivered) but says so: Gap,
// and the RedeliveryGap metric the alarm sums.
func TestUnreadDeliveriesBeyondAPageAreAGap(t *testing.T) {
	t.Parallel()
	f, out := afterAGap(t)
	out.Reset()
	rep := f.run(t)
	if !rep.Gap || rep.Expired != 2 || rep.Redelivered != 0 {
		t.Fatalf("pass after the gap = %+v, want Gap, the 2 failed deliveries of the page it read expired, none redelivered", rep)
	}
	if got := emftest.Select(emftest.Parse(t, out.Bytes()), "RedeliveryGap", map[string]string{"function": "redeliverer"}); len(got) != 1 || got[0].Sum() != 1 {
		t.Errorf("RedeliveryGap points %+v, want one of 1", got)
	}
}

// afterAGap is a redeliverer with a mark (one delivery read) whose log then
// got five failed deliveries no pass read before they aged past the window
// (pages of two), and the buffer its metrics go to.
func afterAGap(t *testing.T) (*fixture, *bytes.Buffer) {
	t.Helper()
	f := setup(t)
	f.cfg.PerPage = 2
	out := &bytes.Buffer{}
	f.cfg.Metrics = obs.NewMetricsIn("ns", out, map[string]string{"function": "redeliverer"}, f.clock.now)
	f.fake.SetWebhook(answer(200), "s")
	f.record("ok-1", "workflow_job", 200, time.Minute)
	if first := f.run(t); first.Mark.ID == 0 {
		t.Fatalf("first pass = %+v, want a mark", first)
	}
	for i := range 5 {
		f.record(fmt.Sprintf("lost-%d", i), "workflow_job", 503, 0)
	}
	f.clock.add(redeliver.DefaultWindow + time.Hour) // no pass ran meanwhile
	return f, out
}

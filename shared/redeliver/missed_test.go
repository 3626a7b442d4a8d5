package redeliver_test

import (
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/redeliver"
)

// TestMissedCountedOncePerDelivery: deliveries that aged out unread
// are reported by the pass that meets them, once: the mark moves past
// them. Before, when no entry inside the window sat above the mark (a quiet
// App after the outage), the pass read nothing, nothing was saved, and every
// later pass met the same entries again: Expired and RedeliveryGap each
// pass, the same GUIDs logged every 5 minutes, the alarm held in ALARM.
func TestMissedCountedOncePerDelivery(t *testing.T) {
	t.Parallel()
	f, out := afterAGap(t)
	if rep := f.run(t); !rep.Gap || rep.Expired != 2 {
		t.Fatalf("pass after the gap = %+v, want Gap and 2 expired", rep)
	}
	f.clock.add(5 * time.Minute) // the next scheduled pass; nothing new was delivered
	out.Reset()
	rep := f.run(t)
	gap := emftest.Select(emftest.Parse(t, out.Bytes()), "RedeliveryGap", map[string]string{"function": "redeliverer"})
	if rep.Expired != 0 || rep.Gap || len(gap) != 0 {
		t.Errorf("the pass after: Expired %d, Gap %v, RedeliveryGap points %d (mark %d); want the deliveries already reported not counted again",
			rep.Expired, rep.Gap, len(gap), rep.Mark.ID)
	}
}

// TestNoGapWhenThePageEndsAboveTheMark: every entry above the mark is on
// the page that met the window's edge (all of them succeeded) and the next
// page starts at the mark: nothing was left unread, so no gap (one entry of
// the next page is asked to know); reported, it paged for a job never lost.
func TestNoGapWhenThePageEndsAboveTheMark(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.cfg.PerPage = 2
	f.fake.SetWebhook(answer(200), "s")
	f.record("ok-1", "workflow_job", 200, time.Minute)
	if first := f.run(t); first.Mark.ID == 0 {
		t.Fatalf("first pass = %+v, want a mark", first)
	}
	f.record("ok-2", "workflow_job", 200, 0)
	f.record("ok-3", "workflow_job", 200, 0) // page 1 = [ok-3, ok-2], page 2 = [ok-1] (the mark)
	f.clock.add(redeliver.DefaultWindow + time.Hour)
	rep := f.run(t)
	if rep.Gap {
		t.Errorf("pass = %+v: Gap reported though both entries above the mark were on the page read and none failed", rep)
	}
}

// TestExpiredCountsAGUIDOnce: a carried delivery (not asked: the pass
// stopped at the floor) whose GUID got a newer failed entry (an operator's
// Redeliver click while the endpoint was still down, or a redelivery GitHub
// did despite a 5xx) ages out with it: counted once, by its newer entry
// (the carried one was counted again in the retry loop).
func TestExpiredCountsAGUIDOnce(t *testing.T) {
	t.Parallel()
	f, first := carriedAtTheFloor(t)
	carried := first.Mark.Retry
	if first.Stopped != redeliver.StopRateFloor || len(carried) == 0 || first.Mark.Resuming() {
		t.Fatalf("first pass = %+v, want a finished read stopped at the floor with deliveries carried", first)
	}
	// The operator redelivers one of them by hand; the endpoint still fails.
	g := carried[0]
	f.fake.RecordDelivery(ghfake.HookDelivery{GUID: g.GUID, Event: "workflow_job", Action: g.Action, StatusCode: 503,
		Redelivery: true, DeliveredAt: f.clock.now().Add(time.Minute)})
	f.clock.add(redeliver.DefaultWindow + 2*time.Minute)
	rep := f.run(t)
	if rep.Expired != len(carried) {
		t.Errorf("pass after the window: Expired %d, want %d (one per carried GUID; %s counted twice)", rep.Expired, len(carried), g.GUID)
	}
}

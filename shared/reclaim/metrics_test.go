package reclaim_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestMetricsByPool: a pass's reclaims count by the record's pool and
// reason, its give-ups by pool, each also under the fleet-wide set the
// reclaims-spike and give-ups alarms read; read from the EMF lines as
// CloudWatch would.
func TestMetricsByPool(t *testing.T) {
	t.Parallel()
	f := setup(t)
	inPool := func(id int64, p string, mod func(*job.Record)) {
		t.Helper()
		r := f.get(t, id)
		r.Pool = p
		if mod != nil {
			mod(&r)
		}
		f.store.Put(r)
	}
	f.claiming(t, 1, t0.Add(-lease-time.Minute), t0.Add(-time.Millisecond)) // lease_expired, linux
	for _, id := range []int64{2, 3} {
		f.pending(t, id, t0.Add(-timing.PendingGrace-time.Second)) // outbox_lost, arm
		inPool(id, "arm", nil)
	}
	f.queued(t, 4, t0.Add(-3*time.Hour), t0.Add(-timing.QueuedGrace-time.Second)) // past max age: abandoned, arm
	inPool(4, "arm", func(r *job.Record) { r.FirstFailureAt = job.Millis(t0.Add(-2 * time.Hour)) })

	rep := f.run(t, f.reclaimer(t, 1, nil))
	if rep.RequeuedTotal() != 3 || rep.Abandoned != 1 {
		t.Fatalf("report %+v, want 3 requeued and 1 abandoned", rep)
	}

	points := emftest.Parse(t, []byte(f.emf.String()))
	reasonSets := [][]string{{"function"}, {"function", "reason"}, {"function", "pool", "reason"}}
	poolSets := [][]string{{"function"}, {"function", "pool"}}
	for _, w := range []struct {
		metric string
		dims   map[string]string
		sets   [][]string
		want   float64
	}{
		{reclaim.MetricReclaimed, map[string]string{"pool": "linux", "reason": string(reclaim.LeaseExpired)}, reasonSets, 1},
		{reclaim.MetricReclaimed, map[string]string{"pool": "arm", "reason": string(reclaim.OutboxLost)}, reasonSets, 2},
		{reclaim.MetricAbandoned, map[string]string{"pool": "arm"}, poolSets, 1},
	} {
		got := emftest.Select(points, w.metric, w.dims)
		if len(got) != 1 || got[0].Sum() != w.want || !reflect.DeepEqual(got[0].Sets, w.sets) || got[0].Dims["function"] != "reclaimer" {
			t.Errorf("%s %v: got %+v, want one point of %v under %v", w.metric, w.dims, got, w.want, w.sets)
		}
	}
	for name, want := range map[string]float64{reclaim.MetricReclaimed: 3, reclaim.MetricAbandoned: 1} {
		if got := emftest.Total(points, name, map[string]string{"function": "reclaimer"}); got != want {
			t.Errorf("%s fleet-wide: got %v, want %v", name, got, want)
		}
	}
}

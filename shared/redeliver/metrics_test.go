package redeliver_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/redeliver"
)

// TestPassMetrics: a pass's counts, read from its EMF line as CloudWatch
// would, fleet-wide under {function} (the dashboard's set) in the
// configured namespace.
func TestPassMetrics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		arrange func(t *testing.T, f *fixture)
		want    map[string]float64
		absent  []string
	}{
		{
			name: "complete pass",
			arrange: func(t *testing.T, f *fixture) {
				f.cfg.MaxAttempts = 2
				f.fake.SetWebhook(answer(200), "s")
				f.record("ok", "workflow_job", 200, 3*time.Minute)
				f.record("failed", "workflow_job", 503, 2*time.Minute)
				f.record("spent", "workflow_job", 502, time.Minute)
				for range 2 {
					if _, err := f.store.CountRedelivery(context.Background(), "spent", 0, 2, f.clock.now()); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: map[string]float64{"DeliveriesRead": 3, "DeliveriesFailed": 2, "Redelivered": 1,
				"RedeliveryAttemptsSpent": 1, "RedeliveryExpired": 0, "RedeliveryErrors": 0},
			absent: []string{"RedeliveryPassStopped"},
		},
		{
			name: "a carried delivery aged out of the window",
			arrange: func(t *testing.T, f *fixture) {
				old := job.DeliveryMark{Retry: []job.DeliveryRef{{ID: 5, GUID: "old", Action: "queued", DeliveredAt: f.clock.now().Add(-redeliver.DefaultWindow - time.Minute)}}}
				if err := f.store.SaveMark(context.Background(), old, f.clock.now()); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]float64{"RedeliveryExpired": 1, "Redelivered": 0},
		},
		{
			name: "stopped by a 429",
			arrange: func(t *testing.T, f *fixture) {
				f.fake.SetWebhook(answer(200), "s")
				f.record("a", "workflow_job", 503, time.Minute)
				f.fake.Fail(ghfake.RouteRedeliver, 1, ghfake.TooManyRequests(time.Minute))
			},
			want: map[string]float64{"DeliveriesRead": 1, "DeliveriesFailed": 1, "Redelivered": 0, "RedeliveryPassStopped": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			var out bytes.Buffer
			f.cfg.Metrics = obs.NewMetricsIn("ns", &out, map[string]string{"function": "redeliverer"}, f.clock.now)
			tt.arrange(t, f)
			f.run(t)
			points := emftest.Parse(t, out.Bytes())
			for name, want := range tt.want {
				got := emftest.Select(points, name, map[string]string{"function": "redeliverer"})
				if len(got) != 1 || got[0].Sum() != want || !reflect.DeepEqual(got[0].Sets, [][]string{{"function"}}) || got[0].Namespace != "ns" || got[0].Unit != "Count" {
					t.Errorf("%s: got %+v, want one Count point of %v under [[function]] in ns", name, got, want)
				}
			}
			for _, name := range tt.absent {
				if got := emftest.Select(points, name, nil); len(got) != 0 {
					t.Errorf("%s: got %+v, want none", name, got)
				}
			}
		})
	}
}

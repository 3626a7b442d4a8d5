package janitor_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestPassMetrics: a pass's removals, read from its EMF line as
// CloudWatch would, under the fleet-wide {function} set the dashboard reads.
func TestPassMetrics(t *testing.T) {
	t.Parallel()
	const id = int64(1501)
	f := setup(t)
	f.record(id, job.Done, job.RunnerName("linux", id))
	f.runner(t, job.RunnerName("linux", id), "online", false)
	f.machine(t, id)
	var out bytes.Buffer
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Rates: f.rates, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, Now: func() time.Time { return f.now },
		Metrics: obs.NewMetricsIn("ns", &out, map[string]string{"function": "janitor"}, func() time.Time { return f.now })})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	points := emftest.Parse(t, out.Bytes())
	for name, want := range map[string]float64{"JanitorRunnersDeleted": 1, "JanitorRunnersBusy": 0, "JanitorErrors": 0} {
		got := emftest.Select(points, name, map[string]string{"function": "janitor"})
		if len(got) != 1 || got[0].Sum() != want || !reflect.DeepEqual(got[0].Sets, [][]string{{"function"}}) || got[0].Namespace != "ns" {
			t.Errorf("%s: got %+v, want one point of %v under [[function]] in ns", name, got, want)
		}
	}
}

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

// TestPassMetrics: a pass's removals, read from its EMF lines as
// CloudWatch would: by the pool the runner's name (or the machine's tags)
// names, and fleet-wide under {function}, which the dashboard reads.
func TestPassMetrics(t *testing.T) {
	t.Parallel()
	arm := linux
	arm.Name = "arm"
	f := setup(t)
	// linux: a done job's idle runner (its machine goes with it).
	f.record(1501, job.Done, job.RunnerName("linux", 1501))
	f.runner(t, job.RunnerName("linux", 1501), "online", false)
	f.machine(t, 1501)
	// arm: a done job's offline runner, and a done job's machine whose runner is gone.
	for _, id := range []int64{1502, 1503} {
		f.store.Put(job.Record{JobID: id, State: job.Done, Version: 3, Repo: "octo/app", InstallationID: inst, Pool: arm.Name,
			RunnerName: job.RunnerName(arm.Name, id), RunID: 7, CreatedAt: f.now.Add(-time.Hour).UnixMilli(), ExpiresAt: f.now.Add(7 * 24 * time.Hour).Unix()})
	}
	f.runner(t, job.RunnerName(arm.Name, 1502), "offline", false)
	if _, err := f.prov.Provision(context.Background(), pool.Request{JobID: 1503, RunID: 7, Repo: "octo/app", Pool: arm,
		RunnerName: job.RunnerName(arm.Name, 1503), JITConfig: "jit"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Rates: f.rates, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux, arm}, Now: func() time.Time { return f.now },
		Metrics: obs.NewMetricsIn("ns", &out, map[string]string{"function": "janitor"}, func() time.Time { return f.now })})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.RunnersDeleted != 2 || rep.MachinesEnded != 1 {
		t.Fatalf("report %+v, want 2 runners deleted and 1 machine ended", rep)
	}
	points := emftest.Parse(t, out.Bytes())
	fleet := map[string]string{"function": "janitor"}
	for name, want := range map[string]float64{"JanitorRunnersDeleted": 2, "JanitorMachinesEnded": 1, "JanitorRunnersBusy": 0, "JanitorErrors": 0} {
		if got := emftest.Total(points, name, fleet); got != want || len(emftest.Select(points, name, fleet)) == 0 {
			t.Errorf("%s fleet-wide: got %v, want %v", name, got, want)
		}
	}
	for _, w := range []struct {
		metric, pool string
		want         float64
	}{
		{"JanitorRunnersDeleted", "linux", 1},
		{"JanitorRunnersDeleted", "arm", 1},
		{"JanitorMachinesEnded", "arm", 1},
	} {
		got := emftest.Select(points, w.metric, map[string]string{"function": "janitor", "pool": w.pool})
		if len(got) != 1 || got[0].Sum() != w.want || !reflect.DeepEqual(got[0].Sets, [][]string{{"function"}, {"function", "pool"}}) || got[0].Namespace != "ns" {
			t.Errorf("%s of pool %s: got %+v, want one point of %v under [[function] [function pool]] in ns", w.metric, w.pool, got, w.want)
		}
	}
}

package reclaim_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestAbandonWithoutGitHubKeepsMachines: Config.GitHub may be nil
// ("that part is not removed"), yet the package doc says the machines of an
// abandoned expired lease are terminated "only once GitHub said the runner
// is not busy". Without GitHub nobody said so: the runner may be at work on
// that machine, which must not be ended blind.
func TestAbandonWithoutGitHubKeepsMachines(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const id = int64(900)
	old := t0.Add(-2 * time.Hour)
	l := f.claiming(t, id, old, old.Add(lease))
	if err := f.store.Release(ctx, l, job.Retry{Version: l.Version + 1, Attempt: 4, FirstFailureAt: old, Due: old.Add(time.Minute)}, old.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.store.Acquire(ctx, id, l.Version+1, "claimer-dead", old.Add(2*time.Minute), old.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var got []reclaim.Leftover
	p := pool.Pool{Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo,
		Provisioner: pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: "lt-runner"}}
	rep := f.run(t, f.reclaimer(t, 1, func(c *reclaim.Config) {
		c.Pools = []pool.Pool{p} // GitHub nil
		c.Provisioner = reclaim.ProvisionerFunc(func(_ context.Context, lo reclaim.Leftover) error {
			got = append(got, lo)
			return nil
		})
	}))
	if rep.Abandoned != 1 {
		t.Fatalf("report %+v, want 1 abandoned", rep)
	}
	for _, lo := range got {
		if !lo.KeepMachines {
			t.Errorf("Cleanup(%+v): machines ended although GitHub was never asked whether runner %s is busy", lo, lo.RunnerName)
		}
	}
}

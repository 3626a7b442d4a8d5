package janitor_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
)

// bigFirst is slowGitHub listing the installation of owner "big" first.
type bigFirst struct{ slowGitHub }

func (b bigFirst) Installations(ctx context.Context) ([]ghapp.Installation, error) {
	ins, err := b.slowGitHub.Installations(ctx)
	slices.SortFunc(ins, func(x, y ghapp.Installation) int {
		if x.Owner == "big" {
			return -1
		}
		if y.Owner == "big" {
			return 1
		}
		return 0
	})
	return ins, err
}

// TestMachineOfAnUnreachedInstallationIsJudged: the runner phase's time
// goes on one large installation; the installations after it are still
// registered as owners (no rate read or share), so the machine phase, with
// its own reserved calls and a quarter of the pass's time for exactly this
// (confirm by name, end), ends the leaked machine of one of them. 9b9656b
// broke out of the loop before registering them, and kept such machines.
func TestMachineOfAnUnreachedInstallationIsJudged(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repos := []string{}
	for i := range 200 {
		repos = append(repos, fmt.Sprintf("r%03d", i))
	}
	f.fake.SetInstallation(43, "big", false, repos...)
	const id = int64(7201)
	f.machine(t, id) // octo/app, installation 42: its runner is gone, its job abandoned
	f.record(id, job.Abandoned, job.RunnerName("linux", id))
	rep := f.timedPass(t, bigFirst{slowGitHub{GitHub: f.gh, f: f, d: time.Second}})
	if len(f.prov.Machines(id)) != 0 || rep.MachinesEnded != 1 {
		t.Errorf("machine of abandoned job %d (installation 42, runner gone) still running after the pass: report %+v", id, rep)
	}
}

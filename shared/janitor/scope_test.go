package janitor_test

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestScopeChangedMachineKept: the pool moved from repository to
// organisation scope. A machine launched before the change carries the
// scope its runner was registered at (the repository), and that runner is
// busy there with another job, though the machine's own job is done. The
// janitor looks for it in the repository, which no pool of the new
// configuration lists, and leaves the machine. Looked for in the
// organisation, the runner would be "not found" and its machine ended
// mid-job.
func TestScopeChangedMachineKept(t *testing.T) {
	t.Parallel()
	const id = int64(1401)
	f := setup(t)
	f.fake.SetInstallation(inst, "octo", true, "app")
	f.machine(t, id)
	f.runner(t, job.RunnerName("linux", id), "online", true)
	f.record(id, job.Done, "linux-999")

	org := linux
	org.Scope = pool.ScopeOrg
	rep, err := f.janitorOf(t, f.gh, f.prov, org).Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(f.prov.Machines(id)) != 1 || rep.MachinesEnded != 0 || rep.MachinesKept != 1 {
		t.Fatalf("machines %+v, report %+v: want the busy runner's machine kept", f.prov.Machines(id), rep)
	}
}

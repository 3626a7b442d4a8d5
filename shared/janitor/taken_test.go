package janitor_test

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestTakenRunnerMachineLeftAlone: job A is over, run by its replacement
// (runner linux-A-r1, now offline, its machine still up). A's first runner
// was taken by job B and is busy on its own machine. The janitor deletes
// the replacement's runner and ends its machine, and leaves the busy
// runner and its machine alone: ending them would fail B. Before, a
// replacement's name was not ours to the janitor (left forever), and a
// cleanup ended every machine of the job, the busy one included.
func TestTakenRunnerMachineLeftAlone(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const a = int64(610)
	first, repl := job.RunnerName("linux", a), job.RunnerNameAt("linux", a, 1)
	f.record(a, job.Done, repl)
	f.runner(t, first, "online", true) // taken by job B
	f.runner(t, repl, "offline", false)
	for _, name := range []string{first, repl} {
		req := pool.Request{JobID: a, RunID: 7, Repo: "octo/app", Pool: linux, RunnerName: name, JITConfig: "jit"}
		if _, err := f.prov.Provision(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	busyMachine := f.prov.Machines(a)[0].ID

	rep := f.run(t, nil)
	if _, ok := f.fake.RunnerByName(repl); ok {
		t.Errorf("the replacement's runner %s is still registered (report %+v)", repl, rep)
	}
	if r, ok := f.fake.RunnerByName(first); !ok || !r.Busy {
		t.Errorf("the busy runner %s: %+v (registered %v), want left alone", first, r, ok)
	}
	live := f.prov.Machines(a)
	if len(live) != 1 || live[0].ID != busyMachine {
		t.Fatalf("live machines %+v, want only the busy runner's %s (report %+v)", live, busyMachine, rep)
	}
	if rep.RunnersDeleted != 1 || rep.RunnersBusy != 1 || rep.MachinesKept != 1 {
		t.Errorf("report %+v, want 1 runner deleted, 1 busy left, 1 machine kept", rep)
	}
}

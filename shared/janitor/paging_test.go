package janitor_test

import (
	"fmt"
	"testing"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestRunnersPastTheFirstPage: GitHub lists a scope's runners 100 a page.
// A repository with more (the other runners here registered by hand) has
// our runners on later pages: the runner of a job done long ago, on page
// 2, is deleted and its machine ended (a listing of the first page only
// never saw it), and the machine of a done job whose runner is gone is
// ended too, though 101 runners remain: GitHub, asked by name, answers
// with that runner alone (asked without the name filter, its answer of
// 100 others and more pages says nothing of ours, and the machine was
// kept pass after pass).
func TestRunnersPastTheFirstPage(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for i := range 101 {
		f.runner(t, fmt.Sprintf("byhand%03d", i), "online", false)
	}
	const listed, gone = int64(1201), int64(1202)
	name := job.RunnerName("linux", listed)
	f.machine(t, listed)
	f.runner(t, name, "offline", false) // the 102nd: page 2
	f.record(listed, job.Done, name)
	f.machine(t, gone)
	f.record(gone, job.Done, job.RunnerName("linux", gone))

	rep := f.run(t, nil)
	if _, ok := f.fake.RunnerByName(name); ok {
		t.Errorf("runner %s on the list's second page is still registered, want deleted (report %+v)", name, rep)
	}
	for _, id := range []int64{listed, gone} {
		if ms := f.prov.Machines(id); len(ms) != 0 {
			t.Errorf("job %d: machines %+v still running, want ended (report %+v)", id, ms, rep)
		}
	}
	if rep.RunnersDeleted != 1 || rep.MachinesEnded != 1 || rep.Errors != 0 {
		t.Errorf("report %+v, want 1 runner deleted, 1 machine ended, no error", rep)
	}
	if _, ok := f.fake.RunnerByName("byhand100"); !ok {
		t.Error("a runner not ours was deleted")
	}
}

package janitor_test

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestSameNameInAnotherRepositoryIsNotOurs: job J (repo-scope pool
// linux, octo/app) is done; its runner linux-J was taken by job K and is
// busy on its machine. A runner of the same name in another repository of
// the installation (octo/other: registered by hand, or on purpose) is
// idle. The janitor leaves it, and above all does not end J's machine,
// whose runner is running K: it deleted the other one, then ended every
// machine of that job and name (a review proved it).
func TestSameNameInAnotherRepositoryIsNotOurs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetInstallation(inst, "octo", false, "app", "other")
	const J = int64(4242)
	name := job.RunnerName("linux", J)
	f.record(J, job.Done, "linux-999")
	f.machine(t, J)
	f.runner(t, name, "online", true) // ours in octo/app, busy with job K
	other, err := f.reg.GenerateJIT(context.Background(), inst, ghapp.JITRequest{Scope: pool.ScopeRepo, Owner: "octo", Repo: "other", Name: name, Labels: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.fake.SetRunnerByID(other.RunnerID, "offline", false); err != nil {
		t.Fatal(err)
	}
	rep := f.run(t, nil)
	live := f.prov.Machines(J)
	if len(live) != 1 {
		t.Errorf("J's machine, whose runner %s is busy in octo/app, was ended: live %+v (report %+v)", name, live, rep)
	}
	if rep.RunnersDeleted != 0 || rep.ElsewhereSkipped != 1 {
		t.Errorf("report %+v: want the other repository's runner left (ElsewhereSkipped 1), none deleted", rep)
	}
}

package janitor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestSameNameInAnotherRepositoryIsNotOurs: job J (repo-scope pool
// linux, octo/app) is done; its runner linux-J was taken by job K and is
// busy on its machine. A runner of the same name in another repository of
// the installation (octo/other: registered by hand, or on purpose) is
// idle. The janitor leaves it, and above all does not end J's machine,
// whose runner is running K: it deleted the other one, then ended every
// machine of that job and name (a review proved it). The same with no
// record of J (expired, removed): J's machine names linux-J in octo/app,
// not in octo/other.
func TestSameNameInAnotherRepositoryIsNotOurs(t *testing.T) {
	t.Parallel()
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprintf("recorded=%t", recorded), func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.fake.SetInstallation(inst, "octo", false, "app", "other")
			const J = int64(4242)
			name := job.RunnerName("linux", J)
			want := janitor.Report{UnknownNotOurs: 1, RunnersBusy: 1} // its machine is young: not judged yet
			if recorded {
				f.record(J, job.Done, "linux-999")
				want = janitor.Report{ElsewhereSkipped: 1, RunnersBusy: 1, MachinesKept: 1}
			}
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
			rep.InstallationsSeen, rep.ScopesListed = 0, 0
			if rep != want {
				t.Errorf("report %+v, want %+v: the other repository's runner left, none deleted", rep, want)
			}
		})
	}
}

package janitor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestRenamedPool: RUNNER_POOLS renamed pool old to linux (same labels)
// while old's runners and machines were about. The janitor knew ours only
// by a configured pool's name, so they were never removed: the machines
// idled until the boot script's limit, the runners stayed registered.
// Now a runner or machine of a pool no longer configured is ours when its
// job's record names it (the record's pool, or its runner), and is then
// judged as any other, with the pool that serves the job's labels now
// standing in under the old name. Without such a record it is never
// touched: another tool's runner may be named alike.
//
// Every case runs beside a control, old-200: an idle runner of a done job
// whose record is old's, which must be deleted. A case that leaves its
// runner so fails when the feature is gone, as the control then stays.
func TestRenamedPool(t *testing.T) {
	t.Parallel()
	const id, control = int64(123), int64(200)
	old := linux
	old.Name = "old"
	type rec struct {
		pool, runner string
		state        job.State
		labels       []string
	}
	served := []string{"self-hosted", "linux"}
	tests := []struct {
		name        string
		rec         *rec   // nil: no record
		runner      string // "": none registered; else its status
		busy        bool
		wantRunner  bool // still registered
		wantMachine bool // still running
	}{
		{name: "idle runner of a done job deleted, its machine ended",
			rec: &rec{"old", "linux-999", job.Done, served}, runner: "online"},
		{name: "runner gone: machine ended by the machine phase",
			rec: &rec{"old", "old-123", job.Failed, served}},
		{name: "record's runner names it, its pool another: deleted",
			rec: &rec{"linux", "old-123", job.Done, served}, runner: "offline"},
		{name: "no record: runner and machine left", runner: "offline",
			wantRunner: true, wantMachine: true},
		{name: "record names another pool and another runner: left",
			rec: &rec{"other", "other-123", job.Done, served}, runner: "offline",
			wantRunner: true, wantMachine: true},
		{name: "busy runner left with its machine",
			rec: &rec{"old", "old-123", job.Done, served}, runner: "online", busy: true,
			wantRunner: true, wantMachine: true},
		{name: "live job: left",
			rec: &rec{"old", "old-123", job.Claimed, served}, runner: "online",
			wantRunner: true, wantMachine: true},
		{name: "no pool serves the job's labels now: left",
			rec: &rec{"old", "old-123", job.Done, []string{"self-hosted", "gpu"}}, runner: "offline",
			wantRunner: true, wantMachine: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			put := func(id int64, r rec) {
				f.store.Put(job.Record{JobID: id, State: r.state, Version: 3, Repo: "octo/app", InstallationID: inst,
					Pool: r.pool, RunnerName: r.runner, Labels: r.labels, Scope: pool.ScopeRepo, RunID: 7,
					CreatedAt: f.now.Add(-3 * time.Hour).UnixMilli(), UpdatedAt: f.now.Add(-2 * time.Hour).UnixMilli(),
					ExpiresAt: f.now.Add(7 * 24 * time.Hour).Unix()})
			}
			name := job.RunnerName("old", id)
			// Launched by old, two hours ago: past every grace.
			f.now = t0.Add(-2 * time.Hour)
			for _, n := range []int64{id, control} {
				if _, err := f.prov.Provision(context.Background(), pool.Request{JobID: n, RunID: 7, Repo: "octo/app", Pool: old,
					RunnerName: job.RunnerName("old", n), JITConfig: "jit"}); err != nil {
					t.Fatal(err)
				}
			}
			f.now = t0
			if tt.runner != "" {
				f.runner(t, name, tt.runner, tt.busy)
			}
			if tt.rec != nil {
				put(id, *tt.rec)
			}
			f.runner(t, job.RunnerName("old", control), "offline", false)
			put(control, rec{"old", "linux-998", job.Done, served})

			rep := f.run(t, nil) // configured: linux only
			if rep.Errors != 0 {
				t.Errorf("report %+v, want no error", rep)
			}
			if _, ok := f.fake.RunnerByName(job.RunnerName("old", control)); ok {
				t.Errorf("control runner old-%d of a done job still registered", control)
			}
			if _, ok := f.fake.RunnerByName(name); ok != tt.wantRunner {
				t.Errorf("runner %s registered: %t, want %t (report %+v)", name, ok, tt.wantRunner, rep)
			}
			for n, want := range map[int64]bool{id: tt.wantMachine, control: false} {
				live := false
				for _, m := range f.prov.Machines(n) {
					live = live || !m.Stopped
				}
				if live != want {
					t.Errorf("machine of job %d running: %t, want %t (report %+v)", n, live, want, rep)
				}
			}
			if tt.busy && rep.RunnersBusy != 1 {
				t.Errorf("report %+v, want the busy runner counted", rep)
			}
		})
	}
}

// TestRenamedPoolMachineWithoutRecord: a machine of a pool no longer
// configured whose job has no record is left however old it is (a
// configured pool's is ended past UnknownGrace), and one whose record names
// neither its pool nor its runner too; beside it, one whose record names
// its pool is ended, so the test fails without the feature.
func TestRenamedPoolMachineWithoutRecord(t *testing.T) {
	t.Parallel()
	const none, other, named = int64(301), int64(302), int64(303)
	f := setup(t)
	old := linux
	old.Name = "old"
	f.now = t0.Add(-48 * time.Hour)
	for _, n := range []int64{none, other, named} {
		if _, err := f.prov.Provision(context.Background(), pool.Request{JobID: n, RunID: 7, Repo: "octo/app", Pool: old,
			RunnerName: job.RunnerName("old", n), JITConfig: "jit"}); err != nil {
			t.Fatal(err)
		}
	}
	f.now = t0
	for n, p := range map[int64]string{other: "other", named: "OLD"} {
		f.store.Put(job.Record{JobID: n, State: job.Done, Version: 3, Repo: "octo/app", InstallationID: inst, Pool: p,
			RunnerName: job.RunnerName(p, n), Labels: []string{"linux"}, Scope: pool.ScopeRepo, RunID: 7,
			ExpiresAt: f.now.Add(24 * time.Hour).Unix()})
	}
	rep := f.run(t, nil)
	for n, want := range map[int64]bool{none: true, other: true, named: false} {
		live := false
		for _, m := range f.prov.Machines(n) {
			live = live || !m.Stopped
		}
		if live != want {
			t.Errorf("machine of job %d running: %t, want %t (report %+v)", n, live, want, rep)
		}
	}
	if rep.MachinesEnded != 1 || rep.Errors != 0 {
		t.Errorf("report %+v, want one machine ended, no error", rep)
	}
}

// TestForeignRunnersCostFewReads: another tool's runners named like a
// pool no longer configured ("build-agent-<n>", no job record names them)
// cost a job-record read each, every pass, before this pass stopped
// reading a prefix whose first records named none of its runners. A
// renamed pool's runner listed after them (old-200, its record naming old)
// is still judged and deleted.
func TestForeignRunnersCostFewReads(t *testing.T) {
	t.Parallel()
	const foreign, control = 12, int64(200)
	f := setup(t)
	for n := range foreign {
		f.runner(t, fmt.Sprintf("build-agent-%d", n+1), "offline", false)
	}
	f.runner(t, job.RunnerName("old", control), "offline", false)
	f.store.Put(job.Record{JobID: control, State: job.Done, Version: 3, Repo: "octo/app", InstallationID: inst,
		Pool: "old", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunID: 7,
		CreatedAt: f.now.Add(-3 * time.Hour).UnixMilli(), UpdatedAt: f.now.Add(-2 * time.Hour).UnixMilli(),
		ExpiresAt: f.now.Add(7 * 24 * time.Hour).Unix()})
	before := f.store.Calls("Get")
	rep := f.run(t, nil)
	if reads := f.store.Calls("Get") - before; reads > 3+1 || rep.ForeignSkipped != foreign-3 {
		t.Errorf("%d record reads, %d runners skipped (report %+v); want at most 3 for build-agent and 1 for old-%d, the other %d skipped",
			reads, rep.ForeignSkipped, rep, control, foreign-3)
	}
	if _, ok := f.fake.RunnerByName(job.RunnerName("old", control)); ok {
		t.Errorf("runner old-%d of a done job of a pool no longer configured still registered", control)
	}
	for n := range foreign {
		if _, ok := f.fake.RunnerByName(fmt.Sprintf("build-agent-%d", n+1)); !ok {
			t.Errorf("another tool's runner build-agent-%d was removed", n+1)
		}
	}
}

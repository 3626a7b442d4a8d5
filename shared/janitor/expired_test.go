package janitor_test

import (
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestRecordPastItsTTLIsUnknown: DynamoDB deletes an item past its TTL
// lazily, up to days later; until then it is still read. A record past
// its expires_at counts as absent (DESIGN: dedup keys), so a job stuck
// in claimed a week ago is unknown: its offline runner, named by our
// machine, is deleted and the machine ended. Read as live, both were
// left until DynamoDB got round to deleting the record.
func TestRecordPastItsTTLIsUnknown(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const id = int64(1301)
	name := job.RunnerName("linux", id)
	f.machineAged(t, id, 2*time.Hour)
	f.runner(t, name, "offline", false)
	f.store.Put(job.Record{JobID: id, State: job.Claimed, Version: 3, Repo: "octo/app", InstallationID: inst, Pool: "linux",
		RunnerName: name, RunID: 7, CreatedAt: t0.Add(-8 * 24 * time.Hour).UnixMilli(), ExpiresAt: t0.Add(-time.Hour).Unix()})

	rep := f.run(t, nil)
	if _, ok := f.fake.RunnerByName(name); ok {
		t.Errorf("runner %s of a record past its TTL is still registered, want deleted (report %+v)", name, rep)
	}
	if ms := f.prov.Machines(id); len(ms) != 0 {
		t.Errorf("machines %+v still running, want ended (report %+v)", ms, rep)
	}
	if rep.RunnersLive != 0 || rep.RunnersDeleted != 1 {
		t.Errorf("report %+v, want the runner deleted as an unknown job's, not left as live", rep)
	}
}

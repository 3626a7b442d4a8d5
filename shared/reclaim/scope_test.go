package reclaim_test

import (
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestScopeChangedUnderAClaimedJob: an operator moves the pool from
// repository to organisation scope while a job is claimed. Its runner was
// registered in the repository (the record says so) and is busy there with
// another job: the check looks for it where it is, finds it busy and starts
// a new attempt, leaving the busy runner and its machine alone. Looked for
// in the organisation it would be "not found", taken for lost, and its
// machine ended mid-job.
func TestScopeChangedUnderAClaimedJob(t *testing.T) {
	t.Parallel()
	const id = int64(730)
	l := setupLive(t)
	l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	must(t, l.fake.SetRunner(job.RunnerName("linux", id), "online", true))
	l.pools[0].Scope = pool.ScopeOrg // the deployment after the change

	rep := l.run(t, l.reclaimer(t, nil))

	got := l.get(t, id)
	if got.State != job.Queued || rep.Requeued[reclaim.RunnerTaken] != 1 {
		t.Fatalf("state %s, requeued %v: want a new attempt for a taken runner (report %+v)", got.State, rep.Requeued, rep)
	}
	if n := l.machinesLive(id); n != 1 {
		t.Errorf("%d live machines, want the busy runner's 1 left at work", n)
	}
	if _, ok := l.fake.RunnerByName(job.RunnerName("linux", id)); !ok {
		t.Error("the busy runner was removed")
	}
}

package reclaim_test

import (
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestLivenessJudgesNotYetRunnableAsQueued: a claimed job whose
// runner booted and is online and idle, while GitHub's
// GET /repos/{o}/{r}/actions/jobs/{id} says the job is not runnable yet:
// "waiting" (an environment's protection rules / required reviewers, up to
// 30 days), "pending" (behind a concurrency group) or "requested". GitHub
// assigns no runner to such a job, so an idle runner is expected, not a
// failure. DESIGN.md asks for a new attempt only "with the GitHub job still
// queued". The liveness check once treated every status other than
// in_progress / completed as queued: after MaxLivenessChecks idle checks it
// deleted the runner, ended the machine and sent a new attempt counted
// toward the replacement cap and max age (then abandoned the job, see
// shared/claim TestWaitingJobApprovedLateIsServed).
func TestLivenessJudgesNotYetRunnableAsQueued(t *testing.T) {
	t.Parallel()
	for i, status := range []string{"waiting", "pending", "requested"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			id := int64(760 + i)
			name := job.RunnerName("linux", id)
			l.claimed(t, id, t0.Add(-liveGrace-time.Second))
			must(t, l.fake.SetRunner(name, "online", false))
			l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: status, Labels: []string{"self-hosted", "linux"}})
			rc := l.reclaimer(t, nil)
			var rep reclaim.Report
			for pass := 0; pass <= reclaim.DefaultMaxLivenessChecks; pass++ {
				rep = l.run(t, rc)
				l.clock.Advance(liveGrace + time.Second)
			}
			got := l.get(t, id)
			_, registered := l.fake.RunnerByName(name)
			if got.State != job.Claimed || got.Replacements != 0 || got.FirstFailureAt != 0 {
				t.Fatalf("job %s at GitHub, runner online and idle: record %s, replacements %d, first_failure_at %d, runner still registered %v, report requeued %v; want no failure counted (claimed, 0 replacements, no max-age clock)",
					status, got.State, got.Replacements, got.FirstFailureAt, registered, rep.Requeued)
			}
		})
	}
}

// TestApprovedAfterMaxAgeIsNotAbandoned: a job whose first claim
// attempt met one passing failure (a 502, or a rate-limit deferral, which
// DESIGN says sets first_failure_at) and then succeeded is claimed with
// first_failure_at set (Finish does not clear it). GitHub then holds the
// job for an environment's reviewers for 4 hours; its runner's machine
// powers off at its idle limit (offline). The wait stops the max-age clock
// (job.CheckWaiting): after the approval the first check finds the job
// queued, the runner offline, and starts an attempt. With the clock running
// on, it abandoned the job, whose post-approval queued the webhook had
// answered "duplicate": lost.
func TestApprovedAfterMaxAgeIsNotAbandoned(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(7901)
	name := job.RunnerName("linux", id)
	claimedAt := t0.Add(-liveGrace - time.Second)
	l.claimed(t, id, claimedAt)
	r := l.get(t, id)
	r.FirstFailureAt = job.Millis(claimedAt.Add(-time.Minute)) // one 502 before the claim succeeded
	l.store.Put(r)
	must(t, l.fake.SetRunner(name, "offline", false)) // idle limit reached: the machine powered off
	l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "waiting", Labels: []string{"self-hosted", "linux"}})
	rc := l.reclaimer(t, nil)
	for start := l.clock.Now(); l.clock.Now().Sub(start) < 4*time.Hour; l.clock.Advance(liveGrace + time.Second) {
		l.run(t, rc)
	}
	if got := l.get(t, id); got.State != job.Claimed {
		t.Fatalf("while waiting: %s (%q)", got.State, got.LastError)
	}
	// The reviewer approves: GitHub queues the job again.
	l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "queued", Labels: []string{"self-hosted", "linux"}})
	// The next look is at most a parked job's longest interval away.
	for start := l.clock.Now(); l.clock.Now().Sub(start) <= reclaim.DefaultMaxParkedInterval; l.clock.Advance(time.Minute) {
		if l.run(t, rc); l.get(t, id).State != job.Claimed {
			break
		}
	}
	if got := l.get(t, id); got.State != job.Queued {
		t.Fatalf("approved job %d after a 4 h wait: record %s (%q); want a new attempt (queued): the wait counted toward max age", id, got.State, got.LastError)
	}
}

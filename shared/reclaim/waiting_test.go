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

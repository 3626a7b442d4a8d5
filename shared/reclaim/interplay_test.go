package reclaim_test

import (
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestWaitingDoesNotEraseBlockedClock: a claimed job whose runner is
// gone and whose old attempt can never be removed (Cleanup fails every
// time) starts the max-age clock (job.CheckBlocked) on every check that
// finds the job queued. GitHub answers "waiting" on every other check
// (a job alternating between a concurrency group's pending/waiting and
// queued, or an inconsistent read): the waits keep a clock the reclaimer
// started after the claim, so the job is abandoned at max age. They once
// removed it (job.CheckWaiting), and the clock restarted for ever.
func TestWaitingDoesNotEraseBlockedClock(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(7990)
	l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	rc := l.reclaimer(t, cleanupRefused)
	statuses := []string{"queued", "waiting"}
	pass := 0
	for start := l.clock.Now(); l.clock.Now().Sub(start) < 6*time.Hour; l.clock.Advance(liveGrace + time.Second) {
		l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: statuses[pass%2], Labels: []string{"self-hosted", "linux"}})
		l.run(t, rc)
		pass++
		if l.get(t, id).State.Terminal() {
			break
		}
	}
	if got := l.get(t, id); !got.State.Terminal() {
		t.Fatalf("job %d: old attempt never removable for 6 h (max age %s), GitHub alternating queued/waiting: record %s, first_failure_at %d; want abandoned at max age (the waits erased the blocked clock)",
			id, reclaim.DefaultMaxAge, got.State, got.FirstFailureAt)
	}
}

// TestTookPathWaitingIsParked: the runner was offline and the job
// queued when looked at; before the delete the runner took another job
// (GitHub: 422) and GitHub now holds our job waiting (queued, then
// waiting, as a job behind an environment's reviewers comes). The second
// status ("waiting") parks the job, as the first one would. It was not
// judged: the job got a new attempt counted as a replacement with the
// max-age clock started, or, at the replacement cap, was abandoned while
// GitHub still held it waiting (the approval's queued then a duplicate:
// lost).
func TestTookPathWaitingIsParked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n    int // replacements before
	}{{"first-attempt", 0}, {"at-cap", reclaim.DefaultMaxReplacements}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			id := int64(7995 + tc.n)
			name := job.RunnerNameAt("linux", id, tc.n)
			l.claimedAfter(t, id, t0.Add(-liveGrace-time.Second), tc.n)
			rc := l.reclaimer(t, func(c *reclaim.Config) {
				c.GitHub = racingGitHub{GitHub: c.GitHub, took: func() {
					must(t, l.fake.SetRunner(name, "online", true))
					l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "waiting", Labels: []string{"self-hosted", "linux"}})
				}}
			})
			l.run(t, rc)
			got := l.get(t, id)
			if got.State != job.Claimed || got.Replacements != tc.n || got.FirstFailureAt != 0 {
				t.Fatalf("job %d held waiting at GitHub after its runner was taken: record %s (%q), replacements %d, first_failure_at %d; want parked (claimed, %d replacements, no max-age clock)",
					id, got.State, got.LastError, got.Replacements, got.FirstFailureAt, tc.n)
			}
		})
	}
}

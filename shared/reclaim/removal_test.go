package reclaim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestStuckRemovalIsAbandonedAtMaxAge: a claimed job whose runner is gone while
// GitHub says the job is queued, and whose old attempt cannot be removed
// (the provisioner's Cleanup fails every time: a policy missing
// ec2:TerminateInstances, an EC2 outage), starts the max-age clock and is
// abandoned at max age. It was re-checked every grace with nothing
// counted: with first_failure_at unset (no failure before the claim, or
// removed by a wait at GitHub) the record stayed claimed until its TTL,
// never abandoned nor alarmed, while GitHub failed the job at 24 h.
func TestStuckRemovalIsAbandonedAtMaxAge(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name      string
		prior     bool // one 502 before the claim: first_failure_at set
		waitFirst bool // GitHub held the job (waiting) for one check
	}{
		{"with-prior-failure-then-wait", true, true},
		{"no-prior-failure", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			id := int64(7950 + i)
			claimedAt := t0.Add(-liveGrace - time.Second)
			l.claimed(t, id, claimedAt)
			if tc.prior {
				r := l.get(t, id)
				r.FirstFailureAt = job.Millis(claimedAt.Add(-time.Minute))
				l.store.Put(r)
			}
			rc := l.reclaimer(t, cleanupRefused)
			if tc.waitFirst {
				l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "waiting", Labels: []string{"self-hosted", "linux"}})
				l.run(t, rc)
				l.clock.Advance(liveGrace + time.Second)
				l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "queued", Labels: []string{"self-hosted", "linux"}})
			}
			for start := l.clock.Now(); l.clock.Now().Sub(start) < 4*time.Hour; l.clock.Advance(liveGrace + time.Second) {
				l.run(t, rc)
			}
			got := l.get(t, id)
			if !got.State.Terminal() {
				t.Fatalf("job %d queued at GitHub, runner gone, old attempt never removable, 4 h (max age %s): record %s, first_failure_at %d, replacements %d; want abandoned at max age",
					id, reclaim.DefaultMaxAge, got.State, got.FirstFailureAt, got.Replacements)
			}
		})
	}
}

// cleanupRefused makes every clean-up of an old attempt fail, as a policy
// missing ec2:TerminateInstances would.
func cleanupRefused(c *reclaim.Config) {
	c.Provisioner = reclaim.ProvisionerFunc(func(context.Context, reclaim.Leftover) error {
		return errors.New("UnauthorizedOperation: not authorized to perform ec2:TerminateInstances")
	})
}

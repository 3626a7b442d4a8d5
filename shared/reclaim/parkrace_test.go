package reclaim_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// statusThen is GitHub with then() run once, when armed, right after it
// answered a job status call: what changes between that answer and the
// reclaimer's next call or write.
type statusThen struct {
	reclaim.GitHub
	armed *bool
	then  func()
}

func (g statusThen) JobStatus(ctx context.Context, inst int64, owner, repo string, id int64) (string, error) {
	st, err := g.GitHub.JobStatus(ctx, inst, owner, repo, id)
	if *g.armed {
		*g.armed = false
		g.then()
	}
	return st, err
}

// afterStatus is l's reclaimer whose GitHub runs then() once, after the
// first job status answer once *armed is set.
func (l *live) afterStatus(t *testing.T, then func()) (*reclaim.Reclaimer, *bool) {
	t.Helper()
	armed := new(bool)
	return l.reclaimer(t, func(c *reclaim.Config) {
		c.GitHub = statusThen{GitHub: c.GitHub, armed: armed, then: then}
	}), armed
}

// TestWakeDuringParkIsKept: the reclaimer asked a held job's status
// ("waiting"); before its park was written the reviewers approved the
// job, its runner's machine had powered off, and the webhook woke the
// record (next look now, the version unchanged: a claimed record has no
// message). The park, conditional on the version alone, succeeded and put
// the look an hour out: the approved job waited that hour with nothing
// running for it. A held look is conditional on the next look it read.
func TestWakeDuringParkIsKept(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(8200)
	name := l.held(t, id, "online")
	rc, armed := l.afterStatus(t, func() {
		must(t, l.fake.SetRunner(name, "offline", false))
		l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "queued", Labels: []string{"self-hosted", "linux"}})
		cur := l.get(t, id) // the webhook's wake, as shared/webhook writes it
		if _, err := l.store.Recheck(context.Background(), cur, l.clock.Now(), job.CheckSkipped, l.clock.Now()); err != nil {
			t.Errorf("wake: %v", err)
		}
	})
	for start := l.clock.Now(); l.clock.Now().Sub(start) < 5*time.Hour; l.clock.Advance(time.Minute) {
		l.run(t, rc)
	}
	for l.get(t, id).SweepAt > job.Millis(l.clock.Now()) {
		l.clock.Advance(time.Minute)
	}
	*armed = true
	l.run(t, rc)
	approved := l.clock.Now()
	for l.get(t, id).State == job.Claimed && l.clock.Now().Sub(approved) < 10*time.Minute {
		l.clock.Advance(time.Minute)
		l.run(t, rc)
	}
	if got := l.get(t, id); got.State != job.Queued {
		t.Fatalf("approved and woken, runner offline: after 10 min record %s, waits %d, next look in %s; want a new attempt",
			got.State, got.Waits, job.FromMillis(got.SweepAt).Sub(l.clock.Now()))
	}
}

// TestParkedLookSeesOwnRunnerTakeJob: a held job's look asks its status
// first ("queued": approved), then its runner; between the two our idle
// runner took the job, so the runner is busy. Busy judged against the
// earlier "queued" was RunnerTaken: a new attempt (a second runner and
// machine, a replacement counted) for a job at work. A busy runner has
// the status asked again, as the ordinary look asks it after the runner.
func TestParkedLookSeesOwnRunnerTakeJob(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(8202)
	name := l.held(t, id, "online")
	rc, armed := l.afterStatus(t, func() {
		must(t, l.fake.SetRunner(name, "online", true))
		l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "in_progress", RunnerName: name, Labels: []string{"self-hosted", "linux"}})
	})
	for i := 0; i < 100 && l.get(t, id).Waits == 0; i++ { // three idle looks, then parked
		l.run(t, rc)
		l.clock.Advance(time.Minute)
	}
	if got := l.get(t, id); got.Waits != 1 {
		t.Fatalf("setup: waits %d, want 1", got.Waits)
	}
	l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "queued", Labels: []string{"self-hosted", "linux"}})
	l.clock.Advance(3 * liveGrace)
	*armed = true
	rep := l.run(t, rc)
	got := l.get(t, id)
	if got.State != job.Done || len(l.messages()) != 0 || got.Replacements != 0 {
		t.Fatalf("record %s, replacements %d, %d messages, taken %d, requeued %v; want done, no new attempt",
			got.State, got.Replacements, len(l.messages()), rep.RunnersTaken, rep.Requeued)
	}
}

// TestTimedWaitKeepsIdleChecks: a job whose max-age clock the reclaimer
// started (its old attempt once could not be removed), an idle runner that
// never takes it, and GitHub flipping between waiting and queued. A held
// look with that clock running keeps the idle checks (only a wait that
// stops the clock starts them over): otherwise each waiting look zeroed
// them, the runner was never judged lost, and the job stayed claimed,
// neither re-attempted nor abandoned.
func TestTimedWaitKeepsIdleChecks(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(8203)
	l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	must(t, l.fake.SetRunner(job.RunnerName("linux", id), "online", false))
	_, err := l.store.Recheck(context.Background(), l.get(t, id), t0, job.CheckBlocked, t0) // the reclaimer's clock
	must(t, err)
	rc := l.reclaimer(t, nil)
	statuses := []string{"waiting", "queued"}
	for pass, start := 0, l.clock.Now(); l.clock.Now().Sub(start) < 12*time.Hour; pass++ {
		l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: statuses[pass%2], Labels: []string{"self-hosted", "linux"}})
		l.run(t, rc)
		if l.get(t, id).State != job.Claimed {
			break
		}
		l.clock.Advance(liveGrace + time.Second)
	}
	if got := l.get(t, id); got.State == job.Claimed {
		t.Fatalf("idle runner 12 h, GitHub alternating: still claimed (checks %d, waits %d); want a new attempt or abandon",
			got.LivenessChecks, got.Waits)
	}
}

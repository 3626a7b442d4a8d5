package reclaim_test

import (
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestParkedJobBacksOff: a claimed job GitHub holds for its environment's
// reviewers for a day (status "waiting"), its runner online and idle.
// Every look at it is GitHub budget of its installation. A look every
// grace (10 min) cost three idle FindRunner checks and then FindRunner +
// job status, 5 calls per 4 graces (~180 a day per held job: a few hundred
// held jobs took most of the installation's 5,000 an hour). A held job is
// now looked at a grace, then twice as long after each look finding it
// still held, up to MaxParkedInterval (1 h), and asked about its status
// first (one call). The job stays claimed, nothing is replaced.
func TestParkedJobBacksOff(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(8100)
	name := l.held(t, id, "online")
	rc := l.reclaimer(t, nil)
	waiting := 0
	for start := l.clock.Now(); l.clock.Now().Sub(start) < 24*time.Hour; l.clock.Advance(time.Minute) {
		waiting += l.run(t, rc).LivenessWaiting
	}
	got := l.get(t, id)
	if got.State != job.Claimed || got.Replacements != 0 || got.FirstFailureAt != 0 {
		t.Fatalf("held for a day: record %s, replacements %d, first_failure_at %d; want claimed, nothing counted", got.State, got.Replacements, got.FirstFailureAt)
	}
	// Three idle looks (1 call each), the look that finds it held (2),
	// then one status call at 10, 20, 40 min and every hour after: ~29.
	calls := l.githubCalls()
	if calls > 32 || waiting < 20 || got.Waits != waiting {
		t.Fatalf("a day held at GitHub: %d GitHub calls over %d waiting looks (record says %d waits); want at most 32 (one status call an hour once parked, not ~180 at a look every grace)",
			calls, waiting, got.Waits)
	}
	if _, ok := l.fake.RunnerByName(name); !ok {
		t.Fatalf("runner %s deleted while its job was held", name)
	}
}

// TestParkedJobApprovedGetsAttempt: a job held for hours whose runner's
// machine powered off at its idle limit (offline); GitHub queues it after
// the approval. The next look (at most MaxParkedInterval away) asks the
// status (queued), then the runner (offline) and starts a new attempt,
// with the waits gone (the new attempt's first look is an ordinary one).
func TestParkedJobApprovedGetsAttempt(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(8101)
	l.held(t, id, "offline")
	rc := l.reclaimer(t, nil)
	for start := l.clock.Now(); l.clock.Now().Sub(start) < 5*time.Hour; l.clock.Advance(time.Minute) {
		l.run(t, rc)
	}
	if got := l.get(t, id); got.State != job.Claimed || got.Waits < 4 {
		t.Fatalf("held 5 h: record %s with %d waits, want claimed and parked", got.State, got.Waits)
	}
	l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "queued", Labels: []string{"self-hosted", "linux"}})
	before := l.githubCalls()
	var rep reclaim.Report
	for start := l.clock.Now(); l.clock.Now().Sub(start) <= reclaim.DefaultMaxParkedInterval; l.clock.Advance(time.Minute) {
		if rep = l.run(t, rc); rep.RequeuedTotal() > 0 {
			break
		}
	}
	got := l.get(t, id)
	if got.State != job.Queued || got.Replacements != 1 || got.Waits != 0 || rep.Requeued[reclaim.RunnerLost] != 1 {
		t.Fatalf("approved after 5 h, runner offline: record %s, replacements %d, waits %d, requeued %v; want a new attempt within %s (queued, 1 replacement, no waits)",
			got.State, got.Replacements, got.Waits, rep.Requeued, reclaim.DefaultMaxParkedInterval)
	}
	// The status (queued), the runner (offline), its delete.
	if calls := l.githubCalls() - before; calls != 3 {
		t.Errorf("the approved job's look made %d GitHub calls, want 3 (status, runner, delete)", calls)
	}
}

// TestParkedForDoubles: the interval after n held looks.
func TestParkedForDoubles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		grace, most time.Duration
		waits       int
		want        time.Duration
	}{
		{10 * time.Minute, time.Hour, 0, 10 * time.Minute},
		{10 * time.Minute, time.Hour, 1, 20 * time.Minute},
		{10 * time.Minute, time.Hour, 2, 40 * time.Minute},
		{10 * time.Minute, time.Hour, 3, time.Hour},
		{10 * time.Minute, time.Hour, 1000, time.Hour},
		{2 * time.Hour, time.Hour, 5, 2 * time.Hour}, // never below the grace
	} {
		if got := reclaim.ParkedFor(tc.grace, tc.most, tc.waits); got != tc.want {
			t.Errorf("ParkedFor(%s, %s, %d) = %s, want %s", tc.grace, tc.most, tc.waits, got, tc.want)
		}
	}
}

// held has job id claimed past its grace, its runner registered with
// status runnerStatus (idle), and the job held at GitHub ("waiting");
// it returns the runner's name.
func (l *live) held(t *testing.T, id int64, runnerStatus string) string {
	t.Helper()
	name := job.RunnerName("linux", id)
	l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	must(t, l.fake.SetRunner(name, runnerStatus, false))
	l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "waiting", Labels: []string{"self-hosted", "linux"}})
	return name
}

// TestHeldPastRecordTTLIsStillWatched: GitHub holds a job for its
// reviewers for up to 30 days; the record's TTL (RECORD_TTL, 7 days) was
// set at its creation and never renewed while it was claimed, so after a
// week DynamoDB may delete the record at any moment (and a new delivery
// counts it absent): the approval then rested on one queued delivery
// reaching the webhook, and nothing watched the job any more. Each look
// that finds the job held renews the TTL.
func TestHeldPastRecordTTLIsStillWatched(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(8102)
	l.held(t, id, "offline")
	rc := l.reclaimer(t, nil)
	for start := l.clock.Now(); l.clock.Now().Sub(start) < 10*24*time.Hour; l.clock.Advance(10 * time.Minute) {
		l.run(t, rc)
	}
	got := l.get(t, id)
	if got.State != job.Claimed || got.ExpiresAt*1000 <= job.Millis(l.clock.Now()) {
		t.Fatalf("held 10 days: record %s, expires_at %s; want claimed with its TTL ahead: it lapsed while GitHub held the job",
			got.State, time.Unix(got.ExpiresAt, 0).UTC())
	}
	l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "queued", Labels: []string{"self-hosted", "linux"}})
	for start := l.clock.Now(); l.clock.Now().Sub(start) <= reclaim.DefaultMaxParkedInterval; l.clock.Advance(time.Minute) {
		if l.run(t, rc).RequeuedTotal() > 0 {
			break
		}
	}
	if got := l.get(t, id); got.State != job.Queued || got.ExpiresAt*1000 <= job.Millis(l.clock.Now()) {
		t.Fatalf("approved after 10 days: record %s, expires_at %d; want a new attempt on a live record", got.State, got.ExpiresAt)
	}
}

package reclaim_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestBlockedCheckEndsAtMaxAge: a claimed job whose check cannot be made
// until something changes (its pool gone from the configuration; GitHub
// answering 404 for its repository, job and runner) was looked at every
// grace until its 7-day TTL, claimed all along. The first such check now
// starts the max-age clock; past max age the job is abandoned, naming
// why, and its runner and machine are left (nobody can say they are idle).
func TestBlockedCheckEndsAtMaxAge(t *testing.T) {
	t.Parallel()
	const id = int64(740)
	tests := []struct {
		name    string
		prepare func(t *testing.T, l *live)
		why     string
	}{
		{name: "pool no longer configured, and none serves its labels", why: "pool linux is not configured",
			prepare: func(t *testing.T, l *live) {
				mac := l.pools[0]
				mac.Name, mac.Labels = "mac", []string{"self-hosted", "macos"}
				l.pools = []pool.Pool{mac}
			}},
		// Renamed, but the record keeps no scope (a claim from before
		// runner_scope): "not found" at a guessed scope could end the
		// machine of a runner at work at the other, so it is not judged.
		{name: "pool renamed, the record naming no scope", why: "pool linux is not configured",
			prepare: func(t *testing.T, l *live) {
				l.pools[0].Name = "linux-v2"
				r := l.get(t, id)
				r.Scope = ""
				l.store.Put(r)
			}},
		{name: "GitHub answers 404", why: "github: ",
			prepare: func(t *testing.T, l *live) {
				r := l.get(t, id)
				r.Repo = "octo/deleted" // the repository, its runs and runners gone
				l.store.Put(r)
			}},
		// GitHub refuses the App's token exchange itself: retryable for
		// the claimer (an operator's fix, not the job's fault), yet a
		// check that cannot be made until the operator acts, as above;
		// not a passing failure looked at every grace until the TTL.
		{name: "App key rotated on GitHub (401 on the token exchange)", why: "github: github token 401",
			prepare: func(t *testing.T, l *live) {
				other, err := rsa.GenerateKey(rand.Reader, 2048)
				if err != nil {
					t.Fatal(err)
				}
				l.fake.SetPublicKey(&other.PublicKey)
				l.newProcess(t)
			}},
		{name: "installation suspended (403 on the token exchange)", why: "github: github token 403",
			prepare: func(t *testing.T, l *live) {
				l.fake.Suspend(42)
				l.newProcess(t)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			l.claimed(t, id, t0.Add(-liveGrace-time.Second))
			tt.prepare(t, l)

			l.run(t, l.reclaimer(t, nil))
			got := l.get(t, id)
			if got.State != job.Claimed || got.FirstFailureAt != job.Millis(t0) || got.SweepAt <= job.Millis(t0) {
				t.Fatalf("after the first blocked check: %s, first_failure_at %d, sweep_at %d; want claimed, the max-age clock started now, looked at later",
					got.State, got.FirstFailureAt, got.SweepAt)
			}

			// Looked at every grace; abandoned once past max age.
			var rep reclaim.Report
			for i := 0; i < 20 && got.State == job.Claimed; i++ {
				l.clock.Set(job.FromMillis(got.SweepAt).Add(time.Second))
				rep = l.run(t, l.reclaimer(t, nil))
				got = l.get(t, id)
			}
			if got.State != job.Abandoned || rep.Abandoned != 1 || !strings.Contains(got.LastError, tt.why) {
				t.Fatalf("record %s (%q), report %+v: want abandoned past max age, naming %q", got.State, got.LastError, rep, tt.why)
			}
			if age := l.clock.Now().Sub(t0); age <= reclaim.DefaultMaxAge || age > reclaim.DefaultMaxAge+liveGrace+time.Second {
				t.Errorf("abandoned %s after the first blocked check, want just past max age %s", age, reclaim.DefaultMaxAge)
			}
			if n := l.machinesLive(id); n != 1 {
				t.Errorf("%d live machines, want its machine left (its runner's state unknown)", n)
			}
		})
	}
}

// TestAppRefusedChecksCostOneExchange: while GitHub refuses the App's
// token exchange, a pass over many claimed jobs of one installation asks
// GitHub for a token once, not once per liveness check (the refusal is
// held in shared/ghapp), and each job is still judged blocked by the
// App's refusal.
func TestAppRefusedChecksCostOneExchange(t *testing.T) {
	t.Parallel()
	const jobs = 5
	l := setupLive(t)
	for i := range int64(jobs) {
		l.claimed(t, 750+i, t0.Add(-liveGrace-time.Second))
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	l.fake.SetPublicKey(&other.PublicKey) // the App's key rotated on GitHub
	l.newProcess(t)
	before := l.fake.Stats().TokenRequests[42]

	l.run(t, l.reclaimer(t, nil))
	if got := l.fake.Stats().TokenRequests[42] - before; got != 1 {
		t.Errorf("%d token exchanges for %d liveness checks GitHub refused, want 1", got, jobs)
	}
	for i := range int64(jobs) {
		if got := l.get(t, 750+i); got.State != job.Claimed || got.FirstFailureAt != job.Millis(t0) {
			t.Errorf("job %d: %s, first_failure_at %d; want claimed, blocked (its max-age clock started now)", 750+i, got.State, got.FirstFailureAt)
		}
	}
}

// TestLateRefusalIsStillJudged: GitHub's own refusal for good (a 404 for
// the job) that arrives after the check's window ended is judged as any
// other (the max-age clock starts), not taken for a cut call: a record
// whose answers always come late would otherwise never be abandoned.
func TestLateRefusalIsStillJudged(t *testing.T) {
	t.Parallel()
	const id = int64(742)
	l := setupLive(t)
	l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	r := l.get(t, id)
	r.Repo = "octo/deleted"
	l.store.Put(r)
	rec := l.reclaimer(t, func(c *reclaim.Config) {
		c.Budget = 40 * time.Second
		c.GitHub = slowAnswers{slowGitHub{GitHub: c.GitHub, advance: l.clock.Advance, d: 20 * time.Second}}
	})
	if _, err := rec.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := l.get(t, id); got.State != job.Claimed || got.FirstFailureAt == 0 {
		t.Fatalf("after a 404 that came late: %s, first_failure_at %d; want claimed with the max-age clock started", got.State, got.FirstFailureAt)
	}
}

// TestRemovedPoolJobThatRanIsDone: a job claimed under pool linux, then
// linux left RUNNER_POOLS (renamed or removed) and our runner took the
// job. The webhook re-decides in_progress and completed from today's
// pools and writes nothing for it; the liveness check, unable to judge a
// runner of an unknown pool, blocked the record without asking GitHub
// and abandoned it at max age (GiveUpsAlarm) though it had run. GitHub's
// word on the job needs no pool: the record is done.
func TestRemovedPoolJobThatRanIsDone(t *testing.T) {
	t.Parallel()
	const id = int64(743)
	for _, status := range []string{"in_progress", "completed"} {
		t.Run(status, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			l.claimed(t, id, t0.Add(-liveGrace-time.Second))
			mac := l.pools[0]
			mac.Name = "mac"
			l.pools = []pool.Pool{mac}
			l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: status, Labels: []string{"self-hosted", "linux"}})
			rep := l.run(t, l.reclaimer(t, nil))
			if got := l.get(t, id); got.State != job.Done || rep.LivenessDone != 1 {
				t.Fatalf("pool gone, job %s at GitHub: record %s (%q), report done %d; want done", status, got.State, got.LastError, rep.LivenessDone)
			}
		})
	}
}

// TestRenamedPoolClaimedJobIsChecked: a job claimed in pool linux, whose
// runner never took it (offline, its machine up), and linux renamed
// linux-v2 (same labels). The check judged no runner of an unknown pool:
// the job was held until max age and abandoned, never run. The pool that
// serves its labels now stands in, under the recorded name and scope:
// the runner is found, removed with its machine, and a new attempt is
// started (the claimer moves it to linux-v2).
func TestRenamedPoolClaimedJobIsChecked(t *testing.T) {
	t.Parallel()
	const id = int64(744)
	l := setupLive(t)
	jit := l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	l.pools[0].Name = "linux-v2"
	rep := l.run(t, l.reclaimer(t, nil))
	got := l.get(t, id)
	if got.State != job.Queued || got.Replacements != 1 || got.Pool != "linux" {
		t.Fatalf("record %s in %q, replacements %d (%q); want queued for a new attempt, its pool as recorded", got.State, got.Pool, got.Replacements, got.LastError)
	}
	if _, ok := l.fake.RunnerByName(jit.Name); ok || l.machinesLive(id) != 0 || rep.Requeued[reclaim.RunnerLost] != 1 {
		t.Errorf("runner %s registered %v, %d live machines, report %+v; want it removed with its machine, counted lost", jit.Name, ok, l.machinesLive(id), rep)
	}
}

// newProcess gives l a new App client: no installation token cached, as
// in a reclaimer started after the claim.
func (l *live) newProcess(t *testing.T) {
	t.Helper()
	gh, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: appKey(), BaseURL: l.url, Now: l.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l.gh = gh
}

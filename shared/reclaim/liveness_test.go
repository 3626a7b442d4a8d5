package reclaim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// live is a liveness flow test's world: f's store, queue and clock, the
// GitHub stand-in behind the real App client (rate transport included) and
// the in-memory provisioner.
type live struct {
	*fixture
	fake  *ghfake.Server
	gh    *ghapp.Client
	rates *ratelimit.Tracker
	prov  *mem.Provisioner
	pools []pool.Pool
	url   string // the stand-in's
}

const liveGrace = 10 * time.Minute

func setupLive(t *testing.T) *live {
	t.Helper()
	f := setup(t)
	fake, gh, rates, url := f.github(t)
	pools := []pool.Pool{{Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
		RunnerStartGrace: liveGrace.String(), Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "q"}}}
	return &live{fixture: f, fake: fake, gh: gh, rates: rates, prov: mem.NewProvisioner(), pools: pools, url: url}
}

// github starts the GitHub stand-in on f's clock and returns it, the App
// client over it (through the rate transport, sharing readings in f's
// store), that tracker, and the stand-in's URL.
func (f *fixture) github(t *testing.T) (*ghfake.Server, *ghapp.Client, *ratelimit.Tracker, string) {
	t.Helper()
	fake := ghfake.New(ghfake.WithClock(f.clock.Now), ghfake.WithAppID(appID))
	ts := httptest.NewServer(fake)
	t.Cleanup(ts.Close)
	rates := ratelimit.NewTracker(f.store, ratelimit.DefaultPersistRule(), f.clock.Now)
	gh, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: appKey(), BaseURL: ts.URL, Now: f.clock.Now,
		Wrap: func(inst int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, inst, rates, f.clock.Now)
		}})
	if err != nil {
		t.Fatal(err)
	}
	return fake, gh, rates, ts.URL
}

// reclaimer is f's reclaimer with the liveness collaborators wired.
func (l *live) reclaimer(t *testing.T, mod func(*reclaim.Config)) *reclaim.Reclaimer {
	return l.fixture.reclaimer(t, 1, func(c *reclaim.Config) {
		c.GitHub, c.Rates, c.Pools = l.gh, l.rates, l.pools
		c.Provisioner = reclaim.ProvisionerFunc(func(ctx context.Context, lo reclaim.Leftover) error {
			return l.prov.Cleanup(ctx, pool.Request{JobID: lo.JobID, RunID: lo.RunID, Repo: lo.Repo, Pool: lo.Pool, RunnerName: lo.RunnerName, KeepMachines: lo.KeepMachines})
		})
		if mod != nil {
			mod(c)
		}
	})
}

// claimed has job id claimed at at as a claimer leaves it: its runner
// registered (offline: not booted yet), its machine started, the job
// queued at GitHub.
func (l *live) claimed(t *testing.T, id int64, at time.Time) ghapp.JIT {
	t.Helper()
	return l.claimedAfter(t, id, at, 0)
}

// claimedAfter is claimed for the attempt after n replacements: its runner
// is named job.RunnerNameAt("linux", id, n), as the claimer names it.
func (l *live) claimedAfter(t *testing.T, id int64, at time.Time, n int) ghapp.JIT {
	t.Helper()
	ctx := context.Background()
	lease := l.claiming(t, id, at, at.Add(lease))
	if n > 0 {
		r := l.get(t, id)
		r.Replacements = n
		l.store.Put(r)
	}
	name := job.RunnerNameAt("linux", id, n)
	jit, err := l.gh.GenerateJIT(ctx, 42, ghapp.JITRequest{Scope: pool.ScopeRepo, Owner: "octo", Repo: "app", Name: name, Labels: []string{"self-hosted", "linux"}})
	if err != nil {
		t.Fatalf("register runner: %v", err)
	}
	if _, err := l.prov.Provision(ctx, pool.Request{JobID: id, RunID: 7, Repo: "octo/app", Pool: l.pools[0], RunnerName: name, Replacement: n, JITConfig: jit.EncodedConfig.Reveal()}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if err := l.store.Finish(ctx, lease, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: name, Scope: pool.ScopeRepo, RunnerStartGrace: l.pools[0].StartGrace()}, at); err != nil {
		t.Fatalf("finish claimed: %v", err)
	}
	l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "queued", Labels: []string{"self-hosted", "linux"}})
	return jit
}

func (l *live) machinesLive(id int64) int {
	n := 0
	for _, m := range l.prov.Machines(id) {
		if !m.Stopped {
			n++
		}
	}
	return n
}

func (l *live) githubCalls() int {
	n := 0
	for route, c := range l.fake.Stats().Calls {
		if route == ghfake.RouteRepoRunners || route == ghfake.RouteJob || route == ghfake.RouteRepoDeleteRunner {
			n += c
		}
	}
	return n
}

// TestLiveness: a claimed job past its runner-start grace is checked at
// GitHub and moved on: a new attempt when its runner never came (offline,
// missing), or at once when its runner is busy with another job (taken:
// the busy runner and its machine left to that job); checked again,
// bounded, while its runner is online but idle; done when GitHub has it at
// work already; left
// for later, GitHub not asked, while the installation is exhausted;
// abandoned at the replacement cap.
func TestLiveness(t *testing.T) {
	t.Parallel()
	const id = int64(700)
	name := job.RunnerName("linux", id)
	tests := []struct {
		name    string
		prepare func(t *testing.T, l *live)
		// want
		state        job.State
		reason       reclaim.Reason // the requeue's reason ("" none)
		runnerGone   bool
		machinesLive int
		checks       int // liveness_checks after the pass
		githubCalls  int
		replacements int // of the claimed attempt
		report       func(r reclaim.Report) bool
	}{
		{name: "machine never booted: new attempt, runner and machine removed",
			state: job.Queued, reason: reclaim.RunnerLost, runnerGone: true, machinesLive: 0, githubCalls: 3},
		{name: "runner missing: new attempt, machine removed",
			prepare: func(t *testing.T, l *live) {
				r, _ := l.fake.RunnerByName(name)
				if err := l.gh.DeleteRunner(context.Background(), 42, pool.ScopeRepo, "octo", "app", r.ID); err != nil {
					t.Fatal(err)
				}
			},
			state: job.Queued, reason: reclaim.RunnerLost, runnerGone: true, machinesLive: 0, githubCalls: 2},
		{name: "runner online and idle: checked again, nothing removed",
			prepare: func(t *testing.T, l *live) { must(t, l.fake.SetRunner(name, "online", false)) },
			state:   job.Claimed, machinesLive: 1, checks: 1, githubCalls: 1,
			report: func(r reclaim.Report) bool { return r.LivenessChecks == 1 }},
		{name: "runner busy with another job: new attempt at once, busy runner and its machine left",
			prepare: func(t *testing.T, l *live) { must(t, l.fake.SetRunner(name, "online", true)) },
			state:   job.Queued, reason: reclaim.RunnerTaken, machinesLive: 1, githubCalls: 2,
			report: func(r reclaim.Report) bool { return r.RunnersTaken == 1 }},
		{name: "job in progress at GitHub (missed delivery): done",
			prepare: func(t *testing.T, l *live) {
				l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "in_progress", RunnerName: name})
				must(t, l.fake.SetRunner(name, "online", true))
			},
			state: job.Done, machinesLive: 1, githubCalls: 2,
			report: func(r reclaim.Report) bool { return r.LivenessDone == 1 }},
		{name: "installation exhausted: GitHub not asked, checked later",
			prepare: func(t *testing.T, l *live) {
				rd := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(time.Hour), ObservedAt: t0.Add(-time.Minute)}
				must(t, l.store.SaveRate(context.Background(), 42, rd))
				// A tracker of a fresh instance: the shared reading, not this one's last answer.
				l.rates = ratelimit.NewTracker(l.store, ratelimit.DefaultPersistRule(), l.clock.Now)
			},
			state: job.Claimed, machinesLive: 1, githubCalls: 0,
			report: func(r reclaim.Report) bool { return r.LivenessRateLimited == 1 }},
		{name: "replacement cap: abandoned, the last attempt's runner and machine removed",
			replacements: reclaim.DefaultMaxReplacements,
			state:        job.Abandoned, runnerGone: true, machinesLive: 0, githubCalls: 3,
			report: func(r reclaim.Report) bool { return r.Abandoned == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			claimedAt := t0.Add(-liveGrace - time.Second)
			l.claimedAfter(t, id, claimedAt, tt.replacements)
			if tt.prepare != nil {
				tt.prepare(t, l)
			}
			before := l.get(t, id)
			calls := l.githubCalls()

			rep := l.run(t, l.reclaimer(t, nil))

			got := l.get(t, id)
			if got.State != tt.state {
				t.Fatalf("state %s, want %s (report %+v)", got.State, tt.state, rep)
			}
			if n := l.githubCalls() - calls; n != tt.githubCalls {
				t.Errorf("%d GitHub calls, want %d", n, tt.githubCalls)
			}
			_, registered := l.fake.RunnerByName(job.RunnerNameAt("linux", id, tt.replacements))
			if registered == tt.runnerGone {
				t.Errorf("runner registered %v, want %v", registered, !tt.runnerGone)
			}
			if n := l.machinesLive(id); n != tt.machinesLive {
				t.Errorf("%d live machines, want %d", n, tt.machinesLive)
			}
			if tt.report != nil && !tt.report(rep) {
				t.Errorf("report %+v", rep)
			}
			msgs := l.messages()
			switch {
			case tt.reason != "":
				if rep.Requeued[tt.reason] != 1 || len(msgs) != 1 || msgs[0].msg.Version != before.Version+1 {
					t.Fatalf("requeued %v, messages %+v, want one %s message at version %d", rep.Requeued, msgs, tt.reason, before.Version+1)
				}
				if got.Attempt != before.Attempt || got.Replacements != 1 || got.FirstFailureAt != job.Millis(t0) {
					t.Errorf("new attempt %+v, want attempt %d (the claimer counts the next), replacements 1, max-age clock started", got, before.Attempt)
				}
				// The re-attempt, as CloudWatch reads it: one reclaim with its reason.
				points := emftest.Parse(t, []byte(l.emf.String()))
				if n := emftest.Total(points, reclaim.MetricReclaimed, map[string]string{"reason": string(tt.reason), "function": "reclaimer"}); n != 1 {
					t.Errorf("EMF %s{reason=%s} = %v, want 1: %+v", reclaim.MetricReclaimed, tt.reason, n, points)
				}
			case len(msgs) != 0:
				t.Errorf("messages %+v, want none", msgs)
			}
			if tt.state == job.Claimed {
				if got.LivenessChecks != tt.checks || got.SweepAt <= job.Millis(t0) {
					t.Errorf("checked again: %+v, want %d checks and sweep_at after now", got, tt.checks)
				}
			}
		})
	}
}

// TestLivenessIdleIsBounded: an online runner that GitHub never assigns is
// given MaxLivenessChecks more graces, then treated as lost.
func TestLivenessIdleIsBounded(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(701)
	l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	must(t, l.fake.SetRunner(job.RunnerName("linux", id), "online", false))
	rc := l.reclaimer(t, func(c *reclaim.Config) { c.MaxLivenessChecks = 2 })
	for i := 1; i <= 2; i++ {
		rep := l.run(t, rc)
		if got := l.get(t, id); got.State != job.Claimed || got.LivenessChecks != i || rep.LivenessChecks != 1 {
			t.Fatalf("check %d: %+v, report %+v", i, got, rep)
		}
		l.clock.Advance(liveGrace + time.Second)
	}
	rep := l.run(t, rc)
	if got := l.get(t, id); got.State != job.Queued || rep.Requeued[reclaim.RunnerLost] != 1 {
		t.Fatalf("after %d idle checks: %+v, report %+v, want a new attempt", 2, got, rep)
	}
	if _, ok := l.fake.RunnerByName(job.RunnerName("linux", id)); ok {
		t.Errorf("the idle runner is still registered")
	}
}

// TestNeverBootedJobRunsOnASecondRunner: the whole path: a claimed job
// whose machine never boots is found after its grace, its first runner and
// machine removed, and the claimer claims it again with a new runner on a
// new machine.
func TestNeverBootedJobRunsOnASecondRunner(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(702)
	name := job.RunnerName("linux", id)
	first := l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	firstMachine := l.prov.Machines(id)[0].ID

	l.run(t, l.reclaimer(t, nil))
	msgs := l.messages()
	if len(msgs) != 1 {
		t.Fatalf("messages %+v, want one", msgs)
	}

	l.claimNext(t, msgs[0])
	got := l.get(t, id)
	if got.State != job.Claimed || got.Attempt != 2 || got.Replacements != 1 {
		t.Fatalf("after the second claim: %+v, want claimed, attempt 2, one replacement", got)
	}
	if _, ok := l.fake.RunnerByName(name); ok {
		t.Errorf("the first runner %s is still registered", name)
	}
	second, ok := l.fake.RunnerByName(job.RunnerNameAt("linux", id, 1))
	if !ok || second.ID == first.RunnerID {
		t.Fatalf("runner %+v (registered %v), want a new registration (first id %d)", second, ok, first.RunnerID)
	}
	var live []mem.Machine
	for _, m := range l.prov.Machines(id) {
		if !m.Stopped {
			live = append(live, m)
		}
	}
	if len(live) != 1 || live[0].ID == firstMachine {
		t.Fatalf("live machines %+v, want one new machine (first %s stopped)", live, firstMachine)
	}
	if got.SweepAt != job.Millis(l.clock.Now().Add(liveGrace)) {
		t.Errorf("sweep_at %d, want the new claim + grace", got.SweepAt)
	}
}

// claimNext runs a claimer on msg once its delay has passed, as SQS
// delivers it.
func (l *live) claimNext(t *testing.T, msg sent) {
	t.Helper()
	c, err := claim.New(claim.Config{
		Pools: l.pools, Store: l.store, Queue: l.queue, GitHub: l.gh, Provisioner: l.prov, Policy: backoff.Default(),
		Rates: l.rates, Now: l.clock.Now, Rand: random.New(1), Logger: slog.New(slog.NewJSONHandler(l.logs, nil)), InstanceID: "claimer-2",
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(msg.msg)
	if err != nil {
		t.Fatal(err)
	}
	l.clock.Advance(msg.delay)
	resp, err := c.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m2", ReceiptHandle: "rh-2", Body: string(body), EventSource: "aws:sqs"}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("claim: %+v, %v", resp, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTakenRunnerNewAttemptAtOnce: a runner taken by another job is left
// to finish it (not deleted, its machine running), and the job gets its
// new attempt at once: the claimer registers <pool>-<job>-r1 on a machine
// of its own. Before, the job waited for the taken runner to finish.
func TestTakenRunnerNewAttemptAtOnce(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	const id = int64(703)
	name := job.RunnerName("linux", id)
	l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	taken := l.prov.Machines(id)[0].ID
	must(t, l.fake.SetRunner(name, "online", true))
	rep := l.run(t, l.reclaimer(t, nil))
	msgs := l.messages()
	if got := l.get(t, id); got.State != job.Queued || got.Replacements != 1 || rep.RunnersTaken != 1 ||
		rep.Requeued[reclaim.RunnerTaken] != 1 || len(msgs) != 1 || msgs[0].msg.Version != got.Version {
		t.Fatalf("taken: record %+v, report %+v, messages %+v, want a new attempt sent at once", got, rep, msgs)
	}
	if r, ok := l.fake.RunnerByName(name); !ok || !r.Busy {
		t.Fatalf("the taken runner: %+v (registered %v), want left registered and busy", r, ok)
	}

	l.claimNext(t, msgs[0])
	want := job.RunnerNameAt("linux", id, 1)
	if got := l.get(t, id); got.State != job.Claimed || got.RunnerName != want {
		t.Fatalf("after the new attempt: %+v, want claimed by %s", got, want)
	}
	live := l.prov.Machines(id)
	if len(live) != 2 || live[0].ID != taken || live[1].RunnerName != want {
		t.Fatalf("live machines %+v, want the taken runner's %s still running and one for %s", live, taken, want)
	}
}

// racingGitHub is GitHub where the runner takes a job between the
// reclaimer's look and its delete: took runs just before the delete, which
// GitHub then refuses (422, still running a job).
type racingGitHub struct {
	reclaim.GitHub
	took func()
}

func (g racingGitHub) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, id int64) error {
	g.took()
	return g.GitHub.DeleteRunner(ctx, installationID, scope, owner, repo, id)
}

// TestRunnerThatTakesAJobDuringTheCheck: the runner was offline and the job
// queued when looked at, but it took a job before the delete (GitHub: 422).
// If that job is ours, GitHub now has it in progress: done, and no second
// runner. If it is another's, ours is still queued: a new attempt, as for
// any taken runner. Before, a new attempt went out either way, and a job
// whose own runner had just taken it got a second runner and machine.
func TestRunnerThatTakesAJobDuringTheCheck(t *testing.T) {
	t.Parallel()
	for _, ours := range []bool{true, false} {
		l := setupLive(t)
		id := int64(710)
		if !ours {
			id = 711
		}
		name := job.RunnerName("linux", id)
		l.claimed(t, id, t0.Add(-liveGrace-time.Second))
		r := l.reclaimer(t, func(c *reclaim.Config) {
			c.GitHub = racingGitHub{GitHub: c.GitHub, took: func() {
				must(t, l.fake.SetRunner(name, "online", true))
				if ours {
					l.fake.SetJob("octo", "app", ghfake.Job{ID: id, RunID: 7, Status: "in_progress", RunnerName: name})
				}
			}}
		})
		rep := l.run(t, r)
		got, msgs := l.get(t, id), l.messages()
		if ours {
			if got.State != job.Done || len(msgs) != 0 || rep.LivenessDone != 1 || got.Replacements != 0 {
				t.Errorf("our job taken by its runner: record %+v, report %+v, %d messages; want done, no new attempt", got, rep, len(msgs))
			}
		} else if got.State != job.Queued || got.Replacements != 1 || len(msgs) != 1 || rep.Requeued[reclaim.RunnerTaken] != 1 || rep.RunnersTaken != 1 {
			t.Errorf("runner taken by another job: record %+v, report %+v, %d messages; want a new attempt for a taken runner", got, rep, len(msgs))
		}
		if l.machinesLive(id) != 1 {
			t.Errorf("job %d: %d live machines, want the busy runner's kept", id, l.machinesLive(id))
		}
	}
}

// TestFailedRemovalDefersTheNewAttempt: when the old attempt cannot be
// removed (GitHub fails the runner's delete, or the provisioner's clean-up
// fails), its machine may still be up, so the new attempt waits for a
// later check that removes it: the job never has two live machines.
// Before, the new attempt went on and the job ran two machines until the
// janitor ended the old one (make chaos: duplicate_instances=1).
func TestFailedRemovalDefersTheNewAttempt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		fail func(l *live) func(*reclaim.Config)
		// block: the refusal is a secondary limit, shared as a block.
		block bool
	}{
		{name: "delete fails", fail: func(l *live) func(*reclaim.Config) {
			l.fake.Fail(ghfake.RouteRepoDeleteRunner, 1, ghfake.ServerError(http.StatusBadGateway))
			return nil
		}},
		{name: "delete refused by a secondary limit", block: true, fail: func(l *live) func(*reclaim.Config) {
			l.fake.Fail(ghfake.RouteRepoDeleteRunner, 1, ghfake.SecondaryRateLimit(0))
			return nil
		}},
		{name: "clean-up fails", fail: func(l *live) func(*reclaim.Config) {
			failed := false
			return func(c *reclaim.Config) {
				next := c.Provisioner
				c.Provisioner = reclaim.ProvisionerFunc(func(ctx context.Context, lo reclaim.Leftover) error {
					if !failed {
						failed = true
						return errors.New("ec2: RequestLimitExceeded")
					}
					return next.Cleanup(ctx, lo)
				})
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			const id = int64(703)
			l.claimed(t, id, t0.Add(-liveGrace-time.Second))
			r := l.reclaimer(t, tt.fail(l))

			l.run(t, r)
			if msgs := l.messages(); len(msgs) != 0 {
				t.Fatalf("messages %+v after a failed removal, want none (the old machine may be up)", msgs)
			}
			// Checked again after a grace; after a secondary limit (no
			// Retry-After: a minute), at the block's end plus the jitter.
			lo, hi := l.clock.Now().Add(liveGrace), l.clock.Now().Add(liveGrace+time.Millisecond)
			if tt.block {
				end := l.clock.Now().Add(ratelimit.MinBlock)
				lo, hi = end.Add(backoff.SnapJitterMin), end.Add(backoff.SnapJitterMax)
			}
			if got := l.get(t, id); got.State != job.Claimed || job.FromMillis(got.SweepAt).Before(lo) || !job.FromMillis(got.SweepAt).Before(hi) {
				t.Fatalf("record %+v, want claimed, checked again in [%s, %s)", got, lo, hi)
			}
			if rd, err := l.store.LoadRate(context.Background(), 42); tt.block && (err != nil || !rd.Blocked(l.clock.Now())) {
				t.Fatalf("shared rate item %+v (%v), want the secondary limit's block", rd, err)
			}

			l.clock.Advance(liveGrace + time.Second)
			l.run(t, r)
			msgs := l.messages()
			if len(msgs) != 1 {
				t.Fatalf("messages %+v after the second check, want one new attempt", msgs)
			}
			if n := l.machinesLive(id); n != 0 {
				t.Fatalf("live machines %d before the new attempt, want 0", n)
			}
			l.claimNext(t, msgs[0])
			if n := l.machinesLive(id); n != 1 {
				t.Errorf("live machines %d after the new attempt, want 1", n)
			}
		})
	}
}

// slowGitHub is a GitHub whose runner look-ups take d of the injected clock.
type slowGitHub struct {
	reclaim.GitHub
	advance func(time.Duration)
	d       time.Duration
}

func (s slowGitHub) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	s.advance(s.d)
	return s.GitHub.FindRunner(ctx, installationID, scope, owner, repo, name)
}

// slowPass runs one 40 s pass over four claimed jobs from first on (past
// their grace) and one outbox-lost job, GitHub wrapped by slow, and
// returns the report and which jobs were sent.
func slowPass(t *testing.T, l *live, first, lost int64, slow func(reclaim.GitHub) reclaim.GitHub) (reclaim.Report, map[int64]bool) {
	t.Helper()
	for id := first; id < first+4; id++ {
		l.claimed(t, id, t0.Add(-liveGrace-time.Second))
	}
	l.pending(t, lost, t0.Add(-time.Hour))
	r := l.reclaimer(t, func(c *reclaim.Config) {
		c.Budget = 40 * time.Second
		c.GitHub = slow(c.GitHub)
	})
	rep, _ := r.Run(context.Background())
	sent := map[int64]bool{}
	for _, m := range l.messages() {
		sent[m.msg.JobID] = true
	}
	if !sent[lost] {
		t.Errorf("the outbox-lost job %d was not sent (report %+v)", lost, rep)
	}
	return rep, sent
}

// TestSlowLivenessLeavesTimeToSend: liveness checks (GitHub calls) do not
// start past the third quarter of the budget, so the take-backs of the
// other stale records are sent in the same pass. Before, slow checks used
// the budget up and the pass sent nothing (make chaos).
func TestSlowLivenessLeavesTimeToSend(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	rep, _ := slowPass(t, l, 801, 900, func(gh reclaim.GitHub) reclaim.GitHub {
		return slowGitHub{GitHub: gh, advance: l.clock.Advance, d: 12 * time.Second}
	})
	if !rep.Incomplete {
		t.Errorf("report %+v, want incomplete (a check left for the next pass)", rep)
	}
}

// slowAnswers is slowGitHub with the job's status as slow as its runner.
type slowAnswers struct{ slowGitHub }

func (s slowAnswers) JobStatus(ctx context.Context, installationID int64, owner, repo string, jobID int64) (string, error) {
	s.advance(s.d)
	return s.GitHub.JobStatus(ctx, installationID, owner, repo, jobID)
}

// TestSlowChecksStopBeforeRemoving: a check started in time whose calls
// are slow (7 s each, inside the App client's 10 s timeout) stops at the
// end of its window, before its next call, and never removes an old
// attempt it has no time left to re-send: every job whose machine was
// ended has its new message, and the outbox-lost job is sent. Before, the
// last check ran past the budget: the pass sent nothing, the jobs whose old
// attempt it had removed sat claimed with nothing running (an audit).
func TestSlowChecksStopBeforeRemoving(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	rep, sent := slowPass(t, l, 811, 910, func(gh reclaim.GitHub) reclaim.GitHub {
		return slowAnswers{slowGitHub{GitHub: gh, advance: l.clock.Advance, d: 7 * time.Second}}
	})
	for id := int64(811); id <= 814; id++ {
		if l.machinesLive(id) == 0 && !sent[id] {
			t.Errorf("job %d: its old attempt was removed but no new attempt sent (record %s)", id, l.get(t, id).State)
		}
	}
	if !rep.Incomplete || len(sent) < 2 {
		t.Errorf("report %+v, %d jobs sent: want some checks done and sent, the rest left to the next pass", rep, len(sent))
	}
}

// hangingGitHub never answers FindRunner: it waits for the call's
// context to end, and records that it did.
type hangingGitHub struct {
	reclaim.GitHub
	ended chan error
	// onDelete: FindRunner answers, and DeleteRunner is the call that
	// never answers.
	onDelete bool
}

func (h hangingGitHub) FindRunner(ctx context.Context, inst int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	if h.onDelete {
		return h.GitHub.FindRunner(ctx, inst, scope, owner, repo, name)
	}
	<-ctx.Done()
	h.ended <- ctx.Err()
	return ghapp.Runner{}, ctx.Err()
}

func (h hangingGitHub) DeleteRunner(ctx context.Context, inst int64, scope, owner, repo string, id int64) error {
	if !h.onDelete {
		return h.GitHub.DeleteRunner(ctx, inst, scope, owner, repo, id)
	}
	<-ctx.Done()
	h.ended <- ctx.Err()
	return ctx.Err()
}

// TestHangingCheckIsCutAtItsWindow: on the wall clock too, a check's call
// ends with its window (for the one check a pass always makes, fifteen
// sixteenths of the budget; seven eighths for the others), not with the
// invocation: a GitHub that never answers leaves the pass its time to
// send the other take-backs.
func TestHangingCheckIsCutAtItsWindow(t *testing.T) {
	t.Parallel()
	l := setupLive(t)
	l.claimed(t, 821, t0.Add(-liveGrace-time.Second))
	const lost = int64(920)
	l.pending(t, lost, t0.Add(-time.Hour))
	ended := make(chan error, 1)
	r := l.reclaimer(t, func(c *reclaim.Config) {
		c.Budget = time.Second // real: the call is cut after 937.5 ms
		c.GitHub = hangingGitHub{GitHub: c.GitHub, ended: ended}
	})
	rep, _ := r.Run(context.Background())
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the hanging call ended with %v, want its window's deadline", err)
	}
	sent := false
	for _, m := range l.messages() {
		sent = sent || m.msg.JobID == lost
	}
	if !sent || l.get(t, 821).State != job.Claimed {
		t.Errorf("report %+v: want the outbox-lost job sent and the unchecked job left claimed", rep)
	}
}

// slowStore is a store whose sweep reads advance the clock, the i-th by
// delays[i] (the last one for every read after).
type slowStore struct {
	reclaim.Store
	advance func(time.Duration)
	delays  []time.Duration
	reads   *int
}

func (s slowStore) Stale(ctx context.Context, shard string, now time.Time, limit int32, cursor string) (job.Page, error) {
	s.advance(s.delays[min(*s.reads, len(s.delays)-1)])
	*s.reads++
	return s.Store.Stale(ctx, shard, now, limit, cursor)
}

// TestSlowCollectionStillChecksTheOldestClaimed: when reading the sweep
// index overruns the liveness quarter (slow table reads), the pass still
// checks one claimed record, the one waiting longest, instead of none, even
// when the reads end past the other checks' window (7/8 of the budget: that
// one check runs until the last sixteenth). Before, such passes checked
// nothing, pass after pass, and jobs whose machine never booted sat claimed
// (make chaos on a saturated emulator; an audit, for the window).
func TestSlowCollectionStillChecksTheOldestClaimed(t *testing.T) {
	t.Parallel()
	// Seven shards at 2 s each, the eighth, begun before the collection's
	// half (20 s), takes the rest: every record is read, and collection
	// ends at 32 s (past the liveness quarter, 30 s) or 36 s (past the
	// checks' window, 35 s), before the budget's end.
	for _, last := range []time.Duration{18 * time.Second, 22 * time.Second} {
		t.Run(fmt.Sprint("collection ends at ", 14*time.Second+last), func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			// Newest first, so neither shard order nor creation order is the age order.
			for i, id := range []int64{811, 812, 813} {
				l.claimed(t, id, t0.Add(-liveGrace-time.Duration(i+1)*time.Minute))
			}
			const oldest = int64(813)
			r := l.reclaimer(t, func(c *reclaim.Config) {
				c.Budget = 40 * time.Second
				delays := []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second,
					2 * time.Second, 2 * time.Second, 2 * time.Second, last}
				c.Store = slowStore{Store: c.Store, advance: l.clock.Advance, delays: delays, reads: new(int)}
			})
			rep, err := r.Run(context.Background())
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			// The oldest's runner is offline at GitHub and its job still queued:
			// its check gives it a new attempt; the others wait for later passes.
			if rep.Requeued[reclaim.RunnerLost] != 1 || !rep.Incomplete {
				t.Fatalf("report %+v, want one runner_lost new attempt and the pass incomplete", rep)
			}
			var sent []int64
			for _, m := range l.messages() {
				sent = append(sent, m.msg.JobID)
			}
			if len(sent) != 1 || sent[0] != oldest {
				t.Errorf("sent %v, want only the oldest claimed job %d", sent, oldest)
			}
			for _, id := range []int64{811, 812} {
				if got := l.get(t, id); got.State != job.Claimed || got.LivenessChecks != 0 {
					t.Errorf("job %d: %s with %d checks, want claimed and unchecked", id, got.State, got.LivenessChecks)
				}
			}
		})
	}
}

// TestCheckCutByItsWindowIsLookedAtNextPass: a check whose call the
// window's context cut (the look at the runner, or the old runner's
// delete) is no failure of GitHub's: not counted as one, the pass marked
// incomplete, and the record looked at by the next pass, which looks
// anew, not a runner-start grace later (audits: 10 more minutes claimed
// with nothing running for a job whose runner never came).
func TestCheckCutByItsWindowIsLookedAtNextPass(t *testing.T) {
	t.Parallel()
	for i, onDelete := range []bool{false, true} {
		t.Run(fmt.Sprint("cut at the delete: ", onDelete), func(t *testing.T) {
			t.Parallel()
			l := setupLive(t)
			id := int64(831 + i)
			l.claimed(t, id, t0.Add(-liveGrace-time.Second))
			ended := make(chan error, 1)
			r := l.reclaimer(t, func(c *reclaim.Config) {
				c.Budget = time.Second // real: the call is cut with the window
				c.GitHub = hangingGitHub{GitHub: c.GitHub, ended: ended, onDelete: onDelete}
			})
			rep, _ := r.Run(context.Background())
			if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the hanging call ended with %v, want the window's deadline", err)
			}
			got := l.get(t, id)
			if got.State != job.Claimed || job.FromMillis(got.SweepAt).After(t0) || rep.LivenessFailed != 0 || rep.CleanupFailed != 0 || !rep.Incomplete {
				t.Errorf("record %s looked at again at %s; report %+v: want claimed, due for the next pass, no failed check or clean-up, the pass incomplete",
					got.State, job.FromMillis(got.SweepAt).Sub(t0), rep)
			}
		})
	}
}

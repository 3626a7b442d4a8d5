package janitor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// stepping moves the fixture's clock on by callTime before every
// installation call (a call takes time, and the rate tracker keeps the
// newest reading by its observation time), and runs hook once, just
// before the (n+1)-th ListRunners call for installation inst reaches
// GitHub: what another process (or GitHub) did to the installation's
// budget meanwhile. hookAt is the clock then.
type stepping struct {
	janitor.GitHub
	f      *fixture
	inst   int64
	n      int
	hook   func()
	lists  int
	hookAt time.Time
}

const callTime = 100 * time.Millisecond

func (s *stepping) Repositories(ctx context.Context, installationID int64) ([]string, error) {
	s.f.now = s.f.now.Add(callTime)
	return s.GitHub.Repositories(ctx, installationID)
}

func (s *stepping) ListRunners(ctx context.Context, installationID int64, scope, owner, repo string) ([]ghapp.Runner, error) {
	s.f.now = s.f.now.Add(callTime)
	if installationID == s.inst {
		if s.lists == s.n && s.hook != nil {
			s.hookAt = s.f.now
			s.hook()
		}
		s.lists++
	}
	return s.GitHub.ListRunners(ctx, installationID, scope, owner, repo)
}

func (s *stepping) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, id int64) error {
	s.f.now = s.f.now.Add(callTime)
	return s.GitHub.DeleteRunner(ctx, installationID, scope, owner, repo, id)
}

// TestBudgetRunsOutPartway: an installation whose budget runs out after n
// of its repositories gets no further GitHub request in the pass, whether
// the janitor's rate gate learns it from a response (remaining 0) or
// GitHub refuses a call (primary limit 403, secondary limit 403 or 429
// with Retry-After). The pass logs one line for it, counts it as skipped,
// not as errors, and goes on with the next installation, which is
// processed in full. Before, every further call was refused (or sent and
// rejected) and counted as an error.
func TestBudgetRunsOutPartway(t *testing.T) {
	t.Parallel()
	const (
		n     = 2
		other = inst + 1 // listed after inst (ghfake lists by id)
	)
	repos := []string{"app", "r1", "r2", "r3", "r4", "r5"}
	reset := t0.Add(30 * time.Minute)
	tests := []struct {
		name string
		// budget is inst's remaining budget at the start (0: ample).
		budget int
		// refuse, when set, changes GitHub just before inst's (n+1)-th list.
		refuse    func(f *fixture)
		wantCalls int // GitHub requests for inst
		// block is how long the refusal blocks the installation, GitHub's
		// Retry-After or a minute without one (0: no block; the log line
		// names the reset).
		block time.Duration
	}{
		{name: "rate gate: the n-th list leaves remaining 0", budget: 1 + n,
			wantCalls: 1 + n},
		{name: "primary limit: 403 with remaining 0", refuse: func(f *fixture) {
			f.fake.SetRateLimit(inst, 5000, 0, reset) // the claimers spent it
		}, wantCalls: 1 + n + 1},
		{name: "secondary limit: 403 with retry-after", refuse: func(f *fixture) {
			f.fake.Fail(ghfake.RouteRepoRunners, 1, ghfake.SecondaryRateLimit(90*time.Second))
		}, wantCalls: 1 + n + 1, block: 90 * time.Second},
		{name: "secondary limit: 429 with retry-after", refuse: func(f *fixture) {
			f.fake.Fail(ghfake.RouteRepoRunners, 1, ghfake.TooManyRequests(time.Minute))
		}, wantCalls: 1 + n + 1, block: time.Minute},
		{name: "secondary limit: 403 whose message alone says so", refuse: func(f *fixture) {
			f.fake.Fail(ghfake.RouteRepoRunners, 1, ghfake.SecondaryRateLimit(0))
		}, wantCalls: 1 + n + 1, block: ratelimit.MinBlock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := setup(t)
			f.fake.SetInstallation(inst, "octo", false, repos...)
			f.fake.SetInstallation(other, "acme", false, "web", "api")
			if tt.budget > 0 {
				f.fake.SetRateLimit(inst, 5000, tt.budget, reset)
			}
			// The other installation holds a finished job's idle runner.
			const leftover = int64(7001)
			name := job.RunnerName("linux", leftover)
			if _, err := f.reg.GenerateJIT(ctx, other, ghapp.JITRequest{Scope: pool.ScopeRepo, Owner: "acme", Repo: "web",
				Name: name, Labels: linux.Labels}); err != nil {
				t.Fatal(err)
			}
			f.store.Put(job.Record{JobID: leftover, State: job.Done, Version: 3, Repo: "acme/web", InstallationID: other,
				Pool: "linux", RunnerName: name, CreatedAt: f.now.Add(-time.Hour).UnixMilli(), ExpiresAt: f.now.Add(24 * time.Hour).Unix()})
			if err := f.fake.SetRunner(name, "offline", false); err != nil {
				t.Fatal(err)
			}
			gh := &stepping{GitHub: f.gh, f: f, inst: inst, n: n}
			if tt.refuse != nil {
				gh.hook = func() { tt.refuse(f) }
			}
			var logs, metrics bytes.Buffer
			j, err := janitor.New(janitor.Config{Store: f.store, GitHub: gh, Rates: f.rates, Provisioner: f.prov, Leftovers: f.prov,
				Pools: []pool.Pool{linux}, Now: func() time.Time { return f.now },
				Logger:  slog.New(slog.NewJSONHandler(&logs, nil)),
				Metrics: obs.NewMetricsIn("ns", &metrics, map[string]string{"function": "janitor"}, func() time.Time { return f.now })})
			if err != nil {
				t.Fatal(err)
			}
			before := f.fake.Stats().InstallationCalls

			rep, err := j.Run(ctx)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}

			after := f.fake.Stats().InstallationCalls
			if got := after[inst] - before[inst]; got != tt.wantCalls {
				t.Errorf("GitHub requests for installation %d: got %d, want %d", inst, got, tt.wantCalls)
			}
			if tt.block > 0 {
				// A secondary limit binds the claimers too: shared as a block.
				// The fixture's clock steps on during the pass: the
				// block runs from GitHub's answer, a moment before now.
				rd, err := f.store.LoadRate(ctx, inst)
				if end := f.now.Add(tt.block); err != nil || rd.BlockedUntil.After(end) || rd.BlockedUntil.Before(end.Add(-time.Second)) {
					t.Errorf("shared rate item %+v (%v), want blocked until just before %v", rd, err, end)
				}
			}
			// The other installation: its repository list, both repositories' runners, the delete.
			if got := after[other] - before[other]; got != 1+2+1 {
				t.Errorf("GitHub requests for installation %d: got %d, want 4", other, got)
			}
			if _, ok := f.fake.RunnerByName(name); ok {
				t.Errorf("runner %s of installation %d still registered, want deleted", name, other)
			}
			if rep.SkippedRateLimited != 1 || rep.ReposSkippedRateLimited != len(repos)-n || rep.Errors != 0 ||
				rep.RunnersDeleted != 1 || rep.ScopesListed != n+2 || rep.RateLimited != 0 {
				t.Errorf("report %+v, want 1 installation skipped (%d repositories), no error, the other's runner deleted, %d scopes listed",
					rep, len(repos)-n, n+2)
			}
			fleet := map[string]string{"function": "janitor"}
			points := emftest.Parse(t, metrics.Bytes())
			for metric, want := range map[string]float64{"JanitorSkippedRateLimited": 1, "JanitorReposSkippedRateLimited": float64(len(repos) - n), "JanitorErrors": 0} {
				if got := emftest.Total(points, metric, fleet); got != want || len(emftest.Select(points, metric, fleet)) == 0 {
					t.Errorf("%s: got %v, want %v", metric, got, want)
				}
			}
			wantReset := reset
			if tt.block > 0 {
				wantReset = gh.hookAt.Add(tt.block)
			}
			checkStopLine(t, logs.String(), wantReset, len(repos)-n)
		})
	}
}

// checkStopLine finds exactly one log line saying the janitor stopped
// installation inst, with the repositories it skipped and the reset, and
// no line carrying a token.
func checkStopLine(t *testing.T, logs string, reset time.Time, skipped int) {
	t.Helper()
	if strings.Contains(logs, "ghs_") {
		t.Errorf("a log line carries an installation token:\n%s", logs)
	}
	var stops []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if id, _ := m["installation_id"].(float64); int64(id) == inst && strings.Contains(m["msg"].(string), "rate limit") {
			stops = append(stops, m)
		}
	}
	if len(stops) != 1 {
		t.Fatalf("%d rate-limit lines for installation %d, want 1:\n%s", len(stops), inst, logs)
	}
	m := stops[0]
	if got, _ := m["repositories_skipped"].(float64); int(got) != skipped {
		t.Errorf("repositories_skipped %v, want %d", m["repositories_skipped"], skipped)
	}
	got, _ := m["reset_at"].(string)
	if want := reset.UTC().Format(time.RFC3339Nano); got != want {
		t.Errorf("reset_at %q, want %q", got, want)
	}
}

// TestNextPassStartsFresh: an installation stopped for its budget is not
// remembered as stopped: the next pass after the reset asks the rate
// gate afresh and lists every repository.
func TestNextPassStartsFresh(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repos := []string{"app", "r1", "r2", "r3"}
	f.fake.SetInstallation(inst, "octo", false, repos...)
	reset := t0.Add(10 * time.Minute)
	f.fake.SetRateLimit(inst, 5000, 2, reset) // the repository list and one repository's runners
	j := f.janitor(t, &stepping{GitHub: f.gh, f: f})

	first, err := j.Run(context.Background())
	if err != nil || first.SkippedRateLimited != 1 || first.ScopesListed != 1 {
		t.Fatalf("first pass %+v, %v: want the installation stopped after one repository", first, err)
	}
	f.now = reset.Add(time.Second)
	next, err := j.Run(context.Background())
	if err != nil || next.SkippedRateLimited != 0 || next.RateLimited != 0 || next.ScopesListed != len(repos) || next.Errors != 0 {
		t.Errorf("pass after the reset %+v, %v: want every repository listed", next, err)
	}
}

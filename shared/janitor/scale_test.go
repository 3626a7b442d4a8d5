package janitor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// slowDeletes is the memory inventory where each DeleteConfig (SSM
// DeleteParameter, throttled and retried by the SDK) takes d of the
// fixture's clock; it records the clock at each call.
type slowDeletes struct {
	*mem.Provisioner
	f     *fixture
	d     time.Duration
	calls []time.Time
}

func (s *slowDeletes) DeleteConfig(ctx context.Context, name string) error {
	s.calls = append(s.calls, s.f.now)
	s.f.now = s.f.now.Add(s.d)
	return s.Provisioner.DeleteConfig(ctx, name)
}

// TestConfigPhaseStopsAtTheBudget: a pass stops altogether at its Budget
// or the invocation's deadline minus Reserve, the JIT-config phase too.
// Before, it made no time check: with 300 stale parameters and 1 s per
// DeleteParameter it went on deleting for 300 s, past the 2-minute budget
// and the 180 s Lambda timeout (killed, unreported).
func TestConfigPhaseStopsAtTheBudget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.now = time.Now().UTC().Truncate(time.Second)
	for i := 0; i < 300; i++ {
		f.prov.PutConfig(fmt.Sprintf("linux-%d", 9000+i), "i-00000000000000dead", f.now.Add(-time.Hour))
	}
	inv := &slowDeletes{Provisioner: f.prov, f: f, d: time.Second}
	start := f.now
	rep := timedPass(t, f, janitor.Config{Store: f.store, GitHub: f.gh, Leftovers: inv})
	if late := startedAfter(inv.calls, start.Add(2*time.Minute)); late > 0 {
		t.Errorf("%d of %d DeleteConfig calls started after the pass's 2-minute budget (last at +%s; Lambda timeout +180s); report %+v",
			late, len(inv.calls), inv.calls[len(inv.calls)-1].Sub(start), rep)
	}
}

// TestMachineEndedInAnInstallationOfTenThousandRepositories: GET
// /installation/repositories is read whole every pass and charged one call
// per 100 entries: with 10,000 repositories (an enterprise organisation
// with the App on all repositories) the list alone is the whole default
// MaxCalls. Before, no repository was then ever listed, no machine's
// runner ever confirmed gone, and an abandoned job's machine ran for ever;
// now the machine phase keeps its reserve and asks GitHub by name for a
// runner whose scope no listing reached.
func TestMachineEndedInAnInstallationOfTenThousandRepositories(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repos := []string{"app"}
	for i := 0; i < 9999; i++ {
		repos = append(repos, fmt.Sprintf("r%05d", i))
	}
	f.fake.SetInstallation(inst, "octo", false, repos...)
	const id = int64(7001)
	f.machine(t, id) // its runner was never registered (or is long gone)
	f.record(id, job.Abandoned, job.RunnerName("linux", id))
	// And one whose runner, registered and busy, took another job: GitHub,
	// asked by name, says it is there, so its machine stays.
	const busy = int64(7002)
	f.machine(t, busy)
	f.record(busy, job.Abandoned, job.RunnerName("linux", busy))
	f.runner(t, job.RunnerName("linux", busy), "online", true)
	// The real client reads the list's 100 pages from ghfake alike; only
	// the fake's cost of serving them (seconds each) is skipped here.
	gh := wholeRepos{GitHub: f.gh, repos: repos}
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: gh, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, Now: func() time.Time { return f.now }, Rand: identity})
	if err != nil {
		t.Fatal(err)
	}
	var rep janitor.Report
	for pass := 0; pass < 8; pass++ { // two hours of the default 15-minute schedule
		if rep, err = j.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.now = f.now.Add(15 * time.Minute)
	}
	if len(f.prov.Machines(id)) != 0 {
		t.Errorf("machine of abandoned job %d, whose runner is gone, still running after 8 passes (last report %+v)", id, rep)
	}
	if len(f.prov.Machines(busy)) != 1 || rep.RunnerReappeared == 0 {
		t.Errorf("the machine of job %d, whose runner is busy, was ended or not asked about (last report %+v)", busy, rep)
	}
}

// wholeRepos answers GET /installation/repositories (all its pages) from
// memory.
type wholeRepos struct {
	janitor.GitHub
	repos []string
}

func (w wholeRepos) Repositories(context.Context, int64) ([]string, error) {
	return append([]string(nil), w.repos...), nil
}

// manyRunners lists, for octo/app, runners of jobs 10000… (busy, online).
type manyRunners struct {
	janitor.GitHub
	n int
}

func (m manyRunners) ListRunners(ctx context.Context, id int64, scope, owner, repo string) ([]ghapp.Runner, error) {
	if repo != "app" {
		return m.GitHub.ListRunners(ctx, id, scope, owner, repo)
	}
	out := make([]ghapp.Runner, 0, m.n)
	for i := 0; i < m.n; i++ {
		out = append(out, ghapp.Runner{ID: int64(i + 1), Name: job.RunnerName("linux", int64(10000+i)), Status: "online", Busy: true})
	}
	return out, nil
}

// TestRunnerRecordReadsStopAtTheBudget: the runner loop reads each listed
// runner's job record (DynamoDB GetItem); before, the only time check sat
// in front of a GitHub call, which a live job's runner never needs, so 300
// runners of live jobs, each read slowed to 1 s (a throttled table under
// the SDK's retries), kept the pass reading for 300 s.
func TestRunnerRecordReadsStopAtTheBudget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.now = time.Now().UTC().Truncate(time.Second)
	for i := 0; i < 300; i++ {
		f.record(int64(10000+i), job.Claimed, "")
	}
	st := &slowGets{Store: f.store, f: f, d: time.Second}
	start := f.now
	rep := timedPass(t, f, janitor.Config{Store: st, GitHub: manyRunners{GitHub: f.gh, n: 300}, Leftovers: f.prov})
	if took := f.now.Sub(start); took > 2*time.Minute+time.Second {
		t.Errorf("pass ran %s (%d record reads), past its 2-minute budget and the 180 s Lambda timeout; report %+v", took, st.reads, rep)
	}
}

// timedPass runs one pass of a janitor on cfg (the fixture's provisioner,
// pool and clock filled in) with a 2-minute budget and a 5 s reserve, in
// an invocation of the function's 180 s timeout.
func timedPass(t *testing.T, f *fixture, cfg janitor.Config) janitor.Report {
	t.Helper()
	cfg.Provisioner, cfg.Pools = f.prov, []pool.Pool{linux}
	cfg.Now, cfg.Budget, cfg.Reserve = func() time.Time { return f.now }, 2*time.Minute, 5*time.Second
	j, err := janitor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(180*time.Second))
	defer cancel()
	rep, _ := j.Run(ctx)
	return rep
}

// startedAfter counts the calls (their start times) made at or after by:
// past the pass's budget.
func startedAfter(calls []time.Time, by time.Time) int {
	late := 0
	for _, at := range calls {
		if !at.Before(by) {
			late++
		}
	}
	return late
}

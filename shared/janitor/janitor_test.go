package janitor_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/contract"
	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

const (
	appID = int64(99)
	inst  = int64(42)
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var appKey = sync.OnceValue(func() []byte {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
})

var linux = pool.Pool{Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
	Provisioner: pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: "lt-runner"}}

// fixture is one janitor's world: GitHub (ghfake behind the real App
// client), the job store and the provisioner in memory, a fixed clock.
type fixture struct {
	fake  *ghfake.Server
	gh    *ghapp.Client
	reg   *ghapp.Client // the claimer's client, which registers runners
	store *mem.Store
	prov  *mem.Provisioner
	rates *ratelimit.Tracker
	now   time.Time
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{store: mem.NewStore(job.Timing{}), prov: mem.NewProvisioner(), now: t0}
	clock := func() time.Time { return f.now }
	f.prov.SetClock(clock)
	f.fake = ghfake.New(ghfake.WithClock(clock), ghfake.WithAppID(appID))
	f.fake.SetInstallation(inst, "octo", false, "app")
	ts := httptest.NewServer(f.fake)
	t.Cleanup(ts.Close)
	f.rates = ratelimit.NewTracker(f.store, ratelimit.DefaultPersistRule(), clock)
	gh, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: appKey(), BaseURL: ts.URL, Now: clock,
		Wrap: func(id int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, id, f.rates, clock)
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.gh = gh
	if f.reg, err = ghapp.New(ghapp.Config{AppID: appID, PrivateKey: appKey(), BaseURL: ts.URL, Now: clock}); err != nil {
		t.Fatal(err)
	}
	return f
}

// runner registers the job's runner in octo/app and sets its status.
func (f *fixture) runner(t *testing.T, name, status string, busy bool) {
	t.Helper()
	if _, err := f.reg.GenerateJIT(context.Background(), inst, ghapp.JITRequest{Scope: pool.ScopeRepo, Owner: "octo", Repo: "app", Name: name, Labels: linux.Labels}); err != nil {
		t.Fatalf("register runner %s: %v", name, err)
	}
	if err := f.fake.SetRunner(name, status, busy); err != nil {
		t.Fatal(err)
	}
}

// machine starts the job's machine and its JIT config, at the clock's now.
func (f *fixture) machine(t *testing.T, id int64) {
	t.Helper()
	req := pool.Request{JobID: id, RunID: 7, Repo: "octo/app", Pool: linux, RunnerName: job.RunnerName("linux", id), JITConfig: "jit"}
	if _, err := f.prov.Provision(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// machineAged starts the job's machine as machine does, launched age ago.
func (f *fixture) machineAged(t *testing.T, id int64, age time.Duration) {
	t.Helper()
	now := f.now
	f.now = now.Add(-age)
	f.machine(t, id)
	f.now = now
}

// idleRunnerOfDoneJob starts job id's machine and registers its runner,
// online and idle, for a job done on another runner; it returns the
// runner's name.
func (f *fixture) idleRunnerOfDoneJob(t *testing.T, id int64) string {
	t.Helper()
	name := job.RunnerName("linux", id)
	f.machine(t, id)
	f.runner(t, name, "online", false)
	f.record(id, job.Done, "linux-999")
	return name
}

func (f *fixture) record(id int64, s job.State, runner string) {
	f.store.Put(job.Record{JobID: id, State: s, Version: 3, Repo: "octo/app", InstallationID: inst, Pool: "linux",
		RunnerName: runner, RunID: 7, CreatedAt: f.now.Add(-time.Hour).UnixMilli(), ExpiresAt: f.now.Add(7 * 24 * time.Hour).Unix()})
}

func (f *fixture) janitor(t *testing.T, gh janitor.GitHub) *janitor.Janitor {
	t.Helper()
	if gh == nil {
		gh = f.gh
	}
	return f.janitorOf(t, gh, f.prov, linux)
}

// janitorOf is f's janitor over gh, cleaning up through prov, with pools.
func (f *fixture) janitorOf(t *testing.T, gh janitor.GitHub, prov janitor.Provisioner, pools ...pool.Pool) *janitor.Janitor {
	t.Helper()
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: gh, Rates: f.rates, Provisioner: prov, Leftovers: f.prov,
		Pools: pools, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (f *fixture) run(t *testing.T, gh janitor.GitHub) janitor.Report {
	t.Helper()
	rep, err := f.janitor(t, gh).Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

// TestRunnersAndMachines: what one pass does to a job's runner and machine,
// by the job's record and the runner's state.
func TestRunnersAndMachines(t *testing.T) {
	t.Parallel()
	const id = int64(1001)
	tests := []struct {
		name        string
		state       job.State // "": no record
		runner      string    // "": none registered; else "online", "offline"
		busy        bool
		machineAge  time.Duration // < 0: no machine
		wantRunner  bool          // still registered
		wantMachine bool          // still running
		want        janitor.Report
	}{
		{name: "idle runner of a cancelled job deleted, its machine ended", state: job.Done, runner: "online",
			want: janitor.Report{RunnersDeleted: 1}},
		{name: "busy runner of a finished job left with its machine", state: job.Done, runner: "online", busy: true,
			wantRunner: true, wantMachine: true, want: janitor.Report{RunnersBusy: 1, MachinesKept: 1}},
		{name: "failed job: idle runner deleted", state: job.Failed, runner: "offline", want: janitor.Report{RunnersDeleted: 1}},
		{name: "claimed job is live: runner and machine left", state: job.Claimed, runner: "offline",
			wantRunner: true, wantMachine: true, want: janitor.Report{RunnersLive: 1}},
		{name: "abandoned job, runner already gone: machine ended", state: job.Abandoned,
			want: janitor.Report{MachinesEnded: 1}},
		{name: "unknown job, offline runner of a machine of ours deleted, its machine ended", runner: "offline", machineAge: 2 * time.Hour,
			want: janitor.Report{RunnersDeleted: 1}},
		{name: "unknown job, offline runner of a young machine of ours deleted, its machine ended", runner: "offline", machineAge: time.Minute,
			want: janitor.Report{RunnersDeleted: 1}},
		// Another stack's runner, named alike, booting: no machine of
		// ours names it, so nothing says it is ours.
		{name: "unknown job, offline runner no machine of ours names left", runner: "offline", machineAge: -1,
			wantRunner: true, want: janitor.Report{UnknownNotOurs: 1}},
		{name: "unknown job, online runner left for its idle limit", runner: "online", machineAge: -1,
			wantRunner: true, want: janitor.Report{UnknownKept: 1}},
		{name: "unknown job, machine past the grace ended", machineAge: 2 * time.Hour,
			want: janitor.Report{MachinesEnded: 1}},
		{name: "unknown job, young machine left", machineAge: 10 * time.Minute, wantMachine: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			name := job.RunnerName("linux", id)
			if tt.machineAge >= 0 {
				f.now = t0.Add(-tt.machineAge)
				f.machine(t, id)
				f.now = t0
			}
			if tt.runner != "" {
				f.runner(t, name, tt.runner, tt.busy)
			}
			if tt.state != "" {
				f.record(id, tt.state, "linux-999")
			}
			rep := f.run(t, nil)
			rep.InstallationsSeen, rep.ScopesListed, rep.ConfigsDeleted = 0, 0, 0
			if rep != tt.want {
				t.Errorf("report %+v, want %+v", rep, tt.want)
			}
			if _, ok := f.fake.RunnerByName(name); ok != tt.wantRunner {
				t.Errorf("runner %s registered: %t, want %t", name, ok, tt.wantRunner)
			}
			if live := len(f.prov.Machines(id)) > 0; live != tt.wantMachine && tt.machineAge >= 0 {
				t.Errorf("machine of job %d running: %t, want %t", id, live, tt.wantMachine)
			}
		})
	}
}

// busyOnDelete turns the runner busy at GitHub just before the janitor's
// delete reaches it: a job was assigned between the list and the delete.
type busyOnDelete struct {
	janitor.GitHub
	fake *ghfake.Server
	name string
}

func (b busyOnDelete) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, id int64) error {
	if err := b.fake.SetRunner(b.name, "online", true); err != nil {
		return err
	}
	return b.GitHub.DeleteRunner(ctx, installationID, scope, owner, repo, id)
}

// refusedDelete is GitHub refusing the runner's delete with its generic
// 422 (the route's validation_failed_simple), as go-github hands it back:
// no busy runner.
type refusedDelete struct{ janitor.GitHub }

func (refusedDelete) DeleteRunner(ctx context.Context, _ int64, _, owner, repo string, id int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, fmt.Sprintf("https://api.github.com/repos/%s/%s/actions/runners/%d", owner, repo, id), nil)
	if err != nil {
		return err
	}
	return fmt.Errorf("delete runner %d: %w", id, github.CheckResponse(&http.Response{StatusCode: http.StatusUnprocessableEntity, Request: req,
		Header: http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Body:   io.NopCloser(strings.NewReader(`{"message":"Validation Failed","documentation_url":"https://docs.github.com/rest/actions/self-hosted-runners#delete-a-self-hosted-runner-from-a-repository","status":"422"}`))}))
}

// TestRefusedDelete: GitHub's 422 "still running a job" on the delete
// means the runner took a job after the list said idle: it is left, with
// its machine, and counted as a busy race. Any other 422 is an error,
// logged and counted: every 422 was taken for busy, and a runner whose
// delete GitHub refused for another reason was left pass after pass
// without a word. Either way the runner and its machine stay.
func TestRefusedDelete(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		gh       func(f *fixture, runner string) janitor.GitHub
		busyRace int
		errors   int
		warning  string // in the warning line (GitHub's answer), "" for no warning
	}{
		{name: "busy", gh: func(f *fixture, runner string) janitor.GitHub {
			return busyOnDelete{GitHub: f.gh, fake: f.fake, name: runner}
		}, busyRace: 1},
		{name: "another 422", gh: func(f *fixture, _ string) janitor.GitHub { return refusedDelete{f.gh} },
			errors: 1, warning: "422 Validation Failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			const id = int64(1002)
			name := f.idleRunnerOfDoneJob(t, id)
			var logs bytes.Buffer
			j, err := janitor.New(janitor.Config{Store: f.store, GitHub: tt.gh(f, name), Provisioner: f.prov, Leftovers: f.prov,
				Pools: []pool.Pool{linux}, Now: func() time.Time { return f.now }, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := j.Run(context.Background())
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if rep.BusyRace != tt.busyRace || rep.Errors != tt.errors || rep.RunnersDeleted != 0 || rep.MachinesEnded != 0 {
				t.Errorf("report %+v, want %d busy race, %d error, nothing deleted or ended", rep, tt.busyRace, tt.errors)
			}
			if _, ok := f.fake.RunnerByName(name); !ok {
				t.Errorf("runner %s was deleted, want it left (its delete was refused)", name)
			}
			if len(f.prov.Machines(id)) != 1 {
				t.Errorf("machine of job %d ended, want it running (its runner is still there)", id)
			}
			if warned := strings.Contains(logs.String(), `"level":"WARN","msg":"janitor could not delete a runner"`); warned != (tt.warning != "") ||
				!strings.Contains(logs.String(), tt.warning) {
				t.Errorf("logs %s\nwant a warning %q: %t", logs.String(), tt.warning, tt.warning != "")
			}
		})
	}
}

// TestRunnersNotOurs: runners that are not <pool>-<digits> of a configured
// pool are never touched, whatever their state.
func TestRunnersNotOurs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	names := []string{"build-box", "linux", "linux-", "linux-12a", "linux-x-12", "windows-12", "Linux12", "linux-arm-12", "linux-+12"}
	for _, n := range names {
		f.runner(t, n, "offline", false)
	}
	f.record(12, job.Done, "")

	rep := f.run(t, nil)

	if rep.RunnersDeleted != 0 || rep.Errors != 0 {
		t.Errorf("report %+v, want nothing deleted", rep)
	}
	if got := len(f.fake.Runners()); got != len(names) {
		t.Errorf("%d runners left, want all %d", got, len(names))
	}
	if calls := f.fake.Stats().Calls[ghfake.RouteRepoDeleteRunner]; calls != 0 {
		t.Errorf("%d delete calls, want 0", calls)
	}
}

// TestConfigsWithoutLiveMachine: a JIT config that no live machine may
// read is deleted once past its grace; one a live machine waits for, or a
// young one, is kept.
func TestConfigsWithoutLiveMachine(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.machine(t, 2001) // a live claimed job's machine and its config
	f.record(2001, job.Claimed, "")
	live := f.prov.Machines(2001)[0].ID
	f.prov.PutConfig("linux-2002", "i-00000000000000dead", t0.Add(-time.Hour))
	f.prov.PutConfig("linux-2003", "", t0.Add(-time.Hour))
	f.prov.PutConfig("linux-2004", "i-00000000000000dead", t0.Add(-time.Minute))
	f.prov.PutConfig("linux-2005", live, t0.Add(-time.Hour))

	rep := f.run(t, nil)

	if rep.ConfigsDeleted != 2 {
		t.Errorf("report %+v, want 2 configs deleted", rep)
	}
	for name, want := range map[string]bool{"linux-2001": true, "linux-2002": false, "linux-2003": false, "linux-2004": true, "linux-2005": true} {
		if _, ok := f.prov.Config(name); ok != want {
			t.Errorf("config %s kept: %t, want %t", name, ok, want)
		}
	}
}

// TestHaltedInstallationNotAsked: an installation whose shared rate item
// says its budget is exhausted, or that a secondary limit blocks it (another
// process met one), gets no call; its runners and machines wait.
func TestHaltedInstallationNotAsked(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		share func(f *fixture) error
	}{
		{"exhausted", func(f *fixture) error {
			rd := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: t0.Add(20 * time.Minute), ObservedAt: t0.Add(-time.Minute)}
			return f.store.SaveRate(context.Background(), inst, rd)
		}},
		{"blocked by a secondary limit", func(f *fixture) error {
			return f.store.SaveBlock(context.Background(), inst, f.now.Add(time.Minute), time.Minute)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			const id = int64(3001)
			name := f.idleRunnerOfDoneJob(t, id)
			if err := tt.share(f); err != nil {
				t.Fatal(err)
			}
			before := f.fake.Stats().InstallationCalls[inst]

			rep := f.run(t, nil)

			if rep.RateLimited != 1 || rep.RunnersDeleted != 0 || rep.MachinesEnded != 0 {
				t.Errorf("report %+v, want 1 installation rate limited, nothing deleted or ended", rep)
			}
			if calls := f.fake.Stats().InstallationCalls[inst] - before; calls != 0 {
				t.Errorf("%d calls for installation %d, want 0", calls, inst)
			}
			if _, ok := f.fake.RunnerByName(name); !ok || len(f.prov.Machines(id)) != 1 {
				t.Errorf("runner or machine of job %d removed, want both left", id)
			}
		})
	}
}

// TestSuspendedInstallationNotAsked: GitHub refuses a suspended
// installation's tokens, so a pass does not ask for one (no exchange, no
// error every pass); its runner and machine are left for when it is
// unsuspended, and then the next pass removes them.
func TestSuspendedInstallationNotAsked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const id = int64(3011)
	name := f.idleRunnerOfDoneJob(t, id)
	f.fake.Suspend(inst)
	tokens, calls := f.fake.Stats().TokenRequests[inst], f.fake.Stats().InstallationCalls[inst]

	var metrics bytes.Buffer
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Rates: f.rates, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, Now: func() time.Time { return f.now },
		Metrics: obs.NewMetricsIn("ns", &metrics, map[string]string{"function": "janitor"}, func() time.Time { return f.now })})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(context.Background())
	if err != nil || rep.Suspended != 1 || rep.Errors != 0 || rep.RunnersDeleted != 0 || rep.MachinesEnded != 0 {
		t.Errorf("report %+v, %v: want 1 installation suspended, no error, nothing deleted or ended", rep, err)
	}
	if got := emftest.Total(emftest.Parse(t, metrics.Bytes()), "JanitorSuspended", map[string]string{"function": "janitor"}); got != 1 {
		t.Errorf("JanitorSuspended %v, want 1", got)
	}
	if n, m := f.fake.Stats().TokenRequests[inst]-tokens, f.fake.Stats().InstallationCalls[inst]-calls; n != 0 || m != 0 {
		t.Errorf("%d token exchanges and %d calls for suspended installation %d, want none", n, m, inst)
	}
	if _, ok := f.fake.RunnerByName(name); !ok || len(f.prov.Machines(id)) != 1 {
		t.Errorf("runner or machine of job %d removed, want both left", id)
	}

	f.fake.Unsuspend(inst)
	if rep := f.run(t, nil); rep.Suspended != 0 || rep.RunnersDeleted != 1 {
		t.Errorf("after unsuspending: report %+v, want the runner deleted", rep)
	}
}

// TestBudgetBoundsAPass: a pass stops asking GitHub at MaxCalls and says
// it is incomplete; the next one finishes.
func TestBudgetBoundsAPass(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetInstallation(inst, "octo", false, "app", "b", "c", "d")
	f.runner(t, "linux-4001", "offline", false)
	f.record(4001, job.Done, "")
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, MaxCalls: 3, Now: func() time.Time { return f.now },
		Rand: appLast})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(context.Background())
	if err != nil || !rep.Incomplete || rep.ScopesListed != 1 || rep.RunnersDeleted != 0 {
		t.Errorf("first pass %+v, %v: want incomplete after 1 scope (3 calls), nothing deleted", rep, err)
	}
	if _, ok := f.fake.RunnerByName("linux-4001"); !ok {
		t.Error("runner deleted in a pass that never listed its repository")
	}
}

// TestNoAWSServiceDependency: the janitor names its ports in domain types.
func TestNoAWSServiceDependency(t *testing.T) {
	t.Parallel()
	contract.DepsFree(t, "github.com/ghclaim/ghclaim/shared/janitor")
}

// appLast lists octo/app, the installation's first repository, last.
var appLast = permSource(func(n int) []int {
	out := make([]int, 0, n)
	for i := 1; i < n; i++ {
		out = append(out, i)
	}
	return append(out, 0)
})

// permSource is a random source whose permutations are perm's (the janitor
// draws nothing else).
type permSource func(n int) []int

func (p permSource) Float64() float64 { return 0 }
func (p permSource) IntN(int) int     { return 0 }
func (p permSource) Perm(n int) []int { return p(n) }

// slowGets is a store whose every read takes d of the fixture's clock.
type slowGets struct {
	janitor.Store
	f     *fixture
	d     time.Duration
	reads int
}

func (s *slowGets) Get(ctx context.Context, id int64) (job.Record, error) {
	s.reads++
	s.f.now = s.f.now.Add(s.d)
	return s.Store.Get(ctx, id)
}

// TestTimeBoundsTheMachinePhase: the machine loop stops at the pass's
// time budget, and at the invocation's deadline less Reserve when that
// comes first; a loop cut short judges no JIT config, since the machines
// it did not reach are not in its live set and their configs would look
// orphaned (a booting machine would lose the config its runner needs).
func TestTimeBoundsTheMachinePhase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		budget   time.Duration
		deadline time.Duration // from now; 0: none
	}{
		{name: "budget", budget: 45 * time.Second},
		{name: "deadline", deadline: 50 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.now = time.Now().UTC().Truncate(time.Second) // a real deadline is measured from it
			for id := int64(5001); id <= 5004; id++ {
				f.machine(t, id)
				f.record(id, job.Claimed, job.RunnerName("linux", id))
			}
			f.now = f.now.Add(janitor.DefaultConfigGrace + time.Minute) // every config is old enough to judge
			st := &slowGets{Store: f.store, f: f, d: 20 * time.Second}
			j, err := janitor.New(janitor.Config{Store: st, GitHub: f.gh, Provisioner: f.prov, Leftovers: f.prov,
				Pools: []pool.Pool{linux}, Now: func() time.Time { return f.now }, Budget: tc.budget, Reserve: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, f.now.Add(tc.deadline))
				defer cancel()
			}
			rep, err := j.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// 45 s allowed (the budget, or 50 s to the deadline less the
			// 5 s reserve): machines start at 0, 20 and 40 s; at 60 s the
			// fourth does not.
			if !rep.Incomplete || st.reads != 3 {
				t.Errorf("%+v after %d record reads, want incomplete after 3 (20 s each, 45 s allowed)", rep, st.reads)
			}
			if rep.ConfigsDeleted != 0 {
				t.Errorf("%d JIT configs deleted on a partial view of the live machines, want 0", rep.ConfigsDeleted)
			}
			for id := int64(5001); id <= 5004; id++ {
				if _, ok := f.prov.Config(job.RunnerName("linux", id)); !ok {
					t.Errorf("job %d's config is gone", id)
				}
			}
		})
	}
}

// slowGitHub is GitHub where the listing calls take d of the fixture's
// clock each.
type slowGitHub struct {
	janitor.GitHub
	f *fixture
	d time.Duration
}

func (s slowGitHub) Installations(ctx context.Context) ([]ghapp.Installation, error) {
	s.f.now = s.f.now.Add(s.d)
	return s.GitHub.Installations(ctx)
}

func (s slowGitHub) Repositories(ctx context.Context, id int64) ([]string, error) {
	s.f.now = s.f.now.Add(s.d)
	return s.GitHub.Repositories(ctx, id)
}

func (s slowGitHub) ListRunners(ctx context.Context, id int64, scope, owner, repo string) ([]ghapp.Runner, error) {
	s.f.now = s.f.now.Add(s.d)
	return s.GitHub.ListRunners(ctx, id, scope, owner, repo)
}

// TestTimeBoundsTheRunnerPhase: GitHub calls stop at the pass's time
// budget as they do at MaxCalls (TestBudgetBoundsAPass): a repository the
// pass had no time to list keeps its runners.
func TestTimeBoundsTheRunnerPhase(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetInstallation(inst, "octo", false, "app", "b", "c", "d")
	f.runner(t, "linux-4001", "offline", false)
	f.record(4001, job.Done, "")
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: slowGitHub{GitHub: f.gh, f: f, d: 20 * time.Second},
		Provisioner: f.prov, Leftovers: f.prov, Pools: []pool.Pool{linux}, Budget: 45 * time.Second,
		Now:  func() time.Time { return f.now },
		Rand: appLast})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(context.Background())
	// Calls start at 0 s (installations), 20 s (repositories) and 40 s
	// (one repository's runners); at 60 s the budget is spent.
	if err != nil || !rep.Incomplete || rep.ScopesListed != 1 || rep.RunnersDeleted != 0 {
		t.Errorf("pass %+v, %v: want incomplete after 1 scope (45 s, 20 s a call), nothing deleted", rep, err)
	}
	if _, ok := f.fake.RunnerByName("linux-4001"); !ok {
		t.Error("runner deleted in a pass that never listed its repository")
	}
}

// TestIdleRunnerOfAJobDoneLatelyIsKept: when another job's runner took job
// B, that job waits for B's own runner, still booting or idle (the swap,
// shared/webhook). B is done, but its runner is kept for the pool's
// runner-start grace after B ended, the time that job's liveness check
// gives it; after that it goes as any leftover does.
func TestIdleRunnerOfAJobDoneLatelyIsKept(t *testing.T) {
	t.Parallel()
	const id = int64(6001)
	for _, tc := range []struct {
		name  string
		ended time.Duration // before the pass
		kept  bool
	}{
		{name: "done a minute ago", ended: time.Minute, kept: true},
		{name: "done longer ago than the grace", ended: job.DefaultRunnerStartGrace + time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			name := job.RunnerName("linux", id)
			f.runner(t, name, "online", false)
			f.machine(t, id)
			f.record(id, job.Done, name)
			r, err := f.store.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			r.UpdatedAt = job.Millis(f.now.Add(-tc.ended))
			f.store.Put(r)
			rep := f.run(t, nil)
			_, registered := f.fake.RunnerByName(name)
			running := len(f.prov.Machines(id)) > 0
			if registered != tc.kept || running != tc.kept || (rep.SparesKept == 1) != tc.kept {
				t.Errorf("runner registered %v, machine running %v, spares kept %d; want kept %v", registered, running, rep.SparesKept, tc.kept)
			}
		})
	}
}

// unlistedMachines is EC2 refusing the machine listing.
type unlistedMachines struct{ janitor.Leftovers }

func (unlistedMachines) LiveMachines(context.Context) ([]pool.Machine, error) {
	return nil, fmt.Errorf("describe instances: %w", context.DeadlineExceeded)
}

// TestUnknownRunnerUnlistedMachines: when this stack's machines could not
// be listed, nothing says an offline runner of an unknown job is ours (a
// machine of ours naming it is what does), so it is left, though a machine
// of ours does name it: the next pass, listing them, deletes it.
func TestUnknownRunnerUnlistedMachines(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const id = int64(1003)
	name := job.RunnerName("linux", id)
	f.machine(t, id)
	f.runner(t, name, "offline", false)
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Provisioner: f.prov, Leftovers: unlistedMachines{f.prov},
		Pools: []pool.Pool{linux}, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(context.Background())
	if err == nil || rep.UnknownNotOurs != 1 || rep.RunnersDeleted != 0 {
		t.Fatalf("report %+v, err %v: want the runner left as not known ours, and the listing's error", rep, err)
	}
	if _, ok := f.fake.RunnerByName(name); !ok {
		t.Fatalf("runner %s deleted with no machine listing to say it is ours", name)
	}
	rep = f.run(t, nil)
	if rep.RunnersDeleted != 1 {
		t.Errorf("next pass, machines listed: report %+v, want the runner deleted", rep)
	}
	if _, ok := f.fake.RunnerByName(name); ok {
		t.Errorf("runner %s still registered after a pass that listed its machine", name)
	}
}

// untaggedMachines drops every machine's runner-name tag, as on machines
// launched before it was kept.
type untaggedMachines struct{ janitor.Leftovers }

func (u untaggedMachines) LiveMachines(ctx context.Context) ([]pool.Machine, error) {
	ms, err := u.Leftovers.LiveMachines(ctx)
	for i := range ms {
		ms[i].RunnerName = ""
	}
	return ms, err
}

// TestUnknownRunnerNamedByOurMachine: an offline runner of an unknown job
// is ours when a live machine names it, by its runner-name tag (a later
// attempt's -r<n> name) or, on a machine without one, by the job's first
// name: deleted, and its machine ended.
func TestUnknownRunnerNamedByOurMachine(t *testing.T) {
	t.Parallel()
	const id = int64(1201)
	for _, tc := range []struct {
		name, runner string
		untagged     bool
	}{
		{"a later attempt's name", job.RunnerNameAt("linux", id, 2), false},
		{"a machine without the runner-name tag", job.RunnerName("linux", id), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			req := pool.Request{JobID: id, RunID: 7, Repo: "octo/app", Pool: linux, RunnerName: tc.runner, JITConfig: "jit"}
			if _, err := f.prov.Provision(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			f.runner(t, tc.runner, "offline", false)
			var lo janitor.Leftovers = f.prov
			if tc.untagged {
				lo = untaggedMachines{f.prov}
			}
			j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Provisioner: f.prov, Leftovers: lo,
				Pools: []pool.Pool{linux}, Now: func() time.Time { return f.now }})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := j.Run(context.Background())
			if err != nil || rep.RunnersDeleted != 1 || len(f.prov.Machines(id)) != 0 {
				t.Errorf("report %+v, %v, %d machine(s) live: want the runner deleted and its machine ended", rep, err, len(f.prov.Machines(id)))
			}
		})
	}
}

// TestUnknownRunnerNoMachineNames: with no live machine of this stack
// naming it, an offline runner of an unknown job is left to GitHub (which
// removes an ephemeral runner offline for a day): a dispatch pool's, whose
// hosts are no machines of ours, and ours once the idle limit powered its
// machine off (terminated: no longer listed).
func TestUnknownRunnerNoMachineNames(t *testing.T) {
	t.Parallel()
	t.Run("dispatch pool", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		name := job.RunnerName("linux", 1102)
		f.runner(t, name, "offline", false)
		d := linux
		d.Provisioner = pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/hosts"}
		rep, err := f.janitorOf(t, f.gh, f.prov, d).Run(context.Background())
		if err != nil || rep.UnknownNotOurs != 1 || rep.RunnersDeleted != 0 {
			t.Errorf("report %+v, %v: want the runner left as not known ours", rep, err)
		}
	})
	t.Run("machine powered off by the idle limit", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		const id = int64(1101)
		name := job.RunnerName("linux", id)
		f.now = t0.Add(-2 * time.Hour)
		f.machine(t, id)
		f.now = t0
		f.runner(t, name, "online", false)
		if rep := f.run(t, nil); rep.UnknownKept != 1 {
			t.Fatalf("first pass %+v, want the online runner kept", rep)
		}
		if err := f.fake.SetRunner(name, "offline", false); err != nil {
			t.Fatal(err)
		}
		f.prov.Stop(id)
		f.now = t0.Add(15 * time.Minute)
		if rep := f.run(t, nil); rep.UnknownNotOurs != 1 || rep.RunnersDeleted != 0 {
			t.Errorf("pass after the power-off %+v: want the runner left as not known ours", rep)
		}
	})
}

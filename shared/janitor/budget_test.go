package janitor_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// identity lists in the given order (octo/app, the first repository, first).
var identity = permSource(func(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
})

// TestMachineEndedDespiteALargeInstallation: an abandoned job's machine
// whose runner is gone is ended within a few passes, even when the
// installation has more repositories than one pass's MaxCalls (the package
// doc: "a budget smaller than an installation's repositories still covers
// them all over a few passes"). The runner phase used to spend every call,
// so the machine phase never had one left for FindRunner: the machine was
// kept for ever.
func TestMachineEndedDespiteALargeInstallation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repos := []string{"app"}
	for i := 0; i < 149; i++ {
		repos = append(repos, fmt.Sprintf("r%03d", i))
	}
	f.fake.SetInstallation(inst, "octo", false, repos...)
	const id = int64(7001)
	f.machine(t, id) // its runner was never registered (or is long gone)
	f.record(id, job.Abandoned, job.RunnerName("linux", id))
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, Now: func() time.Time { return f.now }, Rand: identity})
	if err != nil {
		t.Fatal(err)
	}
	var rep janitor.Report
	for pass := 0; pass < 5; pass++ {
		if rep, err = j.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.now = f.now.Add(15 * time.Minute)
	}
	if len(f.prov.Machines(id)) != 0 {
		t.Errorf("machine of abandoned job %d, whose runner is gone, still running after 5 passes (last report %+v)", id, rep)
	}
}

// TestInstallationPagesAreCharged: GET /app/installations is a list of
// pages like any other ("whole lists are one call per 100 entries"); it
// used to be charged one call whatever its length: with MaxCalls 3 and
// three pages of installations, the pass still asked GitHub for more.
func TestInstallationPagesAreCharged(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for i := int64(0); i < 250; i++ { // with inst: 251 installations, three pages
		f.fake.SetInstallation(1000+i, fmt.Sprintf("user%d", i), false)
	}
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, MaxCalls: 3, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	before := f.fake.Stats()
	if _, err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := f.fake.Stats()
	calls := after.Calls[ghfake.RouteInstallations] - before.Calls[ghfake.RouteInstallations]
	for id, n := range after.InstallationCalls {
		calls += n - before.InstallationCalls[id]
	}
	if calls > 3 {
		t.Errorf("%d GitHub calls in a pass with MaxCalls 3 (installation pages: %d)", calls,
			after.Calls[ghfake.RouteInstallations]-before.Calls[ghfake.RouteInstallations])
	}
}

// TestMachineKeptWhenTheServerIgnoresTheNameFilter: ghapp.FindRunner, the
// last word before a machine is ended, re-checks names because a server
// may ignore ?name= (an older GitHub Enterprise Server), but read only the
// first page of 100 and called a runner on a later page gone. A done job's
// busy runner that the many-page listing missed
// (TestMachineKeptWhenTheListingMissedItsRunner's premise) then had its
// machine terminated mid-job.
func TestMachineKeptWhenTheServerIgnoresTheNameFilter(t *testing.T) {
	t.Parallel()
	f := &fixture{store: mem.NewStore(job.Timing{}), prov: mem.NewProvisioner(), now: t0}
	clock := func() time.Time { return f.now }
	f.prov.SetClock(clock)
	f.fake = ghfake.New(ghfake.WithClock(clock), ghfake.WithAppID(appID))
	f.fake.SetInstallation(inst, "octo", false, "app")
	// A GitHub (e.g. an older Enterprise Server) without the name filter.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		q.Del("name")
		r.URL.RawQuery = q.Encode()
		f.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	f.rates = ratelimit.NewTracker(f.store, ratelimit.DefaultPersistRule(), clock)
	var err error
	if f.gh, err = ghapp.New(ghapp.Config{AppID: appID, PrivateKey: appKey(), BaseURL: ts.URL, Now: clock}); err != nil {
		t.Fatal(err)
	}
	f.reg = f.gh
	for i := 0; i < 120; i++ { // other runners first: ours lands on page 2
		f.runner(t, fmt.Sprintf("manual-%d", i), "online", false)
	}
	const id = int64(5101)
	name := job.RunnerName("linux", id)
	f.machine(t, id)
	f.runner(t, name, "online", true) // at work on its job
	f.record(id, job.Done, name)

	rep := f.run(t, missingList{GitHub: f.gh, name: name})

	if len(f.prov.Machines(id)) != 1 {
		t.Errorf("the machine of busy runner %s was ended (report %+v)", name, rep)
	}
}

// TestPassThatListsNothingIsAnError: when every runner list fails (here
// GitHub answers 502; a lost permission answers 403 alike), the pass did
// nothing and says so with an error, so the function's Errors and its
// alarm fire; it used to report success. One scope listed is progress.
func TestPassThatListsNothingIsAnError(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.Fail(ghfake.RouteRepoRunners, 1, ghfake.ServerError(http.StatusBadGateway))
	rep, err := f.janitor(t, nil).Run(context.Background())
	if err == nil || rep.ScopesListed != 0 {
		t.Errorf("Run = %+v, %v; want an error, no scope listed", rep, err)
	}
	g := setup(t)
	g.fake.SetInstallation(inst, "octo", false, "app", "lib")
	g.fake.Fail(ghfake.RouteRepoRunners, 1, ghfake.ServerError(http.StatusBadGateway))
	if rep, err := g.janitor(t, nil).Run(context.Background()); err != nil || rep.ScopesListed != 1 {
		t.Errorf("one of two scopes listed: Run = %+v, %v; want no error", rep, err)
	}
}

// TestMachineEndedWhenListingsTakeThePassesTime: runner lists slow enough
// to fill the pass's whole time budget used to leave the machine phase
// none, so a machine whose runner is gone was never judged; a quarter of
// the time is now left to it.
func TestMachineEndedWhenListingsTakeThePassesTime(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repos := []string{"app"}
	for i := range 199 {
		repos = append(repos, fmt.Sprintf("r%03d", i))
	}
	f.fake.SetInstallation(inst, "octo", false, repos...)
	const id = int64(7101)
	f.machine(t, id)
	f.record(id, job.Abandoned, job.RunnerName("linux", id))
	rep := f.timedPass(t, slowGitHub{GitHub: f.gh, f: f, d: time.Second})
	if len(f.prov.Machines(id)) != 0 || rep.MachinesEnded != 1 {
		t.Errorf("machine of abandoned job %d, whose runner is gone, still running (report %+v)", id, rep)
	}
}

// timedPass runs one pass over gh with a 2-minute budget, a call cap of
// 1000 (time, not calls, bounds it) and the identity shuffle.
func (f *fixture) timedPass(t *testing.T, gh janitor.GitHub) janitor.Report {
	t.Helper()
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: gh, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, MaxCalls: 1000, Budget: 2 * time.Minute, Now: func() time.Time { return f.now }, Rand: identity})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

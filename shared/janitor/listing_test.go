package janitor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// missingList is GitHub whose runner list misses one runner, as a list of
// many pages does when runners on an earlier page are removed while it is
// read (every later runner moves up a place, and one falls between pages).
type missingList struct {
	janitor.GitHub
	name string
}

func (m missingList) ListRunners(ctx context.Context, installationID int64, scope, owner, repo string) ([]ghapp.Runner, error) {
	rs, err := m.GitHub.ListRunners(ctx, installationID, scope, owner, repo)
	return slices.DeleteFunc(rs, func(r ghapp.Runner) bool { return r.Name == m.name }), err
}

// TestMachineKeptWhenTheListingMissedItsRunner: a finished job's machine
// whose runner is absent from the listing is ended only once GitHub, asked
// by name, says the runner is gone. Its record is done as soon as the job
// is in progress, so a busy runner the listing missed is a job at work:
// before, its machine was terminated mid-job.
func TestMachineKeptWhenTheListingMissedItsRunner(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const id = int64(5001)
	name := job.RunnerName("linux", id)
	f.machine(t, id)
	f.runner(t, name, "online", true)
	f.record(id, job.Done, name)

	rep := f.run(t, missingList{GitHub: f.gh, name: name})

	if rep.MachinesEnded != 0 || rep.MachinesKept != 1 || rep.RunnerReappeared != 1 {
		t.Errorf("report %+v, want the machine kept, its runner found by name", rep)
	}
	if len(f.prov.Machines(id)) != 1 {
		t.Error("the machine of a busy runner was ended")
	}
	if _, ok := f.fake.RunnerByName(name); !ok {
		t.Error("the busy runner was deleted")
	}
}

// TestInstallationsInANewOrderEachPass: installations are visited in the
// pass's random order, like repositories: a budget smaller than the fleet
// must not leave the same installations unvisited pass after pass.
func TestInstallationsInANewOrderEachPass(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const other = int64(43)
	f.fake.SetInstallation(other, "acme", false, "svc")
	reverse := permSource(func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = n - 1 - i
		}
		return out
	})
	before := f.fake.Stats().InstallationCalls
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, MaxCalls: 3, Now: func() time.Time { return f.now }, Rand: reverse})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(context.Background())
	if err != nil || rep.ScopesListed != 1 {
		t.Fatalf("pass %+v, %v: want one scope listed within 3 calls", rep, err)
	}
	after := f.fake.Stats().InstallationCalls
	if after[other] == before[other] || after[inst] != before[inst] {
		t.Errorf("calls by installation %v (before %v): want only the installation the order put first (%d)", after, before, other)
	}
}

// TestConfigsSweptWhenTheRunnersRunOutOfBudget: a pass whose GitHub budget
// ran out still sweeps the parameters no live machine can read: the live
// machines are listed whole whatever GitHub allowed. Before, every
// incomplete pass skipped the sweep, and a fleet whose passes always ran out
// kept its leftover JIT configs forever.
func TestConfigsSweptWhenTheRunnersRunOutOfBudget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.prov.PutConfig("linux-6001", "i-00000000000000dead", t0.Add(-time.Hour))
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, MaxCalls: 1, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(context.Background())
	if err != nil || !rep.Incomplete || rep.ConfigsDeleted != 1 {
		t.Errorf("pass %+v, %v: want incomplete and the dead machine's config deleted", rep, err)
	}
}

// TestListPagesAreCharged: a list costs the pass one call per page of 100
// entries, not one per list, so MaxCalls bounds what GitHub is asked.
func TestListPagesAreCharged(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repos := make([]string, 250) // three pages
	for i := range repos {
		repos[i] = fmt.Sprintf("r%03d", i)
	}
	f.fake.SetInstallation(inst, "octo", false, repos...)
	j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Provisioner: f.prov, Leftovers: f.prov,
		Pools: []pool.Pool{linux}, MaxCalls: 5, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := j.Run(context.Background())
	// Installations 1 + repositories 3 pages = 4: one scope fits, not two.
	if err != nil || rep.ScopesListed != 1 || !rep.Incomplete {
		t.Errorf("pass %+v, %v: want one scope listed after the installations and three pages of repositories", rep, err)
	}
}

// throttledTags is the parameter listing when Parameter Store throttled
// the tag reads of some parameters: they are named unread, not listed.
type throttledTags struct {
	janitor.Leftovers
	unread []string
}

func (l throttledTags) Configs(ctx context.Context, before time.Time) (pool.ConfigList, error) {
	cs, err := l.Leftovers.Configs(ctx, before)
	cs.Unread = append(cs.Unread, l.unread...)
	return cs, err
}

// TestConfigsUnreadMakeThePassIncomplete: a parameter whose tags could
// not be read (throttled) is left for the next pass, and the pass says so:
// incomplete, counted, one log line naming it, not an error. Before, it
// was skipped without a word, and a pass that left leftovers looked whole.
func TestConfigsUnreadMakeThePassIncomplete(t *testing.T) {
	t.Parallel()
	const unread = "/ghclaim/runners/linux-6002"
	tests := []struct {
		name   string
		unread []string
	}{
		{name: "every tag read"},
		{name: "one tag read throttled", unread: []string{unread}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.prov.PutConfig("linux-6001", "i-00000000000000dead", t0.Add(-time.Hour))
			var logs, metrics bytes.Buffer
			j, err := janitor.New(janitor.Config{Store: f.store, GitHub: f.gh, Provisioner: f.prov,
				Leftovers: throttledTags{Leftovers: f.prov, unread: tt.unread}, Pools: []pool.Pool{linux},
				Now: func() time.Time { return f.now }, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
				Metrics: obs.NewMetricsIn("ns", &metrics, map[string]string{"function": "janitor"}, func() time.Time { return f.now })})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := j.Run(context.Background())
			throttled := len(tt.unread) > 0
			if err != nil || rep.Incomplete != throttled || rep.ConfigsUnread != len(tt.unread) || rep.Errors != 0 || rep.ConfigsDeleted != 1 {
				t.Fatalf("pass %+v, %v: want incomplete %t, %d unread, no error, the dead machine's config deleted",
					rep, err, throttled, len(tt.unread))
			}
			points := emftest.Parse(t, metrics.Bytes())
			if got := emftest.Total(points, "JanitorConfigsUnread", map[string]string{"function": "janitor"}); got != float64(len(tt.unread)) {
				t.Errorf("JanitorConfigsUnread: got %v, want %d", got, len(tt.unread))
			}
			var lines []map[string]any
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if m["level"] == "WARN" && strings.Contains(fmt.Sprint(m["msg"]), "could not read") {
					lines = append(lines, m)
				}
			}
			if !throttled {
				if len(lines) != 0 {
					t.Errorf("unread-parameter lines %v, want none", lines)
				}
				return
			}
			if len(lines) != 1 || lines[0]["count"] != float64(1) || fmt.Sprint(lines[0]["parameters"]) != fmt.Sprint([]any{unread}) {
				t.Errorf("unread-parameter lines %v, want one warning naming %s", lines, unread)
			}
		})
	}
}

package janitor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// slowRates is the janitor's rate state whose shared read (the
// rate#<installation> GetItem, throttled and retried by the SDK) takes d
// of the fixture's clock; it records the clock at each read.
type slowRates struct {
	*ratelimit.Tracker
	f     *fixture
	d     time.Duration
	reads []time.Time
}

func (s *slowRates) Current(ctx context.Context, id int64) (ratelimit.Reading, error) {
	s.reads = append(s.reads, s.f.now)
	s.f.now = s.f.now.Add(s.d)
	return s.Tracker.Current(ctx, id)
}

// manyInstallations is an App installed on n accounts, none with a
// repository (each list is one quick call).
type manyInstallations struct {
	janitor.GitHub
	n int
}

func (m manyInstallations) Installations(context.Context) ([]ghapp.Installation, error) {
	out := make([]ghapp.Installation, 0, m.n)
	for i := 0; i < m.n; i++ {
		out = append(out, ghapp.Installation{ID: int64(1000 + i), Owner: fmt.Sprintf("acct%03d", i)})
	}
	return out, nil
}

func (manyInstallations) Repositories(context.Context, int64) ([]string, error) { return nil, nil }

// TestInstallationLoopStopsAtTheBudget: the installation loop reads each
// installation's shared rate item (the gate's GetItem) and writes it back;
// before, it went on for every installation after the budget was gone
// (spend stops GitHub calls only): 300 installations at 1 s a read (a
// throttled table) kept the pass going for 10 minutes, past the 2-minute
// budget and the 180 s Lambda timeout, killed unreported.
func TestInstallationLoopStopsAtTheBudget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.now = time.Now().UTC().Truncate(time.Second)
	rates := &slowRates{Tracker: f.rates, f: f, d: time.Second}
	start := f.now
	rep := timedPass(t, f, janitor.Config{Store: f.store, GitHub: manyInstallations{GitHub: f.gh, n: 300}, Rates: rates,
		Leftovers: f.prov})
	if late := startedAfter(rates.reads, start.Add(2*time.Minute)); late > 0 {
		t.Errorf("%d of %d rate-state reads started after the pass's 2-minute budget (pass ran %s; Lambda timeout 180 s); report %+v",
			late, len(rates.reads), f.now.Sub(start), rep)
	}
}

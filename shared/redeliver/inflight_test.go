package redeliver_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/redeliver"
)

// saveMarkFailsOnce fails the first save of the mark, as a write to the
// table that met a fault: the next pass reads the log again from the old
// mark.
type saveMarkFailsOnce struct {
	redeliver.Store
	failed bool
}

func (s *saveMarkFailsOnce) SaveMark(ctx context.Context, m job.DeliveryMark, now time.Time) error {
	if !s.failed {
		s.failed = true
		return errors.New("save mark: connection reset")
	}
	return s.Store.SaveMark(ctx, m, now)
}

// askThenLoseMark holds the endpoint's answer to every redelivery until
// the returned release (also run at cleanup), and runs pass 1: it asks
// for g's redelivery and then fails to save its mark, so the next pass
// reads g's entry again while the redelivery is on its way. The endpoint
// answers code once released.
func askThenLoseMark(t *testing.T, f *fixture, code int) (release func()) {
	t.Helper()
	held := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	f.fake.SetWebhook(func(context.Context, http.Header, []byte) (int, []byte, error) {
		<-held // the redelivery is on its way until the test lets it land
		return code, nil, nil
	}, "s")
	f.cfg.Store = &saveMarkFailsOnce{Store: f.store}
	r, err := redeliver.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := r.Run(context.Background()); err == nil || rep.Redelivered != 1 {
		t.Fatalf("pass 1 = %+v, %v; want g asked, then the mark's save failed (an error)", rep, err)
	}
	return release
}

// TestLastAttemptInFlightIsNotSpent: GitHub answers an ask 202 and
// redelivers later. A pass that reads the log again (here the pass before
// could not save its mark) while the last allowed redelivery of a GUID is
// still on its way finds the GUID's failed entry still its latest. That
// entry was delivered before the last attempt was asked, so it is not that
// attempt's outcome: the GUID is carried until the outcome is read, which
// decides. Before, the pass counted it Spent (RedeliveryAttemptsSpentAlarm
// pages: "nothing will bring that job in") although the redelivery then
// reached the endpoint; the stand-in, which redelivered before answering,
// hid it, as the outcome was always in the log by then. An attempt that is
// not the last one is not asked again while its redelivery is on its way
// (the spacing holds it), which the first case pins.
func TestLastAttemptInFlightIsNotSpent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		maxAttempts int
		code        int // the endpoint's answer to the redelivery
		wantSpent   int
	}{
		{name: "not the last attempt", maxAttempts: 3, code: http.StatusOK, wantSpent: 0},
		{name: "the last attempt succeeds", maxAttempts: 1, code: http.StatusOK, wantSpent: 0},
		{name: "the last attempt fails too", maxAttempts: 1, code: http.StatusServiceUnavailable, wantSpent: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.cfg.MaxAttempts = tt.maxAttempts
			// Two minutes old: older than the ask by more than GitHub's
			// clock may be off from ours.
			f.record("g", "workflow_job", 503, 2*time.Minute)
			release := askThenLoseMark(t, f, tt.code)

			f.clock.add(5 * time.Minute)
			spent := 0
			rep := f.run(t) // reads g's failed entry again: the redelivery has not landed
			spent += rep.Spent
			if rep.Spent != 0 || f.fake.Redeliveries("g") != 1 || len(rep.Mark.Retry) != 1 {
				t.Errorf("pass 2, the redelivery under way = %+v, %d asks; want g neither spent nor asked again, carried", rep, f.fake.Redeliveries("g"))
			}

			release()
			f.fake.Drain()
			f.clock.add(5 * time.Minute)
			rep = f.run(t) // reads the redelivery's outcome
			spent += rep.Spent
			if spent != tt.wantSpent || f.fake.Redeliveries("g") != 1 || len(rep.Mark.Retry) != 0 {
				t.Errorf("pass 3, the outcome read = %+v, %d asks, %d spent in all; want %d spent, 1 ask, nothing carried",
					rep, f.fake.Redeliveries("g"), spent, tt.wantSpent)
			}
		})
	}
}

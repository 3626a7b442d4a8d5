package redeliver_test

import (
	"net/http"
	"testing"
	"time"
)

// TestLastAttemptInFlightIsNotSpentWhateverTheClocks: the entry a pass
// reads again while the last allowed redelivery is on its way is not that
// redelivery's outcome however close to the ask it was delivered (a
// failed delivery read by the very next pass, MaxAttempts 1), and the
// outcome is judged as soon as it is read even when GitHub's clock is
// behind ours. Both are facts of the log (the outcome is a newer entry than
// the one asked), not of delivered_at against our clock.
func TestLastAttemptInFlightIsNotSpentWhateverTheClocks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		age  time.Duration // the failed entry's age at the ask, by GitHub's clock
		skew time.Duration // GitHub's clock against ours
	}{
		{name: "entry delivered 30 s before the ask", age: 30 * time.Second},
		{name: "GitHub's clock 2 min ahead", age: 90 * time.Second, skew: 2 * time.Minute},
		{name: "GitHub's clock 2 min behind", age: 10 * time.Minute, skew: -2 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)                                                       // the stand-in and the App's JWT on GitHub's clock
			f.cfg.Now = func() time.Time { return f.clock.now().Add(-tt.skew) } // the redeliverer's
			f.cfg.MaxAttempts = 1
			f.record("g", "workflow_job", 503, tt.age)
			release := askThenLoseMark(t, f, http.StatusServiceUnavailable)

			f.clock.add(5 * time.Second)
			rep := f.run(t) // reads g's failed entry again: the redelivery has not landed
			if rep.Spent != 0 || len(rep.Mark.Retry) != 1 {
				t.Errorf("pass 2, the redelivery under way = %+v; want g not spent, carried", rep)
			}

			release()
			f.fake.Drain()
			f.clock.add(time.Minute) // well inside Spacing: the outcome read decides, not the bound
			rep = f.run(t)
			if rep.Spent != 1 || len(rep.Mark.Retry) != 0 || f.fake.Redeliveries("g") != 1 {
				t.Errorf("pass 3, the failed outcome read = %+v, %d asks; want g spent at once, nothing carried, 1 ask",
					rep, f.fake.Redeliveries("g"))
			}
		})
	}
}

package ratelimit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestGate: the answer and the shared reads of one Gate.Reading at t0 by
// the own reading and the shared one: the shared item is read only when
// the own reading is unknown, a refresh old or Low; the newest wins; no
// reading anywhere is no error; a store error comes with the own reading.
func TestGate(t *testing.T) {
	t.Parallel()
	rd := func(remaining int, age time.Duration) *ratelimit.Reading {
		return &ratelimit.Reading{Limit: 5000, Remaining: remaining, ResetAt: resetAt, ObservedAt: t0.Add(-age)}
	}
	exhausted := rd(0, time.Second/2)
	tests := []struct {
		name    string
		own     *ratelimit.Reading
		shared  *ratelimit.Reading
		loadErr error
		want    *ratelimit.Reading // nil: none
		loads   int
	}{
		{name: "fresh and ample: own, no read", own: rd(4000, time.Second), shared: exhausted, want: rd(4000, time.Second)},
		{name: "fresh but low: the newer shared one", own: rd(400, time.Second), shared: exhausted, want: exhausted, loads: 1},
		{name: "stale: the newer shared one", own: rd(4000, ratelimit.DefaultRefresh), shared: exhausted, want: exhausted, loads: 1},
		{name: "cold: the shared one", shared: exhausted, want: exhausted, loads: 1},
		{name: "low, shared older: own", own: rd(400, 0), shared: rd(0, time.Minute), want: rd(400, 0), loads: 1},
		// A slow success GitHub counted before the exhaustion another
		// process shared, answered here 2 s after it: the window's lower
		// count stands, dated the later answer.
		{name: "low, shared exhaustion just older: the exhaustion", own: rd(400, 0), shared: rd(0, 2*time.Second), want: &ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: resetAt, ObservedAt: t0, CountedAt: t0.Add(-2 * time.Second)}, loads: 1},
		{name: "nothing anywhere: no reading, no error", loads: 1},
		{name: "store down: own, with the error", own: rd(400, time.Second), loadErr: errors.New("throttled"), want: rd(400, time.Second), loads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeStore()
			if tt.shared != nil {
				s.items[installation] = *tt.shared
			}
			s.loadErr = tt.loadErr
			tr := ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
			if tt.own != nil {
				tr.Observe(installation, *tt.own)
			}
			g := ratelimit.NewGate(tr, 0)

			got, err := g.Reading(context.Background(), installation, t0)

			switch {
			case tt.loadErr != nil && !errors.Is(err, tt.loadErr):
				t.Errorf("err %v, want it to wrap the store's", err)
			case tt.loadErr == nil && err != nil:
				t.Errorf("err %v, want none", err)
			}
			want := ratelimit.Reading{}
			if tt.want != nil {
				want = *tt.want
			}
			if !got.Equal(want) {
				t.Errorf("reading %+v, want %+v", got, want)
			}
			if s.loads != tt.loads {
				t.Errorf("shared item read %d times, want %d", s.loads, tt.loads)
			}
		})
	}
}

// TestGateReadsOncePerRefresh: however many questions, the shared item is
// read at most once per refresh per installation while the own reading
// does not settle them, and each installation has its own interval.
func TestGateReadsOncePerRefresh(t *testing.T) {
	t.Parallel()
	s := newFakeStore()
	tr := ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	const refresh = 5 * time.Second
	g := ratelimit.NewGate(tr, refresh)
	ask := func(inst int64, at time.Duration) {
		t.Helper()
		if _, err := g.Reading(context.Background(), inst, t0.Add(at)); err != nil {
			t.Fatalf("Reading: %v", err)
		}
	}
	steps := []struct {
		inst  int64
		at    time.Duration
		loads int // in all, after the step
	}{
		{installation, 0, 1},
		{installation, time.Second, 1},
		{installation, refresh - time.Millisecond, 1},
		{installation + 1, time.Second, 2}, // another installation: its own
		{installation, refresh, 3},
		{installation, -time.Second, 4}, // a clock gone back: no interval to trust
	}
	for i, st := range steps {
		ask(st.inst, st.at)
		if s.loads != st.loads {
			t.Fatalf("step %d: shared item read %d times in all, want %d", i, s.loads, st.loads)
		}
	}
}

// heldStore is a store whose reads wait until released, counting the
// reads that started.
type heldStore struct {
	*fakeStore
	started chan struct{}
	release chan struct{}
}

func (h heldStore) LoadRate(ctx context.Context, id int64) (ratelimit.Reading, error) {
	h.started <- struct{}{}
	<-h.release
	return h.fakeStore.LoadRate(ctx, id)
}

// TestGateWaitsForTheReadInFlight: a question asked while another one's
// shared read is in flight waits for it and answers with what it found
// (here a secondary limit's block another process shared), with no read
// of its own. Answered with its own reading instead (none, in a cold
// process), the batch's other workers called GitHub inside the block.
func TestGateWaitsForTheReadInFlight(t *testing.T) {
	t.Parallel()
	s := heldStore{fakeStore: newFakeStore(), started: make(chan struct{}, 4), release: make(chan struct{})}
	s.items[installation] = ratelimit.Block(t0.Add(-time.Second), time.Minute)
	tr := ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	g := ratelimit.NewGate(tr, 0)
	type answer struct {
		r   ratelimit.Reading
		err error
	}
	answers := make(chan answer, 3)
	ask := func() {
		r, err := g.Reading(context.Background(), installation, t0)
		answers <- answer{r, err}
	}
	go ask()
	<-s.started // the first question's read is in flight
	go ask()
	go ask()
	select {
	case a := <-answers:
		t.Fatalf("a question answered %+v before the read in flight ended", a.r)
	case <-s.started:
		t.Fatal("a second shared read started while one was in flight")
	case <-time.After(100 * time.Millisecond): // a bound on a hang, not a measurement
	}
	close(s.release)
	for range 3 {
		a := <-answers
		if a.err != nil || !a.r.Blocked(t0) {
			t.Errorf("answer %+v, %v: want the shared block", a.r, a.err)
		}
	}
	if s.loads != 1 {
		t.Errorf("shared item read %d times, want once", s.loads)
	}
}

// pausingSource pauses the second Latest call (the second question's own
// reading) just after it was taken, until resumed.
type pausingSource struct {
	*ratelimit.Tracker
	calls  atomic.Int32
	paused chan struct{}
	resume chan struct{}
}

func (p *pausingSource) Latest(id int64) (ratelimit.Reading, bool) {
	r, ok := p.Tracker.Latest(id)
	if p.calls.Add(1) == 2 {
		close(p.paused)
		<-p.resume
	}
	return r, ok
}

// TestGateOwnReadingTakenBeforeTheReadEnded: a question whose own reading
// (none, cold) was taken just before the read in flight ended finds no
// read in flight and none due: it answers with what that read merged, not
// with the reading it took before (a review found the window).
func TestGateOwnReadingTakenBeforeTheReadEnded(t *testing.T) {
	t.Parallel()
	s := heldStore{fakeStore: newFakeStore(), started: make(chan struct{}, 4), release: make(chan struct{})}
	s.items[installation] = ratelimit.Block(t0.Add(-time.Second), time.Minute)
	tr := ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	src := &pausingSource{Tracker: tr, paused: make(chan struct{}), resume: make(chan struct{})}
	g := ratelimit.NewGate(src, 0)
	first, second := make(chan ratelimit.Reading, 1), make(chan ratelimit.Reading, 1)
	go func() { r, _ := g.Reading(context.Background(), installation, t0); first <- r }()
	<-s.started
	go func() { r, _ := g.Reading(context.Background(), installation, t0); second <- r }()
	<-src.paused // the second question holds its own (empty) reading
	close(s.release)
	if r := <-first; !r.Blocked(t0) {
		t.Fatalf("the reader answered %+v, want the shared block", r)
	}
	close(src.resume)
	if r := <-second; !r.Blocked(t0) {
		t.Errorf("the second question answered %+v: not blocked, though the read had merged the block", r)
	}
}

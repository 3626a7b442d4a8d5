package ratelimit_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// gatedStore is a Store whose first SaveRate blocks until release is
// closed, telling entered when it starts; later saves go straight through.
type gatedStore struct {
	*fakeStore
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func newGatedStore() *gatedStore {
	return &gatedStore{fakeStore: newFakeStore(), entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *gatedStore) SaveRate(ctx context.Context, id int64, r ratelimit.Reading) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		<-s.release
	}
	return s.fakeStore.SaveRate(ctx, id, r)
}

func (s *gatedStore) saved() []ratelimit.Reading {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ratelimit.Reading(nil), s.saves...)
}

// TestTrackerPersistOneInFlight: while one Persist of an installation is
// writing, concurrent ones (the other workers of a batch, holding the same
// first reading) write nothing and return false; once the write is done, a
// reading the rule says to share is written again, and one observed during
// the write whose own Persist was turned away is written by the writer.
func TestTrackerPersistOneInFlight(t *testing.T) {
	t.Parallel()
	at := func(remaining int, after time.Duration) ratelimit.Reading {
		return ratelimit.Reading{Limit: 5000, Remaining: remaining, ResetAt: resetAt, ObservedAt: t0.Add(after)}
	}
	tests := []struct {
		name      string
		meanwhile ratelimit.Reading // observed while the first write is blocked (zero: none)
		wantSaves []ratelimit.Reading
		after     ratelimit.Reading // observed after the writer returned; then Persist
		wantAfter bool
	}{
		{name: "same first reading", wantSaves: []ratelimit.Reading{at(4999, 0)},
			after: at(4499, time.Second), wantAfter: true},
		{name: "small drop meanwhile", meanwhile: at(4990, time.Second), wantSaves: []ratelimit.Reading{at(4999, 0)},
			after: at(4489, 2*time.Second), wantAfter: true},
		{name: "exhausted meanwhile", meanwhile: at(0, time.Second), wantSaves: []ratelimit.Reading{at(4999, 0), at(0, time.Second)},
			after: at(0, 2*time.Second), wantAfter: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newGatedStore()
			now := t0.Add(3 * time.Second)
			tr := ratelimit.NewTracker(s, ratelimit.DefaultPersistRule(), func() time.Time { return now })
			tr.Observe(installation, at(4999, 0))

			type result struct {
				wrote bool
				err   error
			}
			first := make(chan result, 1)
			go func() {
				wrote, err := tr.Persist(ctx, installation)
				first <- result{wrote, err}
			}()
			<-s.entered
			if tt.meanwhile.Known() {
				tr.Observe(installation, tt.meanwhile)
			}
			const others = 3
			var wg sync.WaitGroup
			turnedAway := make(chan result, others)
			for range others {
				wg.Go(func() {
					wrote, err := tr.Persist(ctx, installation)
					turnedAway <- result{wrote, err}
				})
			}
			wg.Wait()
			close(turnedAway)
			for r := range turnedAway {
				if r.wrote || r.err != nil {
					t.Fatalf("Persist during a write = (%v, %v), want (false, nil)", r.wrote, r.err)
				}
			}
			close(s.release)
			if r := <-first; !r.wrote || r.err != nil {
				t.Fatalf("first Persist = (%v, %v), want (true, nil)", r.wrote, r.err)
			}
			if got := s.saved(); !equalReadings(got, tt.wantSaves) {
				t.Fatalf("SaveRate calls %+v, want %+v", got, tt.wantSaves)
			}

			tr.Observe(installation, tt.after)
			wrote, err := tr.Persist(ctx, installation)
			if err != nil || wrote != tt.wantAfter {
				t.Fatalf("Persist after the write = (%v, %v), want (%v, nil)", wrote, err, tt.wantAfter)
			}
			if got, want := len(s.saved()), len(tt.wantSaves); tt.wantAfter && got != want+1 {
				t.Fatalf("%d SaveRate calls after the write, want %d", got, want+1)
			}
		})
	}
}

func equalReadings(a, b []ratelimit.Reading) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// TestPersistRuleLow: low is one drop threshold (10 % of the limit) left
// or less.
func TestPersistRuleLow(t *testing.T) {
	t.Parallel()
	rule := ratelimit.DefaultPersistRule()
	tests := []struct {
		name      string
		limit     int
		remaining int
		want      bool
	}{
		{"ample", 5000, 4999, false},
		{"just above the threshold", 5000, 501, false},
		{"at the threshold", 5000, 500, true},
		{"exhausted", 5000, 0, true},
		{"limit unknown (a 403 without headers), exhausted", 0, 0, true},
		{"small budget rounds the threshold up", 15, 2, true},
		{"small budget above it", 15, 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := ratelimit.Reading{Limit: tt.limit, Remaining: tt.remaining, ResetAt: resetAt, ObservedAt: t0}
			if got := rule.Low(r); got != tt.want {
				t.Errorf("Low(%d of %d) = %v, want %v", tt.remaining, tt.limit, got, tt.want)
			}
		})
	}
}

// exitingStore is a Store whose first SaveRate ends its goroutine
// (runtime.Goexit), as an invocation killed mid-call does in the chaos
// run; later saves go through.
type exitingStore struct {
	*fakeStore
	once sync.Once
}

func (s *exitingStore) SaveRate(ctx context.Context, id int64, r ratelimit.Reading) error {
	exit := false
	s.once.Do(func() { exit = true })
	if exit {
		runtime.Goexit()
	}
	return s.fakeStore.SaveRate(ctx, id, r)
}

// TestTrackerPersistSurvivesAWriteThatNeverReturns: a Persist whose write
// never returns (its goroutine ended mid-call) neither crashes the process
// (the lock released twice was a fatal error) nor keeps the installation
// "writing" for ever: the next Persist writes.
func TestTrackerPersistSurvivesAWriteThatNeverReturns(t *testing.T) {
	t.Parallel()
	st := &exitingStore{fakeStore: newFakeStore()}
	tr := ratelimit.NewTracker(st, ratelimit.DefaultPersistRule(), func() time.Time { return t0 })
	tr.Observe(1, ratelimit.Reading{Limit: 5000, Remaining: 4999, ResetAt: resetAt, ObservedAt: t0})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = tr.Persist(context.Background(), 1)
	}()
	<-done
	wrote, err := tr.Persist(context.Background(), 1)
	if err != nil || !wrote {
		t.Fatalf("Persist after a write that never returned: wrote %v, %v; want the reading written", wrote, err)
	}
	if got := len(st.saves); got != 1 {
		t.Fatalf("%d saves, want 1", got)
	}
}

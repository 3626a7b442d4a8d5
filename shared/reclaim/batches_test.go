package reclaim_test

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// raceStore is memStore whose take-backs number n (1-based, in call
// order) in lose find the record changed (another reclaimer won).
type raceStore struct {
	*memStore
	calls int
	lose  map[int]bool
}

func (s *raceStore) TakeBack(ctx context.Context, read job.Record, to job.State, due time.Time, why string, now time.Time) (job.Record, error) {
	s.calls++
	if s.lose[s.calls] {
		return job.Record{}, job.ErrConflict
	}
	return s.memStore.TakeBack(ctx, read, to, due, why, now)
}

// scriptQueue: SendBatch call i takes lens[i] and SQS stamps it at
// stamps[i] of the way (0 start, 1 answer); calls past the script are
// instant.
type scriptQueue struct {
	clock    *latencyClock
	lens     []time.Duration
	stamps   []float64
	calls    int
	arrivals []time.Time
}

func (q *scriptQueue) Send(context.Context, job.Message, time.Duration) error {
	panic("the reclaimer sends batches")
}

func (q *scriptQueue) SendBatch(_ context.Context, msgs []job.Message, delays []time.Duration) []error {
	start := q.clock.Now()
	var l time.Duration
	f := 0.0
	if q.calls < len(q.lens) {
		l, f = q.lens[q.calls], q.stamps[q.calls]
	}
	q.calls++
	_ = q.clock.Sleep(context.Background(), l)
	at := start.Add(time.Duration(f * float64(l)))
	for i := range msgs {
		secs := int64(math.Ceil(max(delays[i], 0).Seconds()))
		q.arrivals = append(q.arrivals, at.Add(time.Duration(secs)*time.Second))
	}
	return make([]error, len(msgs))
}

func spreadRun(t *testing.T, m int, seed uint64, lose map[int]bool, lens []time.Duration, stamps []float64) (int, []time.Duration, reclaim.Report) {
	clock := &latencyClock{t: t0, rnd: rand.New(rand.NewPCG(seed, 1))}
	st := &raceStore{memStore: &memStore{clock: clock}, lose: lose}
	for id := int64(1); id <= int64(m); id++ {
		st.recs = append(st.recs, job.Record{JobID: id, State: job.Claiming, Version: 2, InstallationID: 42, Repo: "octo/app", Pool: "linux",
			LeaseOwner: "dead", LeaseExpiresAt: job.Millis(t0.Add(-time.Minute))})
	}
	q := &scriptQueue{clock: clock, lens: lens, stamps: stamps}
	r := mustNew(t, reclaim.Config{Store: st, Queue: q, Now: clock.Now, Sleep: clock.Sleep, Rand: random.New(seed), Logger: slog.New(slog.DiscardHandler)})
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	offsets := make([]time.Duration, len(q.arrivals))
	for i, a := range q.arrivals {
		offsets[i] = a.Sub(t0)
	}
	return reclaim.MaxPerSecond(offsets), offsets, rep
}

// TestArrivalsSpreadAcrossThreeBatches: M = 60, the first batch's
// SendBatch takes 5.5 s and SQS stamps it at its answer; 9 of the second
// batch's 10 take-backs lose a race (another reclaimer won). Each batch is
// checked against every batch before it: against the one before only, the
// third (after a batch of 1 job, never "crowded") met the first's seconds,
// landing 5.5 s late: 4 arrivals in one second (an audit).
func TestArrivalsSpreadAcrossThreeBatches(t *testing.T) {
	t.Parallel()
	lose := map[int]bool{}
	for i := 12; i <= 20; i++ { // take-backs 11..20 are the second batch's: keep only the first
		lose[i] = true
	}
	got, offs, rep := spreadRun(t, 60, 1, lose, []time.Duration{5500 * time.Millisecond}, []float64{1})
	if rep.RequeuedTotal() != 51 {
		t.Fatalf("requeued %d, want 51: %+v", rep.RequeuedTotal(), rep)
	}
	if got > 3 {
		t.Fatalf("%d arrivals in one 1 s window, want <= 3: %v", got, offs)
	}
}

package reclaim_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// latencyClock is a fake clock that every call of the fake store and queue
// moves on by a random latency of 0…maxLatency, as a real round trip
// would; sleeping moves it by exactly the time asked for.
type latencyClock struct {
	mu         sync.Mutex
	t          time.Time
	rnd        *rand.Rand
	maxLatency time.Duration
}

func (c *latencyClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// call returns the instant a call starts and moves the clock past its latency.
func (c *latencyClock) call() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.t
	c.t = c.t.Add(time.Duration(c.rnd.Int64N(int64(c.maxLatency) + 1)))
	return at
}

func (c *latencyClock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.t = c.t.Add(d)
	}
	return nil
}

// memStore holds m stale records in one shard; every call costs latency.
type memStore struct {
	reclaim.Store // the liveness methods: never called, no record is claimed
	clock         *latencyClock
	recs          []job.Record
}

func (s *memStore) Shards() []string { return []string{"0"} }

func (s *memStore) Stale(_ context.Context, shard string, _ time.Time, _ int32, _ string) (job.Page, error) {
	s.clock.call()
	if shard != "0" {
		return job.Page{}, nil // the strays above the one shard: empty
	}
	return job.Page{Records: slices.Clone(s.recs)}, nil
}

func (s *memStore) TakeBack(_ context.Context, read job.Record, to job.State, _ time.Time, _ string, _ time.Time) (job.Record, error) {
	s.clock.call()
	read.State, read.Version = to, read.Version+1
	return read, nil
}

// arrivalQueue records when each message becomes visible: the instant its
// send call reached SQS plus its whole DelaySeconds. SQS stamps a batch
// somewhere between the call's start and its answer: at stamp of the way
// (0: the start, 1: the answer; negative: a random point each call).
type arrivalQueue struct {
	clock    *latencyClock
	stamp    float64
	arrivals []time.Time
}

func (q *arrivalQueue) arrive(at time.Time, delay time.Duration) {
	secs := int64(math.Ceil(max(delay, 0).Seconds())) // SQS DelaySeconds
	q.arrivals = append(q.arrivals, at.Add(time.Duration(secs)*time.Second))
}

func (q *arrivalQueue) Send(_ context.Context, _ job.Message, delay time.Duration) error {
	q.arrive(q.clock.call(), delay)
	return nil
}

func (q *arrivalQueue) SendBatch(_ context.Context, msgs []job.Message, delays []time.Duration) []error {
	start := q.clock.call()
	f := q.stamp
	if f < 0 {
		q.clock.mu.Lock()
		f = q.clock.rnd.Float64()
		q.clock.mu.Unlock()
	}
	at := start.Add(time.Duration(f * float64(q.clock.Now().Sub(start))))
	for i := range msgs {
		q.arrive(at, delays[i])
	}
	return make([]error, len(msgs))
}

// TestArrivalsAreSpread is the herd bound as SQS delivers it: whatever the
// latency of each call (0…100 ms, random, and up to 400 ms) and wherever in
// a send call SQS stamps its batch (at its start, its answer, or anywhere
// between: each batch its own), the messages of one pass of M ≤ 60
// reclaimed jobs become visible at most 3 in any 1 s window, and a single
// job at once.
func TestArrivalsAreSpread(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxLatency time.Duration
		stamp      float64
	}{
		{time.Millisecond, 0}, {40 * time.Millisecond, 0}, {100 * time.Millisecond, 0},
		{40 * time.Millisecond, 1}, {100 * time.Millisecond, -1}, {400 * time.Millisecond, -1},
	} {
		maxLatency := tc.maxLatency
		t.Run(fmt.Sprint(maxLatency, " stamp ", tc.stamp), func(t *testing.T) {
			t.Parallel()
			for m := 1; m <= 60; m++ {
				for seed := range uint64(25) {
					start := t0.Add(time.Duration(seed*37%1000) * time.Millisecond) // any phase of the second
					clock := &latencyClock{t: start, rnd: rand.New(rand.NewPCG(seed, uint64(m))), maxLatency: maxLatency}
					st := &memStore{clock: clock}
					for id := int64(1); id <= int64(m); id++ {
						st.recs = append(st.recs, job.Record{
							JobID: id, State: job.Claiming, Version: 2, InstallationID: 42, Repo: "octo/app", Pool: "linux",
							LeaseOwner: "dead", LeaseExpiresAt: job.Millis(start.Add(-time.Minute)),
						})
					}
					q := &arrivalQueue{clock: clock, stamp: tc.stamp}
					r := mustNew(t, reclaim.Config{Store: st, Queue: q,
						Now: clock.Now, Sleep: clock.Sleep, Rand: random.New(seed), Logger: slog.New(slog.DiscardHandler),
					})
					rep, err := r.Run(context.Background())
					if err != nil || rep.RequeuedTotal() != m {
						t.Fatalf("m=%d seed=%d: %+v, %v; want all %d requeued", m, seed, rep, err, m)
					}
					if len(q.arrivals) != m {
						t.Fatalf("m=%d seed=%d: %d messages, want %d", m, seed, len(q.arrivals), m)
					}
					offsets := make([]time.Duration, m)
					for i, a := range q.arrivals {
						offsets[i] = a.Sub(start)
					}
					if got := reclaim.MaxPerSecond(offsets); got > 3 {
						t.Fatalf("m=%d seed=%d latency ≤ %s: %d arrivals in one second, want ≤ 3", m, seed, maxLatency, got)
					}
					if m == 1 && q.arrivals[0].After(clock.Now()) {
						t.Fatalf("m=1 seed=%d: the single job arrives at %s, after the pass ended at %s; want no delay",
							seed, q.arrivals[0].Sub(start), clock.Now().Sub(start))
					}
				}
			}
		})
	}
}

// slowFirstQueue answers its first SendBatch after lat and the others at
// once; SQS stamps each batch at its answer.
type slowFirstQueue struct {
	clock    *latencyClock
	lat      time.Duration
	calls    int
	arrivals []time.Time
}

func (q *slowFirstQueue) Send(context.Context, job.Message, time.Duration) error {
	panic("the reclaimer sends batches")
}

func (q *slowFirstQueue) SendBatch(_ context.Context, msgs []job.Message, delays []time.Duration) []error {
	if q.calls == 0 {
		_ = q.clock.Sleep(context.Background(), q.lat)
	}
	q.calls++
	for i := range msgs {
		secs := int64(math.Ceil(max(delays[i], 0).Seconds()))
		q.arrivals = append(q.arrivals, q.clock.Now().Add(time.Duration(secs)*time.Second))
	}
	return make([]error, len(msgs))
}

// TestArrivalsSpreadWhenOneBatchIsSlow: the first batch's call takes
// 300 ms, the others none: its seconds land 300 ms later than the next
// batch's, and a 1 s window held a second of each (4 jobs, from an audit).
func TestArrivalsSpreadWhenOneBatchIsSlow(t *testing.T) {
	t.Parallel()
	const m = 60
	clock := &latencyClock{t: t0, rnd: rand.New(rand.NewPCG(1, 1))}
	st := &memStore{clock: clock}
	for id := int64(1); id <= m; id++ {
		st.recs = append(st.recs, job.Record{JobID: id, State: job.Claiming, Version: 2, InstallationID: 42, Repo: "octo/app", Pool: "linux",
			LeaseOwner: "dead", LeaseExpiresAt: job.Millis(t0.Add(-time.Minute))})
	}
	q := &slowFirstQueue{clock: clock, lat: 300 * time.Millisecond}
	r := mustNew(t, reclaim.Config{Store: st, Queue: q, Now: clock.Now, Sleep: clock.Sleep, Rand: random.New(3), Logger: slog.New(slog.DiscardHandler)})
	if rep, err := r.Run(context.Background()); err != nil || rep.RequeuedTotal() != m {
		t.Fatalf("%+v, %v", rep, err)
	}
	offsets := make([]time.Duration, len(q.arrivals))
	for i, a := range q.arrivals {
		offsets[i] = a.Sub(t0)
	}
	if got := reclaim.MaxPerSecond(offsets); got > 3 {
		t.Fatalf("%d arrivals in one 1 s window, want ≤ 3: %v", got, offsets)
	}
}

// racyStore loses the take-back of every job in lost, as a late
// claimer's lease or a second reclaimer would make it (job.ErrConflict).
type racyStore struct {
	memStore
	lost map[int64]bool
}

func (s *racyStore) TakeBack(ctx context.Context, read job.Record, to job.State, due time.Time, why string, now time.Time) (job.Record, error) {
	if s.lost[read.JobID] {
		s.clock.call()
		return job.Record{}, &job.ConflictError{Op: "take back", JobID: read.JobID}
	}
	return s.memStore.TakeBack(ctx, read, to, due, why, now)
}

// TestArrivalsAreSpreadWhenRacesLeaveFew: a pass finds more than HoldUpTo
// stale records but wins the take-back of HoldUpTo or fewer (a late
// claimer or a second reclaimer won the others). The bound is the jobs it
// sends: at most 3 in any 1 s window. Planned for all the candidates
// (W = 30 s for 70, no holds), 56 sent had 4 or 5 in one window (a review
// found it). A pass that still wins more than HoldUpTo sends them all.
func TestArrivalsAreSpreadWhenRacesLeaveFew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ candidates, lost int }{{70, 14}, {61, 1}, {100, 40}, {100, 20}} {
		t.Run(fmt.Sprintf("%d found, %d lost", tc.candidates, tc.lost), func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(60) {
				start := t0.Add(time.Duration(seed*37%1000) * time.Millisecond)
				clock := &latencyClock{t: start, rnd: rand.New(rand.NewPCG(seed, 7)), maxLatency: 100 * time.Millisecond}
				st := &racyStore{memStore: memStore{clock: clock}, lost: map[int64]bool{}}
				pick := rand.New(rand.NewPCG(seed, 11)).Perm(tc.candidates)
				for id := int64(1); id <= int64(tc.candidates); id++ {
					st.recs = append(st.recs, job.Record{JobID: id, State: job.Claiming, Version: 2, InstallationID: 42, Repo: "octo/app", Pool: "linux",
						LeaseOwner: "dead", LeaseExpiresAt: job.Millis(start.Add(-time.Minute))})
				}
				for _, i := range pick[:tc.lost] {
					st.lost[int64(i+1)] = true
				}
				q := &arrivalQueue{clock: clock, stamp: -1}
				r := mustNew(t, reclaim.Config{Store: st, Queue: q, Now: clock.Now, Sleep: clock.Sleep, Rand: random.New(seed), Logger: slog.New(slog.DiscardHandler)})
				rep, err := r.Run(context.Background())
				m := tc.candidates - tc.lost
				if err != nil || rep.RequeuedTotal() != m || rep.Raced != tc.lost || len(q.arrivals) != m {
					t.Fatalf("seed %d: %+v, %v, %d messages; want %d requeued, %d raced", seed, rep, err, len(q.arrivals), m, tc.lost)
				}
				if m > reclaim.HoldUpTo {
					continue // no bound is promised past HoldUpTo
				}
				offs := make([]time.Duration, m)
				for i, a := range q.arrivals {
					offs[i] = a.Sub(start)
				}
				if got := reclaim.MaxPerSecond(offs); got > 3 {
					t.Fatalf("seed %d: %d sent, %d arrivals in one 1 s window; want ≤ 3", seed, m, got)
				}
			}
		})
	}
}

// costlyTakeBacks takes back every record it is asked for, each take-back
// costing tb of the clock, and remembers which.
type costlyTakeBacks struct {
	memStore
	tb    time.Duration
	taken map[int64]bool
}

func (s *costlyTakeBacks) TakeBack(_ context.Context, read job.Record, to job.State, _ time.Time, _ string, _ time.Time) (job.Record, error) {
	_ = s.clock.Sleep(context.Background(), s.tb)
	s.taken[read.JobID] = true
	read.State, read.Version = to, read.Version+1
	return read, nil
}

// deadlineQueue is a slow SQS (each SendBatch costs send) in an invocation
// that ends at kill: a batch past it is never sent (the process is gone).
type deadlineQueue struct {
	clock    *latencyClock
	send     time.Duration
	stop     time.Time // the pass's budget
	kill     time.Time
	sent     map[int64]bool
	pastStop int // SendBatch calls begun after the budget
}

func (q *deadlineQueue) Send(context.Context, job.Message, time.Duration) error {
	panic("the reclaimer sends batches")
}

func (q *deadlineQueue) SendBatch(_ context.Context, msgs []job.Message, _ []time.Duration) []error {
	if !q.clock.Now().Before(q.stop) {
		q.pastStop++
	}
	_ = q.clock.Sleep(context.Background(), q.send)
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if q.clock.Now().After(q.kill) {
			errs[i] = errors.New("the invocation ended")
			continue
		}
		q.sent[m.JobID] = true
	}
	return errs
}

// TestBacklogPassStrandsNothing: 1,000 stale records after an SQS outage,
// SQS still slow (300 ms a batch), DynamoDB 30 ms a take-back, a 40 s
// budget in a 55 s invocation. A pass of more than HoldUpTo candidates
// takes them back before it sends only until it has won more than
// HoldUpTo; the rest go batch by batch under the budget, so the pass ends
// at its budget with every job it took back sent, and the others left for
// the next pass. Taking all 1,000 back first (a review of the first fix)
// left 170 taken back with no message when the invocation ended.
func TestBacklogPassStrandsNothing(t *testing.T) {
	t.Parallel()
	start := t0
	clock := &latencyClock{t: start, rnd: rand.New(rand.NewPCG(1, 1))}
	st := &costlyTakeBacks{memStore: memStore{clock: clock}, tb: 30 * time.Millisecond, taken: map[int64]bool{}}
	for id := int64(1); id <= 1000; id++ {
		st.recs = append(st.recs, job.Record{JobID: id, State: job.Claiming, Version: 2, InstallationID: 42, Repo: "octo/app", Pool: "linux",
			LeaseOwner: "dead", LeaseExpiresAt: job.Millis(start.Add(-time.Minute))})
	}
	q := &deadlineQueue{clock: clock, send: 300 * time.Millisecond, stop: start.Add(reclaim.DefaultBudget),
		kill: start.Add(55 * time.Second), sent: map[int64]bool{}}
	r := mustNew(t, reclaim.Config{Store: st, Queue: q, Now: clock.Now, Sleep: clock.Sleep, Rand: random.New(1), Logger: slog.New(slog.DiscardHandler)})
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stranded := 0
	for id := range st.taken {
		if !q.sent[id] {
			stranded++
		}
	}
	if stranded != 0 || !rep.Incomplete || q.pastStop > 1 || rep.RequeuedTotal() != len(q.sent) {
		t.Errorf("%d taken back, %d sent, %d stranded, %d SendBatch calls past the budget, pass %+v; want none stranded, at most the batch in flight past the budget, the pass incomplete",
			len(st.taken), len(q.sent), stranded, q.pastStop, rep)
	}
}

// laggingStore is memStore whose every call takes exactly lat: a pass of
// many take-backs falls seconds behind its plan.
type laggingStore struct {
	memStore
	lat time.Duration
}

func (s *laggingStore) TakeBack(ctx context.Context, read job.Record, to job.State, due time.Time, why string, now time.Time) (job.Record, error) {
	rec, err := s.memStore.TakeBack(ctx, read, to, due, why, now)
	_ = s.clock.Sleep(ctx, s.lat)
	return rec, err
}

// TestArrivalsStayInTheWindowWhenThePassIsSlow: the spread is of
// arrivals (send time + delay), so a pass whose take-backs put each batch
// seconds behind its plan still delivers every job inside the window
// W = min(M × 2 s, 30 s) from its first send (plus the 1 s SQS rounds
// DelaySeconds up to). A batch sent e seconds late that kept its planned
// delay arrived e seconds late: the last of 60 jobs 9 s past W,
// unseen by the density checks, which such a drift only thins out.
func TestArrivalsStayInTheWindowWhenThePassIsSlow(t *testing.T) {
	t.Parallel()
	for _, m := range []int{11, 25, 60} {
		t.Run(fmt.Sprint(m, " jobs"), func(t *testing.T) {
			t.Parallel()
			clock := &latencyClock{t: t0, rnd: rand.New(rand.NewPCG(7, uint64(m)))}
			st := &laggingStore{memStore: memStore{clock: clock}, lat: 200 * time.Millisecond}
			for id := int64(1); id <= int64(m); id++ {
				st.recs = append(st.recs, job.Record{JobID: id, State: job.Claiming, Version: 2, InstallationID: 42, Repo: "octo/app", Pool: "linux",
					LeaseOwner: "dead", LeaseExpiresAt: job.Millis(t0.Add(-time.Minute))})
			}
			q := &arrivalQueue{clock: clock, stamp: 0}
			r := mustNew(t, reclaim.Config{Store: st, Queue: q, Now: clock.Now, Sleep: clock.Sleep, Rand: random.New(5), Logger: slog.New(slog.DiscardHandler)})
			if rep, err := r.Run(context.Background()); err != nil || rep.RequeuedTotal() != m || len(q.arrivals) != m {
				t.Fatalf("%+v, %v, %d sent; want all %d requeued and sent", rep, err, len(q.arrivals), m)
			}
			first := slices.MinFunc(q.arrivals, func(a, b time.Time) int { return a.Compare(b) })
			last := slices.MaxFunc(q.arrivals, func(a, b time.Time) int { return a.Compare(b) })
			if limit := reclaim.Window(m) + time.Second; last.Sub(first) > limit {
				t.Errorf("arrivals span %s (first %s, last %s after t0), want ≤ W + 1 s = %s",
					last.Sub(first), first.Sub(t0), last.Sub(t0), limit)
			}
			if got := reclaim.MaxPerSecond(func() []time.Duration {
				o := make([]time.Duration, m)
				for i, a := range q.arrivals {
					o[i] = a.Sub(t0)
				}
				return o
			}()); got > 3 {
				t.Errorf("%d arrivals in one 1 s window, want ≤ 3", got)
			}
		})
	}
}

package reclaim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/contract"
	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const lease = 3 * time.Minute

// The store's default bookkeeping rules, which the tests' records follow.
var timing = job.Timing{}.WithDefaults()

// TestDomainIsFreeOfAWS: the reclaimer speaks its own ports in the
// domain's types; no AWS service client is in its build.
func TestDomainIsFreeOfAWS(t *testing.T) {
	t.Parallel()
	contract.DepsFree(t, "github.com/ghclaim/ghclaim/shared/reclaim")
}

type sent struct {
	msg   job.Message
	delay time.Duration // DelaySeconds
}

// fixture is one flow test's world: the in-memory job store and claims
// queue (held to the DynamoDB and SQS adapters by infra/contract) on an
// injected clock.
type fixture struct {
	store *mem.Store
	queue *mem.Queue
	clock *clocktest.Clock
	logs  *syncBuffer
	emf   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

func setup(t *testing.T) *fixture {
	t.Helper()
	c := clocktest.New(t0)
	return &fixture{
		store: mem.NewStore(job.Timing{}),
		queue: mem.NewQueue(c.Now),
		clock: c,
		logs:  &syncBuffer{},
		emf:   &syncBuffer{},
	}
}

// messages returns what reached the claims queue, in order.
func (f *fixture) messages() []sent {
	var out []sent
	for _, s := range f.queue.Sent() {
		out = append(out, sent{msg: s.Msg, delay: s.Delay})
	}
	return out
}

// setFail makes every later SendBatch fail (nil: succeed).
func (f *fixture) setFail(err error) {
	f.queue.Fail = func(string) error { return err }
}

// reclaimer returns a reclaimer on f's store, queue and clock, seeded.
func (f *fixture) reclaimer(t *testing.T, seed uint64, mod func(*reclaim.Config)) *reclaim.Reclaimer {
	cfg := reclaim.Config{
		Now:     f.clock.Now,
		Rand:    random.New(seed),
		Logger:  slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: obs.NewMetrics(f.emf, map[string]string{"function": "reclaimer"}, f.clock.Now),
		Sleep:   func(context.Context, time.Duration) error { return nil },
	}
	cfg.Store, cfg.Queue = f.store, f.queue
	if mod != nil {
		mod(&cfg) // may wrap the store or the queue
	}
	return mustNew(t, cfg)
}

func identity(id int64) job.Record {
	return job.Record{JobID: id, Repo: "octo/app", InstallationID: 42, Labels: []string{"self-hosted", "linux"}, Pool: "linux", RunID: 7}
}

// pending creates job id as pending at at.
func (f *fixture) pending(t *testing.T, id int64, at time.Time) job.Record {
	t.Helper()
	r, err := f.store.CreateJob(context.Background(), identity(id), at)
	if err != nil {
		t.Fatalf("CreateJob %d: %v", id, err)
	}
	return r
}

// queued creates job id, its message sent at at and due at due, as the
// webhook's (former) mark-queued write left it.
func (f *fixture) queued(t *testing.T, id int64, at, due time.Time) {
	t.Helper()
	r := f.pending(t, id, at)
	r.State, r.DueAt, r.SweepAt = job.Queued, job.Millis(due), job.Millis(due.Add(timing.QueuedGrace))
	f.store.Put(r)
}

// claiming creates job id and has a claimer take its lease at at until
// until, through the store, as a real claimer would. Its message was due a
// queued grace before at (a backlogged message): the lease keeps queued's
// sweep_at, so the sweep sees the record from at on and only its lease
// decides. leased is the same for a message due at due.
func (f *fixture) claiming(t *testing.T, id int64, at, until time.Time) job.Lease {
	t.Helper()
	return f.leased(t, id, at.Add(-timing.QueuedGrace), at, until)
}

func (f *fixture) leased(t *testing.T, id int64, due, at, until time.Time) job.Lease {
	t.Helper()
	f.queued(t, id, due, due)
	l, _, err := f.store.Acquire(context.Background(), id, 1, "claimer-"+strconv.FormatInt(id, 10), until, at)
	if err != nil {
		t.Fatalf("Acquire %d: %v", id, err)
	}
	return l
}

func (f *fixture) get(t *testing.T, id int64) job.Record {
	t.Helper()
	r, err := f.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get %d: %v", id, err)
	}
	return r
}

func (f *fixture) run(t *testing.T, r *reclaim.Reclaimer) reclaim.Report {
	t.Helper()
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

// TestExpiredLeasesAreRequeuedSpread: M claimers died; one pass puts all M
// back, each record queued at version+1 with due_at spread as Spread says,
// each message delayed to exactly its record's due_at.
func TestExpiredLeasesAreRequeuedSpread(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const m = 20 // W = 30 s, 1.5 s slots
	start := t0.Add(-10 * time.Minute)
	for id := int64(1); id <= m; id++ {
		f.claiming(t, id, start, t0.Add(-time.Second)) // lease ended before now
	}
	rep := f.run(t, f.reclaimer(t, 1, nil))

	if got := rep.Requeued[reclaim.LeaseExpired]; got != m || rep.RequeuedTotal() != m {
		t.Fatalf("requeued %v, want %d lease_expired", rep.Requeued, m)
	}
	if rep.Scanned != m || rep.Raced != 0 || rep.SendFailed != 0 || rep.Incomplete {
		t.Errorf("report %+v, want %d scanned and nothing else", rep, m)
	}
	if got := len(f.messages()); got != m {
		t.Errorf("claims queue holds %d messages, want %d", got, m)
	}
	msgs := f.messages()
	if len(msgs) != m {
		t.Fatalf("sent %d messages, want %d", len(msgs), m)
	}
	var delays []time.Duration
	seen := map[int64]bool{}
	for _, s := range msgs {
		if seen[s.msg.JobID] {
			t.Errorf("job %d sent twice", s.msg.JobID)
		}
		seen[s.msg.JobID] = true
		r := f.get(t, s.msg.JobID)
		if r.State != job.Queued || r.Version != 3 {
			t.Errorf("job %d: state %s version %d, want queued version 3 (acquired at 2, +1)", r.JobID, r.State, r.Version)
		}
		if s.msg.Version != r.Version {
			t.Errorf("job %d: message version %d, want the record's %d", r.JobID, s.msg.Version, r.Version)
		}
		if r.LeaseOwner != "" || r.LeaseExpiresAt != 0 {
			t.Errorf("job %d: lease %q until %d left on a queued record", r.JobID, r.LeaseOwner, r.LeaseExpiresAt)
		}
		due := job.FromMillis(r.DueAt).Sub(t0)
		if due != s.delay || due%time.Second != 0 {
			t.Errorf("job %d: due_at − now = %s, DelaySeconds = %s; want them equal, whole seconds", r.JobID, due, s.delay)
		}
		if want := r.DueAt + timing.QueuedGrace.Milliseconds(); r.SweepAt != want {
			t.Errorf("job %d: sweep_at %d, want due_at + queued grace %d", r.JobID, r.SweepAt, want)
		}
		delays = append(delays, due)
	}
	w := reclaim.Window(m)
	perSecond := map[time.Duration]int{}
	for i, d := range delays {
		if d < 0 || d > w {
			t.Errorf("job %d: delay %s outside [0, %s]", msgs[i].msg.JobID, d, w)
		}
		if perSecond[d]++; perSecond[d] > 3 {
			t.Errorf("%d jobs due at +%s, want ≤ 3", perSecond[d], d)
		}
	}
	if len(perSecond) < int(w/time.Second)/2 {
		t.Errorf("jobs due at %d distinct seconds, want them spread over the %s window", len(perSecond), w)
	}

	// One log line per decision, with the fields an operator queries.
	lines := 0
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if e["msg"] != "reclaim requeued" {
			continue
		}
		lines++
		for _, k := range []string{obs.KeyJobID, obs.KeyReason, obs.KeyVersion, obs.KeyDelay, obs.KeyAttempt} {
			if _, ok := e[k]; !ok {
				t.Errorf("decision line %s lacks %q", l, k)
			}
		}
	}
	if lines != m {
		t.Errorf("%d requeue log lines, want %d", lines, m)
	}
	// Parsed as CloudWatch would: M reclaims with reason lease_expired in
	// pool linux, and the same M in the fleet-wide total the spike alarm
	// reads.
	points := emftest.Parse(t, []byte(f.emf.String()))
	got := emftest.Select(points, reclaim.MetricReclaimed, map[string]string{"reason": string(reclaim.LeaseExpired), "pool": "linux"})
	wantSets := [][]string{{"function"}, {"function", "reason"}, {"function", "pool", "reason"}}
	if len(got) != 1 || got[0].Sum() != float64(m) || !reflect.DeepEqual(got[0].Sets, wantSets) {
		t.Errorf("EMF %s: got %+v, want one point of %d under %v", reclaim.MetricReclaimed, got, m, wantSets)
	}
	if n := emftest.Total(points, reclaim.MetricReclaimed, map[string]string{"function": "reclaimer"}); n != float64(m) {
		t.Errorf("EMF %s fleet-wide: got %v, want %d", reclaim.MetricReclaimed, n, m)
	}
}

// gate makes every reclaimer wait at its first take-back until all of them
// have read the index, so the passes really overlap: both hold the same
// versions and both try every record.
type gate struct {
	reclaim.Store
	arrive *sync.WaitGroup
	once   sync.Once
}

func (g *gate) TakeBack(ctx context.Context, read job.Record, to job.State, due time.Time, reason string, now time.Time) (job.Record, error) {
	g.once.Do(func() { g.arrive.Done(); g.arrive.Wait() })
	return g.Store.TakeBack(ctx, read, to, due, reason, now)
}

// TestOverlappingPassesSendOnce: two reclaimers sweep the same records at
// the same time; exactly M messages go out, never 2M.
func TestOverlappingPassesSendOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const m = 12
	for id := int64(1); id <= m; id++ {
		f.claiming(t, id, t0.Add(-10*time.Minute), t0.Add(-time.Minute))
	}
	var arrive sync.WaitGroup
	arrive.Add(2)
	reps := make([]reclaim.Report, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		r := mustNew(t, reclaim.Config{Store: &gate{Store: f.store, arrive: &arrive}, Queue: f.queue,
			Now: f.clock.Now, Rand: random.New(uint64(i)), Logger: slog.New(slog.DiscardHandler),
		})
		wg.Go(func() { reps[i], errs[i] = r.Run(context.Background()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("reclaimer %d: %v", i, err)
		}
	}
	requeued := reps[0].RequeuedTotal() + reps[1].RequeuedTotal()
	raced := reps[0].Raced + reps[1].Raced
	if requeued != m || raced != m {
		t.Errorf("requeued %d, raced %d in total (reports %+v, %+v); want %d and %d", requeued, raced, reps[0], reps[1], m, m)
	}
	if got := len(f.messages()); got != m {
		t.Errorf("sent %d messages, want %d", got, m)
	}
	if got := len(f.messages()); got != m {
		t.Errorf("claims queue holds %d messages, want %d", got, m)
	}
	for id := int64(1); id <= m; id++ {
		if r := f.get(t, id); r.State != job.Queued || r.Version != 3 {
			t.Errorf("job %d: %s v%d, want queued v3 (taken back once)", id, r.State, r.Version)
		}
	}
}

// TestLateClaimerChangesNothing: a claimer that comes back after its job
// was reclaimed is fenced out; the reclaimed record stays as it is.
func TestLateClaimerChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		write func(*mem.Store, job.Lease) error
	}{
		{name: "finish claimed", write: func(s *mem.Store, l job.Lease) error {
			return s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "linux-1"}, t0.Add(time.Second))
		}},
		{name: "finish failed", write: func(s *mem.Store, l job.Lease) error {
			return s.Finish(ctx, l, job.Outcome{State: job.Failed, Attempt: 1, ErrorClass: "non_retryable", Error: "404"}, t0.Add(time.Second))
		}},
		{name: "release for a retry", write: func(s *mem.Store, l job.Lease) error {
			return s.Release(ctx, l, job.Retry{Version: l.Version + 1, Attempt: 2, FirstFailureAt: t0, Due: t0.Add(time.Minute)}, t0.Add(time.Second))
		}},
		{name: "extend progress", write: func(s *mem.Store, l job.Lease) error {
			return s.Extend(ctx, l, 1, "linux-1", t0.Add(time.Second))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			l := f.claiming(t, 1, t0.Add(-lease-time.Minute), t0.Add(-time.Minute))
			if rep := f.run(t, f.reclaimer(t, 1, nil)); rep.Requeued[reclaim.LeaseExpired] != 1 {
				t.Fatalf("reclaim: %+v, want 1 lease_expired", rep)
			}
			before := f.get(t, 1)
			if err := tt.write(f.store, l); !errors.Is(err, job.ErrLeaseLost) {
				t.Fatalf("late claimer write: got %v, want ErrLeaseLost", err)
			}
			if after := f.get(t, 1); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("record changed by the late claimer:\n got %+v\nwant %+v", after, before)
			}
		})
	}
}

// TestWhatIsStale: stale pending, queued and claiming records come back
// with their reason; healthy and terminal records are not touched.
func TestWhatIsStale(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()

	// Stale.
	f.pending(t, 1, t0.Add(-timing.PendingGrace-time.Second))                   // outbox send lost
	f.queued(t, 2, t0.Add(-time.Hour), t0.Add(-timing.QueuedGrace-time.Second)) // message lost
	f.claiming(t, 3, t0.Add(-lease-time.Minute), t0.Add(-time.Millisecond))     // claimer died
	// Healthy.
	f.pending(t, 11, t0.Add(-timing.PendingGrace+time.Second))                   // within grace
	f.queued(t, 12, t0.Add(-time.Hour), t0.Add(-timing.QueuedGrace+time.Second)) // before due + grace
	f.queued(t, 13, t0, t0.Add(5*time.Minute))                                   // before due
	f.leased(t, 14, t0.Add(-time.Minute), t0.Add(-time.Minute), t0.Add(lease))   // live lease
	f.leased(t, 15, t0.Add(-lease), t0.Add(-lease), t0.Add(-time.Millisecond))   // dead claimer, its stale-from moment not come yet
	// Live leases the sweep finds (backlogged messages): postponed.
	f.claiming(t, 16, t0.Add(-time.Minute), t0.Add(lease))
	f.claiming(t, 17, t0.Add(-lease), t0) // lease ends exactly now: still live
	// Terminal, or claimed within its runner-start grace.
	l := f.claiming(t, 21, t0.Add(-time.Hour), t0.Add(-50*time.Minute))
	if err := f.store.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "linux-21", RunnerStartGrace: 2 * time.Hour}, t0.Add(-55*time.Minute)); err != nil {
		t.Fatalf("Finish 21: %v", err)
	}
	f.pending(t, 22, t0.Add(-time.Hour))
	if _, err := f.store.MarkDone(ctx, job.Report{JobID: 22, Repo: "octo/app"}, t0.Add(-59*time.Minute)); err != nil {
		t.Fatalf("MarkDone 22: %v", err)
	}
	if _, err := f.store.MarkDone(ctx, job.Report{JobID: 23, Repo: "octo/app"}, t0.Add(-time.Hour)); err != nil {
		t.Fatalf("MarkDone 23: %v", err)
	}
	untouched := map[int64]job.Record{}
	for _, id := range []int64{11, 12, 13, 14, 15, 21, 22, 23} {
		untouched[id] = f.get(t, id)
	}

	rep := f.run(t, f.reclaimer(t, 1, nil))

	want := map[reclaim.Reason]int{reclaim.OutboxLost: 1, reclaim.MessageLost: 1, reclaim.LeaseExpired: 1}
	if fmt.Sprint(rep.Requeued) != fmt.Sprint(want) || rep.Scanned != 5 || rep.Postponed != 2 {
		t.Errorf("report %+v, want requeued %v and 2 postponed out of 5 scanned", rep, want)
	}
	for _, id := range []int64{16, 17} {
		if r := f.get(t, id); r.State != job.Claiming || r.Version != 2 || r.SweepAt != r.LeaseExpiresAt {
			t.Errorf("job %d: %s v%d sweep_at %d, want claiming v2 with sweep_at at its lease's expiry %d", id, r.State, r.Version, r.SweepAt, r.LeaseExpiresAt)
		}
	}
	got := map[int64]job.Message{}
	for _, s := range f.messages() {
		got[s.msg.JobID] = s.msg
	}
	wantMsgs := map[int64]job.Message{
		1: {JobID: 1, Version: 2},
		2: {JobID: 2, Version: 2},
		3: {JobID: 3, Version: 3},
	}
	if fmt.Sprint(got) != fmt.Sprint(wantMsgs) {
		t.Errorf("sent %v, want %v", got, wantMsgs)
	}
	for id, before := range untouched {
		if after := f.get(t, id); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("job %d touched:\n got %+v\nwant %+v", id, after, before)
		}
	}
}

// TestLiveLeaseIsPostponed: the lease write leaves sweep_at where queued
// put it, so a sweep can find a claiming record whose lease runs on. The
// lease wins: nothing is sent, and sweep_at moves to the lease's expiry
// (nothing else changes), so later passes do not read it again until then
// and the first pass after the expiry takes it back.
func TestLiveLeaseIsPostponed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	l := f.claiming(t, 1, t0.Add(-time.Minute), t0.Add(lease))
	before := f.get(t, 1)
	if before.SweepAt >= job.Millis(t0) {
		t.Fatalf("set-up: sweep_at %d, want it passed at %d", before.SweepAt, job.Millis(t0))
	}
	rep := f.run(t, f.reclaimer(t, 1, nil))
	if rep.Scanned != 1 || rep.Postponed != 1 || rep.Skipped != 0 || rep.RequeuedTotal() != 0 {
		t.Errorf("report %+v, want 1 scanned and postponed", rep)
	}
	after := f.get(t, 1)
	if after.SweepAt != job.Millis(l.Expires) {
		t.Errorf("sweep_at %d, want the lease's expiry %d", after.SweepAt, job.Millis(l.Expires))
	}
	after.SweepAt = before.SweepAt
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("record changed beyond sweep_at:\n got %+v\nwant %+v", after, before)
	}
	if n := len(f.messages()); n != 0 {
		t.Errorf("sent %d messages, want none", n)
	}

	for _, at := range []time.Time{t0.Add(time.Minute), l.Expires} { // up to the expiry itself: not read again
		f.clock.Set(at)
		if rep := f.run(t, f.reclaimer(t, 2, nil)); rep.Scanned != 0 {
			t.Errorf("pass at +%s: %+v, want nothing read before the lease ends", at.Sub(t0), rep)
		}
	}
	f.clock.Set(l.Expires.Add(time.Millisecond))
	if rep := f.run(t, f.reclaimer(t, 3, nil)); rep.Requeued[reclaim.LeaseExpired] != 1 {
		t.Errorf("pass after the expiry: %+v, want 1 lease_expired", rep)
	}
	if r := f.get(t, 1); r.State != job.Queued || r.Version != 3 {
		t.Errorf("job 1: %s v%d, want queued v3", r.State, r.Version)
	}
}

// TestPostponeLosesToTheClaimer: a claimer that finishes between the
// sweep's read and its postpone keeps what it wrote.
func TestPostponeLosesToTheClaimer(t *testing.T) {
	t.Parallel()
	f := setup(t)
	l := f.claiming(t, 1, t0.Add(-time.Minute), t0.Add(lease))
	st := &finishFirst{Store: f.store, finish: func() error {
		return f.store.Finish(context.Background(), l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "linux-1"}, t0)
	}}
	r := mustNew(t, reclaim.Config{Store: st, Queue: f.queue, Now: f.clock.Now, Rand: random.New(1), Logger: slog.New(slog.DiscardHandler)})
	rep := f.run(t, r)
	if rep.Postponed != 0 || rep.Skipped != 1 || rep.Failed != 0 {
		t.Errorf("report %+v, want the postpone skipped, not failed", rep)
	}
	if got := f.get(t, 1); got.State != job.Claimed || got.SweepAt != job.Millis(t0.Add(job.DefaultRunnerStartGrace)) {
		t.Errorf("job 1: %s sweep_at %d, want claimed with the claimer's sweep_at", got.State, got.SweepAt)
	}
}

// finishFirst runs finish just before the first Postpone.
type finishFirst struct {
	reclaim.Store
	finish func() error
}

func (s *finishFirst) Postpone(ctx context.Context, read job.Record, until time.Time) (job.Record, error) {
	if err := s.finish(); err != nil {
		return job.Record{}, err
	}
	return s.Store.Postpone(ctx, read, until)
}

// TestMaxAge: a record failing for longer than MaxAge is abandoned, with no
// message; one still within MaxAge is re-sent keeping its ladder position.
func TestMaxAge(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	maxAge := 90 * time.Minute
	retry := func(id int64, firstFailure time.Time, attempt int) {
		t.Helper()
		at := t0.Add(-3 * time.Hour)
		l := f.claiming(t, id, at, at.Add(lease))
		// The claimer re-sent the message and released; then it was lost.
		err := f.store.Release(ctx, l, job.Retry{
			Version: l.Version + 1, Attempt: attempt, FirstFailureAt: firstFailure,
			Due: t0.Add(-timing.QueuedGrace - time.Minute), ErrorClass: "server_side", Error: "502",
		}, at.Add(time.Minute))
		if err != nil {
			t.Fatalf("Release %d: %v", id, err)
		}
	}
	retry(1, t0.Add(-maxAge-time.Second), 9) // too old
	retry(2, t0.Add(-maxAge+time.Minute), 7) // still within
	// A claimer that died on a job already past max age.
	old := t0.Add(-2 * time.Hour)
	l := f.claiming(t, 3, old, old.Add(lease))
	if err := f.store.Release(ctx, l, job.Retry{Version: l.Version + 1, Attempt: 4, FirstFailureAt: old, Due: old.Add(time.Minute)}, old.Add(time.Second)); err != nil {
		t.Fatalf("Release 3: %v", err)
	}
	if _, _, err := f.store.Acquire(ctx, 3, l.Version+1, "claimer-3b", old.Add(2*time.Minute), old.Add(time.Minute)); err != nil {
		t.Fatalf("Acquire 3 again: %v", err)
	}

	rep := f.run(t, f.reclaimer(t, 1, func(c *reclaim.Config) { c.MaxAge = maxAge }))

	if rep.Abandoned != 2 || rep.RequeuedTotal() != 1 {
		t.Errorf("report %+v, want 2 abandoned, 1 requeued", rep)
	}
	for _, id := range []int64{1, 3} {
		r := f.get(t, id)
		if r.State != job.Abandoned || r.SweepAt != 0 || r.SweepShard != "" || r.ExpiresAt == 0 || !strings.Contains(r.LastError, "max age") {
			t.Errorf("job %d: %+v, want abandoned, out of the sweep index, with a TTL and a max-age reason", id, r)
		}
	}
	msgs := f.messages()
	if len(msgs) != 1 || msgs[0].msg.JobID != 2 {
		t.Fatalf("sent %v, want only job 2's message", msgs)
	}
	r := f.get(t, 2)
	if msgs[0].msg.Attempt != 7 || r.Attempt != 7 || r.FirstFailureAt != job.Millis(t0.Add(-maxAge+time.Minute)) {
		t.Errorf("job 2: message attempt %d, record attempt %d first_failure_at %d; want the ladder kept (7, %d)",
			msgs[0].msg.Attempt, r.Attempt, r.FirstFailureAt, job.Millis(t0.Add(-maxAge+time.Minute)))
	}
	if got := len(f.messages()); got != 1 {
		t.Errorf("claims queue holds %d messages, want 1", got)
	}
}

// TestSendFailureIsNotALoss: the take-back is durable before the send; when
// the send fails the record waits as queued and the sweep after the queued
// grace sends it.
func TestSendFailureIsNotALoss(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const m = 3
	for id := int64(1); id <= m; id++ {
		f.claiming(t, id, t0.Add(-10*time.Minute), t0.Add(-time.Minute))
	}
	f.setFail(errors.New("sqs: service unavailable"))
	rep, err := f.reclaimer(t, 1, nil).Run(context.Background())
	if err != nil {
		t.Fatalf("Run with SQS down: got %v, want nil (the records are safe)", err)
	}
	if rep.SendFailed != m || rep.RequeuedTotal() != 0 {
		t.Errorf("report %+v, want %d send failures", rep, m)
	}
	for id := int64(1); id <= m; id++ {
		if r := f.get(t, id); r.State != job.Queued || r.Version != 3 || r.DueAt == 0 {
			t.Errorf("job %d: %s v%d due %d, want queued v3 with a due_at", id, r.State, r.Version, r.DueAt)
		}
	}
	f.setFail(nil)
	f.clock.Set(t0.Add(time.Minute))
	if rep := f.run(t, f.reclaimer(t, 2, nil)); rep.Scanned != 0 {
		t.Errorf("a minute later: %+v, want nothing stale yet (queued grace)", rep)
	}
	f.clock.Set(t0.Add(reclaim.Window(m) + timing.QueuedGrace + time.Second))
	if rep := f.run(t, f.reclaimer(t, 3, nil)); rep.Requeued[reclaim.MessageLost] != m {
		t.Errorf("after the queued grace: %+v, want %d message_lost", rep, m)
	}
	if got := len(f.messages()); got != m {
		t.Errorf("claims queue holds %d messages, want %d", got, m)
	}
	for _, s := range f.messages() {
		if s.msg.Version != 4 {
			t.Errorf("job %d: message version %d, want 4", s.msg.JobID, s.msg.Version)
		}
	}
}

// TestDeadClaimerBackInTime: a claim whose claimer died is back in the
// queue (its message due) at most one schedule period + 30 s after the later
// of its record's stale-from moment (the sweep_at the lease kept: its
// message's due_at + queued grace, or creation + pending grace) and the
// lease's expiry, whatever the phase of the schedule.
func TestDeadClaimerBackInTime(t *testing.T) {
	t.Parallel()
	const period = time.Minute // ReclaimSchedule: rate(1 minute)
	death := t0
	expiry := death.Add(lease)
	fresh := death.Add(timing.QueuedGrace) // a message leased as soon as it was due
	tests := []struct {
		name      string
		m         int64
		kick      time.Time // first reclaimer run
		backlog   bool      // the message waited out the queued grace before the lease
		pending   bool      // a fast claimer leased the record while still pending
		staleFrom time.Time
	}{
		{name: "one job, a run exactly at its stale-from moment", m: 1, kick: fresh, staleFrom: fresh},
		{name: "one job, runs out of phase", m: 1, kick: death.Add(17 * time.Second), staleFrom: fresh},
		{name: "one pending job, runs out of phase", m: 1, kick: death.Add(29 * time.Second), pending: true, staleFrom: death.Add(timing.PendingGrace)},
		{name: "backlog, one job, a run exactly at lease expiry", m: 1, kick: expiry, backlog: true, staleFrom: expiry},
		{name: "backlog, one job, a run just before expiry", m: 1, kick: expiry.Add(-time.Millisecond), backlog: true, staleFrom: expiry},
		{name: "backlog, one job, a run just after expiry", m: 1, kick: expiry.Add(time.Millisecond), backlog: true, staleFrom: expiry},
		{name: "backlog, one job, runs out of phase", m: 1, kick: death.Add(17 * time.Second), backlog: true, staleFrom: expiry},
		{name: "forty jobs, runs out of phase", m: 40, kick: death.Add(43 * time.Second), staleFrom: fresh},
		{name: "backlog, forty jobs, a run exactly at lease expiry", m: 40, kick: expiry, backlog: true, staleFrom: expiry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			for id := int64(1); id <= tt.m; id++ {
				switch { // the claimer dies right after taking the lease
				case tt.backlog:
					f.claiming(t, id, death, expiry)
				case tt.pending:
					f.pending(t, id, death)
					if _, _, err := f.store.Acquire(context.Background(), id, 1, "fast", expiry, death); err != nil {
						t.Fatal(err)
					}
				default:
					f.leased(t, id, death, death, expiry)
				}
			}
			deadline := tt.staleFrom.Add(period + reclaim.MaxWindow)
			requeued := 0
			for now := tt.kick; requeued < int(tt.m); now = now.Add(period) {
				if now.After(deadline) {
					t.Fatalf("only %d of %d back by %s", requeued, tt.m, now.Sub(death))
				}
				f.clock.Set(now)
				requeued += f.run(t, f.reclaimer(t, uint64(now.Unix()), nil)).RequeuedTotal()
			}
			msgs := f.messages()
			if len(msgs) != int(tt.m) {
				t.Fatalf("sent %d messages, want %d", len(msgs), tt.m)
			}
			for _, s := range msgs {
				r := f.get(t, s.msg.JobID)
				if due := job.FromMillis(r.DueAt); due.After(deadline) {
					t.Errorf("job %d due %s after death, want ≤ %s", r.JobID, due.Sub(death), deadline.Sub(death))
				}
			}
		})
	}
}

// statCounter counts Stale calls per shard.
type statCounter struct {
	reclaim.Store
	mu    sync.Mutex
	calls map[string]int
}

func (s *statCounter) Stale(ctx context.Context, shard string, now time.Time, limit int32, start string) (job.Page, error) {
	s.mu.Lock()
	s.calls[shard]++
	s.mu.Unlock()
	return s.Store.Stale(ctx, shard, now, limit, start)
}

// TestShardsAndPaging: records in every shard are found, through several
// pages per shard with a small page size.
func TestShardsAndPaging(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const m = 29 // ids 1…29 cover the 8 default shards 3–4 times each
	for id := int64(1); id <= m; id++ {
		f.pending(t, id, t0.Add(-time.Hour))
	}
	counter := &statCounter{Store: f.store, calls: map[string]int{}}
	r := mustNew(t, reclaim.Config{Store: counter, Queue: f.queue,
		Now: f.clock.Now, Rand: random.New(1), Logger: slog.New(slog.DiscardHandler), PageSize: 2,
	})
	rep := f.run(t, r)
	if rep.Scanned != m || rep.Requeued[reclaim.OutboxLost] != m || rep.Incomplete {
		t.Errorf("report %+v, want all %d outbox_lost", rep, m)
	}
	for _, sh := range job.ShardKeys(timing.Shards) {
		if n := counter.calls[sh]; n < 2 {
			t.Errorf("shard %s: %d page(s), want ≥ 2 with page size 2", sh, n)
		}
	}
	if got := len(counter.calls) - timing.Shards; got != reclaim.StraysPerPass {
		t.Errorf("queried shards %v: %d above the %d configured, want StraysPerPass %d", counter.calls, got, timing.Shards, reclaim.StraysPerPass)
	}
	if got := len(f.messages()); got != m {
		t.Errorf("claims queue holds %d messages, want %d", got, m)
	}
}

// steppingClock is a clock that each reading moves on by step.
func steppingClock(start time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	now := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

// TestBoundedPasses: a pass stops at MaxRecords, or at its budget, and says
// so; the next passes finish the backlog with every job sent exactly once.
func TestBoundedPasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mod    func(*reclaim.Config)
		ticker time.Duration // how far the clock moves at each reading
	}{
		{name: "max records", mod: func(c *reclaim.Config) { c.MaxRecords = 5 }},
		{name: "budget", mod: func(c *reclaim.Config) { c.Budget = 20 * time.Second; c.PageSize = 1 }, ticker: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			const m = 12
			for id := int64(1); id <= m; id++ {
				f.pending(t, id, t0.Add(-time.Hour))
			}
			tick := steppingClock(t0, tt.ticker)
			passes, total := 0, 0
			for total < m {
				if passes++; passes > 12 {
					t.Fatalf("%d passes and %d of %d sent", passes, total, m)
				}
				r := f.reclaimer(t, uint64(passes), func(c *reclaim.Config) { tt.mod(c); c.Now = tick })
				rep := f.run(t, r)
				total += rep.RequeuedTotal()
				if passes == 1 && (!rep.Incomplete || rep.RequeuedTotal() == 0 || rep.RequeuedTotal() == m) {
					t.Fatalf("first pass %+v, want an incomplete pass that still sent some", rep)
				}
			}
			if passes < 2 {
				t.Errorf("%d pass(es), want the backlog split over several", passes)
			}
			if got := len(f.messages()); got != m {
				t.Errorf("sent %d messages, want %d", got, m)
			}
			for id := int64(1); id <= m; id++ {
				if r := f.get(t, id); r.Version != 2 {
					t.Errorf("job %d: version %d, want 2 (taken back once)", id, r.Version)
				}
			}
		})
	}
}

// TestNearDeadline: with less time left in the invocation than the reserve,
// a pass does nothing and says it is incomplete.
func TestNearDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.pending(t, 1, t0.Add(-time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := f.reclaimer(t, 1, func(c *reclaim.Config) { c.Reserve = 2 * time.Minute }).Run(ctx)
	if err != nil || !rep.Incomplete || rep.Scanned != 0 {
		t.Errorf("Run: %+v, %v; want an incomplete pass that read nothing", rep, err)
	}
	if r := f.get(t, 1); r.State != job.Pending || r.Version != 1 {
		t.Errorf("job 1: %s v%d, want untouched", r.State, r.Version)
	}
}

// brokenStale fails every index read, as a throttled or missing table would.
type brokenStale struct{ reclaim.Store }

func (brokenStale) Stale(context.Context, string, time.Time, int32, string) (job.Page, error) {
	// An upstream text quoting a credential, as a proxy's may.
	return job.Page{}, errors.New("ResourceNotFoundException: table gone (Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiI3In0.c2lnbmF0dXJl)")
}

// TestHandle: the scheduled event of events/schedule.json runs one pass;
// the handler fails only when the table cannot be read, with the error's
// text redacted (Lambda logs it as it is).
func TestHandle(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../events/schedule.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("decode events/schedule.json: %v", err)
	}
	f := setup(t)
	f.pending(t, 1, t0.Add(-time.Hour))
	tests := []struct {
		name    string
		store   reclaim.Store
		wantErr bool
		wantMsg int
	}{
		{name: "broken table", store: brokenStale{f.store}, wantErr: true, wantMsg: 0},
		{name: "healthy", store: f.store, wantErr: false, wantMsg: 1},
	}
	for _, tt := range tests { // sequential, in order: the first leaves job 1 stale
		t.Run(tt.name, func(t *testing.T) {
			r := mustNew(t, reclaim.Config{Store: tt.store, Queue: f.queue, Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)})
			err := r.Handle(context.Background(), ev)
			if (err != nil) != tt.wantErr {
				t.Errorf("Handle = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "eyJ") || !strings.Contains(err.Error(), "table gone")) {
				t.Errorf("Handle = %q, want the cause named and the JWT redacted", err)
			}
			if got := len(f.messages()); got != tt.wantMsg {
				t.Errorf("%d messages sent, want %d", got, tt.wantMsg)
			}
		})
	}
}

// TestClaimerThatAlwaysDiesIsAbandoned: a claimer that dies holding the
// lease on every attempt (a poison job: it crashes or times out the
// function before it can record a failure) never writes first_failure_at.
// The reclaimer's take-back of the expired lease is that failure: without
// it the job loops claimer → death → reclaimer forever, one GitHub call
// every few minutes, and max age never ends it.
func TestClaimerThatAlwaysDiesIsAbandoned(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const maxAge = 90 * time.Minute
	const period = time.Minute
	f.queued(t, 1, t0, t0)
	firstDeath := t0
	// Abandoned by the first pass after max age from the first take-back;
	// each death is found a queued grace after its message was due (the
	// lease keeps queued's sweep_at).
	deadline := firstDeath.Add(timing.QueuedGrace + period + maxAge + timing.QueuedGrace + period)
	now := firstDeath
	for i := 0; ; i++ {
		r := f.get(t, 1)
		if r.State.Terminal() {
			if r.State != job.Abandoned || r.ExpiresAt == 0 || r.SweepAt != 0 {
				t.Fatalf("job ended %s (expires_at %d, sweep_at %d), want abandoned with a TTL, out of the index", r.State, r.ExpiresAt, r.SweepAt)
			}
			break
		}
		if now.After(deadline) {
			t.Fatalf("after %d steps and %s the job is still %s v%d (first_failure_at %d): it loops forever",
				i, now.Sub(firstDeath), r.State, r.Version, r.FirstFailureAt)
		}
		if r.State == job.Queued {
			// A claimer takes the message as soon as it is due and dies.
			at := now
			if due := job.FromMillis(r.DueAt); due.After(at) {
				at = due
			}
			if _, _, err := f.store.Acquire(ctx, 1, r.Version, fmt.Sprintf("claimer-%d", i), at.Add(lease), at); err != nil {
				t.Fatalf("death %d: Acquire v%d: %v", i, r.Version, err)
			}
			now = at
		}
		now = now.Add(period)
		f.clock.Set(now)
		f.run(t, f.reclaimer(t, uint64(i), func(c *reclaim.Config) { c.MaxAge = maxAge }))
	}
}

// mustNew returns a reclaimer over cfg, failing t when New refuses it.
func mustNew(t *testing.T, cfg reclaim.Config) *reclaim.Reclaimer {
	t.Helper()
	r, err := reclaim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// staleFailsOnce fails the first page read of the sweep index, whichever
// shard it is.
type staleFailsOnce struct {
	reclaim.Store
	mu     sync.Mutex
	failed string
}

func (s *staleFailsOnce) Stale(ctx context.Context, shard string, now time.Time, limit int32, cursor string) (job.Page, error) {
	s.mu.Lock()
	first := s.failed == ""
	if first {
		s.failed = shard
	}
	s.mu.Unlock()
	if first {
		return job.Page{}, errors.New("query sweep shard: connection reset")
	}
	return s.Store.Stale(ctx, shard, now, limit, cursor)
}

// TestFailedShardLeavesTheOthers: a page of the sweep index that cannot be
// read costs its shard this pass, not the pass: every other shard's stale
// records are taken back. Before, the first failed page ended the
// collection, and at 20 % faults most passes read two or three shards
// (make chaos).
func TestFailedShardLeavesTheOthers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const m = 40
	for id := int64(1); id <= m; id++ {
		f.claiming(t, id, t0.Add(-10*time.Minute), t0.Add(-time.Second))
	}
	st := &staleFailsOnce{Store: f.store}
	rep, err := mustNew(t, reclaim.Config{Store: st, Queue: f.queue,
		Now: f.clock.Now, Rand: random.New(1), Logger: slog.New(slog.DiscardHandler),
	}).Run(context.Background())
	if err == nil || !rep.Incomplete {
		t.Errorf("Run: %v, incomplete %v; want the failed page reported, the pass incomplete", err, rep.Incomplete)
	}
	want := map[int64]bool{}
	for id := int64(1); id <= m; id++ {
		if job.Shard(id, len(f.store.Shards())) != st.failed {
			want[id] = true
		}
	}
	if len(want) == 0 || len(want) == m {
		t.Fatalf("%d of %d jobs outside the failed shard %s: the test proves nothing", len(want), m, st.failed)
	}
	got := map[int64]bool{}
	for _, s := range f.messages() {
		got[s.msg.JobID] = true
	}
	for id := range want {
		if !got[id] {
			t.Errorf("job %d (shard %s) not taken back", id, job.Shard(id, len(f.store.Shards())))
		}
	}
	if len(got) != len(want) {
		t.Errorf("taken back %d jobs, want the %d outside shard %s", len(got), len(want), st.failed)
	}
}

// TestStrayShardsAreSwept: a record written when SWEEP_SHARDS was higher
// keeps its old shard, above today's count. The passes visit those
// shards in turn, StraysPerPass at a time, so it is found within one round
// of them and taken back, which moves it to its shard under today's
// count; before, no pass ever read it and its job waited forever.
func TestStrayShardsAreSwept(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const id = 43
	r := f.pending(t, id, t0.Add(-time.Hour))
	r.SweepShard = "59" // job_id mod 64: written under SWEEP_SHARDS=64
	f.store.Put(r)
	rc := mustNew(t, reclaim.Config{Store: f.store, Queue: f.queue, Now: f.clock.Now, Rand: random.New(3), Logger: slog.New(slog.DiscardHandler)})
	round := (job.MaxShards - timing.Shards + reclaim.StraysPerPass - 1) / reclaim.StraysPerPass
	passes := 0
	for passes < round && len(f.messages()) == 0 {
		passes++
		rep := f.run(t, rc)
		if rep.Strays != rep.Scanned {
			t.Fatalf("pass %d: %d scanned, %d of them strays; want the one record, a stray", passes, rep.Scanned, rep.Strays)
		}
	}
	if len(f.messages()) != 1 {
		t.Fatalf("after %d passes (a round of the strays) the record was not taken back", passes)
	}
	got, err := f.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != job.Queued || got.SweepShard != job.Shard(id, timing.Shards) {
		t.Errorf("record %s in shard %q, want queued in shard %q", got.State, got.SweepShard, job.Shard(id, timing.Shards))
	}
}

// TestLargePassCutShortSendsWhatItTookBack: a pass of more than HoldUpTo
// candidates takes them all back before it plans its sends; its budget
// ends in the middle of the take-backs. Every job it took back is sent by
// that pass (one left queued without its message would wait the queued
// grace for the sweep), the others are left untouched for the next pass,
// and the passes together send each job once.
func TestLargePassCutShortSendsWhatItTookBack(t *testing.T) {
	t.Parallel()
	// The budget, in clock readings: cut after 50 take-backs (the pass
	// then plans again for HoldUpTo or fewer), or after 70.
	for _, budget := range []time.Duration{12 * time.Second, 16 * time.Second} {
		t.Run(budget.String(), func(t *testing.T) {
			t.Parallel()
			largePassCutShort(t, budget)
		})
	}
}

func largePassCutShort(t *testing.T, budget time.Duration) {
	f := setup(t)
	const m = 130
	for id := int64(1); id <= m; id++ {
		f.pending(t, id, t0.Add(-time.Hour))
	}
	tick := steppingClock(t0, time.Second)
	seen := map[int64]bool{}
	for pass := 1; len(seen) < m; pass++ {
		if pass > 10 {
			t.Fatalf("%d passes and %d of %d sent", pass, len(seen), m)
		}
		before := len(f.messages())
		r := f.reclaimer(t, uint64(pass), func(c *reclaim.Config) { c.Budget = 18 * time.Second; c.Now = tick })
		rep := f.run(t, r)
		batch := f.messages()[before:]
		taken := 0
		for id := int64(1); id <= m; id++ {
			if rec := f.get(t, id); rec.Version == 2 && !seen[id] {
				taken++
			}
		}
		for _, s := range batch {
			if seen[s.msg.JobID] {
				t.Fatalf("pass %d: job %d sent twice", pass, s.msg.JobID)
			}
			seen[s.msg.JobID] = true
		}
		if taken != len(batch) || rep.RequeuedTotal() != len(batch) {
			t.Fatalf("pass %d (%+v): took back %d jobs, sent %d; want every job taken back sent", pass, rep, taken, len(batch))
		}
		if pass == 1 && (!rep.Incomplete || len(batch) == 0 || len(batch) == m) {
			t.Fatalf("pass 1 %+v sent %d: want a pass of %d candidates cut short by its budget", rep, len(batch), m)
		}
	}
}

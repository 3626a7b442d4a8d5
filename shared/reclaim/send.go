package reclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/random"
)

// HoldUpTo is the largest pass whose batches are held to the schedule's
// second boundaries (at most one hold of < 1 s per batch of ten: ≤ 6 s for
// 60 jobs). Larger passes (a backlog after an outage, W = 30 s) send their
// batches back to back: holding 100 batches would outlast the budget.
//
// A pass's size is the number of jobs it takes back, which a pass of more
// than HoldUpTo candidates learns only by trying: a late claimer or a
// second reclaimer may win some of them. Such a pass takes candidates back
// before it sends until it has won more than HoldUpTo, and plans again if
// it never does (send), so the bound holds for what it sends.
const HoldUpTo = 60

// planned is one job's place in a pass's schedule: it is due sec whole
// seconds after the schedule's origin. taken: its record is taken back
// already (c.rec is the record as written).
type planned struct {
	c     candidate
	sec   int64
	taken bool
}

// plan places the jobs of a pass on whole seconds: Spread's delay rounded
// up (a job is never early), in ascending order so batches go out in the
// order their messages are due.
func plan(requeue []candidate, rnd random.Source) []planned {
	delays := Spread(len(requeue), rnd)
	out := make([]planned, len(requeue))
	for i, c := range requeue {
		out[i] = planned{c: c, sec: int64((delays[i] + time.Second - 1) / time.Second)}
	}
	slices.SortStableFunc(out, func(a, b planned) int { return int(a.sec - b.sec) })
	return out
}

// send takes back and sends the jobs of requeue, a batch of ten at a time,
// and reports false when it stopped early (budget or deadline).
//
// A message becomes visible at the instant SQS got it plus a whole number
// of seconds, so the slots must be whole seconds of one clock: the origin
// is the first batch's send instant, every later batch is held to a whole
// second after it (HoldUpTo) and its delays are counted from there. Every
// message then lands on origin + an integer, and a 1 s window holds one
// such instant: ≤ 3 jobs (Spread's bound after rounding). A batch that
// comes later than its first slot (slow calls) pushes the rest of the
// schedule back by whole seconds (lag) rather than piling up at delay 0.
//
// SQS stamps a batch when the request reaches it: somewhere between the
// call's start and its answer, which differs from batch to batch. So the
// seconds of two consecutive batches are not the same instants: a second s
// of the batch before, whose stamp may come as late as its call's length
// after its slot, shares a 1 s window with a second t of this batch when
// t - s < 1 + that length. Where such a pair would hold more than 3 jobs,
// this batch moves on by whole seconds (lag) until none does.
//
// The bound is the pass's M, the jobs it takes back and sends. Up to
// HoldUpTo candidates, each batch is taken back just before it is sent: a
// lost race only thins the plan out, and a pass cut short leaves the
// candidates it did not reach untouched for the next pass. Past HoldUpTo,
// the plan of all the candidates (W = 30 s, its seconds not held) would
// crowd a second with 4 to 6 of them if races left HoldUpTo or fewer, so
// candidates are taken back first (takeBackUntil) until more than HoldUpTo
// are won: then M is past the bound and the rest go batch by batch as
// above; if it never happens, the ones won are planned again, with
// Spread's own density and holds. Jobs taken back are sent whatever the
// time (left, they would wait QueuedGrace for the sweep): at most
// HoldUpTo + MaxBatch of them. Their due_at, written by the take-back
// from the first plan, may differ from their message's arrival by up to
// that plan's W: the sweep looks for a lost message only QueuedGrace past
// due_at.
func (r *Reclaimer) send(ctx context.Context, now, stop time.Time, requeue []candidate, rep *Report, errs *[]error) bool {
	jobs := plan(requeue, r.cfg.Rand)
	hold, complete := len(jobs) <= HoldUpTo, true
	if !hold {
		var won []planned
		var next int
		won, next, complete = r.takeBackUntil(ctx, now, stop, jobs, rep, errs)
		if len(won) <= HoldUpTo {
			cs := make([]candidate, len(won))
			for i, p := range won {
				cs[i] = p.c
			}
			jobs, hold = plan(cs, r.cfg.Rand), true
			for i := range jobs {
				jobs[i].taken = true
			}
		} else {
			// Both in the plan's order: won is part of jobs[:next].
			jobs = append(won, jobs[next:]...)
		}
	}
	var origin time.Time        // the first send's instant; zero until then
	var lag int64               // whole seconds the schedule slipped
	var sentBatches []sentBatch // every batch sent so far: jobs by second, and its call's length past its slot
	for start := 0; start < len(jobs); start += MaxBatch {
		batch := jobs[start:min(start+MaxBatch, len(jobs))]
		// Jobs taken back already are sent whatever the time (they come
		// first): left, they would wait QueuedGrace for the sweep.
		if !batch[0].taken && r.past(ctx, stop) {
			return false
		}
		base := origin
		if base.IsZero() {
			base = now
		}
		var ready []planned
		for _, p := range batch {
			if !p.taken {
				due := base.Add(time.Duration(p.sec+lag) * time.Second)
				rec, ok := r.takeBackPlanned(ctx, p, due, now, rep, errs)
				if !ok {
					continue
				}
				p.c.rec = rec
			}
			ready = append(ready, p)
		}
		if len(ready) == 0 {
			continue
		}
		msgs := make([]job.Message, len(ready))
		for i, p := range ready {
			msgs[i] = job.Message{JobID: p.c.rec.JobID, Version: p.c.rec.Version, Attempt: p.c.rec.Attempt}
		}
		at := r.cfg.Now()
		var e int64 // whole seconds from origin to this send
		if origin.IsZero() {
			origin = at
		} else {
			elapsed := at.Sub(origin)
			e = int64(elapsed / time.Second)
			if hold && elapsed%time.Second != 0 {
				e++
				// A cancelled wait sends at once: the send then fails
				// with the context and the records wait for the next sweep.
				_ = r.cfg.Sleep(ctx, origin.Add(time.Duration(e)*time.Second).Sub(at))
			}
		}
		lag = max(lag, e-ready[0].sec)
		for hold && crowded(sentBatches, ready, lag) {
			lag++
		}
		delays := make([]time.Duration, len(ready))
		cur := map[int64]int{}
		for i, p := range ready {
			delays[i] = time.Duration(p.sec+lag-e) * time.Second
			cur[p.sec+lag]++
		}
		results := r.cfg.Queue.SendBatch(ctx, msgs, delays)
		sentBatches = append(sentBatches, sentBatch{secs: cur, length: r.cfg.Now().Sub(origin.Add(time.Duration(e) * time.Second))})
		for i, err := range results {
			r.sent(ctx, ready[i].c, msgs[i].Version, delays[i], err, rep)
		}
	}
	return complete
}

// takeBackUntil takes back the jobs of a pass of more than HoldUpTo
// candidates, in the plan's order, a batch of ten at a time, each due at
// its second of the plan from now, until it has won more than HoldUpTo
// (the pass's M is then past the bound), the candidates run out, or the
// budget does. It returns the ones won (taken, their records as written),
// the index in jobs of the first candidate not tried, and false when the
// budget cut it short: the candidates it did not reach wait, untouched.
func (r *Reclaimer) takeBackUntil(ctx context.Context, now, stop time.Time, jobs []planned, rep *Report, errs *[]error) ([]planned, int, bool) {
	var won []planned
	for start := 0; start < len(jobs); start += MaxBatch {
		if len(won) > HoldUpTo {
			return won, start, true
		}
		if r.past(ctx, stop) {
			return won, start, false
		}
		for _, p := range jobs[start:min(start+MaxBatch, len(jobs))] {
			if rec, ok := r.takeBackPlanned(ctx, p, now.Add(time.Duration(p.sec)*time.Second), now, rep, errs); ok {
				p.c.rec, p.taken = rec, true
				won = append(won, p)
			}
		}
	}
	return won, len(jobs), true
}

// takeBackPlanned takes back p's job to queued, due at due. The whole
// record (attempt included) comes from the take-back: the index carries
// only what the sweep decides on.
func (r *Reclaimer) takeBackPlanned(ctx context.Context, p planned, due, now time.Time, rep *Report, errs *[]error) (job.Record, bool) {
	rec, ok, err := r.takeBack(ctx, p.c, job.Queued, due, string(p.c.reason), now, rep)
	if err != nil {
		*errs = append(*errs, err)
	}
	return rec, ok
}

// sentBatch is one batch already sent: its jobs by second from the
// origin, and how long after its slot its call answered.
type sentBatch struct {
	secs   map[int64]int
	length time.Duration
}

// crowded reports whether batch, at lag, could share a 1 s window with
// jobs of earlier batches so that the window holds more than 3. A window
// holds at most one second of each batch, so each earlier batch adds the
// most jobs of one of its seconds that can reach t.
func crowded(sent []sentBatch, batch []planned, lag int64) bool {
	cur := map[int64]int{}
	for _, p := range batch {
		cur[p.sec+lag]++
	}
	for t, b := range cur {
		n := b
		for _, sb := range sent {
			most := 0
			for s, a := range sb.secs {
				if t >= s && time.Duration(t-s)*time.Second < time.Second+sb.length {
					most = max(most, a)
				}
			}
			n += most
		}
		if n > 3 {
			return true
		}
	}
	return false
}

// sent records the outcome of one job's send.
func (r *Reclaimer) sent(ctx context.Context, c candidate, version int64, delay time.Duration, err error, rep *Report) {
	log := r.decisionLog(c)
	if err != nil {
		// Not a loss: the record is queued with due_at and becomes stale
		// again after the queued grace.
		rep.SendFailed++
		log.ErrorContext(ctx, "reclaim send failed", slog.String("outcome", "send_failed"),
			slog.Int64("next_version", version), slog.Int64(obs.KeyDelay, delay.Milliseconds()), slog.Any("err", err))
		return
	}
	rep.Requeued[c.reason]++
	r.cfg.Metrics.Count(metricReclaimed, 1, obs.Pool(c.rec.Pool), obs.Reason(string(c.reason)))
	log.InfoContext(ctx, "reclaim requeued", slog.String("outcome", "requeued"),
		slog.Int64("next_version", version), slog.Int64(obs.KeyDelay, delay.Milliseconds()))
}

// decisionLog is the logger of one decision about c: its job, why it was
// picked, and the state, version and attempt the decision was made on
// (a requeue's new version is next_version, as in the claimer's lines).
func (r *Reclaimer) decisionLog(c candidate) *slog.Logger {
	return r.cfg.Logger.With(
		slog.Int64(obs.KeyJobID, c.rec.JobID),
		slog.String(obs.KeyReason, string(c.reason)),
		slog.String(obs.KeyState, string(c.read)),
		slog.Int64(obs.KeyVersion, c.rec.Version),
		slog.Int(obs.KeyAttempt, c.rec.Attempt))
}

// takeBack moves c to state with due, conditional on the version read, and
// returns the record as written. It reports ok when this pass won; a lost
// race is no error (logged with the record the winner left, as the
// conflict carries it).
func (r *Reclaimer) takeBack(ctx context.Context, c candidate, to job.State, due time.Time, why string, now time.Time, rep *Report) (job.Record, bool, error) {
	rec, err := r.cfg.Store.TakeBack(ctx, c.rec, to, due, why, now)
	if errors.Is(err, job.ErrConflict) {
		rep.Raced++
		attrs := []any{slog.String("outcome", "raced")}
		if cur, ok := job.CurrentOf(err); ok {
			attrs = append(attrs, slog.String("now_state", string(cur.State)), slog.Int64("now_version", cur.Version))
		}
		r.decisionLog(c).InfoContext(ctx, "reclaim raced", attrs...)
		return job.Record{}, false, nil
	}
	if err != nil {
		rep.Failed++
		r.decisionLog(c).ErrorContext(ctx, "reclaim failed", slog.String("outcome", "failed"), slog.Any("err", err))
		return job.Record{}, false, fmt.Errorf("reclaim job %d to %s: %w", c.rec.JobID, to, err)
	}
	return rec, true, nil
}

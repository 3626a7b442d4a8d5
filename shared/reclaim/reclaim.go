// Package reclaim owns the reclaimer: the scheduled sweep that finds job
// records nobody is moving any more and hands them back to the claims queue,
// and Spread, the jitter primitive every path that releases many claims at
// once uses (the reclaimer here, the claimer's deadline path).
//
// A record is stale when its sweep_at (kept by shared/store: created +
// pending grace, due_at + queued grace, claimed_at + runner-start grace)
// has passed. The sweep reads the sparse sweep index, one Query per shard
// page, never a Scan; the index carries keys only, so the store reads the
// page's records too (one consistent BatchGetItem per page) and the sweep
// decides from each record's state as it is now:
//
//   - claiming: the lease expired, the claimer died (LeaseExpired). The
//     lease write leaves sweep_at where pending or queued put it (so it
//     writes no index entry: see shared/store), so a claiming record can be
//     found while its lease is still live: the lease is the truth, sweep_at
//     only a hint. Its sweep_at is moved to the lease's expiry (Postpone,
//     conditional on the state and version read), so it is found again
//     exactly when it may be taken back, not read again on every pass.
//   - pending: the webhook's outbox send was lost (OutboxLost).
//   - queued: the message was lost or dead-lettered (MessageLost).
//   - claimed: past its runner-start grace; the liveness check decides
//     (done, check again, or a new attempt: see liveness.go).
//   - anything else is skipped (terminal records leave the index; this is
//     only defence).
//
// Each take-back is conditional on the state and version read, so two
// overlapping sweeps, or a claimer that comes back late, never enqueue the
// same job twice: the loser gets job.ErrConflict and sends nothing. The
// record is written first (queued, version+1, due_at), the message second:
// a send that fails leaves a queued record with a due_at, which the next
// sweep finds again after the queued grace. Slower, never lost.
//
// Max age still holds here: a record whose first failure is older than
// MaxAge is abandoned instead of re-enqueued, so a job cannot loop forever
// through the reclaimer when the claimer's own give-up path keeps dying. A
// claimer that dies before it records any failure is covered too: the
// take-back of its expired lease starts the max-age clock
// (TakeBack sets first_failure_at when none is set).
//
// Decisions:
//   - One sweep collects first and acts second, so Spread sees every job of
//     the pass and the whole pass honours the "≤ 3 per second" bound, not
//     each page separately. Collection gets half the budget and at most
//     MaxRecords; the rest of a backlog waits for the next run (Incomplete).
//   - Shards are read round-robin, one page at a time, starting from a
//     random shard order on every pass, so neither a backlog in one shard
//     nor the shards' numbering starves some shards when passes keep
//     running out of budget.
//   - Each pass also reads StraysPerPass of the shards above the
//     configured count (up to job.MaxShards), in turn: a record keeps the
//     shard it was written to, so after SWEEP_SHARDS is lowered the
//     records of the dropped shards would never be swept. A take-back or a
//     liveness recheck moves such a record to its shard under the current
//     count. Reading an empty shard is one small Query.
//   - Re-enqueues go before abandonments: a job that can still run matters
//     more than bookkeeping for one that cannot.
//   - The herd bound is on arrivals, not on planned delays. SQS makes a
//     message visible at the instant it got it plus whole DelaySeconds, so
//     messages sent one by one, each delay measured at its own send, drift
//     by each send's offset within the second and pile up where it wraps
//     (M = 60 landed 5 in one second with 1 ms calls). So slots are whole
//     seconds from one origin (the first send), messages go out in
//     ascending order ten per SendMessageBatch, and each later batch is held
//     to a whole second after the origin (passes of up to HoldUpTo jobs)
//     with its delays counted from there: every arrival is origin + an
//     integer, ≤ 3 jobs per instant, so ≤ 3 in any 1 s. A batch is taken
//     back just before it is sent, so a pass cut short by its budget leaves
//     the rest untouched for the next run, not waiting out the queued grace.
//     The bound is on the jobs a pass wins, which it knows only after the
//     take-backs (a late claimer or a second reclaimer wins some): a pass
//     of more than HoldUpTo candidates takes them back before it sends
//     until it has won more than HoldUpTo (then the rest go batch by
//     batch), and plans and holds as above if it never does (send). What
//     it took back it sends even past its budget: at most HoldUpTo +
//     MaxBatch jobs, not a backlog's thousand.
//     A refused entry stays queued with its due_at: the sweep after the
//     queued grace sends it (as for any failed send).
//
// Abandoning an expired lease (claiming past max age) also removes what the
// dead attempt may have started: its runner registration (job.RunnerNameAt)
// (unless busy: GitHub refuses with 422, and a busy runner is at work) and
// the provisioner's leftovers (the SSM parameter of its JIT config and the
// job's machines, terminated), the latter only once GitHub said the runner
// is not busy. It runs only after the fenced abandon write succeeded, and
// skips GitHub (and so the machines) while the installation's shared rate
// reading says exhausted (logged, counted): a later janitor pass catches
// that runner, the claimer's budget is worth more.
//
// Rate state, as the claimer keeps it: before a candidate's GitHub calls
// the installation's reading comes through a ratelimit.Gate at the pass's
// now, so the shared rate#<installation> item is read only when this
// process's own reading is unknown, older than RateRefresh (5 s) or Low,
// and then at most once per installation per pass (not once per
// candidate: M candidates of one installation cost one GetItem, or none).
// After those calls the tracker shares what they observed (Persist, by
// the persist rule: an exhaustion, a 10 % drop, a new window, or 30 s
// since the last write), so the claimers stop on an exhaustion the
// reclaimer met instead of each learning it from a 403.
//
// This package must never decide retry policy for a job (ladder, classes):
// it only puts jobs back where a claimer decides. It must never Scan the
// table, and never import an AWS service package.
package reclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/redact"
)

// Store is the job store as the reclaimer uses it (shared/store over
// DynamoDB, infra/mem in the flow tests).
type Store interface {
	// Shards lists the sweep index's shard keys.
	Shards() []string
	// Stale returns one page of shard's records whose sweep_at is before
	// now, oldest first, after cursor ("" for the first page), each whole
	// and as a consistent read has it now. Page.Next is opaque, "" when
	// the shard is exhausted.
	Stale(ctx context.Context, shard string, now time.Time, limit int32, cursor string) (job.Page, error)
	// Postpone moves read's sweep_at to until (a live lease's expiry),
	// conditional on the state and version read; a refusal is a
	// *job.ConflictError.
	Postpone(ctx context.Context, read job.Record, until time.Time) (job.Record, error)
	// TakeBack moves read to Queued (due at due) or Abandoned, conditional
	// on the state and version read (and, for claiming, an expired lease).
	// It returns the whole record as written; a refusal is a
	// *job.ConflictError (errors.Is job.ErrConflict) carrying the record
	// as it is now.
	TakeBack(ctx context.Context, read job.Record, to job.State, due time.Time, reason string, now time.Time) (job.Record, error)
	// Recheck moves a claimed record's sweep_at to due (what else it
	// writes per check: job.Check), conditional on the state and version
	// read, and for a held look (job.CheckWaiting, CheckWaitingTimed) on
	// the sweep_at read.
	Recheck(ctx context.Context, read job.Record, due time.Time, check job.Check, now time.Time) (job.Record, error)
	// MarkDone moves the record to done (GitHub has the job at work).
	MarkDone(ctx context.Context, d job.Report, now time.Time) (job.State, error)
}

// Queue is the claims queue as the reclaimer uses it (shared/queue over
// SQS). SendBatch sends up to MaxBatch messages, msgs[i] visible after
// delays[i], in one call and returns one error per message (nil: sent).
type Queue interface {
	SendBatch(ctx context.Context, msgs []job.Message, delays []time.Duration) []error
}

// MaxBatch is SQS's cap on the entries of one SendMessageBatch.
const MaxBatch = job.MaxBatch

// Reason says why a record was taken back.
type Reason string

// Reasons for a take-back.
const (
	// LeaseExpired: claiming with an expired lease; the claimer died. The
	// same word as the claimer's takeover, in history entries and metrics.
	LeaseExpired Reason = job.ReasonLeaseExpired
	// OutboxLost: pending past its grace; the webhook's send was lost.
	OutboxLost Reason = "outbox_lost"
	// MessageLost: queued long past due_at; the message was lost or dead-lettered.
	MessageLost Reason = "message_lost"
)

// Reasons lists every Reason, in a fixed order (metrics, reports).
var Reasons = []Reason{LeaseExpired, OutboxLost, MessageLost, RunnerLost, RunnerTaken}

// Classify decides why a record the sweep index called stale should be
// taken back, or reports false when it must be left alone: a claiming record
// whose lease is still live at now (trust the lease, not sweep_at), and any
// state the reclaimer does not move.
func Classify(r job.Record, now time.Time) (Reason, bool) {
	switch r.State {
	case job.Claiming:
		// TakeBack requires lease_expires_at < now; match it exactly.
		if r.LeaseExpiresAt >= job.Millis(now) {
			return "", false
		}
		return LeaseExpired, true
	case job.Pending:
		return OutboxLost, true
	case job.Queued:
		return MessageLost, true
	case job.Claimed:
		// Provisional: the liveness check decides.
		return RunnerLost, true
	}
	return "", false
}

// PastMaxAge reports whether r has been failing for longer than maxAge.
// A record that never failed has no age to exceed.
func PastMaxAge(r job.Record, now time.Time, maxAge time.Duration) bool {
	return r.FirstFailureAt != 0 && now.Sub(job.FromMillis(r.FirstFailureAt)) > maxAge
}

// Defaults for Config.
const (
	DefaultMaxAge     = 90 * time.Minute
	DefaultBudget     = 40 * time.Second
	DefaultPageSize   = 100
	DefaultMaxRecords = 1000
	DefaultReserve    = 5 * time.Second
)

// Config is a reclaimer's settings and collaborators. Store and Queue are
// required; every other zero value takes its default (New fills them, in
// one place).
type Config struct {
	// Store is the job store swept; Queue the claims queue re-enqueued to.
	Store Store
	Queue Queue
	// MaxAge: a record failing for longer is abandoned, not re-enqueued.
	MaxAge time.Duration
	// Budget bounds one pass (collection gets the first half).
	Budget time.Duration
	// PageSize is the Limit of each sweep-index Query.
	PageSize int32
	// MaxRecords bounds how many stale records one pass collects, so a huge
	// backlog after an outage is worked off over several passes within
	// memory and time instead of timing out in the middle of one.
	MaxRecords int
	// Reserve is kept free before the invocation's deadline.
	Reserve time.Duration
	// Now is the clock (time.Now when nil).
	Now clock.Func
	// Rand feeds Spread (random.Global when nil); it must be safe for
	// concurrent use, as every random.Source is.
	Rand random.Source
	// Sleep holds a batch to its second boundary (a timer honouring ctx
	// when nil); tests pass one that moves their clock.
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger gets one line per decision and one per pass (slog.Default when nil).
	Logger *slog.Logger
	// Metrics gets the pass's counts as EMF lines at its end, one per set
	// of dimension values (none when nil).
	Metrics *obs.Metrics

	// Abandoning an expired lease removes what the dead attempt may have
	// started (see removeLeftovers). GitHub and Provisioner each may be
	// nil (that part is not removed); Pools resolves the record's pool;
	// Rates, when set, keeps GitHub calls off an exhausted installation
	// and shares what those calls observed.
	GitHub      GitHub
	Provisioner Provisioner
	Rates       Rates
	Pools       []pool.Pool
	// RateRefresh: the shared rate item is read at most this often per
	// installation (ratelimit.DefaultRefresh when zero).
	RateRefresh time.Duration

	// MaxReplacements caps the new attempts of a claimed job whose runner
	// never took it; past it the job is abandoned.
	MaxReplacements int
	// MaxLivenessChecks bounds how often an online but idle runner is
	// given another grace before it counts as lost.
	MaxLivenessChecks int
	// MaxParkedInterval caps the back-off between looks at a job GitHub
	// holds (waiting for reviewers, pending): a grace, then twice as long
	// after each look that finds it still held, up to this
	// (DefaultMaxParkedInterval when zero; never below the pool's grace).
	MaxParkedInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.Budget <= 0 {
		c.Budget = DefaultBudget
	}
	if c.PageSize <= 0 {
		c.PageSize = DefaultPageSize
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = DefaultMaxRecords
	}
	if c.Reserve <= 0 {
		c.Reserve = DefaultReserve
	}
	if c.MaxReplacements <= 0 {
		c.MaxReplacements = DefaultMaxReplacements
	}
	if c.MaxLivenessChecks <= 0 {
		c.MaxLivenessChecks = DefaultMaxLivenessChecks
	}
	if c.MaxParkedInterval <= 0 {
		c.MaxParkedInterval = DefaultMaxParkedInterval
	}
	if c.RateRefresh <= 0 {
		c.RateRefresh = ratelimit.DefaultRefresh
	}
	c.Now = clock.Or(c.Now)
	c.Rand = random.Or(c.Rand)
	if c.Sleep == nil {
		c.Sleep = clock.Sleep
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Reclaimer sweeps stale job records back into the claims queue. Lambda
// runs one pass at a time per instance; concurrent Runs are safe.
type Reclaimer struct {
	cfg  Config
	gate *ratelimit.Gate // nil without Rates
	// stray is where the next pass's turn of stray shards starts.
	stray atomic.Uint64
}

// StraysPerPass is how many shards above the configured count one pass
// reads: with the default 8 of 64, each comes round every 28 passes.
const StraysPerPass = 2

// New validates cfg, fills its defaults and returns a reclaimer.
func New(cfg Config) (*Reclaimer, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("reclaim: Config.Store is required")
	case cfg.Queue == nil:
		return nil, errors.New("reclaim: Config.Queue is required")
	}
	r := &Reclaimer{cfg: cfg.withDefaults()}
	r.stray.Store(uint64(r.cfg.Rand.IntN(job.MaxShards))) // instances start apart
	if r.cfg.Rates != nil {
		r.gate = ratelimit.NewGate(r.cfg.Rates, r.cfg.RateRefresh)
	}
	return r, nil
}

// Report is what one pass did.
type Report struct {
	// Scanned counts the records the sweep index returned; Strays those
	// of them found in a shard above the configured count.
	Scanned, Strays int
	// Requeued counts the records taken back and sent, by reason.
	Requeued map[Reason]int
	// Abandoned counts the records past max age, moved to abandoned.
	Abandoned int
	// Raced counts take-backs that lost to another writer (nothing sent).
	Raced int
	// SendFailed counts records taken back whose message failed to send;
	// they come back after the queued grace.
	SendFailed int
	// Skipped counts records left alone (unexpected state).
	Skipped int
	// Postponed counts claiming records found with a live lease: their
	// sweep_at moved to the lease's expiry.
	Postponed int
	// Failed counts take-backs that failed for infrastructure reasons.
	Failed int
	// Unreadable counts items of the sweep index that are no job record
	// this code can decode (logged with their pk; skipped, not fatal).
	Unreadable int
	// CleanedUp counts abandoned expired leases whose runner and machine
	// leftovers were removed (or found absent, or busy and left alone).
	CleanedUp int
	// CleanupRateLimited counts abandons whose runner was not looked at
	// because the installation's rate limit was exhausted.
	CleanupRateLimited int
	// CleanupFailed counts abandons whose cleanup failed in part (logged).
	CleanupFailed int
	// LivenessChecks counts claimed records whose runner was online but
	// idle: checked again after another grace.
	LivenessChecks int
	// LivenessDone counts claimed records GitHub had at work already (a
	// missed delivery): moved to done.
	LivenessDone int
	// LivenessRateLimited counts liveness checks deferred because the
	// installation's rate limit was exhausted (GitHub not asked).
	LivenessRateLimited int
	// LivenessFailed counts liveness checks GitHub failed (checked again
	// after a grace).
	LivenessFailed int
	// LivenessWaiting counts claimed records whose job GitHub does not
	// give to a runner yet (waiting for approval, pending): checked again
	// after a grace, nothing counted.
	LivenessWaiting int
	// RunnersTaken counts claimed records whose runner was busy while the
	// job was still queued: taken by another job (a new attempt, or
	// abandoned past the bounds).
	RunnersTaken int
	// Incomplete is set when the pass stopped before the index was
	// exhausted (budget, deadline or MaxRecords); the next pass goes on.
	Incomplete bool
}

// RequeuedTotal is the sum of Requeued over all reasons.
func (r Report) RequeuedTotal() int {
	n := 0
	for _, v := range r.Requeued {
		n += v
	}
	return n
}

// candidate is a record the sweep will act on: rec as the sweep read it,
// then as the take-back wrote it; read is the state the sweep found it in.
type candidate struct {
	rec    job.Record
	read   job.State
	reason Reason
	why    string // the abandon reason, when not max age
}

// Handle is the Lambda handler for the EventBridge schedule. It returns an
// error only for infrastructure failures (the table could not be read or
// written); an incomplete pass or a lost race is normal. Lambda logs the
// error's text, so it goes through redact.Error, as the janitor's and the
// redeliverer's do.
func (r *Reclaimer) Handle(ctx context.Context, _ events.CloudWatchEvent) error {
	_, err := r.Run(ctx)
	return redact.Error(err)
}

// stray reports whether shard is above the n configured shards.
func stray(shard string, n int) bool {
	i, err := strconv.Atoi(shard)
	return err == nil && i >= n
}

// strays returns this pass's turn of the shards above the n configured:
// StraysPerPass of them, the next ones after the last pass's.
func (r *Reclaimer) strays(n int) []string {
	all := job.ShardKeys(job.MaxShards)
	if n >= len(all) {
		return nil
	}
	all = all[n:]
	k := min(StraysPerPass, len(all))
	first := (r.stray.Add(uint64(k)) - uint64(k)) % uint64(len(all))
	out := make([]string, k)
	for i := range out {
		out[i] = all[(first+uint64(i))%uint64(len(all))]
	}
	return out
}

// Run performs one pass: collect stale records from every shard, abandon
// those past max age, take the others back and re-enqueue them with delays
// from Spread. Errors are returned only for infrastructure failures; the
// pass still acts on everything it could read.
func (r *Reclaimer) Run(ctx context.Context) (Report, error) {
	now := r.cfg.Now() // read once: the Query, conditions and due times share it
	stop := now.Add(r.cfg.Budget)
	if dl, ok := ctx.Deadline(); ok {
		// The invocation's deadline is wall-clock; translate what is left
		// of it into the injected clock's frame once.
		if left := time.Until(dl) - r.cfg.Reserve; now.Add(left).Before(stop) {
			stop = now.Add(left)
		}
	}
	collectBy := now.Add(stop.Sub(now) / 2)
	// Liveness checks (GitHub calls, clean-ups) start only in the third
	// quarter: the take-backs after them are what every other stale record
	// waits for (make chaos: slow checks left whole passes unsent). One
	// check, of the claimed record waiting longest, runs whenever the pass
	// has budget left at all: a collection that overran its half (slow
	// table reads) must not leave every claimed record unchecked pass after
	// pass, since only this check moves a job whose machine never came.
	livenessBy := collectBy.Add(stop.Sub(collectBy) / 2)
	// A check started by then must be over halfway to stop: its GitHub
	// and provisioner calls run under a context that ends there (on the
	// wall clock), and it looks at the time before each step, so the
	// take-backs and sends of the pass keep the last quarter.
	// The one check a pass always makes (see above) may run until the
	// last sixteenth: a collection that overran into the window must not
	// leave it cut, pass after pass, with every claimed record unchecked.
	lw := r.window(ctx, now, livenessBy.Add(stop.Sub(livenessBy)/2))
	defer lw.cancel()
	first := r.window(ctx, now, stop.Add(-stop.Sub(livenessBy)/4))
	defer first.cancel()

	rep := Report{Requeued: map[Reason]int{}}
	found, collectErr := r.collect(ctx, now, collectBy, &rep)
	// Oldest first: shards are read round-robin, so found is in no
	// overall order; the records waiting longest get the checks.
	slices.SortStableFunc(found, func(a, b candidate) int { return cmp.Compare(a.rec.SweepAt, b.rec.SweepAt) })

	var requeue, abandon []candidate
	errs := collectErr
	checked := 0
	for _, c := range found {
		if c.read == job.Claimed {
			if r.past(ctx, stop) || (checked > 0 && r.past(ctx, livenessBy)) {
				rep.Incomplete = true
				continue
			}
			w := lw
			if checked == 0 {
				w = first
			}
			checked++
			next, to, err := r.liveness(ctx, w, c, now, &rep)
			errs = append(errs, err)
			switch to {
			case job.Queued:
				requeue = append(requeue, next)
			case job.Abandoned:
				abandon = append(abandon, next)
			}
			continue
		}
		if PastMaxAge(c.rec, now, r.cfg.MaxAge) {
			abandon = append(abandon, c)
		} else {
			requeue = append(requeue, c)
		}
	}
	if !r.send(ctx, now, stop, requeue, &rep, &errs) {
		rep.Incomplete = true
	}
	for _, c := range abandon {
		if r.past(ctx, stop) {
			rep.Incomplete = true
			break
		}
		errs = append(errs, r.abandon(ctx, c, now, &rep))
	}
	err := errors.Join(errs...)
	r.summarize(rep, err)
	return rep, err
}

func (r *Reclaimer) past(ctx context.Context, t time.Time) bool {
	return ctx.Err() != nil || !r.cfg.Now().Before(t)
}

// collect pages through every shard, round-robin, until the index is
// exhausted, the collection deadline passes or MaxRecords are found. It
// postpones live leases on the way. A page that cannot be read ends its
// shard's collection for this pass, not the others'.
func (r *Reclaimer) collect(ctx context.Context, now, by time.Time, rep *Report) ([]candidate, []error) {
	type cursor struct {
		shard string
		next  string
	}
	// A new shard order on every pass: a pass that runs out of budget
	// must not always leave the same shards for later.
	shards := r.cfg.Store.Shards()
	configured := len(shards)
	shards = append(shards, r.strays(configured)...)
	var active []cursor
	for _, i := range r.cfg.Rand.Perm(len(shards)) {
		active = append(active, cursor{shard: shards[i]})
	}
	var found []candidate
	var errs []error
	for len(active) > 0 {
		var still []cursor
		for _, c := range active {
			if len(found) >= r.cfg.MaxRecords || r.past(ctx, by) {
				rep.Incomplete = true
				return found, errs
			}
			limit := min(int(r.cfg.PageSize), r.cfg.MaxRecords-len(found))
			page, err := r.cfg.Store.Stale(ctx, c.shard, now, int32(limit), c.next)
			if err != nil {
				// This shard waits for the next pass; the others go on (a
				// failed page ending the whole collection left most shards
				// unread at 20 % faults: make chaos).
				rep.Incomplete = true
				errs = append(errs, fmt.Errorf("reclaim: sweep shard %s: %w", c.shard, err))
				continue
			}
			for _, pk := range page.Undecodable {
				rep.Unreadable++
				r.cfg.Logger.Error("reclaim cannot read a record of the sweep index; fix or delete it",
					slog.String("pk", pk), slog.String("shard", c.shard))
			}
			for _, rec := range page.Records {
				rep.Scanned++
				if stray(c.shard, configured) {
					rep.Strays++
					r.cfg.Logger.Warn("reclaim found a record in a shard above SWEEP_SHARDS (was it lowered?); a take-back moves it",
						slog.Int64(obs.KeyJobID, rec.JobID), slog.String("shard", c.shard), slog.Int("sweep_shards", configured))
				}
				reason, ok := Classify(rec, now)
				if !ok && rec.State == job.Claiming {
					errs = append(errs, r.postpone(ctx, rec, rep))
					continue
				}
				if !ok {
					rep.Skipped++
					r.cfg.Logger.Debug("reclaim skipped",
						slog.Int64(obs.KeyJobID, rec.JobID),
						slog.String(obs.KeyState, string(rec.State)),
						slog.Int64(obs.KeyVersion, rec.Version),
						slog.Int64("lease_expires_at", rec.LeaseExpiresAt))
					continue
				}
				found = append(found, candidate{rec: rec, read: rec.State, reason: reason})
			}
			if page.Next != "" {
				c.next = page.Next
				still = append(still, c)
			}
		}
		active = still
	}
	return found, errs
}

// postpone moves a live lease's sweep_at to its expiry (see the package
// doc). Losing to the claimer (it finished, released or was taken back)
// is normal: its own write set sweep_at.
func (r *Reclaimer) postpone(ctx context.Context, rec job.Record, rep *Report) error {
	log := r.cfg.Logger.With(slog.Int64(obs.KeyJobID, rec.JobID), slog.Int64(obs.KeyVersion, rec.Version),
		slog.Int64("lease_expires_at", rec.LeaseExpiresAt))
	_, err := r.cfg.Store.Postpone(ctx, rec, job.FromMillis(rec.LeaseExpiresAt))
	switch {
	case errors.Is(err, job.ErrConflict):
		rep.Skipped++
		log.DebugContext(ctx, "reclaim left a lease that moved on")
		return nil
	case err != nil:
		rep.Failed++
		log.ErrorContext(ctx, "reclaim failed to postpone a live lease", slog.Any("err", err))
		return fmt.Errorf("reclaim: postpone job %d: %w", rec.JobID, err)
	}
	rep.Postponed++
	log.DebugContext(ctx, "reclaim postponed a live lease to its expiry")
	return nil
}

// abandon moves c to abandoned: it has been failing for longer than MaxAge.
func (r *Reclaimer) abandon(ctx context.Context, c candidate, now time.Time, rep *Report) error {
	why := c.why
	if why == "" {
		why = fmt.Sprintf("reclaimer: max age %s passed since the first failure at %s (%s)",
			r.cfg.MaxAge, job.FromMillis(c.rec.FirstFailureAt).UTC().Format(time.RFC3339), c.reason)
	}
	rec, ok, err := r.takeBack(ctx, c, job.Abandoned, time.Time{}, why, now, rep)
	if !ok {
		return err
	}
	c.rec = rec
	rep.Abandoned++
	r.cfg.Metrics.Count(metricAbandoned, 1, obs.Pool(c.rec.Pool))
	r.decisionLog(c).WarnContext(ctx, "reclaim abandoned", slog.String("outcome", "abandoned"),
		slog.String(obs.KeyClass, c.rec.LastErrorClass), slog.Int64("first_failure_at", c.rec.FirstFailureAt))
	// Only now: a pass that lost the race must not touch what the winner owns.
	r.removeLeftovers(ctx, c, now, rep)
	return nil
}

// Metric names (CloudWatch, namespace obs.Namespace).
const (
	MetricReclaimed  = "Reclaimed" // by reason: metricReclaimed
	MetricAbandoned  = "ReclaimAbandoned"
	MetricRaced      = "ReclaimRaced"
	MetricSendFailed = "ReclaimSendFailed"
	MetricScanned    = "ReclaimScanned"
	MetricIncomplete = "ReclaimIncomplete"
	MetricUnreadable = "ReclaimUnreadable"
	// MetricPostponed counts live leases found early, moved to their expiry.
	MetricPostponed = "ReclaimPostponed"
	// MetricCleanupRateLimited counts abandons whose runner was left for
	// later because the installation's rate limit was exhausted.
	MetricCleanupRateLimited = "ReclaimCleanupRateLimited"
	MetricCleanupFailed      = "ReclaimCleanupFailed"
	// Liveness after the claim: re-attempts are Reclaimed{reason=runner_lost};
	// these count the rest.
	MetricLivenessChecks      = "ReclaimLivenessChecks"
	MetricLivenessDone        = "ReclaimLivenessDone"
	MetricLivenessRateLimited = "ReclaimLivenessRateLimited"
	MetricLivenessFailed      = "ReclaimLivenessFailed"
	MetricLivenessWaiting     = "ReclaimLivenessWaiting"
	MetricRunnersTaken        = "ReclaimRunnersTaken"
)

// metricReclaimed counts the jobs taken back and re-enqueued, with their
// Reason (liveness re-attempts are reason runner_lost) and the record's
// pool as dimensions; its fleet-wide set is the total the reclaims-spike
// alarm reads. metricAbandoned counts the give-ups by pool; its fleet-wide
// set feeds the give-ups alarm. Both are counted at the decision and
// written with the pass's line, plus a 0 so a quiet pass still shows on
// the graph.
var (
	metricReclaimed = obs.Metric{Name: MetricReclaimed, Dims: []string{obs.DimPool, obs.DimReason}}
	metricAbandoned = obs.Metric{Name: MetricAbandoned, Dims: []string{obs.DimPool}}
)

func (r *Reclaimer) summarize(rep Report, err error) {
	m := r.cfg.Metrics
	attrs := []any{
		slog.Int("scanned", rep.Scanned),
		slog.Int("strays", rep.Strays),
		slog.Int("requeued", rep.RequeuedTotal()),
	}
	for _, reason := range Reasons {
		attrs = append(attrs, slog.Int("requeued_"+string(reason), rep.Requeued[reason]))
	}
	m.Count(metricReclaimed, 0)
	m.Count(metricAbandoned, 0)
	incomplete := 0.0
	if rep.Incomplete {
		incomplete = 1
	}
	m.Add(MetricRaced, float64(rep.Raced))
	m.Add(MetricSendFailed, float64(rep.SendFailed))
	m.Add(MetricScanned, float64(rep.Scanned))
	m.Add(MetricIncomplete, incomplete)
	m.Add(MetricUnreadable, float64(rep.Unreadable))
	m.Add(MetricPostponed, float64(rep.Postponed))
	m.Add(MetricCleanupRateLimited, float64(rep.CleanupRateLimited))
	m.Add(MetricCleanupFailed, float64(rep.CleanupFailed))
	m.Add(MetricLivenessChecks, float64(rep.LivenessChecks))
	m.Add(MetricLivenessDone, float64(rep.LivenessDone))
	m.Add(MetricLivenessRateLimited, float64(rep.LivenessRateLimited))
	m.Add(MetricLivenessFailed, float64(rep.LivenessFailed))
	m.Add(MetricLivenessWaiting, float64(rep.LivenessWaiting))
	m.Add(MetricRunnersTaken, float64(rep.RunnersTaken))
	m.Flush()

	attrs = append(attrs,
		slog.Int("abandoned", rep.Abandoned),
		slog.Int("raced", rep.Raced),
		slog.Int("send_failed", rep.SendFailed),
		slog.Int("skipped", rep.Skipped),
		slog.Int("postponed", rep.Postponed),
		slog.Int("failed", rep.Failed),
		slog.Int("unreadable", rep.Unreadable),
		slog.Int("cleaned_up", rep.CleanedUp),
		slog.Int("cleanup_rate_limited", rep.CleanupRateLimited),
		slog.Int("cleanup_failed", rep.CleanupFailed),
		slog.Int("liveness_checks", rep.LivenessChecks),
		slog.Int("liveness_done", rep.LivenessDone),
		slog.Int("liveness_rate_limited", rep.LivenessRateLimited),
		slog.Int("liveness_failed", rep.LivenessFailed),
		slog.Int("liveness_waiting", rep.LivenessWaiting),
		slog.Int("runners_taken", rep.RunnersTaken),
		slog.Bool("incomplete", rep.Incomplete))
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.Any("err", err))
	} else if rep.Incomplete || rep.SendFailed > 0 || rep.Unreadable > 0 {
		level = slog.LevelWarn
	}
	r.cfg.Logger.Log(context.Background(), level, "reclaim pass", attrs...)
}

package claim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// Decisions, as logged under "decision" (one line per message).
const (
	DecisionMalformed    = "malformed"
	DecisionUnknownJob   = "unknown_job"
	DecisionDuplicate    = "duplicate"
	DecisionEarly        = "early"
	DecisionEarlyDropped = "early_dropped"
	DecisionLeaseHeld    = "lease_held"
	DecisionChained      = "chained"
	DecisionDeferred     = "deferred_rate_limit"
	DecisionDone         = "done"
	DecisionClaimed      = "claimed"
	DecisionReused       = "claimed_reused"
	DecisionRetry        = "retry"
	DecisionFailed       = "failed"
	DecisionAbandoned    = "abandoned"
	DecisionLeaseLost    = "lease_lost"
	DecisionInfraError   = "infra_error"
	DecisionHandOffLost  = "handoff_failed"
)

// flow is one message's way through the claim.
type flow struct {
	c *Claimer
	// work bounds the calls to GitHub and the provisioner: it ends
	// HandOffReserve before the invocation does, so a hung call still
	// leaves time to record the outcome or hand the job off.
	work context.Context
	// invocation names this invocation; lessee is this message's lease
	// owner (leaseOwner).
	invocation, lessee string
	// tookOver is set once a takeover was tried: its refusal is decided
	// without another.
	tookOver bool
	sm       events.SQSMessage
	msg      job.Message
	now      time.Time
	rec      job.Record
	lease    job.Lease
	pool     pool.Pool
	// attempt is the record's attempt count, plus one once this attempt
	// reached GitHub or the provisioner.
	attempt int
	// scope, owner and repo say where the runner is registered (repo is
	// empty at org scope).
	scope, owner, repo string
	name               string
	// reached is set once a GitHub call of this attempt was made: it was
	// answered, or failed other than by go-github's refusal from memory.
	reached bool
	// registering is set once the attempt asks GitHub for its runner's
	// JIT config (register): only then has its name been tried at its
	// scope, and a retry records the pair (job.Retry.Runner, Scope).
	registering bool
	// appRefused is set when GitHub refused the App's token exchange
	// (failure.Failure.AppRefused): the retry counts app_refused.
	appRefused bool
	// sharing is set once the attempt will share its rate reading when it
	// ends (claim: shareRate deferred).
	sharing bool
}

// github is the claimer's GitHub, noting in f.reached whether a call of
// the attempt reached GitHub.
func (f *flow) github() GitHub { return reaching{next: f.c.cfg.GitHub, f: f} }

// reaching is a GitHub that notes the calls that reached it.
type reaching struct {
	next GitHub
	f    *flow
}

func (r reaching) note(err error) {
	if err == nil || !failure.Classify(err).Remembered {
		r.f.reached = true
	}
}

func (r reaching) GenerateJIT(ctx context.Context, installationID int64, req ghapp.JITRequest) (ghapp.JIT, error) {
	jit, err := r.next.GenerateJIT(ctx, installationID, req)
	r.note(err)
	return jit, err
}

func (r reaching) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	run, err := r.next.FindRunner(ctx, installationID, scope, owner, repo, name)
	r.note(err)
	return run, err
}

func (r reaching) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, runnerID int64) error {
	err := r.next.DeleteRunner(ctx, installationID, scope, owner, repo, runnerID)
	r.note(err)
	return err
}

func (r reaching) JobStatus(ctx context.Context, installationID int64, owner, repo string, jobID int64) (string, error) {
	st, err := r.next.JobStatus(ctx, installationID, owner, repo, jobID)
	r.note(err)
	return st, err
}

func (r reaching) Repository(ctx context.Context, installationID int64, owner, repo string) (ghapp.Repository, error) {
	rp, err := r.next.Repository(ctx, installationID, owner, repo)
	r.note(err)
	return rp, err
}

// handleMessage runs one message through the claim. nil means the message
// was dealt with: it is not reported, so the event source mapping deletes
// it. An error makes it a batch item failure.
func (c *Claimer) handleMessage(ctx context.Context, sm events.SQSMessage, invocation string) error {
	f := &flow{c: c, sm: sm, now: c.cfg.Now(), work: ctx, invocation: invocation, lessee: leaseOwner(invocation, sm)}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		f.work, cancel = context.WithDeadline(ctx, dl.Add(-c.cfg.HandOffReserve))
		defer cancel()
	}
	msg, err := job.DecodeMessage(sm.Body)
	if err != nil {
		f.decide(ctx, slog.LevelError, DecisionMalformed, slog.String("error", err.Error()))
		return nil
	}
	f.msg = msg
	f.attempt = msg.Attempt
	if rest := job.FromMillis(msg.NotBefore).Sub(f.now); msg.NotBefore > 0 && rest > 0 {
		return f.chain(ctx, rest)
	}

	// The lease write first: its refusal carries the record, so the
	// decision needs no read.
	lease, rec, err := c.cfg.Store.Acquire(ctx, msg.JobID, msg.Version, f.lessee, c.leaseUntil(ctx, f.now), f.now)
	var conflict *job.ConflictError
	switch {
	case errors.As(err, &conflict):
		return f.refused(ctx, conflict)
	case err != nil:
		return f.infra(ctx, "acquire lease", err)
	}
	f.lease, f.rec, f.attempt = lease, rec, rec.Attempt
	return f.claim(ctx)
}

// refused decides a message whose lease write was refused, from the
// record the refusal carried: no record is an unknown job; an older
// version, or a terminal record, a duplicate; a newer version an early
// message; claiming at the version this message's lease write gives, or
// under a lease owner of this very message (one it took over), a lease an
// earlier receive of this message took (takeOver); the same
// version in another state than queued a duplicate too (the claim ended).
func (f *flow) refused(ctx context.Context, ce *job.ConflictError) error {
	if !ce.Found {
		f.decide(ctx, slog.LevelError, DecisionUnknownJob)
		return nil
	}
	rec := ce.Current
	f.rec, f.attempt = rec, rec.Attempt
	switch {
	case f.msg.Version > rec.Version && !rec.State.Settled():
		return f.early(ctx)
	case rec.State == job.Claiming && !f.tookOver && (rec.Version == f.msg.Version+1 || f.heldByThisMessage(rec.LeaseOwner)):
		return f.takeOver(ctx)
	case rec.State.Settled() || f.msg.Version < rec.Version:
		return f.duplicate(ctx, "older than the record, or the record is terminal")
	}
	return f.duplicate(ctx, "lease taken or record moved")
}

// heldByThisMessage reports whether a lease owner is a receive of this
// very message (the owner carries the SQS message id, which every receive
// of a message shares): the lease it took over, at a version past the one
// its own lease write gives, when the claimer that took it over died too.
// Without it a message recovered one dead claimer, and its next receive
// was dropped as a duplicate, leaving the job to the reclaimer.
func (f *flow) heldByThisMessage(owner string) bool {
	return f.sm.MessageId != "" && strings.Contains(owner, "/"+f.sm.MessageId+"/")
}

// duplicate drops a message that has nothing left to do.
func (f *flow) duplicate(ctx context.Context, reason string) error {
	f.decide(ctx, slog.LevelInfo, DecisionDuplicate, slog.String(obs.KeyState, string(f.rec.State)),
		slog.Int64("record_version", f.rec.Version), slog.String(obs.KeyReason, reason))
	return nil
}

// takeOver handles a message whose record is claiming at exactly the
// version its own lease write gives: the lease of a receive of this very
// message (a copy, or this message before the event source mapping
// redelivered it), whose claimer may have died. Held by this invocation
// (a copy in the same batch), the lease is live: the message is a
// duplicate. Otherwise, while the lease lasts, the message is hidden
// until one second past its expiry (the holder, if alive, ends the claim
// before then, and the next look finds the record moved on: a duplicate);
// once it has expired, the message takes the lease over (Store.Takeover,
// conditional on the version held and the expiry) and claims as if it
// had taken the lease itself. See the package doc.
func (f *flow) takeOver(ctx context.Context) error {
	rec := f.rec
	if strings.HasPrefix(rec.LeaseOwner, f.invocation+"/") {
		return f.duplicate(ctx, "a copy in this batch holds the lease")
	}
	if exp := job.FromMillis(rec.LeaseExpiresAt); !exp.Before(f.now) {
		wait := f.waitOut(exp)
		if err := f.c.cfg.Queue.RetryAfter(ctx, f.sm.ReceiptHandle, wait); err != nil {
			return f.infra(ctx, "hide message until its lease expires", err)
		}
		f.decide(ctx, slog.LevelInfo, DecisionLeaseHeld, slog.Int64("record_version", rec.Version),
			slog.Int64("lease_expires_at", rec.LeaseExpiresAt), slog.Int64(obs.KeyDelay, wait.Milliseconds()),
			slog.String(obs.KeyReason, "an earlier receive of this message holds the lease: waiting out its expiry"))
		return errNotHandled
	}
	f.tookOver = true
	lease, cur, err := f.c.cfg.Store.Takeover(ctx, rec.JobID, rec.Version, f.lessee, f.c.leaseUntil(ctx, f.now), f.now)
	var conflict *job.ConflictError
	switch {
	case errors.As(err, &conflict):
		return f.refused(ctx, conflict)
	case err != nil:
		return f.infra(ctx, "take over lease", err)
	}
	f.lease, f.rec, f.attempt = lease, cur, cur.Attempt
	// The count rides on the line (obs.Inline), written now: flushed at
	// the invocation's end, it died with a claimer that keeps dying (out
	// of memory, a runtime exit), the case LeaseTakeoversAlarm is for.
	line := []slog.Attr{slog.Int64(obs.KeyJobID, rec.JobID), slog.Int64(obs.KeyVersion, lease.Version),
		slog.Int64("lease_expired_at", rec.LeaseExpiresAt), slog.String(obs.KeyReason, job.ReasonLeaseExpired)}
	if p := f.poolName(); p != "" {
		line = append(line, slog.String(obs.DimPool, p))
	}
	taken := obs.Sample{Metric: metricTakenOver, Value: 1}
	if f.c.cfg.Logger.Enabled(ctx, slog.LevelWarn) {
		f.c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim lease taken over", f.c.cfg.Metrics.Inline(line, taken)...)
	} else {
		f.c.cfg.Metrics.Emit(line, taken)
	}
	return f.claim(ctx)
}

// maxEarlyWait bounds how long an early message is hidden: SQS refuses a
// visibility timeout past 12 h from the receive, and the receive was a
// moment ago.
const maxEarlyWait = 12*time.Hour - time.Minute

// early handles a message newer than its record: its sender holds the
// lease at the version just below and has not released it yet. The
// Release can only land while that lease lasts (a lease outlives its
// claimer's invocation), so the message is hidden until the lease's
// expiry, not for a few seconds: a few seconds at a time, a Release that
// never lands (its claimer died) would run the message through
// maxReceiveCount into the dead-letter queue, a false alarm. Once the
// lease has expired, the message is deleted: the record is still claiming
// at the version below, and the sender's own message, never deleted since
// its claimer died, comes back and takes the lease over (takeOver), to
// this very version; failing that, the reclaimer's take-back does and
// sends its own message. A
// message ahead of its record in any other way was sent by no claimer: it
// comes back every EarlyDelay and dead-letters, which is worth an alarm.
func (f *flow) early(ctx context.Context) error {
	rec := f.rec
	wait, reason := f.c.cfg.EarlyDelay, "no lease at the version below"
	if rec.State == job.Claiming && f.msg.Version == rec.Version+1 {
		exp := job.FromMillis(rec.LeaseExpiresAt)
		if exp.Before(f.now) {
			f.decide(ctx, slog.LevelInfo, DecisionEarlyDropped, slog.Int64("record_version", rec.Version),
				slog.Int64("lease_expires_at", rec.LeaseExpiresAt),
				slog.String(obs.KeyReason, "the sender's lease expired: the sender's message takes it over, or the reclaimer takes it back"))
			return nil
		}
		wait, reason = f.waitOut(exp), "waiting out the sender's lease"
	}
	if err := f.c.cfg.Queue.RetryAfter(ctx, f.sm.ReceiptHandle, wait); err != nil {
		return f.infra(ctx, "retry early message", err)
	}
	f.decide(ctx, slog.LevelInfo, DecisionEarly, slog.Int64("record_version", rec.Version),
		slog.Int64(obs.KeyDelay, wait.Milliseconds()), slog.String(obs.KeyReason, reason))
	return errNotHandled
}

// waitOut is how long a message is hidden to wait out a lease that
// expires at exp: until one second past the expiry, so the next look
// finds it expired, but at least EarlyDelay and at most maxEarlyWait.
func (f *flow) waitOut(exp time.Time) time.Duration {
	return min(max(exp.Sub(f.now)+time.Second, f.c.cfg.EarlyDelay), maxEarlyWait)
}

// leaseUntil is when a lease taken at now ends: now + Lease, but never
// before the invocation's deadline (plus Lease again, as margin for clocks
// that disagree), so a live claimer never outlives its lease whatever
// LEASE_DURATION says.
func (c *Claimer) leaseUntil(ctx context.Context, now time.Time) time.Time {
	until := now.Add(c.cfg.Lease)
	if dl, ok := ctx.Deadline(); ok && until.Before(dl) {
		until = dl.Add(c.cfg.Lease)
	}
	return until
}

// chain re-sends a message that arrived before its not_before, unchanged,
// with the remaining delay (≤ SQS's cap). Not an attempt; nothing read or
// written (see the package doc).
func (f *flow) chain(ctx context.Context, rest time.Duration) error {
	d := min(rest, job.MaxDelay)
	if err := f.c.cfg.Queue.Send(ctx, f.msg, d); err != nil {
		return f.infra(ctx, "re-send chained message", err)
	}
	f.decide(ctx, slog.LevelInfo, DecisionChained, slog.Int64(obs.KeyDelay, d.Milliseconds()))
	return nil
}

// claim runs one attempt under the lease.
func (f *flow) claim(ctx context.Context) error {
	c := f.c
	p, stale := f.recorded()
	if stale == "" {
		f.use(p)
	} else if _, any := pool.Match(c.cfg.Pools, f.rec.Labels); !any {
		// RUNNER_POOLS changed under a queued job and no pool has its
		// labels now: retry (the rollout may finish, or be undone) until
		// max age, rather than fail at once. A pool relabelled so that the
		// job no longer fits is not claimed in: a runner with the pool's
		// new labels would never take the job (claimed for nothing, then
		// replaced until max age, taking other jobs meanwhile).
		f.attempt++
		return f.retry(ctx, failure.Failure{Class: failure.UnknownRetryable, Reason: stale}, nil)
	}

	rd, err := c.reading(ctx, f.rec.InstallationID, f.now)
	if err != nil {
		c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim rate state unreadable",
			slog.Int64(obs.KeyJobID, f.rec.JobID), slog.String("error", err.Error()))
	}
	if rd.Halted(f.now) {
		return f.deferRate(ctx, rd)
	}

	// From here on the attempt reaches GitHub: it counts.
	f.attempt++
	defer f.shareRate(ctx)
	f.sharing = true

	if stale != "" {
		if ended, err := f.resolve(ctx, stale); ended {
			return err
		}
		if ended, err := f.keptByEarlier(ctx, stale); ended {
			return err
		}
		if ended, err := f.move(ctx, stale); ended {
			return err
		}
	}
	p = f.pool

	if p.CheckQueued {
		st, err := f.github().JobStatus(f.work, f.rec.InstallationID, f.rec.Owner(), f.rec.RepoName(), f.rec.JobID)
		switch fl := failure.Classify(err); {
		case err != nil && fl.Class == failure.RateLimit:
			// The JIT call would be refused too: do not spend another call.
			return f.retryOrFail(ctx, err, nil)
		case err != nil:
			// The check is an optimisation: when it fails, claim anyway.
			c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim job status check failed",
				slog.Int64(obs.KeyJobID, f.rec.JobID), slog.String(obs.KeyClass, fl.Class.String()),
				slog.String(obs.KeyReason, fl.Reason))
		case st == "in_progress" || st == "completed":
			return f.finish(ctx, job.Outcome{State: job.Done, Attempt: f.attempt}, DecisionDone, nil, slog.String("job_status", st))
		}
	}

	f.releasePrevious(f.work)
	if ended, err := f.triedElsewhere(ctx); ended {
		return err
	}
	f.registering = true
	jit, reused, err := f.register(f.work)
	if err != nil {
		return f.retryOrFail(ctx, err, nil)
	}
	if reused != nil {
		return f.finish(ctx, job.Outcome{State: job.Claimed, Attempt: f.attempt, RunnerName: f.name, RunnerStartGrace: f.pool.StartGrace()}, DecisionReused, nil,
			slog.Int64("runner_id", reused.ID), slog.String("runner_status", reused.Status), slog.Bool("runner_busy", reused.Busy))
	}
	if f.rec.CreatedAt > 0 {
		c.cfg.Metrics.Observe(metricTimeToProvision, f.now.Sub(job.FromMillis(f.rec.CreatedAt)), obs.Pool(p.Name))
	}
	res, err := c.cfg.Provisioner.Provision(f.work, f.request(jit.EncodedConfig))
	if err != nil {
		return f.retryOrFail(ctx, err, &ghapp.Runner{ID: jit.RunnerID, Name: jit.Name, Status: "offline"})
	}
	attrs := []slog.Attr{slog.Int64("runner_id", jit.RunnerID), slog.Bool("reused_machine", res.Reused)}
	if res.InstanceID != "" {
		attrs = append(attrs, slog.String("instance_id", res.InstanceID))
	}
	if res.MessageID != "" {
		attrs = append(attrs, slog.String("dispatch_message_id", res.MessageID))
	}
	return f.finish(ctx, job.Outcome{State: job.Claimed, Attempt: f.attempt, RunnerName: f.name, RunnerStartGrace: f.pool.StartGrace()}, DecisionClaimed, nil, attrs...)
}

// recorded returns the record's pool, or why it no longer serves the job
// (stale): it left RUNNER_POOLS (renamed, removed), its labels no longer
// cover the job's (relabelled), or, by the webhook's rule (pool.Serve)
// with the repository as the queued delivery described it, it would refuse
// the job now: it stopped allowing public repositories, or registers
// runners at the organisation and the repository is a user's.
func (f *flow) recorded() (p pool.Pool, stale string) {
	p, ok := pool.Find(f.c.cfg.Pools, f.rec.Pool)
	if !ok {
		return pool.Pool{}, "pool " + f.rec.Pool + " is not configured"
	}
	if _, fits := pool.Match([]pool.Pool{p}, f.rec.Labels); !fits && len(f.rec.Labels) > 0 {
		return pool.Pool{}, fmt.Sprintf("pool %s no longer serves labels [%s]", p.Name, strings.Join(f.rec.Labels, ", "))
	}
	repo := pool.Repository{FullName: f.rec.Repo, Public: f.rec.Public, UserOwned: f.rec.UserOwned}
	if _, why := pool.Serve([]pool.Pool{p}, p.Labels, repo); why != "" {
		return pool.Pool{}, why
	}
	return p, ""
}

// movedTo is the attempt's pool when it resolved the job's pool again
// (resolve) and it differs from the record's, else "": its runner is named
// after it, and so must the record be.
func (f *flow) movedTo() string {
	if f.pool.Name != "" && f.pool.Name != f.rec.Pool {
		return f.pool.Name
	}
	return ""
}

// use makes p the attempt's pool: one runner name per attempt (a
// replacement's runner must not meet the name of the runner before it,
// which another job may hold busy), registered at p's scope now.
func (f *flow) use(p pool.Pool) {
	f.pool = p
	f.name = job.RunnerNameAt(p.Name, f.rec.JobID, f.rec.Replacements)
	f.locate(p.Scope)
}

// resolve picks the pool that serves the job now, when its recorded pool
// no longer does (stale says why) and some pool has its labels: the
// webhook's rule (pool.Serve), with the repository's visibility and owner
// type read from GitHub now (the record's, from the queued delivery, may
// be out of date: a repository made private since), as the process last
// read them within RepoTTL (repoCache: a backlog of refused jobs retried
// until MAX_AGE would otherwise read it on every attempt). The owner
// allow-list is the webhook's configuration and not the claimer's: the
// webhook checked the owner, which a pool's rename does not change. A
// failed read is the attempt's GitHub failure (classified, retried or
// failed); no pool serving the job is the retry of a pool gone, as
// before (stale, then why). The new pool reaches the record under the
// lease once keptByEarlier allows the move (move), and again with the
// claim's outcome or its retry (job.Outcome.Pool, job.Retry.Pool). ended
// is set when the attempt ended here, err being its result.
func (f *flow) resolve(ctx context.Context, stale string) (ended bool, err error) {
	r, err := f.c.repos.get(f.work, f.github(), f.rec.InstallationID, f.rec.Owner(), f.rec.RepoName(), f.now)
	if err != nil {
		return true, f.retryOrFail(ctx, err, nil)
	}
	p, why := pool.Serve(f.c.cfg.Pools, f.rec.Labels, pool.Repository{FullName: f.rec.Repo, Public: r.Public, UserOwned: r.UserOwned})
	if why != "" {
		if why != stale { // the recorded pool's own refusal, confirmed, is said once
			why = stale + "; " + why
		}
		return true, f.retry(ctx, failure.Failure{Class: failure.UnknownRetryable, Reason: why}, nil)
	}
	f.use(p)
	return false, nil
}

// keptByEarlier runs once resolve found the pool that serves the job now.
// It keeps the job in its recorded pool while a runner an earlier attempt
// of this replacement (one that reached GitHub or the provisioner, or
// whose claimer died holding the lease, taken over or taken back by the
// reclaimer) registered under that pool's name is there: moved, this
// attempt's runner would stand beside it, two for one job, and that
// runner, its machine perhaps still booting, may yet take the job. It is
// looked for (find, one or two calls). Busy or online, or offline with a
// machine up, the job is claimed with it in the recorded pool, as the 409
// path claims with a runner of the attempt's own name (DecisionReused):
// if it never takes the job, the reclaimer's liveness check (which judges
// a renamed pool's runner under its recorded name) replaces it after the
// start grace, and that attempt, under a name of its own, moves. (Retried
// instead, the job waited for that runner with nobody watching it, and one
// whose runner had died on a live machine was abandoned at max age.)
// Offline with no machine (its provisioning failed), it can never take the
// job: it is removed as the 409 path removes one (deleted unless it turned
// busy) and the job moves; a 422 on that delete claims with it, as there. The machine is asked
// of the recorded pool's provisioner or, that pool gone, of the new one's
// under the old name (EC2's finds machines by job and runner name; a
// dispatch pool knows of none). A failed look is the attempt's GitHub
// failure. ended is set when the attempt ended here, err being its result.
func (f *flow) keptByEarlier(ctx context.Context, stale string) (ended bool, err error) {
	// Looked for even at attempt 0: a claimer that died holding the lease
	// counted no attempt, and when the reclaimer took the job back (its
	// message lost) nothing marks this claim as its successor. Until the
	// look allows the move, the attempt has no pool: a retry or failure
	// from here must not record the new one (movedTo), or the next attempt
	// would claim there beside the runner that kept the job.
	to := f.pool
	if to.Name == f.rec.Pool {
		// Resolved to the recorded pool itself (the repository the record
		// described as public is private now): no move, and this
		// attempt's runner is the earlier ones' name (the 409 path).
		return false, nil
	}
	f.pool, f.name = pool.Pool{}, ""
	f.locate("")
	prev := f.earlier(f.rec.Replacements, to)
	if f.rec.TriedScope != "" && strings.EqualFold(f.rec.TriedRunner, prev.name) {
		// A retried attempt of this replacement asked for this very name
		// there. The record's scope is a claim's of an earlier replacement
		// (a claim at this one would have moved the job on to the next),
		// or a Move's for this name, which its retry recorded again.
		prev.locate(f.rec.TriedScope)
	}
	r, absent, err := prev.find(f.work)
	f.reached = f.reached || prev.reached
	if err != nil {
		return true, f.retryOrFail(ctx, err, nil)
	}
	if !absent {
		if r, err = f.keepOrRemove(prev, r); err != nil {
			return true, f.retryOrFail(ctx, err, nil)
		}
	}
	if r == nil {
		f.use(to)
		return false, nil
	}
	// Kept: the attempt's runner is that one, in the recorded pool (or its
	// stand-in under the recorded name, so the outcome keeps the record's
	// pool: movedTo), at the scope it was found at. A lease lost at the
	// record's write then judges that runner as the 409 path's reused one
	// (releaseSpare): left when the job is done by it, released when
	// another runner took the job; with no name of its own, the attempt
	// logged and counted a spare released for no runner, and left the
	// spare one.
	f.pool, f.name = prev.pool, prev.name
	f.locate(prev.scope)
	return true, f.finish(ctx, job.Outcome{State: job.Claimed, Attempt: f.attempt, RunnerName: r.Name, Scope: f.scope,
		RunnerStartGrace: f.pool.StartGrace()}, DecisionReused, nil,
		slog.Int64("runner_id", r.ID), slog.String("runner_status", r.Status), slog.Bool("runner_busy", r.Busy),
		slog.String("kept_in_pool", f.rec.Pool), slog.String(obs.KeyReason, stale+"; not moved: runner "+r.Name+" of an earlier attempt is registered"))
}

// keepOrRemove decides on r, the runner of prev (an earlier attempt of
// this job) found registered: busy or online, or offline with a machine of
// the job up (booting with its config), the job is claimed with it (r is
// returned); offline with no machine (its provisioning failed), it can
// never take the job and is removed as the 409 path removes one (deleted
// unless it turned busy; nil is returned once it is gone). A 422 on that
// delete that is no busy runner's (IsStillRunning) keeps the job with it,
// as on the 409 path: it may be a busy answer in words not known here,
// and failing the job for it could fail one a runner of ours is running.
// err is a failure that kept it from deciding (the attempt's, to classify).
func (f *flow) keepOrRemove(prev *flow, r *ghapp.Runner) (*ghapp.Runner, error) {
	if r.Busy || r.Status == "online" {
		return r, nil
	}
	up, err := prev.machineUp(f.work)
	if err != nil || up {
		return r, err
	}
	gone, _, err := prev.cleanUp(f.work, cleanup{runner: r, provisioned: true})
	f.reached = f.reached || prev.reached
	if fl := failure.Classify(err); err != nil && !(fl.GitHub && fl.Status == http.StatusUnprocessableEntity) {
		return nil, err
	}
	if gone {
		return nil, nil
	}
	return r, nil
}

// triedElsewhere runs before the attempt registers its runner. GitHub
// keeps a repository's runners and its organisation's apart: a name taken
// at one scope is free at the other, so the 409 path cannot see a runner
// of this name registered at the scope the pool had before. When the last
// retried attempt tried this very name (job.Record.TriedRunner) at another
// scope than the attempt's (the pool was moved between the repository
// and the organisation since), that runner is looked for there first, one
// call: absent, or removed (keepOrRemove), the attempt registers at the
// new scope; kept, the job is claimed with it where it is
// (DecisionReused), and the next replacement, under a name of its own,
// takes the new scope. Registered beside it instead, the job had two
// runners: on EC2 an offline spare registration, for a dispatch pool two
// hosts. A listing the old scope now refuses for good (the App's access to
// it withdrawn, perhaps the reason for the move) cannot show a runner it
// could remove either: the attempt goes on at the new scope. ended is set
// when the attempt ended here, err being its result.
func (f *flow) triedElsewhere(ctx context.Context) (ended bool, err error) {
	rec := f.rec
	if !f.untried() {
		return false, nil
	}
	prev := *f
	prev.locate(rec.TriedScope)
	r, absent, err := prev.find(f.work)
	f.reached = f.reached || prev.reached
	if fl := failure.Classify(err); err != nil && !fl.Retryable() {
		f.c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim could not look for its runner at the scope it tried before",
			slog.Int64(obs.KeyJobID, rec.JobID), slog.String("runner_name", f.name), slog.String("tried_scope", rec.TriedScope),
			slog.String(obs.KeyClass, fl.Class.String()), slog.String(obs.KeyReason, fl.Reason))
		return false, nil
	}
	if err == nil && !absent {
		r, err = f.keepOrRemove(&prev, r)
	}
	if err != nil {
		return true, f.retryOrFail(ctx, err, nil)
	}
	if absent || r == nil {
		return false, nil
	}
	f.locate(prev.scope)
	return true, f.finish(ctx, job.Outcome{State: job.Claimed, Attempt: f.attempt, RunnerName: r.Name, Scope: f.scope,
		RunnerStartGrace: f.pool.StartGrace()}, DecisionReused, nil,
		slog.Int64("runner_id", r.ID), slog.String("runner_status", r.Status), slog.Bool("runner_busy", r.Busy),
		slog.String("kept_at_scope", f.scope),
		slog.String(obs.KeyReason, "pool "+f.pool.Name+" registers at "+f.pool.Scope+" now; runner "+r.Name+" of an earlier attempt is registered at "+f.scope))
}

// untried reports whether the last retried attempt tried this attempt's
// runner name at another scope than this attempt's, and this attempt has
// not asked for it at its own (register).
func (f *flow) untried() bool {
	rec := f.rec
	return !f.registering && f.name != "" && rec.TriedScope != "" && rec.TriedScope != f.scope &&
		strings.EqualFold(rec.TriedRunner, f.name)
}

// move records the attempt's new pool and its runner's scope under the
// lease (Store.Move) once keptByEarlier allowed the move, before the
// runner is registered under the new pool's name. Without it, a claimer
// that died after registering would leave the record in the old pool: if
// the rename were then rolled back, the next attempt would find the old
// pool serving the job, look for no earlier runner and register a second
// one under the old name. With it, that attempt finds the record's pool
// gone, resolves again and finds this attempt's runner (keptByEarlier).
// A lease lost ends the attempt before it registers anything; a failed
// write leaves the lease to expire (the message comes back and takes it
// over), as a failed Finish does. The move is logged here, once it is
// made: a job kept in its old pool logs its claim's "not moved" alone.
func (f *flow) move(ctx context.Context, stale string) (ended bool, err error) {
	to := f.movedTo()
	if to == "" {
		return false, nil
	}
	switch err := f.c.cfg.Store.Move(ctx, f.lease, to, f.scope, f.now); {
	case errors.Is(err, job.ErrLeaseLost):
		f.leaseLost(ctx)
		return true, nil
	case err != nil:
		return true, f.infra(ctx, "record the moved pool", err)
	}
	f.c.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "claim pool resolved again", slog.Int64(obs.KeyJobID, f.rec.JobID),
		slog.Int(obs.KeyAttempt, f.attempt), slog.String("old_pool", f.rec.Pool), slog.String("new_pool", to),
		slog.String(obs.KeyReason, stale))
	return false, nil
}

// earlier is the flow of this job's earlier attempt that registered its
// runner in the recorded pool, replacement n: that pool as configured or,
// when it left RUNNER_POOLS (renamed), now (the pool this attempt claims
// in) under the recorded name (the provisioner finds an attempt's machines by job and
// runner name), at the scope the record names. With no scope recorded,
// scope is "": the pool's may have changed since, so release looks at
// both.
func (f *flow) earlier(n int, now pool.Pool) *flow {
	return f.earlierIn(f.rec.Pool, f.rec.Scope, n, now)
}

// earlierIn is earlier for a runner registered in pool name at scope
// ("" when unknown: looked for at both).
func (f *flow) earlierIn(name, scope string, n int, now pool.Pool) *flow {
	prev := *f
	p, ok := pool.Find(f.c.cfg.Pools, name)
	if !ok {
		p = now
		p.Name = name
	}
	prev.pool = p
	prev.rec.Replacements = n
	prev.name = job.RunnerNameAt(p.Name, f.rec.JobID, n)
	prev.locate(p.Where(scope))
	if scope == "" {
		prev.scope = ""
	}
	return &prev
}

// find looks for the flow's runner by name: at its scope or, when that is
// unknown (earlier), at both, since a runner registered at one scope is
// "not found" at the other. absent: at neither (an organisation listing
// GitHub refuses, a user account's or an App's without organisation
// runner access, holds none of ours either); err: a failure that kept it
// from telling.
func (f *flow) find(ctx context.Context) (r *ghapp.Runner, absent bool, err error) {
	scopes := []string{f.scope}
	if f.scope == "" {
		scopes = []string{pool.ScopeRepo, pool.ScopeOrg}
	}
	for _, scope := range scopes {
		f.locate(scope)
		found, err := f.github().FindRunner(ctx, f.rec.InstallationID, f.scope, f.owner, f.repo, f.name)
		switch {
		case err == nil:
			return &found, false, nil
		case isNotFound(err):
		case len(scopes) > 1 && scope == pool.ScopeOrg && !failure.Classify(err).Retryable():
		default:
			return nil, false, err
		}
	}
	return nil, true, nil
}

// release removes an earlier attempt's runner as cleanUp does (deleted
// unless busy, its machines ended once it is gone), found where find
// finds it: a machine at work must never be ended on a "not found" from
// the wrong scope. Best effort, as cleanUp is.
func (f *flow) release(ctx context.Context) {
	r, absent, err := f.find(ctx)
	if err != nil {
		f.c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim cleanup failed", slog.Int64(obs.KeyJobID, f.rec.JobID),
			slog.String("step", "find runner"), slog.String(obs.KeyReason, failure.Classify(err).Reason))
		return
	}
	f.cleanUp(ctx, cleanup{runner: r, absent: absent, provisioned: true})
}

// locate sets where the flow's runner is registered: scope, and the
// owner and repository name (none at organisation scope).
func (f *flow) locate(scope string) {
	f.scope, f.owner, f.repo = scope, f.rec.Owner(), ""
	if scope != pool.ScopeOrg {
		f.repo = f.rec.RepoName()
	}
}

// request is the provisioner's request. The JIT config leaves its
// redacting wrapper here, and only here, for its one destination.
func (f *flow) request(config ghapp.Secret) pool.Request {
	return pool.Request{
		JobID: f.rec.JobID, RunID: f.rec.RunID, Repo: f.rec.Repo, Pool: f.pool, RunnerName: f.name,
		Replacement: f.rec.Replacements, JITConfig: config.Reveal(),
	}
}

// register gets a JIT config for the attempt's runner name. GitHub answers
// 409 when the name is taken: by our own runner from an earlier try of
// this attempt (the name is derived from the job and its replacements). Online or busy, that runner is alive
// and is reused (returned as reused); offline with a machine of the job
// still up, the machine holds its config and will connect: reused too;
// offline with no machine, it never will: it is deleted and a new config
// generated.
func (f *flow) register(ctx context.Context) (ghapp.JIT, *ghapp.Runner, error) {
	gh, inst := f.github(), f.rec.InstallationID
	req := ghapp.JITRequest{
		Scope: f.scope, Owner: f.owner, Repo: f.repo, Name: f.name,
		Labels: f.pool.Labels, RunnerGroupID: f.pool.RunnerGroupID,
	}
	jit, err := gh.GenerateJIT(ctx, inst, req)
	if err == nil || !ghapp.IsAlreadyExists(err) {
		return jit, nil, err
	}
	r, err := gh.FindRunner(ctx, inst, f.scope, f.owner, f.repo, f.name)
	switch {
	case err == nil && (r.Busy || r.Status == "online"):
		return ghapp.JIT{}, &r, nil
	case err == nil:
		// Offline: either it never got a machine, or its machine is still
		// booting with this registration's config (a claimer died after
		// provisioning). Deleting it in the second case would strand that
		// machine with a dead config, so ask the provisioner first.
		up, ferr := f.machineUp(ctx)
		if ferr != nil {
			return ghapp.JIT{}, nil, ferr
		}
		if up {
			return ghapp.JIT{}, &r, nil
		}
		if err := gh.DeleteRunner(ctx, inst, f.scope, f.owner, f.repo, r.ID); err != nil {
			if ghapp.IsStillRunning(err) {
				// It came online and took the job between our look and the
				// delete (a dispatch host picked up an earlier message):
				// the runner is ours and at work.
				r.Busy = true
				return ghapp.JIT{}, &r, nil
			}
			if fl := failure.Classify(err); fl.GitHub && fl.Status == http.StatusUnprocessableEntity {
				// Another 422 (GitHub's generic "Validation failed"), or a
				// busy answer worded in a way IsStillRunning does not know:
				// failing the job for good on it could fail one a runner of
				// ours is running, and a retry meets the same name and the
				// same answer. The job is claimed with this runner, as when
				// it is busy: if nothing takes the job, the reclaimer's
				// liveness check starts a new attempt after the pool's
				// runner_start_grace.
				f.c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim could not delete the offline runner of its name: claimed with it, the liveness check replaces it if it never runs",
					slog.Int64(obs.KeyJobID, f.rec.JobID), slog.String("runner_name", r.Name), slog.Int64("runner_id", r.ID),
					slog.String(obs.KeyReason, fl.Reason))
				return ghapp.JIT{}, &r, nil
			}
			return ghapp.JIT{}, nil, err
		}
	case isNotFound(err):
		// Deleted since the 409: register afresh.
	default:
		return ghapp.JIT{}, nil, err
	}
	jit, err = gh.GenerateJIT(ctx, inst, req)
	return jit, nil, err
}

// machineUp reports whether the provisioner knows of a live machine for the
// attempt (EC2 looks by the job and runner-name tags; dispatch cannot tell
// and says no).
func (f *flow) machineUp(ctx context.Context) (bool, error) {
	id, err := f.c.cfg.Provisioner.Running(ctx, f.request(ghapp.Secret{}))
	return id != "", err
}

// retryOrFail classifies a failed attempt. registered is the runner this
// attempt registered, if any.
func (f *flow) retryOrFail(ctx context.Context, err error, registered *ghapp.Runner) error {
	fl := failure.Classify(err)
	if (fl.Class == failure.RateLimit || fl.AppRefused) && fl.Remembered && registered == nil && !f.reached {
		// go-github refused the call itself, from its memory of an
		// earlier answer (perhaps the App's token exchange, which the
		// rate state does not hold as the installation's), or shared/ghapp
		// handed GitHub's refusal of the App's token exchange from its
		// memory (its refusalHold), and no call of this attempt reached
		// GitHub before it: it is no attempt (DESIGN.md: attempt counts
		// the attempts that reached GitHub or the provisioner), and no new
		// refusal to count as app_refused. Deferred to the end of that
		// memory, as a deferral for an exhausted budget, jittered alike.
		resume := fl.ResetAt
		if resume.IsZero() {
			resume = f.c.cfg.Now().Add(fl.RetryAfter)
		}
		if fl.AppRefused && f.rec.FirstFailureAt > 0 {
			// The hold is short (20 s) so that a fix is seen at once, but
			// while the App stays refused, other jobs' attempts keep
			// renewing it: deferred only to its end, every queued job
			// would come back every half minute until the maximum age.
			// A quarter of the time it has been failing, up to the
			// ladder's top rung, bounds both: a few dozen returns over
			// an hour's refusal, and a fix seen within a quarter of the
			// refusal's age (AppRefusedAlarm pages at its start).
			age := f.now.Sub(job.FromMillis(f.rec.FirstFailureAt))
			if wait := f.now.Add(min(age/4, heldDeferralMax)); wait.After(resume) {
				resume = wait
			}
		}
		return f.deferTo(ctx, resume, fl.Class, "deferred: "+fl.Reason)
	}
	if fl.Class == failure.RateLimit && !fl.ResetAt.IsZero() && !fl.TokenExchange && !fl.Remembered {
		// Usually the transport saw the headers already; go-github's own
		// pre-request check answers without a request, so record it here.
		rd := ratelimit.Reading{Remaining: 0, ResetAt: fl.ResetAt, ObservedAt: f.now}
		if l, ok := f.c.cfg.Rates.Latest(f.rec.InstallationID); ok {
			rd.Limit = l.Limit
		}
		f.c.cfg.Rates.Observe(f.rec.InstallationID, rd)
	} else if fl.Secondary() {
		// A secondary limit binds the installation, not this call: no
		// process may call GitHub for it until the block ends (the deferred
		// shareRate tells the others). Timed from the answer, not from the
		// attempt's start.
		f.c.cfg.Rates.Observe(f.rec.InstallationID, ratelimit.Block(f.c.cfg.Now(), fl.RetryAfter))
	}
	if !fl.Retryable() {
		return f.finish(ctx, job.Outcome{State: job.Failed, Attempt: f.attempt, ErrorClass: fl.Class.String(), Error: fl.Reason},
			DecisionFailed, &cleanup{runner: registered, provisioned: registered != nil}, slog.String(obs.KeyClass, fl.Class.String()))
	}
	return f.retry(ctx, fl, registered)
}

// retry hands the job to a new message per the policy, or abandons it.
// The ladder position is the record's attempt count before this attempt
// (every recorded attempt that did not end the job was a retryable
// failure), and first_failure_at comes from the record: both survive
// every re-send.
func (f *flow) retry(ctx context.Context, fl failure.Failure, registered *ghapp.Runner) error {
	in := backoff.Input{Now: f.now, Rung: max(f.attempt-1, 0), Failure: fl, Rand: f.c.cfg.Rand}
	if f.rec.FirstFailureAt > 0 {
		in.FirstFailureAt = job.FromMillis(f.rec.FirstFailureAt)
	}
	d := f.c.cfg.Policy.Next(in)
	if d.GiveUp {
		if f.untried() {
			// This attempt never asked at its scope (its look at the
			// tried one failed): the name's runner, if any, is where it
			// was tried, and looked for at the new scope it would be "not
			// found", left registered, and its machine ended.
			f.locate(f.rec.TriedScope)
		}
		if st, ran := f.ranAtGitHub(ctx, fl); ran {
			// The give-up's cleanup, as for an abandoned job: the job ran
			// on some runner, and this attempt's (found by name) is spare
			// unless it is the one: busy, it is kept, and so are its
			// machines (cleanUp deletes no busy runner and ends no
			// machine of a runner it did not see gone).
			return f.finish(ctx, job.Outcome{State: job.Done, Attempt: f.attempt}, DecisionDone,
				&cleanup{runner: registered, byName: f.name != "", provisioned: f.name != ""},
				slog.String("job_status", st), slog.String(obs.KeyReason, "past the maximum age ("+fl.Reason+"), but GitHub says the job is "+st))
		}
		return f.finish(ctx, job.Outcome{State: job.Abandoned, Attempt: f.attempt, ErrorClass: fl.Class.String(), Error: fl.Reason},
			DecisionAbandoned, &cleanup{runner: registered, byName: fl.Class != failure.RateLimit && f.name != "", provisioned: f.name != ""},
			slog.String(obs.KeyClass, fl.Class.String()), slog.Int64("first_failure_at", job.Millis(d.FirstFailureAt)))
	}
	level, attrs := slog.LevelInfo, []slog.Attr{slog.String(obs.KeyClass, fl.Class.String()), slog.String("basis", string(d.Basis)),
		slog.String(obs.KeyReason, fl.Reason)}
	if fl.AppRefused {
		// Every job of the installation meets it until an operator acts:
		// said once per failed attempt, on its decision line, at error,
		// and counted (app_refused: AppRefusedAlarm pages at once, where
		// the job's give-up would page only past the maximum age).
		level, f.appRefused = slog.LevelError, true
		attrs = append(attrs, slog.String("cause", causeGitHubApp), slog.Int64("installation_id", f.rec.InstallationID),
			slog.String("hint", hintGitHubApp))
	}
	// The pool this attempt moved the job to goes with the retry: the next
	// attempt claims there (its 409 path finds this attempt's runner under
	// its name) whatever RUNNER_POOLS says by then.
	r := job.Retry{Attempt: f.attempt, FirstFailureAt: d.FirstFailureAt, ErrorClass: fl.Class.String(), Error: fl.Reason,
		Pool: f.movedTo()}
	if f.registering && f.scope != "" {
		// Where this attempt's runner is, if it got that far: the next
		// attempt under its name looks there should the pool's scope
		// change meanwhile (triedElsewhere). An attempt that failed
		// before it asked (its look at the tried scope, a status check)
		// leaves the pair as it was: recorded at the new scope, nothing
		// there yet, it would hide the runner at the old one.
		r.Runner, r.Scope = f.name, f.scope
	}
	return f.handOff(ctx, level, d.Delay, f.attempt, r, DecisionRetry, attrs...)
}

// ranAtGitHub asks GitHub, once, whether a job the retry is about to
// abandon at the maximum age has run after all (status in_progress or
// completed): cancelled while it was retried, or taken by a runner,
// while the delivery that says so was lost, or skipped because no pool
// serves the job now (its pool stopped allowing public repositories, or
// was relabelled). Marked done instead, its give-up pages nobody
// (GiveUpsAlarm) for a job that did not wait in vain. Not asked when
// the failure was GitHub refusing the installation's budget or the App
// itself, nor while the installation's budget is exhausted (DESIGN: no
// call then); any failure of the question abandons the job as before.
// GitHub's rate limits on the installation are the rate state's to tell (a
// primary limit's reading, a secondary limit's block: recorded before the
// retry gets here); one on the App's token exchange is not (it is the
// App's budget), and the question would need an exchange: not asked. An
// App refusal is answered from the client's memory of it (refusalHold),
// with no request. An AWS throttle is no reason not to ask.
func (f *flow) ranAtGitHub(ctx context.Context, fl failure.Failure) (string, bool) {
	if fl.TokenExchange && fl.Class == failure.RateLimit {
		return "", false
	}
	rd, err := f.c.reading(ctx, f.rec.InstallationID, f.now)
	if err != nil {
		f.c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim rate state unreadable",
			slog.Int64(obs.KeyJobID, f.rec.JobID), slog.String("error", err.Error()))
	}
	if rd.Halted(f.now) {
		return "", false
	}
	if !f.sharing {
		// A retry decided before the attempt reached GitHub (no pool has
		// the job's labels): the question is its only call.
		defer f.shareRate(ctx)
	}
	st, err := f.github().JobStatus(f.work, f.rec.InstallationID, f.rec.Owner(), f.rec.RepoName(), f.rec.JobID)
	if err != nil {
		// A rate limit met here is the rate transport's to record, from
		// the answer's headers (a secondary limit's Retry-After too).
		f.c.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "claim could not ask GitHub whether the job it gives up ran",
			slog.Int64(obs.KeyJobID, f.rec.JobID), slog.String(obs.KeyReason, failure.Classify(err).Reason))
		return "", false
	}
	return st, st == "in_progress" || st == "completed"
}

// heldDeferralMax bounds the deferral of a claim that met only a held App
// refusal (retryOrFail): the default ladder's top rung.
const heldDeferralMax = 10 * time.Minute

// causeGitHubApp is the "cause" of a retry line whose attempt GitHub's
// token exchange refused (failure.Failure.AppRefused): the App's key or
// id, or its installation, is wrong. The job is retried on the ladder
// until the maximum age, not failed: no job is at fault, and fixing the
// App brings every such job in without a `ghclaim retry` for each.
const causeGitHubApp = "github_app"

// hintGitHubApp tells the operator where to look; it names settings,
// never their values.
const hintGitHubApp = "GitHub refused the App's installation token: check GITHUB_APP_ID and the private key in its secret " +
	"(a key rotated on GitHub), and that the App is still installed, and not suspended, on the job's account; " +
	"jobs are retried until MAX_AGE"

// deferRate defers a claim whose installation has no budget left, or is
// blocked by a secondary limit, without calling GitHub: to the reset (or
// the block's end, whichever is later) plus the policy's snap jitter. Not an
// attempt (the ladder does not advance), but it counts toward the maximum
// age: the first deferral starts the clock (first_failure_at, when no
// failure did), and a deferral past the maximum age abandons the job.
func (f *flow) deferRate(ctx context.Context, rd ratelimit.Reading) error {
	resume := rd.ResumeAt(f.now)
	reason := "deferred: installation rate limit exhausted until " + resume.UTC().Format(time.RFC3339)
	if resume.Equal(rd.BlockedUntil) {
		reason = "deferred: installation blocked by a GitHub secondary rate limit until " + resume.UTC().Format(time.RFC3339)
	}
	return f.deferTo(ctx, resume, failure.RateLimit, reason)
}

// deferTo defers the claim, unattempted, to resume plus the policy's snap
// jitter (deferRate), or abandons it past the maximum age; class is
// recorded as the failure's (rate_limit, or unknown_retryable for a held
// App refusal).
func (f *flow) deferTo(ctx context.Context, resume time.Time, class failure.Class, reason string) error {
	in := backoff.Input{
		Now: f.now, Rung: f.rec.Attempt, Rand: f.c.cfg.Rand,
		Failure: failure.Failure{Class: failure.RateLimit, ResetAt: resume},
	}
	if f.rec.FirstFailureAt > 0 {
		in.FirstFailureAt = job.FromMillis(f.rec.FirstFailureAt)
	}
	// The policy's reset rule gives reset + jitter and its age rule the
	// give-up; the rung it returns is not stored, because nothing was
	// attempted.
	d := f.c.cfg.Policy.Next(in)
	if d.GiveUp {
		// The budget is exhausted: no GitHub call, so an earlier attempt's
		// registration is not looked up by name (see the package doc); the
		// provisioner's leftovers are removed.
		// Nothing is removed when the attempt has no pool yet (its
		// recorded pool no longer serves it, and nothing was resolved): a
		// runner an earlier attempt registered while that pool served the
		// job (since refused by its policy) is left to the janitor, which
		// knows the pool while it is configured.
		return f.finish(ctx, job.Outcome{State: job.Abandoned, Attempt: f.rec.Attempt, ErrorClass: class.String(), Error: reason},
			DecisionAbandoned, &cleanup{provisioned: f.rec.Attempt > 0 && f.name != ""},
			slog.String(obs.KeyClass, class.String()), slog.Int64("first_failure_at", job.Millis(d.FirstFailureAt)))
	}
	return f.handOff(ctx, slog.LevelInfo, d.Delay, f.rec.Attempt, job.Retry{
		Attempt: f.rec.Attempt, FirstFailureAt: d.FirstFailureAt, ErrorClass: class.String(), Error: reason,
	}, DecisionDeferred, slog.String(obs.KeyClass, class.String()), slog.Int64("reset_at", job.Millis(resume)),
		slog.Int64("first_failure_at", job.Millis(d.FirstFailureAt)))
}

// handOff sends the job's next message, then releases the record to it,
// then leaves the original unreported (the event source mapping deletes
// it): in this order, so a crash in between leaves
// a duplicate (dropped by its version) rather than no message at all.
func (f *flow) handOff(ctx context.Context, level slog.Level, delay time.Duration, attempt int, r job.Retry, decision string, attrs ...slog.Attr) error {
	next := job.Message{JobID: f.rec.JobID, Version: f.lease.Version + 1, Attempt: attempt}
	secs, nb := backoff.Split(f.now, f.now.Add(delay))
	if !nb.IsZero() {
		next.NotBefore = job.Millis(nb)
	}
	if err := f.c.cfg.Queue.Send(ctx, next, time.Duration(secs)*time.Second); err != nil {
		// The lease stays: it expires and the reclaimer re-enqueues the job.
		f.decide(ctx, slog.LevelError, DecisionHandOffLost, slog.String("error", err.Error()))
		return err
	}
	r.Version = next.Version
	r.Due = f.now.Add(delay)
	if !nb.IsZero() {
		r.Due = nb
	}
	if err := f.c.cfg.Store.Release(ctx, f.lease, r, f.now); err != nil {
		if errors.Is(err, job.ErrLeaseLost) {
			f.leaseLost(ctx)
			return nil
		}
		f.decide(ctx, slog.LevelError, DecisionHandOffLost, slog.String("error", err.Error()))
		return err
	}
	f.decide(ctx, level, decision, append(attrs, slog.Int64(obs.KeyDelay, delay.Milliseconds()),
		slog.Int64("next_version", next.Version), slog.Int64("not_before", next.NotBefore))...)
	return nil
}

// cleanup is what a claim that ends without a runner takes back, after
// its fenced Finish succeeded.
type cleanup struct {
	runner      *ghapp.Runner // registered by this attempt
	byName      bool          // look for an earlier attempt's registration by name
	absent      bool          // GitHub said already that the runner is not there
	provisioned bool          // let the provisioner remove what it left
}

// finish ends the claim with a fenced write, then (only then) cleans up.
func (f *flow) finish(ctx context.Context, o job.Outcome, decision string, cu *cleanup, attrs ...slog.Attr) error {
	if o.Scope == "" {
		// Where this attempt's runner is (or would be) registered: the
		// reclaimer's checks and a retried job's next attempt look there,
		// whatever the pool's scope becomes ("" when it never got that far).
		o.Scope = f.scope
	}
	if o.Pool == "" {
		o.Pool = f.movedTo()
	}
	if err := f.c.cfg.Store.Finish(ctx, f.lease, o, f.now); err != nil {
		if errors.Is(err, job.ErrLeaseLost) {
			f.leaseLost(ctx)
			if o.State == job.Claimed {
				f.releaseSpare(ctx)
			}
			return nil
		}
		return f.infra(ctx, "finish claim", err)
	}
	level := slog.LevelInfo
	if o.State == job.Failed || o.State == job.Abandoned {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String(obs.KeyReason, o.Error))
	}
	f.decide(ctx, level, decision, attrs...)
	if cu != nil {
		f.cleanUp(ctx, *cu)
	}
	return nil
}

// releaseSpare runs when this attempt registered a runner and started its
// machine but lost the lease before recording it. Usually somebody else
// owns the job now (a reclaimer, a later claimer) and will find our runner
// through the 409 path: leave everything. Only when the record says done,
// and names no runner or another runner than ours (the job was cancelled,
// or taken by a runner that is not ours), is our runner spare: it would
// otherwise idle on its machine, or take some other job. Its registration
// is removed (unless it is busy) and the provisioner cleans up, so the
// machine's runner cannot connect and the machine powers off.
func (f *flow) releaseSpare(ctx context.Context) {
	rec, err := f.c.cfg.Store.Get(ctx, f.rec.JobID)
	if err != nil || rec.State != job.Done || strings.EqualFold(rec.RunnerName, f.name) {
		return
	}
	f.c.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "claim releases a spare runner",
		slog.Int64(obs.KeyJobID, f.rec.JobID), slog.String("runner_name", f.name), slog.String("taken_by", rec.RunnerName))
	f.count(metricSpareReleased)
	f.cleanUp(ctx, cleanup{byName: true, provisioned: true})
}

// releasePrevious, on each try after an operator's retry until a
// replacement, removes the last attempt's runner when it is idle or
// offline, and that attempt's machines once it is gone. The retry
// registers a runner under a name of its own (store.Requeue: the old one
// may be at work on another job, and is then left alone); an idle old one
// would otherwise wait beside the new one, a second machine for the job.
// Not only on the retry's first try: that try may count and fail before it
// comes here (its pool resolved again, the repository read refused), and
// the record keeps no mark of a release. A release already done costs one
// look (the runner is gone). Best effort, as cleanUp is.
func (f *flow) releasePrevious(ctx context.Context) {
	r := f.rec
	if r.Replacements == 0 || r.Replacements != r.ReplacementsBase || !retriedByOperator(r) {
		return
	}
	// Named after the recorded pool: the retry may claim in another
	// (resolve), but the last attempt registered there.
	prev := f.earlier(r.Replacements-1, f.pool)
	if in, ok := strings.CutSuffix(r.RunnerName, job.RunnerNameAt("", r.JobID, r.Replacements-1)); ok && in != "" && !strings.EqualFold(r.RunnerName, prev.name) {
		// Unless the record moved since (a try of this retry resolved its
		// pool again and recorded the new one: Store.Move, or its retry's
		// pool, and then died or failed before it got here): the record's
		// runner is the last attempt's, registered in its old pool, at a
		// scope the move may have overwritten, so looked for at both.
		// Looked for under the new pool's name, it was never found, and it
		// waited beside the retry's own runner on a second machine.
		prev = f.earlierIn(in, "", r.Replacements-1, f.pool)
	}
	prev.release(ctx)
	f.reached = f.reached || prev.reached
}

// retriedByOperator tells an operator's retry (store.Requeue) from the
// webhook's Swap, which raises replacements_base with replacements too:
// a swapped job's last runner is busy on the job that took it, and
// looking for it on every attempt is a GitHub listing for nothing (in a
// burst, on every swapped job). The retry's first try (attempt 0), or a
// later one whose history still holds the operator's entry after any of
// the webhook's; a history that no longer reaches back that far
// (job.MaxHistory) stops the look, as the first try alone did before.
func retriedByOperator(r job.Record) bool {
	if r.Attempt == 0 {
		return true
	}
	for i := len(r.History) - 1; i >= 0; i-- {
		switch r.History[i].Actor {
		case job.ActorOperator:
			return true
		case job.ActorWebhook:
			return false
		}
	}
	return false
}

// cleanUp removes the runner registration and provisioned leftovers of a
// claim that ended without a runner. Best effort: a failure is logged (an
// offline registration that never connects does no harm but clutter).
// gone tells that the runner is absent or was deleted now, busy that it
// is at work; neither, err is GitHub's failure that kept it from telling.
func (f *flow) cleanUp(ctx context.Context, cu cleanup) (gone, busy bool, err error) {
	gh, inst := f.github(), f.rec.InstallationID
	fail := func(what string, err error) {
		fl := failure.Classify(err)
		f.c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim cleanup failed", slog.Int64(obs.KeyJobID, f.rec.JobID),
			slog.String("step", what), slog.String(obs.KeyClass, fl.Class.String()), slog.String(obs.KeyReason, fl.Reason))
	}
	// gone: GitHub said the job's runner is absent, or deleted it now. Only
	// then may the provisioner end the job's machines; a runner that is
	// busy, or whose state is unknown, may be running a job on one.
	r, gone := cu.runner, cu.absent
	if r == nil && cu.byName && !gone {
		found, ferr := gh.FindRunner(ctx, inst, f.scope, f.owner, f.repo, f.name)
		switch {
		case ferr == nil:
			r = &found
		case isNotFound(ferr):
			gone = true
		default:
			fail("find runner", ferr)
			err = ferr
		}
	}
	if r != nil {
		busy = r.Busy
		if !busy {
			derr := gh.DeleteRunner(ctx, inst, f.scope, f.owner, f.repo, r.ID)
			switch {
			case derr == nil:
				gone = true
			case ghapp.IsStillRunning(derr):
				busy = true // it took a job between the look and the delete
			default:
				fail("delete runner", derr)
				err = derr
			}
		}
	}
	if cu.provisioned {
		// The configuration always goes (a machine that already read it
		// deleted it; one that has not will never run this job).
		req := f.request(ghapp.Secret{})
		req.KeepMachines = busy || !gone
		if perr := f.c.cfg.Provisioner.Cleanup(ctx, req); perr != nil {
			fail("provisioner cleanup", perr)
		}
	}
	return gone, busy, err
}

// shareRate shares this process's reading after an attempt that reached
// GitHub, when the persist rule says another claimer's decision depends on it.
func (f *flow) shareRate(ctx context.Context) {
	shared, err := f.c.cfg.Rates.Persist(ctx, f.rec.InstallationID)
	if shared {
		rd, _ := f.c.cfg.Rates.Latest(f.rec.InstallationID)
		f.c.rateGauges(f.rec.InstallationID, rd, f.now)
	}
	if err != nil {
		f.c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim rate state not shared",
			slog.Int64(obs.KeyJobID, f.rec.JobID), slog.String("error", err.Error()))
	}
}

func (f *flow) leaseLost(ctx context.Context) {
	f.decide(ctx, slog.LevelWarn, DecisionLeaseLost)
}

// infra handles an infrastructure error: the message comes back soon
// (a batch item failure), and its version decides then. "Soon" is
// RetrySoon doubled for each earlier receive of the message (its
// ApproximateReceiveCount), at most MaxRetrySoon, plus up to as much again
// at random: in lockstep, every message of a throttled table would come
// back together, fail together, and reach the dead-letter queue together;
// and each receive counts toward the queue's maxReceiveCount (5), which a
// flat 10–20 s reached in about a minute of throttling: every claim in
// flight dead-lettered (found again only after the queued grace, 15 min,
// with the DLQ alarm up). Doubling, four failed receives span 150–300 s.
func (f *flow) infra(ctx context.Context, step string, err error) error {
	f.decide(ctx, slog.LevelError, DecisionInfraError, slog.String("step", step), slog.String("error", err.Error()))
	base := soonAfter(f.c.cfg.RetrySoon, receives(f.sm))
	soon := base + time.Duration(f.c.cfg.Rand.Float64()*float64(base))
	if rerr := f.c.cfg.Queue.RetryAfter(ctx, f.sm.ReceiptHandle, soon); rerr != nil {
		f.c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "claim retry-after failed", slog.String("message_id", f.sm.MessageId), slog.String("error", rerr.Error()))
	}
	return errorf("%s: %w", step, err)
}

// MaxRetrySoon caps the wait after an infrastructure error before its
// jitter, well inside the queued grace (after which the reclaimer sends
// the job again).
const MaxRetrySoon = 5 * time.Minute

// soonAfter is base doubled for each receive before the n-th, at most
// MaxRetrySoon.
func soonAfter(base time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < MaxRetrySoon; i++ {
		d *= 2
	}
	return min(d, max(base, MaxRetrySoon))
}

// receives is m's ApproximateReceiveCount (this receive included), 1 when
// the event does not carry it.
func receives(m events.SQSMessage) int {
	n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// decide logs one decision with the message's identity.
func (f *flow) decide(ctx context.Context, level slog.Level, decision string, attrs ...slog.Attr) {
	base := []slog.Attr{slog.String("decision", decision), slog.String("message_id", f.sm.MessageId)}
	if f.msg.JobID != 0 {
		base = append(base, slog.Int64(obs.KeyJobID, f.msg.JobID), slog.Int64(obs.KeyVersion, f.msg.Version), slog.Int(obs.KeyAttempt, f.attempt))
	}
	f.c.cfg.Logger.LogAttrs(ctx, level, "claim "+decision, f.decided(ctx, level, decision, append(base, attrs...))...)
}

package reclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// Liveness after the claim. A claimed record stays in the sweep index with
// sweep_at = claimed_at + the pool's runner-start grace until GitHub says a
// runner took the job (the webhook's in_progress marks it done). When the
// sweep finds one past its grace (the sweep's consistent read of the record
// carries its identity) the reclaimer decides:
//
//   - the installation's rate reading is exhausted or blocked (a
//     secondary limit): GitHub is not asked; the check moves to the reset
//     or the block's end plus the 5–25 s snap jitter, uncounted. A check
//     whose own call meets the limit moves the same way; any other failed
//     call moves it one grace.
//   - GitHub is asked first for the attempt's runner (job.RunnerNameAt:
//     <pool>-<job>, or <pool>-<job>-r<n> after n replacements; one call). Online
//     and idle: GitHub has not assigned yet; check again after another
//     grace, at most MaxLivenessChecks times, then treat it as offline.
//   - offline, missing, or busy: the job's status decides (a second call,
//     only then: GitHub's runner object does not say which job a busy runner
//     runs). In progress or completed: done (the delivery was missed).
//     Still queued and the runner offline or missing: a new attempt (the
//     machine never booted, or the runner died). Still queued and the
//     runner busy: it was taken by another job, a new attempt too (see
//     below).
//
// Checks start only in the third quarter of a pass's budget (collection
// has the first half): the take-backs sent after them are what every other
// stale record waits for, and slow GitHub answers must not starve them.
// Oldest sweep_at first; and one check runs in every pass with budget left,
// even when collection overran its half, so slow table reads cannot leave
// every claimed record unchecked pass after pass.
//
// Call budget per claimed record past its grace: one call (idle runner),
// two (offline, missing, busy), plus one delete for a new attempt; none when
// the installation is exhausted or blocked. A GitHub error pushes the
// check by one grace, uncounted, so a broken installation costs one call
// per grace; a rate limit met pushes it to the limit's end instead. A job
// GitHub holds (waiting for reviewers, pending) is parked (see park): its
// looks back off to one an hour, each one status call.
//
// A new attempt first removes the old attempt: the runner is deleted
// busy-safe (GitHub's 422 on a busy runner means leave it) and the
// provisioner's Cleanup ends the old attempt's machines unless the runner
// may be at work (busy, or its delete refused: KeepMachines). When the
// removal failed (the delete or the clean-up met an error) the new attempt
// waits: the record stays claimed and is checked again after a grace, like
// any failed call of the check, since the old machine may still be up and
// a job has at most one live machine (make chaos counted two). Otherwise
// the new attempt does not depend on that removal: its runner has a name of its
// own (replacements+1), and the provisioner finds, and ends, machines per
// attempt (job and runner-name tags), so the new claimer neither meets the
// old runner's name nor reuses the old machine; its new registration's JIT
// config gives a new EC2 ClientToken (FleetKey).
// Then the record goes back to queued with the conditional take-back on the
// version read (replacements+1, max-age clock started; the claimer's next
// attempt advances the ladder) and the
// message is sent with the pass's spread, like any other take-back. Past
// MaxReplacements or max age the record is abandoned instead.
//
// A runner taken by another job keeps its name and its machine while it
// runs that job: neither is touched (the runner is not deleted, its
// machine not ended; it is ephemeral, it deregisters and the machine
// powers off after the other job). The job gets a new attempt at once
// (RunnerTaken, counted in RunnersTaken too), under the next runner name
// and on a machine of its own, bounded like any replacement. The webhook
// usually got there first: an in_progress for the other job naming our
// runner sends the job back at once (shared/webhook), and this check is
// the backstop for a delivery that never arrived.

// Liveness reasons of a new attempt for a claimed record.
const (
	// RunnerLost: claimed past its grace, the job still queued at GitHub,
	// and our runner offline, missing, or idle past MaxLivenessChecks.
	RunnerLost Reason = "runner_lost"
	// RunnerTaken: claimed past its grace, the job still queued at
	// GitHub, and our runner busy with another job.
	RunnerTaken Reason = "runner_taken"
)

// Defaults of the liveness bounds.
const (
	DefaultMaxReplacements   = job.DefaultMaxReplacements
	DefaultMaxLivenessChecks = 3
	// DefaultMaxParkedInterval: a job GitHub holds for days costs one
	// call an hour at most (its queued delivery after the approval brings
	// the look forward: shared/webhook).
	DefaultMaxParkedInterval = time.Hour
)

// liveness decides a claimed record past its grace (see above). It returns
// the candidate to take back (requeue or abandon) and which, or "" when the
// record was settled here (done, checked again) or left alone.
// window is the part of a pass the liveness checks' calls may take: ctx
// (for GitHub and the provisioner) ends at end.
type window struct {
	ctx    context.Context
	end    time.Time
	cancel context.CancelFunc
}

// window is a window ending at end on the pass's clock (now is its
// reading at the pass's start), its context ending then on the wall clock.
func (r *Reclaimer) window(ctx context.Context, now, end time.Time) window {
	w := window{end: end}
	w.ctx, w.cancel = context.WithDeadline(ctx, time.Now().Add(end.Sub(now)))
	return w
}

// cut reports whether a call of a check failed because the check's
// window ended under it (w's context), not the invocation's.
func cut(ctx context.Context, w window) bool { return w.ctx.Err() != nil && ctx.Err() == nil }

// late reports whether a check must stop before its next call (the
// window is over) and, if so, counts the pass incomplete.
func (r *Reclaimer) late(ctx context.Context, w window, rep *Report) bool {
	if r.past(ctx, w.end) || w.ctx.Err() != nil {
		rep.Incomplete = true
		return true
	}
	return false
}

func (r *Reclaimer) liveness(ctx context.Context, w window, c candidate, now time.Time, rep *Report) (candidate, job.State, error) {
	rec := c.rec // whole and current: the sweep read it consistently
	log := r.decisionLog(c)
	p, ok := pool.Find(r.cfg.Pools, rec.Pool)
	if !ok {
		p, ok = r.renamed(rec)
	}
	grace := job.StartGrace(p.StartGrace()) // the default when the pool is unknown
	if r.cfg.GitHub == nil {
		// Nothing to ask with: look again later rather than every pass.
		log.WarnContext(ctx, "reclaim cannot check a claimed job", slog.String("pool", rec.Pool), slog.Bool("pool_known", ok))
		if !ok {
			return r.blocked(ctx, c, "pool "+rec.Pool+" is not configured", grace, now, rep)
		}
		return c, "", r.recheck(ctx, c, now.Add(grace), job.CheckSkipped, now, rep)
	}
	if rd, halted := r.rate(ctx, rec.InstallationID, now, log); halted {
		// Looked at again as soon as GitHub may be asked, with the jitter
		// the claimers' deferrals get: sooner would be deferred again, and a
		// fixed margin past the end left the job without a runner for that
		// long (a minute, where the end was seconds away).
		resume := rd.ResumeAt(now)
		due := resume.Add(backoff.SnapJitter(r.cfg.Rand.Float64()))
		rep.LivenessRateLimited++
		log.WarnContext(ctx, "reclaim liveness check deferred: installation rate limit exhausted or blocked",
			slog.Int64("installation_id", rec.InstallationID), slog.Time("reset_at", resume))
		return c, "", r.recheck(ctx, c, due, job.CheckSkipped, now, rep)
	}
	defer r.shareRate(ctx, rec.InstallationID, log)
	if !ok {
		// The pool left RUNNER_POOLS (removed, or renamed with no pool
		// serving the job's labels now, or a record keeping no scope)
		// with the job claimed: its runner cannot be judged, but GitHub's
		// word on the job needs no pool. A job a runner of ours took meanwhile (the
		// webhook no longer serves its deliveries) is done; anything else
		// is blocked, abandoned at max age. It was abandoned even when it
		// had run.
		log.WarnContext(ctx, "reclaim cannot check a claimed job's runner", slog.String("pool", rec.Pool), slog.Bool("pool_known", false))
		if _, stop, nc, to, err := r.askStatus(ctx, w, c, grace, now, rep, log); stop {
			return nc, to, err
		}
		return r.blocked(ctx, c, "pool "+rec.Pool+" is not configured", grace, now, rep)
	}
	name := job.RunnerNameAt(p.Name, rec.JobID, rec.Replacements)
	scope, owner, repo := p.Where(rec.Scope), rec.Owner(), rec.RepoName()
	if scope == pool.ScopeOrg {
		repo = ""
	}
	status, asked := "", false
	if rec.Waits > 0 {
		// Parked at the last look: GitHub's word on the job comes first
		// (one call). Still held, it is parked again, further out; its
		// runner is looked at only once GitHub queues the job.
		st, stop, nc, to, err := r.askStatus(ctx, w, c, grace, now, rep, log)
		if stop {
			return nc, to, err
		}
		if notYet(st) {
			return r.park(ctx, c, st, name, grace, now, log, rep)
		}
		status, asked = st, true
		if r.late(ctx, w, rep) {
			return c, "", r.recheck(ctx, c, now, job.CheckSkipped, now, rep)
		}
	}
	runner, ferr := r.cfg.GitHub.FindRunner(w.ctx, rec.InstallationID, scope, owner, repo, name)
	missing := errors.Is(ferr, ghapp.ErrRunnerNotFound)
	if ferr != nil && !missing {
		if cut(ctx, w) && errors.Is(ferr, context.DeadlineExceeded) {
			return r.failed(ctx, w, c, ferr, grace, now, rep) // not GitHub's failure: not counted
		}
		r.noteBlock(rec.InstallationID, ferr)
		rep.LivenessFailed++
		log.WarnContext(ctx, "reclaim liveness check failed", slog.String("step", "find runner"), slog.Any("err", ferr))
		return r.failed(ctx, w, c, ferr, grace, now, rep)
	}
	idle := !missing && runner.Status == "online" && !runner.Busy
	if idle && rec.LivenessChecks < r.cfg.MaxLivenessChecks {
		rep.LivenessChecks++
		log.InfoContext(ctx, "reclaim liveness: runner online and idle, check again", slog.String("runner_name", name),
			slog.Int("liveness_checks", rec.LivenessChecks+1))
		return c, "", r.recheck(ctx, c, now.Add(grace), job.CheckIdle, now, rep)
	}
	if r.late(ctx, w, rep) {
		// Nothing removed yet: looked at again by the next pass, whose
		// sends this one's overrun must not eat.
		return c, "", r.recheck(ctx, c, now, job.CheckSkipped, now, rep)
	}
	if !asked || (!missing && runner.Busy) {
		// A parked look asked the status before the runner: a runner
		// busy now may have taken this very job since (GitHub queued it
		// to our idle runner); the status is asked again, after the
		// runner, as the ordinary look asks it.
		st, stop, nc, to, err := r.askStatus(ctx, w, c, grace, now, rep, log)
		if stop {
			return nc, to, err
		}
		status = st
	}
	if notYet(status) {
		// GitHub holds the job but gives it to no runner yet: waiting for
		// an environment's reviewers (up to 30 days), pending behind a
		// concurrency group. No runner of ours is missing it: nothing is
		// removed or counted, the max-age clock stops and the idle checks
		// start over (job.CheckWaiting: the wait is GitHub's, and a job
		// that failed once before its claim was abandoned as past max age
		// right after its approval), and the record is looked at again
		// after a grace (an idle runner's machine powers itself off).
		// Once GitHub queues the job, a check finds its runner gone or
		// idle and starts an attempt; a new attempt for each wait would
		// spend the replacements and abandon the job before the approval.
		return r.park(ctx, c, status, name, grace, now, log, rep, slog.Bool("runner_missing", missing))
	}
	c.reason = RunnerLost
	if !missing && runner.Busy {
		r.taken(ctx, &c, name, status, log, rep)
	}
	// The old attempt goes first (busy-safe: a busy runner and its machine
	// stay).
	if r.late(ctx, w, rep) {
		// An old attempt is removed only with time left to take the
		// record back and send it: removed and not re-sent, the job would
		// wait with nothing running for it.
		return c, "", r.recheck(ctx, c, now, job.CheckSkipped, now, rep)
	}
	removed, took, wasCut := r.removeAttempt(ctx, w, c, p, scope, owner, repo, name, runner, missing, log, rep)
	if wasCut {
		// Cut by the check's own window, not a failure of GitHub's or the
		// provisioner's: the next pass looks again (the old attempt may
		// or may not be gone: it checks anew).
		rep.Incomplete = true
		return c, "", r.recheck(ctx, c, now, job.CheckSkipped, now, rep)
	}
	if took {
		// The runner took a job between the look and the delete: ours (a
		// new attempt would give it a second runner) or another's. GitHub
		// says which.
		if r.late(ctx, w, rep) {
			return c, "", r.recheck(ctx, c, now, job.CheckSkipped, now, rep)
		}
		st, stop, nc, to, err := r.askStatus(ctx, w, c, grace, now, rep, log)
		if stop {
			return nc, to, err
		}
		if status = st; notYet(status) {
			// Queued at the look, held by GitHub now (reviewers): the
			// runner went to another job, ours waits for none: parked,
			// as at the first status.
			return r.park(ctx, c, status, name, grace, now, log, rep, slog.Bool("runner_missing", missing))
		}
		r.taken(ctx, &c, name, status, log, rep)
	}
	if !job.Replaceable(rec, now, r.cfg.MaxReplacements, r.cfg.MaxAge) {
		c.why = fmt.Sprintf("reclaimer: %s after %d replacements (cap %d, max age %s)", c.reason, rec.Replacements, r.cfg.MaxReplacements, r.cfg.MaxAge)
		return c, job.Abandoned, nil
	}
	if !removed {
		// The old machine may still be up: a new attempt now would give
		// the job two. Like any failed call of the check, look again after
		// a grace; and the max-age clock starts (job.CheckBlocked): a
		// removal that never succeeds (a permission missing, a long
		// outage) must end in an abandon at max age, with its alarm, not
		// in a job claimed until its TTL while GitHub fails it at 24 h.
		log.WarnContext(ctx, "reclaim liveness: old attempt not removed, new attempt deferred", slog.String("runner_name", name))
		return c, "", r.recheck(ctx, c, r.afterFailure(rec.InstallationID, now, grace), job.CheckBlocked, now, rep)
	}
	log.InfoContext(ctx, "reclaim liveness: new attempt", slog.String("runner_name", name), slog.String("job_status", status),
		slog.String("runner_status", runner.Status), slog.Bool("runner_busy", runner.Busy), slog.Bool("runner_missing", missing),
		slog.Int("replacements", rec.Replacements))
	return c, job.Queued, nil
}

// renamed stands in for a claimed record's pool that left RUNNER_POOLS
// (renamed, say) with the pool that serves the job's labels now, by the
// webhook's rule, under the recorded name: the claim registered the
// runner under that name, at the scope the record keeps, and the machine
// is asked of the provisioner the pool has now under that name, as the
// claimer asks for an earlier attempt's (EC2's finds machines by job and
// runner name; a dispatch pool's finds none). The check then judges the
// runner as any other: one that never took the job is replaced, and the
// claimer moves the new attempt to the pool that serves the job. Without
// it, such a job was held until max age and abandoned, never run. Only
// when the record names the scope (every claim since runner_scope was
// kept): looked for at a guessed scope, "not found" could end the machine
// of a runner at work at the other. ok is false when no pool serves the
// labels: the job is then judged by GitHub's word alone, as before.
func (r *Reclaimer) renamed(rec job.Record) (p pool.Pool, ok bool) {
	if (rec.Scope != pool.ScopeRepo && rec.Scope != pool.ScopeOrg) || len(rec.Labels) == 0 {
		return pool.Pool{}, false
	}
	// Not the public-repo policy: the runner is ours whatever the pool
	// allows now, and only its name, scope and machines are asked.
	p, why := pool.Serve(r.cfg.Pools, rec.Labels, pool.Repository{FullName: rec.Repo, UserOwned: rec.UserOwned})
	if why != "" {
		return pool.Pool{}, false
	}
	p.Name = rec.Pool
	return p, true
}

// failed looks at a claimed record again after its check failed with err:
// after a grace (or the rate limit's end) for a passing failure; as a
// blocked check (see blocked) when GitHub refused for good (non_retryable:
// the repository, the job or the installation's access gone), which no
// later look would change, or refused the App's token exchange
// (failure.Failure.AppRefused: its key, id or installation), which only an
// operator changes: retryable for the claimer, which no job's fault is,
// but as a check it waits on the operator like a blocked one, so the
// max-age clock bounds it too.
func (r *Reclaimer) failed(ctx context.Context, w window, c candidate, err error, grace time.Duration, now time.Time, rep *Report) (candidate, job.State, error) {
	if cut(ctx, w) && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		// Cut by the check's own window, not a failure of GitHub's: the
		// next pass looks again. (GitHub's own answer, even one that came
		// late, is judged as any other.)
		rep.Incomplete = true
		return c, "", r.recheck(ctx, c, now, job.CheckSkipped, now, rep)
	}
	if fl := failure.Classify(err); fl.Class == failure.NonRetryable || fl.AppRefused {
		return r.blocked(ctx, c, "github: "+fl.Reason, grace, now, rep)
	}
	return c, "", r.recheck(ctx, c, r.afterFailure(c.rec.InstallationID, now, grace), job.CheckSkipped, now, rep)
}

// blocked handles a claimed record whose check cannot be made until
// something changes (why): the first such check starts the max-age clock
// (first_failure_at), and once the record is past max age it is
// abandoned, as a job failing that long is anywhere else. Before, it was
// looked at every grace until its TTL, staying claimed for a week. Its
// runner and machine are left: nobody can say they are idle (a machine
// ends itself at its idle limit; the janitor takes the config).
func (r *Reclaimer) blocked(ctx context.Context, c candidate, why string, grace time.Duration, now time.Time, rep *Report) (candidate, job.State, error) {
	if PastMaxAge(c.rec, now, r.cfg.MaxAge) {
		c.why = fmt.Sprintf("reclaimer: its runner cannot be checked (%s) since %s, past max age %s",
			why, job.FromMillis(c.rec.FirstFailureAt).UTC().Format(time.RFC3339), r.cfg.MaxAge)
		return c, job.Abandoned, nil
	}
	return c, "", r.recheck(ctx, c, now.Add(grace), job.CheckBlocked, now, rep)
}

// afterFailure is when a check whose GitHub call failed is looked at
// again: a grace later, or, when the failure was the installation's rate
// limit (the transport or noteBlock recorded it in this process's
// reading), at its end plus the snap jitter, as a check deferred before
// calling is: a block of seconds must not cost the job a grace.
func (r *Reclaimer) afterFailure(inst int64, now time.Time, grace time.Duration) time.Time {
	if r.cfg.Rates != nil {
		at := r.cfg.Now() // the reading was timed with the clock, not the pass's now
		if rd, ok := r.cfg.Rates.Latest(inst); ok && rd.Halted(at) {
			return rd.ResumeAt(at).Add(backoff.SnapJitter(r.cfg.Rand.Float64()))
		}
	}
	return now.Add(grace)
}

// atWork asks GitHub for rec's job. A job in progress or completed is
// settled here: the record is marked done (the in_progress delivery never
// reached us). It returns the job's status, or GitHub's error when the
// question failed (logged and counted: the caller looks again later).
func (r *Reclaimer) atWork(ctx context.Context, w window, rec job.Record, now time.Time, rep *Report, log *slog.Logger) (status string, serr error, settled bool, err error) {
	status, serr = r.cfg.GitHub.JobStatus(w.ctx, rec.InstallationID, rec.Owner(), rec.RepoName(), rec.JobID)
	if serr != nil {
		if cut(ctx, w) && errors.Is(serr, context.DeadlineExceeded) {
			return "", serr, false, nil // not GitHub's failure: not counted
		}
		r.noteBlock(rec.InstallationID, serr)
		rep.LivenessFailed++
		log.WarnContext(ctx, "reclaim liveness check failed", slog.String("step", "job status"), slog.Any("err", serr))
		return "", serr, false, nil
	}
	if status != "in_progress" && status != "completed" {
		return status, nil, false, nil
	}
	if _, err := r.cfg.Store.MarkDone(ctx, job.Report{JobID: rec.JobID, Repo: rec.Repo, InstallationID: rec.InstallationID, Pool: rec.Pool, Actor: job.ActorReclaimer}, now); err != nil && !errors.Is(err, job.ErrTerminal) {
		rep.Failed++
		return status, nil, true, fmt.Errorf("reclaim: mark job %d done: %w", rec.JobID, err)
	}
	rep.LivenessDone++
	log.InfoContext(ctx, "reclaim liveness: job already at work at GitHub, done", slog.String("job_status", status))
	return status, nil, true, nil
}

// askStatus asks GitHub for c's job (atWork). stop says the look ends
// here, with the result in the rest: the job is at work (done), the store
// failed, or the question did (failed: looked at again later).
func (r *Reclaimer) askStatus(ctx context.Context, w window, c candidate, grace time.Duration, now time.Time, rep *Report, log *slog.Logger) (status string, stop bool, next candidate, to job.State, err error) {
	st, serr, settled, err := r.atWork(ctx, w, c.rec, now, rep, log)
	if settled || err != nil {
		return "", true, c, "", err
	}
	if serr != nil {
		next, to, err = r.failed(ctx, w, c, serr, grace, now, rep)
		return "", true, next, to, err
	}
	return st, false, c, "", nil
}

// park leaves a claimed record whose job GitHub does not give to a runner
// yet (notYet) for a later look: nothing removed or counted. The wait is
// GitHub's, so a max-age clock from before the claim (a failure of the
// claim attempt) stops (job.CheckWaiting); a clock the reclaimer started
// after the claim (an old attempt it could not remove) is kept
// (job.CheckWaitingTimed), or a job alternating between waiting and queued
// would never reach its abandon. The look after is a grace away, then
// twice as far after each look that finds the job still held, up to
// MaxParkedInterval (parkedFor): a job may wait for its reviewers for 30
// days, and a look every grace cost its installation about 1.25 calls
// per grace per job, which a few hundred held jobs turned into most of
// GitHub's 5,000 an hour.
func (r *Reclaimer) park(ctx context.Context, c candidate, status, name string, grace time.Duration, now time.Time, log *slog.Logger, rep *Report, attrs ...slog.Attr) (candidate, job.State, error) {
	check := job.CheckWaiting
	if c.rec.FirstFailureAt != 0 && c.rec.FirstFailureAt >= claimedAt(c.rec) {
		check = job.CheckWaitingTimed
	}
	after := parkedFor(grace, r.cfg.MaxParkedInterval, c.rec.Waits)
	rep.LivenessWaiting++
	log.LogAttrs(ctx, slog.LevelInfo, "reclaim liveness: job not runnable yet at GitHub, checked again later", append([]slog.Attr{
		slog.String("job_status", status), slog.String("runner_name", name), slog.Int("waits", c.rec.Waits+1),
		slog.Duration("next_look_in", after)}, attrs...)...)
	return c, "", r.recheck(ctx, c, now.Add(after), check, now, rep)
}

// parkedFor is how long a job held at GitHub waits for its next look after
// waits earlier looks found it held: grace doubled waits times, capped at
// most (never below grace).
func parkedFor(grace, most time.Duration, waits int) time.Duration {
	most = max(most, grace)
	d := grace
	for i := 0; i < waits && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// claimedAt is when rec last became claimed (ms), from its history; 0 when
// the history does not say (then every clock counts as the reclaimer's).
func claimedAt(rec job.Record) int64 {
	for i := len(rec.History) - 1; i >= 0; i-- {
		if rec.History[i].To == job.Claimed {
			return rec.History[i].At
		}
	}
	return 0
}

// notYet reports whether GitHub's job status says the job is not runnable
// yet (waiting for approval, pending, requested): neither still queued for
// a runner nor at work. An empty status is taken as queued.
func notYet(status string) bool {
	switch status {
	case "", "queued", "in_progress", "completed":
		return false
	}
	return true
}

// taken records that the attempt's runner is at work on another job: a new
// attempt now, the busy runner and its machine left to that job.
func (r *Reclaimer) taken(ctx context.Context, c *candidate, name, status string, log *slog.Logger, rep *Report) {
	c.reason = RunnerTaken
	rep.RunnersTaken++
	log.WarnContext(ctx, "reclaim liveness: runner taken by another job", slog.String("runner_name", name),
		slog.String("job_status", status), slog.String("outcome", string(RunnerTaken)))
}

// removeAttempt deletes the old attempt's runner (unless busy) and has the
// provisioner clean up, ending the machines only when the runner is known
// gone. Failures are logged and counted; it reports whether the old attempt
// is removed (its runner gone and its machines ended) or deliberately left
// at work (busy), and whether the runner took a job between the look and
// the delete (GitHub refused the delete: still running a job).
func (r *Reclaimer) removeAttempt(inv context.Context, w window, c candidate, p pool.Pool, scope, owner, repo, name string, runner ghapp.Runner, missing bool, log *slog.Logger, rep *Report) (removed, took, wasCut bool) {
	ctx := w.ctx
	isCut := func(err error) bool {
		return cut(inv, w) && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
	}
	gone, removed := missing, true
	if !missing && !runner.Busy {
		err := r.cfg.GitHub.DeleteRunner(ctx, c.rec.InstallationID, scope, owner, repo, runner.ID)
		switch {
		case err == nil:
			gone = true
		case ghapp.IsStillRunning(err):
			took = true
		case isCut(err):
			return false, false, true
		default:
			r.noteBlock(c.rec.InstallationID, err)
			rep.CleanupFailed++
			removed = false
			log.WarnContext(ctx, "reclaim cleanup failed", slog.String("step", "delete runner"), slog.Any("err", err))
		}
	}
	if r.cfg.Provisioner == nil {
		return removed, took, false
	}
	l := Leftover{JobID: c.rec.JobID, RunID: c.rec.RunID, Repo: c.rec.Repo, Pool: p, RunnerName: name, KeepMachines: !gone}
	if err := r.cfg.Provisioner.Cleanup(ctx, l); err != nil {
		if isCut(err) {
			return false, took, true
		}
		rep.CleanupFailed++
		log.WarnContext(ctx, "reclaim cleanup failed", slog.String("step", "provisioner cleanup"), slog.Any("err", err))
		return false, took, false
	}
	log.InfoContext(ctx, "reclaim removed the old attempt", slog.Bool("machines_kept", !gone), slog.Bool("runner_gone", gone))
	return removed, took, false
}

// recheck moves a claimed record's check to due (counted: an idle-runner
// check). A lost race is no error.
func (r *Reclaimer) recheck(ctx context.Context, c candidate, due time.Time, check job.Check, now time.Time, rep *Report) error {
	_, err := r.cfg.Store.Recheck(ctx, c.rec, due, check, now)
	switch {
	case errors.Is(err, job.ErrConflict):
		rep.Raced++
		return nil
	case err != nil:
		rep.Failed++
		return fmt.Errorf("reclaim: recheck job %d: %w", c.rec.JobID, err)
	}
	return nil
}

package reclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// Liveness after the claim. A claimed record stays in the sweep index with
// sweep_at = claimed_at + the pool's runner-start grace until GitHub says a
// runner took the job (the webhook's in_progress marks it done). When the
// sweep finds one past its grace, the reclaimer reads the whole record (the
// index projects only what the other states decide on; claimed records past
// their grace are few, so one consistent read each is cheaper than
// projecting identity attributes, and changing a GSI's projection in place
// is not possible) and decides:
//
//   - the installation's shared rate reading is exhausted: GitHub is not
//     asked; the check moves to the reset (or one grace, if sooner),
//     uncounted.
//   - GitHub is asked first for the runner <pool>-<job> (one call). Online
//     and idle: GitHub has not assigned yet; check again after another
//     grace, at most MaxLivenessChecks times, then treat it as offline.
//   - offline, missing, or busy: the job's status decides (a second call,
//     only then: GitHub's runner object does not say which job a busy runner
//     runs). In progress or completed: done (the delivery was missed).
//     Still queued and the runner offline or missing: a new attempt (the
//     machine never booted, or the runner died). Still queued and the
//     runner busy: it was taken by another job (see below).
//
// Call budget per claimed record past its grace: one call (idle runner),
// two (offline, missing, busy), plus one delete for a new attempt; none when
// the installation is exhausted. A GitHub error pushes the check by one
// grace, uncounted, so a broken installation costs one call per grace.
//
// A new attempt first removes the old attempt: the runner is deleted
// busy-safe (GitHub's 422 on a busy runner means leave it) and the
// provisioner's Cleanup ends the job's machines unless the runner may be
// at work (busy, or its delete refused: KeepMachines). This runs before the
// record goes back to queued and before the message is sent, so the new
// attempt's claimer neither finds the old runner's name registered nor the
// old machine among the job's live (pending/running) machines; it registers
// a new runner, whose new JIT config gives a new EC2 ClientToken (FleetKey).
// Then the record goes back to queued with the conditional take-back on the
// version read (replacements+1, max-age clock started; the claimer's next
// attempt advances the ladder) and the
// message is sent with the pass's spread, like any other take-back. Past
// MaxReplacements or max age the record is abandoned instead.
//
// A runner taken by another job keeps its name (<pool>-<job>) and its
// machine (tagged with our job) while it runs that job. A new attempt now
// could not start anything: the claimer's registration would meet the busy
// name (409, reused: claim/flow.go) and its provisioning the job's running
// machine (the job-tag lookup reuses it), and each round would burn a
// replacement until the job is abandoned. So a taken runner is counted
// (RunnersTaken) and checked again after another grace, uncounted: the
// runner is ephemeral, it deregisters and its machine powers off after the
// other job, and the next check finds it missing and starts the new
// attempt. Bounded by GitHub, which gives up on a job queued for 24 h: the
// check then finds it completed, and the record done.

// Liveness reason of a new attempt for a claimed record.
const (
	// RunnerLost: claimed past its grace, the job still queued at GitHub,
	// and our runner offline, missing, or idle past MaxLivenessChecks.
	RunnerLost Reason = "runner_lost"
)

// Defaults of the liveness bounds.
const (
	DefaultMaxReplacements   = 3
	DefaultMaxLivenessChecks = 3
)

// liveness decides a claimed record past its grace (see above). It returns
// the candidate to take back (requeue or abandon) and which, or "" when the
// record was settled here (done, checked again) or left alone.
func (r *Reclaimer) liveness(ctx context.Context, c candidate, now time.Time, rep *Report) (candidate, job.State, error) {
	rec, err := r.cfg.Store.Get(ctx, c.rec.JobID)
	switch {
	case errors.Is(err, job.ErrNotFound):
		rep.Skipped++
		return c, "", nil
	case err != nil:
		rep.Failed++
		return c, "", fmt.Errorf("reclaim: read claimed job %d: %w", c.rec.JobID, err)
	case rec.State != job.Claimed || rec.Version != c.rec.Version:
		rep.Raced++
		return c, "", nil
	}
	c.rec = rec
	log := r.decisionLog(c)
	p, ok := pool.Find(r.cfg.Pools, rec.Pool)
	grace := job.DefaultRunnerStartGrace
	if ok && p.StartGrace() > 0 {
		grace = p.StartGrace()
	}
	if !ok || r.cfg.GitHub == nil {
		// Nothing to ask with: look again later rather than every pass.
		log.WarnContext(ctx, "reclaim cannot check a claimed job", slog.String("pool", rec.Pool), slog.Bool("pool_known", ok))
		return c, "", r.recheck(ctx, c, now.Add(grace), false, now, rep)
	}
	if r.cfg.Rates != nil {
		if rd, _ := r.cfg.Rates.Current(ctx, rec.InstallationID); rd.Exhausted(now) {
			due := now.Add(grace)
			if rd.ResetAt.Before(due) {
				due = rd.ResetAt.Add(time.Minute)
			}
			rep.LivenessRateLimited++
			log.WarnContext(ctx, "reclaim liveness check deferred: installation rate limit exhausted",
				slog.Int64("installation_id", rec.InstallationID), slog.Time("reset_at", rd.ResetAt))
			return c, "", r.recheck(ctx, c, due, false, now, rep)
		}
	}
	name := job.RunnerName(p.Name, rec.JobID)
	scope, owner, repo := pool.ScopeRepo, rec.Owner(), rec.RepoName()
	if p.Scope == pool.ScopeOrg {
		scope, repo = pool.ScopeOrg, ""
	}
	runner, ferr := r.cfg.GitHub.FindRunner(ctx, rec.InstallationID, scope, owner, repo, name)
	missing := errors.Is(ferr, ghapp.ErrRunnerNotFound)
	if ferr != nil && !missing {
		rep.LivenessFailed++
		log.WarnContext(ctx, "reclaim liveness check failed", slog.String("step", "find runner"), slog.Any("err", ferr))
		return c, "", r.recheck(ctx, c, now.Add(grace), false, now, rep)
	}
	idle := !missing && runner.Status == "online" && !runner.Busy
	if idle && rec.LivenessChecks < r.cfg.MaxLivenessChecks {
		rep.LivenessChecks++
		log.InfoContext(ctx, "reclaim liveness: runner online and idle, check again", slog.String("runner_name", name),
			slog.Int("liveness_checks", rec.LivenessChecks+1))
		return c, "", r.recheck(ctx, c, now.Add(grace), true, now, rep)
	}
	status, serr := r.cfg.GitHub.JobStatus(ctx, rec.InstallationID, rec.Owner(), rec.RepoName(), rec.JobID)
	if serr != nil {
		rep.LivenessFailed++
		log.WarnContext(ctx, "reclaim liveness check failed", slog.String("step", "job status"), slog.Any("err", serr))
		return c, "", r.recheck(ctx, c, now.Add(grace), false, now, rep)
	}
	if status == "in_progress" || status == "completed" {
		// The in_progress delivery never reached us.
		if _, err := r.cfg.Store.MarkDone(ctx, job.Report{JobID: rec.JobID, Repo: rec.Repo, InstallationID: rec.InstallationID, Pool: rec.Pool, Actor: job.ActorReclaimer}, now); err != nil && !errors.Is(err, job.ErrTerminal) {
			rep.Failed++
			return c, "", fmt.Errorf("reclaim: mark job %d done: %w", rec.JobID, err)
		}
		rep.LivenessDone++
		log.InfoContext(ctx, "reclaim liveness: job already at work at GitHub, done", slog.String("job_status", status))
		return c, "", nil
	}
	if !missing && runner.Busy {
		rep.RunnersTaken++
		log.WarnContext(ctx, "reclaim liveness: runner taken by another job, check again after it", slog.String("runner_name", name),
			slog.String("job_status", status))
		return c, "", r.recheck(ctx, c, now.Add(grace), false, now, rep)
	}
	c.reason = RunnerLost
	// The old attempt goes first: the new claimer must find neither its
	// runner's name nor its machine.
	r.removeAttempt(ctx, c, p, scope, owner, repo, runner, missing, log, rep)
	if rec.Replacements >= r.cfg.MaxReplacements || PastMaxAge(rec, now, r.cfg.MaxAge) {
		c.why = fmt.Sprintf("reclaimer: %s after %d replacements (cap %d, max age %s)", c.reason, rec.Replacements, r.cfg.MaxReplacements, r.cfg.MaxAge)
		return c, job.Abandoned, nil
	}
	log.InfoContext(ctx, "reclaim liveness: new attempt", slog.String("runner_name", name), slog.String("job_status", status),
		slog.String("runner_status", runner.Status), slog.Bool("runner_busy", runner.Busy), slog.Bool("runner_missing", missing),
		slog.Int("replacements", rec.Replacements))
	return c, job.Queued, nil
}

// removeAttempt deletes the old attempt's runner (unless busy) and has the
// provisioner clean up, ending the machines only when the runner is known
// gone. Best effort: failures are logged and counted, the new attempt goes on.
func (r *Reclaimer) removeAttempt(ctx context.Context, c candidate, p pool.Pool, scope, owner, repo string, runner ghapp.Runner, missing bool, log *slog.Logger, rep *Report) {
	gone := missing
	if !missing && !runner.Busy {
		err := r.cfg.GitHub.DeleteRunner(ctx, c.rec.InstallationID, scope, owner, repo, runner.ID)
		switch {
		case err == nil:
			gone = true
		case ghapp.IsStillRunning(err):
			// It took a job between the look and the delete.
		default:
			rep.CleanupFailed++
			log.WarnContext(ctx, "reclaim cleanup failed", slog.String("step", "delete runner"), slog.Any("err", err))
		}
	}
	if r.cfg.Provisioner == nil {
		return
	}
	l := Leftover{JobID: c.rec.JobID, RunID: c.rec.RunID, Repo: c.rec.Repo, Pool: p, RunnerName: job.RunnerName(p.Name, c.rec.JobID), KeepMachines: !gone}
	if err := r.cfg.Provisioner.Cleanup(ctx, l); err != nil {
		rep.CleanupFailed++
		log.WarnContext(ctx, "reclaim cleanup failed", slog.String("step", "provisioner cleanup"), slog.Any("err", err))
		return
	}
	log.InfoContext(ctx, "reclaim removed the old attempt", slog.Bool("machines_kept", !gone), slog.Bool("runner_gone", gone))
}

// recheck moves a claimed record's check to due (counted: an idle-runner
// check). A lost race is no error.
func (r *Reclaimer) recheck(ctx context.Context, c candidate, due time.Time, counted bool, now time.Time, rep *Report) error {
	_, err := r.cfg.Store.Recheck(ctx, c.rec, due, counted, now)
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

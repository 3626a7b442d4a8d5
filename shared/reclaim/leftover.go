package reclaim

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// GitHub is the part of the GitHub App client the reclaimer uses to remove
// an abandoned attempt's runner; *ghapp.Client implements it. FindRunner
// reports "none" with an error wrapping ghapp.ErrRunnerNotFound;
// DeleteRunner treats a runner already gone as success and fails with
// GitHub's 422 (ghapp.IsStillRunning) for a busy one.
type GitHub interface {
	FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error)
	DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, runnerID int64) error
	// JobStatus is the liveness check's second question: "queued",
	// "in_progress", "completed"…
	JobStatus(ctx context.Context, installationID int64, owner, repo string, jobID int64) (string, error)
}

// Leftover names what an abandoned attempt may have left with its pool's
// provisioner: the job, its repo and pool, and the runner name that names
// the machine and its JIT config. It is the part of the provisioning
// request that cleanup needs, declared here so the reclaimer does not
// import shared/provision (and through it the EC2, SSM and SQS clients).
type Leftover struct {
	JobID      int64
	RunID      int64
	Repo       string // owner/name
	Pool       pool.Pool
	RunnerName string
	// KeepMachines: remove the runner's configuration only; the runner
	// may be at work (busy, or its state unknown).
	KeepMachines bool
}

// Provisioner removes what provisioning left for a job (the SSM parameter
// holding the JIT config, the job's machines); functions/reclaimer adapts
// provision.Registry to it with ProvisionerFunc.
type Provisioner interface {
	Cleanup(ctx context.Context, l Leftover) error
}

// ProvisionerFunc is a function that is a Provisioner.
type ProvisionerFunc func(ctx context.Context, l Leftover) error

// Cleanup calls f.
func (f ProvisionerFunc) Cleanup(ctx context.Context, l Leftover) error { return f(ctx, l) }

// Rates is this process's rate state; *ratelimit.Tracker implements it
// (the GitHub client's rate transport feeds it). The reclaimer reads it
// through a ratelimit.Gate before calling GitHub for an installation and,
// after those calls, shares what they observed with Persist.
type Rates interface {
	ratelimit.Source
	// Observe records a secondary limit GitHub's message told of.
	ratelimit.Observer
	// Persist shares the latest reading when the persist rule says
	// another process's decision depends on it.
	Persist(ctx context.Context, installationID int64) (bool, error)
}

var (
	_ GitHub = (*ghapp.Client)(nil)
	_ Rates  = (*ratelimit.Tracker)(nil)
)

// removeLeftovers runs after the fenced write that abandoned c succeeded:
// c was claiming, so the dead claimer may have registered the attempt's
// runner (job.RunnerNameAt: <pool>-<job_id>, -r<n> after n replacements)
// and started its machine. The runner is deleted unless
// it is busy (at work, perhaps on this very job: GitHub refuses with 422
// then, and it is left alone with its machine); then the provisioner
// cleans up: the JIT config goes and the job's machines are terminated.
// Because that ends a machine, it runs only once GitHub said the runner
// is absent or deleted: when the installation's shared rate reading says
// exhausted (GitHub is not called; the janitor catches the runner later)
// or GitHub failed, the runner may be busy, and killing its machine would
// fail the job it runs, while a machine left alone runs at most one job
// and ends. Best effort: failures are logged and counted, never returned.
func (r *Reclaimer) removeLeftovers(ctx context.Context, c candidate, now time.Time, rep *Report) {
	if c.reason != LeaseExpired || (r.cfg.GitHub == nil && r.cfg.Provisioner == nil) {
		return
	}
	log := r.decisionLog(c)
	failed := false
	fail := func(step string, err error) {
		failed = true
		log.WarnContext(ctx, "reclaim cleanup failed", slog.String("step", step), slog.Any("err", err))
	}
	defer func() {
		if failed {
			rep.CleanupFailed++
		}
	}()
	p, ok := pool.Find(r.cfg.Pools, c.rec.Pool)
	if !ok {
		fail("pool", errors.New("pool "+c.rec.Pool+" is not configured"))
		return
	}
	name := job.RunnerNameAt(p.Name, c.rec.JobID, c.rec.Replacements)
	// The dead claimer registered the runner at the pool's scope (the
	// record's Scope may be an earlier attempt's: it is written when an
	// attempt ends claimed, or when it moves the job to another pool, and
	// then it is that pool's scope).
	scope, owner, repo := pool.ScopeRepo, c.rec.Owner(), c.rec.RepoName()
	if p.Scope == pool.ScopeOrg {
		scope, repo = pool.ScopeOrg, ""
	}
	// Without GitHub nobody can say the runner is gone: its machines stay
	// (the config still goes), as when GitHub's answer is unknown.
	runner := "not_asked"
	if r.cfg.GitHub != nil {
		runner = r.removeRunner(ctx, c.rec.InstallationID, scope, owner, repo, name, now, log, fail)
		if runner == "rate_limited" {
			rep.CleanupRateLimited++
		}
	}
	switch runner {
	case "busy":
		log.InfoContext(ctx, "reclaim left a busy runner", slog.String("runner_name", name))
		return
	case "rate_limited", "unknown":
		// Logged (rate limit) or counted as failed (GitHub) already.
		return
	}
	if r.cfg.Provisioner != nil {
		l := Leftover{JobID: c.rec.JobID, RunID: c.rec.RunID, Repo: c.rec.Repo, Pool: p, RunnerName: name, KeepMachines: runner == "not_asked"}
		if err := r.cfg.Provisioner.Cleanup(ctx, l); err != nil {
			fail("provisioner cleanup", err)
		}
	}
	if failed {
		return
	}
	rep.CleanedUp++
	log.InfoContext(ctx, "reclaim cleaned up", slog.String("runner_name", name), slog.String("runner", runner))
}

// removeRunner deletes the job's runner unless it is busy, and says what it
// found: "none", "deleted", "busy", "rate_limited" or "unknown" (an error).
func (r *Reclaimer) removeRunner(ctx context.Context, inst int64, scope, owner, repo, name string, now time.Time, log *slog.Logger, fail func(string, error)) string {
	if rd, halted := r.rate(ctx, inst, now, log); halted {
		log.WarnContext(ctx, "reclaim cleanup skips GitHub: installation rate limit exhausted or blocked",
			slog.Int64("installation_id", inst), slog.String("runner_name", name),
			slog.Time("reset_at", rd.ResumeAt(now)))
		return "rate_limited"
	}
	defer r.shareRate(ctx, inst, log)
	found, err := r.cfg.GitHub.FindRunner(ctx, inst, scope, owner, repo, name)
	switch {
	case errors.Is(err, ghapp.ErrRunnerNotFound):
		return "none"
	case err != nil:
		r.noteBlock(inst, err)
		fail("find runner", err)
		return "unknown"
	case found.Busy:
		return "busy"
	}
	if err := r.cfg.GitHub.DeleteRunner(ctx, inst, scope, owner, repo, found.ID); err != nil {
		if ghapp.IsStillRunning(err) {
			return "busy" // it took a job between the look and the delete
		}
		r.noteBlock(inst, err)
		fail("delete runner", err)
		return "unknown"
	}
	return "deleted"
}

// rate reads inst's budget at now through the pass's gate (the shared item
// at most once per RateRefresh, and only when this process's own reading
// is not enough: ratelimit.Gate) and reports whether it is halted
// (exhausted, or blocked by a secondary limit). A read error is not fatal:
// GitHub answers for itself.
func (r *Reclaimer) rate(ctx context.Context, inst int64, now time.Time, log *slog.Logger) (ratelimit.Reading, bool) {
	if r.gate == nil {
		return ratelimit.Reading{}, false
	}
	rd, err := r.gate.Reading(ctx, inst, now)
	if err != nil {
		log.WarnContext(ctx, "reclaim rate state unreadable", slog.Int64("installation_id", inst), slog.Any("err", err))
	}
	return rd, rd.Halted(now)
}

// noteBlock records the block of a secondary limit that err, GitHub's
// answer to a call for inst, tells of in its message (the rate transport
// records those it can tell from the status and Retry-After alone): the
// pass's later candidates of inst, and once shareRate writes it every
// other process, stay off GitHub until it ends.
func (r *Reclaimer) noteBlock(inst int64, err error) {
	if fl := failure.Classify(err); fl.Secondary() && r.cfg.Rates != nil {
		r.cfg.Rates.Observe(inst, ratelimit.Block(r.cfg.Now(), fl.RetryAfter))
	}
}

// shareRate shares what this process's GitHub calls for inst observed (an
// exhaustion above all) when the persist rule says another process's
// decision depends on it. A failed write is logged: the claimers learn it
// from GitHub then.
func (r *Reclaimer) shareRate(ctx context.Context, inst int64, log *slog.Logger) {
	if r.cfg.Rates == nil {
		return
	}
	if _, err := r.cfg.Rates.Persist(ctx, inst); err != nil {
		log.WarnContext(ctx, "reclaim rate state not shared", slog.Int64("installation_id", inst), slog.Any("err", err))
	}
}

package claim

import (
	"context"
	"time"

	"github.com/ghclaim/ghclaim/shared/failure"
)

// Target is where a job's runner is registered: a repository, or the
// owner's organisation, per the pool's scope.
type Target struct {
	InstallationID int64
	Scope          string // pool.ScopeRepo or pool.ScopeOrg
	Owner          string
	Repo           string // empty for org scope
}

// Runner is a registered runner as GitHub reports it.
type Runner struct {
	ID     int64
	Name   string
	Status string // "online" or "offline"
	Busy   bool
}

// JIT is a freshly generated just-in-time runner.
type JIT struct {
	Runner Runner
	// Config is the encoded JIT config, a credential. Reveal it only to
	// hand it to the provisioner.
	Config interface{ Reveal() string }
}

// GitHub is the part of the GitHub App client the claimer uses.
type GitHub interface {
	GenerateJIT(ctx context.Context, t Target, name string, labels []string, groupID int64) (JIT, error)
	// FindRunner returns the runner named name, or an error for which
	// IsNotFound is true.
	FindRunner(ctx context.Context, t Target, name string) (Runner, error)
	DeleteRunner(ctx context.Context, t Target, id int64) error
	// JobStatus is the workflow job's status ("queued", "in_progress", …).
	JobStatus(ctx context.Context, installationID int64, owner, repo string, jobID int64) (string, error)
	IsAlreadyExists(err error) bool
	IsNotFound(err error) bool
}

// Decision is the backoff policy's answer for a failed attempt.
type Decision struct {
	Delay  time.Duration
	GiveUp bool
}

// Policy is the retry policy (shared/backoff).
type Policy interface {
	// Next decides after the attempt-th attempt failed with f, the job's
	// first failure being at first.
	Next(f failure.Failure, attempt int, first, now time.Time) Decision
	// Defer is the delay until a rate limit that resets at reset may be
	// tried again (the reset plus jitter).
	Defer(reset, now time.Time) time.Duration
}

package claim

import (
	"context"

	"github.com/ghclaim/ghclaim/shared/backoff"
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

// Policy is the retry policy; backoff.Policy implements it.
type Policy interface {
	Next(in backoff.Input) backoff.Decision
}

var _ Policy = backoff.Policy{}

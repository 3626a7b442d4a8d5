package claim

import (
	"context"
	"errors"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// GitHub is the part of the GitHub App client the claimer uses;
// *ghapp.Client implements it. FindRunner reports "none" with an error
// wrapping ghapp.ErrRunnerNotFound; DeleteRunner treats a runner already
// gone as success; a name already taken makes GenerateJIT fail with an
// error ghapp.IsAlreadyExists recognises.
type GitHub interface {
	GenerateJIT(ctx context.Context, installationID int64, req ghapp.JITRequest) (ghapp.JIT, error)
	FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error)
	DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, runnerID int64) error
	JobStatus(ctx context.Context, installationID int64, owner, repo string, jobID int64) (string, error)
}

var _ GitHub = (*ghapp.Client)(nil)

func isNotFound(err error) bool { return errors.Is(err, ghapp.ErrRunnerNotFound) }

// Policy is the retry policy; backoff.Policy implements it.
type Policy interface {
	Next(in backoff.Input) backoff.Decision
}

var _ Policy = backoff.Policy{}

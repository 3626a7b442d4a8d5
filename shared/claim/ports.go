package claim

import (
	"context"
	"errors"
	"time"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// The ports speak the domain's types (shared/job, shared/pool) only: the
// adapters (shared/store, shared/queue, shared/provision) import them and
// assert that they implement the ports (in their own tests and in
// functions/claimer), so this package never pulls in an AWS SDK.

// Store is the job store as the claimer needs it; shared/store implements
// it over DynamoDB, infra/mem in memory.
type Store interface {
	// Acquire takes the lease on a queued (or pending) record at exactly
	// version. A refusal is a *job.ConflictError carrying the record as it
	// is now (Found false: no record), so the claimer never reads first.
	Acquire(ctx context.Context, id, version int64, owner string, until, now time.Time) (job.Lease, job.Record, error)
	// Takeover takes over, for a redelivered message, the lease an
	// earlier receive of it took (claiming at exactly held), only once
	// that lease has expired by now: version held+1, the new owner and
	// until, sweep_at untouched. A refusal is a *job.ConflictError
	// carrying the record as it is now, as Acquire's.
	Takeover(ctx context.Context, id, held int64, owner string, until, now time.Time) (job.Lease, job.Record, error)
	Release(ctx context.Context, l job.Lease, r job.Retry, now time.Time) error
	Finish(ctx context.Context, l job.Lease, o job.Outcome, now time.Time) error
	// Move records under the lease, before the runner is registered, the
	// pool a claim moves the job to (its recorded pool renamed or
	// relabelled) and the scope the runner is to be registered at, so a
	// claimer that dies after registering it leaves a record naming it.
	// The lease stays as it is; a refusal is job.ErrLeaseLost.
	Move(ctx context.Context, l job.Lease, pool, scope string, now time.Time) error
	// Get is read only on the rare lease-lost path, to tell a spare runner.
	Get(ctx context.Context, id int64) (job.Record, error)
	// The shared rate#<installation> item: reading, and block.
	ratelimit.Store
}

// Queue is the claims queue as the claimer needs it; shared/queue
// implements it over SQS. There is no Delete: with ReportBatchItemFailures
// the event source mapping deletes every message the handler does not
// report as failed.
type Queue interface {
	Send(ctx context.Context, m job.Message, delay time.Duration) error
	RetryAfter(ctx context.Context, receiptHandle string, d time.Duration) error
}

// Provisioner starts the machine of a job's runner; provision.Registry
// implements it.
type Provisioner interface {
	Provision(ctx context.Context, req pool.Request) (pool.Result, error)
	Cleanup(ctx context.Context, req pool.Request) error
	// Running names a live machine of req's job ("" when none, or when
	// the adapter cannot tell): asked before an offline runner of an
	// earlier attempt is deleted.
	Running(ctx context.Context, req pool.Request) (string, error)
}

// GitHub is the part of the GitHub App client the claimer uses;
// *ghapp.Client implements it. FindRunner reports "none" with an error
// wrapping ghapp.ErrRunnerNotFound; DeleteRunner treats a runner already
// gone as success; a name already taken makes GenerateJIT fail with an
// error ghapp.IsAlreadyExists recognises. Repository (visibility and
// owner type, as GitHub says now) is read only when a job's recorded pool
// no longer serves it and the pool is resolved again (see the package
// doc); a public repository at most once per RepoTTL in a process.
type GitHub interface {
	GenerateJIT(ctx context.Context, installationID int64, req ghapp.JITRequest) (ghapp.JIT, error)
	FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error)
	DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, runnerID int64) error
	JobStatus(ctx context.Context, installationID int64, owner, repo string, jobID int64) (string, error)
	Repository(ctx context.Context, installationID int64, owner, repo string) (ghapp.Repository, error)
}

var _ GitHub = (*ghapp.Client)(nil)

func isNotFound(err error) bool { return errors.Is(err, ghapp.ErrRunnerNotFound) }

// Policy is the retry policy; backoff.Policy implements it.
type Policy interface {
	Next(in backoff.Input) backoff.Decision
}

var _ Policy = backoff.Policy{}

// Package provision owns the last step of a claim: starting the machine (or
// handing the job to a pull-based host) that runs a job's just-in-time
// runner, so that a repeated attempt for the same job never starts a second
// one.
//
// Two adapters implement Provisioner, picked per pool by Registry:
//
//   - EC2 (pool provisioner type "ec2") launches one instance from the
//     pool's launch template (an instant EC2 Fleet, see Capacity), then
//     writes the JIT config to an SSM SecureString parameter
//     /ghclaim/runners/<runner_name> tagged with that instance's ARN. The
//     instance finds its runner name in its own tags through IMDSv2
//     (instance metadata tags, switched on by the launch template), reads
//     and deletes the parameter at boot (infra/runner/boot.sh) and powers off
//     when the runner exits. The JIT config is never in user data: user data
//     is readable by anyone with ec2:DescribeInstanceAttribute for the life of
//     the instance, and per-launch user data would replace the launch
//     template's boot script anyway.
//   - Dispatch (type "dispatch") sends one SQS message carrying the JIT
//     config to the pool's queue for a host that pulls work (see Dispatch for
//     its deduplication rules).
//
// Idempotency, the reason this package exists. Before launching, the EC2
// adapter looks for a pending or running instance tagged with the job's id
// and the attempt's runner name and reuses it (Result.Reused): that lookup
// is the guard across retries of an attempt, and it holds whatever the
// tokens do. It is per attempt because a new attempt (a replacement: the
// runner before was taken by another job, or never came) must start its
// own machine, while a taken runner's machine keeps running the other job
// (and Cleanup of the new attempt must not end it either). Each launch call carries a
// ClientToken (FleetKey) derived from the job, the pool and the attempt's
// runner registration, never time or randomness: a repeat of one request
// (an SDK retry after a lost answer, a duplicate run of the same attempt)
// gets the first call's answer instead of a second machine. The token is
// per registration, not per job, because EC2 answers a repeated token with
// its first answer for at least 24 h: for an instant fleet that found no
// capacity that is an empty answer (a successful request), and a per-job
// token would replay it on every later attempt until the job is abandoned.
// And EC2 refuses a token reused with other arguments
// (IdempotentParameterMismatch): when an operator changes a pool's subnets
// or instance types between two calls of one registration, the adapter
// looks for a live machine of the job once more and, finding none,
// launches under LaunchKey, derived from the job, the old token and the
// new arguments.
//
// Capacity. A pool lists several instance types and subnets; one launch is
// an EC2 Fleet of type instant (CreateFleet) for one instance whose
// overrides are every type × subnet, so a zone or type without capacity
// (InsufficientInstanceCapacity) costs no attempt: the fleet moves to the
// next option within the call (spot: price-capacity-optimized; on-demand:
// prioritized, preferred type first, the job's subnet first so jobs spread
// over zones). Capacity "spot-then-on-demand" makes a second fleet, on
// demand, under its own token, when the spot one launched nothing. Only
// when every option of every market failed does the attempt fail
// (FleetError: server_side while any option lacked capacity, so the retry
// ladder tries again later; a permission or template error fails for
// good). RunInstances was the launch before: one type in one subnet per
// call, so a zone out of capacity failed the attempt and the next attempt
// asked the same zone for the same type, for up to 90 minutes. A fleet
// cannot set metadata options or the shutdown behaviour per launch: the
// pool's launch template must set IMDSv2 required, instance metadata tags
// on and shutdown behaviour terminate (the scaffold's do), and only
// instances are tagged (an instant fleet tags no volumes).
//
// This package must never log, wrap into an error, or put into user data or
// tags a JIT config: a JIT config is a credential that registers a runner in
// the customer's repository. Request redacts it in String, GoString and
// LogValue. It must never decide whether an AWS error is retryable either:
// errors are returned wrapped with %w so shared/failure can read the smithy
// error codes. It owns no job state; the claimer records the Result.
package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// Provisioner starts the machine for one job's JIT runner.
type Provisioner interface {
	// Provision starts (or finds the already started) machine for req.
	// Calling it again with the same job never starts a second machine.
	Provision(ctx context.Context, req Request) (Result, error)
	// Cleanup removes what Provision left behind (the SSM parameter holding
	// the JIT config) when the claim is given up. It succeeds when there is
	// nothing to remove.
	Cleanup(ctx context.Context, req Request) error
}

// Request and Result are the provisioning port's types, owned by
// shared/pool so that the claimer names its port without importing this
// adapter (and the AWS SDKs behind it).
type (
	Request = pool.Request
	Result  = pool.Result
)

// ErrInvalidRequest is wrapped by every error about a malformed Request.
var ErrInvalidRequest = pool.ErrInvalidRequest

func redactedOrEmpty(s string) string { return pool.Redacted(s) }

// FleetKey is the ClientToken of a launch in market for one runner
// registration of a job: "ghclaim-<job_id>-<digest of pool and JIT
// config>-<spot|od>", at most 64 characters as EC2 requires. Each market
// has its own token (EC2 refuses a token reused with other arguments), and
// each registration too: an instant fleet that found no capacity is a
// successful request, answered again with the same empty answer for the
// token's life (24 h at least), so a token per job would pin every later
// attempt to the first one's failure. The claimer registers anew on every
// attempt, so a later attempt gets a fresh answer, while a repeat of one
// request (same registration) gets its first answer and no second machine.
func FleetKey(poolName string, jobID int64, jitConfig string, market string) string {
	m := "od"
	if market == ec2api.CapacitySpot {
		m = "spot"
	}
	return "ghclaim-" + strconv.FormatInt(jobID, 10) + "-" + shortHash(poolName+"\n"+jitConfig) + "-" + m
}

// ParameterPrefix is the SSM path under which JIT configs wait for their
// instance. The instance profile may read and delete only below it.
const ParameterPrefix = "/ghclaim/runners/"

// ParameterName is the SSM parameter that holds runnerName's JIT config.
func ParameterName(runnerName string) string { return ParameterPrefix + runnerName }

// ErrNoProvisioner is wrapped when no adapter is registered for a pool's
// provisioner type.
var ErrNoProvisioner = errors.New("no provisioner for pool")

// Registry picks the adapter by the pool's provisioner type (pool.ProvisionerEC2,
// pool.ProvisionerDispatch). A Registry is itself a Provisioner that routes
// each request by req.Pool, so the claimer needs only one value.
type Registry map[string]Provisioner

var _ Provisioner = Registry(nil)

// Select returns the adapter for p.
func (r Registry) Select(p pool.Pool) (Provisioner, error) {
	if pr, ok := r[p.Provisioner.Type]; ok && pr != nil {
		return pr, nil
	}
	return nil, fmt.Errorf("%w %q: provisioner type %q", ErrNoProvisioner, p.Name, p.Provisioner.Type)
}

// Provision routes req to the adapter of req.Pool.
func (r Registry) Provision(ctx context.Context, req Request) (Result, error) {
	pr, err := r.Select(req.Pool)
	if err != nil {
		return Result{}, err
	}
	return pr.Provision(ctx, req)
}

// Finder is implemented by adapters that can tell whether a machine for a
// job is already up (EC2, by the job tag). The claimer asks before it
// deletes an offline runner registration: a booting machine still holds
// that registration's JIT config, and deleting it would leave the machine
// with a dead config and the job without a runner.
type Finder interface {
	// Running returns the id of a pending or running machine for the job
	// of req, or "" when there is none.
	Running(ctx context.Context, req Request) (string, error)
}

var _ Finder = Registry(nil)

// Running routes req to the adapter of req.Pool; an adapter that cannot
// tell (dispatch) answers "".
func (r Registry) Running(ctx context.Context, req Request) (string, error) {
	pr, err := r.Select(req.Pool)
	if err != nil {
		return "", err
	}
	if f, ok := pr.(Finder); ok {
		return f.Running(ctx, req)
	}
	return "", nil
}

// Cleanup routes req to the adapter of req.Pool.
func (r Registry) Cleanup(ctx context.Context, req Request) error {
	pr, err := r.Select(req.Pool)
	if err != nil {
		return err
	}
	return pr.Cleanup(ctx, req)
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// shortHash is a stable 16-hex-digit digest; collisions are irrelevant at
// the scale of pool names and JIT configs of one job.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

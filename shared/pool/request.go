package pool

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/ghclaim/ghclaim/shared/names"
)

// Request is what a provisioner needs to know about one claimed job. It is
// the provisioning port's own type, so the claimer names its provisioner
// port without importing an adapter (shared/provision implements it).
type Request struct {
	JobID int64
	RunID int64
	// Repo is "owner/name".
	Repo string
	Pool Pool
	// RunnerName is job.RunnerNameAt(pool, job id, Replacement), the
	// attempt's runner; it names the SSM parameter and the instance (and
	// finds the attempt's machine), so it must be a plain token.
	RunnerName string
	// Replacement is the attempt's number of replacements before it (0
	// for the first), tagged on the machine for operators.
	Replacement int
	// JITConfig is the encoded JIT runner configuration from GitHub. It is a
	// credential: never log it, never put it in an error. String, GoString
	// and LogValue redact it.
	JITConfig string
	// KeepMachines asks Cleanup to remove the job's runner configuration
	// only and leave its machines running: the caller could not tell
	// whether the job's runner is busy (GitHub was not asked, or did not
	// answer), and a machine whose runner runs a job must never be ended.
	// A machine that never read its configuration powers itself off.
	KeepMachines bool
}

// Result says where the job's runner runs.
type Result struct {
	// InstanceID is the EC2 instance (ec2 pools).
	InstanceID string
	// MessageID is the SQS message id (dispatch pools).
	MessageID string
	// Reused is true when an earlier attempt's machine was found and no new
	// one was started.
	Reused bool
}

const redacted = "[REDACTED]"

// String redacts JITConfig, so %v and %+v of a Request are safe to log.
func (r Request) String() string {
	return fmt.Sprintf("{JobID:%d RunID:%d Repo:%s Pool:%s RunnerName:%s JITConfig:%s}",
		r.JobID, r.RunID, r.Repo, r.Pool.Name, r.RunnerName, Redacted(r.JITConfig))
}

// GoString redacts JITConfig for %#v.
func (r Request) GoString() string { return "pool.Request" + r.String() }

// LogValue redacts JITConfig when a Request is passed to slog.
func (r Request) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("job_id", r.JobID),
		slog.Int64("run_id", r.RunID),
		slog.String("repo", r.Repo),
		slog.String("pool", r.Pool.Name),
		slog.String("runner_name", r.RunnerName),
		slog.String("jit_config", Redacted(r.JITConfig)),
	)
}

// Redacted is what a log line shows of a credential: "" for none,
// "[REDACTED]" otherwise.
func Redacted(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

// ValidRunnerName reports whether name is 1-100 letters, digits, '-', '_'
// or '.', the first a letter or digit: usable as one SSM parameter path
// element, an EC2 tag value, an IMDS path and a FIFO deduplication id.
func ValidRunnerName(name string) bool { return names.Safe(name, 100, true) }

// ErrInvalidRequest is wrapped by every error about a malformed Request.
// Such a request would fail the same way on every attempt.
var ErrInvalidRequest error = permanent("invalid provision request")

// permanent is an error the retry classifier (shared/failure) treats as
// non-retryable through its Permanent method, without this package
// importing the classifier.
type permanent string

func (e permanent) Error() string { return string(e) }

// Permanent reports that retrying cannot help.
func (permanent) Permanent() bool { return true }

// Validate checks the fields every provisioner relies on.
func (r Request) Validate() error {
	switch {
	case r.JobID <= 0:
		return fmt.Errorf("%w: job id %d: want a positive id", ErrInvalidRequest, r.JobID)
	case !strings.Contains(r.Repo, "/"):
		return fmt.Errorf("%w: repo %q: want owner/name", ErrInvalidRequest, r.Repo)
	case r.Pool.Name == "":
		return fmt.Errorf("%w: pool: want a named pool", ErrInvalidRequest)
	case !ValidRunnerName(r.RunnerName):
		return fmt.Errorf("%w: runner name %q: want 1-100 letters, digits, '-', '_' or '.'", ErrInvalidRequest, r.RunnerName)
	case r.JITConfig == "":
		return fmt.Errorf("%w: jit config: empty", ErrInvalidRequest)
	}
	return nil
}

package job

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The values the flows and the job store speak. They live here, with the
// record, so that a flow (claim, webhook, reclaim) names its store port in
// domain types and never imports the DynamoDB adapter or an AWS package;
// shared/store implements the ports over DynamoDB and infra/mem in memory,
// and one contract suite (infra/contract) holds both to the same rules.

// Named outcomes of the job store. Callers test them with errors.Is.
var (
	// ErrNotFound: no live record under that key.
	ErrNotFound = errors.New("job: not found")
	// ErrConflict: a conditional write found the record in another state or
	// version than the caller assumed. The error is a *ConflictError that
	// carries the record as it is now, so no flow reads before it writes.
	ErrConflict = errors.New("job: record changed concurrently")
	// ErrLeaseLost: the caller's lease (owner + version) is no longer the record's.
	ErrLeaseLost = errors.New("job: lease lost")
	// ErrTerminal: the record is already terminal; nothing was changed.
	ErrTerminal = errors.New("job: record is terminal")
	// ErrBadCursor: a sweep page cursor (Page.Next) the store did not make,
	// or made for another shard.
	ErrBadCursor = errors.New("job: bad sweep cursor")
)

// ConflictError is a refused conditional write. Current is the record as the
// store holds it now (DynamoDB's ReturnValuesOnConditionCheckFailure), and
// Found is false when there is none. It matches ErrConflict with errors.Is.
type ConflictError struct {
	Op      string
	JobID   int64
	Current Record
	Found   bool
}

func (e *ConflictError) Error() string {
	if !e.Found {
		return fmt.Sprintf("%s job %d: %v (no record)", e.Op, e.JobID, ErrConflict)
	}
	return fmt.Sprintf("%s job %d: %v (now %s v%d)", e.Op, e.JobID, ErrConflict, e.Current.State, e.Current.Version)
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// CurrentOf returns the record a conflict carried, if err is one that did.
func CurrentOf(err error) (Record, bool) {
	var ce *ConflictError
	if errors.As(err, &ce) && ce.Found {
		return ce.Current, true
	}
	return Record{}, false
}

// Lease is a claimer's fencing token: the record is the claimer's while it
// still carries this owner and version.
type Lease struct {
	JobID   int64
	Owner   string
	Version int64
	Expires time.Time
	// History is the record's history as the lease write left it: nobody
	// else writes the record while the lease holds, so the claimer's next
	// write knows the whole list (and keeps it bounded without a read).
	History []Transition
}

// Retry is what a claimer records when it hands the job to a new message.
type Retry struct {
	// Version is the version of the message already sent (lease version + 1).
	Version        int64
	Attempt        int
	FirstFailureAt time.Time // zero leaves it unset
	Due            time.Time
	ErrorClass     string
	Error          string
	// Pool, when set, replaces the record's: the pool the attempt claimed
	// in when it resolved the job's pool again (the recorded one renamed
	// or relabelled), so the next attempt claims there and its 409 path
	// finds this attempt's runner under its name, whatever RUNNER_POOLS
	// says by then.
	Pool string
	// Runner and Scope, when Runner is set, are the runner name the
	// attempt registered (or was about to register) and the scope it used
	// (Record.TriedRunner, TriedScope): a later attempt under the same name
	// whose pool's scope has changed since looks there first, rather than
	// register a second runner beside it at the new scope.
	Runner, Scope string
}

// Outcome is the end of a claim: Claimed, Failed, Abandoned or Done.
type Outcome struct {
	State      State
	Attempt    int
	RunnerName string
	// Scope is where the attempt's runner is registered ("" leaves the
	// record's): kept so a pool's scope changed later under the same name
	// does not send the checks of this runner to the new scope (where it
	// is not, and "not found" would end its machine).
	Scope string
	// Pool, when set, replaces the record's pool: the claim resolved the
	// job's pool again because the recorded one was renamed or relabelled
	// under the queued job, and the reclaimer and the janitor name the
	// attempt's runner after the pool it was registered in.
	Pool       string
	ErrorClass string
	Error      string
	// RunnerStartGrace (Claimed only): the record stays in the sweep index
	// with sweep_at = now + this, so the reclaimer checks that a runner of
	// ours took the job. Zero means DefaultRunnerStartGrace.
	RunnerStartGrace time.Duration
}

// DefaultRunnerStartGrace is RUNNER_START_GRACE: how long a claimed job
// may wait for its runner before the reclaimer checks on it.
const DefaultRunnerStartGrace = 10 * time.Minute

// StartGrace is g, a pool's runner-start grace, or DefaultRunnerStartGrace
// when g is not set.
func StartGrace(g time.Duration) time.Duration {
	if g <= 0 {
		return DefaultRunnerStartGrace
	}
	return g
}

// Check is what the reclaimer's look at a claimed record found, as Recheck
// writes it.
type Check int

const (
	// CheckSkipped: not made (an exhausted rate limit) or failed for a
	// passing reason (a 5xx, a timeout): nothing counted.
	CheckSkipped Check = iota
	// CheckIdle: the runner is online but idle: liveness_checks + 1,
	// waits 0 (the job is queued at GitHub).
	CheckIdle
	// CheckBlocked: it cannot be made until something changes (the pool
	// is not configured, GitHub refused for good: the repository or the
	// installation gone): the max-age clock starts (first_failure_at, if
	// not set yet), so such a record is abandoned at max age rather than
	// looked at every grace until its TTL. waits 0: the look that
	// blocks is no waiting look.
	CheckBlocked
	// CheckWaiting: GitHub holds the job and gives it to no runner yet
	// (waiting for an environment's reviewers, pending): the wait is
	// GitHub's, so the max-age clock stops (first_failure_at removed) and
	// the idle checks start over (liveness_checks 0); once GitHub queues
	// the job, its runner gets its checks and its attempt its max age.
	// waits + 1 (the record's consecutive waiting looks).
	CheckWaiting
	// CheckWaitingTimed: as CheckWaiting, but first_failure_at and the
	// idle checks are kept: a max-age clock the reclaimer started after
	// the claim (an old attempt it could not remove) runs on through the
	// wait. Both waiting checks hold only while sweep_at is the one read
	// (the webhook may have brought the next look to now since).
	CheckWaitingTimed
)

// Report is a job GitHub reported in progress or completed: the webhook marks
// its record done with it.
type Report struct {
	JobID          int64
	RunID          int64
	Repo           string
	InstallationID int64
	Labels         []string
	Pool           string
	RunnerName     string // the runner that took the job, if GitHub named one
	// Actor is who learnt it, for the history: ActorWebhook when empty.
	Actor string
	// Recorded applies the report only to a record that exists: with
	// none, nothing is written and MarkDone answers ErrNotFound. The
	// webhook sets it for a job the pools refuse now, whose report it
	// applies because it names a runner of ours: had that runner been
	// ours, the job's record would exist (a claim registers no runner for
	// a job without one).
	Recorded bool
}

// Page is one page of stale records from the sweep.
type Page struct {
	Records []Record
	// Next continues the listing; "" when the shard is exhausted. It is
	// opaque: only the store that made it can read it.
	Next string
	// Undecodable lists the key of every item of the page that is not a
	// job record this code can read (written by hand, or by a newer version).
	Undecodable []string
}

// Timing is the store's bookkeeping rules: how the sweep index is spread,
// how long after each transition a record counts as stale, and how long a
// record lives. Both store implementations apply them the same way.
type Timing struct {
	// Shards is SWEEP_SHARDS: job_id mod Shards spreads the sweep index.
	Shards int
	// RecordTTL keeps a record (and so its dedup) past GitHub's 3-day
	// redelivery window; set at creation, renewed when it ends.
	RecordTTL time.Duration
	// PendingGrace: a pending record is stale this long after creation.
	// Pending is the state of a job whose first message waits for a
	// claimer (the webhook does not mark it queued) or never went out
	// (outbox): the grace must outlast a claimer backlog, like QueuedGrace
	// (see shared/webhook's package doc).
	PendingGrace time.Duration
	// QueuedGrace: a queued record is stale this long after its due_at.
	QueuedGrace time.Duration
}

// MaxShards is the most shards SWEEP_SHARDS may name (the template's
// MaxValue). The reclaimer also visits the shards above the configured
// count, a few per pass (reclaim's strays): a record written before
// SWEEP_SHARDS was lowered stays in its old shard, and would otherwise
// never be swept.
const MaxShards = 64

// ShardKeys lists the keys of n sweep shards: "0" … n-1, as Shard names them.
func ShardKeys(n int) []string {
	out := make([]string, max(n, 0))
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}

// Defaults of Timing.
const (
	DefaultShards       = 8
	DefaultRecordTTL    = 7 * 24 * time.Hour
	DefaultPendingGrace = 15 * time.Minute
	DefaultQueuedGrace  = 15 * time.Minute
)

// WithDefaults fills zero fields with the defaults.
func (t Timing) WithDefaults() Timing {
	if t.Shards <= 0 {
		t.Shards = DefaultShards
	}
	if t.RecordTTL <= 0 {
		t.RecordTTL = DefaultRecordTTL
	}
	if t.PendingGrace <= 0 {
		t.PendingGrace = DefaultPendingGrace
	}
	if t.QueuedGrace <= 0 {
		t.QueuedGrace = DefaultQueuedGrace
	}
	return t
}

// Expired reports whether r's TTL has passed at now: such a record counts
// as absent even while DynamoDB has not yet deleted it (TTL deletion is lazy).
func (r Record) Expired(now time.Time) bool {
	return r.ExpiresAt > 0 && r.ExpiresAt < now.Unix()
}

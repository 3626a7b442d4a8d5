// Package job is the domain at the centre of ghclaim: the job record that
// DynamoDB holds, its states, and the claim message that SQS carries.
//
// The record is the truth; a message only says "look at job N, version V".
// Every transition that hands the job to a new message bumps Version, so a
// message whose version is older than the record's is a duplicate and is
// dropped. This package owns those rules as plain values and functions; it
// must never import an AWS or GitHub package, and it does no I/O.
//
// Times on the record are epoch milliseconds (the *At fields), except
// ExpiresAt, which is epoch seconds because DynamoDB's TTL requires it.
package job

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// State is where a job record stands. See DESIGN.md: pending → queued ⇄
// claiming → claimed | failed | abandoned; claimed → queued when no runner
// of ours took the job within the runner-start grace (a new attempt); any
// state but failed/abandoned → done.
type State string

// The states of a job record.
const (
	// Pending: the record is durable but its first claim message may not
	// have been sent (outbox). The reclaimer sends it after a grace.
	Pending State = "pending"
	// Queued: a claim message for the record's current version is in SQS
	// (or due at DueAt).
	Queued State = "queued"
	// Claiming: a claimer holds the lease until LeaseExpiresAt.
	Claiming State = "claiming"
	// Claimed: a runner was registered and provisioned for the job. Not
	// terminal: the record stays in the sweep index until a runner of ours
	// takes the job, so the reclaimer can check that one did.
	Claimed State = "claimed"
	// Failed: a non-retryable error ended the claim; LastError says why.
	Failed State = "failed"
	// Abandoned: retryable errors went on past the maximum age.
	Abandoned State = "abandoned"
	// Done: GitHub reported the job in progress or completed.
	Done State = "done"
)

// Terminal reports whether no further transition may leave s: done,
// failed, abandoned. Claimed is not terminal (liveness after the claim).
func (s State) Terminal() bool {
	switch s {
	case Failed, Abandoned, Done:
		return true
	}
	return false
}

// Settled reports whether a claimer has nothing left to do for s: terminal,
// or claimed (only the reclaimer's liveness check or GitHub's in_progress
// moves a claimed record on; a claim message for it is a duplicate).
func (s State) Settled() bool { return s == Claimed || s.Terminal() }

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	switch s {
	case Pending, Queued, Claiming, Claimed, Failed, Abandoned, Done:
		return true
	}
	return false
}

// Record is one job as stored under pk "job#<id>". Zero values mean
// "not set" for the optional fields.
type Record struct {
	JobID          int64
	State          State
	Version        int64
	Attempt        int
	FirstFailureAt int64 // ms; 0 until the first retryable failure
	DueAt          int64 // ms; when the current message becomes visible
	LeaseOwner     string
	LeaseExpiresAt int64 // ms
	LastErrorClass string
	LastError      string
	Repo           string // owner/name
	InstallationID int64
	Labels         []string
	Pool           string
	// Public and UserOwned describe the repository as the queued delivery
	// did (pool.Repository): the claimer holds the recorded pool to the
	// webhook's rule with them (pool.Serve), so a pool that has since
	// stopped allowing public repositories, or moved its runners to the
	// organisation, does not claim a job it would refuse now. Records
	// from before they were kept say false for both: claimed as before.
	Public     bool
	UserOwned  bool
	RunnerName string // the runner that took the job (done) or ours (claimed)
	// Scope is where the claim registered the runner of the latest attempt
	// (pool.ScopeRepo or pool.ScopeOrg); "" on records from before it was
	// kept, whose runners are looked for at the pool's scope (pool.Where).
	Scope string
	// TriedRunner and TriedScope are the runner name the last retried
	// attempt registered, or was about to register, and its scope
	// (job.Retry.Runner, Scope). GitHub keeps a repository's runners and
	// its organisation's apart, so a name taken at one scope is free at
	// the other: the next attempt under that name, its pool's scope
	// changed since, looks for it at TriedScope before registering at the
	// new one. They describe TriedRunner only: any other name ignores them.
	TriedRunner string
	TriedScope  string
	RunID       int64
	CreatedAt   int64 // ms
	UpdatedAt   int64 // ms
	ExpiresAt   int64 // s; TTL, set at creation (the record is the dedup key) and renewed when it ends
	SweepShard  string
	SweepAt     int64 // ms; only on non-terminal records
	// Replacements counts the new attempts the reclaimer (or the webhook)
	// started because the claimed runner never took the job.
	Replacements int
	// ReplacementsBase is Replacements when an operator last retried the
	// job: the cap counts the new attempts after that retry. (Replacements
	// itself never goes back: it names the attempt's runner.)
	ReplacementsBase int
	// LivenessChecks counts the reclaimer's checks of a claimed record
	// that found its runner online but idle (bounded; reset by a new attempt).
	LivenessChecks int
	// Waits counts the reclaimer's consecutive looks that found the job
	// not runnable yet at GitHub (waiting for reviewers, pending): a
	// parked record is looked at less often with each (back-off) and
	// asked about its status first. Reset by any other counted look and
	// by a new attempt.
	Waits int
	// History is the record's transitions, oldest first, at most
	// MaxHistory: every state-changing write appends one.
	History []Transition
}

// MaxError is how many bytes of error text a record keeps (last_error).
const MaxError = 1024

// TruncateError is s as a record keeps it: Cut to MaxError bytes.
func TruncateError(s string) string { return Cut(s, MaxError) }

// Cut is s as a record keeps free text: valid UTF-8 (DynamoDB strings
// are; the SDK would turn a stray byte into U+FFFD, and the text would no
// longer be what the in-memory store keeps), cut to at most n bytes on a
// rune boundary.
func Cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Owner is the repository owner (organisation or user) of the record's repo.
func (r Record) Owner() string {
	for i := 0; i < len(r.Repo); i++ {
		if r.Repo[i] == '/' {
			return r.Repo[:i]
		}
	}
	return r.Repo
}

// RepoName is the repository name without its owner.
func (r Record) RepoName() string {
	for i := 0; i < len(r.Repo); i++ {
		if r.Repo[i] == '/' {
			return r.Repo[i+1:]
		}
	}
	return ""
}

// Key is the DynamoDB partition key of job id.
func Key(id int64) string { return "job#" + strconv.FormatInt(id, 10) }

// RateKey is the DynamoDB partition key of an installation's rate state.
func RateKey(installationID int64) string {
	return "rate#" + strconv.FormatInt(installationID, 10)
}

// Shard is the sweep shard of job id: the decimal string of id mod shards.
func Shard(id int64, shards int) string {
	if shards <= 0 {
		shards = 1
	}
	m := id % int64(shards)
	if m < 0 {
		m = -m
	}
	return strconv.FormatInt(m, 10)
}

// RunnerName is the runner name of a job's first attempt:
// "<pool>-<job_id>" (RunnerNameAt with no replacement).
func RunnerName(pool string, id int64) string { return RunnerNameAt(pool, id, 0) }

// RunnerNameAt is the runner name of a job's attempt after n replacements:
// "<pool>-<job_id>" for the first, "<pool>-<job_id>-r<n>" for a new
// attempt started because the runner before never took the job. Every
// retry of one attempt derives the same name, so at most one runner is
// registered per attempt (a 409 on the name is our own runner); a new
// attempt needs a new name because the old runner may still hold its own:
// a runner taken by another job keeps it, busy, until that job ends.
func RunnerNameAt(pool string, id int64, n int) string {
	if n <= 0 {
		return fmt.Sprintf("%s-%d", pool, id)
	}
	return fmt.Sprintf("%s-%d-r%d", pool, id, n)
}

// Runner is what a runner name of ours says: its pool, its job and the
// attempt (replacements before it) it was registered for.
type Runner struct {
	Pool        string
	JobID       int64
	Replacement int
}

// ParseRunnerName reads a runner name made by RunnerNameAt for one of pools
// (the webhook, the reclaimer, the janitor and the CLI all read names
// here). A pool name may end in digits or "-<digits>" ("linux-2"): the rest
// after "<pool>-" must be exactly "<job_id>" or "<job_id>-r<n>", which no
// other pool's prefix leaves, and the longest matching pool wins anyway.
// Anything else (another tool's runner, a hand-named one) is not ours.
func ParseRunnerName(name string, pools ...string) (Runner, bool) {
	var best Runner
	found := false
	for _, p := range pools {
		rest, ok := strings.CutPrefix(name, p+"-")
		if !ok || p == "" || (found && len(p) <= len(best.Pool)) {
			continue
		}
		id, tail, _ := strings.Cut(rest, "-")
		jobID, ok := positive(id)
		if !ok {
			continue
		}
		n := 0
		if tail != "" {
			digits, isR := strings.CutPrefix(tail, "r")
			r, ok := positive(digits)
			if !isR || !ok || r > math.MaxInt32 {
				continue
			}
			n = int(r)
		}
		best, found = Runner{Pool: p, JobID: jobID, Replacement: n}, true
	}
	return best, found
}

// positive parses a decimal without sign or leading zeros, > 0.
func positive(s string) (int64, bool) {
	if s == "" || s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// Defaults of the bounds on new attempts of a claimed job.
const (
	DefaultMaxReplacements = 3
	DefaultMaxAge          = 90 * time.Minute
)

// Replaceable reports whether r may get a new attempt now (its runner
// never took the job, or was taken by another job): fewer than
// maxReplacements so far, and not failing for longer than maxAge (a record
// that never failed has no age yet). Otherwise it is abandoned. The
// reclaimer and the webhook decide with it alike.
func Replaceable(r Record, now time.Time, maxReplacements int, maxAge time.Duration) bool {
	pastAge := r.FirstFailureAt != 0 && now.Sub(FromMillis(r.FirstFailureAt)) > maxAge
	return r.Replacements-r.ReplacementsBase < maxReplacements && !pastAge
}

// Message is the SQS claim message body. The JSON field names are part of
// the contract in DESIGN.md.
type Message struct {
	JobID     int64 `json:"job_id"`
	Version   int64 `json:"version"`
	Attempt   int   `json:"attempt"`
	NotBefore int64 `json:"not_before,omitempty"` // ms; chained delays past SQS's 900 s cap
}

// Millis converts t to epoch milliseconds.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// FromMillis converts epoch milliseconds to a time.
func FromMillis(ms int64) time.Time { return time.UnixMilli(ms) }

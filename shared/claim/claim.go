// Package claim owns the claim flow, the heart of ghclaim: for each SQS
// claim message it takes the job's lease, gets a just-in-time runner
// configuration from GitHub, provisions the machine that runs it, and
// records the outcome, or hands the job to a new delayed message when the
// attempt failed in a way that may succeed later. It never loses a job:
// every path ends with the job either terminal, or queued with a message
// (or a record the reclaimer will find) that looks at it again.
//
// It must never log or store a JIT config, a token or a key (the JIT
// config stays a redacting ghapp.Secret until it is handed, explicitly, to
// the provisioner), and it never decides retry delays or error classes
// itself: shared/backoff and shared/failure do.
//
// Decisions:
//
// Version rules. The record is the truth; a message only says "look at job
// N, version V". The claimer does not read the record first: it writes the
// lease straight away, and a refused lease write carries the record as it
// is (a *job.ConflictError, DynamoDB's ReturnValuesOnConditionCheckFailure),
// which decides the message. No record: an unknown job, dropped with an
// error log. A message whose version is older than the record's, or whose
// record is terminal, or whose version the record holds in another state
// than queued (the claim ended), is a duplicate and is dropped; with one
// exception, a record claiming at exactly the message's version + 1: that
// version is the message's own lease, taken by an earlier receive of it,
// not a newer message of the job (see Takeover). A message whose version is newer than the
// record's was sent by a claimer whose Release
// has not landed yet (the record is claiming at the version below): it
// waits out that claimer's lease, hidden until the lease's expiry (at least
// EarlyDelay, at most SQS's 12 h), and is reported as a batch item failure.
// Only while the lease lasts can the Release land; after it, the message
// is dropped: its sender died before the Release, so the sender's own
// message was never deleted and comes back to take the lease over
// (Takeover), moving the record to this very version, and when that
// message is gone too, the reclaimer's take-back does, with a message of
// its own. So an
// early message is received at most twice (with a lease under 12 h),
// whatever the Release does, and never reaches the dead-letter queue
// (maxReceiveCount 5) to fire a false alarm, as it did coming back every
// few seconds. A message ahead of its
// record in any other way was sent by no claimer: it comes back every
// EarlyDelay and dead-letters (an alarm worth having). A message naming no
// job (malformed) is dropped with an error log.
//
// Deleting. The claimer never calls DeleteMessage: the function runs with
// ReportBatchItemFailures, and the event source mapping deletes every
// message of the batch the response does not report. "Dropped" or
// "handled" above means "not reported"; a message that must come back is
// reported (and its visibility set when it must come back sooner or later
// than the queue's timeout). The deletes then happen once per batch, after
// the invocation answers: a claimer that dies mid-batch leaves every
// message of the batch to come back, the versions drop the handled ones,
// and the one whose lease it held takes that lease over (Takeover).
//
// Chained delays. SQS caps DelaySeconds at 900 s. A longer delay is sent as
// 900 s with not_before; a message that arrives before its not_before is
// re-sent unchanged (same version, attempt and not_before) with the
// remaining delay, and the original dropped. That is not an attempt, and
// it reads and writes nothing: a hop costs one SendMessage. So a chain
// whose job moved on (done, or a newer message) hops on until its
// not_before and stops there, at its first lease write. Chains come from
// rate-limit deferrals (the ladder's rungs are under 900 s), which end at a
// reset at most an hour and NowLag ahead (ratelimit.Reading.Exhausted
// trusts no reset further, backoff caps a wait at MaxRateWait): at most
// five hops, fewer requests than a read at every hop of every live chain.
//
// Fencing. The lease is taken with a conditional update (queued|pending
// at the message's version → claiming, version+1) and lasts Lease (default
// 3 min), longer than the function's timeout, so a live claimer never
// outlives it. LEASE_DURATION is not checked against the timeout anywhere,
// so the lease is also stretched to the invocation's deadline (plus Lease)
// when it would end first. Every later write of the attempt (Release, Finish) is
// conditional on the lease's owner and version. A claimer that finds its
// lease lost stops at once: it changes nothing else, deletes no runner and
// no machine, and drops its message (whoever owns the job now, a
// takeover, a reclaimer or a done event, moves it on). Finding that out is the only
// time the claimer reads the record (Store.Get), to tell a spare runner. Side effects that undo work
// (deleting a runner, cleaning up a provisioned parameter) happen only
// after the fenced write that ends the claim succeeded, with one
// exception: a claimer that provisioned a runner and then finds the record
// done, naming no runner or another runner than ours (the job was
// cancelled or taken elsewhere meanwhile), removes its now spare runner
// rather than leave a machine idling on it.
//
// Lease owner. The owner is unique per received message: a per-process
// random id, the Lambda request id, the SQS message id and a digest of the
// receipt handle. An owner shared by the whole invocation would let two
// copies of one message in one batch (SQS delivers at least once; a
// SendMessage retried after a lost answer sends twice) both pass Acquire,
// which takes "claiming, same owner, version+1" for an SDK retry of its
// own write: two JIT configs, two machines, one of them booting with the
// config of a runner just deleted. Per message, exactly one copy wins and
// the other is a duplicate, while an SDK retry of the one Acquire still
// carries the same owner and is recognised as ours.
//
// Takeover. A claimer that dies holding its lease (Lambda timeout, OOM,
// crash) never answered, so its message was never deleted: the event
// source mapping delivers it again after the queue's visibility timeout,
// and its lease write is refused with the record claiming at the
// message's version + 1, the lease an earlier receive of this very message
// took. Held by this invocation (another copy of the message in the same
// batch, alive by construction), that lease makes the message a
// duplicate. Otherwise, while the lease lasts (its holder may be alive: a
// copy in another invocation), the message is hidden until one second
// past the lease's expiry (at least EarlyDelay, at most SQS's 12 h) and
// reported; back then, a live holder has ended its claim and the message
// is a duplicate. Once the lease has expired, the message takes it over
// with one conditional write (Store.Takeover: claiming at that version
// with lease_expires_at < now → version+1, its own owner and expiry,
// sweep_at untouched, first_failure_at set unless a failure did, a history
// entry claiming → claiming, lease_expired) and claims exactly as if it
// had taken the lease itself: the 409 path and the provisioner's
// idempotency key find the dead attempt's runner and machine, so one
// runner and one machine per attempt still hold. A live lease is never
// taken (the condition compares the expiry with now, and a lease outlives
// its claimer's invocation); the version bump fences the old holder, whose
// writes fail on owner and version. So a dead claimer's job is claimed
// again at the later of the visibility timeout and the lease's expiry
// (the template: 360 s after the receive, where the lease ends at most
// Lease, 3 min, after the 60 s invocation), where the reclaimer finds it
// only at the record's sweep_at, up to QueuedGrace (15 min) after the
// message was due, since the lease write leaves sweep_at alone (see
// shared/store). The reclaimer stays the backstop, unchanged (message gone
// or dead-lettered): it and the takeover write on the same version, so only
// one of them moves the record, and the other side's message is a
// duplicate. Receives: a dead claimer costs its message one receive while
// the visibility timeout outlasts the lease (the template's values), two
// otherwise (one hidden look, then the takeover); a copy of a live
// claimer's message costs two (hidden, then dropped). With maxReceiveCount
// 5 the message recovers up to four claimers in a row that die on it (two
// with a lease past the visibility timeout) before it dead-letters: a job
// that kills its claimers every time is worth that alarm, and the
// reclaimer still takes it back, until the maximum age abandons it.
//
// Order on retry: send the new message (version = lease version + 1,
// attempt + 1, delay ≤ 900 s with not_before for the rest), then Release
// the record to queued at that version with due_at, attempt and
// first_failure_at, then answer without reporting the original (the event
// source mapping deletes it). A crash between
// steps duplicates (the versions drop the extra message) instead of losing
// the job. The ladder position (the record's attempt) and first_failure_at
// survive every re-send: the policy reads them from the record, never from
// the message, and a re-send never resets them.
//
// If the send itself fails, nothing is released and the message is
// reported: it comes back after the visibility timeout and takes the
// expired lease over (Takeover; the reclaimer is the backstop), which is
// sooner than a released record without a message would be found.
//
// Registration. The runner name is derived from the job and the record's
// replacements (job.RunnerNameAt: <pool>-<job_id>, then <pool>-<job_id>-r<n>
// for the n-th new attempt the reclaimer or the webhook started), so
// GitHub's 409 "already exists" can only mean an earlier try of this
// attempt: online or busy, its machine runs and it is reused (claimed,
// nothing provisioned); offline, it never connected, so it is deleted and
// a fresh config generated (the provisioner's lookup by job and runner
// name then finds the earlier machine, if any). A new attempt gets a new
// name, and so a new registration, machine and client token: the runner
// before it may have been taken by another job, keeping its name and
// machine, busy, until that job ends. A non-retryable provisioning
// failure deletes this attempt's registration after the fenced Finish; a
// retryable one leaves it for the next attempt's 409 path.
//
// Pools renamed or relabelled. The webhook resolves a job's pool once and
// the record names it. When that pool has left RUNNER_POOLS (renamed,
// removed), its labels no longer cover the job's (relabelled), or it would
// refuse the job now by the webhook's rule with the repository as the
// queued delivery described it (job.Record.Public, UserOwned: it stopped
// allowing public repositories, or moved to the organisation and the
// repository is a user's), the attempt resolves the pool again by that
// rule (pool.Serve: labels, organisation pools skipped for a user's
// repository, the public-repo policy), reading the repository's
// visibility and owner type from GitHub (GitHub.Repository, one call, only
// on this path; a public repository's answer at most once per RepoTTL in a
// process: repoCache), and claims in the pool that serves the job now (the
// recorded one itself when the repository was made private since), its
// runner named after it; the record moves to that pool under the lease
// before the runner is registered (Store.Move: a claimer that dies next
// leaves a record naming its runner's pool, even when the rename is rolled
// back), and the claim's outcome, or its retry, says so again
// (job.Outcome.Pool, job.Retry.Pool), so the next
// attempt (the 409 path), the reclaimer and the janitor find the runner
// under its name whatever RUNNER_POOLS says by then. Only a job no
// runner of ours may take yet is moved: when an earlier attempt of this
// replacement (one that reached GitHub or the provisioner, or whose
// claimer died holding the lease) registered a runner under the recorded
// pool's name and GitHub still has it (keptByEarlier looks, at both scopes
// when the record names none), the job stays in that pool, claimed with
// that runner as the 409 path claims with one of its own name, since that
// runner, its machine perhaps still booting, may yet take it; moved, a
// second runner would stand beside it. If it never takes the job, the
// reclaimer's liveness check (which judges a renamed pool's runner under
// its recorded name) replaces it after the start grace, and the new
// attempt, under a name of its own, moves. An offline one whose machine
// the provisioner does not know (its provisioning failed) can never take
// the job: it is removed as the 409 path removes one, and the job moves.
// An operator's `ghclaim retry` of an abandoned job moves it too, the last
// attempt's runner released first (releasePrevious, at both scopes when
// the record names none: "not found" at the wrong one would end a machine
// at work). Every call of the
// move is a call of the attempt: it counts (after the rate-state check,
// like any call), and its failure is classified and retried or failed like
// any other. When no pool has the job's labels (no call is made then), or
// the one that does may not serve the repository, the job is retried as
// before, with the same reason (a rollout may be under way, or be undone),
// until the maximum age abandons it. A pool gone from RUNNER_POOLS leaves
// no provisioner type: releasePrevious ends its machines through the new
// pool's provisioner (EC2's finds them by job and runner name; a dispatch
// pool's ends none, left to the boot script's idle limit).
//
// App refusals. GitHub refusing the installation-token exchange itself
// (failure.Failure.AppRefused: the App's key rotated on GitHub, a wrong
// App id or API URL, the installation removed or suspended) fails no job:
// the attempt counts and the job is retried on the ladder until the
// maximum age, its retry line at error level with cause "github_app", the
// reason and a hint, and never a credential. An operator who fixes the App
// gets every job of that window claimed, where failing them meant a
// `ghclaim retry` for each. A refusal of the job's own call (a repository
// the installation does not cover) still fails the job.
//
// Time. "Now" is read once per message and used for every write and
// condition of that message; only the deadline check reads the clock again.
//
// Give-ups. A job the retry path would abandon at the maximum age is
// asked about once (ranAtGitHub): cancelled while it was retried, or run,
// and the delivery that said so lost or skipped (no pool serves the job
// now), it is marked done, not abandoned, and pages nobody. Not asked
// while the installation's budget is exhausted or blocked (a rate-limit
// failure's reading or block is recorded before); a failed question
// abandons the job as before.
//
// Attempts. An attempt counts once it reaches GitHub or the provisioner;
// it is recorded by the Release or Finish that ends it. Two decisions
// count too, though they may reach nothing: a job no pool has the labels
// of (retried until a rollout finishes or is undone), and one no pool
// serves by the repository as GitHub last described it to this process
// (repoCache: the answer is GitHub's, remembered). Each retries the job,
// and counted, the ladder advances: uncounted, it would come back every
// 30 s until the maximum age, a write and a message each time. A claim deferred
// because the installation's budget is exhausted is not an attempt (the
// ladder does not advance), but it counts toward the maximum age: the first
// deferral sets first_failure_at when no failure did, later ones keep it,
// and a deferral past the maximum age abandons the job. Otherwise a job
// that only ever meets an exhausted budget would be deferred forever with
// its clock never started. That abandonment calls no GitHub (the budget is
// exhausted, and DESIGN forbids calling it then), so it does not look up an
// earlier attempt's registration by name, as the retry path's abandonment
// does (a registration whose machine never got its config stays offline and
// takes no job); the provisioner removes what that attempt left (the EC2
// adapter's SSM parameter, so a machine still booting finds no config and
// powers off).
//
// Rate state. Before calling GitHub at all (not even for an installation
// token), the claimer looks at the installation's reading: the newest of
// this process's own (the rate transport feeds a ratelimit.Tracker with
// every response's X-RateLimit-* headers) and the shared
// rate#<installation_id> item. The shared item is read at most once per
// RateRefresh (default 5 s) per installation per process, and only when
// this process's own reading is unknown, older than RateRefresh, or Low (at
// most 10 % of the limit left, ratelimit.PersistRule.Low): other claimers
// write the item on every 10 % drop and on exhaustion, so a fresh reading
// above that cannot be contradicted unless more than 10 % of the budget
// went within the refresh interval, and then this process's own next
// response says so (ratelimit.Gate). A busy claimer so reads it about
// once, not every 5 s, yet an idle or cold one, or one near the end of the
// budget, learns within seconds of an exhaustion another instance saw. When the budget is
// exhausted (ratelimit.Reading.Exhausted: remaining 0, observed less than
// 5 min ago, reset still ahead) the claim is deferred to the reset plus the
// policy's snap jitter, chained through not_before. After every attempt
// that reached GitHub the tracker shares its reading when the
// ratelimit.PersistRule says another claimer's decision depends on it
// (remaining hit 0, a new window, a large drop, or 30 s old); a rate limit
// learnt from an error without headers (go-github's own pre-request check)
// is recorded first.
//
// Batches. Messages of one batch are handled by up to Concurrency (1–4,
// default 4) workers. A worker starts a message only while the invocation
// has more than SafetyMargin (default 10 s, longer than any single step)
// left; the messages nobody started are made visible again at once with
// reclaim.Spread delays (so M released claims do not stampede) and
// reported as batch item failures. Calls to GitHub and the provisioner run
// under a context that ends HandOffReserve (default 4 s) before the
// invocation, so a hung call fails as a network timeout and the job is
// still handed off, instead of the invocation dying with the lease held.
// Infrastructure errors (DynamoDB or SQS failing) make the message a batch
// item failure too: SQS redelivers it, and the versions decide whether it
// is still current.
//
// Ports. Store, Queue and Provisioner are declared here in the domain's
// types (shared/job, shared/pool); the adapters implement them, so this
// package imports no AWS service SDK (a test runs go list -deps to prove
// it; shared/reclaim, imported for its Spread, is exempt until the spread
// moves to a pure package).
package claim

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// Defaults of Config.
const (
	DefaultLease        = 3 * time.Minute
	DefaultConcurrency  = 4
	DefaultSafetyMargin = 10 * time.Second
	// DefaultHandOffReserve is kept free at the end of an invocation for
	// the writes that record an attempt (send, release).
	DefaultHandOffReserve = 4 * time.Second
	DefaultEarlyDelay     = 5 * time.Second
	DefaultRetrySoon      = 10 * time.Second
	DefaultRateRefresh    = ratelimit.DefaultRefresh
	// MaxConcurrency bounds workers per batch: more would only add GitHub
	// pressure from one instance.
	MaxConcurrency = 4
)

// Config is a claimer's settings and collaborators. Store, Queue, GitHub,
// Provisioner, Policy and Pools are required; every other zero value takes
// its default (New fills them, in one place).
type Config struct {
	// Pools is RUNNER_POOLS; a record names its pool.
	Pools []pool.Pool
	// Lease must exceed the function's timeout.
	Lease time.Duration
	// Concurrency is the number of messages of a batch handled at once (1–4).
	Concurrency int
	// SafetyMargin: no message is started with less than this left.
	SafetyMargin time.Duration
	// HandOffReserve: GitHub and provisioner calls end this long before
	// the invocation, so the outcome can still be recorded.
	HandOffReserve time.Duration
	// EarlyDelay: the least wait of a message newer than its record (it
	// waits out its sender's lease), and the wait of one that no lease
	// explains.
	EarlyDelay time.Duration
	// RetrySoon: how soon a message comes back after an infrastructure
	// error, jittered up to twice as long.
	RetrySoon time.Duration
	// RateRefresh: how often the shared rate reading is re-read per installation.
	RateRefresh time.Duration
	// InstanceID identifies this process in lease owners (default: random).
	InstanceID string

	Store       Store
	Queue       Queue
	GitHub      GitHub
	Provisioner Provisioner
	Policy      Policy
	// Rates is this process's rate state, the tracker the GitHub client's
	// rate transport feeds (nil: a tracker over Store that only sees
	// readings learnt from errors and shared ones).
	Rates RateState
	// Now is the clock (time.Now when nil); Rand the random source of
	// jitter and spread (random.Global when nil).
	Now  clock.Func
	Rand random.Source
	// Logger gets one line per decision (discarded when nil).
	Logger *slog.Logger
	// Metrics makes each decision's line its EMF document (Claims by
	// outcome, see metrics.go) and gathers the other counts, which Handle
	// flushes once per invocation.
	Metrics *obs.Metrics
}

// withDefaults fills every zero setting; validate has run.
func (c Config) withDefaults() Config {
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	c.Concurrency = min(c.Concurrency, MaxConcurrency)
	if c.SafetyMargin <= 0 {
		c.SafetyMargin = DefaultSafetyMargin
	}
	if c.HandOffReserve <= 0 || c.HandOffReserve >= c.SafetyMargin {
		c.HandOffReserve = min(DefaultHandOffReserve, c.SafetyMargin/2)
	}
	if c.EarlyDelay <= 0 {
		c.EarlyDelay = DefaultEarlyDelay
	}
	if c.RetrySoon <= 0 {
		c.RetrySoon = DefaultRetrySoon
	}
	if c.RateRefresh <= 0 {
		c.RateRefresh = DefaultRateRefresh
	}
	if c.InstanceID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		c.InstanceID = hex.EncodeToString(b[:])
	}
	c.Now = clock.Or(c.Now)
	c.Rand = random.Or(c.Rand)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Rates == nil {
		c.Rates = ratelimit.NewTracker(c.Store, ratelimit.DefaultPersistRule(), c.Now)
	}
	return c
}

// validate names the first missing collaborator.
func (c Config) validate() error {
	for _, f := range []struct {
		name string
		nil  bool
	}{
		{"Store", c.Store == nil}, {"Queue", c.Queue == nil}, {"GitHub", c.GitHub == nil},
		{"Provisioner", c.Provisioner == nil}, {"Policy", c.Policy == nil}, {"Pools", len(c.Pools) == 0},
	} {
		if f.nil {
			return fmt.Errorf("claim: Config.%s is required", f.name)
		}
	}
	return nil
}

// Claimer handles claim messages. It is safe for concurrent use.
type Claimer struct {
	cfg   Config
	gate  *ratelimit.Gate // reads of the shared rate item
	repos repoCache       // repositories read by resolve
}

// New validates cfg, fills its defaults and returns a claimer.
func New(cfg Config) (*Claimer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Claimer{cfg: cfg, gate: ratelimit.NewGate(cfg.Rates, cfg.RateRefresh)}, nil
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

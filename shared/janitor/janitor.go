// Package janitor owns the scheduled clean-up of what outlived its job:
// runners named <pool>-<job_id> (or <pool>-<job_id>-r<n>, a later attempt:
// job.RunnerNameAt) whose job is over, the machines of such
// jobs, and JIT config parameters no live machine can read any more.
//
// One pass, in order:
//  1. Runners. The App's installations come from GET /app/installations
//     (one App-JWT call, the App's own budget), not from job records: the
//     table cannot list its records without a Scan, and an installation
//     whose records expired may still hold our runners. For each
//     installation whose rate reading (see Rate state below) is not exhausted:
//     org-scope pools list the organisation's runners; repo-scope pools
//     list the installation's repositories (GET /installation/repositories)
//     and then each repository's runners. Only runners whose name
//     job.ParseRunnerName reads as an attempt of a configured pool at that
//     pool's scope are looked at, and those of a pool no longer configured
//     (renamed, removed: "<x>-<job_id>[-r<n>]", x no configured pool's
//     name) whose job's record names them: the record exists (not past
//     its TTL), is of that repository (or its organisation) and its pool
//     is x or its runner_name is the runner's. Such a runner is judged as
//     below with the pool that serves the record's labels now (pool.Serve,
//     the webhook's rule) standing in under the name x (its start grace,
//     its provisioner); with no record, or no pool serving the labels, it
//     is left. Every other runner is never touched. Only the scopes the
//     configured pools use are listed: a pool gone from a scope no
//     configured pool uses (the last org-scope pool, say) leaves runners
//     there the janitor never sees. For each, the job record decides:
//     - non-terminal (queued … claimed): live, left alone (a claimed job's
//     runner is watched by the reclaimer, not here);
//     - terminal (done, failed, abandoned): deleted unless busy, or idle
//     with its job done less than its pool's runner-start grace ago: another
//     job whose runner took that job may be waiting for this one (the swap,
//     shared/webhook), and gets that long before its liveness check
//     (spares_kept). GitHub's 422 "still running a job" on the delete
//     (ghapp.IsStillRunning) means it turned busy between the list and
//     the delete: left alone and counted (busy_race); any other refusal
//     is an error, logged and counted (errors). A deleted runner's
//     attempt is then cleaned up by its provisioner (parameter deleted,
//     that attempt's machines terminated): its runner is gone, so nothing
//     on them can run. Only that attempt's: an earlier attempt's runner,
//     taken by another job, may be busy on its own machine.
//     - unknown (no record, or one past its TTL): the record is written
//     before any runner is registered, so absence is never a race with a
//     claim in flight; it means the record expired (7 days) or was removed,
//     or that the runner is not ours: another ghclaim stack on the same
//     organisation names its runners alike (the scaffold's linux-x64), and
//     its runner is offline while its machine boots. GitHub gives no
//     creation time for a runner, and the janitor keeps no state between
//     passes (its table access is GetItem only), so the grace is the
//     runner's own status and this stack's machines: an unknown runner is
//     deleted only when offline, not busy, and named by a live machine of
//     this stack where it is registered (its runner-name, repo and scope
//     tags; the machines are listed first).
//     An online one holds a machine; the boot script's idle limit powers
//     that machine off (terminated), so by the time its runner is offline
//     no live machine names it. One no machine of ours names (ours whose
//     machine is gone, another stack's, every dispatch pool's) is left
//     (unknown_not_ours): GitHub removes an ephemeral runner offline for a
//     day by itself.
//  2. Machines: every live instance tagged ghclaim:job-id of this stack
//     (another stack's, by its ghclaim:stack tag, is not listed:
//     provision.Leftovers), listed at the start of the pass. One tagged
//     with a pool no longer configured is judged only when its job's
//     record names it (its pool, or the machine's runner name) and the
//     machine or the record says where its runner registered, with the
//     stand-in pool above; else it is left. One whose job is
//     terminal, or unknown and launched more than UnknownGrace ago, is
//     terminated through the provisioner (Cleanup) only when its runner
//     (the machine's runner-name tag: one attempt's) is known to be gone:
//     GitHub, asked by name, says it is not there, after a full listing of
//     its scope this pass that did not show it or, for a scope no listing
//     reached (the budget went on other scopes, or on an installation's
//     long repository list), from the machine phase's reserve directly. A
//     machine whose runner is present (busy, or a delete that failed), or
//     whose installation was not reached (rate limit, error), is left: a
//     machine at work must never be ended.
//  3. Parameters under /ghclaim/runners/ of this stack (listed alike)
//     older than ConfigGrace whose
//     instance-ARN tag names no live machine (or that carry no tag) are
//     deleted: only that instance may read it, so nobody ever will. The
//     grace covers the moment between a launch and its parameter write,
//     and DescribeInstances' eventual consistency. Skipped when the
//     machine listing failed. A parameter whose tags could not be read
//     (Parameter Store throttled the read) is left for the next pass: the
//     pass is Incomplete, counts it (ConfigsUnread, not an error) and
//     says so in one log line.
//
// Bounded: a pass stops asking GitHub after MaxCalls calls (a list page
// counts as one; whole lists, the installations' included, are one call
// per 100 entries; the runner phase leaves one call per live machine, up
// to a quarter of MaxCalls, and a quarter of the pass's time to the
// machine phase's confirmations) and stops
// altogether at its Budget or the invocation's deadline minus Reserve;
// what is left waits for the next pass (Incomplete). The time bound holds
// for the record reads and the parameter phase too, which call no GitHub;
// the machine phase's reserve holds even when a list's further pages
// (charged after it) overran the runner phase's share: such a pass may
// then make up to MaxCalls/4 calls over MaxCalls, besides the overrun. Repositories are
// visited in a new random order every pass, so a budget smaller than an
// installation's repositories still covers them all over a few passes.
// With the defaults (100 calls every 15 minutes) the janitor spends at
// most 400 calls an hour across all installations, 8 % of one
// installation's 5000.
//
// Rate state, as the claimer keeps it: an installation's reading comes
// through a ratelimit.Gate, so the shared rate#<installation> item is read
// only when this process's own reading (from its last pass) is unknown,
// older than RateRefresh (5 s) or Low, at most once per RateRefresh; in
// practice once per installation per pass. After an installation's calls
// the tracker shares what they observed (Persist, by the persist rule):
// an exhaustion the janitor met stops the claimers too.
//
// An installation's budget that runs out during the pass stops the pass's
// work on it: the gate is asked again before each of its GitHub calls
// (its own reading, from the previous response, says remaining 0), and a
// GitHub answer that failure.Classify calls rate_limit (403 with
// X-RateLimit-Remaining 0, a secondary limit's 403 or 429 with
// Retry-After) says so too. No further call is made for that installation
// in the pass: each would be refused or rejected, and a rejected call
// still counts against the budget the claimers live on. One log line
// names the installation, the repositories left unlisted and the reset
// when known; the pass counts it (SkippedRateLimited,
// ReposSkippedRateLimited), not as errors, and goes on with the next
// installation. Nothing is remembered across passes: the next one asks
// the gate afresh. Only GitHub's answers count here; a throttled job
// record read (DynamoDB) or provisioner call is an error like any other.
//
// Each pass ends with one log line and EMF metric lines counting every
// action: removals (runners deleted, machines ended) by the pool their
// name or tags say (job.ParseRunnerName, the machine's pool tag) and
// fleet-wide, everything else fleet-wide. This package must never import an AWS service package, never
// delete a runner it did not name, and never end a machine whose runner
// may be busy.
package janitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/redact"
)

// Store reads job records (shared/store, infra/mem). Get fails with an
// error wrapping job.ErrNotFound when there is none.
type Store interface {
	Get(ctx context.Context, id int64) (job.Record, error)
}

// GitHub is the part of the App client the janitor uses; *ghapp.Client
// implements it. DeleteRunner treats a runner already gone as success and
// fails with GitHub's 422 (ghapp.IsStillRunning) for a busy one.
type GitHub interface {
	Installations(ctx context.Context) ([]ghapp.Installation, error)
	Repositories(ctx context.Context, installationID int64) ([]string, error)
	ListRunners(ctx context.Context, installationID int64, scope, owner, repo string) ([]ghapp.Runner, error)
	// FindRunner looks one runner up by name (ghapp.ErrRunnerNotFound when
	// there is none): the last word before a machine is ended.
	FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error)
	DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, runnerID int64) error
}

var (
	_ GitHub = (*ghapp.Client)(nil)
	_ GitHub = (*ghapp.Keyed)(nil) // what functions/janitor wires
)

// Rates is this process's rate state; *ratelimit.Tracker implements it
// (the GitHub client's rate transport feeds it). The janitor reads it
// through a ratelimit.Gate before an installation's calls and, after them,
// shares what they observed with Persist.
type Rates interface {
	ratelimit.Source
	// Observe records a secondary limit GitHub's message told of.
	ratelimit.Observer
	// Persist shares the latest reading when the persist rule says
	// another process's decision depends on it.
	Persist(ctx context.Context, installationID int64) (bool, error)
}

// Provisioner ends what provisioning left for a job (its JIT config and,
// unless req.KeepMachines, its machines); provision.Registry implements it.
type Provisioner interface {
	Cleanup(ctx context.Context, req pool.Request) error
}

// Leftovers lists live machines and stored JIT configs;
// provision.Leftovers implements it over EC2 and SSM.
type Leftovers interface {
	LiveMachines(ctx context.Context) ([]pool.Machine, error)
	// Configs lists the configs last modified before before: younger ones
	// are kept anyway (ConfigGrace), and reading them costs calls. Those it
	// could not read (throttled) are named in Unread, not listed.
	Configs(ctx context.Context, before time.Time) (pool.ConfigList, error)
	DeleteConfig(ctx context.Context, name string) error
}

var (
	_ GitHub = (*ghapp.Client)(nil)
	_ Rates  = (*ratelimit.Tracker)(nil)
)

// Defaults.
const (
	DefaultUnknownGrace = time.Hour
	DefaultConfigGrace  = 15 * time.Minute
	DefaultMaxCalls     = 100
	DefaultBudget       = 2 * time.Minute
	DefaultReserve      = 5 * time.Second
)

// Config is a janitor's settings and collaborators. Store, GitHub, Pools,
// Provisioner and Leftovers are required; Rates is optional (no reading:
// every installation is asked); every other zero value takes its default.
type Config struct {
	Store       Store
	GitHub      GitHub
	Rates       Rates
	Provisioner Provisioner
	Leftovers   Leftovers
	Pools       []pool.Pool
	// RateRefresh: the shared rate item is read at most this often per
	// installation (ratelimit.DefaultRefresh when zero).
	RateRefresh time.Duration
	// UnknownGrace: a machine of a job unknown to us is ended only once
	// launched this long ago.
	UnknownGrace time.Duration
	// ConfigGrace: a parameter is deleted only once this old.
	ConfigGrace time.Duration
	// MaxCalls bounds the GitHub calls of one pass.
	MaxCalls int
	// Budget bounds one pass's time; Reserve is kept free before the
	// invocation's deadline.
	Budget  time.Duration
	Reserve time.Duration
	// Now is the clock (time.Now when nil).
	Now clock.Func
	// Rand orders repositories (random.Global when nil).
	Rand    random.Source
	Logger  *slog.Logger
	Metrics *obs.Metrics
}

// Janitor removes what outlived its job. One pass at a time per instance.
type Janitor struct {
	cfg  Config
	gate *ratelimit.Gate // nil without Rates
}

// New validates cfg, fills its defaults and returns a janitor.
func New(cfg Config) (*Janitor, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("janitor: Config.Store is required")
	case cfg.GitHub == nil:
		return nil, errors.New("janitor: Config.GitHub is required")
	case cfg.Provisioner == nil:
		return nil, errors.New("janitor: Config.Provisioner is required")
	case cfg.Leftovers == nil:
		return nil, errors.New("janitor: Config.Leftovers is required")
	case len(cfg.Pools) == 0:
		return nil, errors.New("janitor: Config.Pools is required")
	}
	if cfg.UnknownGrace <= 0 {
		cfg.UnknownGrace = DefaultUnknownGrace
	}
	if cfg.ConfigGrace <= 0 {
		cfg.ConfigGrace = DefaultConfigGrace
	}
	if cfg.MaxCalls <= 0 {
		cfg.MaxCalls = DefaultMaxCalls
	}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.Reserve <= 0 {
		cfg.Reserve = DefaultReserve
	}
	if cfg.RateRefresh <= 0 {
		cfg.RateRefresh = ratelimit.DefaultRefresh
	}
	cfg.Now = clock.Or(cfg.Now)
	cfg.Rand = random.Or(cfg.Rand)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	j := &Janitor{cfg: cfg}
	if cfg.Rates != nil {
		j.gate = ratelimit.NewGate(cfg.Rates, cfg.RateRefresh)
	}
	return j, nil
}

// Report counts what one pass did.
type Report struct {
	RunnersDeleted int // of a terminal job, or unknown, offline and named by a machine of ours
	RunnersBusy    int // of a terminal job, busy: left
	BusyRace       int // turned busy between the list and the delete: left
	RunnersLive    int // of a non-terminal job: left
	UnknownKept    int // unknown job, runner online: left for now
	// UnknownNotOurs counts offline runners of an unknown job that no
	// live machine of this stack names: another stack's, perhaps, or a
	// machine already gone; left for GitHub, which removes an ephemeral
	// runner offline for a day.
	UnknownNotOurs int
	// ElsewhereSkipped counts runners named like a job's runner, listed in
	// another repository or organisation than the job's: not ours, left.
	ElsewhereSkipped int
	// ForeignSkipped counts runners named like a pool no longer configured
	// whose record was not read: their prefix's first records named none
	// of them (another tool's runners, see pass.foreign).
	ForeignSkipped int
	// SparesKept counts idle runners of a job done less than its pool's
	// runner-start grace ago: left, since another job whose runner took
	// that job may be waiting for this one (shared/webhook's swap).
	SparesKept    int
	MachinesEnded int
	MachinesKept  int // terminal or unknown job whose runner may still be there
	// RunnerReappeared counts machines kept because GitHub, asked by
	// name, still had the runner the listing missed.
	RunnerReappeared int
	ConfigsDeleted   int
	// ConfigsUnread counts parameters the listing could not read (their
	// tags' read throttled): left for the next pass, which makes this one
	// Incomplete; not counted in Errors.
	ConfigsUnread int
	RateLimited   int // installations not asked: rate reading exhausted
	// Suspended counts installations not asked: suspended by their
	// account's owner (GitHub refuses their tokens).
	Suspended int
	// SkippedRateLimited counts installations whose budget ran out during
	// the pass: the rest of their work waits for the next pass.
	SkippedRateLimited int
	// ReposSkippedRateLimited counts those installations' repositories
	// left unlisted (0 when the stop came before their list).
	ReposSkippedRateLimited int
	Errors                  int
	Incomplete              bool // the budget ran out; the next pass continues
	ScopesListed            int
	InstallationsSeen       int
}

// Handle runs one pass as a scheduled Lambda handler. The runtime logs a
// returned error as it is, and GitHub's message in it (listing the
// installations is signed with the App JWT) may quote a credential: it is
// redacted, as every log line is.
func (j *Janitor) Handle(ctx context.Context) error {
	_, err := j.Run(ctx)
	return redact.Error(err)
}

// scopeKey names a listed scope, case-insensitively as GitHub compares.
func scopeKey(scope, owner, repo string) string {
	return strings.ToLower(scope + "|" + owner + "|" + repo)
}

// pass is one run's state.
type pass struct {
	now, by time.Time
	calls   int
	// reserve is the calls the runner phase leaves to the machine phase,
	// whose confirmations (FindRunner, one per machine) it would otherwise
	// spend on listings: an installation with more repositories than
	// MaxCalls used every call, so a machine whose runner was gone was
	// never confirmed gone, and never ended.
	reserve int
	// listUntil ends the runner phase: a quarter of the pass's time is
	// left to the machine phase when there are machines, which a runner
	// phase that used all of it would leave unjudged pass after pass.
	listUntil time.Time
	rep       Report
	// listed maps a fully listed scope to the runner names still in it,
	// and lister to the installation that listed it.
	listed map[string]map[string]bool
	lister map[string]*installState
	// owners maps an owner (lower-cased) to its installation's state, for
	// a machine whose scope the runner phase did not list.
	owners map[string]*installState
	// cleaned holds the attempts (lower-cased runner names) whose
	// provisioner cleanup ran this pass.
	cleaned map[string]bool
	// foreign counts, per prefix a runner name gives that is no configured
	// pool's (lower-cased), the runners whose job record did not name it
	// this pass; ours marks those one record did name. Past
	// maxForeignReads misses and no hit, the prefix's runners are taken
	// for another tool's ("build-agent-17") and their records not read:
	// a record read for each of them, every pass, could spend the runner
	// phase's time before ours are reached.
	foreign map[string]int
	ours    map[string]bool
	// machineRunners holds this stack's live machines listed at the
	// pass's start by the runner each names (lower-cased): an offline
	// runner of an unknown job is ours to delete only when one of them
	// names it where it is registered (machineNames).
	machineRunners map[string][]pool.Machine
}

// machineNames reports whether a live machine of this stack names the
// runner name of pool pl listed in the scope (scope, owner, repo): its
// runner name, and where that runner registered (the machine's scope
// tag, else pl's scope; its repository, or that repository's
// organisation). A runner of that name in another repository of the
// installation is not that machine's: deleted, its clean-up would end the
// machine, busy perhaps with its own runner's job.
func (p *pass) machineNames(pl pool.Pool, name, scope, owner, repo string) bool {
	for _, m := range p.machineRunners[strings.ToLower(name)] {
		mOwner, mRepo, _ := strings.Cut(m.Repo, "/")
		if pl.Where(m.Scope) != scope || !strings.EqualFold(mOwner, owner) {
			continue
		}
		if scope == pool.ScopeOrg || strings.EqualFold(mRepo, repo) {
			return true
		}
	}
	return false
}

// maxForeignReads is how many runners of one unknown prefix a pass reads
// the job record of before it takes the prefix for another tool's.
const maxForeignReads = 3

// Run makes one pass and reports it. Its error is the first listing that
// failed as a whole (installations, machines); single failures are counted.
func (j *Janitor) Run(ctx context.Context) (Report, error) {
	now := j.cfg.Now()
	p := &pass{now: now, by: now.Add(j.cfg.Budget), listed: map[string]map[string]bool{},
		lister: map[string]*installState{}, owners: map[string]*installState{}, cleaned: map[string]bool{},
		foreign: map[string]int{}, ours: map[string]bool{}}
	if dl, ok := ctx.Deadline(); ok && dl.Add(-j.cfg.Reserve).Before(p.by) {
		p.by = dl.Add(-j.cfg.Reserve)
	}
	// The machines are listed first: their number sets the reserve.
	ms, merr := j.cfg.Leftovers.LiveMachines(ctx)
	p.listUntil = p.by
	p.machineRunners = map[string][]pool.Machine{}
	if merr == nil {
		for _, m := range ms {
			k := strings.ToLower(machineRunner(m))
			p.machineRunners[k] = append(p.machineRunners[k], m)
		}
	}
	if merr == nil && len(ms) > 0 {
		p.reserve = min(len(ms), j.cfg.MaxCalls/machineShare)
		p.listUntil = p.by.Add(-p.by.Sub(now) / machineShare)
	}
	err := j.runners(ctx, p)
	// The reserve stays the machine phase's even when a list's further
	// pages, charged after the list, overran the runner phase's share:
	// an installation of 10,000 repositories has a list of 100 pages.
	p.calls = min(p.calls, j.cfg.MaxCalls-p.reserve)
	p.reserve, p.listUntil = 0, p.by
	if merr != nil {
		p.rep.Errors++
		merr = fmt.Errorf("janitor: %w", merr)
	} else {
		merr = j.machines(ctx, p, ms)
	}
	if err == nil {
		err = merr
	}
	if err == nil && p.rep.ScopesListed == 0 && p.rep.Errors > 0 {
		// Every listing failed (a lost permission, a token GitHub refuses):
		// the pass did nothing, and only an error reaches the function's
		// Errors metric and JanitorErrorsAlarm. Skipped installations (rate
		// limit) are not errors.
		err = fmt.Errorf("janitor: no runner list of %d installation(s) could be read (%d errors)", p.rep.InstallationsSeen, p.rep.Errors)
	}
	j.report(ctx, p.rep, err)
	return p.rep, err
}

// pages charges a list of n entries its further pages (GitHub serves 100
// a page; spend charged the first before the call).
func (p *pass) pages(n int) {
	if n > listPage {
		p.calls += (n - 1) / listPage
	}
}

// listPage is the entries of one page of GitHub's lists (per_page=100).
const listPage = 100

// machineShare: the runner phase leaves at most MaxCalls/machineShare
// calls (one per live machine), and 1/machineShare of the pass's time, to
// the machine phase.
const machineShare = 4

// spend takes one GitHub call from the pass's budget; false when none is left.
func (j *Janitor) spend(p *pass) bool {
	if p.calls >= j.cfg.MaxCalls-p.reserve || !j.cfg.Now().Before(p.listUntil) {
		p.rep.Incomplete = true
		return false
	}
	p.calls++
	return true
}

func (j *Janitor) hasScope(scope string) bool {
	for _, pl := range j.cfg.Pools {
		if pl.Scope == scope {
			return true
		}
	}
	return false
}

func (j *Janitor) runners(ctx context.Context, p *pass) error {
	if !j.spend(p) {
		return nil
	}
	insts, err := j.cfg.GitHub.Installations(ctx)
	if err != nil {
		p.rep.Errors++
		return fmt.Errorf("janitor: %w", err)
	}
	p.pages(len(insts))
	// A new order every pass, as for repositories: a budget smaller than
	// the fleet must not always leave the same installations unvisited.
	for _, i := range j.cfg.Rand.Perm(len(insts)) {
		in := insts[i]
		if !j.cfg.Now().Before(p.listUntil) {
			// The runner phase's time is up: no rate read or share for
			// the rest (a throttled table made each a second), but their
			// owners are known, so the machine phase may still judge
			// their machines from its reserve (its call reads the rate).
			p.rep.Incomplete = true
			if k := strings.ToLower(in.Owner); p.owners[k] == nil {
				p.owners[k] = &installState{id: in.ID}
			}
			continue
		}
		p.rep.InstallationsSeen++
		if !in.SuspendedAt.IsZero() {
			// GitHub refuses a suspended installation's tokens (403):
			// nothing of it can be listed or deleted until its owner
			// unsuspends it, and asking costs a refused exchange and an
			// error every pass. Its machines are left, as a rate-limited
			// installation's are (not reached); ghclaim doctor names it.
			p.rep.Suspended++
			j.cfg.Logger.WarnContext(ctx, "janitor skips installation: suspended",
				slog.Int64("installation_id", in.ID), slog.String("account", in.Owner), slog.Time("suspended_at", in.SuspendedAt))
			continue
		}
		if rd, halted := j.rate(ctx, in.ID, p.now); halted {
			p.rep.RateLimited++
			j.cfg.Logger.WarnContext(ctx, "janitor skips installation: rate limit exhausted or blocked",
				slog.Int64("installation_id", in.ID), slog.Time("reset_at", rd.ResumeAt(p.now)), slog.Bool("blocked", rd.Blocked(p.now)))
			continue
		}
		st := &installState{id: in.ID}
		p.owners[strings.ToLower(in.Owner)] = st
		j.installation(ctx, p, st, in)
		if st.stopped {
			j.stopped(ctx, p, st)
		}
		j.shareRate(ctx, in.ID)
	}
	return nil
}

// installState is one installation's part of a pass: whether its budget
// ran out, and what is known of it.
type installState struct {
	id      int64
	stopped bool
	resetAt time.Time // when the budget is back; zero when unknown
	reason  string    // failure.Failure.Reason of GitHub's answer, or the gate's
	skipped int       // repositories left unlisted
	known   bool      // its repositories were listed
}

// call takes one GitHub call for st's installation: false when the pass's
// budget is spent, or the installation's (now, or earlier in the pass).
func (j *Janitor) call(ctx context.Context, p *pass, st *installState) bool {
	if st.stopped {
		return false
	}
	now := j.cfg.Now()
	if rd, halted := j.rate(ctx, st.id, now); halted {
		st.stopped, st.resetAt, st.reason = true, rd.ResumeAt(now), "rate state exhausted"
		if rd.Blocked(now) {
			st.reason = "rate state blocked by a secondary limit"
		}
		return false
	}
	return j.spend(p)
}

// limited reports whether err, GitHub's answer to a call for st's
// installation, says the installation's budget is gone (failure.Classify's
// rate_limit: the claimer's own reading of it), and if so stops st.
func (j *Janitor) limited(st *installState, err error) bool {
	fl := failure.Classify(err)
	if fl.Class != failure.RateLimit {
		return false
	}
	st.stopped, st.resetAt, st.reason = true, fl.ResetAt, fl.Reason
	if fl.RetryAfter > 0 {
		st.resetAt = j.cfg.Now().Add(fl.RetryAfter)
	}
	if fl.Secondary() && j.cfg.Rates != nil {
		// It binds every caller of the installation: the claimers too,
		// once the pass's shareRate writes it.
		b := ratelimit.Block(j.cfg.Now(), fl.RetryAfter)
		j.cfg.Rates.Observe(st.id, b)
		st.resetAt = b.BlockedUntil
	}
	return true
}

// stopped logs and counts an installation whose budget ran out this pass.
func (j *Janitor) stopped(ctx context.Context, p *pass, st *installState) {
	p.rep.SkippedRateLimited++
	p.rep.ReposSkippedRateLimited += st.skipped
	attrs := []any{slog.Int64("installation_id", st.id), slog.String(obs.KeyClass, failure.RateLimit.String()),
		slog.String(obs.KeyReason, st.reason), slog.Int("repositories_skipped", st.skipped),
		slog.Bool("repositories_known", st.known)}
	if !st.resetAt.IsZero() {
		attrs = append(attrs, slog.Time("reset_at", st.resetAt.UTC()))
	}
	j.cfg.Logger.WarnContext(ctx, "janitor stops installation for this pass: rate limit exhausted", attrs...)
}

// installation lists (and cleans up) the runners of in's scopes until the
// pass's or the installation's budget runs out.
func (j *Janitor) installation(ctx context.Context, p *pass, st *installState, in ghapp.Installation) {
	if in.Org && j.hasScope(pool.ScopeOrg) {
		j.scope(ctx, p, st, pool.ScopeOrg, in.Owner, "")
	}
	if !j.hasScope(pool.ScopeRepo) || !j.call(ctx, p, st) {
		return
	}
	repos, err := j.cfg.GitHub.Repositories(ctx, in.ID)
	if err != nil {
		if j.limited(st, err) {
			return
		}
		p.rep.Errors++
		j.cfg.Logger.WarnContext(ctx, "janitor could not list repositories",
			slog.Int64("installation_id", in.ID), slog.Any("err", err))
		return
	}
	p.pages(len(repos))
	st.known = true
	for k, i := range j.cfg.Rand.Perm(len(repos)) {
		if st.stopped {
			st.skipped += len(repos) - k
			return
		}
		if !j.scope(ctx, p, st, pool.ScopeRepo, in.Owner, repos[i]) && st.stopped {
			st.skipped++ // its own list was refused
		}
	}
}

// rate reads inst's budget at now through the janitor's gate (the shared
// item at most once per RateRefresh, and only when this process's own
// reading is not enough: ratelimit.Gate) and reports whether it is
// exhausted or blocked. A read error is not fatal: GitHub answers for itself.
func (j *Janitor) rate(ctx context.Context, inst int64, now time.Time) (ratelimit.Reading, bool) {
	if j.gate == nil {
		return ratelimit.Reading{}, false
	}
	rd, err := j.gate.Reading(ctx, inst, now)
	if err != nil {
		j.cfg.Logger.WarnContext(ctx, "janitor rate state unreadable", slog.Int64("installation_id", inst), slog.Any("err", err))
	}
	return rd, rd.Halted(now)
}

// shareRate shares what the pass's calls for inst observed (an exhaustion
// above all) when the persist rule says another process's decision
// depends on it. A failed write is logged: the claimers learn it from
// GitHub then.
func (j *Janitor) shareRate(ctx context.Context, inst int64) {
	if j.cfg.Rates == nil {
		return
	}
	if _, err := j.cfg.Rates.Persist(ctx, inst); err != nil {
		j.cfg.Logger.WarnContext(ctx, "janitor rate state not shared", slog.Int64("installation_id", inst), slog.Any("err", err))
	}
}

// ours returns the pool and job id a runner name names at scope, if any:
// an attempt's name (job.RunnerNameAt) of a configured pool of that scope.
func (j *Janitor) ours(name, scope string) (pool.Pool, int64, bool) {
	var names []string
	for _, pl := range j.cfg.Pools {
		if pl.Scope == scope {
			names = append(names, pl.Name)
		}
	}
	r, ok := job.ParseRunnerName(name, names...)
	if !ok {
		return pool.Pool{}, 0, false
	}
	pl, ok := pool.Find(j.cfg.Pools, r.Pool)
	return pl, r.JobID, ok
}

// unconfigured reads name as an attempt's name (job.RunnerNameAt) of a
// pool that is not configured, any more: a pool renamed or removed with
// its runners still registered. Ours only when the job's record says so
// (namedBy): the name alone may be another tool's.
func (j *Janitor) unconfigured(name string) (string, int64, bool) {
	var prefixes []string
	for i := 1; i < len(name); i++ {
		if name[i] == '-' {
			prefixes = append(prefixes, name[:i])
		}
	}
	r, ok := job.ParseRunnerName(name, prefixes...)
	if !ok || j.configured(r.Pool) {
		// A configured pool's name at a scope not its own is no more ours
		// than before.
		return "", 0, false
	}
	return r.Pool, r.JobID, true
}

// configured reports whether a pool of that name (in any case) is
// configured.
func (j *Janitor) configured(name string) bool {
	for _, pl := range j.cfg.Pools {
		if strings.EqualFold(pl.Name, name) {
			return true
		}
	}
	return false
}

// namedBy reports whether rec, a job's record, names what a pool no
// longer configured, x, left for it: its pool is x, or its runner is
// runner (the one that took the job, or ours). Nothing else of such a
// pool counts as ours.
func namedBy(rec job.Record, x, runner string) bool {
	return strings.EqualFold(rec.Pool, x) || (runner != "" && strings.EqualFold(rec.RunnerName, runner))
}

// sameRepo reports whether the listed scope is where rec's job's runner
// registers: the job's repository, or its owner's organisation.
func sameRepo(rec job.Record, scope, owner, repo string) bool {
	if scope == pool.ScopeOrg {
		return strings.EqualFold(rec.Owner(), owner)
	}
	return strings.EqualFold(rec.Repo, owner+"/"+repo)
}

// standIn is the pool that judges what a pool no longer configured, x,
// left for rec's job (reclaim's renamed, the claimer's earlier): the pool
// that serves the job's labels now by the webhook's rule, under the name
// x. Its start grace keeps a spare, its provisioner cleans up after the
// runner, its scope places a runner the record does not. ok is false when
// no pool serves the labels (or the record keeps none): left alone.
func (j *Janitor) standIn(x string, rec job.Record) (pool.Pool, bool) {
	if len(rec.Labels) == 0 {
		return pool.Pool{}, false
	}
	// Not the public-repo policy: the runner is ours whatever the pools
	// allow now, and only its grace, scope and provisioner are asked.
	p, why := pool.Serve(j.cfg.Pools, rec.Labels, pool.Repository{FullName: rec.Repo, UserOwned: rec.UserOwned})
	if why != "" {
		return pool.Pool{}, false
	}
	p.Name = x
	return p, true
}

// over reports whether a job needs no runner any more: done, failed or
// abandoned. Claimed is not over here (it is not terminal either): its
// runner may still be waiting for the job.
func over(s job.State) bool {
	return s == job.Done || s == job.Failed || s == job.Abandoned
}

// record reads a job's record; found is false for none (or one past its TTL).
func (j *Janitor) record(ctx context.Context, id int64, now time.Time) (rec job.Record, found bool, err error) {
	rec, err = j.cfg.Store.Get(ctx, id)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return job.Record{}, false, nil
	case err != nil:
		return job.Record{}, false, err
	case rec.Expired(now):
		return job.Record{}, false, nil
	}
	return rec, true, nil
}

// scope lists one scope's runners and deletes those of ours whose job is
// over; it reports whether the scope was listed.
func (j *Janitor) scope(ctx context.Context, p *pass, st *installState, scope, owner, repo string) bool {
	inst := st.id
	if !j.call(ctx, p, st) {
		return false
	}
	log := j.cfg.Logger.With(slog.Int64("installation_id", inst), slog.String("scope", scope),
		slog.String("owner", owner), slog.String("repo", repo))
	runners, err := j.cfg.GitHub.ListRunners(ctx, inst, scope, owner, repo)
	if err != nil {
		if j.limited(st, err) {
			return false
		}
		p.rep.Errors++
		log.WarnContext(ctx, "janitor could not list runners", slog.Any("err", err))
		return false
	}
	p.pages(len(runners))
	present := map[string]bool{}
	for _, r := range runners {
		present[r.Name] = true
	}
	p.rep.ScopesListed++
	key := scopeKey(scope, owner, repo)
	p.listed[key], p.lister[key] = present, st
	for _, r := range runners {
		pl, id, ok := j.ours(r.Name, scope)
		gone := "" // the pool no longer configured the name says, if that
		if !ok {
			if gone, id, ok = j.unconfigured(r.Name); !ok {
				continue // never touch a runner that is not ours
			}
			if k := strings.ToLower(gone); !p.ours[k] && p.foreign[k] >= maxForeignReads {
				p.rep.ForeignSkipped++
				continue
			}
		}
		if !j.cfg.Now().Before(p.listUntil) {
			// The runner phase's time is up (a record read is no GitHub
			// call, so spend never stopped them): listed, what is left
			// stays present, its machine kept.
			p.rep.Incomplete = true
			return true
		}
		rlog := log.With(slog.Int64(obs.KeyJobID, id), slog.String("runner_name", r.Name))
		rec, found, err := j.record(ctx, id, p.now)
		if err != nil {
			p.rep.Errors++
			rlog.WarnContext(ctx, "janitor could not read the job record", slog.Any("err", err))
			continue
		}
		if gone == "" && found && !sameRepo(rec, scope, owner, repo) {
			// Named like our job's runner, where that job's runner never
			// is (another repository of the installation, registered by
			// hand or on purpose): not ours. Deleted, its clean-up would
			// end our machine of that name, busy perhaps with a job it
			// took (a review proved it).
			p.rep.ElsewhereSkipped++
			continue
		}
		if gone != "" {
			// Only the job's record makes it ours: another tool's runner
			// may share the organisation, and be named alike.
			if !found || !namedBy(rec, gone, r.Name) || !sameRepo(rec, scope, owner, repo) {
				p.foreign[strings.ToLower(gone)]++
				continue
			}
			p.ours[strings.ToLower(gone)] = true
			if pl, ok = j.standIn(gone, rec); !ok {
				rlog.InfoContext(ctx, "janitor left a runner of a pool no longer configured: no pool serves its job now",
					slog.String("pool", gone))
				continue
			}
			rlog = rlog.With(slog.String("pool", gone), slog.Bool("pool_configured", false))
		}
		switch {
		case found && !over(rec.State):
			p.rep.RunnersLive++
			continue
		case r.Busy:
			p.rep.RunnersBusy++
			rlog.InfoContext(ctx, "janitor left a busy runner")
			continue
		case !found && r.Status != "offline":
			p.rep.UnknownKept++
			rlog.InfoContext(ctx, "janitor left an online runner of an unknown job", slog.String("status", r.Status))
			continue
		case !found && !p.machineNames(pl, r.Name, scope, owner, repo):
			// No record and no machine of this stack: nothing says it is
			// ours. Another stack of ghclaim on the same organisation
			// names its runners alike (pools share names: the scaffold's
			// linux-x64), and its runner of a job we never recorded is
			// offline while its machine boots: deleted, that job would
			// wait out its start grace for a replacement. GitHub removes
			// an ephemeral (JIT) runner offline for a day by itself.
			p.rep.UnknownNotOurs++
			rlog.InfoContext(ctx, "janitor left an offline runner of an unknown job: no machine of this stack names it")
			continue
		case found && rec.State == job.Done && p.now.Before(job.FromMillis(rec.UpdatedAt).Add(job.StartGrace(pl.StartGrace()))):
			// When another job A's runner took this job, A waits for this
			// job's own runner, booting or idle (shared/webhook: the swap);
			// A's liveness check replaces it only after A's grace. Deleting
			// it sooner leaves A with nothing coming.
			p.rep.SparesKept++
			rlog.InfoContext(ctx, "janitor left the idle runner of a job done lately: another job may be waiting for it",
				slog.String("status", r.Status))
			continue
		}
		if !j.call(ctx, p, st) {
			return true // listed: what is left is still present, its machine kept
		}
		if err := j.cfg.GitHub.DeleteRunner(ctx, inst, scope, owner, repo, r.ID); err != nil {
			if ghapp.IsStillRunning(err) {
				p.rep.BusyRace++
				rlog.InfoContext(ctx, "janitor left a runner that turned busy before its delete")
				continue
			}
			if j.limited(st, err) {
				return true
			}
			p.rep.Errors++
			rlog.WarnContext(ctx, "janitor could not delete a runner", slog.Any("err", err))
			continue
		}
		delete(present, r.Name)
		p.rep.RunnersDeleted++
		j.cfg.Metrics.Count(metricRunnersDeleted, 1, obs.Pool(pl.Name))
		rlog.InfoContext(ctx, "janitor deleted a runner", slog.Bool("known", found), slog.String(obs.KeyState, string(rec.State)))
		repoFull := rec.Repo
		if !found {
			repoFull = owner + "/" + repo
		}
		j.cleanup(ctx, p, pool.Request{JobID: id, RunID: rec.RunID, Repo: repoFull, Pool: pl, RunnerName: r.Name}, rlog)
	}
	return true
}

// cleanup ends an attempt's leftovers with its provisioner, once per pass.
func (j *Janitor) cleanup(ctx context.Context, p *pass, req pool.Request, log *slog.Logger) bool {
	if p.cleaned[strings.ToLower(req.RunnerName)] {
		return true
	}
	if err := j.cfg.Provisioner.Cleanup(ctx, req); err != nil {
		p.rep.Errors++
		log.WarnContext(ctx, "janitor could not clean up the job's machines", slog.Any("err", err))
		return false
	}
	p.cleaned[strings.ToLower(req.RunnerName)] = true
	return true
}

// machines judges the live machines ms (listed at the pass's start), then
// the configs no live machine can read.
func (j *Janitor) machines(ctx context.Context, p *pass, ms []pool.Machine) error {
	live := map[string]bool{}
	partial := false // the loop stopped before every machine was seen
	for _, m := range ms {
		if !j.cfg.Now().Before(p.by) {
			p.rep.Incomplete, partial = true, true
			break
		}
		live[m.ID] = true
		if p.cleaned[strings.ToLower(machineRunner(m))] {
			continue
		}
		if j.machine(ctx, p, m) {
			delete(live, m.ID)
		}
	}
	if partial {
		// No config is judged on a partial live set. (A runner phase cut
		// short by its budget does not make it partial: every live machine
		// was seen.)
		return nil
	}
	// The listing (a tag read per parameter) ends with the pass too: a
	// pass that outlives the function's timeout is killed unreported.
	cctx, cancel := context.WithTimeout(ctx, p.by.Sub(j.cfg.Now()))
	defer cancel()
	cs, err := j.cfg.Leftovers.Configs(cctx, p.now.Add(-j.cfg.ConfigGrace))
	if err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			p.rep.Incomplete = true // the pass's time ran out: the next pass lists them
			return nil
		}
		p.rep.Errors++
		return fmt.Errorf("janitor: %w", err)
	}
	if n := len(cs.Unread); n > 0 {
		// Parameter Store's request rate (shared with booting machines)
		// was spent: which machine may read these is unknown, so they are
		// not judged. Said, not counted as errors: the next pass reads them.
		p.rep.Incomplete = true
		p.rep.ConfigsUnread += n
		j.cfg.Logger.WarnContext(ctx, "janitor left parameters whose tags it could not read (throttled) for the next pass",
			slog.Int("count", n), slog.Any("parameters", cs.Unread))
	}
	for _, c := range cs.Parameters {
		if !j.cfg.Now().Before(p.by) {
			p.rep.Incomplete = true
			break
		}
		if live[c.InstanceID] || p.now.Sub(c.ModifiedAt) < j.cfg.ConfigGrace {
			continue
		}
		if err := j.cfg.Leftovers.DeleteConfig(ctx, c.Name); err != nil {
			p.rep.Errors++
			j.cfg.Logger.WarnContext(ctx, "janitor could not delete a parameter", slog.String("parameter", c.Name), slog.Any("err", err))
			continue
		}
		p.rep.ConfigsDeleted++
		j.cfg.Logger.InfoContext(ctx, "janitor deleted a parameter no live machine can read",
			slog.String("parameter", c.Name), slog.String("instance_id", c.InstanceID))
	}
	return nil
}

// machine ends m when its job is over and its runner is known to be gone;
// it reports whether it did.
func (j *Janitor) machine(ctx context.Context, p *pass, m pool.Machine) bool {
	log := j.cfg.Logger.With(slog.Int64(obs.KeyJobID, m.JobID), slog.String("instance_id", m.ID))
	pl, ok := pool.Find(j.cfg.Pools, m.Pool)
	if !ok && (m.Pool == "" || j.configured(m.Pool)) {
		return false // not a pool's machine we can name: not ours to judge
	}
	rec, found, err := j.record(ctx, m.JobID, p.now)
	if err != nil {
		p.rep.Errors++
		log.WarnContext(ctx, "janitor could not read the job record", slog.Any("err", err))
		return false
	}
	if !ok {
		// A pool no longer configured (renamed, removed): judged only when
		// the job's record names it, as its runners are, and only where
		// the machine or the record says its runner registered: "not
		// found" at a guessed scope could end a machine at work.
		if !found || !namedBy(rec, m.Pool, m.RunnerName) || (m.Scope == "" && rec.Scope == "") {
			return false
		}
		if pl, ok = j.standIn(m.Pool, rec); !ok {
			log.InfoContext(ctx, "janitor left a machine of a pool no longer configured: no pool serves its job now",
				slog.String("pool", m.Pool))
			return false
		}
		log = log.With(slog.String("pool", m.Pool), slog.Bool("pool_configured", false))
	}
	switch {
	case found && !over(rec.State):
		return false
	case !found && p.now.Sub(m.LaunchedAt) < j.cfg.UnknownGrace:
		return false
	}
	repo := m.Repo
	if found {
		repo = rec.Repo
	}
	owner, name, _ := strings.Cut(repo, "/")
	// Where its runner was registered: the machine's own tag, else the
	// record's, else the pool's scope now (from before either was kept).
	where := m.Scope
	if where == "" {
		where = rec.Scope
	}
	at := pl.Where(where)
	scope := scopeKey(pool.ScopeRepo, owner, name)
	if at == pool.ScopeOrg {
		scope = scopeKey(pool.ScopeOrg, owner, "")
	}
	runner := machineRunner(m)
	present, listed := p.listed[scope]
	st := p.lister[scope]
	if !listed {
		// Not listed this pass (the budget went on other scopes, or on an
		// installation's long repository list): GitHub's answer by name
		// decides alone, from the machine phase's reserve. Kept when its
		// installation was not reached (rate limit, no installation).
		st = p.owners[strings.ToLower(owner)]
	}
	if present[runner] || st == nil || st.stopped {
		p.rep.MachinesKept++
		log.InfoContext(ctx, "janitor left a machine whose runner may be at work", slog.Bool("scope_listed", listed))
		return false
	}
	// Absent from the listing is not yet gone: a list of many pages is no
	// snapshot (runners removed from an earlier page while it was read move
	// a later one out of both reads), and the runner may have registered
	// since. A machine is ended only once GitHub says, by name, that its
	// runner is not there; a busy runner's machine is running a job.
	if gone := j.runnerGone(ctx, p, st, at, owner, name, runner, log); !gone {
		p.rep.MachinesKept++
		return false
	}
	// The machine came from the EC2 listing: it is ended through EC2,
	// whatever the pool's provisioner is today (a pool moved to dispatch
	// routed it to a clean-up that ends nothing, and it ran on, counted
	// ended).
	onEC2 := pl
	onEC2.Provisioner.Type = pool.ProvisionerEC2
	if !j.cleanup(ctx, p, pool.Request{JobID: m.JobID, RunID: rec.RunID, Repo: repo, Pool: onEC2, RunnerName: runner}, log) {
		return false
	}
	p.rep.MachinesEnded++
	j.cfg.Metrics.Count(metricMachinesEnded, 1, obs.Pool(pl.Name))
	log.InfoContext(ctx, "janitor ended a machine of a finished job", slog.Bool("known", found))
	return true
}

// runnerGone asks GitHub for runner by name in the scope st listed; true
// only when GitHub says it is not there.
func (j *Janitor) runnerGone(ctx context.Context, p *pass, st *installState, scope, owner, repo, runner string, log *slog.Logger) bool {
	if scope == pool.ScopeOrg {
		repo = ""
	}
	if st == nil || !j.call(ctx, p, st) {
		log.InfoContext(ctx, "janitor left a machine: no budget to confirm its runner is gone")
		return false
	}
	r, err := j.cfg.GitHub.FindRunner(ctx, st.id, scope, owner, repo, runner)
	switch {
	case errors.Is(err, ghapp.ErrRunnerNotFound):
		return true
	case err != nil:
		if !j.limited(st, err) {
			p.rep.Errors++
		}
		log.WarnContext(ctx, "janitor could not confirm a runner is gone", slog.String("runner_name", runner), slog.Any("err", err))
		return false
	}
	p.rep.RunnerReappeared++
	log.InfoContext(ctx, "janitor left a machine whose runner the listing missed", slog.String("runner_name", runner),
		slog.String("status", r.Status), slog.Bool("busy", r.Busy))
	return false
}

// machineRunner is the runner of m's attempt: its runner-name tag (every
// machine the provisioner launched carries it), else the job's first.
func machineRunner(m pool.Machine) string {
	if m.RunnerName != "" {
		return m.RunnerName
	}
	return job.RunnerName(m.Pool, m.JobID)
}

// The removals count by pool as they happen (and fleet-wide); the pass's
// report adds a 0 so a quiet pass still shows on the graph.
var (
	metricRunnersDeleted = obs.Metric{Name: "JanitorRunnersDeleted", Dims: []string{obs.DimPool}}
	metricMachinesEnded  = obs.Metric{Name: "JanitorMachinesEnded", Dims: []string{obs.DimPool}}
)

func (j *Janitor) report(ctx context.Context, r Report, err error) {
	counts := []struct {
		name string
		v    int
	}{
		{metricRunnersDeleted.Name, r.RunnersDeleted}, {"JanitorRunnersBusy", r.RunnersBusy},
		{"JanitorBusyRace", r.BusyRace}, {"JanitorRunnersLive", r.RunnersLive},
		{"JanitorUnknownKept", r.UnknownKept}, {"JanitorUnknownNotOurs", r.UnknownNotOurs}, {"JanitorSparesKept", r.SparesKept}, {metricMachinesEnded.Name, r.MachinesEnded},
		{"JanitorMachinesKept", r.MachinesKept}, {"JanitorRunnerReappeared", r.RunnerReappeared},
		{"JanitorConfigsDeleted", r.ConfigsDeleted}, {"JanitorConfigsUnread", r.ConfigsUnread},
		{"JanitorRateLimited", r.RateLimited}, {"JanitorSuspended", r.Suspended}, {"JanitorSkippedRateLimited", r.SkippedRateLimited},
		{"JanitorReposSkippedRateLimited", r.ReposSkippedRateLimited}, {"JanitorErrors", r.Errors},
	}
	attrs := []any{slog.Int("installations", r.InstallationsSeen), slog.Int("scopes", r.ScopesListed), slog.Bool("incomplete", r.Incomplete)}
	for _, c := range counts {
		switch c.name {
		case metricRunnersDeleted.Name, metricMachinesEnded.Name: // counted as they happened
			j.cfg.Metrics.Add(c.name, 0)
		default:
			j.cfg.Metrics.Add(c.name, float64(c.v))
		}
		attrs = append(attrs, slog.Int(strings.TrimPrefix(c.name, "Janitor"), c.v))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	}
	j.cfg.Logger.InfoContext(ctx, "janitor pass", attrs...)
	j.cfg.Metrics.Flush()
}

// Package mem holds in-memory implementations of the ports the flows
// (shared/claim, shared/webhook, shared/reclaim, shared/redeliver) speak, for their flow tests:
// no emulator, an injected clock, milliseconds a test.
//
// It is a test kit: nothing under functions/ or shared/ may import it. It
// must stay exactly as strict as the adapters it stands in for; the
// contract suites in infra/contract run against both this package and the
// DynamoDB/SQS adapters on the emulator, so the two cannot drift. Where
// DynamoDB refuses (a failed condition, a 400 KB item), so does Store.
// Like an SDK call, every method with a context fails with the context's
// error, changing nothing, once the context is done.
package mem

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// Store is an in-memory job store. The zero value is not usable: call NewStore.
type Store struct {
	t job.Timing

	mu    sync.Mutex
	recs  map[int64]job.Record
	rates map[int64]ratelimit.Reading
	red   redeliveries
	// Calls counts every call by method name, for tests of request counts.
	calls map[string]int
}

// NewStore returns an empty store with the given timing (defaults filled).
func NewStore(t job.Timing) *Store {
	return &Store{t: t.WithDefaults(), recs: map[int64]job.Record{}, rates: map[int64]ratelimit.Reading{}, calls: map[string]int{}}
}

// Timing returns the rules in force.
func (s *Store) Timing() job.Timing { return s.t }

// Calls returns how often method was called.
func (s *Store) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Put stores r as it is, for a test's set-up (no rules applied).
func (s *Store) Put(r job.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[r.JobID] = clone(r)
}

// Records returns a copy of every record, by job id.
func (s *Store) Records() map[int64]job.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64]job.Record, len(s.recs))
	for id, r := range s.recs {
		out[id] = clone(r)
	}
	return out
}

func (s *Store) enter(method string) func() {
	s.mu.Lock()
	s.calls[method]++
	return s.mu.Unlock
}

// CreateJob writes a new pending record at version 1, unless a live record
// of the job exists: then a *job.ConflictError carrying it.
func (s *Store) CreateJob(ctx context.Context, r job.Record, now time.Time) (job.Record, error) {
	if err := ctx.Err(); err != nil {
		return job.Record{}, err
	}
	defer s.enter("CreateJob")()
	if cur, ok := s.recs[r.JobID]; ok && !cur.Expired(now) {
		return job.Record{}, &job.ConflictError{Op: "create", JobID: r.JobID, Current: clone(cur), Found: true}
	}
	ms := job.Millis(now)
	r.State, r.Version, r.Attempt = job.Pending, 1, 0
	r.CreatedAt, r.UpdatedAt, r.DueAt = ms, ms, ms
	r.ExpiresAt = now.Add(s.t.RecordTTL).Unix()
	r.SweepShard = job.Shard(r.JobID, s.t.Shards)
	r.SweepAt = ms + s.t.PendingGrace.Milliseconds()
	r.History = nil
	record(&r, job.Transition{At: ms, To: job.Pending, Actor: job.ActorWebhook}, true)
	if err := s.write(&r); err != nil {
		return job.Record{}, err
	}
	return clone(r), nil
}

// MarkDone moves the record to done (version+1), or creates it as done when
// there is none. It returns the state before ("" when created), or
// ErrTerminal when the record was terminal already (with, for a done one,
// the state it had before: job.StateBeforeDone).
func (s *Store) MarkDone(ctx context.Context, d job.Report, now time.Time) (job.State, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	defer s.enter("MarkDone")()
	ms := job.Millis(now)
	cur, ok := s.recs[d.JobID]
	if ok {
		switch cur.State {
		case job.Pending, job.Queued, job.Claiming, job.Claimed:
		case job.Done:
			return job.StateBeforeDone(cur), job.ErrTerminal
		default:
			return "", job.ErrTerminal
		}
	} else if d.Recorded {
		return "", fmt.Errorf("mark job %d done: %w", d.JobID, job.ErrNotFound)
	} else {
		cur = job.Record{JobID: d.JobID}
	}
	// The report's identity where the record has none (shared/store's
	// if_not_exists: an empty attribute is not written, so it is absent).
	if cur.CreatedAt == 0 {
		cur.CreatedAt = ms
	}
	if cur.DueAt == 0 {
		cur.DueAt = cur.CreatedAt // unwritten due_at reads back as created_at
	}
	if cur.Repo == "" {
		cur.Repo = d.Repo
	}
	if cur.InstallationID == 0 {
		cur.InstallationID = d.InstallationID
	}
	if cur.RunID == 0 {
		cur.RunID = d.RunID
	}
	if cur.Pool == "" {
		cur.Pool = d.Pool
	}
	if len(cur.Labels) == 0 && len(d.Labels) > 0 {
		cur.Labels = append([]string(nil), d.Labels...)
	}
	prev := cur.State
	cur.State = job.Done
	cur.Version++
	cur.UpdatedAt = ms
	cur.ExpiresAt = now.Add(s.t.RecordTTL).Unix()
	if d.RunnerName != "" {
		cur.RunnerName = d.RunnerName
	}
	cur.SweepShard, cur.SweepAt, cur.LeaseOwner, cur.LeaseExpiresAt = "", 0, "", 0
	actor := d.Actor
	if actor == "" {
		actor = job.ActorWebhook
	}
	record(&cur, job.Transition{At: ms, To: job.Done, Actor: actor}, false)
	if err := s.write(&cur); err != nil {
		return "", err
	}
	return prev, nil
}

// Get returns the record of job id, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (job.Record, error) {
	if err := ctx.Err(); err != nil {
		return job.Record{}, err
	}
	defer s.enter("Get")()
	r, ok := s.recs[id]
	if !ok {
		return job.Record{}, fmt.Errorf("get job %d: %w", id, job.ErrNotFound)
	}
	return clone(r), nil
}

// Acquire takes the lease on a queued (or pending) record at version. A
// refusal carries the record as it is; a record already leased to owner at
// version+1 (a retried write that took effect) is the caller's lease.
func (s *Store) Acquire(ctx context.Context, id, version int64, owner string, until, now time.Time) (job.Lease, job.Record, error) {
	if err := ctx.Err(); err != nil {
		return job.Lease{}, job.Record{}, err
	}
	defer s.enter("Acquire")()
	cur, ok := s.recs[id]
	lease := job.Lease{JobID: id, Owner: owner, Version: version + 1, Expires: until}
	switch {
	case !ok:
		return job.Lease{}, job.Record{}, &job.ConflictError{Op: "lease", JobID: id}
	case (cur.State == job.Queued || cur.State == job.Pending) && cur.Version == version:
	case cur.State == job.Claiming && cur.LeaseOwner == valid(owner) && cur.Version == version+1:
		lease.History = clone(cur).History
		return lease, clone(cur), nil
	default:
		return job.Lease{}, job.Record{}, &job.ConflictError{Op: "lease", JobID: id, Current: clone(cur), Found: true}
	}
	exp := job.Millis(until)
	cur.State, cur.Version, cur.LeaseOwner, cur.LeaseExpiresAt = job.Claiming, version+1, owner, exp
	// sweep_at stays pending's or queued's (as shared/store: the lease
	// writes no sweep index entry).
	cur.UpdatedAt = job.Millis(now)
	record(&cur, job.Transition{At: job.Millis(now), To: job.Claiming, Actor: job.ActorClaimer}, false)
	if err := s.write(&cur); err != nil {
		return job.Lease{}, job.Record{}, err
	}
	lease.History = clone(cur).History
	return lease, clone(cur), nil
}

// Takeover takes over an expired lease: a record claiming at exactly held
// whose lease expired before now moves to version held+1 with the new
// owner and expiry (sweep_at kept, first_failure_at set unless a failure
// did, a claiming → claiming history entry). A refusal carries the record
// as it is; a record already taken over by owner at held+1 (a retried
// write that took effect) is the caller's lease.
func (s *Store) Takeover(ctx context.Context, id, held int64, owner string, until, now time.Time) (job.Lease, job.Record, error) {
	if err := ctx.Err(); err != nil {
		return job.Lease{}, job.Record{}, err
	}
	defer s.enter("Takeover")()
	nowMs := job.Millis(now)
	cur, ok := s.recs[id]
	lease := job.Lease{JobID: id, Owner: owner, Version: held + 1, Expires: until}
	switch {
	case !ok:
		return job.Lease{}, job.Record{}, &job.ConflictError{Op: "take over lease of", JobID: id}
	case cur.State == job.Claiming && cur.Version == held && cur.LeaseExpiresAt < nowMs:
	case cur.State == job.Claiming && cur.LeaseOwner == valid(owner) && cur.Version == held+1:
		lease.History = clone(cur).History
		return lease, clone(cur), nil
	default:
		return job.Lease{}, job.Record{}, &job.ConflictError{Op: "take over lease of", JobID: id, Current: clone(cur), Found: true}
	}
	cur.Version, cur.LeaseOwner, cur.LeaseExpiresAt, cur.UpdatedAt = held+1, owner, job.Millis(until), nowMs
	if cur.FirstFailureAt == 0 {
		cur.FirstFailureAt = nowMs
	}
	record(&cur, job.Transition{At: nowMs, To: job.Claiming, Error: job.ReasonLeaseExpired, Actor: job.ActorClaimer}, false)
	if err := s.write(&cur); err != nil {
		return job.Lease{}, job.Record{}, err
	}
	lease.History = clone(cur).History
	return lease, clone(cur), nil
}

// fenced returns the leased record, or ErrLeaseLost.
func (s *Store) fenced(l job.Lease) (job.Record, error) {
	cur, ok := s.recs[l.JobID]
	if !ok || cur.State != job.Claiming || cur.Version != l.Version || cur.LeaseOwner != valid(l.Owner) {
		return job.Record{}, job.ErrLeaseLost
	}
	return cur, nil
}

// Release hands a leased record back to queued for the message just sent.
func (s *Store) Release(ctx context.Context, l job.Lease, r job.Retry, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.enter("Release")()
	cur, err := s.fenced(l)
	if err != nil {
		return err
	}
	due := job.Millis(r.Due)
	cur.State, cur.Version, cur.Attempt, cur.DueAt = job.Queued, r.Version, r.Attempt, due
	cur.SweepAt, cur.UpdatedAt = due+s.t.QueuedGrace.Milliseconds(), job.Millis(now)
	if !r.FirstFailureAt.IsZero() {
		cur.FirstFailureAt = job.Millis(r.FirstFailureAt)
	}
	if r.ErrorClass != "" {
		cur.LastErrorClass, cur.LastError = r.ErrorClass, truncate(r.Error)
	}
	if r.Pool != "" {
		cur.Pool = r.Pool
	}
	if r.Runner != "" {
		cur.TriedRunner, cur.TriedScope = r.Runner, r.Scope
	}
	cur.LeaseOwner, cur.LeaseExpiresAt = "", 0
	record(&cur, job.Transition{At: job.Millis(now), To: job.Queued, Attempt: r.Attempt, Class: r.ErrorClass, Error: r.Error, Actor: job.ActorClaimer}, true)
	if err := s.write(&cur); err != nil {
		return err
	}
	return nil
}

// Finish moves a leased record to the outcome's state.
func (s *Store) Finish(ctx context.Context, l job.Lease, o job.Outcome, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.enter("Finish")()
	switch o.State {
	case job.Claimed, job.Failed, job.Abandoned, job.Done:
	default:
		return fmt.Errorf("finish job %d: %q is not a claim outcome", l.JobID, o.State)
	}
	cur, err := s.fenced(l)
	if err != nil {
		return err
	}
	cur.State, cur.Attempt, cur.UpdatedAt = o.State, o.Attempt, job.Millis(now)
	cur.ExpiresAt = now.Add(s.t.RecordTTL).Unix()
	if o.RunnerName != "" {
		cur.RunnerName = o.RunnerName
	}
	if o.Scope != "" {
		cur.Scope = o.Scope
	}
	if o.Pool != "" {
		cur.Pool = o.Pool
	}
	if o.ErrorClass != "" {
		cur.LastErrorClass, cur.LastError = o.ErrorClass, truncate(o.Error)
	}
	if o.State == job.Claimed {
		// Stays in the sweep index until a runner of ours takes the job.
		cur.LeaseOwner, cur.LeaseExpiresAt, cur.SweepAt = "", 0, job.Millis(now.Add(job.StartGrace(o.RunnerStartGrace)))
		cur.Waits = 0 // a new claim is no held job, whatever an older writer left
	} else {
		cur.LeaseOwner, cur.LeaseExpiresAt, cur.SweepShard, cur.SweepAt = "", 0, "", 0
	}
	record(&cur, job.Transition{At: job.Millis(now), To: o.State, Attempt: o.Attempt, Class: o.ErrorClass, Error: o.Error, Actor: job.ActorClaimer}, true)
	if err := s.write(&cur); err != nil {
		return err
	}
	return nil
}

// Extend records progress under a held lease: the attempt counter and,
// optionally, the runner name.
func (s *Store) Extend(ctx context.Context, l job.Lease, attempt int, runnerName string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.enter("Extend")()
	cur, err := s.fenced(l)
	if err != nil {
		return err
	}
	cur.Attempt, cur.UpdatedAt = attempt, job.Millis(now)
	if runnerName != "" {
		cur.RunnerName = runnerName
	}
	if err := s.write(&cur); err != nil {
		return err
	}
	return nil
}

// Move records under the lease the pool a claim moves the job to and the
// scope its runner is to be registered at ("" removes the record's).
func (s *Store) Move(ctx context.Context, l job.Lease, pool, scope string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if pool == "" {
		return fmt.Errorf("move job %d: no pool", l.JobID)
	}
	defer s.enter("Move")()
	cur, err := s.fenced(l)
	if err != nil {
		return err
	}
	cur.Pool, cur.Scope, cur.UpdatedAt = pool, scope, job.Millis(now)
	if err := s.write(&cur); err != nil {
		return err
	}
	return nil
}

// TakeBack is the reclaimer's conditional take-back of a record it read
// (state and version unchanged; a claiming record's lease expired by now),
// to Queued (due at due) or Abandoned. It returns the record as written, or
// a *job.ConflictError carrying the record as it is.
func (s *Store) TakeBack(ctx context.Context, read job.Record, to job.State, due time.Time, reason string, now time.Time) (job.Record, error) {
	if err := ctx.Err(); err != nil {
		return job.Record{}, err
	}
	defer s.enter("TakeBack")()
	return s.takeBack(read, to, due, reason, now, false)
}

// Swap is shared/store's Swap: a take-back of a claimed record to queued
// that counts no replacement toward the cap and starts no max-age clock.
func (s *Store) Swap(ctx context.Context, read job.Record, due time.Time, reason string, now time.Time) (job.Record, error) {
	if err := ctx.Err(); err != nil {
		return job.Record{}, err
	}
	defer s.enter("Swap")()
	if read.State != job.Claimed {
		return job.Record{}, fmt.Errorf("swap job %d: %q is not claimed", read.JobID, read.State)
	}
	return s.takeBack(read, job.Queued, due, reason, now, true)
}

func (s *Store) takeBack(read job.Record, to job.State, due time.Time, reason string, now time.Time, swap bool) (job.Record, error) {
	if to != job.Queued && to != job.Abandoned {
		return job.Record{}, fmt.Errorf("take back job %d: cannot move to %q", read.JobID, to)
	}
	nowMs := job.Millis(now)
	cur, ok := s.recs[read.JobID]
	if !ok || cur.State != read.State || cur.Version != read.Version ||
		(read.State == job.Claiming && !(cur.LeaseExpiresAt < nowMs)) {
		return job.Record{}, &job.ConflictError{Op: "take back", JobID: read.JobID, Current: clone(cur), Found: ok}
	}
	cur.Version++
	cur.UpdatedAt = nowMs
	if to == job.Queued {
		d := job.Millis(due)
		cur.State, cur.DueAt, cur.SweepAt = job.Queued, d, d+s.t.QueuedGrace.Milliseconds()
		cur.SweepShard = job.Shard(read.JobID, s.t.Shards) // home under today's count, as shared/store
		if (read.State == job.Claiming || read.State == job.Claimed) && cur.FirstFailureAt == 0 && !swap {
			cur.FirstFailureAt = nowMs
		}
		if read.State == job.Claimed {
			cur.Replacements++
			cur.LivenessChecks, cur.Waits = 0, 0
			if swap {
				cur.ReplacementsBase++
			}
		}
	} else {
		cur.State, cur.ExpiresAt, cur.LastError = job.Abandoned, now.Add(s.t.RecordTTL).Unix(), truncate(reason)
		cur.SweepShard, cur.SweepAt = "", 0
	}
	cur.LeaseOwner, cur.LeaseExpiresAt = "", 0
	actor := job.ActorReclaimer
	if swap {
		actor = job.ActorWebhook
	}
	record(&cur, job.Transition{At: nowMs, To: to, Error: reason, Actor: actor}, false)
	if err := s.write(&cur); err != nil {
		return job.Record{}, err
	}
	return clone(cur), nil
}

// Shards lists the sweep shard keys ("0" … Shards-1).
func (s *Store) Shards() []string { return job.ShardKeys(s.t.Shards) }

// Stale returns one page of the records of shard whose sweep_at is before
// now, oldest first, continuing after cursor. Like a DynamoDB Query with a
// Limit, a full page carries a cursor even when nothing follows. Each record
// is whole and current, as shared/store's consistent read of the stale keys
// returns it.
func (s *Store) Stale(ctx context.Context, shard string, now time.Time, limit int32, cursor string) (job.Page, error) {
	if err := ctx.Err(); err != nil {
		return job.Page{}, err
	}
	defer s.enter("Stale")()
	var after struct {
		at int64
		id int64
	}
	if cursor != "" {
		// shard:sweep_at:job_id. The shard is in it as it is in DynamoDB's
		// ExclusiveStartKey: another shard's query refuses it.
		f := strings.Split(cursor, ":")
		var err1, err2 error
		if len(f) == 3 {
			after.at, err1 = strconv.ParseInt(f[1], 10, 64)
			after.id, err2 = strconv.ParseInt(f[2], 10, 64)
		}
		if len(f) != 3 || f[0] != shard || err1 != nil || err2 != nil {
			return job.Page{}, fmt.Errorf("query sweep shard %s: %w %q", shard, job.ErrBadCursor, cursor)
		}
	}
	var all []job.Record
	for _, r := range s.recs {
		if r.SweepShard != shard || r.SweepAt == 0 || r.SweepAt >= job.Millis(now) {
			continue
		}
		if cursor != "" && (r.SweepAt < after.at || (r.SweepAt == after.at && r.JobID <= after.id)) {
			continue
		}
		all = append(all, clone(r))
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].SweepAt != all[j].SweepAt {
			return all[i].SweepAt < all[j].SweepAt
		}
		return all[i].JobID < all[j].JobID
	})
	var p job.Page
	if limit > 0 && len(all) >= int(limit) {
		all = all[:limit]
		last := all[len(all)-1]
		p.Next = shard + ":" + strconv.FormatInt(last.SweepAt, 10) + ":" + strconv.FormatInt(last.JobID, 10)
	}
	p.Records = all
	return p, nil
}

// LoadRate returns the shared reading of an installation, or an error
// wrapping ratelimit.ErrNoReading.
func (s *Store) LoadRate(ctx context.Context, installationID int64) (ratelimit.Reading, error) {
	if err := ctx.Err(); err != nil {
		return ratelimit.Reading{}, err
	}
	defer s.enter("LoadRate")()
	r, ok := s.rates[installationID]
	if !ok {
		return ratelimit.Reading{}, fmt.Errorf("rate of installation %d: %w", installationID, ratelimit.ErrNoReading)
	}
	return r, nil
}

// SaveRate shares r unless the stored reading is newer by
// ratelimit.Supersedes (as the DynamoDB condition decides).
func (s *Store) SaveRate(ctx context.Context, installationID int64, r ratelimit.Reading) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.enter("SaveRate")()
	// Millisecond precision, as the table stores it; the block stays.
	ms := func(t time.Time) time.Time { return job.FromMillis(job.Millis(t)) }
	r.ResetAt, r.ObservedAt, r.CountedAt = ms(r.ResetAt), ms(r.ObservedAt), ms(r.Counted())
	cur, ok := s.rates[installationID]
	if ok && cur.Known() && !ratelimit.Admits(r, cur) {
		return nil
	}
	if !r.PassedAt.IsZero() {
		r.PassedAt = job.FromMillis(job.Millis(r.PassedAt))
	}
	r.BlockedUntil, r.BlockedFor = cur.BlockedUntil, cur.BlockedFor
	if cur.PassedAt.After(r.PassedAt) {
		r.PassedAt = cur.PassedAt // a call went through later elsewhere
	}
	s.rates[installationID] = r
	return nil
}

// SaveBlock shares a secondary rate limit's block until until, of length
// length, unless the stored block ends later; the primary fields stay.
func (s *Store) SaveBlock(ctx context.Context, installationID int64, until time.Time, length time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.enter("SaveBlock")()
	cur := s.rates[installationID]
	until = job.FromMillis(job.Millis(until)) // as the table stores it
	if !until.After(cur.BlockedUntil) {
		return nil
	}
	cur.BlockedUntil, cur.BlockedFor = until, length.Truncate(time.Millisecond)
	s.rates[installationID] = cur
	return nil
}

// Postpone moves a stale record's sweep_at to until (a live lease's
// expiry), conditional on the state and version read; nothing else changes.
func (s *Store) Postpone(ctx context.Context, read job.Record, until time.Time) (job.Record, error) {
	if err := ctx.Err(); err != nil {
		return job.Record{}, err
	}
	defer s.enter("Postpone")()
	if read.State.Terminal() {
		return job.Record{}, fmt.Errorf("postpone job %d: a %s record is not in the sweep index", read.JobID, read.State)
	}
	cur, ok := s.recs[read.JobID]
	if !ok || cur.State != read.State || cur.Version != read.Version {
		return job.Record{}, &job.ConflictError{Op: "postpone", JobID: read.JobID, Current: clone(cur), Found: ok}
	}
	cur.SweepAt = job.Millis(until)
	if err := s.write(&cur); err != nil {
		return job.Record{}, err
	}
	return clone(cur), nil
}

// Recheck moves a claimed record's sweep_at to due (liveness_checks+1 and
// waits 0 for job.CheckIdle, first_failure_at set unless set and waits 0
// for job.CheckBlocked, waits+1 for the waiting checks), conditional on the
// state and version read.
func (s *Store) Recheck(ctx context.Context, read job.Record, due time.Time, check job.Check, now time.Time) (job.Record, error) {
	if err := ctx.Err(); err != nil {
		return job.Record{}, err
	}
	defer s.enter("Recheck")()
	if read.State != job.Claimed {
		return job.Record{}, fmt.Errorf("recheck job %d: %q is not claimed", read.JobID, read.State)
	}
	cur, ok := s.recs[read.JobID]
	waiting := check == job.CheckWaiting || check == job.CheckWaitingTimed
	if !ok || cur.State != job.Claimed || cur.Version != read.Version || (waiting && cur.SweepAt != read.SweepAt) {
		return job.Record{}, &job.ConflictError{Op: "recheck", JobID: read.JobID, Current: clone(cur), Found: ok}
	}
	cur.SweepShard, cur.SweepAt, cur.UpdatedAt = job.Shard(read.JobID, s.t.Shards), job.Millis(due), job.Millis(now)
	if check == job.CheckIdle {
		cur.LivenessChecks = read.LivenessChecks + 1 // one check per read, as shared/store writes it
		cur.Waits = 0
	}
	if check == job.CheckBlocked {
		cur.Waits = 0
		if cur.FirstFailureAt == 0 {
			cur.FirstFailureAt = job.Millis(now)
		}
	}
	if waiting {
		cur.Waits, cur.ExpiresAt = read.Waits+1, now.Add(s.t.RecordTTL).Unix()
		if check == job.CheckWaiting {
			cur.FirstFailureAt, cur.LivenessChecks = 0, 0
		}
	}
	if err := s.write(&cur); err != nil {
		return job.Record{}, err
	}
	return clone(cur), nil
}

// record appends t to r's history as shared/store does: From (and, unless
// the write sets it, the attempt) from the entry before, error text
// compacted, the newest job.MaxHistory kept.
func record(r *job.Record, t job.Transition, setsAttempt bool) {
	r.History = job.AppendHistory(r.History, job.Chained(r.History, t, setsAttempt))
}

func clone(r job.Record) job.Record {
	if r.Labels != nil {
		r.Labels = append([]string(nil), r.Labels...)
	}
	if r.History != nil {
		r.History = append([]job.Transition(nil), r.History...)
	}
	return r
}

func truncate(s string) string { return job.TruncateError(s) }

// Requeue is an operator's retry of a failed or abandoned record read at
// q.Read's state and version (as shared/store.Requeue): queued at
// version+1, ladder reset, the operator's entry appended to the history.
func (s *Store) Requeue(ctx context.Context, q job.Requeue, now time.Time) (job.Record, error) {
	if err := ctx.Err(); err != nil {
		return job.Record{}, err
	}
	defer s.enter("Requeue")()
	read := q.Read
	if !read.State.Retryable() {
		return job.Record{}, fmt.Errorf("requeue job %d: a %s job is not retried (only failed or abandoned ones)", read.JobID, read.State)
	}
	cur, ok := s.recs[read.JobID]
	if !ok || cur.State != read.State || cur.Version != read.Version {
		return job.Record{}, &job.ConflictError{Op: "requeue", JobID: read.JobID, Current: clone(cur), Found: ok}
	}
	nowMs, due := job.Millis(now), job.Millis(q.Due)
	note := job.RequeueNote(q.By)
	record(&cur, job.Transition{At: nowMs, To: job.Queued, Error: note, Actor: job.ActorOperator}, true)
	cur.State, cur.Version, cur.Attempt, cur.FirstFailureAt = job.Queued, read.Version+1, 0, 0
	cur.DueAt, cur.SweepShard, cur.SweepAt = due, job.Shard(read.JobID, s.t.Shards), due+s.t.QueuedGrace.Milliseconds()
	cur.UpdatedAt, cur.ExpiresAt = nowMs, now.Add(s.t.RecordTTL).Unix()
	cur.LastErrorClass, cur.LastError = "", truncate(note)
	cur.LeaseOwner, cur.LeaseExpiresAt = "", 0
	cur.Replacements++ // a fresh runner name (job.RunnerNameAt) for the new attempt
	cur.ReplacementsBase, cur.LivenessChecks, cur.Waits = cur.Replacements, 0, 0
	if err := s.write(&cur); err != nil {
		return job.Record{}, err
	}
	return clone(cur), nil
}

// write stores *r as the table would keep it, text as valid UTF-8 (the
// SDK sends strings as JSON, which turns a stray byte into U+FFFD), and
// leaves it so for the caller to return; or it refuses r as DynamoDB
// would (over 400 KB), storing nothing.
func (s *Store) write(r *job.Record) error {
	for _, f := range []*string{&r.LeaseOwner, &r.LastErrorClass, &r.LastError, &r.Repo, &r.Pool, &r.RunnerName,
		&r.Scope, &r.TriedRunner, &r.TriedScope, &r.SweepShard} {
		*f = valid(*f)
	}
	if r.Labels != nil {
		labels := make([]string, len(r.Labels))
		for i, l := range r.Labels {
			labels[i] = valid(l)
		}
		r.Labels = labels
	}
	if err := tooBig(*r); err != nil {
		return err
	}
	s.recs[r.JobID] = clone(*r)
	return nil
}

// valid is s as DynamoDB stores it: valid UTF-8, each byte that is not
// UTF-8 a U+FFFD of its own, as the SDK's JSON encoder writes it
// (strings.ToValidUTF8 would make a run of such bytes one U+FFFD).
func valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s { // an invalid byte ranges as utf8.RuneError, one byte wide
		b.WriteRune(r)
	}
	return b.String()
}

// maxItemBytes is DynamoDB's item size limit: 400 KB, names and values.
const maxItemBytes = 400 * 1024

// tooBig refuses a record DynamoDB would, as the adapter's write would
// fail: its size is taken as its JSON (field names a little longer than
// the table's attribute names, quotes and separators on top), so the
// stand-in errs on the strict side.
func tooBig(r job.Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("job %d: ValidationException: %w", r.JobID, err)
	}
	if len(b) > maxItemBytes {
		return fmt.Errorf("job %d: ValidationException: Item size has exceeded the maximum allowed size (%d bytes)", r.JobID, len(b))
	}
	return nil
}

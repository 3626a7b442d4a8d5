// Package store is the DynamoDB adapter for ghclaim's single table: job
// records and shared rate-limit readings. It implements the flows' ports
// (shared/webhook, shared/claim, shared/reclaim) in the domain's own types
// (shared/job), and infra/contract holds it to the same contract as the
// in-memory store the flow tests use.
//
// The job record is also the webhook's dedup key: CreateJob is a
// conditional put (absent, or past its expires_at: TTL deletion is lazy)
// that sets expires_at at creation, so a redelivery, or a new delivery GUID
// for a job already recorded, finds the record and sends nothing. A refused
// conditional write returns the record as it is now in a *job.ConflictError
// (ReturnValuesOnConditionCheckFailure), so no flow reads before it writes.
// There is no separate delivery#<guid> item: it cost a read and a write per
// delivery and guarded nothing the record does not.
//
// The created item writes no default (attempt 0; updated_at and due_at
// equal to created_at), and the decoder gives them back: the webhook's
// put is one of its two requests, and its cost grows with the attributes.
//
// Every state transition of a job record is one conditional write, so two
// actors racing on the same record (duplicate deliveries, two claimers, a
// reclaimer and a late claimer) can never both win. The conditions are the
// contract of DESIGN.md:
//
//   - A claimer's writes are fenced by its Lease: the update only succeeds
//     while the record still carries that lease_owner and version. A claimer
//     that lost its lease changes nothing (ErrLeaseLost).
//   - A claimer's takeover of an expired lease (Takeover, for the
//     redelivered message whose lease it was) is conditional on claiming,
//     the version held and lease_expires_at < :now, and bumps the version:
//     a live lease is never taken, and the old holder's fenced writes fail.
//   - The reclaimer's take-back is conditional on the state and version it
//     read, so two reclaimers (or a reclaimer and a late claimer) never both
//     re-enqueue (ErrConflict).
//   - "Now" is passed in by the caller, read once per invocation, and used in
//     the conditions (":now"), so expiry checks are consistent and testable.
//
// The sparse sweep index is maintained here, in one place: every
// non-terminal write that changes when the record becomes stale sets
// sweep_shard and sweep_at (created+pending grace, due_at+queued grace,
// claimed_at+runner-start grace); every terminal write removes them and
// sets expires_at so DynamoDB's TTL cleans the record up later. See
// sweep.go for why the index projects keys only and why the lease write
// leaves sweep_at alone.
//
// This package must never decide policy (delays, classes, who may claim):
// callers pass the values; it only makes the writes atomic and fenced.
package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// Named outcomes: the domain's (shared/job), so a flow tests them without
// importing this package. Callers test them with errors.Is.
var (
	// ErrNotFound: no item under that key.
	ErrNotFound = job.ErrNotFound
	// ErrExists: a live job record for that job already exists. CreateJob
	// returns it as a *job.ConflictError carrying that record.
	ErrExists = job.ErrConflict
	// ErrConflict: the record was not in the state/version the caller read.
	ErrConflict = job.ErrConflict
	// ErrLeaseLost: the caller's lease (owner + version) is no longer the record's.
	ErrLeaseLost = job.ErrLeaseLost
	// ErrTerminal: the record is already terminal; nothing was changed.
	ErrTerminal = job.ErrTerminal
)

// DynamoDB is the part of the DynamoDB API the store uses.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var _ DynamoDB = (*dynamodb.Client)(nil)

// Options are the store's tunables: the domain's bookkeeping rules, which
// infra/mem applies the same way. Zero values take the defaults.
type Options = job.Timing

// Defaults for Options.
const (
	DefaultShards       = job.DefaultShards
	DefaultRecordTTL    = job.DefaultRecordTTL
	DefaultPendingGrace = job.DefaultPendingGrace
	DefaultQueuedGrace  = job.DefaultQueuedGrace
)

// Store reads and writes the ghclaim table.
type Store struct {
	db    DynamoDB
	table string
	opt   Options
	// sweepIndex is the index Stale queries (SweepIndex unless
	// ReadSweepFrom said otherwise).
	sweepIndex string
}

// New returns a store over table.
func New(db DynamoDB, table string, opt Options) *Store {
	return &Store{db: db, table: table, opt: opt.WithDefaults(), sweepIndex: SweepIndex}
}

// ReadSweepFrom makes Stale query index: SweepIndex, or LegacySweepIndex
// while an upgrade keeps it (template.yaml's LegacySweepIndex: the new
// index cannot be read until its backfill ends). Any other name is an
// error naming it.
func (s *Store) ReadSweepFrom(index string) error {
	if index != SweepIndex && index != LegacySweepIndex {
		return fmt.Errorf("sweep index %q: want %s or, during an upgrade, %s", index, SweepIndex, LegacySweepIndex)
	}
	s.sweepIndex = index
	return nil
}

// Options returns the options in force (defaults filled).
func (s *Store) Options() Options { return s.opt }

// CreateJob writes a new record in state pending, version 1, only if no
// live record exists for the job: a record past its expires_at counts as
// absent (TTL deletion is lazy) and is replaced. The record is the job's
// dedup key, so expires_at is set here, at creation, RecordTTL ahead. When
// a live record exists it returns a *job.ConflictError carrying it, from
// the same request (ReturnValuesOnConditionCheckFailure): no read first.
// The caller fills the job's identity (JobID, Repo, InstallationID,
// Labels, Pool, RunID); state, version and bookkeeping fields are set here.
func (s *Store) CreateJob(ctx context.Context, r job.Record, now time.Time) (job.Record, error) {
	ms := job.Millis(now)
	r.State = job.Pending
	r.Version = 1
	r.Attempt = 0
	r.CreatedAt = ms
	r.UpdatedAt = ms
	r.DueAt = ms
	r.ExpiresAt = now.Add(s.opt.RecordTTL).Unix()
	r.SweepShard = job.Shard(r.JobID, s.opt.Shards)
	r.SweepAt = ms + s.opt.PendingGrace.Milliseconds()
	r.History = job.AppendHistory(nil, job.Transition{At: ms, To: job.Pending, Actor: job.ActorWebhook})
	item, err := marshal(r)
	if err != nil {
		return job.Record{}, err
	}
	created, err := creationEntry(r.History[0])
	if err != nil {
		return job.Record{}, err
	}
	item["history"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{created}}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(pk) OR expires_at < :nows"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":nows": n(now.Unix())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if wroteIt(ccf.Item, created) {
			return r, nil // our own put, retried by the SDK after it took effect
		}
		return job.Record{}, conflict("create", r.JobID, ccf.Item)
	}
	if err != nil {
		return job.Record{}, fmt.Errorf("create job %d: %w", r.JobID, err)
	}
	return r, nil
}

// creationEntry is the created record's one history entry, carrying a
// random token of this put. An SDK retry of a put that took effect (a 500
// or a timeout after DynamoDB applied it) is refused by its own condition;
// the refusal's record carries the token, so the put is recognised as the
// caller's own (wroteIt) instead of a duplicate delivery, which would send
// no claim message and leave the job to the outbox grace. Identity and
// created_at cannot tell the two apart: another delivery of the job may
// create it in the same millisecond. The token rides in the entry the put
// writes anyway: no attribute of its own on the webhook's hot path.
func creationEntry(t job.Transition) (types.AttributeValue, error) {
	put, err := newPut()
	if err != nil {
		return nil, err
	}
	it := transitionItem{At: t.At, From: string(t.From), To: string(t.To), Actor: t.Actor, Put: put}
	return it.MarshalDynamoDBAttributeValue()
}

// wroteIt reports whether item (a refused create's current record) is the
// one whose first history entry is created: this put's own.
func wroteIt(item map[string]types.AttributeValue, created types.AttributeValue) bool {
	l, ok := item["history"].(*types.AttributeValueMemberL)
	if !ok || len(l.Value) == 0 {
		return false
	}
	got, ok := l.Value[0].(*types.AttributeValueMemberS)
	want, _ := created.(*types.AttributeValueMemberS)
	return ok && want != nil && got.Value == want.Value
}

// conflict is the *job.ConflictError of a refused write to job id, carrying
// the record DynamoDB returned with the refusal, if it returned one that
// this code can read.
func conflict(op string, id int64, item map[string]types.AttributeValue) error {
	e := &job.ConflictError{Op: op, JobID: id}
	if len(item) > 0 {
		if cur, err := unmarshal(item); err == nil {
			e.Current, e.Found = cur, true
		}
	}
	return e
}

// Done describes a job GitHub reported in progress or completed.
type Done = job.Report

// MarkDone moves the job's record to done, bumping its version so any retry
// in flight stops at its next step. With no record yet (deliveries arrive out
// of order) it creates one as done, so a late queued is never claimed. It
// returns the state the record had before (empty when it was created) or
// ErrTerminal when the record was already terminal (nothing changed), then
// with the state a done record had before it became done
// (job.StateBeforeDone), so that a redelivered report decides as the first
// one did. It is one conditional upsert: no read first.
func (s *Store) MarkDone(ctx context.Context, d job.Report, now time.Time) (job.State, error) {
	ms := job.Millis(now)
	names := map[string]string{"#s": "state"}
	vals := map[string]types.AttributeValue{
		":done":     str(string(job.Done)),
		":one":      n(1),
		":zero":     n(0),
		":now":      n(ms),
		":exp":      n(now.Add(s.opt.RecordTTL).Unix()),
		":pending":  str(string(job.Pending)),
		":queued":   str(string(job.Queued)),
		":claiming": str(string(job.Claiming)),
		":claimed":  str(string(job.Claimed)),
		":repo":     str(d.Repo),
		":inst":     n(d.InstallationID),
		":run":      n(d.RunID),
	}
	set := "SET #s = :done, version = if_not_exists(version, :zero) + :one, updated_at = :now, expires_at = :exp, " +
		"created_at = if_not_exists(created_at, :now), repo = if_not_exists(repo, :repo), " +
		"installation_id = if_not_exists(installation_id, :inst), run_id = if_not_exists(run_id, :run), attempt = if_not_exists(attempt, :zero)"
	if d.Pool != "" {
		vals[":pool"] = str(d.Pool)
		names["#p"] = "pool" // a reserved word
		set += ", #p = if_not_exists(#p, :pool)"
	}
	if len(d.Labels) > 0 {
		labels, err := attributevalue.Marshal(d.Labels)
		if err != nil {
			return "", fmt.Errorf("mark job %d done: %w", d.JobID, err)
		}
		vals[":labels"] = labels
		set += ", labels = if_not_exists(labels, :labels)"
	}
	if d.RunnerName != "" {
		vals[":runner"] = str(d.RunnerName)
		set += ", runner_name = :runner"
	}
	actor := d.Actor
	if actor == "" {
		actor = job.ActorWebhook
	}
	put, err := newPut()
	if err != nil {
		return "", fmt.Errorf("mark job %d done: %w", d.JobID, err)
	}
	cond := "attribute_not_exists(pk) OR #s IN (:pending, :queued, :claiming, :claimed)"
	if d.Recorded {
		cond = "#s IN (:pending, :queued, :claiming, :claimed)" // false on no item
	}
	out, err := s.update(ctx, d.JobID, set+" REMOVE sweep_shard, sweep_at, lease_owner, lease_expires_at",
		cond, names, vals, types.ReturnValueUpdatedOld,
		&entry{t: job.Transition{At: ms, To: job.Done, Actor: actor}, put: put}, func(cur job.Record) bool { return !cur.State.Terminal() })
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 && d.Recorded {
			return "", fmt.Errorf("mark job %d done: %w", d.JobID, job.ErrNotFound)
		}
		cur, derr := unmarshal(ccf.Item)
		switch {
		case derr != nil:
		case !cur.State.Terminal():
			return "", conflict("mark done", d.JobID, ccf.Item) // raced on the history's retry
		case cur.State == job.Done && writeOf(ccf.Item, put):
			// The SDK's retry of this very write, whose first answer was
			// lost: refused by our own done.
			return job.StateBeforeDone(cur), nil
		case cur.State == job.Done:
			// Done already (a redelivery, or completed before in_progress):
			// the state it had then, for the caller to decide as the first
			// delivery did (shared/webhook: a claimed job's runner is spare).
			return job.StateBeforeDone(cur), ErrTerminal
		}
		return "", ErrTerminal
	}
	if err != nil {
		return "", fmt.Errorf("mark job %d done: %w", d.JobID, err)
	}
	var prev job.State
	if v, ok := out.Attributes["state"].(*types.AttributeValueMemberS); ok {
		prev = job.State(v.Value)
	}
	return prev, nil
}

// Get reads a job record with a strongly consistent read.
func (s *Store) Get(ctx context.Context, id int64) (job.Record, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            key(job.Key(id)),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return job.Record{}, fmt.Errorf("get job %d: %w", id, err)
	}
	if out.Item == nil {
		return job.Record{}, fmt.Errorf("get job %d: %w", id, ErrNotFound)
	}
	return unmarshal(out.Item)
}

// Lease is a claimer's fencing token: the record is ours while it still
// carries this owner and version.
type Lease = job.Lease

// Acquire takes the lease on a record that is queued (or still pending: a
// fast claimer may see the message before the webhook marks it queued) at
// exactly version. The record moves to claiming with version+1. A refusal
// is a *job.ConflictError carrying the record as it is now (ALL_OLD on the
// failed condition), not found when there is none: the claimer decides a
// duplicate, an early message or an unknown job from it, without a read.
// It leaves sweep_shard and sweep_at as they are (pending's or queued's
// stale-from moment), so it writes no sweep index entry: see sweep.go.
func (s *Store) Acquire(ctx context.Context, id, version int64, owner string, until, now time.Time) (Lease, job.Record, error) {
	exp := job.Millis(until)
	vals := map[string]types.AttributeValue{
		":claiming": str(string(job.Claiming)),
		":queued":   str(string(job.Queued)),
		":pending":  str(string(job.Pending)),
		":v":        n(version),
		":nv":       n(version + 1),
		":owner":    str(owner),
		":exp":      n(exp),
		":now":      n(job.Millis(now)),
	}
	pinned := func(cur job.Record) bool {
		return (cur.State == job.Queued || cur.State == job.Pending) && cur.Version == version
	}
	out, err := s.update(ctx, id, "SET #s = :claiming, version = :nv, lease_owner = :owner, "+
		"lease_expires_at = :exp, updated_at = :now", "#s IN (:queued, :pending) AND version = :v",
		map[string]string{"#s": "state"}, vals, types.ReturnValueAllNew,
		&entry{t: job.Transition{At: job.Millis(now), To: job.Claiming, Actor: job.ActorClaimer}}, pinned)
	return leased("lease", id, owner, version+1, until, out, err)
}

// Takeover takes over an expired lease for the message whose lease it was
// (a claimer that received it and died): it succeeds only on a record
// still claiming at exactly held whose lease_expires_at is before now, so
// a live lease is never taken. The record keeps state claiming and moves
// to version held+1 with the new owner and expiry, so the dead claimer's
// fenced writes fail on owner and version alike; first_failure_at is set
// to now unless a failure did (the dead attempt failed, as the
// reclaimer's take-back of an expired lease records); the history gets a
// claiming → claiming entry by the claimer, job.ReasonLeaseExpired. Like
// Acquire it leaves sweep_at alone (no index write), and a refusal is a
// *job.ConflictError carrying the record as it is now; an SDK retry of a
// takeover that took effect is the caller's lease.
func (s *Store) Takeover(ctx context.Context, id, held int64, owner string, until, now time.Time) (Lease, job.Record, error) {
	nowMs := job.Millis(now)
	vals := map[string]types.AttributeValue{
		":claiming": str(string(job.Claiming)),
		":v":        n(held),
		":nv":       n(held + 1),
		":owner":    str(owner),
		":exp":      n(job.Millis(until)),
		":now":      n(nowMs),
	}
	pinned := func(cur job.Record) bool {
		return cur.State == job.Claiming && cur.Version == held && cur.LeaseExpiresAt < nowMs
	}
	out, err := s.update(ctx, id, "SET version = :nv, lease_owner = :owner, lease_expires_at = :exp, updated_at = :now, "+
		"first_failure_at = if_not_exists(first_failure_at, :now)", "#s = :claiming AND version = :v AND lease_expires_at < :now",
		map[string]string{"#s": "state"}, vals, types.ReturnValueAllNew,
		&entry{t: job.Transition{At: nowMs, To: job.Claiming, Error: job.ReasonLeaseExpired, Actor: job.ActorClaimer}}, pinned)
	return leased("take over lease of", id, owner, held+1, until, out, err)
}

// leased is the outcome of a lease write (op) that asked for the record
// ALL_NEW: owner's lease at version, or the refusal's *job.ConflictError.
func leased(op string, id int64, owner string, version int64, until time.Time, out *dynamodb.UpdateItemOutput, err error) (Lease, job.Record, error) {
	var attrs map[string]types.AttributeValue
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		// The SDK retries a request whose answer timed out; when the first
		// try had taken effect, the retry fails its condition against our
		// own write. That is our lease, not a conflict: waiting out the
		// lease and the reclaimer for it would only delay the job.
		if !ownLease(ccf.Item, owner, version) {
			return Lease{}, job.Record{}, conflict(op, id, ccf.Item)
		}
		attrs = ccf.Item
	case err != nil:
		return Lease{}, job.Record{}, fmt.Errorf("%s job %d: %w", op, id, err)
	default:
		attrs = out.Attributes
	}
	rec, err := unmarshal(attrs)
	if err != nil {
		return Lease{}, job.Record{}, err
	}
	return Lease{JobID: id, Owner: owner, Version: version, Expires: until, History: rec.History}, rec, nil
}

// ownLease reports whether item is a claiming record leased to owner at
// version.
func ownLease(item map[string]types.AttributeValue, owner string, version int64) bool {
	st, _ := item["state"].(*types.AttributeValueMemberS)
	lo, _ := item["lease_owner"].(*types.AttributeValueMemberS)
	v, ok := num(item["version"])
	return st != nil && st.Value == string(job.Claiming) && lo != nil && lo.Value == owner && ok && v == version
}

// Retry is what a claimer records when it hands the job to a new message.
type Retry = job.Retry

// Release hands a leased record back to queued for the message that was
// just sent, preserving the ladder position (attempt, first_failure_at).
// It is fenced by l; ErrLeaseLost means somebody else owns the record now.
func (s *Store) Release(ctx context.Context, l Lease, r Retry, now time.Time) error {
	dueMs := job.Millis(r.Due)
	vals := map[string]types.AttributeValue{
		":queued":   str(string(job.Queued)),
		":claiming": str(string(job.Claiming)),
		":nv":       n(r.Version),
		":v":        n(l.Version),
		":owner":    str(l.Owner),
		":attempt":  n(int64(r.Attempt)),
		":due":      n(dueMs),
		":sweep":    n(dueMs + s.opt.QueuedGrace.Milliseconds()),
		":now":      n(job.Millis(now)),
	}
	set := "SET #s = :queued, version = :nv, attempt = :attempt, due_at = :due, sweep_at = :sweep, updated_at = :now"
	if !r.FirstFailureAt.IsZero() {
		vals[":ff"] = n(job.Millis(r.FirstFailureAt))
		set += ", first_failure_at = :ff"
	}
	if r.ErrorClass != "" {
		vals[":ec"] = str(r.ErrorClass)
		vals[":em"] = str(truncate(r.Error))
		set += ", last_error_class = :ec, last_error = :em"
	}
	var names map[string]string
	if r.Pool != "" {
		vals[":pool"] = str(r.Pool)
		names = map[string]string{"#p": "pool"} // a reserved word
		set += ", #p = :pool"
	}
	if r.Runner != "" {
		vals[":tr"], vals[":ts"] = str(r.Runner), str(r.Scope)
		set += ", tried_runner = :tr, tried_scope = :ts"
	}
	e := entry{t: job.Transition{At: job.Millis(now), To: job.Queued, Attempt: r.Attempt, Class: r.ErrorClass, Error: r.Error, Actor: job.ActorClaimer},
		setsAttempt: true, known: l.History}
	return s.fenced(ctx, l, set+" REMOVE lease_owner, lease_expires_at", names, vals, &e, wrote(r.Version, job.Queued, e.t))
}

// Outcome is the end of a claim: Claimed, Failed, Abandoned or Done.
type Outcome = job.Outcome

// Finish ends a leased claim: claimed, failed, abandoned or done. It is
// fenced by l. Done is accepted too: a claimer that asked GitHub (pool
// check_queued) and learnt the job is already in progress or completed ends
// the claim there. Claimed keeps the record in the sweep index with
// sweep_at = now + o.RunnerStartGrace (the caller's pool setting), so the
// reclaimer checks that a runner of ours took the job; the terminal states
// leave the index. o.Pool, when set, replaces the record's pool.
func (s *Store) Finish(ctx context.Context, l Lease, o Outcome, now time.Time) error {
	if o.State != job.Claimed && o.State != job.Failed && o.State != job.Abandoned && o.State != job.Done {
		return fmt.Errorf("finish job %d: %q is not a claim outcome", l.JobID, o.State)
	}
	vals := map[string]types.AttributeValue{
		":st":       str(string(o.State)),
		":claiming": str(string(job.Claiming)),
		":v":        n(l.Version),
		":owner":    str(l.Owner),
		":attempt":  n(int64(o.Attempt)),
		":now":      n(job.Millis(now)),
		":exp":      n(now.Add(s.opt.RecordTTL).Unix()),
	}
	set := "SET #s = :st, attempt = :attempt, updated_at = :now, expires_at = :exp"
	names := map[string]string{}
	if o.Pool != "" {
		vals[":pool"] = str(o.Pool)
		names["#p"] = "pool" // a reserved word
		set += ", #p = :pool"
	}
	if o.RunnerName != "" {
		vals[":rn"] = str(o.RunnerName)
		set += ", runner_name = :rn"
	}
	if o.Scope != "" {
		vals[":scope"] = str(o.Scope)
		set += ", runner_scope = :scope"
	}
	if o.ErrorClass != "" {
		vals[":ec"] = str(o.ErrorClass)
		vals[":em"] = str(truncate(o.Error))
		set += ", last_error_class = :ec, last_error = :em"
	}
	e := entry{t: job.Transition{At: job.Millis(now), To: o.State, Attempt: o.Attempt, Class: o.ErrorClass, Error: o.Error, Actor: job.ActorClaimer},
		setsAttempt: true, known: l.History}
	if o.State == job.Claimed {
		vals[":sweep"] = n(job.Millis(now.Add(job.StartGrace(o.RunnerStartGrace))))
		set += ", sweep_at = :sweep"
		// A new claim is no held job (waits): a writer that did not know
		// the attribute (a version before it, mid-rollout) may have left it.
		return s.fenced(ctx, l, set+" REMOVE lease_owner, lease_expires_at, waits", names, vals, &e, wrote(l.Version, o.State, e.t))
	}
	return s.fenced(ctx, l, set+" REMOVE lease_owner, lease_expires_at, sweep_shard, sweep_at", names, vals, &e, wrote(l.Version, o.State, e.t))
}

// wrote tells whether a record refusing a fenced state change is that very
// change, already made: the SDK retries a request whose answer was lost,
// and when the first try had taken effect the retry fails its fence
// against our own write. The record then has the change's state and
// version, no lease, and the change's history entry last (its instant,
// state and actor: another writer of that state at that version would have
// had to hold our lease, or bumped the version).
func wrote(version int64, st job.State, t job.Transition) func(job.Record) bool {
	return func(cur job.Record) bool {
		if cur.State != st || cur.Version != version || cur.LeaseOwner != "" || len(cur.History) == 0 {
			return false
		}
		last := cur.History[len(cur.History)-1]
		return last.At == t.At && last.To == t.To && last.Actor == t.Actor && last.Attempt == t.Attempt
	}
}

// Extend records progress under a held lease: the attempt counter (an
// attempt counts once it reaches GitHub or the provisioner) and, optionally,
// the runner name. It is fenced by l.
func (s *Store) Extend(ctx context.Context, l Lease, attempt int, runnerName string, now time.Time) error {
	vals := map[string]types.AttributeValue{
		":claiming": str(string(job.Claiming)),
		":v":        n(l.Version),
		":owner":    str(l.Owner),
		":attempt":  n(int64(attempt)),
		":now":      n(job.Millis(now)),
	}
	set := "SET attempt = :attempt, updated_at = :now"
	if runnerName != "" {
		vals[":rn"] = str(runnerName)
		set += ", runner_name = :rn"
	}
	return s.fenced(ctx, l, set, nil, vals, nil, nil)
}

// Move records under lease l the pool a claim moves the job to (its
// recorded pool renamed or relabelled, the job's pool resolved again) and
// the scope its runner is to be registered at, before the runner is: a
// claimer that dies after registering it leaves a record that names where
// its runner is, so the next attempt finds it whatever RUNNER_POOLS says
// by then. The lease (owner and version) stays as it is; a refusal is
// ErrLeaseLost.
func (s *Store) Move(ctx context.Context, l Lease, pool, scope string, now time.Time) error {
	if pool == "" {
		return fmt.Errorf("move job %d: no pool", l.JobID)
	}
	vals := map[string]types.AttributeValue{
		":claiming": str(string(job.Claiming)),
		":v":        n(l.Version),
		":owner":    str(l.Owner),
		":pool":     str(pool),
		":now":      n(job.Millis(now)),
	}
	set := "SET #p = :pool, updated_at = :now"
	if scope != "" {
		vals[":scope"] = str(scope)
		set += ", runner_scope = :scope"
	} else {
		set += " REMOVE runner_scope"
	}
	return s.fenced(ctx, l, set, map[string]string{"#p": "pool"}, vals, nil, nil)
}

// fenced is one update under lease l, with e's history entry when e is
// not nil (a state change); names are the update's attribute names
// besides the fence's #s (nil for none). A refusal is ErrLeaseLost, unless
// ours (nil for none) recognises the refusing record as this update
// already made.
func (s *Store) fenced(ctx context.Context, l Lease, update string, names map[string]string, vals map[string]types.AttributeValue, e *entry, ours func(job.Record) bool) error {
	all := map[string]string{"#s": "state"}
	maps.Copy(all, names)
	_, err := s.update(ctx, l.JobID, update, "#s = :claiming AND version = :v AND lease_owner = :owner",
		all, vals, types.ReturnValueNone, e, func(cur job.Record) bool {
			return cur.State == job.Claiming && cur.Version == l.Version && cur.LeaseOwner == l.Owner
		})
	if isConditionFailed(err) {
		var ccf *types.ConditionalCheckFailedException
		if ours != nil && errors.As(err, &ccf) && len(ccf.Item) > 0 {
			if cur, derr := unmarshal(ccf.Item); derr == nil && ours(cur) {
				return nil
			}
		}
		return ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("update job %d under lease: %w", l.JobID, err)
	}
	return nil
}

// LoadRate reads the shared rate reading of an installation. It returns an
// error wrapping ratelimit.ErrNoReading when there is none.
func (s *Store) LoadRate(ctx context.Context, installationID int64) (ratelimit.Reading, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table,
		Key:       key(job.RateKey(installationID)),
	})
	if err != nil {
		return ratelimit.Reading{}, fmt.Errorf("get rate of installation %d: %w", installationID, err)
	}
	if out.Item == nil {
		return ratelimit.Reading{}, fmt.Errorf("rate of installation %d: %w", installationID, ratelimit.ErrNoReading)
	}
	var it rateItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return ratelimit.Reading{}, fmt.Errorf("decode rate of installation %d: %w", installationID, err)
	}
	return it.reading(), nil
}

// SaveRate writes the primary fields of an installation's shared rate
// reading, unless the stored one is newer by ratelimit.Supersedes (another
// instance observed a later window, or a lower count of this one). An
// update, not a put: a block stored on the item (SaveBlock)
// stays.
//
// passed_at (the last call known to have gone through) never goes back: a
// newer reading from a process whose own last pass is older than the
// stored one is written without it. DynamoDB has no max in an update, so
// the write is conditional on both and, when only passed_at refused it
// (the item the refusal returns says which), written again without it:
// a second write, and only then.
func (s *Store) SaveRate(ctx context.Context, installationID int64, r ratelimit.Reading) error {
	passed := max(job.Millis(r.PassedAt), 0)
	counted := job.Millis(r.Counted())
	in := &dynamodb.UpdateItemInput{
		TableName:        &s.table,
		Key:              key(job.RateKey(installationID)),
		UpdateExpression: aws.String("SET #l = :l, #r = :r, #re = :re, #u = :u, #c = :c, #e = :e, #p = :p"),
		// ratelimit.Supersedes, in DynamoDB's words; an item written
		// before counted_at existed counts from updated_at, and a block
		// alone has no updated_at yet.
		ConditionExpression: aws.String("(" + supersedesCondition + ") AND (attribute_not_exists(#p) OR #p <= :p)"),
		ExpressionAttributeNames: map[string]string{
			"#l": "limit", "#r": "remaining", "#re": "reset_at", "#u": "updated_at", "#c": "counted_at",
			"#e": "expires_at", "#p": "passed_at",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":l": n(int64(r.Limit)), ":r": n(int64(r.Remaining)), ":re": n(job.Millis(r.ResetAt)),
			":u": n(job.Millis(r.ObservedAt)),
			":c": n(counted),
			// The stored count's own time, against which a lower count
			// still wins (at most Crossing after it) and a higher one
			// wins (more than Crossing before it).
			":cmax": n(counted + ratelimit.Crossing.Milliseconds()),
			":cmin": n(counted - ratelimit.Crossing.Milliseconds()),
			":p":    n(passed),
			// Rate items outlive their usefulness quickly; let TTL drop them.
			":e": n(r.ResetAt.Add(24 * time.Hour).Unix()),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	_, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		var cur rateItem
		if derr := attributevalue.UnmarshalMap(ccf.Item, &cur); derr != nil {
			return fmt.Errorf("decode rate of installation %d: %w", installationID, derr)
		}
		if stored := cur.reading(); stored.Known() && !ratelimit.Admits(r, stored) {
			return nil // a newer reading is already shared
		}
		// Newer, but a call went through later elsewhere: keep that.
		in.UpdateExpression = aws.String("SET #l = :l, #r = :r, #re = :re, #u = :u, #c = :c, #e = :e")
		in.ConditionExpression = aws.String(supersedesCondition)
		delete(in.ExpressionAttributeNames, "#p")
		delete(in.ExpressionAttributeValues, ":p")
		_, err = s.db.UpdateItem(ctx, in)
		if isConditionFailed(err) {
			return nil // a newer reading landed in between
		}
	}
	if err != nil {
		return fmt.Errorf("update rate of installation %d: %w", installationID, err)
	}
	return nil
}

// supersedesCondition is ratelimit.Admits(new, stored) as a condition
// expression over the rate item (#r remaining, #re reset_at, #u
// updated_at, #c counted_at) and the new reading's values (:r, :re, :u,
// and :cmax, :cmin: its counted time plus and minus Crossing). Equal
// times pass (<=), so a repeated write is no refusal.
const supersedesCondition = "attribute_not_exists(#u)" +
	" OR (#re <> :re AND #u <= :u)" +
	" OR (#re = :re AND #r = :r AND #u <= :u)" +
	" OR (#re = :re AND #r > :r AND ((attribute_exists(#c) AND #c <= :cmax) OR (attribute_not_exists(#c) AND #u <= :cmax)))" +
	" OR (#re = :re AND #r < :r AND ((attribute_exists(#c) AND #c < :cmin) OR (attribute_not_exists(#c) AND #u < :cmin)))"

// SaveBlock shares a secondary rate limit's block of an installation until
// until, of length length, unless the stored block ends later; the primary
// fields stay.
func (s *Store) SaveBlock(ctx context.Context, installationID int64, until time.Time, length time.Duration) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table,
		Key:       key(job.RateKey(installationID)),
		// The TTL moves too: a primary reading's (its reset + 24 h) may
		// have passed, and TTL would drop the item with the block.
		UpdateExpression:         aws.String("SET #b = :b, #f = :f, #e = :e"),
		ConditionExpression:      aws.String("attribute_not_exists(#b) OR #b < :b"),
		ExpressionAttributeNames: map[string]string{"#b": "blocked_until", "#f": "blocked_for", "#e": "expires_at"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":b": n(job.Millis(until)),
			":f": n(length.Milliseconds()),
			":e": n(until.Add(24 * time.Hour).Unix()),
		},
	})
	if isConditionFailed(err) {
		return nil // a later block is already shared
	}
	if err != nil {
		return fmt.Errorf("update rate block of installation %d: %w", installationID, err)
	}
	return nil
}

type rateItem struct {
	PK        string `dynamodbav:"pk"`
	Limit     int    `dynamodbav:"limit"`
	Remaining int    `dynamodbav:"remaining"`
	ResetAt   int64  `dynamodbav:"reset_at"`
	UpdatedAt int64  `dynamodbav:"updated_at"`
	// CountedAt is when the count (remaining) was observed
	// (Reading.CountedAt); 0 on an item written before it existed.
	CountedAt int64 `dynamodbav:"counted_at,omitempty"`
	ExpiresAt int64 `dynamodbav:"expires_at"`
	// BlockedUntil is a secondary rate limit's end (SaveBlock), 0 if none.
	BlockedUntil int64 `dynamodbav:"blocked_until,omitempty"`
	// BlockedFor is that block's length in milliseconds.
	BlockedFor int64 `dynamodbav:"blocked_for,omitempty"`
	// PassedAt is when a call last went through, as the writer knew it.
	PassedAt int64 `dynamodbav:"passed_at,omitempty"`
}

// reading is the Reading the item holds.
func (it rateItem) reading() ratelimit.Reading {
	r := ratelimit.Reading{Limit: it.Limit, Remaining: it.Remaining}
	if it.UpdatedAt > 0 {
		r.ResetAt, r.ObservedAt = job.FromMillis(it.ResetAt), job.FromMillis(it.UpdatedAt)
	}
	if it.UpdatedAt > 0 && it.CountedAt > 0 {
		r.CountedAt = job.FromMillis(it.CountedAt)
	}
	if it.PassedAt > 0 {
		r.PassedAt = job.FromMillis(it.PassedAt)
	}
	if it.BlockedUntil > 0 {
		r.BlockedUntil, r.BlockedFor = job.FromMillis(it.BlockedUntil), time.Duration(it.BlockedFor)*time.Millisecond
	}
	return r
}

func truncate(s string) string { return job.TruncateError(s) }

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

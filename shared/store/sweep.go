package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/job"
)

// SweepIndex is the name of the sparse GSI the reclaimer reads.
//
// LegacySweepIndex is the name the index had while it projected ALL (up
// to the release at 674a79e). CloudFormation changes no index's key schema
// or projection in place and adds or removes one index per update, so the
// keys-only index has a name of its own, and an upgrade keeps the old one
// for one deploy (template.yaml's LegacySweepIndex), reading it meanwhile:
// it holds the same keys, and Stale reads the records behind them anyway.
const (
	SweepIndex       = "sweep_keys"
	LegacySweepIndex = "sweep"
)

// legacyGone reports whether a Query of LegacySweepIndex failed because
// that index cannot be read (removed, not yet readable, or no longer
// allowed by the role), not for a passing reason.
func legacyGone(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "ValidationException", "ResourceNotFoundException", "AccessDeniedException":
		return true
	}
	return false
}

// SweepProjection is the sweep index's projection: keys only
// (template.yaml says the same; a test checks the deployed table). An entry
// carries pk, sweep_shard and sweep_at and nothing else.
//
// Why keys only: DynamoDB writes a GSI entry only when the item's index
// keys or a projected attribute change. With nothing projected, only a
// write that sets, moves or removes sweep_at touches the index, so a job's
// life costs three index writes: the put at creation, the claim (sweep_at
// moves to claimed_at + runner-start grace, billed as a delete and a put)
// and the removal when a runner takes the job. The lease write (Acquire)
// changes state, version and the lease but not sweep_at, so it writes no
// index entry; nor does Extend. The price is paid by the reclaimer alone:
// Stale reads the records behind a page of stale keys with one consistent
// BatchGetItem (up to 100 keys a request), and only stale records are
// read, a handful a pass, while every job pays its index writes.
//
// The lease keeps pending's or queued's sweep_at (created + PendingGrace,
// due_at + QueuedGrace), which stays a correct stale-from moment for the
// claiming record: the sweep finds it then and takes it back when its
// lease has expired. When the lease is still live (a lease longer than the
// grace, or a backlogged message leased after its record was already
// stale), the reclaimer moves sweep_at to lease_expires_at (Postpone), the
// moment the record does become stale, so it is found again exactly when
// the lease ends and not on every pass before. A claimer that dies holding
// its lease is therefore found at the later of the kept sweep_at and the
// lease's expiry: with the defaults (15 min graces, 3 min lease) up to
// 15 min after its message was due, where moving sweep_at at every lease
// found it 3 min after. The sweep is only the backstop there: the dead
// claimer's message, never deleted, comes back after the queue's
// visibility timeout and takes the expired lease over (Takeover, which
// leaves sweep_at alone too; see shared/claim), so the job is claimed
// again at the later of the visibility timeout and the lease's expiry. A
// claimer dying mid-claim is rare (the lease outlives the function's
// timeout); the index writes are every job's.
const SweepProjection = types.ProjectionTypeKeysOnly

// maxBatchGet is DynamoDB's cap on the keys of one BatchGetItem.
const maxBatchGet = 100

// batchGetTries bounds the requests for one chunk of keys while DynamoDB
// returns some of them unprocessed (throttling); the waits between them
// grow from 25 ms and add up to under 2 s.
const batchGetTries = 7

// ErrBadCursor: a Stale cursor this store did not make (or made for another
// shard): the domain's, which infra/mem answers too.
var ErrBadCursor = job.ErrBadCursor

// sweepCursor is the sweep index's LastEvaluatedKey, which Stale hands out
// as an opaque string: base64url of this JSON.
type sweepCursor struct {
	PK    string `json:"pk"`
	Shard string `json:"sh"`
	At    int64  `json:"at"`
}

func encodeCursor(key map[string]types.AttributeValue) (string, error) {
	pk, ok1 := key["pk"].(*types.AttributeValueMemberS)
	sh, ok2 := key["sweep_shard"].(*types.AttributeValueMemberS)
	at, ok3 := num(key["sweep_at"])
	if !ok1 || !ok2 || !ok3 || len(key) != 3 {
		return "", fmt.Errorf("encode sweep cursor: unexpected LastEvaluatedKey of %d attributes", len(key))
	}
	b, err := json.Marshal(sweepCursor{PK: pk.Value, Shard: sh.Value, At: at})
	if err != nil {
		return "", fmt.Errorf("encode sweep cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeCursor(c, shard string) (map[string]types.AttributeValue, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	var sc sweepCursor
	if err == nil {
		err = json.Unmarshal(b, &sc)
	}
	if err == nil && (sc.PK == "" || sc.Shard != shard) {
		err = fmt.Errorf("made for shard %q, not for shard %q", sc.Shard, shard)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrBadCursor, c, err)
	}
	return map[string]types.AttributeValue{"pk": str(sc.PK), "sweep_shard": str(sc.Shard), "sweep_at": n(sc.At)}, nil
}

// TakeBack is the reclaimer's conditional take-back of a stale record it
// read (a claimed one included: a new attempt when its runner never took
// the job, which also counts the replacement): it succeeds only if the record still has the state and version that
// were read (and, for claiming, its lease has expired by now). To is Queued
// (re-enqueue: version+1, due_at set; the caller sends the message after) or
// Abandoned (max age passed). It returns the whole record as written
// (ALL_NEW), or
// a *job.ConflictError carrying the record as it is now when the condition
// failed. Taking back an expired lease records first_failure_at = now
// unless a failure already did: the claimer died, and that attempt failed.
func (s *Store) TakeBack(ctx context.Context, read job.Record, to job.State, due time.Time, reason string, now time.Time) (job.Record, error) {
	return s.takeBack(ctx, read, to, due, reason, now, false)
}

// Swap is the webhook's take-back of a claimed record whose runner another
// job we serve took (it had no runner of its own for this one): queued at
// version+1 with due, a new runner name for the next attempt
// (replacements+1) that does not count toward the cap (replacements_base+1
// too) and starts no max-age clock, idle checks restarted: the runner did
// our work, nothing failed. Before, a burst's runners taken by its older
// jobs used the newest job's replacements up and abandoned it with no
// runner coming. Conditions and answers are TakeBack's.
func (s *Store) Swap(ctx context.Context, read job.Record, due time.Time, reason string, now time.Time) (job.Record, error) {
	if read.State != job.Claimed {
		return job.Record{}, fmt.Errorf("swap job %d: %q is not claimed", read.JobID, read.State)
	}
	return s.takeBack(ctx, read, job.Queued, due, reason, now, true)
}

func (s *Store) takeBack(ctx context.Context, read job.Record, to job.State, due time.Time, reason string, now time.Time, swap bool) (job.Record, error) {
	nowMs := job.Millis(now)
	vals := map[string]types.AttributeValue{
		":read": str(string(read.State)),
		":v":    n(read.Version),
		":nv":   n(read.Version + 1),
		":to":   str(string(to)),
		":now":  n(nowMs),
	}
	cond := "#s = :read AND version = :v"
	if read.State == job.Claiming {
		cond += " AND lease_expires_at < :now"
	}

	var update string
	switch to {
	case job.Queued:
		dueMs := job.Millis(due)
		vals[":due"] = n(dueMs)
		vals[":sweep"] = n(dueMs + s.opt.QueuedGrace.Milliseconds())
		// The shard under the current count: a record from before
		// SWEEP_SHARDS was lowered moves home (reclaim's strays).
		vals[":shard"] = str(job.Shard(read.JobID, s.opt.Shards))
		update = "SET #s = :to, version = :nv, due_at = :due, sweep_shard = :shard, sweep_at = :sweep, updated_at = :now"
		if read.State == job.Claiming {
			// An expired lease is a failed attempt whose claimer died
			// before it could say so. Start the max-age clock if no
			// failure did: a job whose claimer dies every time would
			// otherwise loop through the reclaimer forever.
			update += ", first_failure_at = if_not_exists(first_failure_at, :now)"
		}
		if read.State == job.Claimed {
			// A new attempt: the runner never took the job. The max-age
			// clock starts, the replacement is counted (capped by the
			// caller) and the idle checks restart. The ladder advances
			// with the claimer's next attempt, which counts itself
			// (attempt counts attempts that reached GitHub). A swap
			// counts nothing and starts no clock (Swap).
			vals[":one"] = n(1)
			vals[":zero"] = n(0)
			update += ", replacements = if_not_exists(replacements, :zero) + :one, liveness_checks = :zero"
			if swap {
				update += ", replacements_base = if_not_exists(replacements_base, :zero) + :one"
			} else {
				update += ", first_failure_at = if_not_exists(first_failure_at, :now)"
			}
		}
		update += " REMOVE lease_owner, lease_expires_at"
		if read.State == job.Claimed {
			update += ", waits" // the new attempt's job is queued at GitHub
		}
	case job.Abandoned:
		vals[":exp"] = n(now.Add(s.opt.RecordTTL).Unix())
		vals[":em"] = str(truncate(reason))
		update = "SET #s = :to, version = :nv, updated_at = :now, expires_at = :exp, last_error = :em " +
			"REMOVE lease_owner, lease_expires_at, sweep_shard, sweep_at"
	default:
		return job.Record{}, fmt.Errorf("take back job %d: cannot move to %q", read.JobID, to)
	}
	// read.History is nil for a record read from the sweep index (not
	// projected): the entry is appended blind.
	actor := job.ActorReclaimer
	if swap {
		actor = job.ActorWebhook
	}
	e := entry{t: job.Transition{At: nowMs, To: to, Error: reason, Actor: actor}, known: read.History}
	pinned := func(cur job.Record) bool {
		return cur.State == read.State && cur.Version == read.Version && (read.State != job.Claiming || cur.LeaseExpiresAt < nowMs)
	}
	// A token of this take-back, written with its history entry: the SDK
	// retries a request whose answer was lost, and when the first try had
	// taken effect the retry fails its condition against our own write.
	// The token tells that apart from another pass's take-back of the same
	// read; reporting our own as a race would send no message and leave
	// the record queued for QUEUED_GRACE.
	put, err := newPut()
	if err != nil {
		return job.Record{}, fmt.Errorf("take back job %d: %w", read.JobID, err)
	}
	e.put = put
	out, err := s.update(ctx, read.JobID, update, cond, map[string]string{"#s": "state"}, vals, types.ReturnValueAllNew, &e, pinned)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		if !writeOf(ccf.Item, put) {
			return job.Record{}, conflict("take back", read.JobID, ccf.Item)
		}
		return unmarshal(ccf.Item)
	case err != nil:
		return job.Record{}, fmt.Errorf("take back job %d: %w", read.JobID, err)
	}
	return unmarshal(out.Attributes)
}

// conditional is one conditional update of job id's record that returns
// the record as written (ALL_NEW), or a *job.ConflictError carrying the
// record as it is now when the condition failed (op names the write). A
// state change carries its history entry e (nil for none), and pinned
// tells whether a refused record still met the rest of cond.
func (s *Store) conditional(ctx context.Context, op string, id int64, update, cond string, vals map[string]types.AttributeValue, e *entry, pinned func(job.Record) bool) (job.Record, error) {
	out, err := s.update(ctx, id, update, cond, map[string]string{"#s": "state"}, vals, types.ReturnValueAllNew, e, pinned)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return job.Record{}, conflict(op, id, ccf.Item)
	}
	if err != nil {
		return job.Record{}, fmt.Errorf("%s job %d: %w", op, id, err)
	}
	return unmarshal(out.Attributes)
}

// Recheck is the reclaimer's "check again later" on a claimed record it
// read: sweep_at moves to due; liveness_checks grows by one for
// job.CheckIdle (a check that found the runner online but idle; a check
// skipped for an exhausted rate limit or a passing GitHub error is not
// counted), which removes waits; job.CheckBlocked sets first_failure_at
// to now unless it is set and removes waits; job.CheckWaiting removes it, sets
// liveness_checks to 0, waits to the count read plus one and expires_at
// to now + RecordTTL (job.CheckWaitingTimed likewise, first_failure_at
// kept).
// It is conditional on the state (claimed) and version read and does not
// bump the version (no message follows). A refusal is a *job.ConflictError
// carrying the record as it is now.
func (s *Store) Recheck(ctx context.Context, read job.Record, due time.Time, check job.Check, now time.Time) (job.Record, error) {
	if read.State != job.Claimed {
		return job.Record{}, fmt.Errorf("recheck job %d: %q is not claimed", read.JobID, read.State)
	}
	vals := map[string]types.AttributeValue{
		":read":  str(string(job.Claimed)),
		":v":     n(read.Version),
		":shard": str(job.Shard(read.JobID, s.opt.Shards)), // home, as TakeBack
		":sweep": n(job.Millis(due)),
		":now":   n(job.Millis(now)),
	}
	update := "SET sweep_shard = :shard, sweep_at = :sweep, updated_at = :now"
	cond := "#s = :read AND version = :v"
	if check == job.CheckBlocked {
		update += ", first_failure_at = if_not_exists(first_failure_at, :now) REMOVE waits"
	}
	if check == job.CheckIdle {
		// The count as read plus one, not an increment: the version does
		// not move, so an SDK retry of a write that took effect passes the
		// condition again and would count one check twice (an idle runner
		// would reach the check limit a grace period early and be replaced).
		vals[":checks"] = n(int64(read.LivenessChecks) + 1)
		update += ", liveness_checks = :checks REMOVE waits"
	}
	if check == job.CheckWaiting || check == job.CheckWaitingTimed {
		// As read plus one, for the reason above. GitHub may hold the job
		// past the record's TTL (30 days against 7): the TTL is renewed,
		// or the record could be deleted while it is watched.
		vals[":waits"] = n(int64(read.Waits) + 1)
		vals[":exp"] = n(now.Add(s.opt.RecordTTL).Unix())
		update += ", waits = :waits, expires_at = :exp"
		if check == job.CheckWaiting {
			vals[":zero"] = n(0)
			update += ", liveness_checks = :zero REMOVE first_failure_at"
		}
		// A held look pushes the next look far out: it holds only if the
		// next look is still the one read, not one the webhook brought
		// to now (the approval's queued) since: the version does not
		// move on a claimed record.
		vals[":readsweep"] = n(read.SweepAt)
		cond += " AND sweep_at = :readsweep"
	}
	// No history entry: the record stays claimed (no transition).
	return s.conditional(ctx, "recheck", read.JobID, update, cond, vals, nil, nil)
}

// Stale reads one page of records in shard whose sweep_at is before now,
// oldest first, continuing after cursor ("" for the first page). It is a
// Query on the sparse sweep index, never a Scan, then one consistent
// BatchGetItem per 100 keys for the records themselves (the index carries
// keys only). A record is returned whole and as it is now: one that is gone,
// or whose consistent read shows it moved (sweep_at not before now any
// more) or out of the index (terminal) since the index saw it, is left out.
// The page's Next is an opaque cursor, "" when the shard is exhausted; a
// cursor this store did not make fails with ErrBadCursor.
func (s *Store) Stale(ctx context.Context, shard string, now time.Time, limit int32, cursor string) (job.Page, error) {
	in := &dynamodb.QueryInput{
		TableName:              &s.table,
		IndexName:              aws.String(s.sweepIndex),
		KeyConditionExpression: aws.String("sweep_shard = :sh AND sweep_at < :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":sh":  str(shard),
			":now": n(job.Millis(now)),
		},
	}
	if cursor != "" {
		start, err := decodeCursor(cursor, shard)
		if err != nil {
			return job.Page{}, fmt.Errorf("query sweep shard %s: %w", shard, err)
		}
		in.ExclusiveStartKey = start
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	out, err := s.db.Query(ctx, in)
	if err != nil && s.sweepIndex == LegacySweepIndex && legacyGone(err) {
		// The deploy that drops the old index updates the table, then the
		// role, then this function: in between, this process still names
		// the old index, gone (or denied, or back but backfilling after a
		// rolled-back drop). The new one holds the same keys (a cursor of
		// either continues in the other).
		in.IndexName = aws.String(SweepIndex)
		out, err = s.db.Query(ctx, in)
	}
	if err != nil {
		return job.Page{}, fmt.Errorf("query sweep shard %s: %w", shard, err)
	}
	var p job.Page
	if len(out.LastEvaluatedKey) > 0 {
		if p.Next, err = encodeCursor(out.LastEvaluatedKey); err != nil {
			return job.Page{}, fmt.Errorf("query sweep shard %s: %w", shard, err)
		}
	}
	pks := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok {
			pks = append(pks, pk.Value)
		}
	}
	items, err := s.batchGet(ctx, pks)
	if err != nil {
		return job.Page{}, fmt.Errorf("read stale records of sweep shard %s: %w", shard, err)
	}
	nowMs := job.Millis(now)
	for _, pk := range pks { // the index's order: oldest first
		it, ok := items[pk]
		if !ok {
			continue // deleted since the index saw it
		}
		r, err := unmarshal(it)
		if err != nil {
			// One bad item must not hide every record behind it in the
			// shard from the reclaimer forever: report it and go on.
			p.Undecodable = append(p.Undecodable, pk)
			continue
		}
		if r.SweepShard != shard || r.SweepAt == 0 || r.SweepAt >= nowMs {
			// Moved on since the index saw it (the index is eventually
			// consistent): taking it back on this read would re-enqueue a
			// record somebody just wrote.
			continue
		}
		p.Records = append(p.Records, r)
	}
	return p, nil
}

// batchGet reads the items under pks, strongly consistent, in requests of
// up to maxBatchGet keys, asking again for the keys DynamoDB leaves
// unprocessed. Items that do not exist are absent from the result.
func (s *Store) batchGet(ctx context.Context, pks []string) (map[string]map[string]types.AttributeValue, error) {
	found := make(map[string]map[string]types.AttributeValue, len(pks))
	for len(pks) > 0 {
		chunk := pks[:min(maxBatchGet, len(pks))]
		pks = pks[len(chunk):]
		keys := make([]map[string]types.AttributeValue, len(chunk))
		for i, pk := range chunk {
			keys[i] = key(pk)
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for try := 1; len(req[s.table].Keys) > 0; try++ {
			if try > batchGetTries {
				return nil, fmt.Errorf("batch get: %d keys still unprocessed after %d requests", len(req[s.table].Keys), batchGetTries)
			}
			if try > 2 {
				if err := clock.Sleep(ctx, 25*time.Millisecond<<(try-3)); err != nil {
					return nil, fmt.Errorf("batch get: %w", err)
				}
			}
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("batch get: %w", err)
			}
			for _, it := range out.Responses[s.table] {
				if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok {
					found[pk.Value] = it
				}
			}
			req = out.UnprocessedKeys
		}
	}
	return found, nil
}

// Postpone is the reclaimer's "not yet" for a stale record whose lease is
// still live: sweep_at moves to until (the lease's expiry), so the sweep
// finds the record again exactly when it may be taken back and not on every
// pass before (the lease write leaves sweep_at alone: see SweepProjection).
// It is conditional on the state and version read (for a claiming record
// the version names the lease), bumps no version (the claimer's fenced
// writes still hold) and changes nothing else. It returns the record as
// written, or a *job.ConflictError carrying the record as it is now.
func (s *Store) Postpone(ctx context.Context, read job.Record, until time.Time) (job.Record, error) {
	if read.State.Terminal() {
		return job.Record{}, fmt.Errorf("postpone job %d: a %s record is not in the sweep index", read.JobID, read.State)
	}
	return s.conditional(ctx, "postpone", read.JobID, "SET sweep_at = :sweep", "#s = :read AND version = :v",
		map[string]types.AttributeValue{
			":read":  str(string(read.State)),
			":v":     n(read.Version),
			":sweep": n(job.Millis(until)),
		}, nil, nil)
}

// Shards lists the sweep shard keys ("0" … Shards-1).
func (s *Store) Shards() []string { return job.ShardKeys(s.opt.Shards) }

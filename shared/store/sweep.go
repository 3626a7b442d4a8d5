package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

// SweepIndex is the name of the sparse GSI the reclaimer reads.
const SweepIndex = "sweep"

// SweepProjection lists the non-key attributes the sweep index projects
// (template.yaml's INCLUDE list must say the same; a test checks it): what
// the reclaimer decides on before it writes, and nothing else. The keys
// (pk, sweep_shard, sweep_at) come with every index entry.
//
// Why so few: the index is written whenever a projected attribute changes,
// so each one must change only together with sweep_at (every write that
// moves state, version, the lease or first_failure_at moves sweep_at too),
// and the rest of the record (attempt, pool, repo, installation, run id,
// error text, updated_at) comes back from TakeBack's own write (ALL_NEW)
// for the records the reclaimer does take back. Extend, which counts an
// attempt under a live lease, therefore never touches the index.
var SweepProjection = []string{"state", "version", "lease_expires_at", "first_failure_at"}

// ErrBadCursor: a Stale cursor this store did not make (or made for another
// shard).
var ErrBadCursor = errors.New("store: bad sweep cursor")

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
// (ALL_NEW: the sweep index carries only what the reclaimer decides on), or
// a *job.ConflictError carrying the record as it is now when the condition
// failed. Taking back an expired lease records first_failure_at = now
// unless a failure already did: the claimer died, and that attempt failed.
func (s *Store) TakeBack(ctx context.Context, read job.Record, to job.State, due time.Time, reason string, now time.Time) (job.Record, error) {
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
		update = "SET #s = :to, version = :nv, due_at = :due, sweep_at = :sweep, updated_at = :now"
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
			// (attempt counts attempts that reached GitHub).
			vals[":one"] = n(1)
			vals[":zero"] = n(0)
			update += ", first_failure_at = if_not_exists(first_failure_at, :now)" +
				", replacements = if_not_exists(replacements, :zero) + :one, liveness_checks = :zero"
		}
		update += " REMOVE lease_owner, lease_expires_at"
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
	e := entry{t: job.Transition{At: nowMs, To: to, Error: reason, Actor: job.ActorReclaimer}, known: read.History}
	pinned := func(cur job.Record) bool {
		return cur.State == read.State && cur.Version == read.Version && (read.State != job.Claiming || cur.LeaseExpiresAt < nowMs)
	}
	return s.conditional(ctx, "take back", read.JobID, update, cond, vals, &e, pinned)
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
// read: sweep_at moves to due, and liveness_checks grows by one when
// counted (a check that found the runner online but idle; a check skipped
// for an exhausted rate limit or a GitHub error is not counted). It is
// conditional on the state (claimed) and version read and does not bump
// the version (no message follows). A refusal is a *job.ConflictError
// carrying the record as it is now.
func (s *Store) Recheck(ctx context.Context, read job.Record, due time.Time, counted bool, now time.Time) (job.Record, error) {
	if read.State != job.Claimed {
		return job.Record{}, fmt.Errorf("recheck job %d: %q is not claimed", read.JobID, read.State)
	}
	vals := map[string]types.AttributeValue{
		":read":  str(string(job.Claimed)),
		":v":     n(read.Version),
		":sweep": n(job.Millis(due)),
		":now":   n(job.Millis(now)),
	}
	update := "SET sweep_at = :sweep, updated_at = :now"
	if counted {
		vals[":one"] = n(1)
		vals[":zero"] = n(0)
		update += ", liveness_checks = if_not_exists(liveness_checks, :zero) + :one"
	}
	// No history entry: the record stays claimed (no transition).
	return s.conditional(ctx, "recheck", read.JobID, update, "#s = :read AND version = :v", vals, nil, nil)
}

// Stale reads one page of records in shard whose sweep_at is before now,
// oldest first, continuing after cursor ("" for the first page). It is a
// Query on the sparse sweep index, never a Scan, and its records carry only
// the index's projection (SweepProjection). The page's Next is an opaque
// cursor, "" when the shard is exhausted; a cursor this store did not make
// fails with ErrBadCursor.
func (s *Store) Stale(ctx context.Context, shard string, now time.Time, limit int32, cursor string) (job.Page, error) {
	in := &dynamodb.QueryInput{
		TableName:              &s.table,
		IndexName:              aws.String(SweepIndex),
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
	if err != nil {
		return job.Page{}, fmt.Errorf("query sweep shard %s: %w", shard, err)
	}
	var p job.Page
	if len(out.LastEvaluatedKey) > 0 {
		if p.Next, err = encodeCursor(out.LastEvaluatedKey); err != nil {
			return job.Page{}, fmt.Errorf("query sweep shard %s: %w", shard, err)
		}
	}
	for _, it := range out.Items {
		r, err := unmarshal(it)
		if err != nil {
			// One bad item must not hide every record behind it in the
			// shard from the reclaimer forever: report it and go on.
			pk := "?"
			if v, ok := it["pk"].(*types.AttributeValueMemberS); ok {
				pk = v.Value
			}
			p.Undecodable = append(p.Undecodable, pk)
			continue
		}
		p.Records = append(p.Records, r)
	}
	return p, nil
}

// Shards lists the sweep shard keys ("0" … Shards-1).
func (s *Store) Shards() []string {
	out := make([]string, s.opt.Shards)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}

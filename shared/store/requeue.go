package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

// Requeue is an operator's retry of a failed or abandoned job (ghclaim
// retry): one conditional write, on the state and version the operator
// read, that moves the record back to queued at version+1 with the ladder
// reset (attempt 0, first_failure_at removed), due at q.Due, back in the
// sweep index (so a message that never arrives is found by the reclaimer,
// as for any queued record), a fresh runner name for the new attempt
// (replacements one up: the last attempt's runner may be at work on another
// job, and a claim under its name would take that busy runner for its
// own), the replacement cap and the idle checks reset (replacements_base =
// the new replacements, liveness_checks 0, waits removed: the retried job
// gets its full tolerance again), last_error "retried by operator <by>", and
// the operator's entry appended to the history (history.go). It returns the record as written, or a *job.ConflictError carrying
// the record as it is now (not found when there is none). The caller sends
// the claim message for the new version afterwards.
func (s *Store) Requeue(ctx context.Context, q job.Requeue, now time.Time) (job.Record, error) {
	r := q.Read
	if !r.State.Retryable() {
		return job.Record{}, fmt.Errorf("requeue job %d: a %s job is not retried (only failed or abandoned ones)", r.JobID, r.State)
	}
	nowMs, dueMs := job.Millis(now), job.Millis(q.Due)
	note := job.RequeueNote(q.By)
	known := r.History // the operator read the whole record
	if known == nil {
		known = []job.Transition{}
	}
	put, err := newPut()
	if err != nil {
		return job.Record{}, fmt.Errorf("requeue job %d: %w", r.JobID, err)
	}
	e := entry{t: job.Transition{At: nowMs, To: job.Queued, Attempt: 0, Error: note, Actor: job.ActorOperator}, setsAttempt: true, known: known, put: put}
	vals := map[string]types.AttributeValue{
		":queued": str(string(job.Queued)),
		":read":   str(string(r.State)),
		":v":      n(r.Version),
		":nv":     n(r.Version + 1),
		":zero":   n(0),
		":one":    n(1),
		":due":    n(dueMs),
		":shard":  str(job.Shard(r.JobID, s.opt.Shards)),
		":sweep":  n(dueMs + s.opt.QueuedGrace.Milliseconds()),
		":now":    n(nowMs),
		":exp":    n(now.Add(s.opt.RecordTTL).Unix()),
		":note":   str(truncate(note)),
	}
	out, err := s.update(ctx, r.JobID, "SET #s = :queued, version = :nv, attempt = :zero, due_at = :due, "+
		"sweep_shard = :shard, sweep_at = :sweep, updated_at = :now, expires_at = :exp, last_error = :note, "+
		"replacements = if_not_exists(replacements, :zero) + :one, replacements_base = if_not_exists(replacements, :zero) + :one, "+
		"liveness_checks = :zero "+
		"REMOVE first_failure_at, last_error_class, lease_owner, lease_expires_at, waits", "#s = :read AND version = :v",
		map[string]string{"#s": "state"}, vals, types.ReturnValueAllNew, &e,
		func(cur job.Record) bool { return cur.State == r.State && cur.Version == r.Version })
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// The SDK's retry of this very write, whose first answer was lost,
		// is refused by it: the record is requeued as asked, and the
		// caller must still send its claim message.
		if writeOf(ccf.Item, put) {
			return unmarshal(ccf.Item)
		}
		return job.Record{}, conflict("requeue", r.JobID, ccf.Item)
	}
	if err != nil {
		// The answer is lost (a reset or a timeout past the SDK's
		// retries, an interrupt after the request left), and the write
		// may have landed: then the record is queued and the caller must
		// send its claim message, which a bare error would keep it from
		// (the job waiting the reclaimer's queued grace, a second retry
		// refused). A consistent read tells: this call's token last.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		got, gerr := s.db.GetItem(rctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key(job.Key(r.JobID)), ConsistentRead: aws.Bool(true)})
		if gerr == nil && writeOf(got.Item, put) {
			return unmarshal(got.Item)
		}
		return job.Record{}, fmt.Errorf("requeue job %d: %w", r.JobID, err)
	}
	return unmarshal(out.Attributes)
}

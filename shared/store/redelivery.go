package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

// The redeliverer's items (shared/redeliver.Store): the mark
// (pk redeliver#cursor: mark_id, delivered_at, updated_at, and while a read
// is under way resume_cursor, resume_top, resume_top_at, resume_guids, and
// retry: the deliveries carried to the next pass, a list of {id, guid,
// action, at}) and one attempt count per delivery GUID
// (pk redeliver#<guid>: attempts, asked_at (ms, the last count), asked_id
// (the log id the last count was asked for), expires_at, count_token).

// LoadMark returns the mark of the last completed redeliverer pass, or an
// error wrapping job.ErrNotFound.
func (s *Store) LoadMark(ctx context.Context) (job.DeliveryMark, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key(job.MarkKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return job.DeliveryMark{}, fmt.Errorf("get redelivery mark: %w", err)
	}
	if out.Item == nil {
		return job.DeliveryMark{}, fmt.Errorf("redelivery mark: %w", job.ErrNotFound)
	}
	id, ok1 := num(out.Item["mark_id"])
	at, ok2 := num(out.Item["delivered_at"])
	if !ok1 || !ok2 {
		return job.DeliveryMark{}, fmt.Errorf("decode redelivery mark: mark_id or delivered_at missing")
	}
	m := job.DeliveryMark{ID: id, DeliveredAt: job.FromMillis(at)}
	if c, ok := out.Item["resume_cursor"].(*types.AttributeValueMemberS); ok && c.Value != "" {
		top, ok1 := num(out.Item["resume_top"])
		topAt, ok2 := num(out.Item["resume_top_at"])
		if !ok1 || !ok2 {
			return job.DeliveryMark{}, fmt.Errorf("decode redelivery mark: resume_top or resume_top_at missing")
		}
		m.Resume = job.DeliveryResume{Cursor: c.Value, Top: top, TopAt: job.FromMillis(topAt)}
		if gs, ok := out.Item["resume_guids"].(*types.AttributeValueMemberSS); ok {
			m.Resume.Redelivered = gs.Value
		}
	}
	if l, ok := out.Item["retry"].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			e, ok := v.(*types.AttributeValueMemberM)
			if !ok {
				return job.DeliveryMark{}, fmt.Errorf("decode redelivery mark: retry entry is not a map")
			}
			id, ok1 := num(e.Value["id"])
			at, ok2 := num(e.Value["at"])
			guid, ok3 := e.Value["guid"].(*types.AttributeValueMemberS)
			if !ok1 || !ok2 || !ok3 {
				return job.DeliveryMark{}, fmt.Errorf("decode redelivery mark: retry entry without id, at or guid")
			}
			ref := job.DeliveryRef{ID: id, GUID: guid.Value, DeliveredAt: job.FromMillis(at)}
			if a, ok := e.Value["action"].(*types.AttributeValueMemberS); ok {
				ref.Action = a.Value
			}
			m.Retry = append(m.Retry, ref)
		}
	}
	return m, nil
}

// SaveMark writes m (its read under way included, or none) unless the
// stored mark is at a higher id (a pass that finished later read further).
func (s *Store) SaveMark(ctx context.Context, m job.DeliveryMark, now time.Time) error {
	item := map[string]types.AttributeValue{
		"pk": str(job.MarkKey), "mark_id": n(m.ID), "delivered_at": n(job.Millis(m.DeliveredAt)), "updated_at": n(job.Millis(now)),
	}
	if r := m.Resume; r.Cursor != "" {
		item["resume_cursor"], item["resume_top"], item["resume_top_at"] = str(r.Cursor), n(r.Top), n(job.Millis(r.TopAt))
		if len(r.Redelivered) > 0 {
			item["resume_guids"] = &types.AttributeValueMemberSS{Value: r.Redelivered}
		}
	}
	if len(m.Retry) > 0 {
		l := make([]types.AttributeValue, 0, len(m.Retry))
		for _, d := range m.Retry {
			l = append(l, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"id": n(d.ID), "guid": str(d.GUID), "action": str(d.Action), "at": n(job.Millis(d.DeliveredAt)),
			}})
		}
		item["retry"] = &types.AttributeValueMemberL{Value: l}
	}
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 &s.table,
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR mark_id <= :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": n(m.ID)},
	})
	if isConditionFailed(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("put redelivery mark %d: %w", m.ID, err)
	}
	return nil
}

// CountRedelivery adds one to guid's attempt count, conditional on the
// count being below max, and renews its TTL. A count past its expires_at
// counts as absent (TTL deletion is lazy): it is replaced by a fresh one.
// When the count is at max: an error wrapping job.ErrAttemptsSpent.
//
// Each count writes a random token of its own (count_token). The SDK
// retries a request whose answer was lost (a 500, a reset connection), and
// an ADD that took effect the first time would count twice, or, at the
// last allowed attempt, be refused by its own write and spend the
// delivery's redelivery without asking GitHub for it. A refusal whose
// record carries this call's token is this call's count.
func (s *Store) CountRedelivery(ctx context.Context, guid string, id int64, max int, now time.Time) (int, error) {
	if guid == "" {
		return 0, fmt.Errorf("count redelivery: empty guid")
	}
	exp := n(now.Add(job.RedeliveryTTL).Unix())
	tok := rand.Text()
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.table,
		Key:                 key(job.RedeliveryKey(guid)),
		UpdateExpression:    aws.String("ADD attempts :one SET expires_at = :exp, count_token = :tok, asked_at = :at, asked_id = :id"),
		ConditionExpression: aws.String("attribute_not_exists(pk) OR (attempts < :max AND expires_at >= :nows AND (attribute_not_exists(count_token) OR count_token <> :tok))"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": n(1), ":exp": exp, ":max": n(int64(max)), ":nows": n(now.Unix()), ":tok": str(tok), ":at": n(job.Millis(now)), ":id": n(id),
		},
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		got, _ := num(ccf.Item["attempts"])
		if t, _ := ccf.Item["count_token"].(*types.AttributeValueMemberS); t != nil && t.Value == tok {
			return int(got), nil // our own count, retried
		}
		if e, ok := num(ccf.Item["expires_at"]); ok && e < now.Unix() {
			return s.restartCount(ctx, guid, id, exp, now)
		}
		return int(got), fmt.Errorf("count redelivery %s: %w", guid, job.ErrAttemptsSpent)
	case err != nil:
		return 0, fmt.Errorf("count redelivery %s: %w", guid, err)
	}
	got, ok := num(out.Attributes["attempts"])
	if !ok {
		return 0, fmt.Errorf("count redelivery %s: answer without attempts", guid)
	}
	return int(got), nil
}

// restartCount replaces an expired count with a count of one, conditional
// on it being still expired (a concurrent pass may have restarted it). Its
// token tells a retried put of its own from a concurrent restart.
func (s *Store) restartCount(ctx context.Context, guid string, id int64, exp types.AttributeValue, now time.Time) (int, error) {
	tok := rand.Text()
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                map[string]types.AttributeValue{"pk": str(job.RedeliveryKey(guid)), "attempts": n(1), "expires_at": exp, "count_token": str(tok), "asked_at": n(job.Millis(now)), "asked_id": n(id)},
		ConditionExpression:                 aws.String("attribute_not_exists(pk) OR expires_at < :nows"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":nows": n(now.Unix())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if t, _ := ccf.Item["count_token"].(*types.AttributeValueMemberS); t != nil && t.Value == tok {
			return 1, nil // our own restart, retried
		}
		return 0, fmt.Errorf("count redelivery %s: restarted concurrently: %w", guid, job.ErrAttemptsSpent)
	}
	if err != nil {
		return 0, fmt.Errorf("count redelivery %s: %w", guid, err)
	}
	return 1, nil
}

// Redeliveries returns guid's attempt count, when it was last counted and
// for which log id;
// none (or one past its expires_at) is the zero count.
func (s *Store) Redeliveries(ctx context.Context, guid string, now time.Time) (job.RedeliveryCount, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: key(job.RedeliveryKey(guid)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return job.RedeliveryCount{}, fmt.Errorf("get redelivery count %s: %w", guid, err)
	}
	if e, ok := num(out.Item["expires_at"]); !ok || e < now.Unix() {
		return job.RedeliveryCount{}, nil
	}
	c := job.RedeliveryCount{}
	if a, ok := num(out.Item["attempts"]); ok {
		c.Attempts = int(a)
	}
	if at, ok := num(out.Item["asked_at"]); ok {
		c.AskedAt = job.FromMillis(at)
	}
	if id, ok := num(out.Item["asked_id"]); ok {
		c.AskedID = id
	}
	return c, nil
}

// RefundRedelivery takes back the attempt that brought guid's count to
// count, for a redelivery GitHub refused without doing it (a rate limit,
// a server error). Conditional on the count still being count: when a
// concurrent pass counted meanwhile, nothing changes (not an error).
func (s *Store) RefundRedelivery(ctx context.Context, guid string, count int) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(job.RedeliveryKey(guid)),
		UpdateExpression:          aws.String("ADD attempts :minus"),
		ConditionExpression:       aws.String("attempts = :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":minus": n(-1), ":n": n(int64(count))},
	})
	if isConditionFailed(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("refund redelivery %s: %w", guid, err)
	}
	return nil
}

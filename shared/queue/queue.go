// Package queue is the SQS adapter for claim messages: it sends a job's
// message with a per-message delay (one at a time, or up to ten in one
// SendMessageBatch so they leave at one instant), deletes handled messages,
// and decodes and validates message bodies.
//
// SQS caps DelaySeconds at 900 s; this package never chains longer delays
// itself (the claimer records not_before in the message and re-sends), it
// refuses them so a caller's mistake cannot silently shorten a backoff.
// It must never decide delays or interpret job state.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

// MaxDelay is SQS's cap on a message's DelaySeconds (job.MaxDelay).
const MaxDelay = job.MaxDelay

// MaxBatch is SQS's cap on the entries of one SendMessageBatch.
const MaxBatch = job.MaxBatch

// SQS is the part of the SQS API the queue uses.
type SQS interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

var _ SQS = (*sqs.Client)(nil)

// ErrBadMessage marks a message body that is not a claim message (job.ErrBadMessage).
var ErrBadMessage = job.ErrBadMessage

// Queue sends and deletes claim messages on one queue.
type Queue struct {
	api SQS
	url string
}

// New returns the queue at url.
func New(api SQS, url string) *Queue { return &Queue{api: api, url: url} }

// URL is the queue's URL.
func (q *Queue) URL() string { return q.url }

// encode checks delay and returns m's body and DelaySeconds: the delay
// rounded up to whole seconds so a job is never early, refused past MaxDelay.
func encode(m job.Message, delay time.Duration) (string, int32, error) {
	if delay < 0 {
		delay = 0
	}
	if delay > MaxDelay {
		return "", 0, fmt.Errorf("send job %d: delay %s is over SQS's %s cap", m.JobID, delay, MaxDelay)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return "", 0, fmt.Errorf("send job %d: %w", m.JobID, err)
	}
	return string(body), int32(math.Ceil(delay.Seconds())), nil
}

// Send sends m, visible after delay (rounded up to whole seconds so a job is
// never early). Delays past MaxDelay are refused.
func (q *Queue) Send(ctx context.Context, m job.Message, delay time.Duration) error {
	body, secs, err := encode(m, delay)
	if err != nil {
		return err
	}
	_, err = q.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     &q.url,
		MessageBody:  aws.String(body),
		DelaySeconds: secs,
	})
	if err != nil {
		return fmt.Errorf("send job %d version %d: %w", m.JobID, m.Version, err)
	}
	return nil
}

// SendBatch sends msgs[i] visible after delays[i] (rounded as Send does) in
// one SendMessageBatch call, so every message of the batch leaves at the
// same instant. It returns one error per message, nil for each message SQS
// accepted: SQS accepts or refuses each entry on its own, and the caller
// must keep every refused one (its record) for a later send. A batch of
// more than MaxBatch messages, or with len(delays) != len(msgs), sends
// nothing.
func (q *Queue) SendBatch(ctx context.Context, msgs []job.Message, delays []time.Duration) []error {
	errs := make([]error, len(msgs))
	all := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if len(msgs) == 0 {
		return errs
	}
	if err := job.CheckBatch(len(msgs), len(delays)); err != nil {
		return all(err)
	}
	in := &sqs.SendMessageBatchInput{QueueUrl: &q.url}
	ids := map[string]int{}
	for i, m := range msgs {
		body, secs, err := encode(m, delays[i])
		if err != nil {
			errs[i] = err
			continue
		}
		id := strconv.Itoa(i) // unique within the batch, as SQS requires
		ids[id] = i
		in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{
			Id: aws.String(id), MessageBody: aws.String(body), DelaySeconds: secs,
		})
	}
	if len(in.Entries) == 0 {
		return errs
	}
	out, err := q.api.SendMessageBatch(ctx, in)
	if err != nil {
		for _, i := range ids {
			errs[i] = fmt.Errorf("send job %d version %d: %w", msgs[i].JobID, msgs[i].Version, err)
		}
		return errs
	}
	// An entry SQS names in neither list is not known to be sent.
	unknown := maps.Clone(ids)
	for _, s := range out.Successful {
		delete(unknown, aws.ToString(s.Id))
	}
	for _, f := range out.Failed {
		i, ok := ids[aws.ToString(f.Id)]
		if !ok {
			continue
		}
		delete(unknown, aws.ToString(f.Id))
		errs[i] = fmt.Errorf("send job %d version %d: %w", msgs[i].JobID, msgs[i].Version, &EntryError{
			Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault,
		})
	}
	for _, i := range unknown {
		errs[i] = fmt.Errorf("send job %d version %d: %w", msgs[i].JobID, msgs[i].Version, errNoAnswer)
	}
	return errs
}

// EntryError is SQS's refusal of one entry of a batch.
type EntryError struct {
	Code    string
	Message string
	// SenderFault: the entry itself is wrong; sending it again as it is fails again.
	SenderFault bool
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("sqs refused the entry: %s: %s (sender fault %t)", e.Code, e.Message, e.SenderFault)
}

var errNoAnswer = errors.New("sqs answered neither success nor failure for the entry")

// Delete removes a handled message.
func (q *Queue) Delete(ctx context.Context, receiptHandle string) error {
	_, err := q.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q.url, ReceiptHandle: &receiptHandle})
	if err != nil {
		return fmt.Errorf("delete message: %w", err)
	}
	return nil
}

// RetryAfter makes a received message visible again after d (so it comes
// back sooner than the queue's visibility timeout).
func (q *Queue) RetryAfter(ctx context.Context, receiptHandle string, d time.Duration) error {
	secs := int32(math.Ceil(d.Seconds()))
	if secs < 0 {
		secs = 0
	}
	_, err := q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &q.url, ReceiptHandle: &receiptHandle, VisibilityTimeout: secs,
	})
	if err != nil {
		return fmt.Errorf("change message visibility: %w", err)
	}
	return nil
}

// Decode parses and validates a claim message body: job.DecodeMessage,
// kept here for the callers that name it.
func Decode(body string) (job.Message, error) { return job.DecodeMessage(body) }

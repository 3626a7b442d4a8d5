// Package queue is the SQS adapter for claim messages: it sends a job's
// message with a per-message delay, deletes handled messages, and decodes
// and validates message bodies.
//
// SQS caps DelaySeconds at 900 s; this package never chains longer delays
// itself (the claimer records not_before in the message and re-sends), it
// refuses them so a caller's mistake cannot silently shorten a backoff.
// It must never decide delays or interpret job state.
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/job"
)

// MaxDelay is SQS's cap on a message's DelaySeconds (job.MaxDelay).
const MaxDelay = job.MaxDelay

// SQS is the part of the SQS API the queue uses.
type SQS interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
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

// Send sends m, visible after delay (rounded up to whole seconds so a job is
// never early). Delays past MaxDelay are refused.
func (q *Queue) Send(ctx context.Context, m job.Message, delay time.Duration) error {
	if delay < 0 {
		delay = 0
	}
	if delay > MaxDelay {
		return fmt.Errorf("send job %d: delay %s is over SQS's %s cap", m.JobID, delay, MaxDelay)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("send job %d: %w", m.JobID, err)
	}
	secs := int32(math.Ceil(delay.Seconds()))
	_, err = q.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     &q.url,
		MessageBody:  aws.String(string(body)),
		DelaySeconds: secs,
	})
	if err != nil {
		return fmt.Errorf("send job %d version %d: %w", m.JobID, m.Version, err)
	}
	return nil
}

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

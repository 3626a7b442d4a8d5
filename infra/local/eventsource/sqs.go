// Package eventsource plays the AWS services that invoke ghclaim's functions on their own:
// the SQS event source mapping that feeds the claimer, and the EventBridge schedule that runs
// the reclaimer. Both invoke through the narrow Invoker interface (an rie.Environment), so the
// production binaries see the events Lambda would deliver.
//
// The SQS mapping reproduces what the claimer's correctness rests on:
//   - batches of up to BatchSize messages, received with the queue's own visibility timeout
//     (no VisibilityTimeout on ReceiveMessage, as the mapping does);
//   - ReportBatchItemFailures: after a successful invocation every message not listed in
//     batchItemFailures is deleted; listed ones are left to reappear when their visibility
//     timeout runs out;
//   - the documented edge cases: an empty or null response, or an empty list, is complete
//     success; an invalid response, an empty/null itemIdentifier or one that is not in the batch
//     is complete failure;
//   - a failed invocation (function error, timeout, crash) deletes nothing: the whole batch
//     comes back after the visibility timeout, which is how a claimer killed mid-claim looks.
//
// One poller loop per Invoker: each Invoker is one concurrent execution environment, like the
// mapping's scaling up to its maximum concurrency.
//
// This package must never delete a message the function did not report as processed, and never
// change a message's visibility: those are the function's and the queue's business.
package eventsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Invoker runs a function synchronously (rie.Environment).
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// SQSAPI is the part of the SQS API the mapping uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Defaults of the mapping.
const (
	DefaultBatchSize = 10
	DefaultWait      = time.Second
	maxBatchSize     = 10 // without a batching window, SQS mappings take at most 10
)

// SQS is an event source mapping from one queue to one function.
type SQS struct {
	// API is an SQS client.
	API SQSAPI
	// QueueURL is polled; QueueARN goes into every record's eventSourceARN.
	QueueURL string
	QueueARN string
	// Region goes into every record's awsRegion (default us-east-1).
	Region string
	// BatchSize is the most messages per invocation (1–10, default 10). Above 10, AWS refuses
	// the mapping unless it has a batching window, which this one does not model: Run and Poll
	// refuse it too.
	BatchSize int
	// Wait is the long-poll time of each receive (default 1 s: short, so a local run stops
	// promptly; the real mapping waits 20 s, which changes latency, not semantics).
	Wait time.Duration
	// Log receives one line per batch outcome (default: discard).
	Log *slog.Logger
	// OnBatch, if set, is told about every finished batch (progress output, tests).
	OnBatch func(BatchResult)

	mu       sync.Mutex
	inFlight map[int][]events.SQSMessage // worker → batch being invoked
	stats    SQSStats
}

// BatchResult is the outcome of one invocation of the mapping.
type BatchResult struct {
	Worker   int
	Messages []events.SQSMessage
	// Deleted are the message ids the mapping deleted.
	Deleted []string
	// Failed are the message ids left for redelivery.
	Failed []string
	// Err is the invocation error, or why the response counted as complete failure.
	Err error
}

// SQSStats counts what the mapping did.
type SQSStats struct {
	Batches       int
	Received      int
	Deleted       int
	Failed        int
	InvokeErrors  int
	BadResponses  int
	DeleteErrors  int
	ReceiveErrors int
}

// Stats returns the counters so far.
func (m *SQS) Stats() SQSStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Holding returns the index of the worker whose batch in flight has a message for which match
// returns true (e.g. "carries job N"), so a test can kill exactly that execution environment.
func (m *SQS) Holding(match func(events.SQSMessage) bool) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for w, batch := range m.inFlight {
		for _, msg := range batch {
			if match(msg) {
				return w, true
			}
		}
	}
	return 0, false
}

// Run polls the queue with one loop per function until ctx ends. It returns ctx's error.
func (m *SQS) Run(ctx context.Context, functions ...Invoker) error {
	if len(functions) == 0 {
		return errors.New("eventsource: SQS.Run needs at least one function")
	}
	if err := m.validate(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for i, fn := range functions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.loop(ctx, i, fn)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

func (m *SQS) loop(ctx context.Context, worker int, fn Invoker) {
	for ctx.Err() == nil {
		if err := m.Poll(ctx, worker, fn); err != nil && ctx.Err() == nil {
			m.logger().Warn("sqs mapping: receive failed", "worker", worker, "error", err.Error())
			// Back off a little so a broken endpoint is not hammered; the mapping does too.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// Poll receives one batch and, if there is one, invokes fn with it and settles it: one turn of
// the mapping. It returns an error only when the mapping is invalid or receiving failed.
func (m *SQS) Poll(ctx context.Context, worker int, fn Invoker) error {
	if err := m.validate(); err != nil {
		return err
	}
	out, err := m.API.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(m.QueueURL),
		MaxNumberOfMessages:         int32(m.batchSize()),
		WaitTimeSeconds:             int32(m.wait() / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		m.count(func(s *SQSStats) { s.ReceiveErrors++ })
		return fmt.Errorf("receive from %s: %w", m.QueueURL, err)
	}
	if len(out.Messages) == 0 {
		return nil
	}
	ev := m.Event(out.Messages)
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode SQS event: %w", err)
	}

	m.mu.Lock()
	if m.inFlight == nil {
		m.inFlight = map[int][]events.SQSMessage{}
	}
	m.inFlight[worker] = ev.Records
	m.mu.Unlock()

	resp, invokeErr := fn.Invoke(ctx, payload)

	m.mu.Lock()
	delete(m.inFlight, worker)
	m.mu.Unlock()

	res := BatchResult{Worker: worker, Messages: ev.Records}
	var failed map[string]bool
	if invokeErr != nil {
		res.Err = invokeErr
	} else {
		failed, res.Err = Failures(resp, ev.Records)
	}
	var del []types.DeleteMessageBatchRequestEntry
	for i, r := range ev.Records {
		if res.Err != nil || failed[r.MessageId] {
			res.Failed = append(res.Failed, r.MessageId)
			continue
		}
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.ReceiptHandle)})
		res.Deleted = append(res.Deleted, r.MessageId)
	}
	deleteErrs := 0
	if len(del) > 0 {
		// Delete even while shutting down: the function did its work.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		dout, err := m.API.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.QueueURL), Entries: del})
		cancel()
		switch {
		case err != nil:
			deleteErrs = len(del)
			m.logger().Warn("sqs mapping: delete failed", "worker", worker, "error", err.Error())
		default:
			deleteErrs = len(dout.Failed)
		}
	}

	m.count(func(s *SQSStats) {
		s.Batches++
		s.Received += len(ev.Records)
		s.Deleted += len(res.Deleted) - deleteErrs
		s.Failed += len(res.Failed)
		s.DeleteErrors += deleteErrs
		if invokeErr != nil {
			s.InvokeErrors++
		} else if res.Err != nil {
			s.BadResponses++
		}
	})
	if res.Err != nil {
		m.logger().Warn("sqs mapping: batch failed, left for redelivery", "worker", worker, "messages", len(ev.Records), "error", res.Err.Error())
	} else {
		m.logger().Debug("sqs mapping: batch settled", "worker", worker, "deleted", len(res.Deleted), "failed", len(res.Failed))
	}
	if m.OnBatch != nil {
		m.OnBatch(res)
	}
	return nil
}

// Event is the SQS event the mapping delivers for msgs.
func (m *SQS) Event(msgs []types.Message) events.SQSEvent {
	region := m.Region
	if region == "" {
		region = "us-east-1"
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, msg := range msgs {
		rec := events.SQSMessage{
			MessageId:              aws.ToString(msg.MessageId),
			ReceiptHandle:          aws.ToString(msg.ReceiptHandle),
			Body:                   aws.ToString(msg.Body),
			Md5OfBody:              aws.ToString(msg.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(msg.MD5OfMessageAttributes),
			Attributes:             map[string]string{},
			MessageAttributes:      map[string]events.SQSMessageAttribute{},
			EventSource:            "aws:sqs",
			EventSourceARN:         m.QueueARN,
			AWSRegion:              region,
		}
		for k, v := range msg.Attributes {
			rec.Attributes[k] = v
		}
		for k, v := range msg.MessageAttributes {
			// Lambda writes the (unimplemented) list values as [] when empty, never null.
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				StringValue:      v.StringValue,
				BinaryValue:      v.BinaryValue,
				StringListValues: append([]string{}, v.StringListValues...),
				BinaryListValues: append([][]byte{}, v.BinaryListValues...),
				DataType:         aws.ToString(v.DataType),
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}

// ErrBadBatchResponse marks a response the mapping treats as complete failure.
var ErrBadBatchResponse = errors.New("eventsource: invalid batch item failures response")

// Failures reads a ReportBatchItemFailures response for batch: the set of message ids to leave
// for redelivery, or ErrBadBatchResponse when the whole batch counts as failed.
func Failures(resp []byte, batch []events.SQSMessage) (map[string]bool, error) {
	if len(resp) == 0 || string(resp) == "null" {
		return nil, nil
	}
	var r struct {
		BatchItemFailures []map[string]*string `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBatchResponse, err)
	}
	in := map[string]bool{}
	for _, msg := range batch {
		in[msg.MessageId] = true
	}
	failed := map[string]bool{}
	for _, item := range r.BatchItemFailures {
		id, ok := item["itemIdentifier"]
		if !ok {
			return nil, fmt.Errorf("%w: an item without itemIdentifier", ErrBadBatchResponse)
		}
		if id == nil || *id == "" {
			return nil, fmt.Errorf("%w: an empty or null itemIdentifier", ErrBadBatchResponse)
		}
		if !in[*id] {
			return nil, fmt.Errorf("%w: itemIdentifier %q is not in the batch", ErrBadBatchResponse, *id)
		}
		failed[*id] = true
	}
	return failed, nil
}

// validate refuses what CreateEventSourceMapping refuses: for SQS without a batching window,
// "when you set BatchSize to a value greater than 10, you must set MaximumBatchingWindowInSeconds
// to at least 1".
func (m *SQS) validate() error {
	if m.BatchSize < 0 || m.BatchSize > maxBatchSize {
		return fmt.Errorf("eventsource: BatchSize %d: an SQS mapping without a batching window takes 1 to %d", m.BatchSize, maxBatchSize)
	}
	return nil
}

func (m *SQS) batchSize() int {
	if m.BatchSize == 0 {
		return DefaultBatchSize
	}
	return m.BatchSize
}

func (m *SQS) wait() time.Duration {
	if m.Wait < time.Second {
		return DefaultWait // WaitTimeSeconds 0 would be a busy short poll
	}
	if m.Wait > 20*time.Second {
		return 20 * time.Second
	}
	return m.Wait
}

func (m *SQS) count(f func(*SQSStats)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(&m.stats)
}

func (m *SQS) logger() *slog.Logger {
	if m.Log != nil {
		return m.Log
	}
	return slog.New(slog.DiscardHandler)
}

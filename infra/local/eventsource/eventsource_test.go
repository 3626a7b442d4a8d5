package eventsource_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/local/eventsource"
)

func TestFailuresFollowsTheDocumentedRules(t *testing.T) {
	t.Parallel()
	batch := []events.SQSMessage{{MessageId: "m1"}, {MessageId: "m2"}, {MessageId: "m3"}}
	tests := []struct {
		name    string
		resp    string
		want    []string // failed ids
		wantBad bool     // complete failure
	}{
		{name: "no response is complete success", resp: ``},
		{name: "null response is complete success", resp: `null`},
		{name: "empty object is complete success", resp: `{}`},
		{name: "null list is complete success", resp: `{"batchItemFailures":null}`},
		{name: "empty list is complete success", resp: `{"batchItemFailures":[]}`},
		{name: "listed ids fail", resp: `{"batchItemFailures":[{"itemIdentifier":"m2"},{"itemIdentifier":"m3"}]}`, want: []string{"m2", "m3"}},
		{name: "invalid JSON fails the batch", resp: `{"batchItemFailures":`, wantBad: true},
		{name: "empty itemIdentifier fails the batch", resp: `{"batchItemFailures":[{"itemIdentifier":""}]}`, wantBad: true},
		{name: "null itemIdentifier fails the batch", resp: `{"batchItemFailures":[{"itemIdentifier":null}]}`, wantBad: true},
		{name: "a bad key name fails the batch", resp: `{"batchItemFailures":[{"itemId":"m1"}]}`, wantBad: true},
		{name: "an id not in the batch fails the batch", resp: `{"batchItemFailures":[{"itemIdentifier":"m9"}]}`, wantBad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := eventsource.Failures([]byte(tt.resp), batch)
			if tt.wantBad {
				if !errors.Is(err, eventsource.ErrBadBatchResponse) {
					t.Fatalf("got %v, %v; want ErrBadBatchResponse", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got failures %v, want %v", got, tt.want)
			}
			for _, id := range tt.want {
				if !got[id] {
					t.Errorf("got failures %v, want %s among them", got, id)
				}
			}
		})
	}
}

// function is a hand-written Invoker: it records the events and answers with answer(ev).
type function struct {
	mu     sync.Mutex
	events []events.SQSEvent
	answer func(events.SQSEvent) ([]byte, error)
}

func (f *function) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	var ev events.SQSEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.mu.Unlock()
	return f.answer(ev)
}

type fixture struct {
	sqs   *sqs.Client
	once  emulator.SQSOnce
	stack *emulator.Stack
}

func setup(t *testing.T) fixture {
	t.Helper()
	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	cfg := srv.ConfigForTest(t)
	return fixture{
		sqs:   sqs.NewFromConfig(cfg),
		once:  emulator.SQSOnce{Client: sqs.NewFromConfig(cfg)},
		stack: stack,
	}
}

// send puts n messages on the queue, each exactly once (emulator.SQSOnce): the tests count
// them, and the SDK's retry of a send whose answer was cut put one twice (make test once had 4
// of 3). The test is the queue's only writer and nothing has received yet.
func (f fixture) send(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		_, err := f.once.SendMessage(context.Background(), &sqs.SendMessageInput{
			QueueUrl:    aws.String(f.stack.QueueURL),
			MessageBody: aws.String(fmt.Sprintf(`{"job_id":%d,"version":1,"attempt":0}`, i+1)),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if visible, inFlight := f.counts(t); visible != n || inFlight != 0 {
		t.Fatalf("queue after sending %d: %d visible, %d in flight", n, visible, inFlight)
	}
}

// counts returns the queue's visible and in-flight message counts.
func (f fixture) counts(t *testing.T) (visible, inFlight int) {
	t.Helper()
	out, err := f.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(f.stack.QueueURL),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	nv, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return v, nv
}

func (f fixture) mapping(batch int) *eventsource.SQS {
	return &eventsource.SQS{API: f.sqs, QueueURL: f.stack.QueueURL, QueueARN: f.stack.QueueARN, BatchSize: batch}
}

// failJob answers with a batch item failure for the message carrying job id.
func failJob(id int) func(events.SQSEvent) ([]byte, error) {
	return func(ev events.SQSEvent) ([]byte, error) {
		var r events.SQSEventResponse
		for _, rec := range ev.Records {
			if rec.Body == fmt.Sprintf(`{"job_id":%d,"version":1,"attempt":0}`, id) {
				r.BatchItemFailures = append(r.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			}
		}
		return json.Marshal(r)
	}
}

func TestPollSettlesTheBatchLikeTheEventSourceMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		answer       func(events.SQSEvent) ([]byte, error)
		wantInFlight int // left to their visibility timeout
		wantDeleted  int
	}{
		{
			name:         "messages not reported as failures are deleted",
			answer:       failJob(2),
			wantInFlight: 1,
			wantDeleted:  2,
		},
		{
			name:         "a successful invocation without a response deletes all",
			answer:       func(events.SQSEvent) ([]byte, error) { return []byte("null"), nil },
			wantInFlight: 0,
			wantDeleted:  3,
		},
		{
			name:         "a failed invocation deletes nothing",
			answer:       func(events.SQSEvent) ([]byte, error) { return nil, errors.New("runtime exited") },
			wantInFlight: 3,
		},
		{
			name: "an invalid response deletes nothing",
			answer: func(events.SQSEvent) ([]byte, error) {
				return []byte(`{"batchItemFailures":[{"itemIdentifier":"nope"}]}`), nil
			},
			wantInFlight: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.send(t, 3)
			m := f.mapping(10)
			fn := &function{answer: tt.answer}
			got := 0
			for got < 3 { // SQS may hand out fewer than are there; the mapping polls again
				if err := m.Poll(context.Background(), 0, fn); err != nil {
					t.Fatal(err)
				}
				got = m.Stats().Received
			}
			visible, inFlight := f.counts(t)
			if visible != 0 || inFlight != tt.wantInFlight {
				t.Errorf("queue: %d visible, %d in flight; want 0 and %d", visible, inFlight, tt.wantInFlight)
			}
			if s := m.Stats(); s.Deleted != tt.wantDeleted {
				t.Errorf("deleted: got %d, want %d (%+v)", s.Deleted, tt.wantDeleted, s)
			}
		})
	}
}

func TestPollHonoursBatchSizeAndBuildsSQSRecords(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.send(t, 5)
	m := f.mapping(2)
	var holding []int
	fn := &function{}
	fn.answer = func(ev events.SQSEvent) ([]byte, error) {
		// While the function runs, the mapping knows which worker holds which message.
		w, ok := m.Holding(func(msg events.SQSMessage) bool { return msg.MessageId == ev.Records[0].MessageId })
		if ok {
			holding = append(holding, w)
		}
		return nil, nil
	}
	for m.Stats().Received < 5 {
		if err := m.Poll(context.Background(), 7, fn); err != nil {
			t.Fatal(err)
		}
	}
	for i, ev := range fn.events {
		if len(ev.Records) > 2 {
			t.Errorf("batch %d: %d records, want at most the batch size 2", i, len(ev.Records))
		}
		for _, r := range ev.Records {
			if r.EventSource != "aws:sqs" || r.EventSourceARN != f.stack.QueueARN || r.AWSRegion != "us-east-1" ||
				r.MessageId == "" || r.ReceiptHandle == "" || r.Attributes["ApproximateReceiveCount"] != "1" {
				t.Errorf("record: got %+v, want an SQS record of %s received once", r, f.stack.QueueARN)
			}
		}
	}
	if len(holding) != len(fn.events) || holding[0] != 7 {
		t.Errorf("Holding during the invocations: got %v, want worker 7 for each of %d batches", holding, len(fn.events))
	}
	if _, ok := m.Holding(func(events.SQSMessage) bool { return true }); ok {
		t.Errorf("Holding after the invocations: a worker still holds a batch")
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.send(t, 1)
	m := f.mapping(10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	fn := &function{answer: func(events.SQSEvent) ([]byte, error) {
		cancel() // the first batch ends the run
		return nil, nil
	}}
	go func() { done <- m.Run(ctx, fn, fn) }()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: got %v, want context.Canceled", err)
	}
	// The batch was settled although the run was ending: its work was done.
	if visible, inFlight := f.counts(t); visible+inFlight != 0 {
		t.Errorf("queue after Run: %d visible, %d in flight; want the message deleted", visible, inFlight)
	}
}

// noSQS fails the test on any call: the mapping must refuse before it touches the queue.
type noSQS struct{ t *testing.T }

func (n noSQS) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	n.t.Error("ReceiveMessage called")
	return &sqs.ReceiveMessageOutput{}, nil
}

func (n noSQS) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	n.t.Error("DeleteMessageBatch called")
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// TestBatchSizeAboveTenIsRefused: AWS refuses an SQS mapping with BatchSize over 10 and no
// batching window, so the local one must not quietly take 10 instead.
func TestBatchSizeAboveTenIsRefused(t *testing.T) {
	t.Parallel()
	for _, size := range []int{11, 10000, -1} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			t.Parallel()
			m := &eventsource.SQS{API: noSQS{t}, QueueURL: "q", BatchSize: size}
			fn := &function{answer: func(events.SQSEvent) ([]byte, error) { return nil, nil }}
			if err := m.Poll(context.Background(), 0, fn); err == nil {
				t.Errorf("Poll with BatchSize %d: got nil, want an error", size)
			}
			// Cancelled, so a Run that does not check returns at once with ctx's error.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := m.Run(ctx, fn); err == nil || errors.Is(err, context.Canceled) {
				t.Errorf("Run with BatchSize %d: got %v, want a configuration error", size, err)
			}
		})
	}
}

// TestSQSRecordHasLambdasShape compares a record with the one Lambda delivers for the same
// message: attributes as strings, message attributes with [] (not null) list values.
func TestSQSRecordHasLambdasShape(t *testing.T) {
	t.Parallel()
	m := &eventsource.SQS{QueueARN: "arn:aws:sqs:us-east-1:123456789012:claims"}
	ev := m.Event([]types.Message{{
		MessageId:              aws.String("m1"),
		ReceiptHandle:          aws.String("rh"),
		Body:                   aws.String("x"),
		MD5OfBody:              aws.String("9dd4e461268c8034f5c8564e155c67a6"),
		MD5OfMessageAttributes: aws.String("a18cbb58171ebf4ce88d9fb787f9210b"),
		Attributes: map[string]string{
			"ApproximateReceiveCount": "1", "SentTimestamp": "1796345540482",
			"SenderId": "AIDAIT2UOQQY3AUEKVGXU", "ApproximateFirstReceiveTimestamp": "1796345540485",
		},
		MessageAttributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("String"), StringValue: aws.String("v")}},
	}})
	got, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Records":[{"messageId":"m1","receiptHandle":"rh","body":"x","md5OfBody":"9dd4e461268c8034f5c8564e155c67a6",` +
		`"md5OfMessageAttributes":"a18cbb58171ebf4ce88d9fb787f9210b","attributes":{"ApproximateFirstReceiveTimestamp":"1796345540485",` +
		`"ApproximateReceiveCount":"1","SenderId":"AIDAIT2UOQQY3AUEKVGXU","SentTimestamp":"1796345540482"},` +
		`"messageAttributes":{"a":{"stringValue":"v","stringListValues":[],"binaryListValues":[],"dataType":"String"}},` +
		`"eventSourceARN":"arn:aws:sqs:us-east-1:123456789012:claims","eventSource":"aws:sqs","awsRegion":"us-east-1"}]}`
	if string(got) != want {
		t.Errorf("event:\n got %s\nwant %s", got, want)
	}
}

func TestScheduleEvent(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 1, 0, 500_000_000, time.UTC)
	s := &eventsource.Schedule{
		Every:   time.Minute,
		RuleARN: "arn:aws:events:us-east-1:123456789012:rule/ghclaim-Sweep",
		Now:     func() time.Time { return now },
		NewID:   func() string { return "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa" },
	}
	var got []byte
	fn := invokerFunc(func(_ context.Context, p []byte) ([]byte, error) { got = p; return nil, nil })
	if err := s.Fire(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
	want := `{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event","source":"aws.events",` +
		`"account":"123456789012","time":"2026-11-30T09:01:00Z","region":"us-east-1",` +
		`"resources":["arn:aws:events:us-east-1:123456789012:rule/ghclaim-Sweep"],"detail":{}}`
	if string(got) != want {
		t.Errorf("event:\n got %s\nwant %s", got, want)
	}
	if st := s.Stats(); st.Invocations != 1 || st.Errors != 0 {
		t.Errorf("stats: got %+v, want one invocation, no error", st)
	}
}

type invokerFunc func(context.Context, []byte) ([]byte, error)

func (f invokerFunc) Invoke(ctx context.Context, p []byte) ([]byte, error) { return f(ctx, p) }

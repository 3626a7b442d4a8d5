package queue

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

// sqsSpy records what the queue asks SQS for; it imitates none of SQS's
// behaviour (the integration tests of the callers use moto for that).
type sqsSpy struct {
	sends      []*sqs.SendMessageInput
	batches    []*sqs.SendMessageBatchInput
	visibility []*sqs.ChangeMessageVisibilityInput
	// batchAnswer answers a SendMessageBatch (all successful when nil).
	batchAnswer func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
}

func (s *sqsSpy) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.batches = append(s.batches, in)
	if s.batchAnswer != nil {
		return s.batchAnswer(in)
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + aws.ToString(e.Id))})
	}
	return out, nil
}

func (s *sqsSpy) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.sends = append(s.sends, in)
	return &sqs.SendMessageOutput{MessageId: aws.String("m-1")}, nil
}

func (s *sqsSpy) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return &sqs.DeleteMessageOutput{}, nil
}

func (s *sqsSpy) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	s.visibility = append(s.visibility, in)
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// TestSendDelay: a delay is rounded UP to whole seconds (a job is never
// due before its time), and a delay over SQS's 900 s cap is refused before
// any call (the caller chains it through not_before instead).
func TestSendDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		delay   time.Duration
		want    int32
		refused bool
	}{
		{name: "none", delay: 0, want: 0},
		{name: "negative is now", delay: -time.Second, want: 0},
		{name: "a millisecond rounds up", delay: time.Millisecond, want: 1},
		{name: "fraction rounds up", delay: 29*time.Second + 400*time.Millisecond, want: 30},
		{name: "whole seconds stay", delay: 30 * time.Second, want: 30},
		{name: "exactly the cap", delay: MaxDelay, want: 900},
		{name: "over the cap", delay: MaxDelay + time.Millisecond, refused: true},
		{name: "an hour", delay: time.Hour, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spy := &sqsSpy{}
			q := New(spy, "http://127.0.0.1/000000000000/claims")
			m := job.Message{JobID: 7, Version: 3, Attempt: 2, NotBefore: 1700000000000}
			err := q.Send(context.Background(), m, tt.delay)
			if tt.refused {
				if err == nil || len(spy.sends) != 0 {
					t.Fatalf("err %v, %d sends; want an error and no call", err, len(spy.sends))
				}
				return
			}
			if err != nil || len(spy.sends) != 1 {
				t.Fatalf("err %v, %d sends; want one send", err, len(spy.sends))
			}
			in := spy.sends[0]
			if in.DelaySeconds != tt.want || aws.ToString(in.QueueUrl) != q.URL() {
				t.Errorf("DelaySeconds %d to %s, want %d to %s", in.DelaySeconds, aws.ToString(in.QueueUrl), tt.want, q.URL())
			}
			var got job.Message
			if err := json.Unmarshal([]byte(aws.ToString(in.MessageBody)), &got); err != nil || got != m {
				t.Errorf("body %s decodes to %+v (%v), want %+v", aws.ToString(in.MessageBody), got, err, m)
			}
		})
	}
}

// TestRetryAfterRoundsUp: a message made visible again is never early either.
func TestRetryAfterRoundsUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want int32
	}{
		{0, 0}, {-time.Second, 0}, {time.Millisecond, 1}, {4500 * time.Millisecond, 5}, {10 * time.Second, 10},
	}
	for _, tt := range tests {
		spy := &sqsSpy{}
		if err := New(spy, "u").RetryAfter(context.Background(), "r-1", tt.d); err != nil {
			t.Fatal(err)
		}
		if len(spy.visibility) != 1 || spy.visibility[0].VisibilityTimeout != tt.want || aws.ToString(spy.visibility[0].ReceiptHandle) != "r-1" {
			t.Errorf("RetryAfter(%s): got %+v, want VisibilityTimeout %d for r-1", tt.d, spy.visibility, tt.want)
		}
	}
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

func batchOf(n int) ([]job.Message, []time.Duration) {
	var msgs []job.Message
	var delays []time.Duration
	for i := range n {
		msgs = append(msgs, job.Message{JobID: int64(100 + i), Version: 2})
		delays = append(delays, time.Duration(i)*time.Second+time.Millisecond)
	}
	return msgs, delays
}

// TestSendBatchEntries: one call carries every entry with its own delay
// (rounded up), and SQS's per-entry answer reaches the caller per message:
// an entry SQS refused, or did not mention, is an error for that message
// only; a failed call is an error for every message.
func TestSendBatchEntries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answer  func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
		wantErr []bool
	}{
		{name: "all sent", wantErr: []bool{false, false, false, false}},
		{name: "one refused, one not mentioned", answer: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			return &sqs.SendMessageBatchOutput{
				Successful: []sqstypes.SendMessageBatchResultEntry{{Id: in.Entries[0].Id}, {Id: in.Entries[3].Id}},
				Failed:     []sqstypes.BatchResultErrorEntry{{Id: in.Entries[1].Id, Code: aws.String("InternalError"), Message: aws.String("try again")}},
			}, nil
		}, wantErr: []bool{false, true, true, false}},
		{name: "the call failed", answer: func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			return nil, errors.New("connection reset")
		}, wantErr: []bool{true, true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spy := &sqsSpy{batchAnswer: tt.answer}
			q := New(spy, "http://127.0.0.1/000000000000/claims")
			msgs, delays := batchOf(4)
			errs := q.SendBatch(context.Background(), msgs, delays)
			if len(spy.batches) != 1 || len(spy.sends) != 0 {
				t.Fatalf("%d batch calls, %d single sends; want one batch call", len(spy.batches), len(spy.sends))
			}
			for i, e := range spy.batches[0].Entries {
				if want := int32(i + 1); e.DelaySeconds != want {
					t.Errorf("entry %d: DelaySeconds %d, want %d (rounded up)", i, e.DelaySeconds, want)
				}
				if m, err := Decode(aws.ToString(e.MessageBody)); err != nil || m != msgs[i] {
					t.Errorf("entry %d: body decodes to %+v (%v), want %+v", i, m, err, msgs[i])
				}
			}
			if len(errs) != len(msgs) {
				t.Fatalf("%d errors for %d messages", len(errs), len(msgs))
			}
			for i, want := range tt.wantErr {
				if (errs[i] != nil) != want {
					t.Errorf("message %d: err %v, want error %t", i, errs[i], want)
				}
			}
			var ee *EntryError
			if tt.name == "one refused, one not mentioned" && (!errors.As(errs[1], &ee) || ee.Code != "InternalError") {
				t.Errorf("message 1: %v, want an EntryError carrying SQS's code", errs[1])
			}
		})
	}
}

// TestSendBatchRefusals: what SQS would refuse is refused before any call
// (more than 10 entries, a delay over 900 s), an entry at a time where it
// can be.
func TestSendBatchRefusals(t *testing.T) {
	t.Parallel()
	spy := &sqsSpy{}
	q := New(spy, "u")
	msgs, delays := batchOf(MaxBatch + 1)
	for i, err := range q.SendBatch(context.Background(), msgs, delays) {
		if err == nil {
			t.Errorf("message %d of %d: sent, want refused", i, len(msgs))
		}
	}
	if len(spy.batches) != 0 {
		t.Fatalf("%d calls for an oversized batch, want none", len(spy.batches))
	}
	msgs, delays = batchOf(3)
	delays[1] = MaxDelay + time.Second
	errs := q.SendBatch(context.Background(), msgs, delays)
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Errorf("errors %v, want only message 1 (delay over the cap) refused", errs)
	}
	if len(spy.batches) != 1 || len(spy.batches[0].Entries) != 2 {
		t.Errorf("calls %v, want one call with the 2 valid entries", spy.batches)
	}
	if errs := q.SendBatch(context.Background(), msgs, delays[:2]); fmt.Sprint(errs) == fmt.Sprint(make([]error, 3)) {
		t.Errorf("mismatched delays: %v, want errors", errs)
	}
}

package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/emulator"
)

// TestSettleAsTheEventSourceMapping: the chaos harness's stand-in for the
// event source mapping is as strict as Lambda's: an answer after the
// timeout, an answer naming a message outside the batch or with an empty
// id, and a function error delete nothing; a valid answer deletes all but
// the failures it names.
func TestSettleAsTheEventSourceMapping(t *testing.T) {
	t.Parallel()
	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	client := sqs.NewFromConfig(srv.ConfigForTest(t))
	r := &run{sqs: client, world: World{QueueURL: stack.QueueURL}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()

	batch := func(t *testing.T) events.SQSEvent {
		t.Helper()
		for i := range 3 {
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &stack.QueueURL, MessageBody: aws.String(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		var ev events.SQSEvent
		for len(ev.Records) < 3 {
			out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &stack.QueueURL, MaxNumberOfMessages: 3, VisibilityTimeout: 300})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range out.Messages {
				ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle)})
			}
		}
		return ev
	}
	// inFlight is how many of the queue's messages are received and not
	// deleted; each case hides its batch, so the counts add up.
	inFlight := func(t *testing.T) int {
		t.Helper()
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &stack.QueueURL,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		return n
	}
	fail := func(ids ...string) events.SQSEventResponse {
		var resp events.SQSEventResponse
		for _, id := range ids {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		return resp
	}

	want := 0
	for _, tc := range []struct {
		name                 string
		resp                 func(ev events.SQSEvent) events.SQSEventResponse
		herr                 error
		late                 bool
		kept                 int
		replaced             bool
		wantLate, wantBadAns int64
	}{
		{name: "late", resp: func(events.SQSEvent) events.SQSEventResponse { return fail() }, late: true, kept: 3, replaced: true, wantLate: 1},
		{name: "foreign id", resp: func(ev events.SQSEvent) events.SQSEventResponse { return fail(ev.Records[0].MessageId, "not-in-batch") },
			kept: 3, wantLate: 1, wantBadAns: 1},
		{name: "empty id", resp: func(events.SQSEvent) events.SQSEventResponse { return fail("") }, kept: 3, wantLate: 1, wantBadAns: 2},
		{name: "function error", resp: func(events.SQSEvent) events.SQSEventResponse { return fail() }, herr: fmt.Errorf("boom"),
			kept: 3, wantLate: 1, wantBadAns: 2},
		{name: "one failure", resp: func(ev events.SQSEvent) events.SQSEventResponse { return fail(ev.Records[1].MessageId) },
			kept: 1, wantLate: 1, wantBadAns: 2},
	} {
		ev := batch(t)
		if replaced := r.settleBatch(ev, tc.resp(ev), tc.herr, false, tc.late); replaced != tc.replaced {
			t.Errorf("%s: environment replaced %v, want %v", tc.name, replaced, tc.replaced)
		}
		want += tc.kept
		if got := inFlight(t); got != want {
			t.Errorf("%s: %d messages in flight, want %d (%d of this batch kept)", tc.name, got, want, tc.kept)
		}
		if r.late.Load() != tc.wantLate || r.badAnswers.Load() != tc.wantBadAns {
			t.Errorf("%s: late %d, bad %d; want %d, %d", tc.name, r.late.Load(), r.badAnswers.Load(), tc.wantLate, tc.wantBadAns)
		}
	}
}

package emulator

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// TestChangeVisibilityNeedsAMessageInFlight: SQS changes the visibility of
// a message only while it is in flight; once its visibility has ended (here
// at once: received with a visibility timeout of 0) it refuses with
// InvalidParameterValue. Stock moto hid the visible message again, so a
// claimer that outlived its message's visibility passed on moto with a
// RetryAfter SQS refuses.
func TestChangeVisibilityNeedsAMessageInFlight(t *testing.T) {
	t.Parallel()
	api, q := visibleAtOnce(t, "visibility")
	ctx := context.Background()
	receive := func(visibility int32) string {
		t.Helper()
		if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")}); err != nil {
			t.Fatal(err)
		}
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, VisibilityTimeout: visibility, WaitTimeSeconds: 1})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %d messages, err %v; want 1", len(out.Messages), err)
		}
		return aws.ToString(out.Messages[0].ReceiptHandle)
	}
	change := func(handle string) error {
		_, err := api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: q.QueueUrl, ReceiptHandle: aws.String(handle), VisibilityTimeout: 30,
		})
		return err
	}

	// Visible again at once: not in flight.
	expired := receive(0)
	var apiErr smithy.APIError
	if err := change(expired); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidParameterValue" {
		t.Fatalf("change the visibility of a message no longer in flight: err %v, want SQS's InvalidParameterValue", err)
	}
	// The same message, received again and in flight: changed.
	if err := change(receive(60)); err != nil {
		t.Fatalf("change the visibility of a message in flight: %v, want nil", err)
	}
}

// TestDeleteNeedsTheLatestReceipt: SQS deletes a message only by the
// receipt handle of its most recent receive; an older one "succeeds, but
// the message will not be deleted" (DeleteMessage, and each entry of
// DeleteMessageBatch). Stock moto deleted it by any handle it ever had,
// taking a message from under the consumer that received it since.
func TestDeleteNeedsTheLatestReceipt(t *testing.T) {
	t.Parallel()
	api, q := visibleAtOnce(t, "receipts")
	ctx := context.Background()
	// Once: a second copy would still be there after the last delete.
	if _, err := (SQSOnce{Client: api}).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	receive := func() (string, bool) {
		t.Helper()
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return "", false
		}
		return aws.ToString(out.Messages[0].ReceiptHandle), true
	}
	first, ok := receive()
	if !ok {
		t.Fatal("the message was not received")
	}
	latest, ok := receive() // visible again at once: received a second time
	if !ok || latest == first {
		t.Fatalf("second receive: handle %q (ok %v), want a new handle", latest, ok)
	}
	if _, err := api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: aws.String(first)}); err != nil {
		t.Fatalf("delete by the older handle: %v, want success (that deletes nothing)", err)
	}
	out, err := api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: q.QueueUrl,
		Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: aws.String(first)}}})
	if err != nil || len(out.Successful) != 1 {
		t.Fatalf("batch delete by the older handle: %+v, %v; want the entry successful", out, err)
	}
	again, ok := receive()
	if !ok {
		t.Fatal("the message is gone after deletes by an older handle; want it still in the queue")
	}
	if _, err := api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: aws.String(again)}); err != nil {
		t.Fatalf("delete by the latest handle: %v", err)
	}
	if h, ok := receive(); ok {
		t.Fatalf("the message (handle %q) is still there after a delete by its latest handle", h)
	}
}

// visibleAtOnce creates queue name with a visibility timeout of 0 (the SDK
// leaves a receive's 0 out, so the queue's applies): a received message is
// visible again at once, no wait needed. The client keeps the SDK's
// retries: a busy emulator now and then cuts an answer ("use of closed
// network connection", see SQSOnce), and a make test under load once
// failed on the CreateQueue of a client that sent each request once.
// Receives (visible again at once), deletes and refused visibility
// changes are safe to repeat; a send that must land once goes through
// SQSOnce.
func visibleAtOnce(t *testing.T, name string) (*sqs.Client, *sqs.CreateQueueOutput) {
	t.Helper()
	api := sqs.NewFromConfig(ForTest(t).ConfigForTest(t))
	// A name of its own: the binary's server outlives a round of go test
	// -count, and a queue kept from the round before holds its messages.
	q, err := api.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName: aws.String(StackName(name)), Attributes: map[string]string{"VisibilityTimeout": "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return api, q
}

package emulator

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestSQSOnceSendsACutSendOnce: the answer to a SendMessage is lost after the emulator stored
// the message. The SDK's retry stores it a second time (the flake of tests that count
// messages); SQSOnce judges the lost answer by the queue and stores it once.
func TestSQSOnceSendsACutSendOnce(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	for _, tc := range []struct {
		name string
		once bool
		want int
	}{
		{name: "sdk retry", want: 2},
		{name: "once", once: true, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := srv.ConfigForTest(t)
			lossy := &LoseFirstAnswer{Next: http.DefaultTransport.(*http.Transport).Clone(), Action: "SendMessage"}
			cfg.HTTPClient = &http.Client{Transport: lossy}
			c := sqs.NewFromConfig(cfg)
			q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(StackName(t.Name()))})
			if err != nil {
				t.Fatal(err)
			}
			in := &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")}
			if tc.once {
				_, err = SQSOnce{c}.SendMessage(ctx, in)
			} else {
				_, err = c.SendMessage(ctx, in)
			}
			if err != nil {
				t.Fatalf("send with its answer lost: %v", err)
			}
			if lossy.Lost() != 1 {
				t.Fatalf("the SendMessage answer was lost %d times, want 1 (the test did not exercise the retry)", lossy.Lost())
			}
			if n, err := (SQSOnce{c}).count(ctx, q.QueueUrl); err != nil || n != tc.want {
				t.Errorf("messages on the queue: got %d (%v), want %d", n, err, tc.want)
			}
		})
	}
}

// TestRetriesExplainCopies: the SDK's retry of a SendMessage whose answer
// was lost put the message twice; Retries saw the retry, so the copy is
// dropped once, and a copy no retry explains stays.
func TestRetriesExplainCopies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := ForTest(t).ConfigForTest(t)
	retries := &Retries{Next: &http.Client{Transport: &LoseFirstAnswer{Next: http.DefaultTransport.(*http.Transport).Clone(), Action: "SendMessage"}}}
	cfg.HTTPClient = retries
	c := sqs.NewFromConfig(cfg)
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(StackName(t.Name()))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for range 3 {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 600})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
		}
	}
	if len(bodies) != 2 {
		t.Fatalf("received %q, want the message and the SDK's copy", bodies)
	}
	if got, copies := WithoutRetried(retries, bodies, itself, "SendMessage"); len(got) != 1 || copies != 1 {
		t.Errorf("first look: got %q (%d copies dropped), want the one message", got, copies)
	}
	if got, copies := WithoutRetried(retries, bodies, itself, "SendMessage"); len(got) != 2 || copies != 0 {
		t.Errorf("the retry spent: got %q (%d copies dropped), want both copies", got, copies)
	}
}

func itself(s string) string { return s }

package claim_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/store"
)

// receiveAny takes whatever the queue at url holds visible (up to 10).
func (h *harness) receiveAny(t *testing.T, url string) []events.SQSMessage {
	t.Helper()
	res, err := h.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.SQSMessage
	for _, m := range res.Messages {
		out = append(out, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			EventSource: "aws:sqs",
		})
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestEarlyMessageStaysOutOfTheDLQ: a claimer sent a job's next message
// (version 3) and its Release of the lease (claiming at version 2) lands
// late or never. The message, ahead of its record, must not come back
// every few seconds into the dead-letter queue (the template's
// maxReceiveCount is 5) and fire a false alarm. The world runs on the
// template's real claims queue and redrive policy on moto: every look at
// the message is a real receive, which moves it to the DLQ past
// maxReceiveCount; simulated time jumps to the visibility the claimer
// asked for, and a reclaimer pass runs once a minute of it has passed,
// after the claimer's look (the worst order for the message).
func TestEarlyMessageStaysOutOfTheDLQ(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name  string
		lease time.Duration
		// release: the sender's Release lands while the message waits.
		release bool
		// looks: how often the early message is received.
		looks int
	}{
		{name: "sender died, the reclaimer takes the lease back", lease: 3 * time.Minute, looks: 2},
		{name: "release lands late", lease: 3 * time.Minute, release: true, looks: 2},
		{name: "lease longer than SQS's 12 h visibility", lease: 20 * time.Hour, looks: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			ctx := context.Background()
			id := int64(9801 + i)
			h.record(t, id)
			t0 := h.clock.Now()
			lease, _, err := h.store.Acquire(ctx, id, 1, "sender", t0.Add(tc.lease), t0)
			if err != nil {
				t.Fatal(err)
			}
			// The sender's retry message, sent before its Release.
			if err := h.queue.Send(ctx, job.Message{JobID: id, Version: 3, Attempt: 1}, 0); err != nil {
				t.Fatal(err)
			}
			c := h.claimer(t, claimerOpt{})
			rc := reclaim.New(h.store, h.queue, reclaim.Config{Now: h.clock.Now, Rand: rand.New(rand.NewPCG(1, 2)), Logger: h.log})
			lastPass := t0

			looks := map[string]int{} // receives of each message id
			var early string
			for round := 0; ; round++ {
				if round > 20 {
					t.Fatalf("still going after %d rounds (%s): record %+v", round, h.clock.Now().Sub(t0), h.get(t, id))
				}
				now := h.clock.Now()
				msgs := h.receiveAny(t, h.queueURL)
				// With no message hidden, the next event is a reclaimer pass:
				// the next one, or the first after the lease's expiry (those
				// in between find nothing stale).
				next := now.Add(time.Minute)
				if r := h.get(t, id); r.State == job.Claiming {
					next = later(next, job.FromMillis(r.LeaseExpiresAt).Add(time.Second))
				}
				if len(msgs) > 0 {
					for _, m := range msgs {
						looks[m.MessageId]++
						if round == 0 {
							early = m.MessageId
						}
					}
					resp := h.invoke(t, c, msgs...)
					for _, f := range resp.BatchItemFailures {
						vis, ok := h.rec.Visibility(receiptOf(msgs, f.ItemIdentifier))
						if !ok {
							t.Fatalf("message %s came back with no visibility set", f.ItemIdentifier)
						}
						if vis > 12*time.Hour {
							t.Fatalf("visibility %s: SQS refuses more than 12 h", vis)
						}
						if r := h.get(t, id); r.State == job.Claiming {
							if left := job.FromMillis(r.LeaseExpiresAt).Sub(now); vis < min(left, 11*time.Hour) {
								t.Errorf("early message hidden for %s, the lease has %s left: it comes back before the Release can have landed", vis, left)
							}
						}
						next = now.Add(vis)
					}
				}
				if now.Sub(lastPass) >= time.Minute {
					if _, err := rc.Run(ctx); err != nil {
						t.Fatalf("reclaimer pass: %v", err)
					}
					lastPass = now
				}
				if tc.release && round == 0 {
					if err := h.store.Release(ctx, lease, store.Retry{Version: 3, Attempt: 1, FirstFailureAt: t0, Due: t0.Add(30 * time.Second)}, h.clock.Now()); err != nil {
						t.Fatalf("late Release: %v", err)
					}
				}
				if r := h.get(t, id); r.State == job.Claimed && len(msgs) == 0 {
					break
				}
				h.clock.Set(next)
			}

			dlq := h.receiveAny(t, h.dlqURL)
			if len(dlq) != 0 {
				t.Fatalf("dead-letter queue holds %d messages (first %s), want none: a false alarm", len(dlq), dlq[0].Body)
			}
			out, err := h.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(h.dlqURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]; n != "0" {
				t.Fatalf("dead-letter queue holds %s messages, want 0", n)
			}
			if looks[early] != tc.looks {
				t.Fatalf("the early message was received %d times, want %d (maxReceiveCount is 5)", looks[early], tc.looks)
			}
			dropped := 0
			for _, d := range h.logs.decisions(t) {
				if d["decision"] == claim.DecisionEarlyDropped {
					dropped++
				}
			}
			if want := map[bool]int{false: 1, true: 0}[tc.release]; dropped != want {
				t.Fatalf("%d early messages dropped after the lease expired, want %d", dropped, want)
			}
			if r := h.get(t, id); r.State != job.Claimed {
				t.Fatalf("record %s, want claimed", r.State)
			}
			if n := h.gh.Stats().JITCalls; n != 1 {
				t.Fatalf("%d JIT calls, want 1", n)
			}
			h.receiveNone(t)
		})
	}
}

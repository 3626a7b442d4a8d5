package queue_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/contract"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/queue"
)

// recording passes every call to the emulator's real queue and records
// what SQS accepted, with the delay it was sent with (moto honours delays
// in wall-clock time, so a 900 s message cannot be received in a test).
type recording struct {
	*sqs.Client
	mu   sync.Mutex
	sent []contract.Sent
}

func (r *recording) add(body string, secs int32) {
	var m job.Message
	_ = json.Unmarshal([]byte(body), &m)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, contract.Sent{Msg: m, Delay: time.Duration(secs) * time.Second})
}

func (r *recording) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opt ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	out, err := r.Client.SendMessage(ctx, in, opt...)
	if err == nil {
		r.add(aws.ToString(in.MessageBody), in.DelaySeconds)
	}
	return out, err
}

func (r *recording) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := r.Client.SendMessageBatch(ctx, in, opt...)
	if err != nil {
		return out, err
	}
	ok := map[string]bool{}
	for _, s := range out.Successful {
		ok[aws.ToString(s.Id)] = true
	}
	for _, e := range in.Entries {
		if ok[aws.ToString(e.Id)] {
			r.add(aws.ToString(e.MessageBody), e.DelaySeconds)
		}
	}
	return out, nil
}

func (r *recording) Sent() []contract.Sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]contract.Sent(nil), r.sent...)
}

// TestContract: the SQS adapter keeps the claims-queue contract on the
// emulator's real queue, as infra/mem's queue does in memory.
func TestContract(t *testing.T) {
	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	api := sqs.NewFromConfig(srv.ConfigForTest(t))
	contract.TestQueue(t, func(t *testing.T) contract.QueueWorld {
		rec := &recording{Client: api}
		return contract.QueueWorld{
			Queue: queue.New(rec, stack.QueueURL),
			Sent:  rec.Sent,
			Receipt: func(t *testing.T) string {
				ctx := context.Background()
				if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &stack.QueueURL, MessageBody: aws.String(`{"job_id":1,"version":1}`)}); err != nil {
					t.Fatal(err)
				}
				for range 20 {
					out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &stack.QueueURL, MaxNumberOfMessages: 1, WaitTimeSeconds: 1})
					if err != nil {
						t.Fatal(err)
					}
					if len(out.Messages) == 1 {
						return aws.ToString(out.Messages[0].ReceiptHandle)
					}
				}
				t.Fatal("no message to receive")
				return ""
			},
		}
	})
}

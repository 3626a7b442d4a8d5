package cli_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/cli"
	"github.com/ghclaim/ghclaim/shared/job"
)

// lostAnswer is the emulator's DynamoDB whose UpdateItem takes effect but
// whose answer is lost past the SDK's retries (a reset connection).
type lostAnswer struct{ *dynamodb.Client }

func (l lostAnswer) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := l.Client.UpdateItem(ctx, in, optFns...); err != nil {
		return nil, err
	}
	return nil, errors.New("read tcp 10.0.0.1:4431->52.94.0.1:443: read: connection reset by peer")
}

// TestRetryWhoseAnswerIsLost: retry's write reaches DynamoDB but its
// answer is lost. The record is queued at the new version, so its claim
// message must be sent: before, retry exited 1 with the raw error, the job
// waited the reclaimer's queued grace, and a second retry was refused (an
// audit). The store reads the record back and knows its own write.
func TestRetryWhoseAnswerIsLost(t *testing.T) {
	id := ids(t)
	t.Parallel()
	ctx := context.Background()
	failed := seedFailed(t, id(7811), "retrylost-x64", now.Add(-time.Hour))
	q := newQueue(t, "retry-lost")
	r := runWith(t, ctx, lostAnswer{dynamodb.NewFromConfig(env.cfg)}, nil, "retry", fmt.Sprint(id(7811)), "--stack", env.stack.Name, "--queue-url", q)
	rec, err := newStore().Get(ctx, id(7811))
	must(t, err)
	if r.code != cli.ExitOK || rec.State != job.Queued || rec.Version != failed.Version+1 {
		t.Fatalf("retry: exit %d, stderr %q; record %s v%d: want exit 0 and queued v%d", r.code, strings.TrimSpace(r.stderr), rec.State, rec.Version, failed.Version+1)
	}
	out, err := sqs.NewFromConfig(env.cfg).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	must(t, err)
	if len(out.Messages) != 1 {
		t.Fatalf("%d claim messages, want 1", len(out.Messages))
	}
	if got, err := job.DecodeMessage(aws.ToString(out.Messages[0].Body)); err != nil || got.JobID != id(7811) || got.Version != rec.Version {
		t.Fatalf("claim message %+v (%v), want job 7811 at v%d", got, err, rec.Version)
	}
}

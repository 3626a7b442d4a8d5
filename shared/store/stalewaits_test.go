package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestClaimClearsStaleWaits: a version from before waits (mid-rollout)
// took a held record back without removing them; the fresh claim looked
// held, and the next queued delivery (a redelivery, a new GUID) woke it:
// the reclaimer's look found the booting runner offline and started a
// new attempt. A claim now removes the waits, whoever wrote before it.
// Job 5301: shard 5, which no other test reads.
func TestClaimClearsStaleWaits(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	id := f.id(5301)
	if _, err := f.s.CreateJob(ctx, rec(id), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &f.table,
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: job.Key(id)}},
		UpdateExpression:          aws.String("SET waits = :w"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": &types.AttributeValueMemberN{Value: "2"}},
	}); err != nil {
		t.Fatal(err)
	}
	l, _, err := f.s.Acquire(ctx, id, 1, "claimer-a", t0.Add(time.Minute), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: "linux-5301"}, t0); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, id); got.State != job.Claimed || got.Waits != 0 {
		t.Fatalf("claimed over stale waits: %s with %d waits, want claimed with none", got.State, got.Waits)
	}
	if _, ok := f.raw(t, job.Key(id))["waits"]; ok {
		t.Fatal("the claimed item still carries waits")
	}
}

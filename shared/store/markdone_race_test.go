package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/store"
)

// betweenDB runs between once, right after MarkDone's first UpdateItem is
// refused (its values carry ":done"): a write landing between its two
// requests.
type betweenDB struct {
	*dynamodb.Client
	between func()
}

func (h *betweenDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := h.Client.UpdateItem(ctx, in, o...)
	var ccf *types.ConditionalCheckFailedException
	if _, ok := in.ExpressionAttributeValues[":done"]; ok && errors.As(err, &ccf) && h.between != nil {
		f := h.between
		h.between = nil
		f()
	}
	return out, err
}

// TestMarkDoneKeepsAnEntryWrittenBetweenItsRequests: a record's history is
// full, so MarkDone's blind append is refused and it writes the whole list
// from the refusal's record. The claimer's Finish(claimed) lands between
// the two requests and keeps the list as long. MarkDone's second request
// was guarded by the list's length alone (its own condition takes any live
// state) and overwrote the claimed entry: a redelivered report then said
// the job was claiming when done, and the webhook decided otherwise than
// the first time (a review found it). Pinned to the refusal's version, it
// is refused and tried again with the list Finish left.
func TestMarkDoneKeepsAnEntryWrittenBetweenItsRequests(t *testing.T) {
	id := ids(t)(9_200_001)
	t.Parallel()
	ctx := context.Background()
	plain := store.New(env.db, env.table, store.Options{})
	now := t0
	tick := func() time.Time { now = now.Add(time.Second); return now }
	if _, err := plain.CreateJob(ctx, rec(id), now); err != nil {
		t.Fatal(err)
	}
	v := int64(1)
	for i := range 5 { // 1 + 10 entries: the list is full
		l, _, err := plain.Acquire(ctx, id, v, fmt.Sprint("o", i), tick().Add(time.Minute), now)
		if err != nil {
			t.Fatal(err)
		}
		if err := plain.Release(ctx, l, job.Retry{Version: l.Version + 1, Attempt: i + 1, FirstFailureAt: t0, Due: now}, tick()); err != nil {
			t.Fatal(err)
		}
		v = l.Version + 1
	}
	l, _, err := plain.Acquire(ctx, id, v, "final", tick().Add(time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	db := &betweenDB{Client: env.db, between: func() {
		if err := plain.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 6, RunnerName: "linux-x"}, now.Add(500*time.Millisecond)); err != nil {
			t.Errorf("finish: %v", err)
		}
	}}
	prev, err := store.New(db, env.table, store.Options{}).MarkDone(ctx, job.Report{JobID: id, RunnerName: "linux-x"}, tick())
	if err != nil || prev != job.Claimed {
		t.Fatalf("MarkDone = %q, %v; want the claimed state Finish left", prev, err)
	}
	again, err := plain.MarkDone(ctx, job.Report{JobID: id, RunnerName: "linux-x"}, tick())
	got, _ := plain.Get(ctx, id)
	n := len(got.History)
	if again != job.Claimed || n != job.MaxHistory || got.History[n-2].To != job.Claimed || got.History[n-1].To != job.Done {
		t.Errorf("redelivered report: %q (%v), history ends %+v; want claimed, then done", again, err, got.History[max(n-2, 0):])
	}
}

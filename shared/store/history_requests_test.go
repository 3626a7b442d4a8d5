package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/store"
)

// countedUpdates counts UpdateItem requests.
type countedUpdates struct {
	*dynamodb.Client
	n atomic.Int32
}

func (c *countedUpdates) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n.Add(1)
	return c.Client.UpdateItem(ctx, in, opt...)
}

// TestHistoryCostsNoExtraRequest: the history entry rides on the write
// that moves the record. A writer that knows the list (the claimer's
// release, from its lease) keeps a full one capped in that one request;
// only a blind writer (the lease) of a full list sends a second. Job 66:
// shard 2, which no other test reads.
func TestHistoryCostsNoExtraRequest(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	db := &countedUpdates{Client: env.db}
	s := store.New(db, env.table, store.Options{})
	if _, err := s.CreateJob(ctx, rec(f.id(66)), t0); err != nil {
		t.Fatal(err)
	}
	requests := func(what string, want int32, do func() error) {
		t.Helper()
		db.n.Store(0)
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := db.n.Load(); got != want {
			t.Errorf("%s: %d UpdateItem requests, want %d", what, got, want)
		}
		if n := len(f.get(t, f.id(66)).History); n > job.MaxHistory {
			t.Fatalf("%s: history of %d entries, want at most %d", what, n, job.MaxHistory)
		}
	}
	v := int64(1)
	for i := 1; i <= job.MaxHistory; i++ {
		now := t0.Add(time.Duration(i) * time.Minute)
		var l job.Lease
		full := len(f.get(t, f.id(66)).History) >= job.MaxHistory
		wantLease := int32(1)
		if full {
			wantLease = 2 // blind on a full list: refused by the guard, sent again
		}
		requests("lease", wantLease, func() (err error) {
			l, _, err = s.Acquire(ctx, f.id(66), v, "me", now.Add(time.Minute), now)
			return err
		})
		requests("release", 1, func() error {
			return s.Release(ctx, l, job.Retry{Version: l.Version + 1, Attempt: i, Due: now, ErrorClass: "server_side", Error: "502"}, now)
		})
		v = l.Version + 1
	}
	if n := len(f.get(t, f.id(66)).History); n != job.MaxHistory {
		t.Fatalf("history of %d entries after %d retries, want the cap %d", n, job.MaxHistory, job.MaxHistory)
	}
}

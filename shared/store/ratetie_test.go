package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/store"
)

// TestSaveRateTieWithALaterPass: the condition lets a tie through
// (another window observed the same millisecond), and infra/mem writes
// it. When the stored passed_at is later than the writer's, the adapter
// decides again without it, by ratelimit.Admits, ties included, as the
// condition does; it once decided by Supersedes, which refuses ties, and
// DynamoDB kept the old window while the stand-in held the new one.
func TestSaveRateTieWithALaterPass(t *testing.T) {
	inst := ids(t)(990_077)
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	old := ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: at.Add(-time.Second), ObservedAt: at, PassedAt: at.Add(time.Second)}
	next := ratelimit.Reading{Limit: 5000, Remaining: 4999, ResetAt: at.Add(time.Hour), ObservedAt: at}
	ddb := store.New(env.db, env.table, store.Options{})
	m := mem.NewStore(job.Timing{})
	for _, s := range []ratelimit.Store{ddb, m} {
		if err := s.SaveRate(ctx, inst, old); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveRate(ctx, inst, next); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ddb.LoadRate(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.LoadRate(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	if got.Remaining != want.Remaining || !got.ResetAt.Equal(want.ResetAt) {
		t.Errorf("DynamoDB holds remaining %d reset %s; infra/mem holds remaining %d reset %s",
			got.Remaining, got.ResetAt.Format(time.TimeOnly), want.Remaining, want.ResetAt.Format(time.TimeOnly))
	}
}

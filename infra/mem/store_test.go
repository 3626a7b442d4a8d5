package mem_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/contract"
	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
)

func TestStoreContract(t *testing.T) {
	contract.TestStore(t, 1000, func(*testing.T) contract.Store { return mem.NewStore(job.Timing{}) })
}

func TestRedeliveryStoreContract(t *testing.T) {
	contract.TestRedeliveryStore(t, "mem", func(*testing.T) contract.RedeliveryStore { return mem.NewStore(job.Timing{}) })
}

// TestClaimClearsStaleWaits: as shared/store's test of the same name, a
// claim removes waits an older writer left.
func TestClaimClearsStaleWaits(t *testing.T) {
	s := mem.NewStore(job.Timing{})
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	r, err := s.CreateJob(ctx, job.Record{JobID: 5301, Repo: "octo/app", InstallationID: 42, Labels: []string{"self-hosted"}, Pool: "linux"}, now)
	if err != nil {
		t.Fatal(err)
	}
	r.Waits = 2
	s.Put(r)
	l, _, err := s.Acquire(ctx, 5301, r.Version, "claimer-a", now.Add(time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1}, now); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, 5301); got.State != job.Claimed || got.Waits != 0 {
		t.Fatalf("claimed over stale waits: %s with %d waits, want claimed with none", got.State, got.Waits)
	}
}

package mem_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestStoreRefusesAnItemOverDynamoDBs400KB: DynamoDB refuses a write whose
// item passes 400 KB (ValidationException), and so does the stand-in,
// leaving the record as it was.
func TestStoreRefusesAnItemOverDynamoDBs400KB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	s := mem.NewStore(job.Timing{})
	rep := job.Report{JobID: 77, RunID: 9, Repo: "octo/app", InstallationID: 42, Labels: []string{"self-hosted"}, Pool: "linux"}
	big := rep
	big.RunnerName = strings.Repeat("r", 410*1024)
	if _, err := s.MarkDone(ctx, big, now); err == nil || !strings.Contains(err.Error(), "Item size has exceeded") {
		t.Fatalf("a record of over 400 KB: err %v, want DynamoDB's ValidationException", err)
	}
	if _, ok := s.Records()[77]; ok {
		t.Fatal("the refused write left a record")
	}
	if _, err := s.MarkDone(ctx, rep, now); err != nil {
		t.Fatalf("an ordinary record: %v", err)
	}
}

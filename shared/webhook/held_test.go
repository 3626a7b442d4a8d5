package webhook

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestQueuedWakesHeldJob: GitHub sends queued, waiting, then queued
// again once an environment's reviewers approve the job. The first queued
// claimed it; the reclaimer found it held (waits > 0) and looks at it
// again only after its back-off, up to an hour away, while the runner's
// machine may have powered off in the wait. The approval's queued (a new
// GUID for a job already recorded) brings that look to now: one
// conditional write on the duplicate's path, nothing sent. A claimed job
// not held, or one whose look is due already, costs the duplicate's one
// request, as before.
func TestQueuedWakesHeldJob(t *testing.T) {
	t.Parallel()
	const id = int64(29679449)
	later := job.Millis(testNow.Add(40 * time.Minute))
	claimed := func(waits int, sweepAt int64) job.Record {
		return job.Record{JobID: id, State: job.Claimed, Version: 3, Attempt: 1, Pool: "linux-x64", Repo: "octo-org/octo-repo",
			InstallationID: 42, RunnerName: job.RunnerName("linux-x64", id), Waits: waits,
			SweepShard: job.Shard(id, job.DefaultShards), SweepAt: sweepAt}
	}
	tests := []struct {
		name     string
		rec      job.Record
		fail     error // of the Recheck
		requests int
		sweepAt  int64
		outcome  string
	}{
		{name: "held: its next look now", rec: claimed(2, later), requests: 2, sweepAt: job.Millis(testNow), outcome: OutcomeHeldWoken},
		{name: "not held: a duplicate", rec: claimed(0, later), requests: 1, sweepAt: later, outcome: "duplicate_job"},
		{name: "held, its look due already", rec: claimed(1, job.Millis(testNow)-1), requests: 1, sweepAt: job.Millis(testNow) - 1, outcome: "duplicate_job"},
		{name: "held, the write fails: the look stays", rec: claimed(1, later), fail: errors.New("ProvisionedThroughputExceededException"),
			requests: 2, sweepAt: later, outcome: "duplicate_job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			f.st.Put(tt.rec)
			if tt.fail != nil {
				f.st.fail["Recheck"] = tt.fail
			}
			resp, r := f.do(t, signedRequest("workflow_job", guid, compact(t, payload(t, "queued"))))
			if resp.StatusCode != 200 || r.Status != StatusDuplicate {
				t.Fatalf("got %d %+v, want 200 duplicate", resp.StatusCode, r)
			}
			got := f.st.Records()[id]
			if got.State != job.Claimed || got.Version != tt.rec.Version || got.SweepAt != tt.sweepAt || got.Waits != tt.rec.Waits {
				t.Errorf("record after: %s v%d sweep_at %d waits %d; want claimed v%d, sweep_at %d, waits %d kept",
					got.State, got.Version, got.SweepAt, got.Waits, tt.rec.Version, tt.sweepAt, tt.rec.Waits)
			}
			if n := f.requests(); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			if len(f.q.Sent()) != 0 {
				t.Errorf("sent %+v, want nothing: one message per job", f.q.Sent())
			}
			if !strings.Contains(f.logs.String(), `"outcome":"`+tt.outcome+`"`) {
				t.Errorf("logs do not carry outcome %q:\n%s", tt.outcome, f.logs)
			}
		})
	}
}

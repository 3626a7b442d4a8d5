package webhook

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
)

// TestReportOfARefusedJobOnOurRunner: a job claimed while its pool served
// it (a public repository while the pool allowed them; labels the pool had
// then) is refused by the pools now, yet a runner of ours has it. Its
// in_progress and completed are applied (one upsert, as for any job we
// serve): skipped, the record stayed claimed or queued until the maximum
// age abandoned a job that ran. Only a recorded job: with no record, the
// runner is not ours. The same report naming another job's runner of ours
// sends that job back, and is warned about (refused_job_ran). GitHub-
// hosted runners, other tools' runners, a pool no longer configured, and
// an owner ALLOWED_OWNERS does not name still cost nothing.
func TestReportOfARefusedJobOnOurRunner(t *testing.T) {
	t.Parallel()
	const b, a = int64(29679449), int64(29679400)
	public := func(m map[string]any) map[string]any { return set(m, "repository.visibility", "public") }
	relabelled := func(m map[string]any) map[string]any {
		return set(m, "workflow_job.labels", []any{"self-hosted", "linux", "x64", "large"})
	}
	claimedA := job.Record{JobID: a, State: job.Claimed, Version: 3, Attempt: 1, Pool: "linux-x64", Repo: "octo-org/octo-repo",
		InstallationID: 42, RunnerName: job.RunnerName("linux-x64", a), Labels: []string{"self-hosted", "linux", "x64"},
		SweepShard: job.Shard(a, job.DefaultShards), SweepAt: job.Millis(testNow.Add(time.Minute))}
	tests := []struct {
		name     string
		action   string
		edit     func(map[string]any) map[string]any
		runner   string
		bState   job.State // B's record before
		owners   []string  // ALLOWED_OWNERS
		requests int
		state    job.State // B's record after
		outcome  string
		aSent    bool   // A sent back for a new attempt
		aRepo    string // A's repository, when not B's
		warned   bool   // a runner of ours (A's) took a job the pools refuse
	}{
		{name: "public now refused, in_progress on its own runner: done", action: "in_progress", edit: public,
			runner: "linux-x64-29679449", bState: job.Claimed, requests: 1, state: job.Done, outcome: "done"},
		{name: "public now refused, completed on its own replacement's runner: done", action: "completed", edit: public,
			runner: "linux-x64-29679449-r1", bState: job.Queued, requests: 1, state: job.Done, outcome: "done"},
		{name: "relabelled pool, in_progress on its own runner: done", action: "in_progress", edit: relabelled,
			runner: "linux-x64-29679449", bState: job.Claimed, requests: 1, state: job.Done, outcome: "done"},
		{name: "public now refused, in_progress on another job's runner of ours: done, that job sent back", action: "in_progress", edit: public,
			runner: "linux-x64-29679400", bState: job.Claimed, requests: 4, state: job.Done, outcome: OutcomeRunnerTaken, aSent: true, warned: true},
		// No record: no runner of ours was made for it (a claim records the
		// job first). A runner named like ours is somebody else's (another
		// stack with the same pool names): nothing written, no alarm.
		{name: "never recorded, on a runner named after it: not ours, nothing written", action: "in_progress", edit: public,
			runner: "mac-repo-29679449", requests: 1, outcome: OutcomeRefusedUnrecorded},
		{name: "never recorded, on A's runner, A waiting for it: A sent back, nothing written for it, warned", action: "in_progress", edit: public,
			runner: "linux-x64-29679400", requests: 4, outcome: OutcomeRunnerTaken, aSent: true, warned: true},
		{name: "on a runner named after A, A's registered in another repository: not ours, no alarm", action: "in_progress", edit: public,
			runner: "linux-x64-29679400", bState: job.Claimed, aRepo: "octo-org/elsewhere", requests: 2, state: job.Done,
			outcome: OutcomeRunnerTakenStale},
		{name: "GitHub-hosted runner: nothing touched", action: "in_progress", edit: public,
			runner: "GitHub Actions 3", bState: job.Claimed, state: job.Claimed, outcome: "skip"},
		{name: "another tool's runner named like ours but not a pool of ours: nothing touched", action: "completed", edit: public,
			runner: "linux-29679449", bState: job.Claimed, state: job.Claimed, outcome: "skip"},
		{name: "owner not allowed, on our runner: nothing touched", action: "completed",
			edit: func(m map[string]any) map[string]any { return m }, owners: []string{"other-org"},
			runner: "linux-x64-29679449", bState: job.Claimed, state: job.Claimed, outcome: "skip"},
		{name: "queued of a refused job is still skipped, whatever runner it names", action: "queued", edit: public,
			runner: "linux-x64-29679449", state: "", outcome: "skip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *Config) {
				c.AllowedOwners = tt.owners
				c.Metrics = obs.NewMetricsIn("ns", io.Discard, map[string]string{"function": "webhook"}, func() time.Time { return testNow })
			})
			if tt.bState != "" {
				f.st.Put(job.Record{JobID: b, State: tt.bState, Version: 2, Pool: "linux-x64", Repo: "octo-org/octo-repo", Public: true})
			}
			ra := claimedA
			if tt.aRepo != "" {
				ra.Repo = tt.aRepo
			}
			f.st.Put(ra)
			m := tt.edit(payload(t, tt.action))
			if tt.runner != "" {
				set(m, "workflow_job.runner_name", tt.runner)
			}
			f.do(t, signedRequest("workflow_job", guid, compact(t, m)))
			if got := f.requests(); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
			if got := f.st.Records()[b]; got.State != tt.state {
				t.Errorf("B %s, want %s", got.State, tt.state)
			}
			logs := f.logs.String()
			if !strings.Contains(logs, `"outcome":"`+tt.outcome+`"`) {
				t.Errorf("logs do not carry outcome %q:\n%s", tt.outcome, logs)
			}
			if warned := strings.Contains(logs, `"a runner of ours took a job the pools refuse"`); warned != tt.warned {
				t.Errorf("warned %v, want %v:\n%s", warned, tt.warned, logs)
			}
			ran := 0.0
			for _, p := range emftest.Select(emftest.Parse(t, []byte(logs)), "refused_job_ran", nil) {
				ran += p.Sum()
			}
			if want := map[bool]float64{true: 1}[tt.warned]; ran != want {
				t.Errorf("refused_job_ran %v, want %v (RefusedJobRanAlarm)", ran, want)
			}
			if (tt.state == job.Done || tt.outcome == OutcomeRefusedUnrecorded) && !strings.Contains(logs, `"refused_now":"`) {
				t.Errorf("the applied report does not say why the pools refuse the job now:\n%s", logs)
			}
			sent := f.q.Sent()
			if got := f.st.Records()[a]; tt.aSent != (got.State == job.Queued) || tt.aSent != (len(sent) == 1 && sent[0].Msg.JobID == a) {
				t.Errorf("A %s, sent %+v; want sent back: %v", got.State, sent, tt.aSent)
			}
		})
	}
}

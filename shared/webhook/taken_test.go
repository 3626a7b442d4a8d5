package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestRunnerTakenSendsTheJobBack: an in_progress for job B naming the
// runner we made for job A (A ≠ B, A claimed and waiting for exactly that
// runner) sends A back for a new attempt at once: queued at the next
// version, a runner name of its own (replacements+1), counted toward
// neither the cap (replacements_base+1: the runner did our work) nor max
// age, its claim message sent, B done as always. A redelivery or a runner
// of an older attempt do not; A failing past max age is left to the
// reclaimer (which abandons it, alarmed). Before, A waited for the
// reclaimer's grace and then for the taken runner to finish.
func TestRunnerTakenSendsTheJobBack(t *testing.T) {
	t.Parallel()
	const b, a = int64(29679449), int64(29679400)
	claimedA := func(replacements int, firstFailure time.Time) job.Record {
		r := job.Record{JobID: a, State: job.Claimed, Version: 3, Attempt: 1, Pool: "linux-x64", Repo: "octo-org/octo-repo",
			InstallationID: 42, RunnerName: job.RunnerNameAt("linux-x64", a, replacements), Replacements: replacements,
			SweepShard: job.Shard(a, job.DefaultShards), SweepAt: job.Millis(testNow.Add(time.Minute))}
		if !firstFailure.IsZero() {
			r.FirstFailureAt = job.Millis(firstFailure)
		}
		return r
	}
	// registeredIn is A claimed (first attempt) in repo, its runner
	// registered at scope ("": none recorded).
	registeredIn := func(repo, scope string) job.Record {
		r := claimedA(0, time.Time{})
		r.Repo, r.Scope = repo, scope
		return r
	}
	withLabels := func(r job.Record, labels ...string) job.Record {
		r.Labels = labels
		return r
	}
	tests := []struct {
		name     string
		a        job.Record // A's record before (JobID 0: none)
		bState   job.State  // B's state before ("": queued)
		runner   string     // the runner the delivery for B names
		requests int
		state    job.State // A's state after
		sent     bool      // A's claim message sent
		outcome  string
	}{
		{name: "first attempt's runner taken: new attempt", a: claimedA(0, time.Time{}), runner: "linux-x64-29679400",
			requests: 4, state: job.Queued, sent: true, outcome: OutcomeRunnerTaken},
		{name: "a replacement's runner taken: another new attempt", a: claimedA(1, testNow.Add(-time.Hour)), runner: "linux-x64-29679400-r1",
			requests: 4, state: job.Queued, sent: true, outcome: OutcomeRunnerTaken},
		{name: "an older attempt's runner: A waits for its own", a: claimedA(1, testNow.Add(-time.Hour)), runner: "linux-x64-29679400",
			requests: 2, state: job.Claimed, outcome: OutcomeRunnerTakenStale},
		{name: "A not claimed (already sent back): nothing", a: func() job.Record {
			r := claimedA(0, time.Time{})
			r.State = job.Queued
			return r
		}(), runner: "linux-x64-29679400", requests: 2, state: job.Queued, outcome: OutcomeRunnerTakenStale},
		{name: "at the replacement cap: a take is no failure, new attempt", a: claimedA(job.DefaultMaxReplacements, testNow.Add(-time.Hour)), runner: "linux-x64-29679400-r3",
			requests: 4, state: job.Queued, sent: true, outcome: OutcomeRunnerTaken},
		{name: "failing past max age: left to the reclaimer", a: claimedA(1, testNow.Add(-job.DefaultMaxAge-time.Minute)), runner: "linux-x64-29679400-r1",
			requests: 2, state: job.Claimed, outcome: OutcomeRunnerTakenLeft},
		{name: "B on its own replacement's runner: not taken", runner: "linux-x64-29679449-r2", requests: 1},
		// B claimed: its own runner is booting, without a job now, and fits
		// A: A waits for it rather than get a spare runner and machine.
		{name: "B's own runner is booting and fits A: A waits for it", a: withLabels(claimedA(0, time.Time{}), "self-hosted", "linux"),
			bState: job.Claimed, runner: "linux-x64-29679400", requests: 2, state: job.Claimed, outcome: OutcomeRunnerSwapped},
		{name: "B's own runner does not fit A: new attempt", a: withLabels(claimedA(0, time.Time{}), "self-hosted", "gpu"),
			bState: job.Claimed, runner: "linux-x64-29679400", requests: 4, state: job.Queued, sent: true, outcome: OutcomeRunnerTaken},
		// A's repository is public, claimed in a pool that allows it; B's
		// pool does not: its runner must not run A, whatever the labels.
		{name: "B's own runner fits A's labels, but A is public and B's pool refuses public repositories: new attempt",
			a: func() job.Record {
				r := withLabels(claimedA(0, time.Time{}), "self-hosted", "linux")
				r.Pool, r.RunnerName, r.Public = "public-arm", job.RunnerNameAt("public-arm", a, 0), true
				return r
			}(), bState: job.Claimed, runner: "public-arm-29679400", requests: 4, state: job.Queued, sent: true, outcome: OutcomeRunnerTaken},
		// A runner's name is its registrant's choice: one registered in
		// another repository (or at another organisation) and named after
		// A is not A's, and must not send A back for another machine.
		{name: "A's runner registered in another repository: not A's runner, A waits", a: registeredIn("octo-org/other-repo", "repo"),
			runner: "linux-x64-29679400", requests: 2, state: job.Claimed, outcome: OutcomeRunnerTakenStale},
		{name: "A's runner registered at the organisation, B in another of its repositories: new attempt", a: registeredIn("octo-org/other-repo", "org"),
			runner: "linux-x64-29679400", requests: 4, state: job.Queued, sent: true, outcome: OutcomeRunnerTaken},
		{name: "A's runner registered at another organisation: not A's runner, A waits", a: registeredIn("other-org/octo-repo", "org"),
			runner: "linux-x64-29679400", requests: 2, state: job.Claimed, outcome: OutcomeRunnerTakenStale},
		{name: "no scope recorded: the pool's (repository) holds", a: registeredIn("octo-org/other-repo", ""),
			runner: "linux-x64-29679400", requests: 2, state: job.Claimed, outcome: OutcomeRunnerTakenStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			bState := tt.bState
			if bState == "" {
				bState = job.Queued
			}
			f.st.Put(job.Record{JobID: b, State: bState, Version: 1, Pool: "linux-x64"})
			if tt.a.JobID != 0 {
				f.st.Put(tt.a)
			}
			m := set(payload(t, "in_progress"), "workflow_job.runner_name", tt.runner)
			resp, r := f.do(t, signedRequest("workflow_job", guid, compact(t, m)))
			if resp.StatusCode != 202 || r.Status != StatusAccepted {
				t.Fatalf("got %d %+v, want 202 accepted", resp.StatusCode, r)
			}
			if got := f.st.Records()[b]; got.State != job.Done || got.RunnerName != tt.runner {
				t.Errorf("B: %s runner %q, want done by %s", got.State, got.RunnerName, tt.runner)
			}
			if got := f.requests(); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
			if tt.outcome != "" && !strings.Contains(f.logs.String(), `"outcome":"`+tt.outcome+`"`) {
				t.Errorf("logs do not carry outcome %q:\n%s", tt.outcome, f.logs)
			}
			sent := f.q.Sent()
			if tt.a.JobID == 0 {
				if len(sent) != 0 {
					t.Errorf("sent %+v, want nothing", sent)
				}
				return
			}
			got := f.st.Records()[a]
			if got.State != tt.state {
				t.Fatalf("A: %+v, want %s", got, tt.state)
			}
			if !tt.sent {
				if len(sent) != 0 {
					t.Errorf("sent %+v, want nothing", sent)
				}
				return
			}
			want := job.Message{JobID: a, Version: tt.a.Version + 1, Attempt: tt.a.Attempt}
			if len(sent) != 1 || sent[0].Msg != want || sent[0].Delay != 0 {
				t.Fatalf("sent %+v, want %+v at once", sent, want)
			}
			if got.Version != want.Version || got.Replacements != tt.a.Replacements+1 || got.ReplacementsBase != tt.a.ReplacementsBase+1 ||
				got.DueAt != job.Millis(testNow) || got.FirstFailureAt != tt.a.FirstFailureAt {
				t.Errorf("A after: %+v, want v%d, replacements %d counted toward nothing, due now, the max-age clock as it was", got, want.Version, tt.a.Replacements+1)
			}

			// A redelivery of B's in_progress changes nothing more.
			before := f.requests()
			f.do(t, signedRequest("workflow_job", guid, compact(t, m)))
			if n := len(f.q.Sent()); n != 1 {
				t.Errorf("after a redelivery: %d messages, want still 1", n)
			}
			if again := f.st.Records()[a]; again.Version != got.Version {
				t.Errorf("after a redelivery: A v%d, want v%d", again.Version, got.Version)
			}
			if n := f.requests() - before; n != 2 {
				t.Errorf("a redelivery made %d requests, want 2 (mark done, read A)", n)
			}
		})
	}
}

// TestSwapHoldsWhenBsReportComesAgain: A's runner took B while B's own
// runner was booting, so A waits for B's runner (the swap). B's
// in_progress delivered again (GitHub's redelivery, the redeliverer), or
// arriving after B's completed, finds B done already; it must decide as
// the first report did, not send A back for a second runner and machine.
func TestSwapHoldsWhenBsReportComesAgain(t *testing.T) {
	t.Parallel()
	const b, a = int64(29679449), int64(29679400)
	labels := []string{"self-hosted", "linux", "x64"}
	for _, first := range []string{"in_progress", "completed"} {
		t.Run(first+" first", func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			ctx := context.Background()
			for _, id := range []int64{a, b} { // both claimed, with the history a real claim writes
				r, err := f.st.CreateJob(ctx, job.Record{JobID: id, Repo: "octo-org/octo-repo", InstallationID: 42, Pool: "linux-x64", Labels: labels}, testNow)
				if err != nil {
					t.Fatal(err)
				}
				l, _, err := f.st.Acquire(ctx, id, r.Version, "m", testNow.Add(time.Minute), testNow)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.st.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: 1, RunnerName: job.RunnerName("linux-x64", id)}, testNow); err != nil {
					t.Fatal(err)
				}
			}
			claimedA := f.st.Records()[a]
			onA := func(action string) []byte {
				return compact(t, set(payload(t, action), "workflow_job.runner_name", job.RunnerName("linux-x64", a)))
			}
			f.do(t, signedRequest("workflow_job", "guid-first", onA(first)))
			f.do(t, signedRequest("workflow_job", "guid-again", onA("in_progress")))
			if got := f.st.Records()[a]; got.State != job.Claimed || got.Version != claimedA.Version || len(f.q.Sent()) != 0 {
				t.Errorf("A %s v%d (was v%d), %d claim messages: want A still waiting for B's runner, nothing sent",
					got.State, got.Version, claimedA.Version, len(f.q.Sent()))
			}
		})
	}
}

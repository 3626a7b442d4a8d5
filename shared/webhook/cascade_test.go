package webhook

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestBurstCascadeNeverAbandons: a burst. Job A is claimed early; four
// older jobs B..E of the same pool are still pending in the claim backlog.
// GitHub gives each runner made for A to one of them (oldest first), and
// each take sends A back for a new attempt. A take by a job we serve is no
// failure: A's fifth runner is on its way, it is not abandoned at the
// replacement cap (before: abandoned after the fourth take, with no runner
// coming and no alarm, 5 jobs and 4 runners), and a real failure later
// still has the whole cap (an audit).
func TestBurstCascadeNeverAbandons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t, nil)
	const a = int64(1000)
	others := []int64{1001, 1002, 1003, 1004} // B..E
	deliver := func(action string, id int64, runner string) {
		t.Helper()
		m := set(payload(t, action), "workflow_job.id", id)
		if runner != "" {
			m = set(m, "workflow_job.runner_name", runner)
		}
		resp, r := f.do(t, signedRequest("workflow_job", action+"-"+strconv.FormatInt(id, 10)+"-"+runner, compact(t, m)))
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s of %d: %d %+v", action, id, resp.StatusCode, r)
		}
	}
	for _, id := range append([]int64{a}, others...) {
		deliver("queued", id, "")
	}
	claimA := func() {
		t.Helper()
		rec := f.st.Records()[a]
		l, _, err := f.st.Acquire(ctx, a, rec.Version, "claimer-of-a", testNow.Add(time.Minute), testNow)
		if err != nil {
			t.Fatalf("acquire A: %v", err)
		}
		if err := f.st.Finish(ctx, l, job.Outcome{State: job.Claimed, Attempt: rec.Attempt + 1,
			RunnerName: job.RunnerNameAt("linux-x64", a, rec.Replacements)}, testNow); err != nil {
			t.Fatalf("finish A: %v", err)
		}
	}
	sentBefore := len(f.q.Sent())
	for k, other := range others {
		claimA()
		deliver("in_progress", other, job.RunnerNameAt("linux-x64", a, k))
		got := f.st.Records()[a]
		if got.State != job.Queued || got.Replacements != k+1 {
			t.Fatalf("after take %d: A %s with %d replacements, want queued with %d", k+1, got.State, got.Replacements, k+1)
		}
	}
	if n := len(f.q.Sent()) - sentBefore; n != len(others) {
		t.Errorf("%d claim messages for A's new attempts, want %d", n, len(others))
	}
	got := f.st.Records()[a]
	if !job.Replaceable(got, testNow, job.DefaultMaxReplacements, job.DefaultMaxAge) || got.FirstFailureAt != 0 {
		t.Errorf("A after four takes: %+v, want its whole replacement cap and no max-age clock", got)
	}
}

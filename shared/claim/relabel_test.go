package claim_test

import (
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestRelabelledPoolDoesNotClaim: pool linux keeps its name but its labels
// change (a deploy) while a job of it is queued. The claimer registered
// the runner with the pool's new labels, which the job's no longer fit,
// and counted the job claimed: the runner never took it (another job
// might), and the liveness check replaced it until max age. The claim is
// now retried like one whose pool is gone: no runner, no machine.
func TestRelabelledPoolDoesNotClaim(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	const id = int64(77003)
	h.seed(t, id)
	changed := h.pools[0]
	changed.Labels = []string{"self-hosted", "ubuntu-24"}
	h.pools = append(h.pools[:0:0], changed)
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	got := h.get(t, id)
	if got.State != job.Queued || !strings.Contains(got.LastError, "no longer serves labels") {
		t.Fatalf("record %s (%q), want queued for a retry naming the labels", got.State, got.LastError)
	}
	if rs := h.gh.Runners(); len(rs) != 0 {
		t.Fatalf("runners %v registered with labels the job does not fit", rs)
	}
	if n := h.spy.Calls(); n != 0 {
		t.Fatalf("%d provisioning calls for a runner the job would never use", n)
	}
}

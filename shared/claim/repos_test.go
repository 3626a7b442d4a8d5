package claim_test

import (
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestRefusedJobsReadTheirRepositoryOncePerTTL: allow_public is turned
// off with five public jobs of one repository queued in the pool. Each
// attempt of each job asks whether the repository is still public (made
// private, the pool serves it again), and each is retried on the ladder
// until MAX_AGE: read every time, a backlog spends the installation's
// budget on the same answer, a dozen reads per job. A process reads a
// repository once per claim.RepoTTL: the five jobs' first attempts cost
// one read, their second (inside the TTL) none; the repository made
// private meanwhile is seen once the TTL has passed, and the jobs are
// claimed.
func TestRefusedJobsReadTheirRepositoryOncePerTTL(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	h.pools[0].AllowPublic = true
	ids := []int64{67100, 67101, 67102, 67103, 67104}
	for _, id := range ids {
		seedDescribed(t, h, id, true, false)
	}
	h.pools[0].AllowPublic = false
	owner, name := ownerName()
	h.gh.SetRepo(owner, name, ghfake.Repo{Visibility: "public"})
	c := h.claimer(t, claimerOpt{})
	reads := func() int { return h.gh.Stats().Calls[ghfake.RouteRepo] }
	attempt := func(state job.State) {
		t.Helper()
		h.invoke(t, c, h.receive(t, len(ids))...)
		for _, id := range ids {
			if got := h.get(t, id); got.State != state {
				t.Fatalf("job %d %s (%s), want %s", id, got.State, got.LastError, state)
			}
		}
	}

	attempt(job.Queued)
	if n := reads(); n != 1 {
		t.Fatalf("first attempts: %d repository reads, want 1 for the five jobs of one repository", n)
	}
	h.gh.SetRepo(owner, name, ghfake.Repo{Visibility: "private"})
	h.clock.Advance(h.lastSend(t).Delay * 2)
	attempt(job.Queued)
	if n := reads(); n != 1 {
		t.Fatalf("second attempts within %s: %d repository reads, want still 1", claim.RepoTTL, n)
	}
	h.clock.Advance(claim.RepoTTL)
	attempt(job.Claimed)
	if n := reads(); n != 2 {
		t.Fatalf("after %s: %d repository reads, want 2", claim.RepoTTL, n)
	}
}

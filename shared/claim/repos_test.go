package claim_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
)

// refusedPublic records jobs ids as the webhook did while the harness's
// pool allowed public repositories (described public), then turns
// allow_public off and makes GitHub describe the repository with
// visibility now. It returns the repository's owner and name.
func refusedPublic(t *testing.T, h *harness, visibility string, ids ...int64) (owner, name string) {
	t.Helper()
	h.pools[0].AllowPublic = true
	for _, id := range ids {
		seedDescribed(t, h, id, true, false)
	}
	h.pools[0].AllowPublic = false
	owner, name = ownerName()
	h.gh.SetRepo(owner, name, ghfake.Repo{Visibility: visibility})
	return owner, name
}

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
	ids := []int64{67100, 67101, 67102, 67103, 67104}
	owner, name := refusedPublic(t, h, "public", ids...)
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
	// A private answer is not remembered (TestCachedPrivateNeverClaimsAPublicJob):
	// the workers reading at once share one read, the others read again.
	if n := reads(); n < 2 || n > 1+len(ids) {
		t.Fatalf("after %s: %d repository reads, want 2 to %d", claim.RepoTTL, n, 1+len(ids))
	}
}

// TestCachedPrivateNeverClaimsAPublicJob: allow_public is off; the
// repository was private for a moment, and a job of it was claimed; it is
// public again, and the next job (a fork's pull request, say) must not be
// claimed in the pool on the strength of the earlier answer. Only public
// answers are remembered.
func TestCachedPrivateNeverClaimsAPublicJob(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	owner, name := refusedPublic(t, h, "private", 67200, 67201)
	c := h.claimer(t, claimerOpt{})
	h.invoke(t, c, h.receive(t, 1)...)
	if got := h.get(t, 67200); got.State != job.Claimed {
		t.Fatalf("the job read private: %s (%s), want claimed", got.State, got.LastError)
	}
	h.gh.SetRepo(owner, name, ghfake.Repo{Visibility: "public"})
	h.clock.Advance(time.Minute)
	h.invoke(t, c, h.receive(t, 1)...)
	if got := h.get(t, 67201); got.State != job.Queued {
		t.Errorf("the job read after the repository was made public again: %s in pool %s (%s), want queued for a retry",
			got.State, got.Pool, got.LastError)
	}
}

// panicsOnce is a GitHub whose first repository read panics (a bug in an
// adapter: the claimer recovers it per message).
type panicsOnce struct {
	claim.GitHub
	n *atomic.Int32
}

func (g panicsOnce) Repository(ctx context.Context, inst int64, owner, repo string) (ghapp.Repository, error) {
	if g.n.Add(1) == 1 {
		panic("adapter bug")
	}
	return g.GitHub.Repository(ctx, inst, owner, repo)
}

// TestPanickedReadLeavesNoReadInFlight: a read that panicked must not
// leave the repository marked as being read: every later job of it waited
// for that read until its invocation's deadline, was retried for the
// timeout, and GitHub was never asked again.
func TestPanickedReadLeavesNoReadInFlight(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	refusedPublic(t, h, "private", 67300, 67301)
	var n atomic.Int32
	c := h.claimer(t, claimerOpt{github: func(g claim.GitHub) claim.GitHub { return panicsOnce{g, &n} }})
	h.invoke(t, c, h.receive(t, 1)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.invokeCtx(t, ctx, c, h.receive(t, 2)...) // the first job's message, back at once, finds its lease held
	if got := h.get(t, 67301); got.State != job.Claimed || n.Load() != 2 {
		t.Errorf("the next job of the repository: %s (%s), %d reads; want claimed after a read of its own\n%s", got.State, got.LastError, n.Load(), h.logs)
	}
}

package claim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// seedDescribed records job id as the webhook would for a repository it
// described as public or a user's (job.Record.Public, UserOwned), in the
// harness's pool, and sends its message.
func seedDescribed(t *testing.T, h *harness, id int64, public, userOwned bool) {
	t.Helper()
	h.seed(t, id)
	r := h.get(t, id)
	r.Public, r.UserOwned = public, userOwned
	h.store.Put(r)
}

// runnerNames lists the runners GitHub has.
func runnerNames(h *harness) []string {
	var names []string
	for _, r := range h.gh.Runners() {
		names = append(names, r.Name)
	}
	return names
}

// TestPoolThatStoppedAllowingPublicRepositories: a public repository's job
// was recorded in linux while linux allowed public repositories; then
// linux stopped allowing them (allow_public false: a fork's pull request
// would run code on our machines). The queued job is not claimed there:
// its pool is resolved again by the webhook's rule, with the repository
// as GitHub describes it now, and the webhook's rule refuses it (linux is
// the first pool with its labels): it is retried (and abandoned at max
// age) rather than given a runner, with the reason once. A repository
// made private since is claimed in linux after all: also when an earlier
// attempt there registered linux-<id> (its machine up, its answer lost),
// which is this attempt's own name (the 409 path takes it), not a reason
// to keep the job from a move it does not make.
func TestPoolThatStoppedAllowingPublicRepositories(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		visibility string // at GitHub now
		want       string // the pool that claims it; "" none
		reason     string
		earlier    bool // attempt 1 ran in linux before the change
	}{
		{name: "no other pool", visibility: "public", reason: "repository octo-org/octo-repo is public and pool linux does not allow public repositories"},
		{name: "made private since", visibility: "private", want: "linux"},
		{name: "made private since, an earlier attempt's runner registered", visibility: "private", want: "linux", earlier: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			id := int64(66100 + i)
			h.pools[0].AllowPublic = true
			seedDescribed(t, h, id, true, false)
			if tt.earlier {
				h.spy.next = &lostAnswer{next: h.prov}
				h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
				if r := h.get(t, id); r.State != job.Queued || h.instances(id) != 1 {
					t.Fatalf("after attempt 1: %s, %d machines; want queued for a retry with its machine up", r.State, h.instances(id))
				}
				h.clock.Advance(time.Minute)
			}
			h.pools[0].AllowPublic = false
			owner, name := ownerName()
			h.gh.SetRepo(owner, name, ghfake.Repo{Visibility: tt.visibility})
			h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)

			got, names := h.get(t, id), runnerNames(h)
			if tt.want == "" {
				if got.State != job.Queued || got.Pool != "linux" || got.LastError != tt.reason || len(names) != 0 || h.spy.Calls() != 0 {
					t.Errorf("record %s in %q (%s), runners %v, %d provisioned; want queued for a retry (%s), no runner", got.State, got.Pool, got.LastError, names, h.spy.Calls(), tt.reason)
				}
				return
			}
			if got.State != job.Claimed || got.Pool != tt.want || !slices.Equal(names, []string{job.RunnerName(tt.want, id)}) || h.instances(id) != 1 {
				t.Errorf("record %s in %q (%s), runners %v, %d machines; want claimed in %s by its runner alone, one machine", got.State, got.Pool, got.LastError, names, h.instances(id), tt.want)
			}
			if n := h.gh.Stats().Calls[ghfake.RouteRepo]; n != 1 {
				t.Errorf("%d repository reads, want 1", n)
			}
		})
	}
}

// TestPoolMovedToTheOrganisation: a user's repository's job was recorded
// in linux while linux registered runners at the repository; linux then
// moved to the organisation, where a user account has no runners (every
// claim would end in GitHub's 404, a failed job). The job is claimed in the
// repository-scoped pool with its labels that follows, as the webhook
// would send it now.
func TestPoolMovedToTheOrganisation(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	const id = int64(66200)
	seedDescribed(t, h, id, false, true)
	h.pools[0].Scope = pool.ScopeOrg
	h.pools = append(h.pools, renamedPool("linux-repo", pool.ScopeRepo, false, "self-hosted", "linux"))
	owner, name := ownerName()
	h.gh.SetRepo(owner, name, ghfake.Repo{User: true})
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)

	got, names := h.get(t, id), runnerNames(h)
	if got.State != job.Claimed || got.Pool != "linux-repo" || got.Scope != pool.ScopeRepo || !slices.Equal(names, []string{job.RunnerName("linux-repo", id)}) {
		t.Errorf("record %s in %q at %q (%s), runners %v; want claimed in linux-repo at the repository by its runner alone", got.State, got.Pool, got.Scope, got.LastError, names)
	}
}

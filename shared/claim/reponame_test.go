package claim_test

import (
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestRepositoryRenamedAfterTheWebhook: the job's repository is renamed
// (here also moved to another account) after the webhook recorded the job
// under its old owner/name, which the record keeps. GitHub redirects the
// old name to the repository's id; the claim follows: the queued check
// (a GET, 301) reads the job, the registration (a POST, 307) is sent again
// to the repository, and the job is claimed with exactly one runner,
// registered at the renamed repository, and one machine. A job of the
// same repository that already runs is read through the old name too, and
// ends without a runner.
func TestRepositoryRenamedAfterTheWebhook(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{checkQueued: true})
	const id, running = 91001, 91002
	setJob(h, id, "queued")
	setJob(h, running, "in_progress")
	h.seed(t, id)
	h.seed(t, running)
	owner, name := ownerName()
	h.gh.RenameRepo(owner, name, "octo-platform", "octo-repo-v2")

	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 2)...)

	r := h.get(t, id)
	if r.State != job.Claimed || r.Attempt != 1 || r.RunnerName == "" {
		t.Fatalf("record %s attempt %d runner %q (%s: %s), want claimed at attempt 1", r.State, r.Attempt, r.RunnerName, r.LastErrorClass, r.LastError)
	}
	if r.Repo != repo {
		t.Errorf("record repository %q, want %q as the webhook recorded it", r.Repo, repo)
	}
	rs := h.gh.Runners()
	if len(rs) != 1 || rs[0].Name != r.RunnerName || rs[0].Scope != ghfake.ScopeRepo || rs[0].Owner != "octo-platform" || rs[0].Repo != "octo-repo-v2" {
		t.Fatalf("runners %+v, want exactly %s, registered at octo-platform/octo-repo-v2", rs, r.RunnerName)
	}
	if ms := h.prov.Machines(id); len(ms) != 1 || ms[0].RunnerName != r.RunnerName {
		t.Fatalf("machines %+v, want one for %s", ms, r.RunnerName)
	}
	if r := h.get(t, running); r.State != job.Done || h.instances(running) != 0 {
		t.Errorf("the running job: record %s, %d machines, want done without one", r.State, h.instances(running))
	}
	st := h.gh.Stats()
	for route, want := range map[string]int{ghfake.RouteJob: 2, ghfake.RouteRepoJIT: 1} {
		if st.Redirects[route] != want || st.Calls[route] != 2*want {
			t.Errorf("%s: %d redirects in %d calls, want each of %d calls through the old name redirected once, and its target reached",
				route, st.Redirects[route], st.Calls[route], want)
		}
	}
	h.receiveNone(t)
}

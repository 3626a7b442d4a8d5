package claim_test

import (
	"net/http"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestRetryAfterAScopeChangeLooksWhereItTried: the first attempt registers
// linux-<id> in the repository and is retried (GitHub's answer to the JIT
// call lost after it took effect); the operator then moves the pool to the
// organisation. GitHub keeps a repository's runners and its
// organisation's apart, so the second attempt's registration at the
// organisation meets no 409 and, before, stood beside the first: two
// runners for one job (on EC2 an offline spare registration, for a
// dispatch pool two hosts). The retry now records the name and scope it
// tried, and the next attempt under that name looks there first: an
// offline registration with no machine is removed and the attempt goes to
// the organisation; an online one takes the job where it is.
func TestRetryAfterAScopeChangeLooksWhereItTried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// between runs after the first attempt, before the second.
		between  func(h *harness, name string)
		state    job.State
		decision string
		scope    string // the second attempt's runner's, as recorded
		looks    int    // the second attempt's listings of the repository's runners
		machines int    // the job's machines after it (the first attempt started none)
	}{
		{name: "offline with no machine: removed, registered at the organisation",
			state: job.Claimed, decision: claim.DecisionClaimed, scope: pool.ScopeOrg, looks: 1, machines: 1},
		{name: "online: the job is claimed with it in the repository",
			between: func(h *harness, name string) {
				if err := h.gh.SetRunner(name, "online", false); err != nil {
					panic(err)
				}
			},
			state: job.Claimed, decision: claim.DecisionReused, scope: pool.ScopeRepo, looks: 1},
		{name: "gone meanwhile: registered at the organisation",
			between: func(h *harness, name string) {
				r, _ := h.gh.RunnerByName(name)
				h.gh.RemoveRunner(r.ID)
			},
			state: job.Claimed, decision: claim.DecisionClaimed, scope: pool.ScopeOrg, looks: 1, machines: 1},
		{name: "the look fails: retried, nothing registered at the organisation",
			between: func(h *harness, _ string) {
				h.gh.Fail(ghfake.RouteRepoRunners, 1, ghfake.ServerError(http.StatusBadGateway))
			},
			state: job.Queued, decision: claim.DecisionRetry, looks: 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			id := int64(9800 + i)
			name := job.RunnerName("linux", id)
			h.seed(t, id)
			h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway).AfterEffect())
			h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
			if r := h.get(t, id); r.State != job.Queued || r.TriedRunner != name || r.TriedScope != pool.ScopeRepo {
				t.Fatalf("after the first attempt: %s, tried %q at %q; want queued, tried %s in the repository", r.State, r.TriedRunner, r.TriedScope, name)
			}
			if tt.between != nil {
				tt.between(h, name)
			}
			h.pools[0].Scope = pool.ScopeOrg
			h.clock.Advance(h.lastSend(t).Delay)
			before := h.gh.Stats().Calls[ghfake.RouteRepoRunners]
			decided := h.logs.count(t, tt.decision)
			h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)

			got := h.get(t, id)
			if got.State != tt.state || h.logs.count(t, tt.decision)-decided != 1 {
				t.Fatalf("second attempt: %s (%s), decisions %v; want %s by %s", got.State, got.LastError, h.logs.decisions(t), tt.state, tt.decision)
			}
			if n := h.gh.Stats().Calls[ghfake.RouteRepoRunners] - before; n != tt.looks {
				t.Errorf("%d listings of the repository's runners, want %d", n, tt.looks)
			}
			var at []string
			for _, r := range h.gh.Runners() {
				if r.Name == name {
					at = append(at, r.Scope)
				}
			}
			if n := h.instances(id); n != tt.machines {
				t.Errorf("%d machines, want %d", n, tt.machines)
			}
			if tt.state != job.Claimed {
				if len(at) != 1 || at[0] != pool.ScopeRepo {
					t.Errorf("%s registered at %v, want only the first attempt's, in the repository", name, at)
				}
				return
			}
			if len(at) != 1 || at[0] != tt.scope || got.Scope != tt.scope || got.RunnerName != name {
				t.Errorf("%s registered at %v, record's runner %q at %q; want exactly one, at %s, recorded", name, at, got.RunnerName, got.Scope, tt.scope)
			}
		})
	}
}

// TestSameScopeRetryLooksNowhereElse: a retry whose pool kept its scope
// costs no look at the other scope.
func TestSameScopeRetryLooksNowhereElse(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = 9810
	h.seed(t, id)
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway).AfterEffect())
	h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
	h.clock.Advance(h.lastSend(t).Delay)
	before := h.gh.Stats().Calls
	h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
	if got := h.get(t, id); got.State != job.Claimed {
		t.Fatalf("second attempt: %s (%s), want claimed", got.State, got.LastError)
	}
	after := h.gh.Stats().Calls
	// The 409 path's own look (the name is taken by the first attempt's
	// registration) is the only listing.
	if n := after[ghfake.RouteRepoRunners] - before[ghfake.RouteRepoRunners]; n != 1 {
		t.Errorf("%d listings of the repository's runners, want 1 (the 409 path's)", n)
	}
	if n := after[ghfake.RouteOrgRunners] - before[ghfake.RouteOrgRunners]; n != 0 {
		t.Errorf("%d listings of the organisation's runners, want none", n)
	}
}

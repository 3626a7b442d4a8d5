package claim_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
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

// firstAttemptRetried runs job id's first attempt in h: it registers
// linux-<id> in the repository and is retried (GitHub's answer to the JIT
// call lost after it took effect). Then the pool moves to the organisation
// and the clock to the retry's message.
func firstAttemptRetried(t *testing.T, h *harness, id int64) {
	t.Helper()
	h.seed(t, id)
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway).AfterEffect())
	h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
	h.pools[0].Scope = pool.ScopeOrg
	h.clock.Advance(h.lastSend(t).Delay)
}

// registeredAt lists the scopes name is registered at.
func registeredAt(h *harness, name string) []string {
	var at []string
	for _, r := range h.gh.Runners() {
		if r.Name == name {
			at = append(at, r.Scope)
		}
	}
	return at
}

// TestTriedScopeSurvivesAttemptsThatNeverAsked: an attempt under the new
// scope that fails before it asks GitHub for its runner (the look at the
// tried scope fails, or a status check is rate-limited) must not record
// the new scope as tried: nothing is registered there, and the next
// attempt would skip the look and register beside the runner at the old
// scope.
func TestTriedScopeSurvivesAttemptsThatNeverAsked(t *testing.T) {
	t.Parallel()
	for i, tt := range []struct {
		name        string
		checkQueued bool
		fail        func(h *harness)
	}{
		{name: "the look fails", fail: func(h *harness) {
			h.gh.Fail(ghfake.RouteRepoRunners, 1, ghfake.ServerError(http.StatusBadGateway))
		}},
		{name: "the status check is rate-limited", checkQueued: true, fail: func(h *harness) {
			h.gh.Fail(ghfake.RouteJob, 1, ghfake.TooManyRequests(time.Second))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true, checkQueued: tt.checkQueued})
			id := int64(9820 + i)
			name := job.RunnerName("linux", id)
			firstAttemptRetried(t, h, id)
			tt.fail(h)
			h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
			if r := h.get(t, id); r.State != job.Queued || r.Attempt != 2 || r.TriedScope != pool.ScopeRepo {
				t.Fatalf("after the second attempt: %s attempt %d (%s), tried at %q; want queued after attempt 2, tried still in the repository",
					r.State, r.Attempt, r.LastError, r.TriedScope)
			}
			h.clock.Advance(h.lastSend(t).Delay + time.Minute)
			h.invoke(t, h.claimer(t, claimerOpt{instance: "third"}), h.receive(t, 1)...)
			got := h.get(t, id)
			if at := registeredAt(h, name); got.State != job.Claimed || len(at) != 1 || at[0] != pool.ScopeOrg {
				t.Errorf("third attempt: %s (%s), %s registered at %v; want claimed with one runner, at the organisation", got.State, got.LastError, name, at)
			}
		})
	}
}

// TestGiveUpCleansUpWhereItTried: an attempt past the maximum age gives
// up and removes the job's runner where it is. Its look at the tried
// scope failed: the runner is at the tried scope (looked for at the new
// one, it would be "not found": left registered, and the job's machines
// ended as if it were gone). It found nothing there, registered at the
// new scope and failed to provision: the runner is at the new scope.
func TestGiveUpCleansUpWhereItTried(t *testing.T) {
	t.Parallel()
	for i, tt := range []struct {
		name string
		fail func(h *harness)
	}{
		{name: "the look at the tried scope fails", fail: func(h *harness) {
			h.gh.Fail(ghfake.RouteRepoRunners, 1, ghfake.ServerError(http.StatusBadGateway))
		}},
		{name: "registered at the new scope, provisioning fails", fail: func(h *harness) {
			h.spy.set(func(int) error { return errors.New("ec2: InternalError") }, nil)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			id := int64(9830 + i)
			name := job.RunnerName("linux", id)
			firstAttemptRetried(t, h, id)
			h.clock.Advance(job.DefaultMaxAge + time.Minute)
			tt.fail(h)
			orgLooks := h.gh.Stats().Calls[ghfake.RouteOrgRunners]
			h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
			if got := h.get(t, id); got.State != job.Abandoned {
				t.Fatalf("record %s (%s), want abandoned past the maximum age", got.State, got.LastError)
			}
			if at := registeredAt(h, name); len(at) != 0 {
				t.Errorf("%s left registered at %v, want removed where it is", name, at)
			}
			if n := h.gh.Stats().Calls[ghfake.RouteOrgRunners] - orgLooks; n != 0 {
				t.Errorf("%d listings of the organisation's runners, want none: the attempt knows where its runner is", n)
			}
		})
	}
}

// listRefused is a GitHub whose runner listings at scope answer 403: the
// App's access there withdrawn.
type listRefused struct {
	claim.GitHub
	scope string
}

func (g listRefused) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	if scope != g.scope {
		return g.GitHub.FindRunner(ctx, installationID, scope, owner, repo, name)
	}
	return ghapp.Runner{}, &github.ErrorResponse{Message: "Resource not accessible by integration",
		Response: &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"X-Github-Request-Id": {"3"}},
			Request: &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/repos/octo-org/octo-repo/actions/runners"}}}}
}

// TestTriedScopeRefusedForGood: the old scope's listing is refused for
// good (403, perhaps the reason the pool moved): a runner there cannot be
// seen or removed by the App, so the attempt goes on at the new scope
// rather than fail the job, and says so.
func TestTriedScopeRefusedForGood(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = 9840
	firstAttemptRetried(t, h, id)
	c := h.claimer(t, claimerOpt{instance: "second", github: func(g claim.GitHub) claim.GitHub { return listRefused{g, pool.ScopeRepo} }})
	h.invoke(t, c, h.receive(t, 1)...)
	got := h.get(t, id)
	if got.State != job.Claimed || got.Scope != pool.ScopeOrg {
		t.Fatalf("record %s at %q (%s), want claimed at the organisation", got.State, got.Scope, got.LastError)
	}
	if !strings.Contains(h.logs.String(), "claim could not look for its runner at the scope it tried before") {
		t.Errorf("the refused look is not logged:\n%s", h.logs)
	}
}

// TestKeptByEarlierLooksWhereItTried: a renamed pool's job whose record
// names a scope of an earlier replacement's claim (org here), while this
// replacement's retried attempt asked for its runner in the repository.
// The look for that runner before the move goes where it was tried:
// looked for at the record's scope, it was "not found", and the job moved
// to the new pool beside the runner that may yet take it.
func TestKeptByEarlierLooksWhereItTried(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = 9860
	name := job.RunnerName("linux", id)
	firstAttemptRetried(t, h, id) // linux-<id> in the repository, tried there; the pool moved to the organisation
	r := h.get(t, id)
	r.Scope = pool.ScopeOrg // as an earlier replacement's claim left it
	h.store.Put(r)
	if err := h.gh.SetRunner(name, "online", false); err != nil {
		t.Fatal(err)
	}
	renameTo(h, "linux-v2")
	h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
	got := h.get(t, id)
	if got.State != job.Claimed || got.Pool != "linux" || got.RunnerName != name || got.Scope != pool.ScopeRepo {
		t.Fatalf("record %s in %q, runner %q at %q (%s); want claimed in linux with %s, in the repository",
			got.State, got.Pool, got.RunnerName, got.Scope, got.LastError, name)
	}
	if names := runnerNames(h); len(names) != 1 {
		t.Errorf("runners %v, want only %s", names, name)
	}
}

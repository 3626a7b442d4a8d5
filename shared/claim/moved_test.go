package claim_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// liveOf counts the live machines of job id whose runner is name.
func liveOf(h *harness, id int64, name string) int {
	n := 0
	for _, m := range h.prov.Machines(id) {
		if m.RunnerName == name {
			n++
		}
	}
	return n
}

// TestLookingForTheEarlierRunnerMeetsARateLimit: GitHub answers the look
// for the earlier attempt's runner with a secondary rate limit (403,
// Retry-After 10 min): it is the attempt's failure like any call's,
// snapped to Retry-After as rate_limit, not retried on the ladder a
// minute later.
func TestLookingForTheEarlierRunnerMeetsARateLimit(t *testing.T) {
	t.Parallel()
	const id = int64(88200)
	h := renameAfterAttempt(t, id, "")
	setJob(h, id, "queued")
	h.gh.Fail(ghfake.RouteRepoRunners, 1, ghfake.SecondaryRateLimit(10*time.Minute))
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	got := h.get(t, id)
	s := h.lastSend(t)
	if got.LastErrorClass != "rate_limit" || s.Delay < 10*time.Minute {
		t.Errorf("after a secondary rate limit: class %q (%s), next message in %s; want rate_limit, at least 10m", got.LastErrorClass, got.LastError, s.Delay)
	}
}

// TestRenameRolledBackKeepsTheMovedAttemptsRunner: attempt 1 moves the job
// from linux to linux-v2, registers linux-v2-<id> and starts its machine,
// and the provisioner's answer is lost. The retry records linux-v2, so
// when the rename is rolled back, attempt 2 finds linux-v2-<id> and keeps
// the job there (claimed with it) instead of registering linux-<id> beside it.
// With the record left in linux, attempt 2 saw nothing to move and
// registered a second runner on a second machine.
func TestRenameRolledBackKeepsTheMovedAttemptsRunner(t *testing.T) {
	t.Parallel()
	const id = int64(88400)
	h := setup(t, setupOpt{ec2: true})
	h.seed(t, id)
	orig := h.pools[0]
	renameTo(h, "linux-v2")
	setJob(h, id, "queued")
	h.spy.next = &lostAnswer{next: h.prov}
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	if r := h.get(t, id); r.State != job.Queued || r.Pool != "linux-v2" || h.instances(id) != 1 {
		t.Fatalf("after attempt 1: %s in %q, %d machines; want queued in linux-v2 (the retry records the move), one machine", r.State, r.Pool, h.instances(id))
	}
	h.pools = []pool.Pool{orig} // rollout undone
	h.clock.Advance(time.Minute)
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	keptClaimed(t, h, id, "linux-v2", job.RunnerName("linux-v2", id), "not moved")
	if rs := h.gh.Runners(); len(rs) != 1 || rs[0].Name != job.RunnerName("linux-v2", id) || h.instances(id) != 1 {
		t.Errorf("runners %v and %d machines; want linux-v2's runner and machine alone", rs, h.instances(id))
	}
}

// TestOldNameLookedUpOnlyBeforeTheMove: once an attempt ran in the new
// pool (its retry records it), later attempts look for no runner under
// the old name: they use the new pool like any job of it.
func TestOldNameLookedUpOnlyBeforeTheMove(t *testing.T) {
	t.Parallel()
	const id = int64(88500)
	h := setup(t, setupOpt{ec2: true})
	h.seed(t, id)
	renameTo(h, "linux-v2")
	c := h.claimer(t, claimerOpt{})
	var looks []int
	for range 3 {
		h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway))
		before := h.gh.Stats().Calls[ghfake.RouteRepoRunners]
		h.invoke(t, c, h.receive(t, 1)...)
		looks = append(looks, h.gh.Stats().Calls[ghfake.RouteRepoRunners]-before)
		h.clock.Advance(15 * time.Minute)
	}
	if r := h.get(t, id); r.Pool != "linux-v2" || looks[1] != 0 || looks[2] != 0 {
		t.Errorf("record in pool %q, runner looks per attempt %v; want linux-v2 and none after the move", r.Pool, looks)
	}
}

// TestOldRunnerAtAnUnknownScopeGoneFromBoth: the record keeps no scope for
// a retried attempt (written before tried_scope was kept) and the old pool
// is gone, so the earlier runner is looked for at both scopes; it is at neither (deleted since), and the
// organisation's listing is refused (404: a user account has no
// organisation runners). None of ours can be registered where GitHub
// lists none: the job moves and is claimed, rather than failed on the
// refusal.
func TestOldRunnerAtAnUnknownScopeGoneFromBoth(t *testing.T) {
	t.Parallel()
	const id = int64(88800)
	h := renameAfterAttempt(t, id, "")
	r := h.get(t, id)
	r.TriedRunner, r.TriedScope = "", ""
	h.store.Put(r)
	old, ok := h.gh.RunnerByName(job.RunnerName("linux", id))
	if !ok || !h.gh.RemoveRunner(old.ID) {
		t.Fatalf("no runner %s to remove", job.RunnerName("linux", id))
	}
	owner, name := ownerName()
	h.gh.SetInstallation(installation, owner, false, name) // a user account: no organisation
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	if got := h.get(t, id); got.State != job.Claimed || got.Pool != "linux-v2" {
		t.Errorf("record %s in %q (%s: %s), want claimed in linux-v2", got.State, got.Pool, got.LastErrorClass, got.LastError)
	}
	if n := h.gh.Stats().Calls[ghfake.RouteOrgRunners]; n == 0 {
		t.Errorf("no organisation runner listing: the second scope was not looked at")
	}
}

// TestTakenBackDeadAttemptsRunnerKeepsTheJobInItsPool: a claimer on the
// old RUNNER_POOLS registers linux-<id>, starts its machine and dies
// holding the lease; linux is renamed linux-v2, the message is gone, and
// the reclaimer takes the expired lease back (attempt 0, no takeover). The
// next claim still looks for the dead attempt's runner, finds it, and
// keeps the job in linux: one runner, one machine. Skipping the look at
// attempt 0, it moved the job and registered linux-v2-<id> beside it.
func TestTakenBackDeadAttemptsRunnerKeepsTheJobInItsPool(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = int64(88900)
	dead := diesHolding(t, h, id, true)
	renameTo(h, "linux-v2")
	setJob(h, id, "queued")
	h.clock.Set(job.FromMillis(max(dead.LeaseExpiresAt, dead.SweepAt)).Add(time.Second))
	if _, err := h.reclaimer(t).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := h.claimer(t, claimerOpt{instance: "next"})
	for range 3 {
		if b := h.esm.receive(10); len(b) > 0 {
			h.invoke(t, c, b...)
		}
	}
	got := h.get(t, id)
	if rs := h.gh.Runners(); len(rs) != 1 || rs[0].Name != job.RunnerName("linux", id) || h.instances(id) != 1 || got.Pool != "linux" {
		t.Errorf("record %s in %q (%s): runners %v, %d machines; want linux-%d alone on one machine, the job kept in linux", got.State, got.Pool, got.LastError, rs, h.instances(id), id)
	}
}

// deleteRefused is a GitHub whose runner deletes are answered with status
// and message.
type deleteRefused struct {
	claim.GitHub
	status  int
	message string
	deletes int
}

func (g *deleteRefused) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, id int64) error {
	g.deletes++
	return &github.ErrorResponse{Message: g.message,
		Response: &http.Response{StatusCode: g.status, Header: http.Header{"X-Github-Request-Id": {"2"}},
			Request: &http.Request{Method: http.MethodDelete, URL: &url.URL{Path: "/repos/octo-org/octo-repo/actions/runners/1"}}}}
}

// TestEarlierRunnerWithoutMachineRefusedDelete: the earlier attempt's
// offline runner has no machine, and GitHub refuses its delete. A 422 that
// is no busy runner's keeps the job in its pool (claimed with that runner,
// for the liveness check to replace), as the 409 path does with it,
// instead of failing the job for good; a 502 is the attempt's failure,
// retried. Neither moves the job beside the runner.
func TestEarlierRunnerWithoutMachineRefusedDelete(t *testing.T) {
	t.Parallel()
	for i, tt := range []struct {
		status    int
		message   string
		wantClass string
	}{
		{http.StatusUnprocessableEntity, "Validation failed, or the endpoint has been spammed.", ""},
		{http.StatusBadGateway, "Bad Gateway", "server_side"},
	} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			id := int64(89000 + i)
			h := renameAfterAttempt(t, id, "")
			setJob(h, id, "queued")
			h.prov.Stop(id)
			gh := &deleteRefused{status: tt.status, message: tt.message}
			h.invoke(t, h.claimer(t, claimerOpt{github: func(g claim.GitHub) claim.GitHub { gh.GitHub = g; return gh }}), h.receive(t, 1)...)
			r := h.get(t, id)
			if tt.wantClass == "" {
				keptClaimed(t, h, id, "linux", job.RunnerName("linux", id), "not moved")
			} else if r.State != job.Queued || r.Pool != "linux" || r.LastErrorClass != tt.wantClass {
				t.Errorf("record %s in %q (%s: %s), want the job queued in linux (%s)", r.State, r.Pool, r.LastErrorClass, r.LastError, tt.wantClass)
			}
			if gh.deletes != 1 {
				t.Errorf("%d deletes, want one", gh.deletes)
			}
			if rs := h.gh.Runners(); len(rs) != 1 || rs[0].Name != job.RunnerName("linux", id) {
				t.Errorf("runners %v, want linux-%d alone", rs, id)
			}
		})
	}
}

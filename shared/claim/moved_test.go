package claim_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
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

// TestMovedToAnOrganisationPoolKeepsTheBusyOldMachine: the recorded pool
// linux (repository scope) is gone and the job now fits org-linux
// (organisation scope); attempt 1's runner linux-<id> is busy on its
// machine. The retry recorded where attempt 1 registered (repository), so
// the move finds the runner there, leaves it and its machine alone, and
// ends the job when GitHub says it runs. A retry of an older version kept
// no scope: the runner is looked for at both scopes. Looked for at the new
// pool's scope only, it was "not found" there and its machine, at work,
// was ended.
func TestMovedToAnOrganisationPoolKeepsTheBusyOldMachine(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		status       string
		scopeUnknown bool // the retry was an older version's, which kept no scope
	}{{"queued", false}, {"in_progress", false}, {"queued", true}, {"in_progress", true}} {
		status := tc.status
		t.Run(fmt.Sprintf("job %s, scope recorded %v", status, !tc.scopeUnknown), func(t *testing.T) {
			t.Parallel()
			id := int64(88100 + i)
			h := renameAfterAttempt(t, id)
			if r := h.get(t, id); r.Scope != pool.ScopeRepo {
				t.Fatalf("the retry recorded scope %q, want %q: where attempt 1 registered", r.Scope, pool.ScopeRepo)
			} else if tc.scopeUnknown {
				r.Scope = ""
				h.store.Put(r)
			}
			p := h.pools[0]
			p.Name, p.Scope = "org-linux", pool.ScopeOrg
			h.pools = []pool.Pool{p}
			setJob(h, id, status)
			old := job.RunnerName("linux", id)
			if err := h.gh.SetRunner(old, "online", true); err != nil { // busy: at work on its machine
				t.Fatal(err)
			}
			h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
			got := h.get(t, id)
			if n := liveOf(h, id, old); n != 1 {
				t.Errorf("machine of busy runner %s: %d live, want 1 (a machine at work must never be ended); record %s in %q", old, n, got.State, got.Pool)
			}
			want := job.Claimed // the busy runner is at work on another job
			if status == "in_progress" {
				want = job.Done // ... or on this one
			}
			if got.State != want {
				t.Errorf("record %s in %q (%s), want %s", got.State, got.Pool, got.LastError, want)
			}
		})
	}
}

// TestReleasingTheOldRunnerMeetsARateLimit: GitHub answers the look for
// the earlier runner with a secondary rate limit (403, Retry-After 10 min):
// it is the attempt's failure like any call's, snapped to Retry-After as
// rate_limit, not retried on the ladder as an unknown failure a minute
// later.
func TestReleasingTheOldRunnerMeetsARateLimit(t *testing.T) {
	t.Parallel()
	const id = int64(88200)
	h := renameAfterAttempt(t, id)
	setJob(h, id, "queued")
	h.gh.Fail(ghfake.RouteRepoRunners, 1, ghfake.SecondaryRateLimit(10*time.Minute))
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	got := h.get(t, id)
	s := h.lastSend(t)
	if got.LastErrorClass != "rate_limit" || s.Delay < 10*time.Minute {
		t.Errorf("after a secondary rate limit: class %q (%s), next message in %s; want rate_limit, at least 10m", got.LastErrorClass, got.LastError, s.Delay)
	}
}

// TestMovedJobStatusAskedOnce: with check_queued on the new pool and the
// earlier runner busy with another job, the attempt asks GitHub for the
// job's status once: the move's answer serves check_queued.
func TestMovedJobStatusAskedOnce(t *testing.T) {
	t.Parallel()
	const id = int64(88300)
	h := renameAfterAttempt(t, id)
	h.pools[0].CheckQueued = true
	setJob(h, id, "queued")
	if err := h.gh.SetRunner(job.RunnerName("linux", id), "online", true); err != nil {
		t.Fatal(err)
	}
	before := h.gh.Stats().Calls[ghfake.RouteJob]
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	if n := h.gh.Stats().Calls[ghfake.RouteJob] - before; n != 1 {
		t.Errorf("%d job status reads in one attempt, want 1 (record %s)", n, h.get(t, id).State)
	}
}

// TestRenameRolledBackFindsTheNewPoolsRunner: attempt 1 moves the job from
// linux to linux-v2, registers linux-v2-<id> and starts its machine, and
// the provisioner's answer is lost. The retry records linux-v2, so when
// the rename is rolled back, attempt 2 moves the job back to linux and
// first releases linux-v2-<id>: one runner and one machine. With the
// record left in linux, attempt 2 saw nothing to move and registered
// linux-<id> beside it.
func TestRenameRolledBackFindsTheNewPoolsRunner(t *testing.T) {
	t.Parallel()
	const id = int64(88400)
	h := setup(t, setupOpt{ec2: true})
	h.seed(t, id)
	orig := h.pools[0]
	v2 := orig
	v2.Name = "linux-v2"
	h.pools = []pool.Pool{v2}
	setJob(h, id, "queued")
	h.spy.next = &lostAnswer{next: h.prov}
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	if r := h.get(t, id); r.State != job.Queued || r.Pool != "linux-v2" || h.instances(id) != 1 {
		t.Fatalf("after attempt 1: %s in %q, %d machines; want queued in linux-v2 (the retry records the move), one machine", r.State, r.Pool, h.instances(id))
	}
	h.pools = []pool.Pool{orig} // rollout undone
	h.clock.Advance(time.Minute)
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	got := h.get(t, id)
	if rs := h.gh.Runners(); got.State != job.Claimed || got.Pool != "linux" || len(rs) != 1 || rs[0].Name != job.RunnerName("linux", id) || h.instances(id) != 1 {
		t.Errorf("record %s in %q: runners %v and %d machines for one job, want claimed in linux by linux-%d on one machine", got.State, got.Pool, rs, h.instances(id), id)
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
	for i := 0; i < 3; i++ {
		h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway))
		before := h.gh.Stats().Calls[ghfake.RouteRepoRunners]
		h.invoke(t, c, h.receive(t, 1)...)
		looks = append(looks, h.gh.Stats().Calls[ghfake.RouteRepoRunners]-before)
		h.clock.Advance(15 * time.Minute)
	}
	cl := 0
	for _, r := range h.prov.Cleanups() {
		if r.RunnerName == job.RunnerName("linux", id) {
			cl++
		}
	}
	t.Logf("runner looks per attempt %v; provisioner cleanups of linux-%d: %d", looks, id, cl)
	if looks[1] != 0 || looks[2] != 0 {
		t.Errorf("attempts 2 and 3 looked for linux-%d (never registered): %v", id, looks)
	}
}

// TestMovedJobStatusRefusedDoesNotFailTheJob: the earlier runner is busy
// and GitHub refuses the job-status read (404): as for check_queued, the
// read is an optimisation, and the attempt claims; it does not fail the
// job for good.
func TestMovedJobStatusRefusedDoesNotFailTheJob(t *testing.T) {
	t.Parallel()
	const id = int64(88700)
	h := renameAfterAttempt(t, id) // no SetJob: GitHub answers 404 for the job
	if err := h.gh.SetRunner(job.RunnerName("linux", id), "online", true); err != nil {
		t.Fatal(err)
	}
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	if got := h.get(t, id); got.State == job.Failed {
		t.Errorf("record failed (%s: %s) on a refused status read, want claimed or retried", got.LastErrorClass, got.LastError)
	}
}

// TestOldRunnerAtAnUnknownScopeGoneFromBoth: an older version's retry kept
// no scope and the old pool is gone, so the earlier runner is looked for at
// both scopes; it is at neither (deleted since), and the organisation's
// listing is refused (404: a user account has no organisation runners).
// None of ours can be registered where GitHub lists none: the job moves
// and is claimed, rather than failed on the refusal.
func TestOldRunnerAtAnUnknownScopeGoneFromBoth(t *testing.T) {
	t.Parallel()
	const id = int64(88800)
	h := renameAfterAttempt(t, id)
	r := h.get(t, id)
	r.Scope = ""
	h.store.Put(r)
	old, ok := h.gh.RunnerByName(job.RunnerName("linux", id))
	if !ok || !h.gh.RemoveRunner(old.ID) {
		t.Fatalf("no runner %s to remove", job.RunnerName("linux", id))
	}
	owner, name, _ := strings.Cut(repo, "/")
	h.gh.SetInstallation(installation, owner, false, name) // a user account: no organisation
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	if got := h.get(t, id); got.State != job.Claimed || got.Pool != "linux-v2" {
		t.Errorf("record %s in %q (%s: %s), want claimed in linux-v2", got.State, got.Pool, got.LastErrorClass, got.LastError)
	}
	if n := h.gh.Stats().Calls[ghfake.RouteOrgRunners]; n == 0 {
		t.Errorf("no organisation runner listing: the second scope was not looked at")
	}
}

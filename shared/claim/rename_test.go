package claim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// renamedPool is a dispatch pool for the rename tests.
func renamedPool(name, scope string, allowPublic bool, labels ...string) pool.Pool {
	return pool.Pool{Name: name, Labels: labels, Scope: scope, RunnerGroupID: pool.DefaultRunnerGroupID, AllowPublic: allowPublic,
		Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/dispatch"}}
}

// ownerName splits the test repository's full name.
func ownerName() (owner, name string) {
	owner, name, _ = strings.Cut(repo, "/")
	return owner, name
}

// setJob makes GitHub report job id of the test repository with status.
func setJob(h *harness, id int64, status string) {
	owner, name := ownerName()
	h.gh.SetJob(owner, name, ghfake.Job{ID: id, RunID: id * 10, Status: status, Labels: []string{"self-hosted", "linux"}})
}

// renameTo renames the harness's one pool (same labels, same settings).
func renameTo(h *harness, name string) {
	p := h.pools[0]
	p.Name = name
	h.pools = []pool.Pool{p}
}

// renamed records job id in pool linux, as the webhook did, then renames
// the pool to linux-v2 (same labels) before any claimer starts.
func renamed(t *testing.T, id int64) *harness {
	t.Helper()
	h := setup(t, setupOpt{})
	h.seed(t, id)
	h.pools = []pool.Pool{renamedPool("linux-v2", pool.ScopeRepo, false, "self-hosted", "linux")}
	return h
}

// TestRecordedPoolGoneIsResolvedAgain: the job was recorded in pool linux
// (labels self-hosted, linux) and RUNNER_POOLS changed while it was
// queued. The claim resolves the pool again from the job's labels by the
// webhook's rule, with the repository's visibility and owner type read
// from GitHub, and claims in the pool that serves the job now; when none
// does, it is retried as before. Before, every such job was retried until
// max age and abandoned, then waited in GitHub's queue until it timed out.
func TestRecordedPoolGoneIsResolvedAgain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		pools []pool.Pool // RUNNER_POOLS after the change
		repo  ghfake.Repo
		fail  bool // GitHub answers the repository read 502
		// wantPool is the pool claimed in; "" = not moved, retried with
		// wantReason and wantClass.
		wantPool   string
		wantScope  string
		wantReason string
		wantClass  string
		wantReads  int // repository reads
	}{
		{name: "renamed", pools: []pool.Pool{renamedPool("linux-v2", pool.ScopeRepo, false, "self-hosted", "linux")},
			wantPool: "linux-v2", wantScope: pool.ScopeRepo, wantReads: 1},
		{name: "relabelled, another pool fits",
			pools: []pool.Pool{renamedPool("linux", pool.ScopeRepo, false, "self-hosted", "ubuntu-24"),
				renamedPool("linux-any", pool.ScopeRepo, false, "self-hosted", "linux", "x64")},
			wantPool: "linux-any", wantScope: pool.ScopeRepo, wantReads: 1},
		{name: "public repository, the new pool allows public ones", repo: ghfake.Repo{Visibility: "public"},
			pools:    []pool.Pool{renamedPool("linux-v2", pool.ScopeRepo, true, "self-hosted", "linux")},
			wantPool: "linux-v2", wantScope: pool.ScopeRepo, wantReads: 1},
		{name: "public repository, the new pool refuses public ones", repo: ghfake.Repo{Visibility: "public"},
			pools:      []pool.Pool{renamedPool("linux-v2", pool.ScopeRepo, false, "self-hosted", "linux")},
			wantReason: "pool linux is not configured; repository " + repo + " is public and pool linux-v2 does not allow public repositories",
			wantClass:  "unknown_retryable", wantReads: 1},
		{name: "an organisation's repository: the organisation pool",
			pools: []pool.Pool{renamedPool("org-linux", pool.ScopeOrg, false, "self-hosted", "linux"),
				renamedPool("repo-linux", pool.ScopeRepo, false, "self-hosted", "linux")},
			wantPool: "org-linux", wantScope: pool.ScopeOrg, wantReads: 1},
		{name: "a user's repository: the repository-scoped match", repo: ghfake.Repo{User: true},
			pools: []pool.Pool{renamedPool("org-linux", pool.ScopeOrg, false, "self-hosted", "linux"),
				renamedPool("repo-linux", pool.ScopeRepo, false, "self-hosted", "linux")},
			wantPool: "repo-linux", wantScope: pool.ScopeRepo, wantReads: 1},
		{name: "a user's repository, only an organisation pool", repo: ghfake.Repo{User: true},
			pools:      []pool.Pool{renamedPool("org-linux", pool.ScopeOrg, false, "self-hosted", "linux")},
			wantReason: "pool linux is not configured; pool org-linux registers runners at the organisation, and octo-org is a user account",
			wantClass:  "unknown_retryable", wantReads: 1},
		{name: "repository read fails", fail: true,
			pools:      []pool.Pool{renamedPool("linux-v2", pool.ScopeRepo, false, "self-hosted", "linux")},
			wantReason: "502", wantClass: "server_side", wantReads: 1},
		{name: "no pool has the labels", pools: []pool.Pool{renamedPool("windows", pool.ScopeRepo, false, "self-hosted", "windows")},
			wantReason: "pool linux is not configured", wantClass: "unknown_retryable", wantReads: 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			id := int64(77100 + i)
			h.seed(t, id) // in pool linux, as the webhook recorded it
			h.pools = tt.pools
			owner, name, _ := strings.Cut(repo, "/")
			h.gh.SetRepo(owner, name, tt.repo)
			if tt.fail {
				h.gh.Fail(ghfake.RouteRepo, 1, ghfake.ServerError(http.StatusBadGateway))
			}
			h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)

			got := h.get(t, id)
			if n := h.gh.Stats().Calls[ghfake.RouteRepo]; n != tt.wantReads {
				t.Errorf("%d repository reads, want %d", n, tt.wantReads)
			}
			resolved := resolvedLines(t, h, id)
			if tt.wantPool == "" {
				if got.State != job.Queued || got.Pool != "linux" || !strings.Contains(got.LastError, tt.wantReason) || got.LastErrorClass != tt.wantClass {
					t.Fatalf("record %s in pool %q (%s: %q), want queued in pool linux for a retry (%s: %q)",
						got.State, got.Pool, got.LastErrorClass, got.LastError, tt.wantClass, tt.wantReason)
				}
				if got.Attempt != 1 || h.lastSend(t).Msg.Attempt != 1 {
					t.Errorf("attempt %d, next message's %d, want 1: the failed attempt counts", got.Attempt, h.lastSend(t).Msg.Attempt)
				}
				if rs := h.gh.Runners(); len(rs) != 0 || h.spy.Calls() != 0 {
					t.Errorf("runners %v and %d provisioning calls for a job no pool serves", rs, h.spy.Calls())
				}
				if len(resolved) != 0 {
					t.Errorf("resolution logged %v, want none", resolved)
				}
				return
			}
			want := job.RunnerName(tt.wantPool, id)
			if got.State != job.Claimed || got.Pool != tt.wantPool || got.RunnerName != want || got.Scope != tt.wantScope {
				t.Fatalf("record %s in pool %q runner %q scope %q (%q), want claimed in pool %s by %s at %s",
					got.State, got.Pool, got.RunnerName, got.Scope, got.LastError, tt.wantPool, want, tt.wantScope)
			}
			p, _ := pool.Find(tt.pools, tt.wantPool)
			if r, ok := h.gh.RunnerByName(want); !ok || r.Scope != tt.wantScope || !slices.Equal(r.Labels, p.Labels) {
				t.Errorf("runner %s registered %v (%+v), want it at %s with labels %v", want, ok, r, tt.wantScope, p.Labels)
			}
			if reqs := h.prov.Requests(); len(reqs) != 1 || reqs[0].Pool.Name != tt.wantPool || reqs[0].RunnerName != want {
				t.Errorf("provisioned %v, want one machine for %s in pool %s", reqs, want, tt.wantPool)
			}
			if len(resolved) != 1 || resolved[0]["old_pool"] != "linux" || resolved[0]["new_pool"] != tt.wantPool {
				t.Errorf("resolution logged %v, want one line naming old pool linux and new pool %s", resolved, tt.wantPool)
			}
			// Counted in the pool that claimed it: its dashboards and
			// alarms are per pool, and the old one is gone.
			if got := emftest.Select(emftest.Parse(t, []byte(h.logs.String())), "Claims", map[string]string{"outcome": "claimed"}); len(got) != 1 || got[0].Dims["pool"] != tt.wantPool {
				t.Errorf("claimed decisions %v, want one in pool %s", got, tt.wantPool)
			}
		})
	}
}

// resolvedLines returns the log lines of job id's pool resolution.
func resolvedLines(t *testing.T, h *harness, id int64) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(h.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "claim pool resolved again" {
			continue
		}
		if m["job_id"] == float64(id) {
			out = append(out, m)
		}
	}
	return out
}

// TestRenamedPoolRunnerCheckedUnderItsNewName: a job claimed in the pool
// it was resolved to is checked by the reclaimer under that pool's runner
// name. Its runner never took the job: the reclaimer finds it missing and
// starts a new attempt. With the record left in the old pool, the check
// could not name the runner ("pool linux is not configured") and held the
// job until max age.
func TestRenamedPoolRunnerCheckedUnderItsNewName(t *testing.T) {
	t.Parallel()
	const id = int64(77200)
	h := renamed(t, id)
	setJob(h, id, "queued")
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	claimed := h.get(t, id)
	if claimed.State != job.Claimed {
		t.Fatalf("record %s (%q), want claimed", claimed.State, claimed.LastError)
	}
	r, ok := h.gh.RunnerByName(job.RunnerName("linux-v2", id))
	if !ok || !h.gh.RemoveRunner(r.ID) { // its machine never booted; the registration is gone
		t.Fatalf("no runner %s to remove", job.RunnerName("linux-v2", id))
	}

	h.clock.Advance(job.DefaultRunnerStartGrace + time.Minute)
	if _, err := h.reclaimer(t).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := h.get(t, id)
	if got.State != job.Queued || got.Replacements != 1 || got.Pool != "linux-v2" {
		t.Fatalf("after the reclaimer: %s in pool %q, replacements %d (%q), want queued in pool linux-v2 for a new attempt",
			got.State, got.Pool, got.Replacements, got.LastError)
	}
}

// TestResolvingWaitsForTheRateLimit: the repository read is a GitHub call
// like any other of the attempt: while the installation's budget is
// exhausted the claim is deferred without it (no attempt), and a deferral
// past the maximum age abandons the job without touching a pool it never
// resolved (no cleanup of a runner that was never named).
func TestResolvingWaitsForTheRateLimit(t *testing.T) {
	t.Parallel()
	const id = int64(77300)
	h := renamed(t, id)
	ctx := context.Background()
	c := h.claimer(t, claimerOpt{})
	h.gh.Fail(ghfake.RouteRepo, 1, ghfake.ServerError(http.StatusBadGateway))
	h.invoke(t, c, h.receive(t, 1)...) // attempt 1: the read fails
	if r := h.get(t, id); r.State != job.Queued || r.Attempt != 1 {
		t.Fatalf("after the failed read: %s attempt %d, want queued, attempt 1", r.State, r.Attempt)
	}
	exhaust := func() {
		now := h.clock.Now()
		reset := now.Add(10 * time.Minute)
		h.gh.SetRateLimit(installation, 5000, 0, reset)
		if err := h.store.SaveRate(ctx, installation, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: reset, ObservedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		after     time.Duration
		wantState job.State
	}{
		{after: time.Minute, wantState: job.Queued},
		{after: backoff.DefaultMaxAge, wantState: job.Abandoned},
	} {
		h.clock.Advance(step.after)
		exhaust()
		calls := ghCalls(h.gh.Stats())
		h.invoke(t, c, h.receive(t, 1)...)
		if n := ghCalls(h.gh.Stats()) - calls; n != 0 {
			t.Errorf("GitHub called %d times with the budget exhausted, want none", n)
		}
		if r := h.get(t, id); r.State != step.wantState || r.Attempt != 1 || r.LastErrorClass != "rate_limit" || r.Pool != "linux" {
			t.Fatalf("%s later: %s attempt %d class %q pool %q, want %s, attempt 1, rate_limit, pool linux",
				step.after, r.State, r.Attempt, r.LastErrorClass, r.Pool, step.wantState)
		}
	}
	if strings.Contains(h.logs.String(), "claim cleanup failed") {
		t.Errorf("the abandonment cleaned up after a pool it never resolved: %s", h.logs.String())
	}
}

// renameAfterAttempt records job id in pool linux (at scope, "" for the
// pool's own) and runs attempt 1 there: it registers linux-<id> and starts
// the machine, but the provisioner's answer is lost (a retryable error),
// so the job is queued for a retry with its machine up. Then the pool is
// renamed to linux-v2.
func renameAfterAttempt(t *testing.T, id int64, scope string) *harness {
	t.Helper()
	h := setup(t, setupOpt{ec2: true})
	if scope != "" {
		h.pools[0].Scope = scope
	}
	h.seed(t, id)
	h.spy.next = &lostAnswer{next: h.prov}
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	if r := h.get(t, id); r.State != job.Queued || r.Attempt != 1 || h.instances(id) != 1 {
		t.Fatalf("after attempt 1: %s attempt %d, %d machines (%s); want queued for a retry with its machine up", r.State, r.Attempt, h.instances(id), r.LastError)
	}
	renameTo(h, "linux-v2")
	h.clock.Advance(time.Minute)
	return h
}

// TestEarlierAttemptsRunnerKeepsTheJobInItsPool: the job's attempt 1 in
// pool linux registered linux-<id> and started its machine (the answer
// was lost), then linux was renamed linux-v2. Attempt 2 looks for that
// runner, where its attempt asked for it (tried_scope): registered (busy,
// online, or offline with its machine up), the job stays in linux,
// claimed with that runner (it may yet take the job; the reclaimer
// replaces it if it never does), nothing registered or ended; gone, or offline with no machine (it can never
// take the job: removed as the 409 path removes one), the job moves and
// is claimed in linux-v2. Moved regardless, it had
// linux-v2-<id> and a second machine beside linux-<id>: two runners whose
// labels both fit the one job.
func TestEarlierAttemptsRunnerKeepsTheJobInItsPool(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		scope string // attempt 1's pool's scope ("" the harness's)
		// old is the earlier runner's state at GitHub ("" leaves it
		// offline, its machine booting); removed deletes it first.
		old       string
		busy      bool
		removed   bool
		noMachine bool // attempt 1's machine is gone (its provisioning failed)
		fail      bool // GitHub answers the look 502 once
		// moved: claimed in linux-v2; else kept queued in linux (want
		// holds the reason's or the class's text).
		moved bool
		want  string
	}{
		{name: "offline, its machine booting", want: "not moved: runner linux-%d of an earlier attempt is registered"},
		{name: "online and idle", old: "online", want: "not moved: runner linux-%d of an earlier attempt is registered"},
		{name: "busy", old: "online", busy: true, want: "not moved: runner linux-%d of an earlier attempt is registered"},
		{name: "at the organisation", scope: pool.ScopeOrg, want: "not moved: runner linux-%d of an earlier attempt is registered"},
		{name: "the look fails", fail: true, want: "server_side"},
		{name: "gone", removed: true, moved: true},
		{name: "offline, its machine gone: removed, and the job moves", noMachine: true, moved: true},
		{name: "gone from the organisation", scope: pool.ScopeOrg, removed: true, moved: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := int64(77400 + i)
			h := renameAfterAttempt(t, id, tt.scope)
			setJob(h, id, "queued")
			old := job.RunnerName("linux", id)
			if tt.old != "" {
				if err := h.gh.SetRunner(old, tt.old, tt.busy); err != nil {
					t.Fatal(err)
				}
			}
			if r, ok := h.gh.RunnerByName(old); tt.removed && (!ok || !h.gh.RemoveRunner(r.ID)) {
				t.Fatalf("no runner %s to remove", old)
			}
			if tt.fail {
				h.gh.Fail(ghfake.RouteRepoRunners, 1, ghfake.ServerError(http.StatusBadGateway))
			}
			if tt.noMachine {
				h.prov.Stop(id)
			}
			h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)

			got := h.get(t, id)
			var names []string
			for _, r := range h.gh.Runners() {
				names = append(names, r.Name)
			}
			if tt.moved {
				if got.State != job.Claimed || got.Pool != "linux-v2" || !slices.Equal(names, []string{job.RunnerName("linux-v2", id)}) {
					t.Errorf("record %s in %q (%s), runners %v; want claimed in linux-v2 by its runner alone", got.State, got.Pool, got.LastError, names)
				}
				if lines := resolvedLines(t, h, id); len(lines) != 1 || lines[0]["new_pool"] != "linux-v2" {
					t.Errorf("pool resolution lines %v, want one naming linux-v2", lines)
				}
				return
			}
			// Kept: claimed with the earlier runner (its decision says "not
			// moved"); no move is logged.
			if lines := resolvedLines(t, h, id); len(lines) != 0 {
				t.Errorf("pool resolution lines %v for a job kept in its pool, want none", lines)
			}
			want := tt.want
			if strings.Contains(want, "%d") {
				want = fmt.Sprintf(want, id)
			}
			if tt.fail {
				if got.State != job.Queued || got.Pool != "linux" || got.LastErrorClass != want {
					t.Errorf("record %s in %q (%s: %s), want queued in linux for a retry (%s)", got.State, got.Pool, got.LastErrorClass, got.LastError, want)
				}
			} else {
				keptClaimed(t, h, id, "linux", old, want)
			}
			if !slices.Equal(names, []string{old}) || liveOf(h, id, old) != 1 || h.instances(id) != 1 {
				t.Errorf("runners %v, %d machines (%d of %s); want %s alone, its machine untouched", names, h.instances(id), liveOf(h, id, old), old, old)
			}
			if n := h.gh.Stats().Calls[ghfake.RouteRepo]; n != 1 {
				t.Errorf("%d repository reads, want 1: the pool that serves the job now is resolved first", n)
			}
		})
	}
}

// TestDeadAttemptsRunnerKeepsTheJobInItsPool: a claimer still on the old
// RUNNER_POOLS dies after it registered linux-<id> and started its
// machine; the pool is renamed meanwhile. The message comes back and takes
// the lease over: the dead attempt's runner is there, so the job stays in
// linux (claimed with that runner), with one runner and one machine.
func TestDeadAttemptsRunnerKeepsTheJobInItsPool(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = int64(77500)
	dead := diesHolding(t, h, id, true) // pool linux: runner linux-<id>, one machine
	renameTo(h, "linux-v2")

	h.esm.redeliver()
	h.clock.Set(job.FromMillis(dead.LeaseExpiresAt).Add(time.Second))
	h.invoke(t, h.claimer(t, claimerOpt{instance: "next"}), h.receive(t, 1)...)
	keptClaimed(t, h, id, "linux", job.RunnerName("linux", id), "not moved")
	if rs, n := h.gh.Runners(), h.instances(id); len(rs) != 1 || rs[0].Name != job.RunnerName("linux", id) || n != 1 {
		t.Errorf("runners %v and %d machines for one job, want linux-%d and one machine", rs, n, id)
	}
}

// keptClaimed fails unless job id is claimed in pool p with the earlier
// attempt's runner (kept in its recorded pool, not moved), at a recorded
// scope, its decision logged as a reuse naming why (reason).
func keptClaimed(t *testing.T, h *harness, id int64, p, runner, reason string) {
	t.Helper()
	got := h.get(t, id)
	if got.State != job.Claimed || got.Pool != p || got.RunnerName != runner || got.Scope == "" {
		t.Errorf("record %s in %q by %q at %q, want claimed in %s by %s (kept), its scope recorded", got.State, got.Pool, got.RunnerName, got.Scope, p, runner)
	}
	for _, line := range strings.Split(h.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["job_id"] == float64(id) && m["kept_in_pool"] == p {
			if m["decision"] != claim.DecisionReused || !strings.Contains(fmt.Sprint(m["reason"]), reason) {
				t.Errorf("kept decision %v, want %s naming %q", m, claim.DecisionReused, reason)
			}
			return
		}
	}
	t.Errorf("no decision line keeps job %d in %s", id, p)
}

// lostAnswer is a provisioner whose first Provision starts the machine but
// whose answer is lost (a retryable timeout).
type lostAnswer struct {
	next  claim.Provisioner
	calls int
}

func (l *lostAnswer) Provision(ctx context.Context, req pool.Request) (pool.Result, error) {
	l.calls++
	res, err := l.next.Provision(ctx, req)
	if l.calls == 1 && err == nil {
		return pool.Result{}, context.DeadlineExceeded
	}
	return res, err
}

func (l *lostAnswer) Cleanup(ctx context.Context, req pool.Request) error {
	return l.next.Cleanup(ctx, req)
}

func (l *lostAnswer) Running(ctx context.Context, req pool.Request) (string, error) {
	return l.next.Running(ctx, req)
}

// TestDeadClaimerAfterAMoveThenRollback: the pool is renamed (linux →
// linux-v2) under a queued job; a claimer moves the job, registers
// linux-v2-<id>, starts its machine and dies before writing its outcome.
// The rename is then rolled back. The record names linux-v2 (Store.Move
// wrote it under the lease before the runner was registered), so the next
// attempt finds its pool gone, resolves it again to linux and finds the
// dead attempt's runner there: the job stays in linux-v2, one runner and
// one machine, rather than a second runner registered as linux-<id>.
func TestDeadClaimerAfterAMoveThenRollback(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = int64(77600)
	h.seed(t, id)
	renameTo(h, "linux-v2")
	h.spy.set(nil, func(n int) {
		if n == 1 {
			h.crash()
		}
	})
	h.invoke(t, h.claimer(t, claimerOpt{instance: "dead"}), h.receive(t, 1)...)
	h.spy.set(nil, nil)
	dead := h.get(t, id)
	moved := job.RunnerName("linux-v2", id)
	if dead.State != job.Claiming || dead.Pool != "linux-v2" || dead.Scope != pool.ScopeRepo {
		t.Fatalf("after the crash: %s in pool %q at scope %q, want claiming in linux-v2 at %s", dead.State, dead.Pool, dead.Scope, pool.ScopeRepo)
	}
	if _, ok := h.gh.RunnerByName(moved); !ok || liveOf(h, id, moved) != 1 {
		t.Fatalf("the dead attempt's runner %s registered %v with %d machines, want registered with 1", moved, ok, liveOf(h, id, moved))
	}
	renameTo(h, "linux")

	h.esm.redeliver()
	h.clock.Set(job.FromMillis(dead.LeaseExpiresAt).Add(time.Second))
	h.invoke(t, h.claimer(t, claimerOpt{instance: "next"}), h.receive(t, 1)...)
	keptClaimed(t, h, id, "linux-v2", moved, "not moved")
	if rs, n := h.gh.Runners(), h.instances(id); len(rs) != 1 || rs[0].Name != moved || n != 1 {
		t.Errorf("runners %v and %d machines for one job, want %s alone and one machine", rs, n, moved)
	}
}

// TestKeptJobIsReplacedThenMoved: a job kept in its renamed pool (claimed
// with its earlier attempt's runner, offline, its machine booting) whose
// runner never connects is not left waiting for max age: past the start
// grace the reclaimer's liveness check finds that runner under its
// recorded name (the pool that serves the labels now standing in), removes
// it and its machine, and starts a new attempt, which moves to linux-v2:
// one runner and one machine at every step.
func TestKeptJobIsReplacedThenMoved(t *testing.T) {
	t.Parallel()
	const id = int64(77700)
	h := renameAfterAttempt(t, id, "")
	setJob(h, id, "queued")
	old := job.RunnerName("linux", id)
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	keptClaimed(t, h, id, "linux", old, "not moved")

	gh, tracker := newGitHub(t, h.store, h.ghURL, h.clock.Now, true)
	rc, err := reclaim.New(reclaim.Config{Store: h.store, Queue: h.queue, Now: h.clock.Now, Rand: random.New(1), Logger: h.log,
		GitHub: gh, Rates: tracker, Pools: h.pools,
		Provisioner: reclaim.ProvisionerFunc(func(ctx context.Context, lo reclaim.Leftover) error {
			return h.prov.Cleanup(ctx, pool.Request{JobID: lo.JobID, RunID: lo.RunID, Repo: lo.Repo, Pool: lo.Pool, RunnerName: lo.RunnerName, KeepMachines: lo.KeepMachines})
		})})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Set(job.FromMillis(h.get(t, id).SweepAt).Add(time.Second))
	rep, err := rc.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := h.get(t, id); r.State != job.Queued || r.Replacements != 1 || rep.Requeued[reclaim.RunnerLost] != 1 {
		t.Fatalf("after the check: %s, replacements %d, report %+v; want queued for a new attempt", r.State, r.Replacements, rep)
	}
	if _, ok := h.gh.RunnerByName(old); ok || liveOf(h, id, old) != 0 {
		t.Fatalf("the kept runner %s still registered %v, %d machines of it; want both gone", old, ok, liveOf(h, id, old))
	}
	h.invoke(t, h.claimer(t, claimerOpt{instance: "after"}), h.receive(t, 1)...)
	moved := job.RunnerNameAt("linux-v2", id, 1)
	got := h.get(t, id)
	if rs := h.gh.Runners(); got.State != job.Claimed || got.Pool != "linux-v2" || len(rs) != 1 || rs[0].Name != moved || h.instances(id) != 1 {
		t.Errorf("record %s in %q, runners %v, %d machines; want claimed in linux-v2 by %s alone, one machine", got.State, got.Pool, rs, h.instances(id), moved)
	}
}

// takenWhileLooking is a GitHub that, once the earlier runner is found,
// runs then (the webhook marking the job done meanwhile).
type takenWhileLooking struct {
	claim.GitHub
	then func()
}

func (g *takenWhileLooking) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	r, err := g.GitHub.FindRunner(ctx, installationID, scope, owner, repo, name)
	if err == nil && g.then != nil {
		g.then()
		g.then = nil
	}
	return r, err
}

// TestKeptJobLeaseLostToItsRunner: while the claimer looks for the earlier
// attempt's runner in the renamed pool, that runner connects and takes the
// job (the webhook marks it done under its name), so the kept claim's
// record write finds the lease lost. The runner is the job's own, at
// work: it is no spare, nothing is released (before, the release ran with
// no runner name, logging a spare released and counting it). When the job
// was instead taken by a runner not ours, the kept runner (offline, its
// machine booting) is the spare, and it is released as the 409 path's is.
func TestKeptJobLeaseLostToItsRunner(t *testing.T) {
	t.Parallel()
	for i, tt := range []struct {
		name    string
		takenBy string // "" the earlier runner itself
		spare   bool
	}{
		{name: "taken by the earlier runner"},
		{name: "taken by a runner not ours", takenBy: "someone-else", spare: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := int64(77800 + i)
			h := renameAfterAttempt(t, id, "")
			setJob(h, id, "queued")
			old := job.RunnerName("linux", id)
			by := tt.takenBy
			if by == "" {
				by = old
			}
			gh := &takenWhileLooking{then: func() { h.markDone(t, id, by) }}
			h.invoke(t, h.claimer(t, claimerOpt{github: func(g claim.GitHub) claim.GitHub { gh.GitHub = g; return gh }}), h.receive(t, 1)...)
			if got := h.get(t, id); got.State != job.Done || got.RunnerName != by {
				t.Fatalf("record %s by %q, want done by %s", got.State, got.RunnerName, by)
			}
			released := strings.Contains(h.logs.String(), "claim releases a spare runner")
			_, registered := h.gh.RunnerByName(old)
			if tt.spare {
				if !released || registered || liveOf(h, id, old) != 0 {
					t.Errorf("spare released %v, %s registered %v, %d machines of it; want it released, its machine ended", released, old, registered, liveOf(h, id, old))
				}
				return
			}
			if released || !registered || liveOf(h, id, old) != 1 {
				t.Errorf("spare released %v, %s registered %v, %d machines of it; want nothing released, the runner and its machine at work", released, old, registered, liveOf(h, id, old))
			}
		})
	}
}

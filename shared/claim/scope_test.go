package claim_test

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestClaimRecordsRunnerScope: a claimed record says where its runner was
// registered, so the reclaimer and the janitor look for it there even
// after the pool's scope changes under its name.
func TestClaimRecordsRunnerScope(t *testing.T) {
	t.Parallel()
	for i, scope := range []string{pool.ScopeRepo, pool.ScopeOrg} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			h.pools[0].Scope = scope
			id := int64(9700 + i)
			h.seed(t, id)
			h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
			got := h.get(t, id)
			if got.State != job.Claimed || got.Scope != scope {
				t.Fatalf("record %s with scope %q, want claimed with scope %q", got.State, got.Scope, scope)
			}
			if ms := h.prov.Machines(id); len(ms) != 1 || ms[0].Scope != scope {
				t.Fatalf("machines %+v, want one tagged with scope %q", ms, scope)
			}
		})
	}
}

// TestRetryAfterScopeChange: an operator moves the pool to organisation
// scope, then retries a failed job whose last runner was registered in the
// repository. The retry's first attempt releases that runner where it is
// (deleted, its machine ended) and registers its own at the organisation.
// Looked for at the organisation, the old runner would be "not found" and
// stay registered in the repository for good.
func TestRetryAfterScopeChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, setupOpt{ec2: true})
	const id = 9710
	h.seed(t, id)
	h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
	first := h.get(t, id)
	if first.State != job.Claimed {
		t.Fatalf("first attempt: %s, want claimed", first.State)
	}
	first.State = job.Failed // as if the job had failed for good since
	h.store.Put(first)
	retried, err := h.store.Requeue(ctx, job.Requeue{Read: h.get(t, id), By: "ops", Due: h.clock.Now()}, h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.queue.Send(ctx, job.Message{JobID: id, Version: retried.Version}, 0); err != nil {
		t.Fatal(err)
	}
	h.pools[0].Scope = pool.ScopeOrg

	h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
	got := h.get(t, id)
	want := job.RunnerNameAt("linux", id, retried.Replacements)
	if got.State != job.Claimed || got.RunnerName != want || got.Scope != pool.ScopeOrg {
		t.Fatalf("retry: %s runner %q scope %q, want claimed by %s at org scope", got.State, got.RunnerName, got.Scope, want)
	}
	if _, ok := h.gh.RunnerByName(first.RunnerName); ok {
		t.Errorf("the earlier runner %s is still registered: runners %v", first.RunnerName, h.gh.Runners())
	}
	if n := h.instances(id); n != 1 {
		t.Errorf("%d live machines, want only the retry's", n)
	}
}

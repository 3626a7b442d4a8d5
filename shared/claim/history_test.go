package claim_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestHistoryThroughRetryAndReclaim (issue 14, "done when"): a job's
// history through a retryable failure, its retry, a claimer that dies and
// the reclaimer's take-back, and the claim that succeeds: one entry per
// transition, in order, each saying who moved the record and why.
func TestHistoryThroughRetryAndReclaim(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	ctx := context.Background()
	const id = 4301
	// The webhook: the record, then its message.
	if _, err := h.store.CreateJob(ctx, h.newRecord(id), h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.queue.Send(ctx, job.Message{JobID: id, Version: 1}, 0); err != nil {
		t.Fatal(err)
	}

	// Attempt 1: GitHub answers 502; the claimer retries.
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway))
	h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
	h.clock.Advance(h.lastSend(t).Delay)

	// Attempt 2: the claimer dies while provisioning.
	h.spy.set(nil, func(n int) {
		if n == 1 {
			h.crash()
		}
	})
	h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
	h.spy.set(nil, nil)

	// The reclaimer's pass after the lease expired, and the record became
	// stale in the sweep index (the lease write leaves queued's sweep_at),
	// takes the job back.
	dead := h.get(t, id)
	h.clock.Set(job.FromMillis(max(dead.LeaseExpiresAt, dead.SweepAt)).Add(time.Second))
	rc, err := reclaim.New(reclaim.Config{Store: h.store, Queue: h.queue, Now: h.clock.Now, Rand: random.New(1), Logger: h.log})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}

	// The next attempt claims the job.
	h.invoke(t, h.claimer(t, claimerOpt{instance: "third"}), h.receive(t, 1)...)
	r := h.get(t, id)
	if r.State != job.Claimed {
		t.Fatalf("record %s (%s), want claimed", r.State, r.LastError)
	}

	type entry struct {
		from, to job.State
		attempt  int
		class    string
		actor    string
	}
	want := []entry{
		{"", job.Pending, 0, "", job.ActorWebhook},
		{job.Pending, job.Claiming, 0, "", job.ActorClaimer},
		{job.Claiming, job.Queued, 1, "server_side", job.ActorClaimer},
		{job.Queued, job.Claiming, 1, "", job.ActorClaimer},
		// A take-back does not set the attempt: the lease's carries on.
		{job.Claiming, job.Queued, 1, "", job.ActorReclaimer},
		{job.Queued, job.Claiming, 1, "", job.ActorClaimer},
		{job.Claiming, job.Claimed, 2, "", job.ActorClaimer},
	}
	if len(r.History) != len(want) {
		t.Fatalf("history of %d entries, want %d: %+v", len(r.History), len(want), r.History)
	}
	for i, w := range want {
		g := r.History[i]
		if got := (entry{g.From, g.To, g.Attempt, g.Class, g.Actor}); got != w {
			t.Errorf("entry %d: got %+v, want %+v", i, got, w)
		}
		if i > 0 && g.At < r.History[i-1].At {
			t.Errorf("entry %d at %d, before the entry it follows (%d)", i, g.At, r.History[i-1].At)
		}
	}
	if e := r.History[2].Error; e == "" || len(e) > job.MaxHistoryError {
		t.Errorf("the retry's entry keeps %q, want the error's tail (≤ %d bytes)", e, job.MaxHistoryError)
	}
	if e := r.History[4].Error; e != string(reclaim.LeaseExpired) {
		t.Errorf("the take-back's entry says %q, want the reason %q", e, reclaim.LeaseExpired)
	}
}

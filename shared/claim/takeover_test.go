package claim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// redeliver makes every message still in flight visible again, as the
// queue's visibility timeout does for the batch of a claimer that died.
func (e *esm) redeliver() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.msgs {
		if m.state == inFlight {
			m.state = available
		}
	}
}

// diesHolding seeds job id and runs its message through a claimer that
// dies at its first provisioning (before the provisioner runs, or after
// it started the machine) holding the lease: the record it left.
func diesHolding(t *testing.T, h *harness, id int64, afterProvisioning bool) job.Record {
	t.Helper()
	h.seed(t, id)
	die := func(n int) {
		if n == 1 {
			h.crash()
		}
	}
	if afterProvisioning {
		h.spy.set(nil, die)
	} else {
		h.spy.set(func(n int) error { die(n); return nil }, nil)
	}
	h.invoke(t, h.claimer(t, claimerOpt{instance: "dead"}), h.receive(t, 1)...)
	h.spy.set(nil, nil)
	r := h.get(t, id)
	if r.State != job.Claiming || r.Version != 2 {
		t.Fatalf("record %s v%d after the crash, want claiming v2", r.State, r.Version)
	}
	return r
}

// checkOneRunner fails unless job id is claimed with exactly one runner
// registered, named for the job, and one machine.
func checkOneRunner(t *testing.T, h *harness, id int64) job.Record {
	t.Helper()
	r := h.get(t, id)
	if r.State != job.Claimed {
		t.Fatalf("record %s v%d (%s), want claimed", r.State, r.Version, r.LastError)
	}
	if rs := h.gh.Runners(); len(rs) != 1 || rs[0].Name != job.RunnerName("linux", id) {
		t.Fatalf("runners %v, want exactly one named %s", rs, job.RunnerName("linux", id))
	}
	if n := h.instances(id); n != 1 {
		t.Fatalf("%d machines, want 1", n)
	}
	return r
}

// TestDeadClaimerRecoveredByItsMessage: a claimer dies holding the lease
// (before or after it started the machine). Its message was never deleted:
// the event source mapping delivers it again after the visibility timeout.
// Before the lease's expiry it is hidden until one second past it, the
// record untouched; after, it takes the lease over (version+1) and claims,
// resolving the dead attempt's registration (409) and machine: one runner,
// one machine, without waiting for the reclaimer and the record's sweep_at.
func TestDeadClaimerRecoveredByItsMessage(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name              string
		afterProvisioning bool
	}{
		{name: "dies before provisioning"},
		{name: "dies after provisioning", afterProvisioning: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			id := int64(9701 + i)
			dead := diesHolding(t, h, id, tc.afterProvisioning)
			first := h.gh.Runners()
			exp := job.FromMillis(dead.LeaseExpiresAt)

			// Redelivered while the lease lasts: hidden until just past it.
			h.esm.redeliver()
			h.clock.Set(exp.Add(-90 * time.Second))
			batch := h.receive(t, 1)
			resp := h.invoke(t, h.claimer(t, claimerOpt{instance: "early"}), batch...)
			if len(resp.BatchItemFailures) != 1 || h.logs.count(t, claim.DecisionLeaseHeld) != 1 {
				t.Fatalf("failures %v, %d lease-held decisions; want the message back, hidden", resp.BatchItemFailures, h.logs.count(t, claim.DecisionLeaseHeld))
			}
			if d, ok := h.queue.Visibility(batch[0].ReceiptHandle); !ok || d != 91*time.Second {
				t.Fatalf("hidden for %s (%v), want until one second past the lease's expiry (91s)", d, ok)
			}
			if r := h.get(t, id); r.Version != dead.Version || r.LeaseOwner != dead.LeaseOwner || len(r.History) != len(dead.History) {
				t.Fatalf("record %+v after a look at a live lease, want it untouched", r)
			}

			// Back once the lease has expired: taken over, then claimed.
			h.clock.Set(exp.Add(time.Second))
			if resp := h.invoke(t, h.claimer(t, claimerOpt{instance: "next"}), h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures %v, want none", resp.BatchItemFailures)
			}
			r := checkOneRunner(t, h, id)
			if r.Version != 3 || r.Attempt != 1 || r.FirstFailureAt != job.Millis(exp.Add(time.Second)) || r.SweepAt == dead.SweepAt {
				t.Fatalf("record v%d attempt %d first_failure_at %d sweep_at %d; want v3 (taken over), attempt 1, the dead attempt's failure, claimed's sweep_at",
					r.Version, r.Attempt, r.FirstFailureAt, r.SweepAt)
			}
			if tc.afterProvisioning && (h.gh.Runners()[0].ID != first[0].ID || h.spy.Calls() != 1) {
				t.Fatalf("runner %v, %d provisionings; want the dead attempt's machine and runner %d reused", h.gh.Runners(), h.spy.Calls(), first[0].ID)
			}
			n := len(r.History)
			took := r.History[n-2]
			if took.From != job.Claiming || took.To != job.Claiming || took.Actor != job.ActorClaimer || took.Error != job.ReasonLeaseExpired ||
				r.History[n-1].To != job.Claimed {
				t.Fatalf("history ends %+v, want the takeover (claiming → claiming, %s) then claimed", r.History[n-2:], job.ReasonLeaseExpired)
			}
			if !strings.Contains(h.logs.String(), `"claim lease taken over"`) {
				t.Errorf("no log line says the lease was taken over")
			}
			h.receiveNone(t)
		})
	}
}

// TestMessageTakesOverAgainAfterASecondDeath: the claimer that took the
// lease over dies too. The message's next receive finds the lease its own
// earlier receive took over (a version past its own lease write's) and
// takes it over again: the message recovers claimers in a row, as the
// package doc says. Before, that receive was dropped as a duplicate and the
// job waited for the reclaimer, up to QUEUED_GRACE past its due time.
func TestMessageTakesOverAgainAfterASecondDeath(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = int64(9901)
	dead := diesHolding(t, h, id, false)
	h.esm.redeliver()
	h.clock.Set(job.FromMillis(dead.LeaseExpiresAt).Add(time.Second))
	var counted []emftest.Point
	h.spy.set(func(n int) error { // the second claimer dies too
		// What its process wrote before it died: the takeover's count
		// must be there, not left for the invocation's flush, which a
		// dying process never reaches (LeaseTakeoversAlarm watches
		// claimers that keep dying).
		counted = emftest.Select(emftest.Parse(t, []byte(h.logs.String())), "lease_taken_over", map[string]string{"pool": "linux"})
		h.crash()
		return nil
	}, nil)
	h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
	h.spy.set(nil, nil)
	second := h.get(t, id)
	if second.State != job.Claiming || second.Version != dead.Version+1 {
		t.Fatalf("record %s v%d after the second death, want claiming v%d (taken over once)", second.State, second.Version, dead.Version+1)
	}
	if len(counted) != 1 || counted[0].Values[0] != 1 {
		t.Errorf("lease_taken_over points %+v written before the claimer died, want one of 1", counted)
	}

	h.esm.redeliver()
	h.clock.Set(job.FromMillis(second.LeaseExpiresAt).Add(time.Second))
	h.invoke(t, h.claimer(t, claimerOpt{instance: "third"}), h.receive(t, 1)...)
	r := checkOneRunner(t, h, id)
	if r.Version != second.Version+1 || h.logs.count(t, claim.DecisionDuplicate) != 0 {
		t.Fatalf("record v%d, %d duplicates; want taken over again (v%d) and claimed", r.Version, h.logs.count(t, claim.DecisionDuplicate), second.Version+1)
	}
	h.receiveNone(t)
}

// TestLiveLeaseIsNeverTaken: a copy of a message reaches another claimer
// while the claimer holding its lease is still at work (mid-provisioning).
// The copy cannot tell a live holder from a dead one: it is hidden until
// the lease's expiry, never taking the lease; back then it finds the claim
// ended and is dropped. One JIT config, one machine, the live claimer's
// outcome.
func TestLiveLeaseIsNeverTaken(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = 9711
	h.seed(t, id)
	var copyResp events.SQSEventResponse
	var copyBatch []events.SQSMessage
	h.spy.set(func(n int) error {
		if n == 1 {
			// The copy, received by another instance meanwhile.
			if err := h.queue.Send(context.Background(), job.Message{JobID: id, Version: 1}, 0); err != nil {
				t.Error(err)
			}
			copyBatch = h.receive(t, 1)
			copyResp = h.invoke(t, h.claimer(t, claimerOpt{instance: "copy"}), copyBatch...)
		}
		return nil
	}, nil)
	if resp := h.invoke(t, h.claimer(t, claimerOpt{instance: "live"}), h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the live claimer: failures %v, want none", resp.BatchItemFailures)
	}
	if len(copyResp.BatchItemFailures) != 1 || h.logs.count(t, claim.DecisionLeaseHeld) != 1 {
		t.Fatalf("the copy: failures %v, %d lease-held decisions; want it hidden", copyResp.BatchItemFailures, h.logs.count(t, claim.DecisionLeaseHeld))
	}
	if n := h.store.Calls("Takeover"); n != 0 {
		t.Fatalf("%d takeovers tried of a live lease, want none", n)
	}
	r := checkOneRunner(t, h, id)
	if r.Version != 2 || strings.Contains(r.LeaseOwner, "copy") {
		t.Fatalf("record v%d, want v2: the live claimer's lease, never taken over", r.Version)
	}

	h.clock.Advance(time.Hour)
	h.invoke(t, h.claimer(t, claimerOpt{instance: "later"}), h.receive(t, 1)...)
	if n := h.logs.count(t, claim.DecisionDuplicate); n != 1 {
		t.Fatalf("%d duplicate decisions, want 1 (the copy, back after the lease)", n)
	}
	if st := h.gh.Stats(); st.JITCalls != 1 || h.spy.Calls() != 1 {
		t.Fatalf("%d JIT calls, %d provisionings; want 1 and 1", st.JITCalls, h.spy.Calls())
	}
	h.receiveNone(t)
}

// racingStore runs a reclaimer pass just before the takeover it wraps,
// between the claimer's look at the expired lease and its write.
type racingStore struct {
	claim.Store
	pass func()
}

func (s racingStore) Takeover(ctx context.Context, id, held int64, owner string, until, now time.Time) (job.Lease, job.Record, error) {
	s.pass()
	return s.Store.Takeover(ctx, id, held, owner, until, now)
}

// TestReclaimerStillRecovers: the reclaimer remains the backstop of a dead
// claimer, unchanged: when the message is gone too, and when it takes the
// job back before the redelivered message (or between that message's look
// and its takeover). Either way exactly one claim follows: the message
// whose lease was taken back is a duplicate.
func TestReclaimerStillRecovers(t *testing.T) {
	t.Parallel()
	for i, tc := range []string{"message gone", "reclaimer first", "reclaimer between look and takeover"} {
		t.Run(tc, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			ctx := context.Background()
			id := int64(9721 + i)
			dead := diesHolding(t, h, id, false)
			rc, err := reclaim.New(reclaim.Config{Store: h.store, Queue: h.queue, Now: h.clock.Now, Rand: random.New(1), Logger: h.log})
			if err != nil {
				t.Fatal(err)
			}
			requeued := 0
			pass := func() {
				rep, err := rc.Run(ctx)
				if err != nil {
					t.Error(err)
				}
				requeued += rep.Requeued[reclaim.LeaseExpired]
			}
			// Past the lease and the record's sweep_at: the sweep finds it.
			h.clock.Set(job.FromMillis(max(dead.LeaseExpiresAt, dead.SweepAt)).Add(time.Second))
			c := h.claimer(t, claimerOpt{instance: "next"})
			switch tc {
			case "message gone":
				pass()
			case "reclaimer first":
				pass()
				h.esm.redeliver()
			case "reclaimer between look and takeover":
				h.esm.redeliver()
				c = h.claimer(t, claimerOpt{instance: "next", store: racingStore{Store: h.store, pass: pass}})
			}
			for range 3 {
				if batch := h.esm.receive(10); len(batch) > 0 {
					h.invoke(t, c, batch...)
				}
			}
			if requeued != 1 {
				t.Fatalf("the reclaimer re-enqueued %d jobs, want 1", requeued)
			}
			checkOneRunner(t, h, id)
			if h.spy.Calls() != 2 || h.gh.Stats().JITCalls < 2 {
				t.Fatalf("%d provisionings, want the dead one and one more", h.spy.Calls())
			}
			if tc != "message gone" && h.logs.count(t, claim.DecisionDuplicate) != 1 {
				t.Fatalf("%d duplicate decisions, want 1 (the message whose lease was taken back)", h.logs.count(t, claim.DecisionDuplicate))
			}
			h.receiveNone(t)
		})
	}
}

// TestTakeoverRefusedIsDecidedOnce: a takeover refused with the record
// still claiming at the version held (a store that disagrees on the
// expiry) is a duplicate, not another takeover: no loop.
func TestTakeoverRefusedIsDecidedOnce(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	const id = 9731
	dead := diesHolding(t, h, id, false)
	h.esm.redeliver()
	h.clock.Set(job.FromMillis(dead.LeaseExpiresAt).Add(time.Second))
	refusing := refusingStore{Store: h.store, cur: dead}
	h.invoke(t, h.claimer(t, claimerOpt{instance: "next", store: &refusing}), h.receive(t, 1)...)
	if refusing.calls != 1 || h.logs.count(t, claim.DecisionDuplicate) != 1 {
		t.Fatalf("%d takeovers, %d duplicate decisions; want 1 and 1", refusing.calls, h.logs.count(t, claim.DecisionDuplicate))
	}
}

// refusingStore refuses every takeover with cur.
type refusingStore struct {
	claim.Store
	cur   job.Record
	calls int
}

func (s *refusingStore) Takeover(_ context.Context, id, _ int64, _ string, _, _ time.Time) (job.Lease, job.Record, error) {
	s.calls++
	return job.Lease{}, job.Record{}, &job.ConflictError{Op: "take over lease of", JobID: id, Current: s.cur, Found: true}
}

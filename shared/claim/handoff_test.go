package claim_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
)

// queueSpy is the claims queue, counting sends; with failSend every Send
// is refused (SQS down).
type queueSpy struct {
	claim.Queue
	failSend bool
	sends    int
}

func (q *queueSpy) Send(ctx context.Context, m job.Message, d time.Duration) error {
	q.sends++
	if q.failSend {
		return errors.New("sqs: service unavailable")
	}
	return q.Queue.Send(ctx, m, d)
}

// failingRelease is the store with Release failing (DynamoDB throttled).
type failingRelease struct{ claim.Store }

func (failingRelease) Release(context.Context, job.Lease, job.Retry, time.Time) error {
	return errors.New("dynamodb: ProvisionedThroughputExceededException")
}

// seededBadGateway is a harness with job id recorded and its message
// queued, where GitHub answers the next n JIT requests (every one when
// n < 1) 502: the attempt fails retryably and hands off.
func seededBadGateway(t *testing.T, id int64, n int) *harness {
	t.Helper()
	h := setup(t, setupOpt{})
	h.gh.Fail(ghfake.RouteRepoJIT, n, ghfake.ServerError(http.StatusBadGateway))
	h.seed(t, id)
	return h
}

// stillQueued asserts that the message with id is on the claims queue
// again: reported, so the event source mapping did not delete it.
func stillQueued(t *testing.T, h *harness, id string) {
	t.Helper()
	if back := h.receive(t, 1); back[0].MessageId != id {
		t.Fatalf("received %s, want the original %s back", back[0].MessageId, id)
	}
}

// TestSendFailureKeepsTheLease: the hand-off sends the next message FIRST.
// When that send fails, nothing is released: the record stays claiming
// under the lease, with the sweep_at it had before the lease (the lease
// writes no sweep index entry), so the reclaimer finds it at that moment,
// or at the lease's expiry if later. Releasing first would leave a queued
// record with no message behind it, found only a queued grace after the
// retry's due time, later still.
func TestSendFailureKeepsTheLease(t *testing.T) {
	t.Parallel()
	const id = 9301
	h := seededBadGateway(t, id, 0)
	staleFrom := h.get(t, id).SweepAt

	q := &queueSpy{Queue: h.queue, failSend: true}
	c := h.claimer(t, claimerOpt{queue: q, instance: "handoff"})
	now := h.clock.Now()
	msgs := h.receive(t, 1)
	resp := h.invoke(t, c, msgs...)
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("batch item failures %v, want the message reported (its hand-off failed)", resp.BatchItemFailures)
	}
	if q.sends != 1 {
		t.Fatalf("%d sends attempted, want 1", q.sends)
	}
	stillQueued(t, h, msgs[0].MessageId)
	r := h.get(t, id)
	leaseEnd := job.Millis(now.Add(claim.DefaultLease))
	if r.State != job.Claiming || r.Version != 2 || r.LeaseOwner == "" || r.LeaseExpiresAt != leaseEnd {
		t.Fatalf("record %s version %d owner %q lease_expires_at %d, want claiming version 2 under its lease until %d: "+
			"a failed send must release nothing", r.State, r.Version, r.LeaseOwner, r.LeaseExpiresAt, leaseEnd)
	}
	if r.SweepAt != staleFrom {
		t.Errorf("sweep_at %d, want the record's %d from before the lease, so the reclaimer finds the job then", r.SweepAt, staleFrom)
	}
}

// TestReleaseFailureKeepsTheOriginal: the original message goes LAST (the
// event source mapping deletes it once the invocation answers without
// reporting it), after the release landed. When the release fails
// (DynamoDB throttled), the original must still be there for SQS to
// redeliver: the message is reported as a batch item failure.
func TestReleaseFailureKeepsTheOriginal(t *testing.T) {
	t.Parallel()
	const id = 9302
	h := seededBadGateway(t, id, 0)
	q := &queueSpy{Queue: h.queue}
	c := h.claimer(t, claimerOpt{store: failingRelease{h.store}, queue: q, instance: "handoff"})
	msgs := h.receive(t, 1)
	resp := h.invoke(t, c, msgs...)
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("batch item failures %v, want the message reported", resp.BatchItemFailures)
	}
	if q.sends != 1 {
		t.Fatalf("%d sends, want the next message sent first", q.sends)
	}
	if r := h.get(t, id); r.State != job.Claiming || r.Version != 2 {
		t.Fatalf("record %s v%d, want claiming v2 (the release failed)", r.State, r.Version)
	}
}

// releaseInFlight is the store with something happening between the
// hand-off's send and its Release: during holds the Release up (a slow,
// SDK-retried write) once.
type releaseInFlight struct {
	claim.Store
	during func()
}

func (s *releaseInFlight) Release(ctx context.Context, l job.Lease, r job.Retry, now time.Time) error {
	if f := s.during; f != nil {
		s.during = nil
		f()
	}
	return s.Store.Release(ctx, l, r, now)
}

// TestHandOffMessageBeforeItsRelease: the hand-off's message reaches
// another claimer while the sender's Release is still in flight. It must
// carry a version past the lease's (the record is claiming at the lease's
// version until the Release lands): then it is early, reported and
// hidden, and claims the job once the Release has landed. A message at
// the lease's own version looked like a duplicate of the claim in
// progress and was deleted, leaving the released record with no message:
// found only by the reclaimer, a queued grace after its due time.
func TestHandOffMessageBeforeItsRelease(t *testing.T) {
	t.Parallel()
	const id = 9303
	h := seededBadGateway(t, id, 1)
	st := &releaseInFlight{Store: h.store}
	var early []events.SQSBatchItemFailure
	st.during = func() {
		early = h.invoke(t, h.claimer(t, claimerOpt{instance: "other"}), h.receive(t, 1)...).BatchItemFailures
	}
	if resp := h.invoke(t, h.claimer(t, claimerOpt{store: st, instance: "handoff"}), h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("sender: batch item failures %v, want none (retry handed off)", resp.BatchItemFailures)
	}
	if len(early) != 1 {
		t.Fatalf("the hand-off's message, received before the Release landed: batch item failures %v, want it reported (early), not dropped", early)
	}
	r := h.get(t, id)
	if r.State != job.Queued || r.Attempt != 1 {
		t.Fatalf("record %s attempt %d, want queued after attempt 1", r.State, r.Attempt)
	}
	h.clock.Advance(claim.DefaultLease + time.Minute)
	if resp := h.invoke(t, h.claimer(t, claimerOpt{instance: "later"}), h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the hand-off's message back: batch item failures %v, want none", resp.BatchItemFailures)
	}
	if r := h.get(t, id); r.State != job.Claimed || r.Attempt != 2 {
		t.Fatalf("record %s attempt %d, want claimed by attempt 2", r.State, r.Attempt)
	}
}

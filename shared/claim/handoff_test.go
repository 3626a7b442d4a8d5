package claim_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/store"
)

// queueSpy is the claims queue, recording sends and deletes; with
// failSend every Send is refused (SQS down).
type queueSpy struct {
	claim.Queue
	failSend bool
	sends    int
	deletes  []string
}

func (q *queueSpy) Send(ctx context.Context, m job.Message, d time.Duration) error {
	q.sends++
	if q.failSend {
		return errors.New("sqs: service unavailable")
	}
	return q.Queue.Send(ctx, m, d)
}

func (q *queueSpy) Delete(ctx context.Context, receipt string) error {
	q.deletes = append(q.deletes, receipt)
	return q.Queue.Delete(ctx, receipt)
}

// failingRelease is the store with Release failing (DynamoDB throttled).
type failingRelease struct{ claim.Store }

func (failingRelease) Release(context.Context, store.Lease, store.Retry, time.Time) error {
	return errors.New("dynamodb: ProvisionedThroughputExceededException")
}

// claimerWith is h.claimer over another store and queue.
func claimerWith(t *testing.T, h *harness, st claim.Store, q claim.Queue) *claim.Claimer {
	t.Helper()
	gh, rates := newGitHub(t, h)
	c, err := claim.New(claim.Deps{
		Store: st, Queue: q, GitHub: gh, Provisioner: h.spy, Policy: newPolicy(), Rates: rates,
		Now: h.clock.Now, Rand: rand.New(rand.NewPCG(seed1, seed2)), Log: h.log,
		Metrics: obs.NewMetrics(h.logs, map[string]string{"function": "claimer"}, h.clock.Now),
	}, claim.Options{Pools: h.pools, InstanceID: "handoff"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSendFailureKeepsTheLease: the hand-off sends the next message FIRST.
// When that send fails, nothing is released: the record stays claiming
// under the lease (whose expiry is its sweep_at), so the reclaimer finds it
// as soon as the lease runs out. Releasing first would leave a queued
// record with no message behind it, found only after the queued grace.
func TestSendFailureKeepsTheLease(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	h.gh.Fail(ghfake.RouteRepoJIT, 0, ghfake.ServerError(http.StatusBadGateway))
	const id = 9301
	h.seed(t, id)

	q := &queueSpy{Queue: h.queue, failSend: true}
	c := claimerWith(t, h, h.store, q)
	now := h.clock.Now()
	resp := h.invoke(t, c, h.receive(t, 1)...)
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("batch item failures %v, want the message reported (its hand-off failed)", resp.BatchItemFailures)
	}
	if q.sends != 1 || len(q.deletes) != 0 {
		t.Fatalf("%d sends attempted and %d messages deleted, want 1 and none", q.sends, len(q.deletes))
	}
	r := h.get(t, id)
	leaseEnd := job.Millis(now.Add(claim.DefaultLease))
	if r.State != job.Claiming || r.Version != 2 || r.LeaseOwner == "" || r.LeaseExpiresAt != leaseEnd {
		t.Fatalf("record %s version %d owner %q lease_expires_at %d, want claiming version 2 under its lease until %d: "+
			"a failed send must release nothing", r.State, r.Version, r.LeaseOwner, r.LeaseExpiresAt, leaseEnd)
	}
	if r.SweepAt != leaseEnd {
		t.Errorf("sweep_at %d, want the lease's expiry %d, so the reclaimer finds the job then", r.SweepAt, leaseEnd)
	}
}

// TestReleaseFailureKeepsTheOriginal: the hand-off deletes the original
// message LAST, after the release landed. When the release fails (DynamoDB
// throttled), the original must still be there for SQS to redeliver: the
// message is reported as a batch item failure and nothing is deleted.
func TestReleaseFailureKeepsTheOriginal(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	h.gh.Fail(ghfake.RouteRepoJIT, 0, ghfake.ServerError(http.StatusBadGateway))
	const id = 9302
	h.seed(t, id)
	q := &queueSpy{Queue: h.queue}
	c := claimerWith(t, h, failingRelease{h.store}, q)
	resp := h.invoke(t, c, h.receive(t, 1)...)
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("batch item failures %v, want the message reported", resp.BatchItemFailures)
	}
	if q.sends != 1 {
		t.Fatalf("%d sends, want the next message sent first", q.sends)
	}
	if len(q.deletes) != 0 {
		t.Fatalf("deleted %v before the release landed, want the original kept", q.deletes)
	}
	if r := h.get(t, id); r.State != job.Claiming || r.Version != 2 {
		t.Fatalf("record %s v%d, want claiming v2 (the release failed)", r.State, r.Version)
	}
}

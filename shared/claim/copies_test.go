package claim_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
)

// gatedStore holds every Acquire until n of them have arrived, so the
// copies of a message in one batch all reach the lease write together: the
// interleaving that lets both through when the lease owner is shared by
// the invocation (the second write, refused, looks like an SDK retry of
// the first).
type gatedStore struct {
	claim.Store
	t   *testing.T
	mu  sync.Mutex
	n   int // Acquires still to wait for
	all chan struct{}
}

func newGatedStore(t *testing.T, next claim.Store, n int) *gatedStore {
	return &gatedStore{Store: next, t: t, n: n, all: make(chan struct{})}
}

func (g *gatedStore) Acquire(ctx context.Context, id, version int64, owner string, until, now time.Time) (job.Lease, job.Record, error) {
	g.mu.Lock()
	if g.n > 0 {
		if g.n--; g.n == 0 {
			close(g.all)
		}
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(30 * time.Second):
		g.t.Errorf("the copies' lease writes never met: the batch was not handled concurrently")
	}
	return g.Store.Acquire(ctx, id, version, owner, until, now)
}

// TestTwoCopiesInOneBatch: one batch holds two copies of one job's message
// (distinct SQS message ids and receipt handles, same body), handled at
// once by two workers of one invocation. Exactly one copy takes the lease:
// one JIT config, one machine or dispatch message, the record claimed; the
// other copy is a duplicate and deleted. Also when the copies are one SQS
// message delivered twice (at-least-once: the same message id, a receipt
// handle each): the lease owner tells them apart by the receipt, since
// the message id alone would make them one owner, and the second lease
// write would pass as an SDK retry of the first (two runners, two machines).
func TestTwoCopiesInOneBatch(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name   string
		ec2    bool
		sameID bool // one message delivered twice, not two messages
	}{
		{name: "dispatch"},
		{name: "ec2", ec2: true},
		{name: "one message delivered twice", sameID: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: tc.ec2})
			id := int64(9601 + i)
			h.seed(t, id)
			var batch []events.SQSMessage
			if tc.sameID {
				// SQS hands one message out twice: the same id and body,
				// a receipt handle of its own each.
				batch = h.receive(t, 1)
				again := batch[0]
				again.ReceiptHandle += "-again"
				batch = append(batch, again)
			} else {
				// The copy: the same body sent again, as an SDK-retried
				// SendMessage whose first answer was lost would.
				if err := h.queue.Send(context.Background(), job.Message{JobID: id, Version: 1}, 0); err != nil {
					t.Fatal(err)
				}
				batch = h.receive(t, 2)
				if batch[0].MessageId == batch[1].MessageId || batch[0].ReceiptHandle == batch[1].ReceiptHandle || batch[0].Body != batch[1].Body {
					t.Fatalf("batch %+v, want two copies of one body with distinct ids and receipts", batch)
				}
			}
			c := h.claimer(t, claimerOpt{concurrency: 2, store: newGatedStore(t, h.store, 2)})

			if resp := h.invoke(t, c, batch...); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("batch item failures %v, want none", resp.BatchItemFailures)
			}
			if r := h.get(t, id); r.State != job.Claimed || r.Attempt != 1 || r.Version != 2 {
				t.Fatalf("record %s attempt %d version %d, want claimed, attempt 1, version 2", r.State, r.Attempt, r.Version)
			}
			if n := h.gh.Stats().JITCalls; n != 1 {
				t.Fatalf("%d JIT calls, want 1", n)
			}
			if rs := h.gh.Runners(); len(rs) != 1 {
				t.Fatalf("runners %v, want exactly one", rs)
			}
			if n := h.spy.Calls(); n != 1 {
				t.Fatalf("%d provision calls, want 1", n)
			}
			if n := h.instances(id); n != 1 {
				t.Fatalf("%d machines (instances or dispatch messages), want 1", n)
			}
			if dups := h.logs.count(t, claim.DecisionDuplicate); dups != 1 {
				t.Fatalf("%d duplicate decisions, want 1 (the losing copy)", dups)
			}
			h.receiveNone(t)
		})
	}
}

package claim_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
)

// failingAcquire is the store whose lease writes fail, as DynamoDB's do
// while it throttles a table.
type failingAcquire struct{ claim.Store }

func (failingAcquire) Acquire(context.Context, int64, int64, string, time.Time, time.Time) (job.Lease, job.Record, error) {
	return job.Lease{}, job.Record{}, errors.New("ProvisionedThroughputExceededException: throttled")
}

// TestInfraErrorsComeBackSpread: messages that hit an infrastructure error
// come back after RetrySoon plus jitter, not all at once: in lockstep they
// would hit the throttled table together on every receive and reach the
// dead-letter queue together.
func TestInfraErrorsComeBackSpread(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	for id := int64(7001); id <= 7006; id++ {
		h.seed(t, id)
	}
	c := h.claimer(t, claimerOpt{store: failingAcquire{h.store}, concurrency: 1})
	msgs := h.receive(t, 6)
	resp := h.invoke(t, c, msgs...)
	if got := len(resp.BatchItemFailures); got != 6 {
		t.Fatalf("%d batch item failures, want all 6 back in the queue", got)
	}
	seen := map[time.Duration]bool{}
	for _, m := range msgs {
		d, ok := h.queue.Visibility(m.ReceiptHandle)
		if !ok {
			t.Fatalf("message %s: no visibility change, want it back soon", m.MessageId)
		}
		if d < claim.DefaultRetrySoon || d > 2*claim.DefaultRetrySoon {
			t.Errorf("message %s back after %s, want within [%s, %s]", m.MessageId, d, claim.DefaultRetrySoon, 2*claim.DefaultRetrySoon)
		}
		seen[d] = true
	}
	if len(seen) < 3 {
		t.Errorf("6 messages came back after only %d distinct delays %v: lockstep", len(seen), seen)
	}
}

// TestInfraErrorsBackOffByReceiveCount: every receive of a message
// counts toward the claims queue's maxReceiveCount (5, template.yaml):
// past it SQS moves the message to the dead-letter queue. A message
// failing on a throttled table came back after a flat 10–20 s, so about a
// minute of throttling dead-lettered every claim in flight (the job found
// again only after the queued grace, the DLQ alarm up for an outage that
// crashed nothing). The wait doubles with each receive (its
// ApproximateReceiveCount): the four receives before the fifth span at
// least RetrySoon × (1+2+4+8), 150 s.
func TestInfraErrorsBackOffByReceiveCount(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	h.seed(t, 7010)
	c := h.claimer(t, claimerOpt{store: failingAcquire{h.store}, concurrency: 1})
	var total time.Duration
	for n := 1; n <= 4; n++ {
		msgs := h.receive(t, 1)
		if got := msgs[0].Attributes["ApproximateReceiveCount"]; got != strconv.Itoa(n) {
			t.Fatalf("receive %d: ApproximateReceiveCount %q", n, got)
		}
		if resp := h.invoke(t, c, msgs...); len(resp.BatchItemFailures) != 1 {
			t.Fatalf("receive %d: %d batch item failures, want the message back", n, len(resp.BatchItemFailures))
		}
		d, ok := h.queue.Visibility(msgs[0].ReceiptHandle)
		low := claim.DefaultRetrySoon << (n - 1)
		if !ok || d < low || d > 2*low {
			t.Fatalf("receive %d: back after %s (set %v), want within [%s, %s]", n, d, ok, low, 2*low)
		}
		total += d
	}
	if min := 15 * claim.DefaultRetrySoon; total < min {
		t.Fatalf("four failed receives span %s, want at least %s before the fifth (maxReceiveCount) dead-letters the claim", total, min)
	}
}

// TestSoonAfterIsCapped: past a few receives the wait stops growing.
func TestSoonAfterIsCapped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{0, 10 * time.Second}, {1, 10 * time.Second}, {2, 20 * time.Second}, {5, 160 * time.Second}, {6, claim.MaxRetrySoon}, {1000, claim.MaxRetrySoon}} {
		if got := claim.SoonAfter(claim.DefaultRetrySoon, tc.n); got != tc.want {
			t.Errorf("SoonAfter(%s, %d) = %s, want %s", claim.DefaultRetrySoon, tc.n, got, tc.want)
		}
	}
}

// startsBetween is GitHub as the claimer sees it when a dispatch host picks
// up an earlier attempt's message right after the claimer looked: the
// runner it found offline is online and busy by the time it deletes it.
type startsBetween struct {
	claim.GitHub
	start func(name string)
}

func (g startsBetween) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	r, err := g.GitHub.FindRunner(ctx, installationID, scope, owner, repo, name)
	if err == nil {
		g.start(name)
	}
	return r, err
}

// TestRunnerThatStartsBeforeItsDeleteIsReused: GitHub refuses to delete a
// runner that is running a job (422). That runner is ours and at work: the
// job is claimed, not failed.
func TestRunnerThatStartsBeforeItsDeleteIsReused(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	const id = 7101
	h.seed(t, id)
	// Attempt 1 registers the runner; its provisioning fails for now.
	h.spy.set(func(n int) error {
		if n == 1 {
			return awsErr("SendMessage", "InternalError", "try again")
		}
		return nil
	}, nil)
	h.invoke(t, h.claimer(t, claimerOpt{}), h.receive(t, 1)...)
	if r := h.get(t, id); r.State != job.Queued {
		t.Fatalf("after attempt 1: %s, want queued for a retry", r.State)
	}
	h.clock.Advance(h.lastSend(t).Delay)

	c := h.claimer(t, claimerOpt{github: func(gh claim.GitHub) claim.GitHub {
		return startsBetween{GitHub: gh, start: func(name string) {
			if err := h.gh.SetRunner(name, "online", true); err != nil {
				t.Error(err)
			}
		}}
	}})
	h.invoke(t, c, h.receive(t, 1)...)
	r := h.get(t, id)
	if r.State != job.Claimed {
		t.Fatalf("record %s (%s: %s), want claimed: the runner is at work", r.State, r.LastErrorClass, r.LastError)
	}
	if rs := h.gh.Runners(); len(rs) != 1 || !rs[0].Busy {
		t.Fatalf("runners %v, want ours, busy", rs)
	}
	if n := h.spy.Calls(); n != 1 {
		t.Fatalf("%d provisioning calls, want 1: the running runner needs no second machine", n)
	}
}

package claim_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
)

// failingGet is the real store whose reads fail, as DynamoDB's do while it
// throttles a table.
type failingGet struct{ claim.Store }

func (failingGet) Get(context.Context, int64) (job.Record, error) {
	return job.Record{}, errors.New("ProvisionedThroughputExceededException: throttled")
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
	gh, rates := newGitHub(t, h)
	c, err := claim.New(claim.Deps{
		Store: failingGet{h.store}, Queue: h.queue, GitHub: gh, Provisioner: h.spy,
		Policy: backoff.Default(), Rates: rates, Now: h.clock.Now,
		Rand: rand.New(rand.NewPCG(seed1, seed2)), Log: h.log,
		Metrics: obs.NewMetrics(io.Discard, nil, h.clock.Now),
	}, claim.Options{Pools: h.pools, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	msgs := h.receive(t, 6)
	resp := h.invoke(t, c, msgs...)
	if got := len(resp.BatchItemFailures); got != 6 {
		t.Fatalf("%d batch item failures, want all 6 back in the queue", got)
	}
	seen := map[time.Duration]bool{}
	for _, m := range msgs {
		d, ok := h.rec.Visibility(m.ReceiptHandle)
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

package provision

import (
	"context"
	"testing"

	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestFleetQuotaWithOneUnsupportedOptionIsRetried: the account's on-demand
// vCPU quota is exhausted (busy hour: every option answers
// VcpuLimitExceeded, the on-demand twin of MaxSpotInstanceCountExceeded),
// while the preferred type is not offered in the job's zone (Unsupported).
// That one option's code used to decide the whole launch: the job failed
// for good, although every other option only lacked capacity for now.
func TestFleetQuotaWithOneUnsupportedOptionIsRetried(t *testing.T) {
	t.Parallel()
	inst, params := newFleetEC2(), &fakeParameters{}
	inst.refuse["on-demand/c7g.large/subnet-a"] = "Unsupported"
	inst.refuse["on-demand/*/*"] = "VcpuLimitExceeded"
	_, err := NewEC2(inst, params, nil).Provision(context.Background(), request(withCapacity(pool.CapacityOnDemand), 42))
	if err == nil {
		t.Fatal("want a launch failure")
	}
	if f := failure.Classify(err); f.Class == failure.NonRetryable {
		t.Errorf("class %s (%s): a quota/capacity shortage on 5 of 6 options fails the job for good", f.Class, f.Reason)
	}
}

// TestFleetTransientOptionErrorsAreNotMaskedByOneUnsupported: the
// preferred type is not offered in the job's zone (Unsupported, first in
// the errorSet); every other option failed with a code that a later attempt
// can get past: EC2 server errors and throttling (CreateFleetError.errorCode
// takes any code of EC2's error-code list), or a code the classifier does
// not know (DESIGN: unknown is retried). The first option's code decides
// the whole launch: the job failed for good and its runner was deleted.
func TestFleetTransientOptionErrorsAreNotMaskedByOneUnsupported(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"InternalError", "Unavailable", "RequestLimitExceeded", "InsufficientCapacityOnHost"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			inst, params := newFleetEC2(), &fakeParameters{}
			inst.refuse["on-demand/c7g.large/subnet-a"] = "Unsupported"
			inst.refuse["on-demand/*/*"] = code
			_, err := NewEC2(inst, params, nil).Provision(context.Background(), request(withCapacity(pool.CapacityOnDemand), 42))
			if err == nil {
				t.Fatal("want a launch failure")
			}
			if f := failure.Classify(err); !f.Retryable() {
				t.Errorf("class %s: 5 of 6 options failed with %s, yet the job fails for good", f.Class, code)
			}
		})
	}
}

// TestFleetOfPermanentOptionErrorsFailsForGood: when every option's code
// is one no retry gets past (a type not offered, an operation the role may
// not make), the launch still fails for good.
func TestFleetOfPermanentOptionErrorsFailsForGood(t *testing.T) {
	t.Parallel()
	inst, params := newFleetEC2(), &fakeParameters{}
	inst.refuse["on-demand/c7g.large/subnet-a"] = "Unsupported"
	inst.refuse["on-demand/*/*"] = "UnauthorizedOperation"
	_, err := NewEC2(inst, params, nil).Provision(context.Background(), request(withCapacity(pool.CapacityOnDemand), 42))
	if f := failure.Classify(err); err == nil || f.Class != failure.NonRetryable {
		t.Errorf("err %v, class %s: every option refused for good, want non_retryable", err, f.Class)
	}
}

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

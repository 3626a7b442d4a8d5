package provision

import (
	"context"
	"testing"
)

// TestEC2EveryAttemptAgreesOnTheMachine: with several live instances tagged
// for one job (only a launch outside ClientToken protection makes that),
// Provision and Running name the same one, the smallest id, whatever order
// EC2 lists them in, so two attempts never pick different machines.
func TestEC2EveryAttemptAgreesOnTheMachine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing []string
	}{
		{"smallest first", []string{"i-0aaa", "i-0bbb", "i-0ccc"}},
		{"smallest last", []string{"i-0ccc", "i-0bbb", "i-0aaa"}},
		{"smallest in the middle", []string{"i-0bbb", "i-0aaa", "i-0ccc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupEC2(t)
			f.inst.existing = tt.existing
			res, err := f.adapter.Provision(context.Background(), request(ec2Pool(), 42))
			if err != nil {
				t.Fatal(err)
			}
			if res != (Result{InstanceID: "i-0aaa", Reused: true}) {
				t.Errorf("Provision: got %+v, want i-0aaa reused", res)
			}
			id, err := f.adapter.Running(context.Background(), request(ec2Pool(), 42))
			if err != nil || id != "i-0aaa" {
				t.Errorf("Running: got %q, %v; want i-0aaa", id, err)
			}
			if len(f.inst.fleets) != 0 {
				t.Errorf("CreateFleet calls: got %d, want none", len(f.inst.fleets))
			}
		})
	}
}

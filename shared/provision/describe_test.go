package provision

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestEC2WaitsForAFreshInstanceToBeKnown: DescribeInstances may not know
// an instance CreateFleet has just launched. The adapter reads it again
// after 5 s, doubling, for at most two minutes of waiting (as the SDK's
// InstanceExists waiter did), and only then puts the JIT config.
func TestEC2WaitsForAFreshInstanceToBeKnown(t *testing.T) {
	t.Parallel()
	s := time.Second
	tests := []struct {
		name       string
		misses     int
		wantSleeps []time.Duration
		wantErr    string
	}{
		{name: "known at once", misses: 0},
		{name: "known at the third read", misses: 2, wantSleeps: []time.Duration{5 * s, 10 * s}},
		{name: "never known: gives up after two minutes", misses: 1000,
			wantSleeps: []time.Duration{5 * s, 10 * s, 20 * s, 40 * s, 45 * s}, wantErr: "still unknown to DescribeInstances after 2m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, params := newFleetEC2(), &fakeParameters{}
			inst.freshMisses = tt.misses
			a := NewEC2(inst, params, nil)
			var slept []time.Duration
			a.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
			res, err := a.Provision(context.Background(), request(ec2Pool(), 42))
			if !reflect.DeepEqual(slept, tt.wantSleeps) {
				t.Errorf("waits: got %v, want %v", slept, tt.wantSleeps)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				if len(params.puts) != 0 {
					t.Errorf("JIT config put for an instance EC2 never described")
				}
				return
			}
			if err != nil || res.InstanceID == "" || len(params.puts) != 1 {
				t.Fatalf("got %+v, %v with %d puts, want the launched instance and its config", res, err, len(params.puts))
			}
		})
	}
}

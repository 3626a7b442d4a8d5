package provision

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
)

// TestTerminateInstancesAsEC2 runs one table against the strict double
// (fleetEC2) and moto, so the double cannot drift from EC2: a
// TerminateInstances naming one instance EC2 does not know fails whole
// with InvalidInstanceID.NotFound and terminates none of the others ("If
// you specify multiple instances and the request fails (for example,
// because of a single incorrect instance ID), none of the instances are
// terminated"), and terminating an instance again succeeds ("This
// operation is idempotent"):
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_TerminateInstances.html
func TestTerminateInstancesAsEC2(t *testing.T) {
	t.Parallel()
	for _, side := range []struct {
		name  string
		setup func(t *testing.T) (inst Instances, launch func() string, state func(id string) string)
	}{
		{name: "double", setup: func(t *testing.T) (Instances, func() string, func(string) string) {
			e := newFleetEC2()
			launch := func() string {
				out, err := e.CreateFleet(context.Background(), fleetInput(request(ec2Pool(), 7001), ec2api.CapacityOnDemand, ""))
				if err != nil {
					t.Fatal(err)
				}
				return fleetInstance(out)
			}
			state := func(id string) string { e.mu.Lock(); defer e.mu.Unlock(); return e.state[id] }
			return e, launch, state
		}},
		{name: "moto", setup: func(t *testing.T) (Instances, func() string, func(string) string) {
			f := setupAWS(t)
			ctx := context.Background()
			imgs, err := provisiontest.Images(ctx, f.ec2)
			if err != nil || len(imgs) == 0 {
				t.Fatalf("DescribeImages: %v (%d images)", err, len(imgs))
			}
			launch := func() string {
				// Not 7001: TestScaffoldLaunchTemplateOnMoto counts that job's
				// instances on the same server, in parallel.
				id, err := provisiontest.RunInstance(ctx, f.ec2, imgs[0], "t3.micro", []ec2api.Tag{{Key: TagJobID, Value: "7101"}})
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			state := func(id string) string {
				s, err := provisiontest.State(ctx, f.ec2, id)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			return f.ec2, launch, state
		}},
	} {
		t.Run(side.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			inst, launch, state := side.setup(t)
			live, gone := launch(), "i-0123456789abcdef0"
			_, err := inst.TerminateInstances(ctx, &ec2api.TerminateInstancesInput{InstanceIDs: []string{live, gone}})
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != ec2api.CodeInstanceNotFound {
				t.Fatalf("terminate %s and unknown %s: got %v, want %s", live, gone, err, ec2api.CodeInstanceNotFound)
			}
			if s := state(live); !alive(s) || s == "" {
				t.Fatalf("%s is %q after a refused TerminateInstances, want it still pending or running", live, s)
			}
			for i := range 2 { // again: already terminated, still listed
				if _, err := inst.TerminateInstances(ctx, &ec2api.TerminateInstancesInput{InstanceIDs: []string{live}}); err != nil {
					t.Fatalf("terminate %s, call %d: %v", live, i+1, err)
				}
			}
			if s := state(live); s != ec2api.StateShuttingDown && s != ec2api.StateTerminated {
				t.Errorf("%s is %q after TerminateInstances, want shutting-down or terminated", live, s)
			}
		})
	}
}

// TestCleanupOfAFreshMachineSurvivesEventualConsistency: a claim that
// ends without a runner right after its launch cleans up a machine
// DescribeInstances lists but TerminateInstances does not know yet
// (InvalidInstanceID.NotFound). Cleanup asks again, as undo does; it
// once gave up at the first answer and left the machine running, booting
// towards a config it had just deleted.
func TestCleanupOfAFreshMachineSurvivesEventualConsistency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		misses    int
		wantSlept []time.Duration
		wantErr   bool
	}{
		{name: "known at once", misses: 0},
		{name: "unknown for two calls", misses: 2, wantSlept: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}},
		{name: "unknown for every call", misses: 1000, wantErr: true,
			wantSlept: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			inst := newFleetEC2()
			a := NewEC2(inst, &fakeParameters{}, nil)
			req := request(ec2Pool(), 42)
			res, err := a.Provision(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var slept []time.Duration
			a.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
			inst.terminateMisses = tc.misses
			err = a.Cleanup(ctx, req)
			if !reflect.DeepEqual(slept, tc.wantSlept) {
				t.Errorf("waits: got %v, want %v", slept, tc.wantSlept)
			}
			if tc.wantErr {
				var api smithy.APIError
				if !errors.As(err, &api) || api.ErrorCode() != ec2api.CodeInstanceNotFound {
					t.Fatalf("got %v, want EC2's InvalidInstanceID.NotFound once the asks are spent", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			if alive := inst.alive(); len(alive) != 0 {
				t.Errorf("machines %v left running after Cleanup, want %s terminated", alive, res.InstanceID)
			}
		})
	}
}

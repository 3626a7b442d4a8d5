package provision

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// TestEC2ProvisionAfterTheTokensMachineDied: attempt 1 launched i-0001
// (its RunInstances answer was lost, or the claim failed after it), the
// machine died before its runner connected (capacity taken back, a boot
// failure), so attempt 2 deleted the offline registration and comes with a
// fresh JIT config. The job-derived ClientToken still names the dead
// machine: EC2 answers it with i-0001, terminated, and launches nothing.
// Reporting that as provisioned would mark the job claimed with no machine
// at all: lost. A repeat of attempt 2 must still start nothing new.
func TestEC2ProvisionAfterTheTokensMachineDied(t *testing.T) {
	t.Parallel()
	inst := newFleetEC2()
	log, _ := logBuffer()
	e := NewEC2(inst, &fakeParameters{}, log)
	ctx := context.Background()

	first := request(ec2Pool(), 42)
	first.JITConfig = "config-of-registration-1"
	res, err := e.Provision(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	inst.mu.Lock()
	inst.state[res.InstanceID] = ec2api.StateTerminated
	inst.mu.Unlock()

	second := request(ec2Pool(), 42)
	second.JITConfig = "config-of-registration-2"
	for i := range 2 {
		res, err = e.Provision(ctx, second)
		if err != nil {
			t.Fatalf("attempt 2, call %d: %v", i+1, err)
		}
		live := inst.alive()
		if len(live) != 1 || live[res.InstanceID] == "" {
			t.Fatalf("attempt 2, call %d: got %+v with live machines %v, want exactly one live machine, the one reported", i+1, res, live)
		}
	}
}

// setupPoolChange returns the EC2 double, the adapter, and attempt 1 of
// job 42, launched with the pool on subnet-a.
func setupPoolChange(t *testing.T) (*fleetEC2, *EC2, Result) {
	t.Helper()
	inst := newFleetEC2()
	log, _ := logBuffer()
	e := NewEC2(inst, &fakeParameters{}, log)
	first, err := e.Provision(context.Background(), request(onSubnet("subnet-a"), 42))
	if err != nil {
		t.Fatal(err)
	}
	return inst, e, first
}

// setupPoolChangeMachineDied is setupPoolChange with attempt 1's machine
// terminated since: attempt 2 finds no machine of the job.
func setupPoolChangeMachineDied(t *testing.T) (*fleetEC2, *EC2) {
	t.Helper()
	inst, e, first := setupPoolChange(t)
	inst.mu.Lock()
	inst.state[first.InstanceID] = ec2api.StateTerminated
	inst.mu.Unlock()
	return inst, e
}

// onSubnet is ec2Pool with one subnet, as an operator might configure it.
func onSubnet(subnet string) pool.Pool {
	p := ec2Pool()
	p.Provisioner.Subnets = []string{subnet}
	return p
}

// TestEC2DoubleRefusesATokenWithOtherArguments pins the double's rule the
// tests below rely on: the same ClientToken with other arguments is an
// HTTP 400 IdempotentParameterMismatch, as on EC2.
func TestEC2DoubleRefusesATokenWithOtherArguments(t *testing.T) {
	t.Parallel()
	inst := newFleetEC2()
	ctx := context.Background()
	od := ec2api.CapacityOnDemand
	if _, err := inst.CreateFleet(ctx, fleetInput(request(onSubnet("subnet-a"), 42), od, "")); err != nil {
		t.Fatal(err)
	}
	_, err := inst.CreateFleet(ctx, fleetInput(request(onSubnet("subnet-b"), 42), od, ""))
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "IdempotentParameterMismatch" {
		t.Fatalf("got %v, want IdempotentParameterMismatch", err)
	}
	if f := failure.Classify(err); f.Status != 400 {
		t.Errorf("status: got %d, want 400", f.Status)
	}
}

// TestEC2ProvisionAfterThePoolChanged: attempt 1 launched the job's
// machine in subnet A, then the machine died and the operator moved the
// pool to subnet B. Attempt 2 sends the job's ClientToken with subnet B;
// EC2 answers IdempotentParameterMismatch, which used to be retried until
// the job was abandoned. Now attempt 2 gets one machine, in subnet B, and a
// repeat of it starts nothing new.
func TestEC2ProvisionAfterThePoolChanged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// jitChanges is true when attempt 2 carries a fresh registration
		// (its runner was regenerated), false when it repeats attempt 1's.
		jitChanges bool
	}{
		{name: "same registration"},
		{name: "fresh registration", jitChanges: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, e := setupPoolChangeMachineDied(t)
			ctx := context.Background()

			second := request(onSubnet("subnet-b"), 42)
			if tt.jitChanges {
				second.JITConfig = "fresh-" + jit
			}
			var ids []string
			for i := range 2 {
				res, err := e.Provision(ctx, second)
				if err != nil {
					t.Fatalf("attempt 2, call %d: %v", i+1, err)
				}
				live := inst.alive()
				if len(live) != 1 || live[res.InstanceID] == "" {
					t.Fatalf("attempt 2, call %d: got %+v with live machines %v, want exactly one live machine, the one reported", i+1, res, live)
				}
				ids = append(ids, res.InstanceID)
			}
			if ids[0] != ids[1] {
				t.Errorf("repeat of attempt 2: got %s then %s, want one machine", ids[0], ids[1])
			}
			if got := inst.alive()[ids[0]]; !strings.HasSuffix(got, "/subnet-b") {
				t.Errorf("subnet: got %q, want the pool's new subnet-b", got)
			}
		})
	}
}

// TestEC2ProvisionPoolChangedWhileTheMachineLives: the job's machine from
// attempt 1 (subnet A) is alive when attempt 2 (subnet B) comes. Whether
// the tag lookup sees it at once or, reading moments after the launch,
// only on the second look that a mismatch triggers, attempt 2 reuses it
// and starts no second machine.
func TestEC2ProvisionPoolChangedWhileTheMachineLives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		hidden bool // the first DescribeInstances misses the machine
	}{
		{name: "lookup sees the machine"},
		{name: "lookup sees it only after the mismatch", hidden: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, e, first := setupPoolChange(t)
			ctx := context.Background()
			if tt.hidden {
				inst.mu.Lock()
				inst.hidden[first.InstanceID] = 1 // visible from the second lookup on
				inst.mu.Unlock()
			}
			res, err := e.Provision(ctx, request(onSubnet("subnet-b"), 42))
			if err != nil {
				t.Fatalf("attempt 2: %v", err)
			}
			if res != (Result{InstanceID: first.InstanceID, Reused: true}) {
				t.Errorf("attempt 2: got %+v, want %s reused", res, first.InstanceID)
			}
			if live := inst.alive(); len(live) != 1 {
				t.Errorf("live machines: got %v, want only %s", live, first.InstanceID)
			}
		})
	}
}

// TestEC2RepeatAfterThePoolChangedMissesItsMachine: attempt 2 (subnet B)
// launched under LaunchKey after its job-derived token met attempt 1's
// arguments; its repeat (a claimer that died after the launch) looks for
// the machine twice, before the launch and after the mismatch, and
// DescribeInstances, eventually consistent, misses it both times. The
// repeat launches under LaunchKey again, and only because that key is a
// function of the job and the launch does EC2 answer with the machine it
// started: a key of its own per call started a second one.
func TestEC2RepeatAfterThePoolChangedMissesItsMachine(t *testing.T) {
	t.Parallel()
	inst, e := setupPoolChangeMachineDied(t)
	ctx := context.Background()
	second, err := e.Provision(ctx, request(onSubnet("subnet-b"), 42))
	if err != nil {
		t.Fatalf("attempt 2: %v", err)
	}
	inst.mu.Lock()
	inst.hidden[second.InstanceID] = 2 // both lookups of the repeat miss it
	inst.mu.Unlock()
	again, err := e.Provision(ctx, request(onSubnet("subnet-b"), 42))
	if err != nil {
		t.Fatalf("repeat of attempt 2: %v", err)
	}
	if again.InstanceID != second.InstanceID {
		t.Errorf("repeat of attempt 2: got %s, want %s, the machine attempt 2 started", again.InstanceID, second.InstanceID)
	}
	if live := inst.alive(); len(live) != 1 {
		t.Errorf("live machines: got %v, want only %s", live, second.InstanceID)
	}
}

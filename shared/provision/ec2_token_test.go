package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// tokenEC2 speaks EC2's documented ClientToken rules: a repeated token gets
// the first call's response again, "the only information that might vary
// is the state of the instance", and the token stays valid for at least 24 h
// after the instance terminated; a repeated token with other arguments gets
// HTTP 400 IdempotentParameterMismatch, which moto does not emit.
// DescribeInstances honours the job-id tag and instance-state-name filters;
// hidden makes it miss instances launched moments ago, as EC2's eventually
// consistent reads do.
type tokenEC2 struct {
	mu       sync.Mutex
	byToken  map[string]string // client token → instance id
	argsOf   map[string]string // client token → the first call's other arguments
	state    map[string]ec2types.InstanceStateName
	jobOf    map[string]string // instance id → job-id tag
	subnetOf map[string]string // instance id → subnet
	hidden   map[string]int    // instance id → lookups that still miss it
	launched int
}

func newTokenEC2() *tokenEC2 {
	return &tokenEC2{
		byToken: map[string]string{}, argsOf: map[string]string{}, state: map[string]ec2types.InstanceStateName{},
		jobOf: map[string]string{}, subnetOf: map[string]string{}, hidden: map[string]int{},
	}
}

// launchArgs is every argument of in but its ClientToken, as EC2 compares them.
func launchArgs(in *ec2.RunInstancesInput) string {
	args := *in
	args.ClientToken = nil
	b, err := json.Marshal(&args)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (e *tokenEC2) instance(id string) ec2types.Instance {
	return ec2types.Instance{InstanceId: aws.String(id), State: &ec2types.InstanceState{Name: e.state[id]}}
}

func (e *tokenEC2) RunInstances(_ context.Context, in *ec2.RunInstancesInput, _ ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tok := aws.ToString(in.ClientToken)
	if id, ok := e.byToken[tok]; ok {
		if e.argsOf[tok] != launchArgs(in) {
			return nil, provisiontest.ClientError("EC2", "RunInstances", "IdempotentParameterMismatch",
				"Arguments on this idempotent request are inconsistent with arguments used in previous request(s).")
		}
		return &ec2.RunInstancesOutput{OwnerId: aws.String(fakeAccount), Instances: []ec2types.Instance{e.instance(id)}}, nil
	}
	e.launched++
	id := fmt.Sprintf("i-%04d", e.launched)
	e.byToken[tok] = id
	e.argsOf[tok] = launchArgs(in)
	e.subnetOf[id] = aws.ToString(in.SubnetId)
	e.state[id] = ec2types.InstanceStateNamePending
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType == ec2types.ResourceTypeInstance {
			e.jobOf[id] = tagMap(ts.Tags)[TagJobID]
		}
	}
	return &ec2.RunInstancesOutput{OwnerId: aws.String(fakeAccount), Instances: []ec2types.Instance{e.instance(id)}}, nil
}

// Options gives the adapter the client's Region, as *ec2.Client does.
func (e *tokenEC2) Options() ec2.Options { return ec2.Options{Region: fakeRegion} }

func (e *tokenEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var job string
	states := map[string]bool{}
	for _, f := range in.Filters {
		switch aws.ToString(f.Name) {
		case "tag:" + TagJobID:
			job = f.Values[0]
		case "instance-state-name":
			for _, v := range f.Values {
				states[v] = true
			}
		}
	}
	r := ec2types.Reservation{OwnerId: aws.String(fakeAccount)}
	for id, j := range e.jobOf {
		if j != job || !states[string(e.state[id])] {
			continue
		}
		if e.hidden[id] > 0 {
			e.hidden[id]--
			continue
		}
		r.Instances = append(r.Instances, e.instance(id))
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{r}}, nil
}

func (e *tokenEC2) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range in.InstanceIds {
		e.state[id] = ec2types.InstanceStateNameTerminated
	}
	return &ec2.TerminateInstancesOutput{}, nil
}

func (e *tokenEC2) live() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ids []string
	for id, s := range e.state {
		if s == ec2types.InstanceStateNamePending || s == ec2types.InstanceStateNameRunning {
			ids = append(ids, id)
		}
	}
	return ids
}

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
	inst := newTokenEC2()
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
	inst.state[res.InstanceID] = ec2types.InstanceStateNameTerminated
	inst.mu.Unlock()

	second := request(ec2Pool(), 42)
	second.JITConfig = "config-of-registration-2"
	for i := range 2 {
		res, err = e.Provision(ctx, second)
		if err != nil {
			t.Fatalf("attempt 2, call %d: %v", i+1, err)
		}
		live := inst.live()
		if len(live) != 1 || res.InstanceID != live[0] {
			t.Fatalf("attempt 2, call %d: got %+v with live machines %v, want exactly one live machine, the one reported", i+1, res, live)
		}
	}
}

// setupPoolChange returns the EC2 double, the adapter, and attempt 1 of
// job 42, launched with the pool on subnet-a.
func setupPoolChange(t *testing.T) (*tokenEC2, *EC2, Result) {
	t.Helper()
	inst := newTokenEC2()
	log, _ := logBuffer()
	e := NewEC2(inst, &fakeParameters{}, log)
	first, err := e.Provision(context.Background(), request(onSubnet("subnet-a"), 42))
	if err != nil {
		t.Fatal(err)
	}
	return inst, e, first
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
	inst := newTokenEC2()
	ctx := context.Background()
	if _, err := inst.RunInstances(ctx, runInstancesInput(request(onSubnet("subnet-a"), 42))); err != nil {
		t.Fatal(err)
	}
	_, err := inst.RunInstances(ctx, runInstancesInput(request(onSubnet("subnet-b"), 42)))
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
			inst, e, first := setupPoolChange(t)
			ctx := context.Background()
			inst.mu.Lock()
			inst.state[first.InstanceID] = ec2types.InstanceStateNameTerminated
			inst.mu.Unlock()

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
				live := inst.live()
				if len(live) != 1 || res.InstanceID != live[0] {
					t.Fatalf("attempt 2, call %d: got %+v with live machines %v, want exactly one live machine, the one reported", i+1, res, live)
				}
				ids = append(ids, res.InstanceID)
			}
			if ids[0] != ids[1] {
				t.Errorf("repeat of attempt 2: got %s then %s, want one machine", ids[0], ids[1])
			}
			if got := inst.subnetOf[ids[0]]; got != "subnet-b" {
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
			if live := inst.live(); len(live) != 1 {
				t.Errorf("live machines: got %v, want only %s", live, first.InstanceID)
			}
		})
	}
}

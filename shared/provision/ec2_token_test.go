package provision

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// tokenEC2 speaks EC2's documented ClientToken rules: a repeated token gets
// the first call's response again, "the only information that might vary
// is the state of the instance", and the token stays valid for at least 24 h
// after the instance terminated. DescribeInstances honours the job-id tag
// and instance-state-name filters.
type tokenEC2 struct {
	mu       sync.Mutex
	byToken  map[string]string // client token → instance id
	state    map[string]ec2types.InstanceStateName
	jobOf    map[string]string // instance id → job-id tag
	launched int
}

func newTokenEC2() *tokenEC2 {
	return &tokenEC2{byToken: map[string]string{}, state: map[string]ec2types.InstanceStateName{}, jobOf: map[string]string{}}
}

func (e *tokenEC2) instance(id string) ec2types.Instance {
	return ec2types.Instance{InstanceId: aws.String(id), State: &ec2types.InstanceState{Name: e.state[id]}}
}

func (e *tokenEC2) RunInstances(_ context.Context, in *ec2.RunInstancesInput, _ ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tok := aws.ToString(in.ClientToken)
	if id, ok := e.byToken[tok]; ok {
		return &ec2.RunInstancesOutput{Instances: []ec2types.Instance{e.instance(id)}}, nil
	}
	e.launched++
	id := fmt.Sprintf("i-%04d", e.launched)
	e.byToken[tok] = id
	e.state[id] = ec2types.InstanceStateNamePending
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType == ec2types.ResourceTypeInstance {
			e.jobOf[id] = tagMap(ts.Tags)[TagJobID]
		}
	}
	return &ec2.RunInstancesOutput{Instances: []ec2types.Instance{e.instance(id)}}, nil
}

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
	var r ec2types.Reservation
	for id, j := range e.jobOf {
		if j == job && states[string(e.state[id])] {
			r.Instances = append(r.Instances, e.instance(id))
		}
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{r}}, nil
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

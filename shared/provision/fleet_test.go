package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
)

// fleetEC2 is an EC2 double as strict as EC2 where moto is lax:
//   - CreateFleet type instant answers per option: an override (instance
//     type × subnet) listed in refuse gets a CreateFleetError with that code
//     (InsufficientInstanceCapacity, ...) and the fleet moves to the next one,
//     on-demand by Priority (prioritized), spot in the given order; the first
//     option with capacity launches the one instance. The answer carries the
//     errors of the options tried and, maybe, the instance: an HTTP 200 either
//     way.
//   - ClientToken: the same token with the same arguments gets the first
//     answer again (an empty one too: a fleet that found no capacity is a
//     successful request), the same token with other arguments is HTTP 400
//     IdempotentParameterMismatch. moto honours neither.
//   - Only instance and fleet tag specifications are accepted for instant
//     fleets, one instance at most is asked for.
//   - RunInstances obeys the same capacity (on-demand), so the launch of old
//     code meets the same shortages.
//   - DescribeInstances by id knows every instance (any state); by the job
//     tag and state filters, as EC2; hidden makes the filter lookup miss a
//     fresh instance, as EC2's eventually consistent reads do.
type fleetEC2 struct {
	mu       sync.Mutex
	refuse   map[string]string // "market/type/subnet" ("*" for any) → error code
	byToken  map[string]*ec2.CreateFleetOutput
	argsOf   map[string]string
	fleets   []*ec2.CreateFleetInput
	state    map[string]ec2types.InstanceStateName
	jobOf    map[string]string
	where    map[string]string // instance id → "market/type/subnet"
	hidden   map[string]int
	launched int
}

func newFleetEC2() *fleetEC2 {
	return &fleetEC2{refuse: map[string]string{}, byToken: map[string]*ec2.CreateFleetOutput{}, argsOf: map[string]string{},
		state: map[string]ec2types.InstanceStateName{}, jobOf: map[string]string{}, where: map[string]string{}, hidden: map[string]int{}}
}

// Options gives the adapter the client's Region, as *ec2.Client does.
func (e *fleetEC2) Options() ec2.Options { return ec2.Options{Region: fakeRegion} }

func (e *fleetEC2) refused(market, typ, subnet string) string {
	for _, k := range []string{market + "/" + typ + "/" + subnet, market + "/*/" + subnet, market + "/" + typ + "/*", market + "/*/*"} {
		if c := e.refuse[k]; c != "" {
			return c
		}
	}
	return ""
}

func (e *fleetEC2) start(market, typ, subnet string, tags []ec2types.TagSpecification) string {
	e.launched++
	id := fmt.Sprintf("i-%04d", e.launched)
	e.state[id] = ec2types.InstanceStateNamePending
	e.where[id] = market + "/" + typ + "/" + subnet
	for _, ts := range tags {
		if ts.ResourceType == ec2types.ResourceTypeInstance {
			e.jobOf[id] = tagMap(ts.Tags)[TagJobID]
		}
	}
	return id
}

func (e *fleetEC2) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fleets = append(e.fleets, in)
	invalid := func(msg string) error {
		return provisiontest.ClientError("EC2", "CreateFleet", "InvalidParameterValue", msg)
	}
	tok := aws.ToString(in.ClientToken)
	if len(tok) > 64 {
		return nil, invalid("ClientToken: at most 64 ASCII characters")
	}
	args := *in
	args.ClientToken = nil
	b, _ := json.Marshal(&args)
	if out, ok := e.byToken[tok]; ok && tok != "" {
		if e.argsOf[tok] != string(b) {
			return nil, provisiontest.ClientError("EC2", "CreateFleet", "IdempotentParameterMismatch",
				"Arguments on this idempotent request are inconsistent with arguments used in previous request(s).")
		}
		return out, nil
	}
	if in.Type != ec2types.FleetTypeInstant || in.TargetCapacitySpecification == nil || aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity) != 1 {
		return nil, invalid("want an instant fleet of one instance")
	}
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType != ec2types.ResourceTypeInstance && ts.ResourceType != ec2types.ResourceTypeFleet {
			return nil, invalid("instant fleets tag only fleet and instance, not " + string(ts.ResourceType))
		}
	}
	if len(in.LaunchTemplateConfigs) != 1 {
		return nil, invalid("want one launch template config")
	}
	market := string(in.TargetCapacitySpecification.DefaultTargetCapacityType)
	overrides := slices.Clone(in.LaunchTemplateConfigs[0].Overrides)
	if market == string(ec2types.DefaultTargetCapacityTypeOnDemand) {
		sort.SliceStable(overrides, func(i, j int) bool {
			return aws.ToFloat64(overrides[i].Priority) < aws.ToFloat64(overrides[j].Priority)
		})
	}
	if len(overrides) == 0 {
		overrides = []ec2types.FleetLaunchTemplateOverridesRequest{{}}
	}
	lifecycle := ec2types.InstanceLifecycleOnDemand
	if market == string(ec2types.DefaultTargetCapacityTypeSpot) {
		lifecycle = ec2types.InstanceLifecycleSpot
	}
	out := &ec2.CreateFleetOutput{FleetId: aws.String(fmt.Sprintf("fleet-%04d", len(e.fleets)))}
	for _, o := range overrides {
		typ, subnet := string(o.InstanceType), aws.ToString(o.SubnetId)
		lo := &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
			InstanceType: o.InstanceType, SubnetId: o.SubnetId}}
		if code := e.refused(market, typ, subnet); code != "" {
			out.Errors = append(out.Errors, ec2types.CreateFleetError{ErrorCode: aws.String(code), Lifecycle: lifecycle,
				ErrorMessage:               aws.String("We currently do not have sufficient " + typ + " capacity in the Availability Zone you requested."),
				LaunchTemplateAndOverrides: lo})
			continue
		}
		id := e.start(market, typ, subnet, in.TagSpecifications)
		out.Instances = []ec2types.CreateFleetInstance{{InstanceIds: []string{id}, InstanceType: o.InstanceType,
			Lifecycle: lifecycle, LaunchTemplateAndOverrides: lo}}
		break
	}
	if tok != "" {
		e.byToken[tok], e.argsOf[tok] = out, string(b)
	}
	return out, nil
}

func (e *fleetEC2) RunInstances(_ context.Context, in *ec2.RunInstancesInput, _ ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	typ, subnet := string(in.InstanceType), aws.ToString(in.SubnetId)
	if code := e.refused(string(ec2types.DefaultTargetCapacityTypeOnDemand), typ, subnet); code != "" {
		return nil, provisiontest.ClientError("EC2", "RunInstances", code, "no capacity")
	}
	id := e.start(string(ec2types.DefaultTargetCapacityTypeOnDemand), typ, subnet, in.TagSpecifications)
	return &ec2.RunInstancesOutput{OwnerId: aws.String(fakeAccount), Instances: []ec2types.Instance{e.instance(id)}}, nil
}

func (e *fleetEC2) instance(id string) ec2types.Instance {
	return ec2types.Instance{InstanceId: aws.String(id), State: &ec2types.InstanceState{Name: e.state[id]}}
}

func (e *fleetEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := ec2types.Reservation{OwnerId: aws.String(fakeAccount)}
	if len(in.InstanceIds) > 0 {
		for _, id := range in.InstanceIds {
			if _, ok := e.state[id]; !ok {
				return nil, provisiontest.ClientError("EC2", "DescribeInstances", "InvalidInstanceID.NotFound", "The instance ID '"+id+"' does not exist")
			}
			r.Instances = append(r.Instances, e.instance(id))
		}
		return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{r}}, nil
	}
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

func (e *fleetEC2) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range in.InstanceIds {
		e.state[id] = ec2types.InstanceStateNameTerminated
	}
	return &ec2.TerminateInstancesOutput{}, nil
}

// alive lists the pending or running instances with where they run.
func (e *fleetEC2) alive() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string]string{}
	for id, s := range e.state {
		if s == ec2types.InstanceStateNamePending || s == ec2types.InstanceStateNameRunning {
			m[id] = e.where[id]
		}
	}
	return m
}

func (e *fleetEC2) calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.fleets)
}

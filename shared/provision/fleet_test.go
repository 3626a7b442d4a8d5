package provision

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
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
//   - TerminateInstances of an id it never launched fails whole, as EC2's
//     (moto's too); a terminated instance may be terminated again.
//   - DescribeInstances by id knows every instance (any state); by the job
//     tag and state filters, as EC2; hidden makes the filter lookup miss a
//     fresh instance, as EC2's eventually consistent reads do. MaxResults
//     beside instance ids, or outside 5–1000, is refused as EC2 refuses it
//     (moto answers).
type fleetEC2 struct {
	mu       sync.Mutex
	refuse   map[string]string // "market/type/subnet" ("*" for any) → error code
	byToken  map[string]*ec2api.CreateFleetOutput
	argsOf   map[string]string
	fleets   []*ec2api.CreateFleetInput
	state    map[string]string
	jobOf    map[string]string
	where    map[string]string // instance id → "market/type/subnet"
	hidden   map[string]int
	launched int
	// freshMisses is how many reads by id of a fresh instance answer
	// InvalidInstanceID.NotFound, as EC2's eventually consistent reads can.
	freshMisses int
	misses      map[string]int
	// throttles is how many reads by id answer RequestLimitExceeded (a
	// burst spent the account's request tokens) before one goes through.
	throttles int
	// terminateMisses is how many TerminateInstances calls answer
	// InvalidInstanceID.NotFound for an instance it launched, as EC2's
	// eventually consistent TerminateInstances can right after a launch.
	terminateMisses int
}

func newFleetEC2() *fleetEC2 {
	return &fleetEC2{refuse: map[string]string{}, byToken: map[string]*ec2api.CreateFleetOutput{}, argsOf: map[string]string{},
		state: map[string]string{}, jobOf: map[string]string{}, where: map[string]string{}, hidden: map[string]int{}, misses: map[string]int{}}
}

// Region gives the adapter the client's Region, as *ec2api.Client does.
func (e *fleetEC2) Region() string { return fakeRegion }

func (e *fleetEC2) refused(market, typ, subnet string) string {
	for _, k := range []string{market + "/" + typ + "/" + subnet, market + "/*/" + subnet, market + "/" + typ + "/*", market + "/*/*"} {
		if c := e.refuse[k]; c != "" {
			return c
		}
	}
	return ""
}

func (e *fleetEC2) start(market, typ, subnet string, tags []ec2api.TagSpecification) string {
	e.launched++
	id := fmt.Sprintf("i-%04d", e.launched)
	e.state[id] = ec2api.StatePending
	e.where[id] = market + "/" + typ + "/" + subnet
	e.misses[id] = e.freshMisses
	for _, ts := range tags {
		if ts.ResourceType == ec2api.ResourceTypeInstance {
			e.jobOf[id] = tagMap(ts.Tags)[TagJobID]
		}
	}
	return id
}

func (e *fleetEC2) DescribeLaunchTemplateVersions(_ context.Context, in *ec2api.DescribeLaunchTemplateVersionsInput) (*ec2api.DescribeLaunchTemplateVersionsOutput, error) {
	return describeVersion(in, fitTemplate), nil
}

func (e *fleetEC2) CreateFleet(_ context.Context, in *ec2api.CreateFleetInput) (*ec2api.CreateFleetOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fleets = append(e.fleets, in)
	invalid := func(msg string) error {
		return provisiontest.ClientError("EC2", "CreateFleet", "InvalidParameterValue", msg)
	}
	tok := in.ClientToken
	if len(tok) > 64 {
		return nil, invalid("ClientToken: at most 64 ASCII characters")
	}
	args := *in
	args.ClientToken = ""
	b, _ := json.Marshal(&args)
	if out, ok := e.byToken[tok]; ok && tok != "" {
		if e.argsOf[tok] != string(b) {
			return nil, provisiontest.ClientError("EC2", "CreateFleet", "IdempotentParameterMismatch",
				"Arguments on this idempotent request are inconsistent with arguments used in previous request(s).")
		}
		return out, nil
	}
	if in.Type != ec2api.FleetTypeInstant || in.TargetCapacitySpecification.TotalTargetCapacity != 1 {
		return nil, invalid("want an instant fleet of one instance")
	}
	for _, ts := range in.TagSpecifications {
		if ts.ResourceType != ec2api.ResourceTypeInstance && ts.ResourceType != "fleet" {
			return nil, invalid("instant fleets tag only fleet and instance, not " + ts.ResourceType)
		}
	}
	if len(in.LaunchTemplateConfigs) != 1 {
		return nil, invalid("want one launch template config")
	}
	market := in.TargetCapacitySpecification.DefaultTargetCapacityType
	overrides := slices.Clone(in.LaunchTemplateConfigs[0].Overrides)
	if market == ec2api.CapacityOnDemand {
		sort.SliceStable(overrides, func(i, j int) bool {
			return aws.ToFloat64(overrides[i].Priority) < aws.ToFloat64(overrides[j].Priority)
		})
	}
	if len(overrides) == 0 {
		overrides = []ec2api.FleetOverride{{}}
	}
	lifecycle := "on-demand"
	if market == ec2api.CapacitySpot {
		lifecycle = "spot"
	}
	out := &ec2api.CreateFleetOutput{FleetID: fmt.Sprintf("fleet-%04d", len(e.fleets))}
	for _, o := range overrides {
		typ, subnet := o.InstanceType, o.SubnetID
		lo := ec2api.LaunchTemplateAndOverrides{Overrides: ec2api.FleetOverride{InstanceType: o.InstanceType, SubnetID: o.SubnetID}}
		if code := e.refused(market, typ, subnet); code != "" {
			out.Errors = append(out.Errors, ec2api.CreateFleetError{ErrorCode: code, Lifecycle: lifecycle,
				ErrorMessage:               "We currently do not have sufficient " + typ + " capacity in the Availability Zone you requested.",
				LaunchTemplateAndOverrides: lo})
			continue
		}
		id := e.start(market, typ, subnet, in.TagSpecifications)
		out.Instances = []ec2api.CreateFleetInstance{{InstanceIDs: []string{id}, InstanceType: o.InstanceType,
			Lifecycle: lifecycle, LaunchTemplateAndOverrides: lo}}
		break
	}
	if tok != "" {
		e.byToken[tok], e.argsOf[tok] = out, string(b)
	}
	return out, nil
}

func (e *fleetEC2) instance(id string) ec2api.Instance {
	return ec2api.Instance{InstanceID: id, State: ec2api.InstanceState{Name: e.state[id]}}
}

func (e *fleetEC2) DescribeInstances(_ context.Context, in *ec2api.DescribeInstancesInput) (*ec2api.DescribeInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := describeRefusal(in); err != nil {
		return nil, err
	}
	r := ec2api.Reservation{OwnerID: fakeAccount}
	if len(in.InstanceIDs) > 0 {
		if e.throttles > 0 {
			e.throttles--
			return nil, provisiontest.ClientError("EC2", "DescribeInstances", "RequestLimitExceeded", "Request limit exceeded.")
		}
		for _, id := range in.InstanceIDs {
			if _, ok := e.state[id]; !ok || e.misses[id] > 0 {
				e.misses[id]--
				return nil, provisiontest.ClientError("EC2", "DescribeInstances", "InvalidInstanceID.NotFound", "The instance ID '"+id+"' does not exist")
			}
			r.Instances = append(r.Instances, e.instance(id))
		}
		return &ec2api.DescribeInstancesOutput{Reservations: []ec2api.Reservation{r}}, nil
	}
	var job string
	states := map[string]bool{}
	for _, f := range in.Filters {
		switch f.Name {
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
	return &ec2api.DescribeInstancesOutput{Reservations: []ec2api.Reservation{r}}, nil
}

// describeRefusal is what EC2 refuses of a DescribeInstances before it
// reads anything (its API reference): MaxResults beside instance ids
// (InvalidParameterCombination), or outside 5–1000.
func describeRefusal(in *ec2api.DescribeInstancesInput) error {
	if in.MaxResults == 0 {
		return nil
	}
	if len(in.InstanceIDs) > 0 {
		return provisiontest.ClientError("EC2", "DescribeInstances", "InvalidParameterCombination",
			"The parameter instancesSet cannot be used with the parameter maxResults")
	}
	if in.MaxResults < 5 || in.MaxResults > 1000 {
		return provisiontest.ClientError("EC2", "DescribeInstances", "InvalidParameterValue",
			fmt.Sprintf("Value ( %d ) for parameter maxResults is invalid. Expecting a value between 5 and 1000.", in.MaxResults))
	}
	return nil
}

// TerminateInstances is all or nothing, as EC2's: one id it does not know
// fails the call (InvalidInstanceID.NotFound) and terminates none
// (TestTerminateInstancesAsEC2); an instance terminated already is no error.
func (e *fleetEC2) TerminateInstances(_ context.Context, in *ec2api.TerminateInstancesInput) (*ec2api.TerminateInstancesOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range in.InstanceIDs {
		_, ok := e.state[id]
		if ok && e.terminateMisses > 0 {
			e.terminateMisses--
			ok = false
		}
		if !ok {
			return nil, provisiontest.ClientError("EC2", "TerminateInstances", ec2api.CodeInstanceNotFound, "The instance ID '"+id+"' does not exist")
		}
	}
	for _, id := range in.InstanceIDs {
		e.state[id] = ec2api.StateTerminated
	}
	return &ec2api.TerminateInstancesOutput{}, nil
}

// alive lists the pending or running instances with where they run.
func (e *fleetEC2) alive() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string]string{}
	for id, s := range e.state {
		if s == ec2api.StatePending || s == ec2api.StateRunning {
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

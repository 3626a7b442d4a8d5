package provision

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// fakeInstances records EC2 calls. existing is what DescribeInstances
// returns for any filter (tests check the filters separately).
type fakeInstances struct {
	mu        sync.Mutex
	fleets    []*ec2api.CreateFleetInput
	describes []*ec2api.DescribeInstancesInput
	existing  []string
	fleetErr  error
	// fleetLost is how many CreateFleet calls take effect but lose their
	// answer (the caller sees lostErr); a replay under the same token then
	// gets the launch's answer, as EC2 gives it.
	fleetLost int
	lostErr   error
	// during runs inside every CreateFleet (the invocation's time running
	// out mid-call, say).
	during       func()
	terminated   []string
	terminateErr error
	calls        *callLog
	// template is the launch template version's data EC2 describes (the
	// zero value: fitTemplate); versionReads counts the reads.
	template     *ec2api.LaunchTemplateData
	versionReads int
	versionErr   error
}

// fitTemplate is what the README asks of a launch template.
var fitTemplate = ec2api.LaunchTemplateData{InstanceInitiatedShutdownBehavior: "terminate",
	MetadataOptions: ec2api.MetadataOptions{HTTPEndpoint: "enabled", HTTPTokens: "required", InstanceMetadataTags: "enabled"}}

// fitVersionXML is EC2's answer to DescribeLaunchTemplateVersions for a
// version with fitTemplate's settings, for the doubles that speak HTTP.
const fitVersionXML = `<?xml version="1.0" encoding="UTF-8"?>
<DescribeLaunchTemplateVersionsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r-lt</requestId><launchTemplateVersionSet><item><launchTemplateId>lt-0abc</launchTemplateId><launchTemplateName>runners</launchTemplateName><versionNumber>7</versionNumber><defaultVersion>true</defaultVersion><launchTemplateData><instanceInitiatedShutdownBehavior>terminate</instanceInitiatedShutdownBehavior><metadataOptions><httpTokens>required</httpTokens><httpEndpoint>enabled</httpEndpoint><instanceMetadataTags>enabled</instanceMetadataTags></metadataOptions></launchTemplateData></item></launchTemplateVersionSet></DescribeLaunchTemplateVersionsResponse>`

// describeVersion answers DescribeLaunchTemplateVersions with data, as EC2
// does for the one version asked.
func describeVersion(in *ec2api.DescribeLaunchTemplateVersionsInput, data ec2api.LaunchTemplateData) *ec2api.DescribeLaunchTemplateVersionsOutput {
	return &ec2api.DescribeLaunchTemplateVersionsOutput{Versions: []ec2api.LaunchTemplateVersion{{
		LaunchTemplateID: cmp.Or(in.LaunchTemplateID, "lt-0123456789abcdef0"), LaunchTemplateName: in.LaunchTemplateName, VersionNumber: 1, Data: data}}}
}

func (f *fakeInstances) DescribeLaunchTemplateVersions(_ context.Context, in *ec2api.DescribeLaunchTemplateVersionsInput) (*ec2api.DescribeLaunchTemplateVersionsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls.add("DescribeLaunchTemplateVersions")
	f.versionReads++
	if f.versionErr != nil {
		return nil, f.versionErr
	}
	data := fitTemplate
	if f.template != nil {
		data = *f.template
	}
	return describeVersion(in, data), nil
}

func (f *fakeInstances) TerminateInstances(ctx context.Context, in *ec2api.TerminateInstancesInput) (*ec2api.TerminateInstancesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err // as the SDK: no request on a finished context
	}
	if f.terminateErr != nil {
		return nil, f.terminateErr
	}
	f.terminated = append(f.terminated, in.InstanceIDs...)
	return &ec2api.TerminateInstancesOutput{}, nil
}

// callLog records the order of EC2 and SSM calls across fakes.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (c *callLog) add(call string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
}

// fakeAccount and fakeRegion are what the EC2 doubles answer as OwnerId and
// their client's Region.
const (
	fakeAccount = "123456789012"
	fakeRegion  = "eu-west-1"
)

// Region gives the adapter the client's Region, as *ec2api.Client does.
func (f *fakeInstances) Region() string { return fakeRegion }

func (f *fakeInstances) CreateFleet(_ context.Context, in *ec2api.CreateFleetInput) (*ec2api.CreateFleetOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls.add("CreateFleet")
	f.fleets = append(f.fleets, in)
	if f.during != nil {
		f.during()
	}
	if f.fleetErr != nil {
		return nil, f.fleetErr
	}
	if f.fleetLost > 0 {
		f.fleetLost--
		return nil, f.lostErr
	}
	return &ec2api.CreateFleetOutput{Instances: []ec2api.CreateFleetInstance{{InstanceIDs: []string{"i-0fresh"}}}}, nil
}

func (f *fakeInstances) DescribeInstances(_ context.Context, in *ec2api.DescribeInstancesInput) (*ec2api.DescribeInstancesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes = append(f.describes, in)
	f.calls.add("DescribeInstances")
	r := ec2api.Reservation{OwnerID: fakeAccount}
	if len(in.InstanceIDs) > 0 { // the launched instance, read for its owner
		for _, id := range in.InstanceIDs {
			r.Instances = append(r.Instances, ec2api.Instance{InstanceID: id, State: ec2api.InstanceState{Name: ec2api.StatePending}})
		}
		return &ec2api.DescribeInstancesOutput{Reservations: []ec2api.Reservation{r}}, nil
	}
	for _, id := range f.existing {
		r.Instances = append(r.Instances, ec2api.Instance{InstanceID: id})
	}
	return &ec2api.DescribeInstancesOutput{Reservations: []ec2api.Reservation{r}}, nil
}

// fakeParameters records SSM calls and keeps the parameters, as strict as
// SSM: Tags with Overwrite is a ValidationException, an existing name
// without Overwrite is ParameterAlreadyExists, deleting a missing one is
// ParameterNotFound. deleteErr is returned by DeleteParameter.
type fakeParameters struct {
	mu        sync.Mutex
	puts      []*ssmapi.PutParameterInput
	deletes   []string
	stored    map[string]*ssmapi.PutParameterInput
	putErr    error
	deleteErr error
	// throttles is how many PutParameter calls answer SSM's
	// ThrottlingException (the account's rate) before one goes through.
	throttles int
	during    func() // runs inside every PutParameter
	calls     *callLog
}

func (f *fakeParameters) PutParameter(_ context.Context, in *ssmapi.PutParameterInput) (*ssmapi.PutParameterOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls.add("PutParameter")
	f.puts = append(f.puts, in)
	if f.during != nil {
		f.during()
	}
	if f.putErr != nil {
		return nil, f.putErr
	}
	if f.throttles > 0 {
		f.throttles--
		return nil, provisiontest.ClientError("SSM", "PutParameter", "ThrottlingException", "Rate exceeded")
	}
	if err := provisiontest.CheckPutParameter(in); err != nil {
		return nil, err // as AWS: a value too long for its tier
	}
	if len(in.Tags) > 0 && in.Overwrite {
		return nil, provisiontest.ClientError("SSM", "PutParameter", "ValidationException",
			"Invalid request: tags and overwrite can't be used together. To create a parameter with tags, please remove overwrite flag. "+
				"To update tags for an existing parameter, please use AddTagsToResource or RemoveTagsFromResource.")
	}
	name := in.Name
	if _, ok := f.stored[name]; ok && !in.Overwrite {
		return nil, provisiontest.ClientError("SSM", "PutParameter", ssmapi.CodeParameterAlreadyExists, "The parameter already exists. To overwrite this value, set the overwrite option in the request to true.")
	}
	if f.stored == nil {
		f.stored = map[string]*ssmapi.PutParameterInput{}
	}
	f.stored[name] = in
	return &ssmapi.PutParameterOutput{Version: int64(len(f.puts)), Tier: ssmapi.TierAdvanced}, nil
}

func (f *fakeParameters) DeleteParameter(_ context.Context, in *ssmapi.DeleteParameterInput) (*ssmapi.DeleteParameterOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls.add("DeleteParameter")
	name := in.Name
	f.deletes = append(f.deletes, name)
	if f.deleteErr != nil {
		return nil, f.deleteErr
	}
	if _, ok := f.stored[name]; !ok {
		return nil, provisiontest.ClientError("SSM", "DeleteParameter", ssmapi.CodeParameterNotFound, "")
	}
	delete(f.stored, name)
	return &ssmapi.DeleteParameterOutput{}, nil
}

type ec2Fixture struct {
	adapter *EC2
	inst    *fakeInstances
	params  *fakeParameters
	calls   *callLog
	logs    interface{ String() string }
	slept   *[]time.Duration // the adapter's waits
}

func setupEC2(t *testing.T) ec2Fixture {
	t.Helper()
	log, buf := logBuffer()
	calls := &callLog{}
	inst, params := &fakeInstances{calls: calls}, &fakeParameters{calls: calls}
	f := ec2Fixture{adapter: NewEC2(inst, params, log), inst: inst, params: params, calls: calls, logs: buf, slept: &[]time.Duration{}}
	f.adapter.sleep = func(ctx context.Context, d time.Duration) error {
		*f.slept = append(*f.slept, d) // the test's clock: no wall-clock wait
		return ctx.Err()
	}
	return f
}

func tagMap(tags []ec2api.Tag) map[string]string {
	m := map[string]string{}
	for _, tg := range tags {
		m[tg.Key] = tg.Value
	}
	return m
}

func TestEC2ProvisionLaunchArguments(t *testing.T) {
	t.Parallel()
	byName := ec2Pool()
	byName.Provisioner.LaunchTemplate = "runner-linux"
	byName.Provisioner.LaunchTemplateVersion = ""
	bare := ec2Pool()
	bare.Provisioner.Subnets, bare.Provisioner.InstanceTypes = nil, nil
	spot := ec2Pool()
	spot.Provisioner.Capacity = pool.CapacitySpot
	all := func(first ...string) []string { // type/subnet options, c7g.large first
		var out []string
		for _, typ := range []string{"c7g.large", "m7g.large"} {
			for _, s := range first {
				out = append(out, typ+"/"+s)
			}
		}
		return out
	}

	tests := []struct {
		name        string
		pool        pool.Pool
		job         int64
		wantLTID    string
		wantLTName  string
		wantVersion string
		wantOptions []string
		wantSpot    bool
	}{
		{name: "template id, job 42 starts at subnet 42 mod 3 = 0", pool: ec2Pool(), job: 42,
			wantLTID: "lt-0123456789abcdef0", wantVersion: "7", wantOptions: all("subnet-a", "subnet-b", "subnet-c")},
		{name: "template id, job 43 starts at the next subnet", pool: ec2Pool(), job: 43,
			wantLTID: "lt-0123456789abcdef0", wantVersion: "7", wantOptions: all("subnet-b", "subnet-c", "subnet-a")},
		{name: "template name, default version", pool: byName, job: 44,
			wantLTName: "runner-linux", wantVersion: "$Default", wantOptions: all("subnet-c", "subnet-a", "subnet-b")},
		{name: "no overrides: the template decides", pool: bare, job: 45,
			wantLTID: "lt-0123456789abcdef0", wantVersion: "7"},
		{name: "spot: price-capacity-optimized", pool: spot, job: 42, wantSpot: true,
			wantLTID: "lt-0123456789abcdef0", wantVersion: "7", wantOptions: all("subnet-a", "subnet-b", "subnet-c")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupEC2(t)
			req := request(tt.pool, tt.job)
			res, err := f.adapter.Provision(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res != (Result{InstanceID: "i-0fresh"}) {
				t.Errorf("result: got %+v, want the launched instance, not reused", res)
			}
			if len(f.inst.fleets) != 1 {
				t.Fatalf("CreateFleet calls: got %d, want 1", len(f.inst.fleets))
			}
			in := f.inst.fleets[0]
			if in.Type != ec2api.FleetTypeInstant || in.TargetCapacitySpecification.TotalTargetCapacity != 1 {
				t.Errorf("fleet: got type %q of %d, want instant of 1", in.Type, in.TargetCapacitySpecification.TotalTargetCapacity)
			}
			market := ec2api.CapacityOnDemand
			if tt.wantSpot {
				market = ec2api.CapacitySpot
				if in.SpotOptions == nil || in.SpotOptions.AllocationStrategy != ec2api.SpotPriceCapacityOptimized || in.OnDemandOptions != nil {
					t.Errorf("spot options %+v, want price-capacity-optimized and no on-demand options", in.SpotOptions)
				}
			} else if in.OnDemandOptions == nil || in.OnDemandOptions.AllocationStrategy != ec2api.OnDemandPrioritized || in.SpotOptions != nil {
				t.Errorf("on-demand options %+v, want prioritized and no spot options", in.OnDemandOptions)
			}
			if got := in.TargetCapacitySpecification.DefaultTargetCapacityType; got != market {
				t.Errorf("market: got %q, want %q", got, market)
			}
			if len(in.LaunchTemplateConfigs) != 1 {
				t.Fatalf("launch template configs: got %d, want 1", len(in.LaunchTemplateConfigs))
			}
			lt := in.LaunchTemplateConfigs[0].LaunchTemplateSpecification
			if lt.LaunchTemplateID != tt.wantLTID || lt.LaunchTemplateName != tt.wantLTName || lt.Version != tt.wantVersion {
				t.Errorf("launch template: got id %q name %q version %q, want %q %q %q",
					lt.LaunchTemplateID, lt.LaunchTemplateName, lt.Version,
					tt.wantLTID, tt.wantLTName, tt.wantVersion)
			}
			var options []string
			for i, o := range in.LaunchTemplateConfigs[0].Overrides {
				options = append(options, o.InstanceType+"/"+o.SubnetID)
				if aws.ToFloat64(o.Priority) != float64(i) {
					t.Errorf("override %d: priority %v, want %d (listed in preference order)", i, aws.ToFloat64(o.Priority), i)
				}
			}
			if !reflect.DeepEqual(options, tt.wantOptions) {
				t.Errorf("options: got %v, want %v", options, tt.wantOptions)
			}
			if got, want := in.ClientToken, FleetKey(tt.pool.Name, tt.job, jit, market); got != want || len(got) > 64 {
				t.Errorf("client token: got %q, want %q (at most 64 characters)", got, want)
			}
			wantTags := map[string]string{
				"Name": req.RunnerName, TagJobID: itoa(tt.job), TagRunID: itoa(req.RunID),
				TagRepo: "octo/hello", TagRunnerName: req.RunnerName, TagPool: tt.pool.Name, TagScope: tt.pool.Scope, TagReplacement: "0",
			}
			if len(in.TagSpecifications) != 1 || in.TagSpecifications[0].ResourceType != ec2api.ResourceTypeInstance {
				t.Fatalf("tag specifications %+v, want instance only (an instant fleet tags no volumes)", in.TagSpecifications)
			}
			if got := tagMap(in.TagSpecifications[0].Tags); !reflect.DeepEqual(got, wantTags) {
				t.Errorf("instance tags: got %v, want %v", got, wantTags)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestEC2ProvisionPutsJITConfigOnlyInSecureString(t *testing.T) {
	t.Parallel()
	f := setupEC2(t)
	req := request(ec2Pool(), 42)
	if _, err := f.adapter.Provision(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(f.params.puts) != 1 {
		t.Fatalf("PutParameter calls: got %d, want 1", len(f.params.puts))
	}
	put := f.params.puts[0]
	if got := put.Name; got != "/ghclaim/runners/linux-42" {
		t.Errorf("parameter name: got %q, want /ghclaim/runners/linux-42", got)
	}
	if put.Value != jit {
		t.Errorf("parameter value: got something else, want the JIT config")
	}
	if put.Type != ssmapi.TypeSecureString {
		t.Errorf("parameter type: got %q, want SecureString", put.Type)
	}
	// GitHub's configs are over the Standard tier's 4,096 characters.
	if put.Tier != ssmapi.TierIntelligentTiering {
		t.Errorf("tier %q: want Intelligent-Tiering", put.Tier)
	}
	if d := put.Description; !strings.Contains(d, "42") || strings.Contains(d, jit) {
		t.Errorf("description %q: want the job id and never the config", d)
	}

	launch, err := json.Marshal(f.inst.fleets)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(launch), jit) {
		t.Errorf("JIT config found in the CreateFleet input: %s", launch)
	}
	if logs := f.logs.String(); strings.Contains(logs, jit) || !strings.Contains(logs, `"job_id":42`) || !strings.Contains(logs, `"instance_id":"i-0fresh"`) {
		t.Errorf("logs: got %s, want one decision line with job_id and instance_id and no JIT config", logs)
	}
}

func TestEC2ProvisionRepeatedIsIdentical(t *testing.T) {
	t.Parallel()
	f := setupEC2(t)
	req := request(ec2Pool(), 77)
	for range 2 {
		if _, err := f.adapter.Provision(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.inst.fleets) != 2 {
		t.Fatalf("CreateFleet calls: got %d, want 2 (the fake has no existing instance)", len(f.inst.fleets))
	}
	// EC2 answers a repeated ClientToken with the first answer only when
	// every argument matches (else IdempotentParameterMismatch).
	if !reflect.DeepEqual(f.inst.fleets[0], f.inst.fleets[1]) {
		a, _ := json.Marshal(f.inst.fleets[0])
		b, _ := json.Marshal(f.inst.fleets[1])
		t.Errorf("repeated request sent different launch arguments:\n%s\n%s", a, b)
	}
	if got := f.inst.fleets[0].ClientToken; !strings.HasPrefix(got, "ghclaim-77-") || !strings.HasSuffix(got, "-od") {
		t.Errorf("client token: got %q, want ghclaim-77-<digest>-od", got)
	}
}

func TestEC2ProvisionReusesTaggedInstance(t *testing.T) {
	t.Parallel()
	f := setupEC2(t)
	f.inst.existing = []string{"i-0bbb", "i-0aaa"}
	res, err := f.adapter.Provision(context.Background(), request(ec2Pool(), 42))
	if err != nil {
		t.Fatal(err)
	}
	if res != (Result{InstanceID: "i-0aaa", Reused: true}) {
		t.Errorf("result: got %+v, want the smallest existing id, reused", res)
	}
	if len(f.inst.fleets) != 0 {
		t.Errorf("CreateFleet calls: got %d, want none when the job's instance exists", len(f.inst.fleets))
	}
	if len(f.params.puts) != 1 {
		t.Errorf("PutParameter calls: got %d, want 1 (an unbooted instance must read the fresh config)", len(f.params.puts))
	}
	filters := map[string][]string{}
	for _, fl := range f.inst.describes[0].Filters {
		filters[fl.Name] = fl.Values
	}
	want := map[string][]string{"tag:ghclaim:job-id": {"42"}, "tag:ghclaim:runner-name": {"linux-42"}, "instance-state-name": {"pending", "running"}}
	if !reflect.DeepEqual(filters, want) {
		t.Errorf("describe filters: got %v, want %v", filters, want)
	}
}

func TestEC2ProvisionErrors(t *testing.T) {
	t.Parallel()
	throttled := &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}
	tests := []struct {
		name     string
		arrange  func(*ec2Fixture)
		req      func() Request
		wantCode string
		wantIs   error
		wantRuns int
	}{
		{name: "create fleet error keeps its AWS code", arrange: func(f *ec2Fixture) { f.inst.fleetErr = throttled },
			req: func() Request { return request(ec2Pool(), 42) }, wantCode: "RequestLimitExceeded", wantRuns: 1},
		{name: "put parameter error after the launch keeps its AWS code", arrange: func(f *ec2Fixture) {
			f.params.putErr = &smithy.GenericAPIError{Code: "AccessDeniedException"}
		}, req: func() Request { return request(ec2Pool(), 42) }, wantCode: "AccessDeniedException", wantRuns: 1},
		{name: "dispatch pool is refused", arrange: func(*ec2Fixture) {},
			req: func() Request { return request(dispatchPool("https://q"), 42) }, wantIs: ErrInvalidRequest},
		{name: "invalid request calls nothing", arrange: func(*ec2Fixture) {},
			req: func() Request { r := request(ec2Pool(), 42); r.JITConfig = ""; return r }, wantIs: ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupEC2(t)
			tt.arrange(&f)
			_, err := f.adapter.Provision(context.Background(), tt.req())
			if err == nil {
				t.Fatal("got nil error")
			}
			if tt.wantCode != "" {
				var api smithy.APIError
				if !errors.As(err, &api) || api.ErrorCode() != tt.wantCode {
					t.Errorf("got %v, want a wrapped smithy.APIError with code %s", err, tt.wantCode)
				}
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("got %v, want errors.Is %v", err, tt.wantIs)
			}
			if strings.Contains(err.Error(), jit) {
				t.Errorf("JIT config in error: %v", err)
			}
			if len(f.inst.fleets) != tt.wantRuns {
				t.Errorf("CreateFleet calls: got %d, want %d", len(f.inst.fleets), tt.wantRuns)
			}
		})
	}
}

// TestEC2ProvisionTerminatesWhatItLaunchedWithoutAConfig: a machine this
// call launched but could not give its config (the put failed, or the
// invocation's time ran out) is terminated at once, even on a finished
// context. Left running, the next attempt would meet the registration
// offline beside a live machine of the job, take that machine for one
// booting with the config, and count the job claimed: it would wait the
// runner start grace for a runner that never comes.
func TestEC2ProvisionTerminatesWhatItLaunchedWithoutAConfig(t *testing.T) {
	t.Parallel()
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
	tests := []struct {
		name           string
		existing       []string
		cancelled      bool
		terminateErr   error
		putErr         error
		wantTerminated []string
		wantInErr      string
	}{
		{name: "put fails after the launch", putErr: throttled, wantTerminated: []string{"i-0fresh"}},
		{name: "the invocation's time runs out at the put", cancelled: true, putErr: context.DeadlineExceeded,
			wantTerminated: []string{"i-0fresh"}},
		{name: "the termination fails too", putErr: throttled,
			terminateErr: &smithy.GenericAPIError{Code: "UnauthorizedOperation"}, wantInErr: "terminating instance i-0fresh"},
		{name: "a machine found, not launched, is left", existing: []string{"i-0live"}, putErr: throttled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupEC2(t)
			f.inst.existing, f.inst.terminateErr, f.params.putErr = tt.existing, tt.terminateErr, tt.putErr
			ctx, cancel := context.WithCancel(context.Background())
			if tt.cancelled {
				f.params.during = cancel // the time runs out during the put
			}
			defer cancel()
			_, err := f.adapter.Provision(ctx, request(ec2Pool(), 42))
			if !errors.Is(err, tt.putErr) {
				t.Fatalf("got %v, want the put's error %v (its class decides the retry)", err, tt.putErr)
			}
			if !reflect.DeepEqual(f.inst.terminated, tt.wantTerminated) {
				t.Errorf("terminated %v, want %v", f.inst.terminated, tt.wantTerminated)
			}
			if tt.wantInErr != "" && !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("error %q does not say %q", err, tt.wantInErr)
			}
		})
	}
}

// TestEC2LaunchWithoutAnAnswerIsSettled: a CreateFleet that failed without
// EC2's answer (time ran out, the connection broke, server errors) may have
// started a machine: the identical request (same ClientToken, so nothing
// new starts) learns which, and that machine is terminated, even on a
// finished context. A refusal EC2 answered launched nothing: no replay.
func TestEC2LaunchWithoutAnAnswerIsSettled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		lost           int
		err            error
		cancelled      bool
		before         bool // the time ran out before the call
		wantFleets     int
		wantTerminated []string
	}{
		{name: "answer lost after the launch", lost: 1, err: errors.New("read tcp: connection reset by peer"),
			wantFleets: 2, wantTerminated: []string{"i-0fresh"}},
		{name: "the invocation's time ran out during the call", lost: 1, err: context.DeadlineExceeded, cancelled: true,
			wantFleets: 2, wantTerminated: []string{"i-0fresh"}},
		{name: "server errors until the retries ran out", lost: 1,
			err:        &smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer},
			wantFleets: 2, wantTerminated: []string{"i-0fresh"}},
		{name: "the replay fails too: nothing known, nothing ended", lost: 2, err: errors.New("connection refused"), wantFleets: 2},
		{name: "out of time before the call: no launch, no replay", cancelled: true, before: true, err: context.Canceled},
		{name: "EC2 refused: nothing launched, no replay", lost: 1,
			err: &smithy.GenericAPIError{Code: "InvalidParameterValue", Fault: smithy.FaultClient}, wantFleets: 1},
		{name: "throttled: nothing launched, no replay", lost: 1,
			err: &smithy.GenericAPIError{Code: "RequestLimitExceeded", Fault: smithy.FaultServer}, wantFleets: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupEC2(t)
			f.inst.fleetLost, f.inst.lostErr = tt.lost, tt.err
			ctx, cancel := context.WithCancel(context.Background())
			switch {
			case tt.before:
				cancel()
			case tt.cancelled:
				f.inst.during = cancel // the time runs out during the call
			}
			defer cancel()
			_, err := f.adapter.Provision(ctx, request(ec2Pool(), 42))
			if !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want the launch's error %v (its class decides the retry)", err, tt.err)
			}
			if len(f.inst.fleets) != tt.wantFleets {
				t.Fatalf("CreateFleet calls %d, want %d", len(f.inst.fleets), tt.wantFleets)
			}
			if tt.wantFleets == 2 && f.inst.fleets[1].ClientToken != f.inst.fleets[0].ClientToken {
				t.Errorf("replay token %q, want the launch's %q (no second machine)", f.inst.fleets[1].ClientToken, f.inst.fleets[0].ClientToken)
			}
			if !reflect.DeepEqual(f.inst.terminated, tt.wantTerminated) {
				t.Errorf("terminated %v, want %v", f.inst.terminated, tt.wantTerminated)
			}
			if len(f.params.puts) != 0 {
				t.Errorf("a config was put for a launch that failed")
			}
		})
	}
}

func TestEC2Cleanup(t *testing.T) {
	t.Parallel()
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException"}
	tests := []struct {
		name           string
		delErr         error
		existing       []string
		terminateErr   error
		keepMachines   bool
		wantErr        bool
		wantTerminated []string
	}{
		{name: "deletes the parameter"},
		{name: "keep machines: the parameter only", existing: []string{"i-0a"}, keepMachines: true},
		{name: "terminates the job's live machines", existing: []string{"i-0b", "i-0a"}, wantTerminated: []string{"i-0b", "i-0a"}},
		{name: "already gone is success", delErr: provisiontest.ClientError("SSM", "DeleteParameter", ssmapi.CodeParameterNotFound, "not found"), existing: []string{"i-0a"}, wantTerminated: []string{"i-0a"}},
		{name: "other errors are returned", delErr: throttled, existing: []string{"i-0a"}, wantErr: true},
		{name: "a refused termination is returned", existing: []string{"i-0a"}, terminateErr: throttled, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupEC2(t)
			f.params.deleteErr = tt.delErr
			f.inst.existing, f.inst.terminateErr = tt.existing, tt.terminateErr
			req := request(ec2Pool(), 42)
			req.KeepMachines = tt.keepMachines
			err := f.adapter.Cleanup(context.Background(), req)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Cleanup: got %v, want error %v", err, tt.wantErr)
			}
			var api smithy.APIError
			if tt.wantErr && (!errors.As(err, &api) || api.ErrorCode() != "ThrottlingException") {
				t.Errorf("got %v, want the wrapped AWS error", err)
			}
			if !reflect.DeepEqual(f.params.deletes, []string{"/ghclaim/runners/linux-42"}) {
				t.Errorf("deleted: got %v, want [/ghclaim/runners/linux-42]", f.params.deletes)
			}
			if !reflect.DeepEqual(f.inst.terminated, tt.wantTerminated) {
				t.Errorf("terminated %v, want %v", f.inst.terminated, tt.wantTerminated)
			}
			for _, d := range f.inst.describes {
				if got := fmt.Sprint(filters(d)); tt.existing != nil && got != "map[instance-state-name:[pending running] tag:ghclaim:job-id:[42] tag:ghclaim:runner-name:[linux-42]]" {
					t.Errorf("lookup filters %s, want the attempt's pending and running instances", got)
				}
			}
		})
	}
}

func filters(in *ec2api.DescribeInstancesInput) map[string][]string {
	m := map[string][]string{}
	for _, f := range in.Filters {
		m[f.Name] = f.Values
	}
	return m
}

func TestSubnet(t *testing.T) {
	t.Parallel()
	three := []string{"a", "b", "c"}
	tests := []struct {
		name    string
		subnets []string
		job     int64
		want    string
	}{
		{name: "none", subnets: nil, job: 5, want: ""},
		{name: "one", subnets: []string{"only"}, job: 5, want: "only"},
		{name: "mod 0", subnets: three, job: 3, want: "a"},
		{name: "mod 1", subnets: three, job: 7, want: "b"},
		{name: "mod 2", subnets: three, job: 11, want: "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Subnet(tt.subnets, tt.job); got != tt.want {
				t.Errorf("Subnet(%v, %d): got %q, want %q", tt.subnets, tt.job, got, tt.want)
			}
		})
	}
}

// The JIT config is written only once the instance exists, tagged with
// that instance's ARN: the runner role's IAM condition lets exactly that
// instance read it.
func TestEC2ProvisionTagsConfigWithInstanceARN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		existing  []string
		wantCalls []string
		wantID    string
	}{
		{name: "launched", wantCalls: []string{"DescribeInstances", "DescribeLaunchTemplateVersions", "CreateFleet", "DescribeInstances", "PutParameter"}, wantID: "i-0fresh"},
		{name: "reused", existing: []string{"i-0live"}, wantCalls: []string{"DescribeInstances", "PutParameter"}, wantID: "i-0live"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupEC2(t)
			f.inst.existing = tt.existing
			if _, err := f.adapter.Provision(context.Background(), request(ec2Pool(), 42)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.calls.calls, tt.wantCalls) {
				t.Errorf("calls: got %v, want %v", f.calls.calls, tt.wantCalls)
			}
			put := f.params.stored["/ghclaim/runners/linux-42"]
			if put == nil {
				t.Fatal("no parameter stored")
			}
			want := map[string]string{TagInstanceARN: "arn:aws:ec2:" + fakeRegion + ":" + fakeAccount + ":instance/" + tt.wantID}
			got := map[string]string{}
			for _, tg := range put.Tags {
				got[tg.Key] = tg.Value
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parameter tags: got %v, want %v", got, want)
			}
		})
	}
}

// A repeated attempt finds the earlier attempt's parameter: SSM refuses
// Tags with Overwrite, so the adapter deletes and writes it again, value
// and tag together.
func TestEC2ProvisionReplacesAnEarlierAttemptsConfig(t *testing.T) {
	t.Parallel()
	f := setupEC2(t)
	first := request(ec2Pool(), 42)
	if _, err := f.adapter.Provision(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	f.inst.existing = []string{"i-0fresh"}
	second := first
	second.JITConfig = "c2Vjb25kIGNvbmZpZw=="
	res, err := f.adapter.Provision(context.Background(), second)
	if err != nil {
		t.Fatalf("second Provision: %v", err)
	}
	if res != (Result{InstanceID: "i-0fresh", Reused: true}) {
		t.Errorf("second: got %+v, want i-0fresh reused", res)
	}
	put := f.params.stored["/ghclaim/runners/linux-42"]
	if put == nil || put.Value != second.JITConfig || len(put.Tags) != 1 {
		t.Fatalf("stored parameter: got %+v, want the second config with its tag", put)
	}
	if !reflect.DeepEqual(f.params.deletes, []string{"/ghclaim/runners/linux-42"}) {
		t.Errorf("deletes: got %v, want the stale parameter once", f.params.deletes)
	}
}

func TestEC2ProvisionWithoutRegionIsRefused(t *testing.T) {
	t.Parallel()
	params := &fakeParameters{}
	e := NewEC2(struct{ Instances }{&fakeInstances{}}, params, nil) // hides Options
	if _, err := e.Provision(context.Background(), request(ec2Pool(), 42)); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("got %v, want ErrInvalidRequest", err)
	}
	if len(params.puts) != 0 {
		t.Errorf("PutParameter calls: got %d, want none", len(params.puts))
	}
}

// TestEC2WaitsOutAThrottledPut: a burst of claims (and of booting
// machines reading their configs) meets Parameter Store's account-wide
// rate. The put is tried again after 1, 2, 4 and 8 s (past the SDK's own
// three attempts) while the launched machine waits for its config: it
// once ended that machine at the first throttle, and the job's next
// attempt, a minute on, launched another. Throttled past the waits, the
// machine is ended and the error is the throttle's (rate_limit).
func TestEC2WaitsOutAThrottledPut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		throttles  int
		wantSleeps []time.Duration
		terminated bool
	}{
		{name: "throttled twice", throttles: 2, wantSleeps: throttleWaits[:2]},
		{name: "throttled for good", throttles: 1000, wantSleeps: throttleWaits, terminated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setupEC2(t)
			f.params.throttles = tc.throttles
			res, err := f.adapter.Provision(context.Background(), request(ec2Pool(), 42))
			if !reflect.DeepEqual(*f.slept, tc.wantSleeps) {
				t.Errorf("waits %v, want %v", *f.slept, tc.wantSleeps)
			}
			if got := len(f.inst.terminated) > 0; got != tc.terminated {
				t.Fatalf("terminated %v (err %v), want terminated %v", f.inst.terminated, err, tc.terminated)
			}
			if tc.terminated {
				if cl := failure.Classify(err); cl.Class != failure.RateLimit {
					t.Errorf("throttled for good: %v classified %s, want rate_limit", err, cl.Class)
				}
				return
			}
			if err != nil || res.InstanceID != "i-0fresh" || len(f.params.stored) != 1 {
				t.Fatalf("got %+v, %v, %d stored; want the launched machine with its config", res, err, len(f.params.stored))
			}
		})
	}
}

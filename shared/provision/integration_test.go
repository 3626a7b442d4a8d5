package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/awsrpc"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// These tests talk HTTP to moto_server through the real SDK clients. moto
// 5.2 launches instant fleets (CreateFleet: the launch template's image,
// the overrides' type and subnet, the instance tags) but does not report
// per-option capacity errors, so here every launch lands on its first
// option. moto ignores their ClientToken; the emulator's launcher makes it
// honour it, as EC2 does (TestEmulatorHonoursClientToken). The single
// instance per job across attempts (each with its own token) is the work of
// the adapter's tag lookup, which real EC2 needs too once a token expires.

type awsFixture struct {
	ec2 *ec2api.Client
	ssm *ssmapi.Client
	sqs *sqs.Client
}

func setupAWS(t *testing.T) awsFixture {
	t.Helper()
	return setupAWSOn(t, emulator.ForTest(t))
}

// setupAWSOn is setupAWS on srv.
func setupAWSOn(t *testing.T, srv *emulator.Server) awsFixture {
	t.Helper()
	cfg := srv.ConfigForTest(t)
	// moto stores any value in any SSM tier: StrictSSM refuses what AWS refuses.
	return awsFixture{ec2: ec2api.New(cfg), ssm: ssmapi.New(cfg, provisiontest.StrictSSM), sqs: sqs.NewFromConfig(cfg)}
}

// launchTemplate creates a launch template named name and returns its id.
// The AMI need not exist: moto does not validate it by default.
func (f awsFixture) launchTemplate(t *testing.T, name string) string {
	t.Helper()
	id, err := provisiontest.LaunchTemplate(context.Background(), f.ec2, name, "ami-03cf127a", "t3.micro")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// jobInstances lists the instances tagged with jobID, in any state.
func (f awsFixture) jobInstances(t *testing.T, jobID int64) []ec2api.Instance {
	t.Helper()
	out, err := f.ec2.DescribeInstances(context.Background(), &ec2api.DescribeInstancesInput{Filters: []ec2api.Filter{
		{Name: "tag:" + TagJobID, Values: []string{strconv.FormatInt(jobID, 10)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var all []ec2api.Instance
	for _, r := range out.Reservations {
		all = append(all, r.Instances...)
	}
	return all
}

func TestEC2AgainstMoto(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		job  int64
		byID bool
	}{
		{name: "template by name", job: 5001},
		{name: "template by id", job: 5002, byID: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := setupAWS(t)
			ltName := fmt.Sprintf("runner-%d", tt.job)
			ltID := f.launchTemplate(t, ltName)
			p := ec2Pool()
			p.Provisioner.LaunchTemplate, p.Provisioner.LaunchTemplateVersion = ltName, "$Latest"
			if tt.byID {
				p.Provisioner.LaunchTemplate = ltID
			}
			subnets, err := provisiontest.Subnets(ctx, f.ec2)
			if err != nil || len(subnets) == 0 {
				t.Fatalf("DescribeSubnets: %v (%d subnets)", err, len(subnets))
			}
			p.Provisioner.Subnets = []string{subnets[0]}
			adapter := NewEC2(f.ec2, f.ssm, nil)
			req := request(p, tt.job)

			first, err := adapter.Provision(ctx, req)
			if err != nil {
				t.Fatalf("first Provision: %v", err)
			}
			second, err := adapter.Provision(ctx, req)
			if err != nil {
				t.Fatalf("second Provision: %v", err)
			}
			if first.Reused || first.InstanceID == "" {
				t.Errorf("first: got %+v, want a new instance", first)
			}
			if second != (Result{InstanceID: first.InstanceID, Reused: true}) {
				t.Errorf("second: got %+v, want %s reused", second, first.InstanceID)
			}

			insts := f.jobInstances(t, tt.job)
			if len(insts) != 1 {
				t.Fatalf("instances tagged with job %d: got %d, want exactly 1", tt.job, len(insts))
			}
			inst := insts[0]
			if inst.InstanceID != first.InstanceID {
				t.Errorf("instance: got %s, want %s", inst.InstanceID, first.InstanceID)
			}
			if got := tagMap(inst.Tags); got[TagRunnerName] != req.RunnerName || got[TagRepo] != req.Repo || got["Name"] != req.RunnerName {
				t.Errorf("instance tags: got %v", got)
			}
			if got := inst.SubnetID; got != p.Provisioner.Subnets[0] {
				t.Errorf("subnet: got %q, want %q", got, p.Provisioner.Subnets[0])
			}
			if inst.InstanceType != "c7g.large" {
				t.Errorf("instance type: got %q, want the pool's c7g.large over the template's t3.micro", inst.InstanceType)
			}

			name := ParameterName(req.RunnerName)
			got, err := f.ssm.GetParameter(ctx, &ssmapi.GetParameterInput{Name: name, WithDecryption: true})
			if err != nil {
				t.Fatalf("GetParameter %s: %v", name, err)
			}
			if got.Parameter.Type != ssmapi.TypeSecureString || got.Parameter.Value != jit {
				t.Errorf("parameter: got type %q and a value that is%s the JIT config, want SecureString holding it",
					got.Parameter.Type, map[bool]string{true: "", false: " not"}[got.Parameter.Value == jit])
			}

			// Only this instance may read it: the tag names its ARN, which only
			// exists once the instance does.
			f.assertInstanceTag(t, name, inst)

			for i := range 2 { // the second Cleanup finds nothing and still succeeds
				if err := adapter.Cleanup(ctx, req); err != nil {
					t.Fatalf("Cleanup %d: %v", i+1, err)
				}
			}
			if _, err := f.ssm.GetParameter(ctx, &ssmapi.GetParameterInput{Name: name}); err == nil {
				t.Errorf("parameter %s still exists after Cleanup", name)
			}
			for _, inst := range f.jobInstances(t, tt.job) {
				if st := inst.State.Name; st != ec2api.StateShuttingDown && st != ec2api.StateTerminated {
					t.Errorf("instance %s of the cleaned-up job is %s, want terminated", inst.InstanceID, st)
				}
			}
		})
	}
}

// assertInstanceTag checks that parameter name carries TagInstanceARN =
// inst's ARN, built from what EC2 itself reports (owner, Region).
func (f awsFixture) assertInstanceTag(t *testing.T, name string, inst ec2api.Instance) {
	t.Helper()
	ctx := context.Background()
	out, err := f.ec2.DescribeInstances(ctx, &ec2api.DescribeInstancesInput{InstanceIDs: []string{inst.InstanceID}})
	if err != nil || len(out.Reservations) != 1 {
		t.Fatalf("DescribeInstances %s: %v", inst.InstanceID, err)
	}
	region := f.ec2.Region()
	want := fmt.Sprintf("arn:%s:ec2:%s:%s:instance/%s", awsrpc.Partition(region), region,
		out.Reservations[0].OwnerID, inst.InstanceID)
	tags, err := f.ssm.ListTagsForResource(ctx, &ssmapi.ListTagsForResourceInput{
		ResourceType: ssmapi.ResourceTypeParameter, ResourceID: name})
	if err != nil {
		t.Fatalf("ListTagsForResource %s: %v", name, err)
	}
	got := map[string]string{}
	for _, tg := range tags.TagList {
		got[tg.Key] = tg.Value
	}
	if got[TagInstanceARN] != want {
		t.Errorf("parameter %s tag %s: got %q (tags %v), want %q", name, TagInstanceARN, got[TagInstanceARN], got, want)
	}
}

// TestEmulatorHonoursClientToken pins what the launcher (moto_atomic.py)
// adds to moto, which ignores CreateFleet's ClientToken: as on EC2, a
// repeated token with the same arguments gets the first answer and starts
// nothing (an SDK retry of a launch whose answer was cut), and with other
// arguments it is HTTP 400 IdempotentParameterMismatch.
func TestEmulatorHonoursClientToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setupAWS(t)
	f.launchTemplate(t, "runner-token")
	p := ec2Pool()
	p.Provisioner.LaunchTemplate, p.Provisioner.LaunchTemplateVersion, p.Provisioner.Subnets = "runner-token", "$Latest", nil
	in := fleetInput(request(p, 5003), ec2api.CapacityOnDemand, "")
	var ids []string
	for range 2 {
		out, err := f.ec2.CreateFleet(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, fleetInstance(out))
	}
	if ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("the same ClientToken twice launched %v, want one instance answered twice", ids)
	}
	if got := f.jobInstances(t, 5003); len(got) != 1 {
		t.Fatalf("instances tagged with job 5003: got %d, want 1", len(got))
	}
	subnets, err := provisiontest.Subnets(ctx, f.ec2)
	if err != nil || len(subnets) == 0 {
		t.Fatalf("DescribeSubnets: %v (%d subnets)", err, len(subnets))
	}
	other := *in
	other.LaunchTemplateConfigs = []ec2api.FleetLaunchTemplateConfig{in.LaunchTemplateConfigs[0]}
	other.LaunchTemplateConfigs[0].Overrides = []ec2api.FleetOverride{{InstanceType: "c7g.large", SubnetID: subnets[0]}}
	_, err = f.ec2.CreateFleet(ctx, &other)
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "IdempotentParameterMismatch" || failure.Classify(err).Status != 400 {
		t.Fatalf("the token with other arguments: got %v, want HTTP 400 IdempotentParameterMismatch", err)
	}
	if got := f.jobInstances(t, 5003); len(got) != 1 {
		t.Errorf("instances tagged with job 5003 after the mismatch: got %d, want 1", len(got))
	}
}

// queue creates an SQS queue and returns its URL.
func (f awsFixture) queue(t *testing.T, name string) string {
	t.Helper()
	in := &sqs.CreateQueueInput{QueueName: aws.String(name)}
	if len(name) > 5 && name[len(name)-5:] == ".fifo" {
		in.Attributes = map[string]string{string(sqstypes.QueueAttributeNameFifoQueue): "true"}
	}
	out, err := f.sqs.CreateQueue(context.Background(), in)
	if err != nil {
		t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

// drain receives every visible message of url, hiding each for longer than
// the test runs so none comes back.
func (f awsFixture) drain(t *testing.T, url string) []DispatchMessage {
	t.Helper()
	var msgs []DispatchMessage
	for {
		out, err := f.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 600,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return msgs
		}
		for _, m := range out.Messages {
			var body DispatchMessage
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &body); err != nil {
				t.Fatalf("message body: %v", err)
			}
			msgs = append(msgs, body)
		}
	}
}

func TestDispatchAgainstMoto(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		queue string
		sends []string // the JIT config of each Provision call
		want  []string // the JIT configs the host receives
	}{
		{name: "standard queue gets the one dispatch", queue: "dispatch-std", sends: []string{jit}, want: []string{jit}},
		{name: "fifo queue drops a repeated dispatch", queue: "dispatch-dedup.fifo", sends: []string{jit, jit}, want: []string{jit}},
		{name: "fifo queue keeps a regenerated config", queue: "dispatch-fresh.fifo", sends: []string{jit, "fresh-" + jit}, want: []string{jit, "fresh-" + jit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := setupAWS(t)
			url := f.queue(t, tt.queue)
			d := NewDispatch(f.sqs, nil)
			for i, cfg := range tt.sends {
				req := request(dispatchPool(url), 6001)
				req.JITConfig = cfg
				res, err := d.Provision(ctx, req)
				if err != nil {
					t.Fatalf("Provision %d: %v", i+1, err)
				}
				if res.MessageID == "" {
					t.Errorf("Provision %d: no message id", i+1)
				}
			}
			msgs := f.drain(t, url)
			var got []string
			for _, m := range msgs {
				got = append(got, m.JITConfig)
				if m.JobID != 6001 || m.RunnerName != "mac-6001" || m.Repo != "octo/hello" {
					t.Errorf("message: got %v, want job 6001 runner mac-6001", m)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("received %d messages, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("message %d carries another config than sent", i)
				}
			}
		})
	}
}

// TestUnfitTemplateOnMoto: a launch template made for the release at
// 674a79e (no instance metadata tags, EC2's default shutdown behaviour
// stop), read from moto through ec2api as EC2 describes it, fails the
// job's provisioning at once and launches nothing; the same template with
// the README's settings (version 2, pointed at as $Latest) launches.
func TestUnfitTemplateOnMoto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setupAWS(t)
	const job = int64(5301)
	name := fmt.Sprintf("runner-%d", job)
	if _, err := provisiontest.LaunchTemplateWith(ctx, f.ec2, name, "ami-03cf127a", "t3.micro", nil); err != nil {
		t.Fatal(err)
	}
	p := ec2Pool()
	p.Provisioner.LaunchTemplate, p.Provisioner.LaunchTemplateVersion = name, "$Latest"
	subnets, err := provisiontest.Subnets(ctx, f.ec2)
	if err != nil || len(subnets) == 0 {
		t.Fatalf("DescribeSubnets: %v (%d subnets)", err, len(subnets))
	}
	p.Provisioner.Subnets = []string{subnets[0]}
	adapter := NewEC2(f.ec2, f.ssm, nil)
	_, err = adapter.Provision(ctx, request(p, job))
	if !errors.Is(err, ErrUnfitTemplate) || !strings.Contains(err.Error(), "InstanceMetadataTags") || !strings.Contains(err.Error(), "InstanceInitiatedShutdownBehavior") {
		t.Fatalf("Provision from the release's kind of template: %v, want ErrUnfitTemplate naming both settings", err)
	}
	if got := f.jobInstances(t, job); len(got) != 0 {
		t.Fatalf("%d instances launched from an unfit template", len(got))
	}
	if err := provisiontest.LaunchTemplateVersion(ctx, f.ec2, name, url.Values{
		"LaunchTemplateData.ImageId":                              {"ami-03cf127a"},
		"LaunchTemplateData.InstanceType":                         {"t3.micro"},
		"LaunchTemplateData.MetadataOptions.HttpTokens":           {"required"},
		"LaunchTemplateData.MetadataOptions.InstanceMetadataTags": {"enabled"},
		"LaunchTemplateData.InstanceInitiatedShutdownBehavior":    {"terminate"},
	}); err != nil {
		t.Fatal(err)
	}
	if res, err := adapter.Provision(ctx, request(p, job)); err != nil || res.InstanceID == "" {
		t.Fatalf("Provision once the template is fixed: %+v, %v", res, err)
	}
}

package provisioners_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/provisioners"
)

// TestMachinesAndListingShareTheStack (EC2 and SSM on moto): what the
// wired EC2 provisioner launches carries the stack's tag, and the wired
// listing lists it; another stack's listing does not.
func TestMachinesAndListingShareTheStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	awsCfg := emulator.ForTest(t).ConfigForTest(t)
	ec2c := ec2api.New(awsCfg)
	lt := "wire-stack-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := provisiontest.LaunchTemplate(ctx, ec2c, lt, "ami-03cf127a", "t3.micro"); err != nil {
		t.Fatal(err)
	}
	// StrictSSM: moto stores any value in any tier; AWS does not.
	env := wire.Env{SSM: []func(*ssmapi.Options){provisiontest.StrictSSM}}
	reg, listing := provisioners.New(awsCfg, env, sqs.NewFromConfig(awsCfg), nil, "ci-wired")
	p := pool.Pool{Name: "wired", Labels: []string{"self-hosted"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
		Provisioner: pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: lt, LaunchTemplateVersion: "$Latest"}}
	const jobID = 6101
	res, err := reg.Provision(ctx, provision.Request{JobID: jobID, RunID: 1, Repo: "octo/app", Pool: p,
		RunnerName: "wired-6101", JITConfig: "eyJqaXQiOiJ0ZXN0In0"})
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	out, err := ec2c.DescribeInstances(ctx, &ec2api.DescribeInstancesInput{InstanceIDs: []string{res.InstanceID}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("DescribeInstances %s: %v", res.InstanceID, err)
	}
	var stack string
	for _, tg := range out.Reservations[0].Instances[0].Tags {
		if tg.Key == provision.TagStack {
			stack = tg.Value
		}
	}
	if stack != "ci-wired" {
		t.Errorf("machine tag %s = %q, want ci-wired", provision.TagStack, stack)
	}
	other, err := provisiontest.RunInstance(ctx, ec2c, "ami-03cf127a", "t3.micro", []ec2api.Tag{
		{Key: provision.TagJobID, Value: "6102"}, {Key: provision.TagRunnerName, Value: "wired-6102"}, {Key: provision.TagStack, Value: "ci-other"}})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := listing.LiveMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lists := func(id string) bool { return slices.ContainsFunc(ms, func(m pool.Machine) bool { return m.ID == id }) }
	if !lists(res.InstanceID) || lists(other) {
		t.Errorf("wired listing: lists its own machine %t, another stack's %t; want true, false", lists(res.InstanceID), lists(other))
	}
}

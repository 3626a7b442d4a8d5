package provision

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// TestScaffoldLaunchTemplateOnMoto deploys template.yaml with only
// RunnerSubnets filled in, as a new user would, and claims a job on the
// scaffold's linux-x64 pool: one instance from the stack's launch template,
// with the stack's image, instance profile and metadata options, and the
// JIT config tagged with that instance's ARN.
func TestScaffoldLaunchTemplateOnMoto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := emulator.ForTest(t)
	cfg := srv.ConfigForTest(t)
	ec2c := ec2api.New(cfg)
	f := awsFixture{ec2: ec2c, ssm: ssmapi.New(cfg, provisiontest.StrictSSM)}
	subnets, err := provisiontest.Subnets(ctx, ec2c)
	if err != nil || len(subnets) < 2 {
		t.Fatalf("DescribeSubnets: %v", err)
	}
	sub := []string{subnets[0], subnets[1]}

	path, err := emulator.TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	stack, err := emulator.Deploy(ctx, cfg, path, emulator.StackName(t.Name()), map[string]string{"RunnerSubnets": strings.Join(sub, ",")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Delete(context.Background()) })
	for _, id := range []string{"RunnerRole", "RunnerInstanceProfile", "RunnerSecurityGroup", "RunnerLaunchTemplateX64", "RunnerLaunchTemplateArm64"} {
		if stack.Resources[id] == "" {
			t.Fatalf("scaffold resource %s not created (dropped %v)", id, stack.Dropped)
		}
	}
	t.Logf("not deployed on the emulator: %v", stack.Dropped)
	ltID := stack.Outputs["RunnerLaunchTemplateX64"]
	if !strings.HasPrefix(ltID, "lt-") {
		t.Fatalf("output RunnerLaunchTemplateX64: got %q, want a launch template id", ltID)
	}

	// The pool as the template's default RUNNER_POOLS describes it.
	p := pool.Pool{Name: "linux-x64", Labels: []string{"self-hosted", "linux", "x64"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
		Provisioner: pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: ltID, LaunchTemplateVersion: "$Default",
			Subnets: sub, InstanceTypes: []string{"m7i.large", "m6i.large", "m5.large"}}}
	req := request(p, 7001)
	res, err := NewEC2(ec2c, f.ssm, nil).Provision(ctx, req)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	insts := f.jobInstances(t, 7001)
	if len(insts) != 1 || insts[0].InstanceID != res.InstanceID {
		t.Fatalf("instances of the job: got %d, want exactly %s", len(insts), res.InstanceID)
	}
	inst := insts[0]

	lt, err := provisiontest.TemplateData(ctx, ec2c, ltID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := inst.ImageID, lt.ImageID; got != want || !strings.HasPrefix(want, "ami-") {
		t.Errorf("image: got %q, want the template's %q (AL2023 from AWS's public SSM parameter)", got, want)
	}
	// moto does not carry a launch template's instance profile over to the
	// instance: check the template's.
	if got, want := lt.InstanceProfileARN, stack.Outputs["RunnerInstanceProfileArn"]; got != want || want == "" {
		t.Errorf("template instance profile: got %q, want the stack's %q", got, want)
	}
	if lt.HTTPTokens != "required" || lt.HTTPPutHopLimit != 1 || lt.InstanceMetadataTags != "enabled" {
		t.Errorf("template metadata options: got tokens %q, hop limit %d, tags %q, want IMDSv2 required, hop limit 1, tags on",
			lt.HTTPTokens, lt.HTTPPutHopLimit, lt.InstanceMetadataTags)
	}
	if lt.ShutdownBehavior != "terminate" {
		t.Errorf("template shutdown behaviour: got %q, want terminate", lt.ShutdownBehavior)
	}
	ud, err := base64.StdEncoding.DecodeString(lt.UserData)
	if err != nil || !strings.Contains(string(ud), "exec /usr/local/sbin/ghclaim-boot") || !strings.Contains(string(ud), "sha256sum -c") {
		t.Errorf("template user data (%v): want the checksum-verified install and the boot script", err)
	}
	f.assertInstanceTag(t, ParameterName(req.RunnerName), inst)
}

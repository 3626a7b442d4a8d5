package provision

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/pool"
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
	ec2c := ec2.NewFromConfig(cfg)
	f := awsFixture{ec2: ec2c, ssm: ssm.NewFromConfig(cfg, provisiontest.StrictSSM)}
	subnets, err := ec2c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) < 2 {
		t.Fatalf("DescribeSubnets: %v", err)
	}
	sub := []string{aws.ToString(subnets.Subnets[0].SubnetId), aws.ToString(subnets.Subnets[1].SubnetId)}

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
	if len(insts) != 1 || aws.ToString(insts[0].InstanceId) != res.InstanceID {
		t.Fatalf("instances of the job: got %d, want exactly %s", len(insts), res.InstanceID)
	}
	inst := insts[0]

	data, err := ec2c.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(ltID)})
	if err != nil || len(data.LaunchTemplateVersions) == 0 {
		t.Fatalf("DescribeLaunchTemplateVersions: %v", err)
	}
	lt := data.LaunchTemplateVersions[0].LaunchTemplateData
	if got, want := aws.ToString(inst.ImageId), aws.ToString(lt.ImageId); got != want || !strings.HasPrefix(want, "ami-") {
		t.Errorf("image: got %q, want the template's %q (AL2023 from AWS's public SSM parameter)", got, want)
	}
	// moto does not carry a launch template's instance profile over to the
	// instance: check the template's.
	if got, want := aws.ToString(lt.IamInstanceProfile.Arn), stack.Outputs["RunnerInstanceProfileArn"]; got != want || want == "" {
		t.Errorf("template instance profile: got %q, want the stack's %q", got, want)
	}
	if mo := lt.MetadataOptions; mo == nil || mo.HttpTokens != ec2types.LaunchTemplateHttpTokensStateRequired ||
		aws.ToInt32(mo.HttpPutResponseHopLimit) != 1 || mo.InstanceMetadataTags != ec2types.LaunchTemplateInstanceMetadataTagsStateEnabled {
		t.Errorf("template metadata options: got %+v, want IMDSv2 required, hop limit 1, tags on", mo)
	}
	if lt.InstanceInitiatedShutdownBehavior != ec2types.ShutdownBehaviorTerminate {
		t.Errorf("template shutdown behaviour: got %q, want terminate", lt.InstanceInitiatedShutdownBehavior)
	}
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(lt.UserData))
	if err != nil || !strings.Contains(string(ud), "exec /usr/local/sbin/ghclaim-boot") || !strings.Contains(string(ud), "sha256sum -c") {
		t.Errorf("template user data (%v): want the checksum-verified install and the boot script", err)
	}
	f.assertInstanceTag(t, ParameterName(req.RunnerName), inst)
}

package iamcheck_test

import (
	"testing"
)

const (
	testParam   = "arn:aws:ssm:us-east-1:123456789012:parameter/ghclaim/runners/linux-42"
	testOwnArn  = "arn:aws:ec2:us-east-1:123456789012:instance/i-0000000000000000a"
	testElseArn = "arn:aws:ec2:us-east-1:123456789012:instance/i-0000000000000000b"
)

// TestRunnerRoleConditionAsIAMEvaluatesIt: the runner role's read of its
// JIT config, judged with ${ec2:SourceInstanceARN} resolved from the
// request (a cross-service global key, usable as a policy variable).
// Not a finding: it passes on the current template.
func TestRunnerRoleConditionAsIAMEvaluatesIt(t *testing.T) {
	t.Parallel()
	stmts := newDeployment(t, map[string]string{"RunnerSubnets": "subnet-1"}).statements(t, "RunnerRole")
	for _, tt := range []struct {
		caller, tagged string
		want           bool
	}{{testOwnArn, testOwnArn, true}, {testElseArn, testOwnArn, false}, {"", testOwnArn, false}} {
		c := ctx{"ssm:resourceTag/ghclaim:instance-arn": {tt.tagged}}
		if tt.caller != "" {
			c["ec2:SourceInstanceARN"] = []string{tt.caller}
		}
		for _, a := range []string{"ssm:GetParameter", "ssm:DeleteParameter"} {
			if got := allows(t, stmts, a, testParam, c); got != tt.want {
				t.Errorf("%s by %q of a config tagged %q: allowed %v, want %v", a, tt.caller, tt.tagged, got, tt.want)
			}
		}
	}
}

// TestClaimerLaunchTemplateConditionWithPoolsOfYourOwn: RunnerLaunchTemplateIds
// left empty "allows any launch template of this account and Region"
// (its Description), and the Rules accept RunnerPools (or
// RunnerPoolsParameter) together with RunnerSubnets. The RunInstances
// grant on instance/volume/network-interface is ArnLike ec2:LaunchTemplate
// (Service Authorization Reference, RunInstances: instance* carries
// ec2:LaunchTemplate).
func TestClaimerLaunchTemplateConditionWithPoolsOfYourOwn(t *testing.T) {
	t.Parallel()
	own := "arn:aws:ec2:us-east-1:123456789012:launch-template/lt-0bbbbbbbbbbbbbbb1"
	pools := `[{"name":"gpu","labels":["self-hosted","gpu"],"provisioner":{"type":"ec2","launch_template":"lt-0bbbbbbbbbbbbbbb1"}}]`
	for name, params := range map[string]map[string]string{
		"RunnerPools and RunnerSubnets":          {"RunnerSubnets": "subnet-1", "RunnerPools": pools},
		"RunnerPoolsParameter and RunnerSubnets": {"RunnerSubnets": "subnet-1", "RunnerPoolsParameter": "/ghclaim/pools"},
	} {
		stmts := newDeployment(t, params).statements(t, "ClaimerFunction")
		for _, typ := range []string{"instance", "volume", "network-interface"} {
			res := "arn:aws:ec2:us-east-1:123456789012:" + typ + "/*"
			if !allows(t, stmts, "ec2:RunInstances", res, ctx{"ec2:LaunchTemplate": {own}}) {
				t.Errorf("%s, RunnerLaunchTemplateIds empty: ec2:RunInstances on %s through the pool's own template %s is denied", name, res, own)
			}
		}
	}
}

// TestClaimerTagsOnlyItsOwnStacksConfigs: ssm:AddTagsToResource is an API of
// its own as well as PutParameter's tag authorisation (Service
// Authorization Reference, Systems Manager: PutParameter's dependent
// action; AddTagsToResource on parameter with aws:ResourceTag,
// ssm:resourceTag, aws:RequestTag, aws:TagKeys), and PutParameter takes
// Overwrite (ssm:Overwrite). The claimer must not rewrite another stack's
// config: not its instance tag (another stack's JIT config read by a
// machine of its choosing), not its stack tag (which the stack-guarded
// DeleteParameter then lets it delete), not its value.
func TestClaimerTagsOnlyItsOwnStacksConfigs(t *testing.T) {
	t.Parallel()
	stmts := newDeployment(t, nil).statements(t, "ClaimerFunction")
	for _, tt := range []struct {
		what, action string
		c            ctx
		want         bool
	}{
		{"tags of its own new config (PutParameter with Tags)", "ssm:AddTagsToResource", ctx{
			"aws:TagKeys": {"ghclaim:instance-arn", "ghclaim:stack"}, "aws:RequestTag/ghclaim:stack": {"ghclaim"},
			"aws:RequestTag/ghclaim:instance-arn": {testOwnArn}}, true},
		{"its own new config", "ssm:PutParameter", ctx{"aws:TagKeys": {"ghclaim:instance-arn", "ghclaim:stack"},
			"aws:RequestTag/ghclaim:stack": {"ghclaim"}}, true},
		{"another stack's config re-pointed at another machine", "ssm:AddTagsToResource", ctx{
			"aws:TagKeys": {"ghclaim:instance-arn"}, "aws:RequestTag/ghclaim:instance-arn": {testElseArn},
			"ssm:resourceTag/ghclaim:stack": {"other"}, "aws:ResourceTag/ghclaim:stack": {"other"}}, false},
		{"another stack's config restamped as this stack's", "ssm:AddTagsToResource", ctx{
			"aws:TagKeys": {"ghclaim:stack"}, "aws:RequestTag/ghclaim:stack": {"ghclaim"},
			"ssm:resourceTag/ghclaim:stack": {"other"}, "aws:ResourceTag/ghclaim:stack": {"other"}}, false},
		{"another stack's config overwritten", "ssm:PutParameter", ctx{"ssm:Overwrite": {"true"},
			"ssm:resourceTag/ghclaim:stack": {"other"}, "aws:ResourceTag/ghclaim:stack": {"other"}}, false},
	} {
		if got := allows(t, stmts, tt.action, testParam, tt.c); got != tt.want {
			t.Errorf("%s (%s): allowed %v, want %v", tt.what, tt.action, got, tt.want)
		}
	}
}

package emulator

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The runner role is what every job on every runner holds (unless the
// boot script's firewall keeps it from IMDS): it may touch a JIT config
// only where the parameter's instance tag names the calling instance.

// ownConfigCondition is the only condition under which the runner role may
// read or delete a JIT config.
var ownConfigCondition = map[string]any{"StringEquals": map[string]any{"ssm:resourceTag/ghclaim:instance-arn": "${ec2:SourceInstanceARN}"}}

// runnerRoleStatements returns every statement of the runner role's inline policies.
func runnerRoleStatements(t *testing.T, tmpl map[string]any) []map[string]any {
	t.Helper()
	res, _ := tmpl["Resources"].(map[string]any)["RunnerRole"].(map[string]any)
	if res["Type"] != "AWS::IAM::Role" {
		t.Fatalf("RunnerRole: got type %v, want AWS::IAM::Role", res["Type"])
	}
	props, _ := res["Properties"].(map[string]any)
	var out []map[string]any
	for _, p := range list(props["Policies"]) {
		doc := p.(map[string]any)["PolicyDocument"]
		out = append(out, statements(doc)...)
	}
	if len(out) == 0 {
		t.Fatal("RunnerRole has no inline policy statement")
	}
	return out
}

func TestRunnerRoleReadsOnlyItsOwnConfig(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	sawGet, sawDelete := false, false
	for i, s := range runnerRoleStatements(t, tmpl) {
		if s["Effect"] != "Allow" {
			continue
		}
		if _, ok := s["NotAction"]; ok {
			t.Errorf("statement %d: NotAction in the runner role allows everything else", i)
		}
		for _, a := range list(s["Action"]) {
			action := strings.ToLower(fmt.Sprint(a))
			if strings.Contains(action, "*") {
				t.Errorf("statement %d: wildcard action %q", i, a)
			}
			if !strings.HasPrefix(action, "ssm:") && !strings.HasPrefix(action, "kms:") {
				t.Errorf("statement %d: action %q is not needed to read the own JIT config", i, a)
			}
			if action == "ssm:getparameter" {
				sawGet = true
			}
			if action == "ssm:deleteparameter" {
				sawDelete = true
			}
			if strings.HasPrefix(action, "ssm:") && fmt.Sprint(s["Condition"]) != fmt.Sprint(ownConfigCondition) {
				t.Errorf("statement %d: %s with condition %v, want exactly %v", i, a, s["Condition"], ownConfigCondition)
			}
			if slices.Contains([]string{"ssm:getparameters", "ssm:getparametersbypath", "ssm:getparameterhistory"}, action) {
				t.Errorf("statement %d: %s reads parameters by path or in bulk", i, a)
			}
		}
		for _, r := range list(s["Resource"]) {
			if !strings.HasSuffix(strings.TrimSuffix(fmt.Sprint(r), "]"), ":parameter/ghclaim/runners/*") {
				t.Errorf("statement %d: resource %v, want only parameter/ghclaim/runners/*", i, r)
			}
		}
	}
	if !sawGet || !sawDelete {
		t.Errorf("runner role: GetParameter %v, DeleteParameter %v, want both (read once, then delete)", sawGet, sawDelete)
	}
}

func TestRunnerRoleIsForEC2Only(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	props := tmpl["Resources"].(map[string]any)["RunnerRole"].(map[string]any)["Properties"].(map[string]any)
	trust := statements(props["AssumeRolePolicyDocument"])
	if len(trust) != 1 || !isServicePrincipal(trust[0], "ec2.amazonaws.com") || !hasAction(trust[0], "sts:AssumeRole") {
		t.Errorf("trust policy: got %v, want ec2.amazonaws.com only", trust)
	}
}

// The claimer writes the config with its two tags (the instance's ARN, the
// stack's name): PutParameter with Tags is also authorised as
// ssm:AddTagsToResource, which must not let it tag with anything else.
func TestClaimerTagsConfigsWithTheInstanceAndStackTagsOnly(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	props := tmpl["Resources"].(map[string]any)["ClaimerFunction"].(map[string]any)["Properties"].(map[string]any)
	found := false
	for _, p := range list(props["Policies"]) {
		for _, s := range statements(p) {
			if !hasAction(s, "ssm:AddTagsToResource") {
				continue
			}
			found = true
			c, _ := s["Condition"].(map[string]any)
			keys, _ := c["ForAllValues:StringEquals"].(map[string]any)
			if fmt.Sprint(keys["aws:TagKeys"]) != "[ghclaim:instance-arn ghclaim:stack]" {
				t.Errorf("AddTagsToResource condition: got %v, want aws:TagKeys limited to ghclaim:instance-arn and ghclaim:stack", c)
			}
		}
	}
	if !found {
		t.Error("the claimer may not tag its parameters: PutParameter with Tags is refused")
	}
}

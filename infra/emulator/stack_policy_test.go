package emulator

import (
	"fmt"
	"testing"
)

// Two stacks in one account and Region share EC2 and /ghclaim/runners/:
// each function that ends machines or deletes JIT configs may do so only
// for its own stack's (the ghclaim:stack tag, which shared/provision puts
// on every machine and config from GHCLAIM_STACK), or for untagged ones
// from before stacks were tagged.
func TestFunctionsEndOnlyTheirStacksMachinesAndConfigs(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	guards := map[string]string{
		"ec2:TerminateInstances": "aws:ResourceTag/ghclaim:stack",
		"ssm:DeleteParameter":    "ssm:resourceTag/ghclaim:stack",
	}
	granted := map[string]int{}
	for _, fn := range resourcesOfType(tmpl, "AWS::Serverless::Function") {
		for _, p := range list(prop(t, tmpl, fn, "Properties", "Policies")) {
			for _, s := range statements(p) {
				if s["Effect"] != "Allow" {
					continue
				}
				for action, key := range guards {
					if !hasAction(s, action) {
						continue
					}
					granted[fn+" "+action]++
					c, _ := s["Condition"].(map[string]any)
					ifExists, _ := c["StringEqualsIfExists"].(map[string]any)
					if got := fmt.Sprint(ifExists[key]); got != fmt.Sprint(ref("AWS::StackName")) {
						t.Errorf("%s: %s with condition %v, want StringEqualsIfExists %s = the stack's name", fn, action, c, key)
					}
				}
			}
		}
	}
	for _, want := range []string{
		"ClaimerFunction ec2:TerminateInstances", "ClaimerFunction ssm:DeleteParameter",
		"ReclaimerFunction ec2:TerminateInstances", "ReclaimerFunction ssm:DeleteParameter",
		"JanitorFunction ec2:TerminateInstances", "JanitorFunction ssm:DeleteParameter",
	} {
		if granted[want] == 0 {
			t.Errorf("%s: not granted (the test would check nothing)", want)
		}
	}
	g, _ := tmpl["Globals"].(map[string]any)
	f, _ := g["Function"].(map[string]any)
	e, _ := f["Environment"].(map[string]any)
	env, _ := e["Variables"].(map[string]any)
	if got := fmt.Sprint(env["GHCLAIM_STACK"]); got != fmt.Sprint(ref("AWS::StackName")) {
		t.Errorf("Globals GHCLAIM_STACK = %s, want the stack's name (what the conditions compare)", got)
	}
}

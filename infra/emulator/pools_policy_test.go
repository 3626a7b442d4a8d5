package emulator

import (
	"fmt"
	"testing"
)

// The functions that read RUNNER_POOLS may read the pools parameter, that parameter only, and
// only when one is named; the redeliverer (no pools) may not.
func TestPoolsParameterIsReadableByThePoolReadersOnly(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	want := fmt.Sprint(map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${RunnerPoolsParameter}"})
	for fn, reads := range map[string]bool{"WebhookFunction": true, "ClaimerFunction": true, "ReclaimerFunction": true, "JanitorFunction": true, "RedelivererFunction": false} {
		t.Run(fn, func(t *testing.T) {
			t.Parallel()
			grants := 0
			for _, p := range list(prop(t, tmpl, fn, "Properties", "Policies")) {
				raw, _ := p.(map[string]any)
				for _, s := range list(raw["Statement"]) {
					sm, _ := s.(map[string]any)
					branches, isIf := sm["Fn::If"].([]any)
					for _, st := range statements(map[string]any{"Statement": []any{s}}) {
						if !hasAction(st, "ssm:GetParameter") {
							continue
						}
						grants++
						if len(list(st["Action"])) != 1 || fmt.Sprint(st["Resource"]) != want {
							t.Errorf("got %v on %v, want only ssm:GetParameter on %s", st["Action"], st["Resource"], want)
						}
						if !isIf || branches[0] != "HasRunnerPoolsParameter" {
							t.Errorf("ssm:GetParameter is granted without the HasRunnerPoolsParameter condition")
						}
					}
				}
			}
			if got := grants == 1; got != reads {
				t.Errorf("got %d ssm:GetParameter grants, want reads=%v", grants, reads)
			}
		})
	}
}

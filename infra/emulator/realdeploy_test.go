package emulator

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardNameIsUniqueAcrossRegions: CloudWatch dashboards are global to
// the account, not regional ("All dashboards in your account are global, not
// region-specific", AWS::CloudWatch::Dashboard / PutDashboard reference). A
// DashboardName made of the stack name alone collides when the same stack
// name (samconfig.toml's "ghclaim") is deployed in a second Region of the
// account: that stack's create fails on the dashboard and rolls back. moto
// skips the dashboard, and cfn-lint does not know dashboards are global.
func TestDashboardNameIsUniqueAcrossRegions(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	ids := resourcesOfType(tmpl, "AWS::CloudWatch::Dashboard")
	if len(ids) == 0 {
		t.Fatal("no AWS::CloudWatch::Dashboard: nothing was checked")
	}
	for _, id := range ids {
		props, _ := dig(tmpl, "Resources", id, "Properties").(map[string]any)
		name, set := props["DashboardName"]
		if !set {
			continue // CloudFormation generates a unique name
		}
		b, err := json.Marshal(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "AWS::Region") {
			t.Errorf("%s: DashboardName %s does not depend on AWS::Region; dashboards are account-global, "+
				"so the same stack name in a second Region fails its create (dashboard already exists)", id, b)
		}
	}
}

// TestSamconfigPlaceholdersAreRefusedAtDeploy: samconfig.toml ships placeholder
// values ("the placeholder fails validation on purpose"). A placeholder that
// passes the template's parameter constraints deploys a stack that cannot work.
// RunnerSubnets is a CommaDelimitedList without AllowedPattern, so
// "REPLACE_WITH_SUBNET_IDS" creates the scaffold and every EC2 launch then fails
// (InvalidSubnetID.NotFound, a non-retryable claim failure).
func TestSamconfigPlaceholdersAreRefusedAtDeploy(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	path, err := TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(path), "samconfig.toml"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^parameter_overrides\s*=\s*"((?:[^"\\]|\\.)*)"`).FindSubmatch(data)
	if line == nil {
		t.Fatal("samconfig.toml: no parameter_overrides")
	}
	overrides := strings.ReplaceAll(string(line[1]), `\"`, `"`)
	pairs := regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(overrides, -1)
	checked := 0
	for _, kv := range pairs {
		param, value := kv[1], kv[2]
		if !strings.Contains(value, "REPLACE") {
			continue
		}
		checked++
		p, _ := dig(tmpl, "Parameters", param).(map[string]any)
		if p == nil {
			t.Errorf("samconfig.toml overrides %s, which template.yaml does not declare", param)
			continue
		}
		typ, _ := p["Type"].(string)
		if strings.HasPrefix(typ, "AWS::") || strings.HasPrefix(typ, "List<AWS::") {
			continue // CloudFormation checks AWS-specific types against the account
		}
		values := []string{value}
		if typ == "CommaDelimitedList" {
			values = strings.Split(value, ",")
		}
		refused := false
		if pat, _ := p["AllowedPattern"].(string); pat != "" {
			re := regexp.MustCompile(pat)
			for _, v := range values {
				if !re.MatchString(strings.TrimSpace(v)) {
					refused = true
				}
			}
		}
		if allowed, ok := p["AllowedValues"].([]any); ok {
			in := false
			for _, a := range allowed {
				if a == value {
					in = true
				}
			}
			refused = refused || !in
		}
		if !refused {
			t.Errorf("samconfig.toml's placeholder %s=%q passes the template's constraints (%s, no AllowedPattern "+
				"refusing it): a deploy that forgets to replace it succeeds and the stack cannot work", param, value, typ)
		}
	}
	if checked == 0 {
		t.Fatal("no REPLACE_ placeholder in samconfig.toml: nothing was checked")
	}
}

// TestSchedulesAreRefusedBeforeTheDeployStarts: EventBridge accepts rate(value
// unit) with unit minute|minutes|hour|hours|day|days, singular exactly for 1
// ("If the value is equal to 1, then the unit must be singular ... rate(1 hours)
// and rate(5 hour) are not valid", EventBridge schedule expressions), no
// seconds, and cron() with six fields. A schedule parameter without an
// AllowedPattern takes any string: a typo fails only when CloudFormation
// reaches the AWS::Events::Rule, after the table, queues, roles and functions,
// and the whole stack rolls back. cfn-lint (W1030) checks the Default only.
func TestSchedulesAreRefusedBeforeTheDeployStarts(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	bad := []string{"rate(1 minutes)", "rate(5 minute)", "rate(30 seconds)", "rate(0 minutes)", "every minute", ""}
	checked := 0
	for _, id := range resourcesOfType(tmpl, "AWS::Serverless::Function") {
		events, _ := dig(tmpl, "Resources", id, "Properties", "Events").(map[string]any)
		for name, e := range events {
			em, _ := e.(map[string]any)
			if em["Type"] != "Schedule" {
				continue
			}
			ref, _ := dig(em, "Properties", "Schedule").(map[string]any)
			param, _ := ref["Ref"].(string)
			if param == "" {
				continue // a literal: cfn-lint checks it
			}
			checked++
			p, _ := dig(tmpl, "Parameters", param).(map[string]any)
			pat, _ := p["AllowedPattern"].(string)
			if pat == "" {
				t.Errorf("%s.%s: schedule parameter %s has no AllowedPattern: %q and the like deploy until EventBridge refuses them mid-stack",
					id, name, param, bad[0])
				continue
			}
			re := regexp.MustCompile(pat)
			if def, _ := p["Default"].(string); !re.MatchString(def) {
				t.Errorf("%s: the pattern refuses its own default %q", param, def)
			}
			for _, v := range bad {
				if re.MatchString(v) {
					t.Errorf("%s: the pattern accepts %q, which EventBridge refuses", param, v)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no schedule taken from a parameter: nothing was checked")
	}
}

// TestLaunchTemplateNamesFitAnyStackName: a stack name is up to 128 characters
// (CloudFormation), a launch template name too (3-128, EC2
// CreateLaunchTemplate). "${AWS::StackName}-runner-arm64" is over 128 for a
// stack name over 114 characters, and the scaffold's create fails.
func TestLaunchTemplateNamesFitAnyStackName(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	const maxStack, maxName = 128, 128
	for _, id := range resourcesOfType(tmpl, "AWS::EC2::LaunchTemplate") {
		props, _ := dig(tmpl, "Resources", id, "Properties").(map[string]any)
		sub, _ := props["LaunchTemplateName"].(map[string]any)
		s, _ := sub["Fn::Sub"].(string)
		if s == "" {
			continue // no name, or a literal
		}
		name := strings.ReplaceAll(s, "${AWS::StackName}", strings.Repeat("s", maxStack))
		if len(name) > maxName {
			t.Errorf("%s: LaunchTemplateName %q is %d characters for a stack name of %d, over EC2's %d",
				id, s, len(name), maxStack, maxName)
		}
	}
}

package emulator

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRulesRefuseAStackWithoutPools: the template's rule refuses, at deploy
// time, parameters that leave the functions without pools (every function
// reading them would fail its cold start, and the webhook answer GitHub with
// 5xx), and accepts each way of giving them. moto does not evaluate Rules,
// so the assertion is evaluated here on the parameters' values.
func TestRulesRefuseAStackWithoutPools(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	rule, _ := dig(tmpl, "Rules", "RunnerPoolsConfigured", "Assertions").([]any)
	if len(rule) != 1 {
		t.Fatalf("Rules.RunnerPoolsConfigured.Assertions = %v, want one assertion", rule)
	}
	assert := dig(rule[0], "Assert")
	params, _ := tmpl["Parameters"].(map[string]any)
	defaults := func(over map[string]string) map[string]any {
		vals := map[string]any{}
		for name, p := range params {
			pm, _ := p.(map[string]any)
			d := fmt.Sprint(pm["Default"])
			if pm["Default"] == nil {
				d = ""
			}
			if o, ok := over[name]; ok {
				d = o
			}
			if pm["Type"] == "CommaDelimitedList" {
				vals[name] = strings.Split(d, ",")
			} else {
				vals[name] = d
			}
		}
		return vals
	}
	for _, tt := range []struct {
		name string
		set  map[string]string
		want bool
	}{
		{"the defaults: no pools", nil, false},
		{"RunnerPools", map[string]string{"RunnerPools": `[{"name":"a"}]`}, true},
		{"RunnerPoolsParameter", map[string]string{"RunnerPoolsParameter": "/ghclaim/pools"}, true},
		{"the scaffold's subnets", map[string]string{"RunnerSubnets": "subnet-1,subnet-2"}, true},
		{"subnets with a role of one's own: no scaffold", map[string]string{"RunnerSubnets": "subnet-1", "RunnerInstanceRoleArn": "arn:aws:iam::1:role/r"}, false},
	} {
		got, err := evalRule(assert, defaults(tt.set))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: the rule says %v, want %v", tt.name, got, tt.want)
		}
	}
}

// evalRule evaluates a Rules assertion over parameter values (strings, or
// []string for lists), with the functions CloudFormation allows there that
// the template uses.
func evalRule(v any, params map[string]any) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false, fmt.Errorf("not a rule function: %v", v)
	}
	for fn, arg := range m {
		args, _ := arg.([]any)
		switch fn {
		case "Fn::Or", "Fn::And":
			or := fn == "Fn::Or"
			for _, a := range args {
				b, err := evalRule(a, params)
				if err != nil {
					return false, err
				}
				if b == or {
					return or, nil
				}
			}
			return !or, nil
		case "Fn::Not":
			b, err := evalRule(args[0], params)
			return !b, err
		case "Fn::Equals":
			return fmt.Sprint(value(args[0], params)) == fmt.Sprint(value(args[1], params)), nil
		case "Fn::Contains":
			l, _ := args[0].([]any)
			want := fmt.Sprint(value(args[1], params))
			return slices.ContainsFunc(l, func(x any) bool { return fmt.Sprint(x) == want }), nil
		case "Fn::EachMemberEquals":
			l, _ := value(args[0], params).([]string)
			want := fmt.Sprint(value(args[1], params))
			return !slices.ContainsFunc(l, func(s string) bool { return s != want }), nil
		}
		return false, fmt.Errorf("rule function %s not evaluated here", fn)
	}
	return false, nil
}

// value is a Ref's parameter value, or a literal.
func value(v any, params map[string]any) any {
	if m, ok := v.(map[string]any); ok {
		if r, ok := m["Ref"].(string); ok {
			return params[r]
		}
	}
	return v
}

// TestRulesRefuseFipsWhereThereIsNone: AwsEndpoints fips or fips-dualstack
// deploys only in a Region where every service the functions call has FIPS
// endpoints; elsewhere every call would fail on a host name that does not
// resolve. regional and dualstack deploy anywhere.
func TestRulesRefuseFipsWhereThereIsNone(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	cond := dig(tmpl, "Rules", "FipsEndpointsInTheRegion", "RuleCondition")
	rule, _ := dig(tmpl, "Rules", "FipsEndpointsInTheRegion", "Assertions").([]any)
	if cond == nil || len(rule) != 1 {
		t.Fatalf("Rules.FipsEndpointsInTheRegion: condition %v, assertions %v; want a condition and one assertion", cond, rule)
	}
	assert := dig(rule[0], "Assert")
	for _, tt := range []struct {
		endpoints, region string
		deploys           bool
	}{
		{"fips", "us-east-1", true},
		{"fips-dualstack", "ca-central-1", true},
		{"fips", "us-gov-west-1", true},
		{"fips", "eu-west-1", false},
		{"fips-dualstack", "ap-southeast-2", false},
		{"regional", "eu-west-1", true},
		{"dualstack", "ap-southeast-2", true},
	} {
		params := map[string]any{"AwsEndpoints": tt.endpoints, "AWS::Region": tt.region}
		applies, err := evalRule(cond, params)
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		if applies {
			if ok, err = evalRule(assert, params); err != nil {
				t.Fatal(err)
			}
		}
		if ok != tt.deploys {
			t.Errorf("AwsEndpoints=%s in %s: deploys %v, want %v", tt.endpoints, tt.region, ok, tt.deploys)
		}
	}
}

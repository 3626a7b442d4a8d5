package iamcheck_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/emulator"
)

// deployment resolves template.yaml as CloudFormation does for one set of
// parameters: its Conditions, then every intrinsic of a role's policy, so a
// statement can be judged with IAM's condition operators (policy evaluation
// logic, https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html).
type deployment struct {
	tmpl   map[string]any
	params map[string]string // deployment parameters; absent: the template's default
	refs   map[string]string // !Ref of resources and pseudo parameters
}

func (d deployment) param(name string) (any, bool) {
	ps, _ := d.tmpl["Parameters"].(map[string]any)
	p, ok := ps[name].(map[string]any)
	if !ok {
		return nil, false
	}
	v, set := d.params[name]
	if !set {
		v = fmt.Sprint(p["Default"])
		if p["Default"] == nil {
			v = ""
		}
	}
	if p["Type"] == "CommaDelimitedList" {
		var out []any
		for _, x := range strings.Split(v, ",") {
			out = append(out, strings.TrimSpace(x))
		}
		return out, true
	}
	return v, true
}

func (d deployment) condition(name string) bool {
	cs, _ := d.tmpl["Conditions"].(map[string]any)
	v := d.eval(cs[name])
	b, ok := v.(bool)
	if !ok {
		panic(fmt.Sprintf("condition %s is %v", name, v))
	}
	return b
}

var subVarRE = regexp.MustCompile(`\$\{([^}!]+)\}`)

// eval resolves the intrinsics in v; AWS::NoValue becomes nil.
func (d deployment) eval(v any) any {
	switch x := v.(type) {
	case []any:
		var out []any
		for _, e := range x {
			if r := d.eval(e); r != nil {
				out = append(out, r)
			}
		}
		return out
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				switch k {
				case "Ref":
					name := arg.(string)
					if name == "AWS::NoValue" {
						return nil
					}
					if p, ok := d.param(name); ok {
						return p
					}
					if r, ok := d.refs[name]; ok {
						return r
					}
					panic("no value for !Ref " + name)
				case "Condition":
					return d.condition(arg.(string))
				case "Fn::If":
					a := arg.([]any)
					if d.condition(a[0].(string)) {
						return d.eval(a[1])
					}
					return d.eval(a[2])
				case "Fn::Equals":
					a := arg.([]any)
					return fmt.Sprint(d.eval(a[0])) == fmt.Sprint(d.eval(a[1]))
				case "Fn::Not":
					return !d.eval(arg.([]any)[0]).(bool)
				case "Fn::And", "Fn::Or":
					all, any_ := true, false
					for _, c := range arg.([]any) {
						b := d.eval(c).(bool)
						all, any_ = all && b, any_ || b
					}
					if k == "Fn::And" {
						return all
					}
					return any_
				case "Fn::Join":
					a := arg.([]any)
					var parts []string
					for _, p := range emulator.AsList(d.eval(a[1])) {
						parts = append(parts, fmt.Sprint(p))
					}
					return strings.Join(parts, a[0].(string))
				case "Fn::Split":
					a := arg.([]any)
					var out []any
					for _, s := range strings.Split(fmt.Sprint(d.eval(a[1])), a[0].(string)) {
						out = append(out, s)
					}
					return out
				case "Fn::GetAtt":
					a := arg.([]any)
					return d.refs[fmt.Sprint(a[0])+"."+fmt.Sprint(a[1])]
				case "Fn::Sub":
					s, vars := "", map[string]any{}
					switch a := arg.(type) {
					case string:
						s = a
					case []any:
						s, vars = a[0].(string), a[1].(map[string]any)
					}
					return subVarRE.ReplaceAllStringFunc(s, func(m string) string {
						name := m[2 : len(m)-1]
						if v, ok := vars[name]; ok {
							return fmt.Sprint(d.eval(v))
						}
						if strings.Contains(name, ".") {
							return d.refs[name]
						}
						return fmt.Sprint(d.eval(map[string]any{"Ref": name}))
					})
				}
			}
		}
		out := map[string]any{}
		for k, e := range x {
			if r := d.eval(e); r != nil {
				out[k] = r
			}
		}
		return out
	}
	return v
}

// statements returns the resolved statements of resource id's policies
// (a function's Policies or a role's Policies[].PolicyDocument).
func (d deployment) statements(t *testing.T, id string) []map[string]any {
	t.Helper()
	res := d.tmpl["Resources"].(map[string]any)[id].(map[string]any)
	var out []map[string]any
	for _, p := range emulator.AsList(res["Properties"].(map[string]any)["Policies"]) {
		doc := p.(map[string]any)
		if pd, ok := doc["PolicyDocument"]; ok {
			doc = pd.(map[string]any)
		}
		for _, s := range emulator.AsList(d.eval(doc["Statement"])) {
			out = append(out, s.(map[string]any))
		}
	}
	return out
}

// iamGlob is IAM's wildcard match; fold for actions.
func iamGlob(pattern, s string, fold bool) bool {
	re := "^" + strings.ReplaceAll(strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*"), `\?`, ".") + "$"
	if fold {
		re = "(?i)" + re
	}
	return regexp.MustCompile(re).MatchString(s)
}

// ctx is a request context: condition keys (case-insensitive) to values.
type ctx map[string][]string

func (c ctx) get(key string) ([]string, bool) {
	for k, v := range c {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return nil, false
}

// expand replaces ${key} policy variables with the context's value; ok
// false when one is absent (the condition then does not match).
func (c ctx) expand(s string) (string, bool) {
	ok := true
	out := subVarRE.ReplaceAllStringFunc(s, func(m string) string {
		v, found := c.get(m[2 : len(m)-1])
		if !found || len(v) != 1 {
			ok = false
			return m
		}
		return v[0]
	})
	return out, ok
}

func (c ctx) holds(t *testing.T, cond map[string]any) bool {
	for op, kv := range cond {
		base, ifExists := strings.CutSuffix(op, "IfExists")
		single, set := strings.CutPrefix(base, "ForAllValues:")
		for key, want := range kv.(map[string]any) {
			got, present := c.get(key)
			if base == "Null" {
				if (fmt.Sprint(want) == "true") != !present {
					return false
				}
				continue
			}
			if !present {
				if ifExists || set {
					continue // IfExists, and ForAllValues of nothing, hold
				}
				return false
			}
			match := func(v string) bool {
				for _, w := range emulator.AsList(want) {
					ws, ok := c.expand(fmt.Sprint(w))
					if !ok {
						continue
					}
					switch single {
					case "StringEquals", "ArnEquals":
						if v == ws {
							return true
						}
					case "StringLike", "ArnLike":
						if iamGlob(ws, v, false) {
							return true
						}
					case "Bool":
						if strings.EqualFold(v, ws) {
							return true
						}
					default:
						t.Fatalf("condition operator %s is not modelled", op)
					}
				}
				return false
			}
			n := 0
			for _, v := range got {
				if match(v) {
					n++
				}
			}
			if set && n != len(got) || !set && n == 0 {
				return false
			}
		}
	}
	return true
}

// allows reports whether one of stmts allows action on resource in c
// (identity-based Allow statements only: the template has no Deny).
func allows(t *testing.T, stmts []map[string]any, action, resource string, c ctx) bool {
	t.Helper()
	for _, s := range stmts {
		if s["Effect"] != "Allow" {
			continue
		}
		actionOK, resourceOK := false, false
		for _, a := range emulator.AsList(s["Action"]) {
			actionOK = actionOK || iamGlob(fmt.Sprint(a), action, true)
		}
		for _, r := range emulator.AsList(s["Resource"]) {
			resourceOK = resourceOK || iamGlob(fmt.Sprint(r), resource, false)
		}
		cond, _ := s["Condition"].(map[string]any)
		if actionOK && resourceOK && c.holds(t, cond) {
			return true
		}
	}
	return false
}

func newDeployment(t *testing.T, params map[string]string) deployment {
	t.Helper()
	tmpl, err := emulator.LoadTemplate(mustPath(t))
	if err != nil {
		t.Fatal(err)
	}
	return deployment{tmpl: tmpl, params: params, refs: map[string]string{
		"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::StackName": "ghclaim",
		"RunnerLaunchTemplateX64": "lt-0aaaaaaaaaaaaaaa1", "RunnerLaunchTemplateArm64": "lt-0aaaaaaaaaaaaaaa2",
		"RunnerRole.Arn": "arn:aws:iam::123456789012:role/ghclaim-RunnerRole", "Table.Arn": "arn:aws:dynamodb:us-east-1:123456789012:table/t",
		"ClaimsQueue.Arn": "arn:aws:sqs:us-east-1:123456789012:claims", "GitHubAppPrivateKey": "arn:aws:secretsmanager:us-east-1:123456789012:secret:k",
		"WebhookSecret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:w",
	}}
}

package emulator

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Kept lists the resource types Deploy creates on the emulator: the data plane the functions
// talk to. Everything else in template.yaml (SAM functions and what SAM generates from them,
// IAM, alarms, schedules) either cannot be created by moto's CloudFormation or means nothing
// without real Lambda, and is dropped together with everything that references it.
var Kept = []string{
	"AWS::DynamoDB::Table",
	"AWS::SQS::Queue",
	"AWS::SNS::Topic",
	// The alarm topic's key: without it the topic would be dropped too. AWS::SNS::TopicPolicy is
	// not kept: moto's CloudFormation accepts it but creates nothing, and no emulator enforces a
	// resource policy (policy_test.go checks it in the template instead).
	"AWS::KMS::Key",
	"AWS::SSM::Parameter",
	secretType,
	// The runner scaffold: the claimer launches from its launch templates (their instance profile and
	// security group with them). moto creates the role but enforces none of its policies.
	"AWS::IAM::Role",
	"AWS::IAM::InstanceProfile",
	"AWS::EC2::SecurityGroup",
	"AWS::EC2::LaunchTemplate",
	// The functions' log groups (their retention): moto creates them, so a template mistake in
	// them fails here rather than on AWS. Alarms (moto's CloudFormation has no AWS::CloudWatch::Alarm)
	// and the dashboard (it names the functions) are dropped.
	"AWS::Logs::LogGroup",
}

const secretType = "AWS::SecretsManager::Secret"

// decodeTemplate parses a CloudFormation or SAM template in YAML (or JSON) into plain Go values
// (map[string]any, []any, string, int, float64, bool), rewriting the short-form intrinsics
// (!Ref, !GetAtt, !Sub, …) into their long form ({"Ref": …}, {"Fn::GetAtt": […]}, …), which is
// all a CloudFormation API accepts in a JSON template body.
func decodeTemplate(data []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	if len(doc.Content) != 1 {
		return nil, errors.New("parse template: want one YAML document")
	}
	v, err := longForm(doc.Content[0])
	if err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("parse template: top level is not a mapping")
	}
	return m, nil
}

// longForm converts one YAML node, intrinsic tags included.
func longForm(n *yaml.Node) (any, error) {
	if n.Kind == yaml.AliasNode {
		return longForm(n.Alias)
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return intrinsic(n)
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: mapping key is not a scalar", k.Line)
			}
			v, err := longForm(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := longForm(c)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node kind %d", n.Line, n.Kind)
}

// intrinsic converts a tagged node: !Ref and !Condition keep their names, !GetAtt's "A.B" scalar
// form becomes ["A", "B"], every other !X becomes Fn::X.
func intrinsic(n *yaml.Node) (any, error) {
	name := strings.TrimPrefix(n.Tag, "!")
	inner := *n
	inner.Tag = ""
	if n.Kind == yaml.ScalarNode {
		inner.Tag = "!!str" // the argument of an intrinsic is text even when it looks like a number
	}
	v, err := longForm(&inner)
	if err != nil {
		return nil, err
	}
	switch name {
	case "Ref", "Condition":
		return map[string]any{name: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q: want Resource.Attribute", n.Line, s)
			}
			v = []any{res, attr}
		}
	}
	return map[string]any{"Fn::" + name: v}, nil
}

// deps are the names a piece of template refers to.
type deps struct {
	names      map[string]bool // resources, parameters (Ref, GetAtt, Sub, DependsOn); pseudo parameters excluded
	conditions map[string]bool
}

func newDeps() deps { return deps{names: map[string]bool{}, conditions: map[string]bool{}} }

// subVar matches ${Name} and ${Name.Attr} in an Fn::Sub string; ${!Literal} is not a variable.
var subVar = regexp.MustCompile(`\$\{([^!}][^}]*)\}`)

func (d deps) addName(s string) {
	if !strings.HasPrefix(s, "AWS::") {
		d.names[s] = true
	}
}

func (d deps) walk(v any) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			d.walk(e)
		}
	case map[string]any:
		if len(v) == 1 {
			for k, arg := range v {
				if d.intrinsic(k, arg) {
					return
				}
			}
		}
		for _, e := range v {
			d.walk(e)
		}
	}
}

// intrinsic records what one long-form intrinsic refers to and reports whether it walked arg itself.
func (d deps) intrinsic(fn string, arg any) bool {
	switch fn {
	case "Ref":
		if s, ok := arg.(string); ok {
			d.addName(s)
		}
		return true
	case "Condition":
		if s, ok := arg.(string); ok {
			d.conditions[s] = true
		}
		return true
	case "Fn::GetAtt":
		switch a := arg.(type) {
		case string:
			res, _, _ := strings.Cut(a, ".")
			d.addName(res)
		case []any:
			if len(a) > 0 {
				if s, ok := a[0].(string); ok {
					d.addName(s)
				}
				d.walk(a[1:])
			}
		}
		return true
	case "Fn::Sub":
		text, locals := "", map[string]any{}
		switch a := arg.(type) {
		case string:
			text = a
		case []any:
			if len(a) > 0 {
				text, _ = a[0].(string)
			}
			if len(a) > 1 {
				locals, _ = a[1].(map[string]any)
				d.walk(a[1])
			}
		}
		for _, m := range subVar.FindAllStringSubmatch(text, -1) {
			name, _, _ := strings.Cut(strings.TrimSpace(m[1]), ".")
			if _, local := locals[name]; !local {
				d.addName(name)
			}
		}
		return true
	case "Fn::If":
		if a, ok := arg.([]any); ok && len(a) > 0 {
			if s, ok := a[0].(string); ok {
				d.conditions[s] = true
			}
			d.walk(a[1:])
			return true
		}
	}
	return false
}

// resourceDeps adds the DependsOn and Condition attributes of a resource to what its body refers to.
func resourceDeps(res map[string]any) deps {
	d := newDeps()
	d.walk(res)
	switch on := res["DependsOn"].(type) {
	case string:
		d.addName(on)
	case []any:
		for _, e := range on {
			if s, ok := e.(string); ok {
				d.addName(s)
			}
		}
	}
	if c, ok := res["Condition"].(string); ok {
		d.conditions[c] = true
	}
	return d
}

// emulatable returns the part of a decoded template that an emulator can create: resources whose
// type keep accepts and that refer only to parameters, pseudo parameters and other kept resources
// (transitively: dropping one drops its dependants), the outputs that refer only to those, and
// the parameters, conditions and mappings they use. The SAM Transform and Globals go: SAM expands
// them into functions, which are dropped anyway, and a name that only SAM defines (such as
// WebhookFunctionUrl) counts as dropped. DeletionPolicy and UpdateReplacePolicy are removed:
// emulated stacks are scratch, and moto and LocalStack honour Retain as CloudFormation does
// (TestEmulatorKeepsWhatATemplateRetains), so with it Delete would leave the table, the
// dead-letter queue and the log groups behind, one set per test run.
// It reports the resources it dropped, sorted.
func emulatable(tmpl map[string]any, keep func(resourceType string) bool) (map[string]any, []string, error) {
	resources, ok := tmpl["Resources"].(map[string]any)
	if !ok {
		return nil, nil, errors.New("template has no Resources mapping")
	}
	params, _ := tmpl["Parameters"].(map[string]any)
	conditions, _ := tmpl["Conditions"].(map[string]any)

	resDeps := map[string]deps{}
	kept := map[string]bool{}
	var dropped []string
	for id, r := range resources {
		res, ok := r.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("resource %s is not a mapping", id)
		}
		typ, _ := res["Type"].(string)
		if keep(typ) {
			kept[id] = true
			resDeps[id] = resourceDeps(res)
		} else {
			dropped = append(dropped, id)
		}
	}
	resolvable := func(d deps) bool {
		for name := range d.names {
			if _, isParam := params[name]; !isParam && !kept[name] {
				return false
			}
		}
		return true
	}
	for changed := true; changed; {
		changed = false
		for id := range kept {
			if !resolvable(resDeps[id]) {
				delete(kept, id)
				dropped = append(dropped, id)
				changed = true
			}
		}
	}

	out := map[string]any{"AWSTemplateFormatVersion": "2010-09-09"}
	used := newDeps() // what the kept resources and outputs need
	merge := func(d deps) {
		maps.Copy(used.names, d.names)
		maps.Copy(used.conditions, d.conditions)
	}
	keptRes := map[string]any{}
	for id := range kept {
		res := maps.Clone(resources[id].(map[string]any))
		delete(res, "DeletionPolicy")
		delete(res, "UpdateReplacePolicy")
		keptRes[id] = res
		merge(resDeps[id])
	}
	out["Resources"] = keptRes

	if outputs, ok := tmpl["Outputs"].(map[string]any); ok {
		keptOut := map[string]any{}
		for id, o := range outputs {
			d := newDeps()
			d.walk(o)
			if om, ok := o.(map[string]any); ok {
				if c, ok := om["Condition"].(string); ok {
					d.conditions[c] = true
				}
			}
			if resolvable(d) {
				keptOut[id] = o
				merge(d)
			}
		}
		if len(keptOut) > 0 {
			out["Outputs"] = keptOut
		}
	}

	// Conditions refer to parameters and to other conditions: close over both.
	keptCond := map[string]any{}
	for todo := slices.Collect(maps.Keys(used.conditions)); len(todo) > 0; {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if _, done := keptCond[name]; done {
			continue
		}
		c, ok := conditions[name]
		if !ok {
			return nil, nil, fmt.Errorf("condition %s is used but not defined", name)
		}
		keptCond[name] = c
		d := newDeps()
		d.walk(c)
		maps.Copy(used.names, d.names)
		todo = append(todo, slices.Collect(maps.Keys(d.conditions))...)
	}
	if len(keptCond) > 0 {
		out["Conditions"] = keptCond
	}

	keptParams := map[string]any{}
	for name := range used.names {
		if p, ok := params[name]; ok {
			keptParams[name] = p
		}
	}
	if len(keptParams) > 0 {
		out["Parameters"] = keptParams
	}
	if m, ok := tmpl["Mappings"]; ok {
		out["Mappings"] = m
	}
	slices.Sort(dropped)
	return out, dropped, nil
}

// LoadTemplate reads the template at path as decodeTemplate does: plain Go values, intrinsics in
// their long form.
func LoadTemplate(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	tmpl, err := decodeTemplate(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tmpl, nil
}

// AsList returns v as a list: a scalar or mapping becomes a list of one, nil none.
func AsList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// PolicyStatements returns the statements of a policy document (as LoadTemplate gives it), with
// every Fn::If statement replaced by its branches that are statements: either may apply,
// depending on parameters.
func PolicyStatements(doc any) []map[string]any {
	d, _ := doc.(map[string]any)
	var out []map[string]any
	for _, s := range AsList(d["Statement"]) {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		if branches, ok := m["Fn::If"].([]any); ok && len(branches) == 3 {
			for _, b := range branches[1:] {
				if bm, ok := b.(map[string]any); ok && bm["Ref"] != "AWS::NoValue" {
					out = append(out, bm)
				}
			}
			continue
		}
		out = append(out, m)
	}
	return out
}

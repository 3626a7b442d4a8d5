package emulator

import (
	"fmt"
	"slices"
	"strings"
)

// Index is one global secondary index of the template's DynamoDB table, as
// CloudFormation compares two of them on a stack update.
type Index struct {
	Name string
	// Keys are "attribute TYPE" in order (HASH, then RANGE).
	Keys []string
	// Projection is its ProjectionType, then its NonKeyAttributes sorted.
	Projection []string
}

// TableIndexes returns the global secondary indexes of the one
// AWS::DynamoDB::Table of the template at path, by name, as a stack with
// params (the template's defaults for the rest) would have them: Fn::If
// resolved by its condition (Fn::Equals, Fn::Not, Fn::And, Fn::Or,
// Condition, Ref of a parameter).
func TableIndexes(path string, params map[string]string) (map[string]Index, error) {
	tmpl, err := LoadTemplate(path)
	if err != nil {
		return nil, err
	}
	res, _ := tmpl["Resources"].(map[string]any)
	var tables []string
	for name, v := range res {
		if m, _ := v.(map[string]any); m["Type"] == "AWS::DynamoDB::Table" {
			tables = append(tables, name)
		}
	}
	if len(tables) != 1 {
		return nil, fmt.Errorf("%s: %d DynamoDB tables, want one", path, len(tables))
	}
	v, err := Resolve(path, params, "Resources", tables[0], "Properties")
	if err != nil {
		return nil, err
	}
	props, _ := v.(map[string]any)
	list := props["GlobalSecondaryIndexes"]
	types := map[string]string{}
	for _, a := range AsList(props["AttributeDefinitions"]) {
		m, _ := a.(map[string]any)
		types[fmt.Sprint(m["AttributeName"])] = fmt.Sprint(m["AttributeType"])
	}
	out := map[string]Index{}
	for _, g := range AsList(list) {
		m, _ := g.(map[string]any)
		ix := Index{Name: fmt.Sprint(m["IndexName"])}
		for _, k := range AsList(m["KeySchema"]) {
			km, _ := k.(map[string]any)
			name := fmt.Sprint(km["AttributeName"])
			ix.Keys = append(ix.Keys, name+" "+types[name]+" "+fmt.Sprint(km["KeyType"]))
		}
		p, _ := m["Projection"].(map[string]any)
		var nonKey []string
		for _, a := range AsList(p["NonKeyAttributes"]) {
			nonKey = append(nonKey, fmt.Sprint(a))
		}
		slices.Sort(nonKey)
		ix.Projection = append([]string{fmt.Sprint(p["ProjectionType"])}, nonKey...)
		out[ix.Name] = ix
	}
	return out, nil
}

// Resolve returns the part of the template at path under the keys at
// (Resources, a resource's name, Properties…) as a stack with params (the
// template's defaults for the rest) has it: every Fn::If replaced by the
// branch its condition takes (Fn::Equals, Fn::Not, Fn::And, Fn::Or,
// Condition, Ref of a parameter), and every Ref of AWS::NoValue left out,
// as CloudFormation does. Other intrinsics stay as they are.
func Resolve(path string, params map[string]string, at ...string) (any, error) {
	tmpl, err := LoadTemplate(path)
	if err != nil {
		return nil, err
	}
	r := resolver{tmpl: tmpl, params: map[string]string{}}
	decl, _ := tmpl["Parameters"].(map[string]any)
	for name, p := range decl {
		if def, ok := p.(map[string]any)["Default"]; ok {
			r.params[name] = fmt.Sprint(def)
		}
	}
	for k, v := range params {
		if _, ok := decl[k]; !ok {
			return nil, fmt.Errorf("%s: parameter %s: not in the template", path, k)
		}
		r.params[k] = v
	}
	var v any = tmpl
	for _, k := range at {
		m, _ := v.(map[string]any)
		if v = m[k]; v == nil {
			return nil, fmt.Errorf("%s: %s: not in the template", path, strings.Join(at, "."))
		}
	}
	out, err := r.value(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, strings.Join(at, "."), err)
	}
	return out, nil
}

// noValue is what resolver.value makes of a Ref of AWS::NoValue: left out
// of the mapping or list that holds it.
type noValue struct{}

// CheckIndexUpdate refuses a stack update from the indexes before to those
// after as CloudFormation does (DynamoDB's UpdateTable takes one index
// creation or deletion a call, and no index's key schema or projection
// changes in place): moto's CloudFormation applies either without a word,
// and on AWS the update fails and rolls back, leaving the stack on the old
// version.
func CheckIndexUpdate(before, after map[string]Index) error {
	changes := 0
	for name, b := range before {
		a, ok := after[name]
		if !ok {
			changes++
			continue
		}
		if !slices.Equal(a.Keys, b.Keys) || !slices.Equal(a.Projection, b.Projection) {
			return fmt.Errorf("index %s: Cannot update GSI's properties other than Provisioned Throughput and Contributor Insights Specification. You can create a new GSI with a different name. (keys %s → %s, projection %s → %s)",
				name, strings.Join(b.Keys, ", "), strings.Join(a.Keys, ", "), strings.Join(b.Projection, " "), strings.Join(a.Projection, " "))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			changes++
		}
	}
	if changes > 1 {
		return fmt.Errorf("Cannot perform more than one GSI creation or deletion in a single update (%d)", changes)
	}
	return nil
}

// resolver evaluates the intrinsics a table's properties use.
type resolver struct {
	tmpl   map[string]any
	params map[string]string
}

// value returns v with every Fn::If replaced by the branch its condition
// takes.
func (r resolver) value(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if arg, ok := t["Fn::If"]; ok && len(t) == 1 {
			l := AsList(arg)
			if len(l) != 3 {
				return nil, fmt.Errorf("Fn::If: want [condition, then, else], got %v", arg)
			}
			ok, err := r.condition(fmt.Sprint(l[0]))
			if err != nil {
				return nil, err
			}
			if ok {
				return r.value(l[1])
			}
			return r.value(l[2])
		}
		if ref, ok := t["Ref"]; ok && len(t) == 1 && ref == "AWS::NoValue" {
			return noValue{}, nil
		}
		out := map[string]any{}
		for k, x := range t {
			y, err := r.value(x)
			if err != nil {
				return nil, err
			}
			if _, gone := y.(noValue); !gone {
				out[k] = y
			}
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(t))
		for _, x := range t {
			y, err := r.value(x)
			if err != nil {
				return nil, err
			}
			if _, gone := y.(noValue); !gone {
				out = append(out, y)
			}
		}
		return out, nil
	}
	return v, nil
}

// condition evaluates the template's condition name.
func (r resolver) condition(name string) (bool, error) {
	conds, _ := r.tmpl["Conditions"].(map[string]any)
	c, ok := conds[name]
	if !ok {
		return false, fmt.Errorf("condition %s: not defined", name)
	}
	return r.truth(c)
}

func (r resolver) truth(v any) (bool, error) {
	m, _ := v.(map[string]any)
	if len(m) != 1 {
		return false, fmt.Errorf("condition %v: want one function", v)
	}
	for fn, arg := range m {
		l := AsList(arg)
		switch fn {
		case "Condition":
			return r.condition(fmt.Sprint(arg))
		case "Fn::Not":
			if len(l) != 1 {
				return false, fmt.Errorf("Fn::Not: want one condition")
			}
			b, err := r.truth(l[0])
			return !b, err
		case "Fn::And", "Fn::Or":
			and := fn == "Fn::And"
			for _, x := range l {
				b, err := r.truth(x)
				if err != nil || b != and {
					return b, err
				}
			}
			return and, nil
		case "Fn::Equals":
			if len(l) != 2 {
				return false, fmt.Errorf("Fn::Equals: want two values")
			}
			a, err := r.scalar(l[0])
			if err != nil {
				return false, err
			}
			b, err := r.scalar(l[1])
			return a == b, err
		}
		return false, fmt.Errorf("condition function %s: not supported here", fn)
	}
	return false, nil // unreachable: one key
}

func (r resolver) scalar(v any) (string, error) {
	if m, ok := v.(map[string]any); ok {
		ref, isRef := m["Ref"].(string)
		p, known := r.params[ref]
		if !isRef || len(m) != 1 || !known {
			return "", fmt.Errorf("%v: only literals and Refs of parameters are supported here", v)
		}
		return p, nil
	}
	return fmt.Sprint(v), nil
}

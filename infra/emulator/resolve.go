package emulator

import (
	"fmt"
	"maps"
	"strings"
)

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
	decl, _ := tmpl["Parameters"].(map[string]any)
	for k := range params {
		if _, ok := decl[k]; !ok {
			return nil, fmt.Errorf("%s: parameter %s: not in the template", path, k)
		}
	}
	var v any = tmpl
	for _, k := range at {
		m, _ := v.(map[string]any)
		if v = m[k]; v == nil {
			return nil, fmt.Errorf("%s: %s: not in the template", path, strings.Join(at, "."))
		}
	}
	out, err := NewResolver(tmpl, params, nil).Value(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, strings.Join(at, "."), err)
	}
	return out, nil
}

// Resolver evaluates the intrinsics of a template decoded by LoadTemplate
// as one stack has them. It is the one evaluator of conditions and Fn::If
// here: Resolve (the template tests) and infra/local/rig (the functions'
// environment on a local run) both read through it, so the two cannot
// come to read the same template differently.
type Resolver struct {
	tmpl map[string]any
	// params are the stack's parameter values: the template's defaults,
	// overridden by the caller's.
	params map[string]string
	// refs are what a Ref of anything but a parameter resolves to.
	refs map[string]string
}

// NewResolver evaluates tmpl with params, which override the template's
// parameter defaults, and refs, what a Ref of anything else resolves to:
// the stack's resources by logical id (their physical ids) and pseudo
// parameters such as AWS::StackName, as far as the caller knows them. A Ref
// in neither fails when it is read, not here: only the branches a stack
// takes need resolving.
func NewResolver(tmpl map[string]any, params, refs map[string]string) Resolver {
	r := Resolver{tmpl: tmpl, params: map[string]string{}, refs: refs}
	decl, _ := tmpl["Parameters"].(map[string]any)
	for name, p := range decl {
		pm, _ := p.(map[string]any)
		if def, ok := pm["Default"]; ok {
			r.params[name] = text(def)
		}
	}
	maps.Copy(r.params, params)
	return r
}

// noValue is what Resolver.Value makes of a Ref of AWS::NoValue: left out
// of the mapping or list that holds it.
type noValue struct{}

// Value returns v with every Fn::If replaced by the branch its condition
// takes, and every Ref of AWS::NoValue left out of what holds it. Other
// intrinsics stay as they are: what they resolve to is the stack's, and
// the callers compare the template's structure.
func (r Resolver) Value(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if arg, ok := intrinsicArg(t, "Fn::If"); ok {
			taken, err := r.branch(arg)
			if err != nil {
				return nil, err
			}
			return r.Value(taken)
		}
		if ref, ok := intrinsicArg(t, "Ref"); ok && ref == "AWS::NoValue" {
			return noValue{}, nil
		}
		out := map[string]any{}
		for k, x := range t {
			y, err := r.Value(x)
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
			y, err := r.Value(x)
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

// Scalar returns v as the text the stack has for it: a literal as it
// reads, the value of a Ref (a parameter, else one of refs), or the
// branch of an Fn::If its condition takes, read the same way. Anything
// else (a list, a mapping, another intrinsic such as Fn::Sub) fails,
// naming it, so a caller that needs text never gets a guess.
func (r Resolver) Scalar(v any) (string, error) {
	if arg, ok := intrinsicArg(v, "Fn::If"); ok {
		taken, err := r.branch(arg)
		if err != nil {
			return "", err
		}
		return r.Scalar(taken)
	}
	if arg, ok := intrinsicArg(v, "Ref"); ok {
		return r.ref(text(arg))
	}
	switch v.(type) {
	case map[string]any, []any:
		return "", fmt.Errorf("only literals, Ref and Fn::If are supported here, got %v", v)
	}
	return text(v), nil
}

// ref is what Ref name resolves to: a parameter's value, else the caller's.
func (r Resolver) ref(name string) (string, error) {
	if v, ok := r.params[name]; ok {
		return v, nil
	}
	if v, ok := r.refs[name]; ok {
		return v, nil
	}
	return "", fmt.Errorf("Ref %s: neither a parameter nor a created resource", name)
}

// branch returns the branch of Fn::If [condition, then, else] that the
// condition takes. Only that branch is read further, as CloudFormation
// reads it: the other may hold what this stack cannot resolve.
func (r Resolver) branch(arg any) (any, error) {
	l := AsList(arg)
	if len(l) != 3 {
		return nil, fmt.Errorf("Fn::If: want [condition, then, else], got %v", arg)
	}
	ok, err := r.condition(text(l[0]))
	if err != nil {
		return nil, err
	}
	if ok {
		return l[1], nil
	}
	return l[2], nil
}

// condition evaluates the template's condition name.
func (r Resolver) condition(name string) (bool, error) {
	conds, _ := r.tmpl["Conditions"].(map[string]any)
	c, ok := conds[name]
	if !ok {
		return false, fmt.Errorf("condition %s: not defined", name)
	}
	b, err := r.truth(c)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	return b, nil
}

// truth evaluates one condition function: Fn::Equals of scalars (Scalar),
// Fn::Not, Fn::And, Fn::Or, Condition.
func (r Resolver) truth(v any) (bool, error) {
	m, _ := v.(map[string]any)
	if len(m) != 1 {
		return false, fmt.Errorf("condition %v: want one function", v)
	}
	for fn, arg := range m {
		l := AsList(arg)
		switch fn {
		case "Condition":
			return r.condition(text(arg))
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
			a, err := r.Scalar(l[0])
			if err != nil {
				return false, err
			}
			b, err := r.Scalar(l[1])
			return a == b, err
		}
		return false, fmt.Errorf("condition function %s: not supported here", fn)
	}
	return false, nil // unreachable: one key
}

// intrinsicArg returns the argument of v when v is the long-form intrinsic
// fn ({fn: arg}, as LoadTemplate gives !Ref and the Fn:: tags).
func intrinsicArg(v any, fn string) (any, bool) {
	m, _ := v.(map[string]any)
	arg, ok := m[fn]
	return arg, ok && len(m) == 1
}

// text is a decoded literal as the template reads it; an empty (null)
// one is the empty string, as in the YAML.
func text(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

package rig

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Function is what template.yaml says about one function: its environment (Globals merged
// with its own, every !Ref resolved) and its limits.
type Function struct {
	// LogicalID is the template's resource id, e.g. ClaimerFunction.
	LogicalID string
	Env       map[string]string
	Timeout   time.Duration
	MemoryMB  int
}

// logicalIDs maps the function names (functions/<name>) to their template resources.
var logicalIDs = map[string]string{
	"webhook":     "WebhookFunction",
	"claimer":     "ClaimerFunction",
	"reclaimer":   "ReclaimerFunction",
	"redeliverer": "RedelivererFunction",
}

// Functions reads the four functions of the template at path. Refs resolve to params (then the
// parameter's default) or to refs (physical ids of the stack's resources); anything else in an
// environment variable is an error naming it, so the local run never guesses.
func Functions(path string, params, refs map[string]string) (map[string]Function, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("parse %s: empty document", path)
	}
	doc := root.Content[0]
	resolve := func(name string) (string, bool) {
		if v, ok := params[name]; ok {
			return v, true
		}
		if v, ok := refs[name]; ok {
			return v, true
		}
		if d := get(doc, "Parameters", name, "Default"); d != nil && d.Kind == yaml.ScalarNode {
			return d.Value, true
		}
		return "", false
	}
	cond := conditions(doc, resolve)
	globals := get(doc, "Globals", "Function")
	out := map[string]Function{}
	for name, id := range logicalIDs {
		props := get(doc, "Resources", id, "Properties")
		if props == nil {
			return nil, fmt.Errorf("template %s: no resource %s", path, id)
		}
		fn := Function{LogicalID: id, Env: map[string]string{}, Timeout: 3 * time.Second, MemoryMB: 128}
		for _, src := range []*yaml.Node{globals, props} {
			if src == nil {
				continue
			}
			if n := get(src, "Timeout"); n != nil {
				s, err := scalar(n, resolve, cond)
				if err != nil {
					return nil, fmt.Errorf("%s Timeout: %w", id, err)
				}
				secs, err := strconv.Atoi(s)
				if err != nil {
					return nil, fmt.Errorf("%s Timeout %q: %w", id, s, err)
				}
				fn.Timeout = time.Duration(secs) * time.Second
			}
			if n := get(src, "MemorySize"); n != nil {
				s, err := scalar(n, resolve, cond)
				if err != nil {
					return nil, fmt.Errorf("%s MemorySize: %w", id, err)
				}
				if fn.MemoryMB, err = strconv.Atoi(s); err != nil {
					return nil, fmt.Errorf("%s MemorySize %q: %w", id, s, err)
				}
			}
			vars := get(src, "Environment", "Variables")
			if vars == nil {
				continue
			}
			for i := 0; i+1 < len(vars.Content); i += 2 {
				k := vars.Content[i].Value
				v, err := scalar(vars.Content[i+1], resolve, cond)
				if err != nil {
					return nil, fmt.Errorf("%s environment %s: %w", id, k, err)
				}
				fn.Env[k] = v
			}
		}
		if size := EnvSize(fn.Env); size > MaxEnvBytes {
			return nil, fmt.Errorf("%s: its environment is %d bytes, over Lambda's %d (a deploy fails: \"Lambda function "+
				"configuration exceeds 4096 byte limit\"); RUNNER_POOLS alone is %d: put the pools in an SSM parameter "+
				"(RunnerPoolsParameter)", id, size, MaxEnvBytes, len(fn.Env["RUNNER_POOLS"]))
		}
		out[name] = fn
	}
	return out, nil
}

// MaxEnvBytes is Lambda's limit on a function's environment variables, all
// of them together: 4 KB.
const MaxEnvBytes = 4096

// EnvSize is how Lambda measures an environment against MaxEnvBytes: the
// variables as a JSON object, names, values, quotes and separators (the
// measure it reports when refusing; the bare names and values would be
// less, so this is the strict side).
func EnvSize(env map[string]string) int {
	b, err := json.Marshal(env)
	if err != nil {
		return 0 // a map of strings always marshals
	}
	return len(b)
}

// scalar is a literal, a !Ref / {"Ref": …} resolved by resolve, or an !If whose condition
// cond decides (only the branch taken is read, as CloudFormation does).
func scalar(n *yaml.Node, resolve func(string) (string, bool), cond func(string) (bool, error)) (string, error) {
	if n.Kind == yaml.SequenceNode && n.Tag == "!If" && len(n.Content) == 3 {
		ok, err := cond(n.Content[0].Value)
		if err != nil {
			return "", err
		}
		if ok {
			return scalar(n.Content[1], resolve, cond)
		}
		return scalar(n.Content[2], resolve, cond)
	}
	ref := ""
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!Ref":
		ref = n.Value
	case n.Kind == yaml.ScalarNode && (n.Tag == "" || strings.HasPrefix(n.Tag, "!!")):
		return n.Value, nil
	case n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "Ref":
		ref = n.Content[1].Value
	default:
		return "", fmt.Errorf("only literals, Ref and If are supported locally, got %s %q", n.Tag, n.Value)
	}
	v, ok := resolve(ref)
	if !ok {
		return "", fmt.Errorf("Ref %s: neither a parameter nor a created resource", ref)
	}
	return v, nil
}

// conditions evaluates the template's conditions by name: Equals of literals and Refs, Not,
// And, Or, Condition.
func conditions(doc *yaml.Node, resolve func(string) (string, bool)) func(string) (bool, error) {
	var byName func(string) (bool, error)
	var eval func(*yaml.Node) (bool, error)
	byName = func(name string) (bool, error) {
		n := get(doc, "Conditions", name)
		if n == nil {
			return false, fmt.Errorf("condition %s: not defined", name)
		}
		v, err := eval(n)
		if err != nil {
			return false, fmt.Errorf("condition %s: %w", name, err)
		}
		return v, nil
	}
	eval = func(n *yaml.Node) (bool, error) {
		switch {
		case n.Tag == "!Condition" && n.Kind == yaml.ScalarNode:
			return byName(n.Value)
		case n.Tag == "!Not" && len(n.Content) == 1:
			v, err := eval(n.Content[0])
			return !v, err
		case n.Tag == "!And" || n.Tag == "!Or":
			and := n.Tag == "!And"
			for _, c := range n.Content {
				v, err := eval(c)
				if err != nil || v != and {
					return v, err
				}
			}
			return and, nil
		case n.Tag == "!Equals" && len(n.Content) == 2:
			a, err := scalar(n.Content[0], resolve, byName)
			if err != nil {
				return false, err
			}
			b, err := scalar(n.Content[1], resolve, byName)
			return a == b, err
		}
		return false, fmt.Errorf("only Equals, Not, And, Or and Condition are supported locally, got %s", n.Tag)
	}
	return byName
}

// get walks mapping keys.
func get(n *yaml.Node, path ...string) *yaml.Node {
	for _, key := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return n
}

// ParseRate reads an EventBridge rate expression, "rate(1 minute)". Seconds are accepted too,
// for compressed local schedules; EventBridge itself starts at one minute.
func ParseRate(expr string) (time.Duration, error) {
	s, ok := strings.CutPrefix(strings.TrimSpace(expr), "rate(")
	if !ok || !strings.HasSuffix(s, ")") {
		return 0, fmt.Errorf("schedule %q: only rate(N unit) is supported locally", expr)
	}
	f := strings.Fields(strings.TrimSuffix(s, ")"))
	if len(f) != 2 {
		return 0, fmt.Errorf("schedule %q: want rate(N unit)", expr)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("schedule %q: %q is not a positive number", expr, f[0])
	}
	units := map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}
	u, ok := units[strings.TrimSuffix(f[1], "s")]
	if !ok {
		return 0, fmt.Errorf("schedule %q: unknown unit %q", expr, f[1])
	}
	return time.Duration(n) * u, nil
}

// sortedEnv renders env as sorted KEY=value lines.
func sortedEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

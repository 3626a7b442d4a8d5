package rig

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ghclaim/ghclaim/infra/emulator"
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
// parameter's default) or to refs (physical ids of the stack's resources, pseudo parameters), and
// Fn::If to the branch its condition takes, by the emulator's evaluator (emulator.Resolver), the
// one the template tests use; anything else in an environment variable is an error naming it, so
// the local run never guesses.
func Functions(path string, params, refs map[string]string) (map[string]Function, error) {
	tmpl, err := emulator.LoadTemplate(path)
	if err != nil {
		return nil, err
	}
	r := emulator.NewResolver(tmpl, params, refs)
	globals, _ := at(tmpl, "Globals", "Function")
	out := map[string]Function{}
	for name, id := range logicalIDs {
		props, ok := at(tmpl, "Resources", id, "Properties")
		if !ok {
			return nil, fmt.Errorf("template %s: no resource %s", path, id)
		}
		fn := Function{LogicalID: id, Env: map[string]string{}, Timeout: 3 * time.Second, MemoryMB: 128}
		for _, src := range []any{globals, props} {
			if err := fn.read(src, r); err != nil {
				return nil, fmt.Errorf("%s %w", id, err)
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

// read sets what src (Globals.Function, then the function's Properties, which win) says of fn:
// Timeout, MemorySize and each environment variable, resolved by r (in name order, so a template
// with several bad variables names the same one each run).
func (fn *Function) read(src any, r emulator.Resolver) error {
	props, _ := src.(map[string]any)
	if n, ok := props["Timeout"]; ok {
		secs, err := number(r, "Timeout", n)
		if err != nil {
			return err
		}
		fn.Timeout = time.Duration(secs) * time.Second
	}
	if n, ok := props["MemorySize"]; ok {
		mb, err := number(r, "MemorySize", n)
		if err != nil {
			return err
		}
		fn.MemoryMB = mb
	}
	vars, _ := at(props, "Environment", "Variables")
	env, _ := vars.(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v, err := r.Scalar(env[k])
		if err != nil {
			return fmt.Errorf("environment %s: %w", k, err)
		}
		fn.Env[k] = v
	}
	return nil
}

// number is the whole number property key has, resolved by r.
func number(r emulator.Resolver, key string, v any) (int, error) {
	s, err := r.Scalar(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", key, s, err)
	}
	return n, nil
}

// at walks the mapping keys of a decoded template; it reports whether the last is there (with
// any value, null included).
func at(v any, keys ...string) (any, bool) {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		var ok bool
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
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

package emulator

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ghclaim/ghclaim/"

// metricRef is one metric an alarm or a dashboard widget reads.
type metricRef struct {
	where     string
	namespace any // a literal "AWS/..." or the template's METRICS_NAMESPACE expression
	name      string
	dims      map[string]string
}

// Every alarm and dashboard metric in ghclaim's own namespace must be one the code writes, under
// the namespace the functions are given and the exact dimension set they write ({function}):
// CloudWatch matches an EMF metric on all three, and an alarm on anything else watches nothing,
// silently. The metric names come from the source itself (emittedMetrics), so renaming a metric
// in code without its alarm fails here.
func TestAlarmsAndDashboardWatchMetricsTheCodeWrites(t *testing.T) {
	t.Parallel()
	path, err := TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(path)
	tmpl := projectTemplate(t)
	ns := dig(tmpl, "Globals", "Function", "Environment", "Variables", "METRICS_NAMESPACE")
	if ns == nil {
		t.Fatal("Globals set no METRICS_NAMESPACE: the functions would write to the default namespace")
	}
	emitted := emittedMetrics(t, root)
	for _, fn := range []string{"claimer", "reclaimer"} {
		if len(emitted[fn]) == 0 {
			t.Fatalf("found no metric the %s writes: the source scan is broken", fn)
		}
	}

	refs := alarmMetrics(t, tmpl)
	refs = append(refs, dashboardMetrics(t, tmpl, ns)...)
	own := 0
	for _, r := range refs {
		if s, ok := r.namespace.(string); ok && strings.HasPrefix(s, "AWS/") {
			continue
		}
		own++
		if !reflect.DeepEqual(r.namespace, ns) {
			t.Errorf("%s: namespace %v, want the functions' METRICS_NAMESPACE %v", r.where, r.namespace, ns)
		}
		fn := r.dims["function"]
		if len(r.dims) != 1 || fn == "" {
			t.Errorf("%s %s: dimensions %v, want exactly {function: <name>} as the EMF lines carry", r.where, r.name, r.dims)
			continue
		}
		if !emitted[fn][r.name] {
			t.Errorf("%s: metric %q with function=%s is not written by the code (it writes %v)", r.where, r.name, fn, slices.Sorted(maps.Keys(emitted[fn])))
		}
	}
	if own == 0 {
		t.Fatal("no alarm or widget reads ghclaim's own metrics: nothing was checked")
	}
}

func dig(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// alarmMetrics lists the metrics of every AWS::CloudWatch::Alarm, single-metric or metric math.
func alarmMetrics(t *testing.T, tmpl map[string]any) []metricRef {
	t.Helper()
	var out []metricRef
	for _, id := range resourcesOfType(tmpl, "AWS::CloudWatch::Alarm") {
		props, _ := dig(tmpl, "Resources", id, "Properties").(map[string]any)
		if props["MetricName"] != nil {
			out = append(out, alarmMetric(t, id, props))
		}
		queries, _ := props["Metrics"].([]any)
		for _, q := range queries {
			if m, ok := dig(q, "MetricStat", "Metric").(map[string]any); ok {
				out = append(out, alarmMetric(t, id, m))
			}
		}
	}
	return out
}

func alarmMetric(t *testing.T, id string, m map[string]any) metricRef {
	t.Helper()
	name, ok := m["MetricName"].(string)
	if !ok {
		t.Fatalf("alarm %s: MetricName %v is not a literal", id, m["MetricName"])
	}
	r := metricRef{where: "alarm " + id, namespace: m["Namespace"], name: name, dims: map[string]string{}}
	dims, _ := m["Dimensions"].([]any)
	for _, d := range dims {
		dm, _ := d.(map[string]any)
		k, _ := dm["Name"].(string)
		v, isLiteral := dm["Value"].(string)
		if !isLiteral {
			v = "(computed)" // a Ref to a function's name, say: only AWS/ metrics use those
		}
		r.dims[k] = v
	}
	return r
}

// dashboardMetrics lists the metrics of every AWS::CloudWatch::Dashboard widget. The body is a
// !Sub of JSON; its ${Namespace} variable must be the functions' namespace.
func dashboardMetrics(t *testing.T, tmpl map[string]any, ns any) []metricRef {
	t.Helper()
	var out []metricRef
	for _, id := range resourcesOfType(tmpl, "AWS::CloudWatch::Dashboard") {
		sub, _ := dig(tmpl, "Resources", id, "Properties", "DashboardBody", "Fn::Sub").([]any)
		if len(sub) != 2 {
			t.Fatalf("dashboard %s: DashboardBody is not a !Sub [body, variables]", id)
		}
		body, _ := sub[0].(string)
		vars, _ := sub[1].(map[string]any)
		// Every ${X} becomes a placeholder naming it, so the JSON parses and a namespace
		// placeholder can be told from a literal.
		text := subVar.ReplaceAllString(body, "<$1>")
		var doc struct {
			Widgets []struct {
				Properties struct {
					Title   string  `json:"title"`
					Metrics [][]any `json:"metrics"`
				} `json:"properties"`
			} `json:"widgets"`
		}
		if err := json.Unmarshal([]byte(text), &doc); err != nil {
			t.Fatalf("dashboard %s: body is not JSON: %v", id, err)
		}
		for _, w := range doc.Widgets {
			for _, row := range w.Properties.Metrics {
				var strs []string
				for _, v := range row {
					if s, ok := v.(string); ok {
						strs = append(strs, s)
					}
				}
				if len(strs) < 2 || len(strs)%2 != 0 {
					t.Fatalf("dashboard %s widget %q: metric row %v is not [namespace, name, dim, value, …]", id, w.Properties.Title, row)
				}
				r := metricRef{where: "dashboard " + id + " widget " + strconv.Quote(w.Properties.Title), namespace: strs[0], name: strs[1], dims: map[string]string{}}
				if v, ok := strings.CutPrefix(strs[0], "<"); ok {
					r.namespace = vars[strings.TrimSuffix(v, ">")]
				}
				for i := 2; i+1 < len(strs); i += 2 {
					r.dims[strs[i]] = strs[i+1]
				}
				out = append(out, r)
			}
		}
	}
	return out
}

// emittedMetrics maps each function (the "function" dimension its main gives obs.NewMetricsIn)
// to the metric names its package can write: for every call X.Add(name, …) or X.count(name), the
// name when it is a string literal or a package constant, and otherwise (a name computed or taken
// from a table) every string literal of the enclosing function. It over-approximates a little,
// never misses a literal name.
func emittedMetrics(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	mains, err := filepath.Glob(filepath.Join(root, "functions", "*", "main.go"))
	if err != nil || len(mains) == 0 {
		t.Fatalf("no functions/*/main.go under %s: %v", root, err)
	}
	out := map[string]map[string]bool{}
	for _, main := range mains {
		f, err := parser.ParseFile(token.NewFileSet(), main, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		imports := map[string]string{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			imports[p[strings.LastIndex(p, "/")+1:]] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Config" {
				return true
			}
			pkg, _ := sel.X.(*ast.Ident)
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if key, _ := kv.Key.(*ast.Ident); !ok || key == nil || key.Name != "Metrics" {
					continue
				}
				fn := functionDimension(kv.Value)
				if fn == "" || pkg == nil || !strings.HasPrefix(imports[pkg.Name], module) {
					t.Fatalf("%s: Metrics of %s.Config is not obs.NewMetricsIn(…, {\"function\": …}, …)", main, pkg)
				}
				out[fn] = packageMetricNames(t, filepath.Join(root, strings.TrimPrefix(imports[pkg.Name], module)))
			}
			return true
		})
	}
	return out
}

// functionDimension is the "function" value of the dimensions map given to obs.NewMetrics(In).
func functionDimension(e ast.Expr) string {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return ""
	}
	for _, a := range call.Args {
		m, ok := a.(*ast.CompositeLit)
		if !ok {
			continue
		}
		for _, el := range m.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if k := stringLit(kv.Key); k == "function" {
				return stringLit(kv.Value)
			}
		}
	}
	return ""
}

func stringLit(e ast.Expr) string {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return ""
	}
	s, err := strconv.Unquote(b.Value)
	if err != nil {
		return ""
	}
	return s
}

func packageMetricNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var parsed []*ast.File
	consts := map[string]string{}
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if v := stringLit(vs.Values[i]); v != "" {
							consts[n.Name] = v
						}
					}
				}
			}
		}
	}
	names := map[string]bool{}
	for _, f := range parsed {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Add" && sel.Sel.Name != "count") {
					return true
				}
				switch a := call.Args[0].(type) {
				case *ast.BasicLit:
					if s := stringLit(a); s != "" {
						names[s] = true
					}
				case *ast.Ident:
					if v, ok := consts[a.Name]; ok {
						names[v] = true
						return true
					}
					allLiterals(fd.Body, names)
				default:
					allLiterals(call.Args[0], names)
					if _, computed := a.(*ast.SelectorExpr); computed {
						allLiterals(fd.Body, names)
					}
				}
				return true
			})
		}
	}
	return names
}

func allLiterals(n ast.Node, into map[string]bool) {
	ast.Inspect(n, func(n ast.Node) bool {
		if e, ok := n.(ast.Expr); ok {
			if s := stringLit(e); s != "" {
				into[s] = true
			}
		}
		return true
	})
}

package emulator

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/shared/obs"
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
// the namespace the functions are given and one of the exact dimension sets it is published
// under ({function} plus obs.DimensionSets of its declared dimensions): CloudWatch matches an
// EMF metric on all three, and an alarm on anything else watches nothing, silently. The metric
// names and dimensions come from the source itself (emittedMetrics), so renaming a metric or
// dropping a dimension in code without its alarm fails here.
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
	for _, fn := range []string{"claimer", "reclaimer", "webhook"} {
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
		if fn == "" {
			t.Errorf("%s %s: dimensions %v have no function, which every EMF line carries", r.where, r.name, r.dims)
			continue
		}
		sets, ok := emitted[fn][r.name]
		if !ok {
			t.Errorf("%s: metric %q with function=%s is not written by the code (it writes %v)", r.where, r.name, fn, slices.Sorted(maps.Keys(emitted[fn])))
			continue
		}
		keys := slices.Sorted(maps.Keys(r.dims))
		if !slices.ContainsFunc(sets, func(s []string) bool { return slices.Equal(s, keys) }) {
			t.Errorf("%s: metric %q with dimensions %v: the code publishes it under %v only", r.where, r.name, keys, sets)
		}
	}
	if own == 0 {
		t.Fatal("no alarm or widget reads ghclaim's own metrics: nothing was checked")
	}
}

// paged are the metrics an operator must be paged for, fleet-wide ({function} only, so one
// alarm covers every pool and class), each also on the dashboard. A metric the code writes but
// nothing watches is silent: lease_taken_over (claimers dying mid-claim) was one.
var paged = []struct{ function, metric string }{
	{"claimer", "abandoned"},
	{"reclaimer", "ReclaimAbandoned"},
	{"claimer", "failed"},
	{"reclaimer", "Reclaimed"},
	{"claimer", "RateRemaining"},
	{"claimer", "RateBlockedFor"},
	{"webhook", "TimeToRunner"},
	{"claimer", "lease_taken_over"},
}

// Each paged metric is written by the code under {function}, read by an alarm under exactly
// that dimension set, the alarm notifies the alarm topic (when it fires and when it clears), and
// a dashboard widget graphs the metric. With TestAlarmsAndDashboardWatchMetricsTheCodeWrites
// this pins the alarm to what the code emits.
func TestPagedMetricsHaveAnAlarmAndAWidget(t *testing.T) {
	t.Parallel()
	path, err := TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := projectTemplate(t)
	ns := dig(tmpl, "Globals", "Function", "Environment", "Variables", "METRICS_NAMESPACE")
	emitted := emittedMetrics(t, filepath.Dir(path))
	alarms := alarmMetrics(t, tmpl)
	widgets := dashboardMetrics(t, tmpl, ns)
	topic := []any{ref("AlarmTopic")}
	for _, p := range paged {
		t.Run(p.function+"/"+p.metric, func(t *testing.T) {
			t.Parallel()
			fleet := []string{"function"}
			if !slices.ContainsFunc(emitted[p.function][p.metric], func(s []string) bool { return slices.Equal(s, fleet) }) {
				t.Fatalf("the %s does not write %s under {function} (it writes %v)", p.function, p.metric, emitted[p.function][p.metric])
			}
			reads := func(r metricRef) bool {
				return r.name == p.metric && r.dims["function"] == p.function && reflect.DeepEqual(r.namespace, ns)
			}
			var ids []string
			for _, r := range alarms {
				if reads(r) && len(r.dims) == 1 {
					ids = append(ids, strings.TrimPrefix(r.where, "alarm "))
				}
			}
			if len(ids) == 0 {
				t.Fatalf("no alarm reads %s of the %s fleet-wide (dimensions {function} only)", p.metric, p.function)
			}
			for _, id := range ids {
				props, _ := dig(tmpl, "Resources", id, "Properties").(map[string]any)
				for _, key := range []string{"AlarmActions", "OKActions"} {
					if got := list(props[key]); !reflect.DeepEqual(got, topic) {
						t.Errorf("alarm %s: %s %v, want %v", id, key, got, topic)
					}
				}
			}
			if !slices.ContainsFunc(widgets, reads) {
				t.Errorf("no dashboard widget graphs %s of the %s", p.metric, p.function)
			}
		})
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
				where := "dashboard " + id + " widget " + strconv.Quote(w.Properties.Title)
				if r, ok := searchMetric(t, where, row, vars); ok {
					out = append(out, r)
					continue
				}
				var strs []string
				for _, v := range row {
					if s, ok := v.(string); ok {
						strs = append(strs, s)
					}
				}
				if len(strs) < 2 || len(strs)%2 != 0 {
					t.Fatalf("dashboard %s widget %q: metric row %v is not [namespace, name, dim, value, …]", id, w.Properties.Title, row)
				}
				r := metricRef{where: where, namespace: strs[0], name: strs[1], dims: map[string]string{}}
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

// search is a dashboard SEARCH expression: its schema {namespace, dimension names…} and its
// search terms.
var (
	search     = regexp.MustCompile(`^SEARCH\('\{([^}]*)\} ([^']*)', '[A-Za-z0-9.]+', [0-9]+\)$`)
	searchTerm = regexp.MustCompile(`(\w+)="([^"]*)"`)
)

// searchMetric reads a widget row that is one SEARCH expression: the metric it graphs is the
// one of its MetricName term, under exactly the dimensions of its schema, with the function of
// its function term. Other expression rows (metric math over other rows) are not metrics.
func searchMetric(t *testing.T, where string, row []any, vars map[string]any) (metricRef, bool) {
	t.Helper()
	if len(row) != 1 {
		return metricRef{}, false
	}
	o, _ := row[0].(map[string]any)
	expr, _ := o["expression"].(string)
	if !strings.HasPrefix(expr, "SEARCH(") {
		if o == nil {
			return metricRef{}, false
		}
		if expr == "" {
			t.Fatalf("%s: row %v is neither a metric nor an expression", where, row)
		}
		return metricRef{}, false
	}
	m := search.FindStringSubmatch(expr)
	if m == nil {
		t.Fatalf("%s: %s is not SEARCH('{namespace,dims…} terms', 'stat', period)", where, expr)
	}
	schema := strings.Split(m[1], ",")
	// A namespace with a space or another non-alphanumeric character (a
	// hyphenated stack name, METRICS_NAMESPACE's spaces) graphs nothing
	// unless quoted.
	ns, pre := strings.CutPrefix(schema[0], `"`)
	ns, suf := strings.CutSuffix(ns, `"`)
	if !pre || !suf {
		t.Errorf("%s: namespace %s not in double quotes in the SEARCH schema", where, schema[0])
	}
	schema[0] = ns
	r := metricRef{where: where + " " + expr, namespace: schema[0], dims: map[string]string{}}
	if v, ok := strings.CutPrefix(schema[0], "<"); ok {
		r.namespace = vars[strings.TrimSuffix(v, ">")]
	}
	for _, d := range schema[1:] {
		r.dims[d] = "(any)"
	}
	for _, term := range searchTerm.FindAllStringSubmatch(m[2], -1) {
		switch term[1] {
		case "MetricName":
			r.name = term[2]
		default:
			if _, ok := r.dims[term[1]]; !ok {
				t.Fatalf("%s: term %s is not a dimension of the schema", where, term[0])
			}
			r.dims[term[1]] = term[2]
		}
	}
	if r.name == "" {
		t.Fatalf("%s: SEARCH without MetricName=\"…\"", where)
	}
	return r, true
}

// emittedMetrics maps each function (the "function" dimension its wiring in shared/wire gives
// its metrics) to the metrics its package can write, each with the dimension sets it is
// published under (sorted keys, "function" included). See packageMetrics for how they are found.
func emittedMetrics(t *testing.T, root string) map[string]map[string][][]string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(root, "shared", "wire", "*", "*.go"))
	var mains []string
	for _, f := range all {
		if !strings.HasSuffix(f, "_test.go") {
			mains = append(mains, f)
		}
	}
	if err != nil || len(mains) == 0 {
		t.Fatalf("no shared/wire/*/*.go under %s: %v", root, err)
	}
	obsConsts := packageConsts(t, filepath.Join(root, "shared", "obs"))
	out := map[string]map[string][][]string{}
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
					t.Fatalf("%s: Metrics of %s.Config is not env.Metrics(…, \"function\", …) nor obs.NewMetricsIn(…, {\"function\": …}, …)", main, pkg)
				}
				out[fn] = packageMetrics(t, filepath.Join(root, strings.TrimPrefix(imports[pkg.Name], module)), obsConsts)
			}
			return true
		})
	}
	return out
}

// functionDimension is the "function" value given to wire.Env.Metrics (its second argument),
// or of the dimensions map given to obs.NewMetrics(In).
func functionDimension(e ast.Expr) string {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return ""
	}
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Metrics" && len(call.Args) == 3 {
		return stringLit(call.Args[1])
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

// packageConsts maps the string constants of the package in dir to their values.
func packageConsts(t *testing.T, dir string) map[string]string {
	t.Helper()
	consts := map[string]string{}
	for _, f := range parsePackage(t, dir) {
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
	return consts
}

func parsePackage(t *testing.T, dir string) []*ast.File {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var parsed []*ast.File
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	return parsed
}

// packageMetrics lists the metrics the package in dir can write, with their dimension sets:
//   - every obs.Metric{Name: …, Dims: …} literal: its name (a literal or a package constant)
//     under {function} plus each of obs.DimensionSets(its Dims) (obs writes no other
//     dimension, and a set only when its values are given, so this may over-approximate, never
//     miss a set);
//   - every call X.Add(name, …) or X.count(name) (obs.Metrics.Add, and any older helper): under
//     {function} only, with the name when it is a string literal or a package constant, and
//     otherwise (computed, or taken from a table) every string literal of the enclosing function.
func packageMetrics(t *testing.T, dir string, obsConsts map[string]string) map[string][][]string {
	t.Helper()
	parsed := parsePackage(t, dir)
	consts := packageConsts(t, dir)
	fleet := []string{"function"}
	out := map[string][][]string{}
	add := func(name string, sets ...[]string) {
		for _, s := range sets {
			if !slices.ContainsFunc(out[name], func(o []string) bool { return slices.Equal(o, s) }) {
				out[name] = append(out[name], s)
			}
		}
	}
	value := func(e ast.Expr, consts map[string]string) string {
		switch e := e.(type) {
		case *ast.Ident:
			return consts[e.Name]
		case *ast.SelectorExpr:
			return obsConsts[e.Sel.Name]
		}
		return stringLit(e)
	}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if sel, ok := lit.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Metric" {
				return true
			}
			name, dims := "", []string{}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					t.Fatalf("%s: an obs.Metric literal without field names", dir)
				}
				switch kv.Key.(*ast.Ident).Name {
				case "Name":
					name = value(kv.Value, consts)
				case "Dims":
					for _, d := range kv.Value.(*ast.CompositeLit).Elts {
						v := value(d, consts)
						if v == "" {
							t.Fatalf("%s: metric %q has a dimension that is not an obs constant", dir, name)
						}
						dims = append(dims, v)
					}
				}
			}
			if name == "" {
				t.Fatalf("%s: an obs.Metric whose name is not a literal or a constant", dir)
			}
			for _, set := range obs.DimensionSets(dims) {
				add(name, slices.Sorted(slices.Values(append(slices.Clone(fleet), set...))))
			}
			return true
		})
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
				names := map[string]bool{}
				switch a := call.Args[0].(type) {
				case *ast.BasicLit:
					if s := stringLit(a); s != "" {
						names[s] = true
					}
				case *ast.Ident:
					if v, ok := consts[a.Name]; ok {
						names[v] = true
						break
					}
					allLiterals(fd.Body, names)
				default:
					allLiterals(call.Args[0], names)
					if _, computed := a.(*ast.SelectorExpr); computed {
						allLiterals(fd.Body, names)
					}
				}
				for n := range names {
					add(n, fleet)
				}
				return true
			})
		}
	}
	return out
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

// TestAlarmSumsFillMissingData: CloudWatch's metric math has no value for a
// sum at an instant where one of its series has none, and most of ghclaim's
// counters are written only when something happened. An alarm that adds
// series must FILL each with 0, or one series alone never breaches: the
// give-ups alarm summed the claimer's abandoned (written only on a give-up)
// and the reclaimer's, and a reclaimer give-up alone never paged.
func TestAlarmSumsFillMissingData(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	sums := 0
	for _, id := range resourcesOfType(tmpl, "AWS::CloudWatch::Alarm") {
		props, _ := dig(tmpl, "Resources", id, "Properties").(map[string]any)
		var series []string
		var exprs []string
		for _, q := range list(props["Metrics"]) {
			qm, _ := q.(map[string]any)
			if _, ok := qm["MetricStat"]; ok {
				series = append(series, fmt.Sprint(qm["Id"]))
			}
			if e, ok := qm["Expression"].(string); ok {
				exprs = append(exprs, e)
			}
		}
		for _, e := range exprs {
			if !strings.Contains(e, "+") {
				continue
			}
			sums++
			for _, sid := range series {
				if strings.Contains(e, sid) && !regexp.MustCompile(`FILL\(\s*`+regexp.QuoteMeta(sid)+`\s*,\s*0\s*\)`).MatchString(e) {
					t.Errorf("alarm %s: %q adds %s without FILL(%s, 0): a period with no %s data has no sum", id, e, sid, sid, sid)
				}
			}
		}
	}
	if sums == 0 {
		t.Fatal("no alarm adds series: nothing was checked (the give-ups alarm adds two)")
	}
}

// TestDeliveriesWidgetShowsWorkflowJobs: the webhook publishes a
// workflow_job or ping delivery's Deliveries under {function}, {event,
// function, outcome} and with its pool, never under {function, outcome}
// alone (that set is other events': forged or unhandled headers). The
// dashboard's deliveries widget read only that set, so it showed none of
// the webhook's real traffic (a review found it; the check above merges
// the two declarations of Deliveries by name and could not see it).
func TestDeliveriesWidgetShowsWorkflowJobs(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	ns := dig(tmpl, "Globals", "Function", "Environment", "Variables", "METRICS_NAMESPACE")
	for _, r := range dashboardMetrics(t, tmpl, ns) {
		if r.name == "Deliveries" && r.dims["function"] == "webhook" && slices.Equal(slices.Sorted(maps.Keys(r.dims)), []string{"event", "function", "outcome"}) {
			return
		}
	}
	t.Error("no dashboard widget reads the webhook's Deliveries by event and outcome ({event,function,outcome})")
}

// Package obs is ghclaim's observability: JSON logs through log/slog (one
// line per decision) and CloudWatch metrics as Embedded Metric Format lines
// on the same stream, which Lambda ships to CloudWatch with no API calls.
//
// Log attributes use fixed keys (KeyJobID, KeyDeliveryID, KeyAttempt,
// KeyClass, …) so operators can query across functions. This package must
// never receive a secret: callers log ids, states and classes, not tokens
// or JIT configs, and values with a LogValue that redacts stay redacted.
//
// Metric decisions:
//   - A metric is declared once as a Metric value (name, unit, the
//     dimensions it may carry beyond "function"), and written with values
//     for those dimensions. A dimension not declared is not written, so the
//     declarations are the whole truth about what reaches CloudWatch: the
//     alarm test reads them from the source.
//   - DimensionSets is the one rule for which sets a line publishes:
//     {function} always (the fleet-wide figure the alarms read), all the
//     declared dimensions, and those without pool (e.g. retries by class
//     across pools). More sets would multiply custom-metric costs.
//   - Counts are summed until Flush, gauges keep their last value (a rate
//     reading), timings keep every sample (EMF arrays, so percentiles are
//     exact). Flush writes one line per distinct set of dimension values.
//   - A function that already writes one log line per event (the webhook's
//     delivery line) makes that line an EMF document with Inline instead of
//     writing a second line: the dimension values are the line's own keys.
//     When the logger's level drops that line, Emit writes the same
//     document as a line of its own, so quieting the logs never loses a
//     count.
package obs

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/redact"
)

// Attribute keys shared by every function.
const (
	KeyJobID      = "job_id"
	KeyDeliveryID = "delivery_id"
	KeyAttempt    = "attempt"
	KeyClass      = "class"
	KeyVersion    = "version"
	KeyState      = "state"
	KeyReason     = "reason"
	KeyDelay      = "delay_ms"
)

// Level parses debug, info, warn or error (default info).
func Level(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// NewLogger returns a JSON logger writing to w at level. Every string and
// error it writes passes through shared/redact: an upstream error text
// that quotes a token, a JWT or a JIT config is logged without it.
func NewLogger(w io.Writer, level string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: Level(level), ReplaceAttr: redactAttr}))
}

// redactAttr is NewLogger's ReplaceAttr. The _aws directive Inline adds
// is written as it is: CloudWatch publishes it, Emit and Flush write it
// so, and it holds only the namespace the functions validate and
// constants. Masked, a stack named like
// "ghclaim-Production-Runners-eu-west-1" (32 or more characters mixing
// case and digits, the shape of a credential) put the decision lines'
// metrics in a namespace called "[redacted]", where no alarm looks.
// Dimension values (pool names, constants) and the attributes that hold a
// pool's, a runner's or a repository's name (nameKeys) go through
// redact.Name, which leaves a name-shaped value as it is.
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if nameKeys[a.Key] {
			a.Value = slog.StringValue(redact.Name(a.Value.String()))
			break
		}
		a.Value = slog.StringValue(redact.String(a.Value.String()))
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case dimValue:
			a.Value = slog.StringValue(redact.Name(string(v)))
		case directiveJSON:
		case nil:
		case error:
			a.Value = slog.StringValue(redact.String(v.Error()))
		default:
			// A slice, map or struct is written as JSON: its strings are
			// redacted in that text, which stays JSON (the mask holds no
			// quote or backslash). Untouched when nothing was masked.
			b, err := json.Marshal(v)
			if err != nil {
				break
			}
			if r := redact.String(string(b)); r != string(b) {
				a.Value = slog.AnyValue(json.RawMessage(r))
				if !json.Valid([]byte(r)) {
					// A mask that cut through an escape or a closing
					// quote: the redacted text as a string, not lost.
					a.Value = slog.StringValue(r)
				}
			}
		}
	}
	return a
}

// Namespace is the CloudWatch namespace of metrics when none is configured
// (tests, local runs). A deployment names its own (METRICS_NAMESPACE, by
// default the stack's name), so two stacks in one account and Region never
// add up into one set of metrics and alarms.
const Namespace = "ghclaim"

// Dimension names beyond "function" (DimFunction).
const (
	DimFunction     = "function"
	DimPool         = "pool"
	DimOutcome      = "outcome"
	DimClass        = "class"
	DimReason       = "reason"
	DimEvent        = "event"
	DimInstallation = "installation"
)

// Unit is a CloudWatch metric unit.
type Unit string

// The units ghclaim writes.
const (
	Count        Unit = "Count"
	Milliseconds Unit = "Milliseconds"
	Seconds      Unit = "Seconds"
	None         Unit = "None"
)

// Metric declares one metric: its name, unit (Count when empty) and the
// dimensions it carries beyond "function".
type Metric struct {
	Name string
	Unit Unit
	Dims []string
}

func (m Metric) unit() Unit {
	if m.Unit == "" {
		return Count
	}
	return m.Unit
}

// Dim is one dimension's value.
type Dim struct{ Name, Value string }

// Pool, Outcome, Class, Reason, Event and Installation are dimension values.
func Pool(v string) Dim         { return Dim{DimPool, v} }
func Outcome(v string) Dim      { return Dim{DimOutcome, v} }
func Class(v string) Dim        { return Dim{DimClass, v} }
func Reason(v string) Dim       { return Dim{DimReason, v} }
func Event(v string) Dim        { return Dim{DimEvent, v} }
func Installation(v string) Dim { return Dim{DimInstallation, v} }

// DimensionSets is every dimension set a metric declared with dims is
// published under (besides the fixed dimensions, "function"): none (the
// fleet-wide figure), dims without pool, and all of dims; sorted and
// without repeats.
func DimensionSets(dims []string) [][]string {
	all := slices.Sorted(slices.Values(dims))
	all = slices.Compact(all)
	var noPool []string
	for _, d := range all {
		if d != DimPool {
			noPool = append(noPool, d)
		}
	}
	out := [][]string{{}}
	for _, s := range [][]string{noPool, all} {
		if len(s) > 0 && !slices.ContainsFunc(out, func(o []string) bool { return slices.Equal(o, s) }) {
			out = append(out, s)
		}
	}
	return out
}

// Sample is one value of a metric, for Inline.
type Sample struct {
	Metric Metric
	Value  float64
}

type kind int

const (
	sum kind = iota
	last
	each
)

// series is one metric under one set of dimension values.
type series struct {
	metric Metric
	kind   kind
	dims   []Dim // the declared ones that have a value, sorted by name
	values []float64
}

// Metrics writes metrics as EMF lines, one per set of dimension values per
// flush.
type Metrics struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
	dims      map[string]string
	series    map[string]*series
	order     []string
	now       clock.Func
}

// NewMetrics returns a metric sink writing EMF to w in Namespace with fixed
// dimensions (e.g. {"function": "claimer"}).
func NewMetrics(w io.Writer, dims map[string]string, now clock.Func) *Metrics {
	return NewMetricsIn(Namespace, w, dims, now)
}

// NewMetricsIn is NewMetrics in the CloudWatch namespace ns (Namespace
// when empty). The alarms of template.yaml watch these metrics by name,
// namespace and exact dimension set: EMF publishes a metric under the
// dimension set it is written with, and nothing else.
func NewMetricsIn(ns string, w io.Writer, dims map[string]string, now clock.Func) *Metrics {
	if ns == "" {
		ns = Namespace
	}
	return &Metrics{w: w, namespace: ns, dims: dims, series: map[string]*series{}, now: clock.Or(now)}
}

// Add adds v to the named count, published under the fixed dimensions.
func (m *Metrics) Add(name string, v float64) { m.Count(Metric{Name: name}, v) }

// Count adds v to metric under the given dimension values.
func (m *Metrics) Count(metric Metric, v float64, dims ...Dim) { m.put(metric, sum, v, dims) }

// Gauge sets metric to v under the given dimension values; the last value
// before Flush is written.
func (m *Metrics) Gauge(metric Metric, v float64, dims ...Dim) { m.put(metric, last, v, dims) }

// Observe records one sample of metric (a duration in its unit,
// Milliseconds or Seconds) under the given dimension values.
func (m *Metrics) Observe(metric Metric, d time.Duration, dims ...Dim) {
	v := float64(d.Milliseconds())
	if metric.Unit == Seconds {
		v = d.Seconds()
	}
	m.put(metric, each, v, dims)
}

func (m *Metrics) put(metric Metric, k kind, v float64, dims []Dim) {
	if m == nil {
		return
	}
	ds := declared(metric, dims)
	key := metric.Name
	for _, d := range ds {
		key += "\x00" + d.Name + "=" + d.Value
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.series[key]
	if !ok {
		s = &series{metric: metric, kind: k, dims: ds}
		m.series[key] = s
		m.order = append(m.order, key)
	}
	switch {
	case k == sum && len(s.values) == 1:
		s.values[0] += v
	case k == last:
		s.values = []float64{v}
	default:
		s.values = append(s.values, v)
	}
}

// declared keeps the dimensions metric declares that have a non-empty
// value (CloudWatch refuses empty ones), sorted by name.
func declared(metric Metric, dims []Dim) []Dim {
	var out []Dim
	for _, d := range dims {
		if d.Value != "" && slices.Contains(metric.Dims, d.Name) && !slices.ContainsFunc(out, func(o Dim) bool { return o.Name == d.Name }) {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Flush writes the metrics gathered so far, one EMF line per set of
// dimension values, and resets them.
func (m *Metrics) Flush() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	groups := map[string][]*series{}
	var keys []string
	for _, k := range m.order {
		s := m.series[k]
		g := ""
		for _, d := range s.dims {
			g += d.Name + "=" + d.Value + "\x00"
		}
		if _, ok := groups[g]; !ok {
			keys = append(keys, g)
		}
		groups[g] = append(groups[g], s)
	}
	sort.Strings(keys)
	at := m.now()
	for _, g := range keys {
		ss := groups[g]
		sort.Slice(ss, func(i, j int) bool { return ss[i].metric.Name < ss[j].metric.Name })
		doc := map[string]any{}
		var samples []Sample
		for _, s := range ss {
			if s.kind == each {
				doc[s.metric.Name] = s.values
			} else {
				doc[s.metric.Name] = s.values[0]
			}
			samples = append(samples, Sample{Metric: s.metric})
		}
		for _, d := range ss[0].dims {
			doc[d.Name] = d.Value
		}
		m.write(doc, at, ss[0].dims, samples)
	}
	m.series = map[string]*series{}
	m.order = nil
}

func (m *Metrics) write(doc map[string]any, at time.Time, dims []Dim, samples []Sample) {
	for k, v := range m.dims {
		doc[k] = v
	}
	doc["_aws"] = m.directive(at, dims, samples)
	b, err := json.Marshal(doc)
	if err == nil {
		_, _ = m.w.Write(append(b, '\n'))
	}
}

// directive is the _aws member of an EMF line, encoded: each sample's
// metric published under every set of DimensionSets(its declared
// dimensions) that dims has values for, each prefixed with the fixed
// dimensions. Metrics with the same sets share one directive. It is
// encoded here, once, from structs: a line's attributes are encoded again
// by the redaction (redactAttr) and the logger, and a document of maps
// costs a sort of its keys at every level each time.
func (m *Metrics) directive(at time.Time, dims []Dim, samples []Sample) directiveJSON {
	fixed := slices.Sorted(maps.Keys(m.dims))
	doc := emfDirective{Timestamp: at.UnixMilli()}
	var seen []string
	for _, s := range samples {
		var sets [][]string
		for _, set := range DimensionSets(s.Metric.Dims) {
			if !slices.ContainsFunc(set, func(n string) bool {
				return !slices.ContainsFunc(dims, func(d Dim) bool { return d.Name == n })
			}) {
				sets = append(sets, append(slices.Clone(fixed), set...))
			}
		}
		def := emfMetric{Name: s.Metric.Name, Unit: string(s.Metric.unit())}
		key := fmt.Sprint(sets)
		if k := slices.Index(seen, key); k >= 0 {
			doc.CloudWatchMetrics[k].Metrics = append(doc.CloudWatchMetrics[k].Metrics, def)
			continue
		}
		seen = append(seen, key)
		doc.CloudWatchMetrics = append(doc.CloudWatchMetrics, emfMetricSet{Namespace: m.namespace, Dimensions: sets, Metrics: []emfMetric{def}})
	}
	b, _ := json.Marshal(doc) // strings, ints and slices of them always encode
	return b
}

// nameKeys are the attributes that hold a pool's name, a runner's, a
// repository's or its owner's, by construction (a configured pool; a name
// job.RunnerNameAt built, GitHub listed or a delivery named; a delivery's
// validated repository): written through redact.Name, so a long name
// mixing case and digits is not masked as a credential. A list, not a
// pattern: a key joins it only when nothing but such a name is ever
// logged under it.
var nameKeys = map[string]bool{
	DimPool: true, "old_pool": true, "new_pool": true, "spare_pool": true, "kept_in_pool": true,
	"runner_name": true, "record_runner_name": true, "taken_by": true,
	"repo": true, "taken_from_repo": true, "owner": true,
}

// directiveJSON is an encoded _aws member: the logger writes it as the
// object it is, unmasked (redactAttr).
type directiveJSON []byte

// MarshalJSON returns d.
func (d directiveJSON) MarshalJSON() ([]byte, error) { return d, nil }

// dimValue is the value of a dimension of a line's EMF document: the
// logger writes it as a string, unmasked (redactAttr).
type dimValue string

// emfDirective, emfMetricSet and emfMetric are the _aws member's shape
// (CloudWatch's embedded metric format specification).
type emfDirective struct {
	CloudWatchMetrics []emfMetricSet `json:"CloudWatchMetrics"`
	Timestamp         int64          `json:"Timestamp"`
}

type emfMetricSet struct {
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
	Namespace  string      `json:"Namespace"`
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// Inline turns line, the attributes of a log line, into an EMF document:
// it returns line with the fixed dimensions, each sample's value and the
// _aws directive appended. The dimension values are line's own string
// attributes named like a declared dimension, so nothing is written twice;
// they and the directive carry types NewLogger's redaction knows
// (dimValue, directiveJSON), so what the line publishes is what Emit would.
// A nil *Metrics returns line unchanged.
func (m *Metrics) Inline(line []slog.Attr, samples ...Sample) []slog.Attr {
	if m == nil || len(samples) == 0 {
		return line
	}
	dims := lineDims(line, samples)
	out := slices.Clone(line)
	for _, d := range dims {
		// The attribute lineDims took the value from: the first of its
		// name with that value (declared keeps the first).
		if i := slices.IndexFunc(out, func(a slog.Attr) bool {
			return a.Key == d.Name && a.Value.Kind() == slog.KindString && a.Value.String() == d.Value
		}); i >= 0 {
			out[i] = slog.Any(d.Name, dimValue(d.Value))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.dims)) {
		out = append(out, slog.Any(k, dimValue(m.dims[k])))
	}
	for _, s := range samples {
		out = append(out, slog.Float64(s.Metric.Name, s.Value))
	}
	return append(out, slog.Any("_aws", m.directive(m.now(), dims, samples)))
}

// Emit writes, as an EMF line of its own, the document Inline would have
// made of line: the same dimension values, samples and directive, without
// line's other attributes. It is for a log line the logger's level drops,
// whose metrics must not go with it; a caller uses Emit or Inline for a
// line, never both. A nil *Metrics writes nothing.
func (m *Metrics) Emit(line []slog.Attr, samples ...Sample) {
	if m == nil || len(samples) == 0 {
		return
	}
	dims := lineDims(line, samples)
	doc := map[string]any{}
	for _, d := range dims {
		doc[d.Name] = d.Value
	}
	for _, s := range samples {
		doc[s.Metric.Name] = s.Value
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.write(doc, m.now(), dims, samples)
}

// lineDims are line's string attributes named like a dimension one of
// samples declares: the dimension values of Inline and Emit.
func lineDims(line []slog.Attr, samples []Sample) []Dim {
	var declaredDims []string
	for _, s := range samples {
		declaredDims = append(declaredDims, s.Metric.Dims...)
	}
	var dims []Dim
	for _, a := range line {
		if a.Value.Kind() == slog.KindString {
			dims = append(dims, Dim{a.Key, a.Value.String()})
		}
	}
	return declared(Metric{Dims: declaredDims}, dims)
}

package obs

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
)

// emfLine is the part of an EMF line every metric line has.
type emfLine struct {
	Function string `json:"function"`
	AWS      struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string              `json:"Namespace"`
			Dimensions [][]string          `json:"Dimensions"`
			Metrics    []map[string]string `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
}

func TestMetricsFlushWritesOneEMFLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m := NewMetrics(&buf, map[string]string{"function": "claimer"}, func() time.Time { return at })
	m.Add("Claimed", 2)
	m.Add("Claimed", 1)
	m.Add("Retried", 1)
	m.Flush()
	m.Flush() // nothing new: no second line

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1: %q", len(lines), buf.String())
	}
	var doc struct {
		Claimed float64 `json:"Claimed"`
		Retried float64 `json:"Retried"`
		emfLine
	}
	if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if doc.Claimed != 3 || doc.Retried != 1 || doc.Function != "claimer" || doc.AWS.Timestamp != at.UnixMilli() {
		t.Fatalf("got %+v", doc)
	}
	cw := doc.AWS.CloudWatchMetrics
	if len(cw) != 1 || cw[0].Namespace != Namespace || len(cw[0].Metrics) != 2 || cw[0].Dimensions[0][0] != "function" {
		t.Fatalf("EMF directive %+v", cw)
	}
}

func TestLevel(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "WARN": slog.LevelWarn, "error": slog.LevelError, "": slog.LevelInfo, "INFO": slog.LevelInfo} {
		if got := Level(in); got != want {
			t.Errorf("Level(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestMetricsWriteTheirNamespace(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		ns   string
		want string
	}{
		{name: "the stack's namespace", ns: "ghclaim-prod", want: "ghclaim-prod"},
		{name: "none configured", ns: "", want: Namespace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			m := NewMetricsIn(tt.ns, &buf, map[string]string{"function": "reclaimer"}, func() time.Time { return at })
			m.Add("Reclaimed", 4)
			m.Flush()
			var doc struct {
				Reclaimed float64 `json:"Reclaimed"`
				emfLine
			}
			if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &doc); err != nil {
				t.Fatalf("not one EMF JSON line: %v: %q", err, buf.String())
			}
			cw := doc.AWS.CloudWatchMetrics
			if len(cw) != 1 {
				t.Fatalf("got %d metric directives, want 1", len(cw))
			}
			if cw[0].Namespace != tt.want {
				t.Errorf("got namespace %q, want %q", cw[0].Namespace, tt.want)
			}
			if len(cw[0].Dimensions) != 1 || len(cw[0].Dimensions[0]) != 1 || cw[0].Dimensions[0][0] != "function" || doc.Function != "reclaimer" {
				t.Errorf("got dimensions %v (function %q), want [[function]] (reclaimer)", cw[0].Dimensions, doc.Function)
			}
			if doc.Reclaimed != 4 || len(cw[0].Metrics) != 1 || cw[0].Metrics[0]["Name"] != "Reclaimed" {
				t.Errorf("got value %v, metrics %v, want Reclaimed 4", doc.Reclaimed, cw[0].Metrics)
			}
		})
	}
}

func TestMetricsDimensionsAndKinds(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	retried := Metric{Name: "retried", Dims: []string{DimPool, DimClass}}
	remaining := Metric{Name: "RateRemaining", Unit: None, Dims: []string{DimInstallation}}
	wait := Metric{Name: "TimeToProvision", Unit: Milliseconds, Dims: []string{DimPool}}
	var buf bytes.Buffer
	m := NewMetricsIn("ns", &buf, map[string]string{"function": "claimer"}, func() time.Time { return at })
	m.Count(retried, 1, Pool("linux"), Class("throttled"))
	m.Count(retried, 2, Pool("linux"), Class("throttled"))
	m.Count(retried, 1, Class("throttled"), Pool("arm"), Reason("undeclared: never written"))
	m.Gauge(remaining, 4000, Installation("7"))
	m.Gauge(remaining, 3990, Installation("7"))
	m.Observe(wait, 1500*time.Millisecond, Pool("linux"))
	m.Observe(wait, 250*time.Millisecond, Pool("linux"))
	m.Count(Metric{Name: "claimed", Dims: []string{DimPool}}, 1) // no pool known: fleet-wide only
	m.Flush()

	points := emftest.Parse(t, buf.Bytes())
	tests := []struct {
		name   string
		metric string
		dims   map[string]string
		sets   [][]string
		values []float64
	}{
		{"counts summed per pool and class", "retried", map[string]string{"pool": "linux", "class": "throttled"},
			[][]string{{"function"}, {"class", "function"}, {"class", "function", "pool"}}, []float64{3}},
		{"another pool is another line", "retried", map[string]string{"pool": "arm"},
			[][]string{{"function"}, {"class", "function"}, {"class", "function", "pool"}}, []float64{1}},
		{"a gauge keeps its last value", "RateRemaining", map[string]string{"installation": "7"},
			[][]string{{"function"}, {"function", "installation"}}, []float64{3990}},
		{"a timing keeps every sample", "TimeToProvision", map[string]string{"pool": "linux"},
			[][]string{{"function"}, {"function", "pool"}}, []float64{1500, 250}},
		{"a dimension without value is left out", "claimed", nil, [][]string{{"function"}}, []float64{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := emftest.Select(points, tt.metric, tt.dims)
			if len(got) != 1 {
				t.Fatalf("got %d points of %s %v, want 1: %+v", len(got), tt.metric, tt.dims, points)
			}
			p := got[0]
			if !reflect.DeepEqual(p.Sets, tt.sets) || !reflect.DeepEqual(p.Values, tt.values) || p.Namespace != "ns" || p.Dims["function"] != "claimer" {
				t.Errorf("got sets %v values %v ns %q dims %v, want %v %v", p.Sets, p.Values, p.Namespace, p.Dims, tt.sets, tt.values)
			}
			if _, ok := p.Dims["reason"]; ok {
				t.Errorf("an undeclared dimension was written: %v", p.Dims)
			}
		})
	}
	if n := strings.Count(buf.String(), "\n"); n != 5 {
		t.Errorf("got %d lines, want one per set of dimension values (5):\n%s", n, buf.String())
	}
}

func TestInlineMakesTheLogLineAnEMFDocument(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	m := NewMetricsIn("ns", io.Discard, map[string]string{"function": "webhook"}, func() time.Time { return at })
	log := NewLogger(&buf, "info")
	deliveries := Metric{Name: "Deliveries", Dims: []string{DimEvent, DimOutcome, DimPool}}
	line := []slog.Attr{slog.String("delivery_id", "d1"), slog.String("event", "workflow_job"), slog.String("outcome", "enqueued"), slog.Int("status", 202)}
	log.LogAttrs(t.Context(), slog.LevelInfo, "delivery", m.Inline(line, Sample{deliveries, 1})...)

	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("got %d lines, want the one log line", n)
	}
	points := emftest.Parse(t, buf.Bytes())
	if len(points) != 1 {
		t.Fatalf("got %d points, want 1: %s", len(points), buf.String())
	}
	p := points[0]
	want := [][]string{{"function"}, {"event", "function", "outcome"}}
	if p.Name != "Deliveries" || p.Sum() != 1 || !reflect.DeepEqual(p.Sets, want) || p.Dims["outcome"] != "enqueued" || p.Dims["function"] != "webhook" {
		t.Errorf("got %+v, want Deliveries 1 under %v (no pool on the line)", p, want)
	}
	if strings.Count(buf.String(), `"outcome":`) != 1 {
		t.Errorf("a dimension key was written twice: %s", buf.String())
	}
	if got := m.Inline(line); len(got) != len(line) {
		t.Errorf("Inline without samples added %d attributes", len(got)-len(line))
	}
}

// TestEmitWritesWhatInlineWould: the metrics of a log line the logger
// drops reach the stream as a line of their own, publishing exactly what
// the logged line would have, and nothing of the line but its dimensions.
func TestEmitWritesWhatInlineWould(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	deliveries := Metric{Name: "Deliveries", Dims: []string{DimEvent, DimOutcome, DimPool}}
	created := Metric{Name: "JobsCreated", Dims: []string{DimPool}}
	wait := Metric{Name: "TimeToRunner", Unit: Milliseconds, Dims: []string{DimPool}}
	line := []slog.Attr{slog.String("delivery_id", "d1"), slog.String("event", "workflow_job"), slog.String("outcome", "enqueued"), slog.String("pool", "linux"), slog.Int("status", 202)}
	samples := []Sample{{deliveries, 1}, {created, 1}, {wait, 41000}}

	var logged, emitted bytes.Buffer
	NewLogger(&logged, "info").LogAttrs(t.Context(), slog.LevelInfo, "delivery",
		NewMetricsIn("ns", io.Discard, map[string]string{"function": "webhook"}, func() time.Time { return at }).Inline(line, samples...)...)
	m := NewMetricsIn("ns", &emitted, map[string]string{"function": "webhook"}, func() time.Time { return at })
	m.Emit(line, samples...)
	m.Emit(line) // no samples: nothing

	if n := strings.Count(emitted.String(), "\n"); n != 1 {
		t.Fatalf("got %d lines, want one: %s", n, emitted.String())
	}
	want, got := emftest.Parse(t, logged.Bytes()), emftest.Parse(t, emitted.Bytes())
	if len(got) != 3 || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want what the logged line publishes %+v", got, want)
	}
	if strings.Contains(emitted.String(), "d1") || strings.Contains(emitted.String(), "status") {
		t.Errorf("the metric line carries the log line's other attributes: %s", emitted.String())
	}
	var nilMetrics *Metrics
	nilMetrics.Emit(line, samples...)
}

// TestInlinePublishesWhatItNames: a line's EMF document reaches CloudWatch
// as Metrics made it, whatever its names look like. A stack or pool name
// of 32 or more characters mixing case and digits has a credential's
// shape; masked, the decision lines' metrics went to a namespace named
// "[redacted]", where no alarm looks, under a pool named so. The line's
// other attributes are still masked.
func TestInlinePublishesWhatItNames(t *testing.T) {
	t.Parallel()
	const (
		ns     = "ghclaim-Production-Runners-eu-west-1"
		fn     = "webhook-Production-Runners-eu-west-1"
		pool   = "Ubuntu22-Large-Gpu-Runners-Fleet1"
		secret = "ghs_0123456789abcdefABCDEF0123456789abcd"
	)
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	deliveries := Metric{Name: "Deliveries", Dims: []string{DimOutcome, DimPool}}
	line := []slog.Attr{slog.String("outcome", "enqueued"), slog.String("pool", pool), slog.String("error", "refused: "+secret), slog.String("note", pool)}
	var logged, emitted bytes.Buffer
	m := NewMetricsIn(ns, &emitted, map[string]string{"function": fn}, func() time.Time { return at })
	NewLogger(&logged, "info").LogAttrs(t.Context(), slog.LevelInfo, "delivery", m.Inline(line, Sample{deliveries, 1})...)
	m.Emit(line, Sample{deliveries, 1})

	got := emftest.Parse(t, logged.Bytes())
	if len(got) != 1 || got[0].Namespace != ns || got[0].Dims["pool"] != pool || got[0].Dims["function"] != fn {
		t.Fatalf("published %+v, want Deliveries in namespace %s for pool %s and function %s:\n%s", got, ns, pool, fn, logged.String())
	}
	if want := emftest.Parse(t, emitted.Bytes()); !reflect.DeepEqual(got, want) {
		t.Errorf("the logged line publishes %+v, Emit %+v", got, want)
	}
	if strings.Contains(logged.String(), secret) || !strings.Contains(logged.String(), `"note":"[redacted]"`) {
		t.Errorf("the line's other attributes were not masked:\n%s", logged.String())
	}
}

// TestLoggerWritesPoolAndRunnerNames: a long pool, runner, repository or
// owner name mixing case and digits has a credential's shape, but the
// logger writes it as it is under the attributes that hold such names, so
// a line still says which runner it means. The same text under another
// attribute, and a token under a name's attribute, are masked.
func TestLoggerWritesPoolAndRunnerNames(t *testing.T) {
	t.Parallel()
	const (
		pool   = "Ubuntu22-Large-Gpu-Runners-Fleet1"
		runner = "BuildFarm-Ubuntu22-Large-29679449123"
		token  = "ghs_0123456789abcdefABCDEF0123456789abcd"
		repo   = "ContosoCorp/Platform-Runner-Images2"
	)
	var buf bytes.Buffer
	NewLogger(&buf, "info").Info("claim",
		slog.String("pool", pool), slog.String("old_pool", pool), slog.String("runner_name", runner),
		slog.String("record_runner_name", runner+"-r2"), slog.String("reason", runner), slog.String("spare_runner_name", token),
		slog.String("repo", repo), slog.String("taken_from_repo", repo), slog.String("taken_by", runner), slog.String("owner", "ContosoCorporation-Platform2024"))
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pool": pool, "old_pool": pool, "runner_name": runner, "record_runner_name": runner + "-r2", "reason": "[redacted]", "spare_runner_name": "[redacted]", "repo": repo, "taken_from_repo": repo, "taken_by": runner, "owner": "ContosoCorporation-Platform2024"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %q", k, got[k], v)
		}
	}
}

// TestInlineMasksADimensionValueNoNameHas: a dimension value is written
// through redact.Name, like a name: one with a credential's shape and no
// name's is masked on the line, whatever Inline publishes.
func TestInlineMasksADimensionValueNoNameHas(t *testing.T) {
	t.Parallel()
	const odd = "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0PpOoNn+/"
	var buf bytes.Buffer
	m := NewMetricsIn("ns", io.Discard, map[string]string{"function": "webhook"}, nil)
	NewLogger(&buf, "info").LogAttrs(t.Context(), slog.LevelInfo, "delivery",
		m.Inline([]slog.Attr{slog.String("outcome", odd)}, Sample{Metric{Name: "Deliveries", Dims: []string{DimOutcome}}, 1})...)
	if strings.Contains(buf.String(), odd) || !strings.Contains(buf.String(), `"outcome":"[redacted]"`) {
		t.Errorf("the dimension value was written unmasked:\n%s", buf.String())
	}
}

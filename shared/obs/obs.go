// Package obs is ghclaim's observability: JSON logs through log/slog (one
// line per decision) and CloudWatch metrics as Embedded Metric Format lines
// on the same stream, which Lambda ships to CloudWatch with no API calls.
//
// Log attributes use fixed keys (KeyJobID, KeyDeliveryID, KeyAttempt,
// KeyClass, …) so operators can query across functions. This package must
// never receive a secret: callers log ids, states and classes, not tokens
// or JIT configs, and values with a LogValue that redacts stay redacted.
package obs

import (
	"encoding/json"
	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/redact"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
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

// redactAttr is NewLogger's ReplaceAttr.
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(redact.String(a.Value.String()))
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok && err != nil {
			a.Value = slog.StringValue(redact.String(err.Error()))
		}
	}
	return a
}

// Namespace is the CloudWatch namespace of metrics when none is configured
// (tests, local runs). A deployment names its own (METRICS_NAMESPACE, by
// default the stack's name), so two stacks in one account and Region never
// add up into one set of metrics and alarms.
const Namespace = "ghclaim"

// Metrics writes counts as one EMF line per flush.
type Metrics struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
	dims      map[string]string
	counts    map[string]float64
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
	return &Metrics{w: w, namespace: ns, dims: dims, counts: map[string]float64{}, now: clock.Or(now)}
}

// Add adds v to the named count.
func (m *Metrics) Add(name string, v float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.counts[name] += v
	m.mu.Unlock()
}

// Flush writes the counts gathered so far as one EMF line and resets them.
func (m *Metrics) Flush() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.counts) == 0 {
		return
	}
	names := make([]string, 0, len(m.counts))
	for k := range m.counts {
		names = append(names, k)
	}
	sort.Strings(names)
	dimKeys := make([]string, 0, len(m.dims))
	for k := range m.dims {
		dimKeys = append(dimKeys, k)
	}
	sort.Strings(dimKeys)
	defs := make([]map[string]string, 0, len(names))
	doc := map[string]any{}
	for _, n := range names {
		defs = append(defs, map[string]string{"Name": n, "Unit": "Count"})
		doc[n] = m.counts[n]
	}
	for k, v := range m.dims {
		doc[k] = v
	}
	doc["_aws"] = map[string]any{
		"Timestamp": m.now().UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  m.namespace,
			"Dimensions": [][]string{dimKeys},
			"Metrics":    defs,
		}},
	}
	b, err := json.Marshal(doc)
	if err == nil {
		_, _ = m.w.Write(append(b, '\n'))
	}
	m.counts = map[string]float64{}
}

package obs

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
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

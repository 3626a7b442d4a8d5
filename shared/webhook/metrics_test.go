package webhook

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
)

// TestDeliveryLinesAreEMF: each delivery's one decision line is also its
// EMF document, read here as CloudWatch reads it: Deliveries by event,
// outcome and pool (and fleet-wide), JobsCreated for a new job,
// TimeToRunner (GitHub's started_at − created_at) for in_progress.
func TestDeliveryLinesAreEMF(t *testing.T) {
	t.Parallel()
	all := [][]string{{"function"}, {"event", "function", "outcome"}, {"event", "function", "outcome", "pool"}}
	noPool := [][]string{{"function"}, {"event", "function", "outcome"}}
	poolSets := [][]string{{"function"}, {"function", "pool"}}
	type point struct {
		metric string
		dims   map[string]string
		sets   [][]string
		value  float64
	}
	tests := []struct {
		name    string
		prepare func(f *fixture)
		event   string
		body    func(t testing.TB) []byte
		forged  bool // a wrong signature
		want    []point
		absent  []string
	}{
		{name: "queued: a job created", event: "workflow_job", body: func(t testing.TB) []byte { return compact(t, payload(t, "queued")) },
			want: []point{
				{"Deliveries", map[string]string{"event": "workflow_job", "outcome": "enqueued", "pool": "linux-x64"}, all, 1},
				{"JobsCreated", map[string]string{"pool": "linux-x64"}, poolSets, 1},
			}, absent: []string{"TimeToRunner"}},
		{name: "queued again: a duplicate, nothing created", event: "workflow_job",
			prepare: func(f *fixture) {
				f.st.Put(job.Record{JobID: 29679449, State: job.Queued, Version: 1, Pool: "linux-x64"})
			},
			body:   func(t testing.TB) []byte { return compact(t, payload(t, "queued")) },
			want:   []point{{"Deliveries", map[string]string{"event": "workflow_job", "outcome": "duplicate_job"}, noPool, 1}},
			absent: []string{"JobsCreated"}},
		{name: "in_progress: the job's wait for a runner", event: "workflow_job",
			prepare: func(f *fixture) {
				f.st.Put(job.Record{JobID: 29679449, State: job.Claimed, Version: 2, Pool: "linux-x64"})
			},
			body: func(t testing.TB) []byte { return compact(t, payload(t, "in_progress")) },
			want: []point{
				{"Deliveries", map[string]string{"event": "workflow_job", "outcome": "done", "pool": "linux-x64"}, all, 1},
				{"TimeToRunner", map[string]string{"pool": "linux-x64"}, poolSets, 41000}, // 09:00:00 → 09:00:41
			}, absent: []string{"JobsCreated"}},
		{name: "completed: no wait measured", event: "workflow_job", body: func(t testing.TB) []byte { return compact(t, payload(t, "completed")) },
			want:   []point{{"Deliveries", map[string]string{"event": "workflow_job", "outcome": "done_created", "pool": "linux-x64"}, all, 1}},
			absent: []string{"TimeToRunner", "JobsCreated"}},
		{name: "store down: a 5xx outcome", event: "workflow_job",
			prepare: func(f *fixture) { f.st.fail["CreateJob"] = errors.New("dynamodb: InternalServerError") },
			body:    func(t testing.TB) []byte { return compact(t, payload(t, "queued")) },
			want:    []point{{"Deliveries", map[string]string{"event": "workflow_job", "outcome": "create_failed"}, noPool, 1}},
			absent:  []string{"JobsCreated"}},
		{name: "ping", event: "ping", body: func(t testing.TB) []byte { return []byte(`{"zen":"Design for failure.","hook_id":1}`) },
			want: []point{{"Deliveries", map[string]string{"event": "ping", "outcome": "ping"}, noPool, 1}}},
		{name: "forged event name: no event dimension", event: "evil-" + strings.Repeat("x", 20), forged: true,
			body: func(t testing.TB) []byte { return compact(t, payload(t, "queued")) },
			want: []point{{"Deliveries", map[string]string{"outcome": "bad_signature"}, [][]string{{"function"}, {"function", "outcome"}}, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *Config) {
				c.Metrics = obs.NewMetricsIn("ns", io.Discard, map[string]string{"function": "webhook"}, func() time.Time { return testNow })
			})
			if tt.prepare != nil {
				tt.prepare(f)
			}
			req := signedRequest(tt.event, "guid-1", tt.body(t))
			if tt.forged {
				req.Headers["x-hub-signature-256"] = "sha256=" + strings.Repeat("0", 64)
			}
			f.do(t, req)
			out := f.logs.String()
			if n := strings.Count(out, "\n"); n != 1 {
				t.Fatalf("got %d lines, want the delivery's one line:\n%s", n, out)
			}
			points := emftest.Parse(t, []byte(out))
			for _, w := range tt.want {
				got := emftest.Select(points, w.metric, w.dims)
				if len(got) != 1 {
					t.Fatalf("%s %v: got %d points, want 1: %+v", w.metric, w.dims, len(got), points)
				}
				p := got[0]
				if !reflect.DeepEqual(p.Sets, w.sets) || p.Sum() != w.value || p.Dims["function"] != "webhook" || p.Namespace != "ns" {
					t.Errorf("%s: got sets %v value %v dims %v ns %q, want %v %v", w.metric, p.Sets, p.Values, p.Dims, p.Namespace, w.sets, w.value)
				}
				if _, ok := p.Dims["event"]; ok && tt.forged {
					t.Errorf("a forged event became a dimension: %v", p.Dims)
				}
			}
			for _, name := range tt.absent {
				if got := emftest.Select(points, name, nil); len(got) != 0 {
					t.Errorf("%s written: %+v", name, got)
				}
			}
		})
	}
}

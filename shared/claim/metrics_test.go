package claim_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestMetricsOfEachOutcome drives one claim to each outcome and reads the
// claimer's output as CloudWatch would (EMF): the outcome's count with its
// pool (and class), under the fleet-wide set the alarms read as well.
func TestMetricsOfEachOutcome(t *testing.T) {
	t.Parallel()
	type want struct {
		metric string
		dims   map[string]string
		sets   [][]string
		values []float64
	}
	poolSets := [][]string{{"function"}, {"function", "pool"}}
	classSets := [][]string{{"function"}, {"class", "function"}, {"class", "function", "pool"}}
	installationSets := [][]string{{"function"}, {"function", "installation"}}
	inst := map[string]string{"installation": "4242"}
	tests := []struct {
		name string
		opt  setupOpt
		// arrange runs after the job is seeded, before the claimer's invocation.
		arrange func(t *testing.T, h *harness, id int64)
		want    []want
	}{
		{
			name: "claimed",
			arrange: func(t *testing.T, h *harness, id int64) {
				h.gh.SetRateLimit(installation, 5000, 4000, h.clock.Now().Add(30*time.Minute))
				h.clock.Advance(7 * time.Second) // queued 7 s before the claim
			},
			want: []want{
				{"claimed", map[string]string{"pool": "linux"}, poolSets, []float64{1}},
				{"TimeToProvision", map[string]string{"pool": "linux"}, poolSets, []float64{7000}},
				// The reading the attempt shared: GitHub's, taken just now.
				{"RateLimit", inst, installationSets, []float64{5000}},
				{"RateReadingAge", inst, installationSets, []float64{0}},
				{"RateResetIn", inst, installationSets, []float64{1800 - 7}},
			},
		},
		{
			name:    "retried",
			arrange: func(t *testing.T, h *harness, id int64) { h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(502)) },
			want:    []want{{"retried", map[string]string{"pool": "linux", "class": "server_side"}, classSets, []float64{1}}},
		},
		{
			name: "failed",
			opt:  setupOpt{groupID: 99}, // no such runner group: 422
			want: []want{{"failed", map[string]string{"pool": "linux", "class": "non_retryable"}, classSets, []float64{1}}},
		},
		{
			name: "deferred",
			arrange: func(t *testing.T, h *harness, id int64) {
				now := h.clock.Now()
				saveRate(t, h, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: now.Add(10 * time.Minute), ObservedAt: now.Add(-30 * time.Second)})
			},
			want: []want{
				{"deferred_rate_limit", map[string]string{"pool": "linux"}, poolSets, []float64{1}},
				// An exhausted budget, read 30 s ago: told apart from a stale one by its age.
				{"RateRemaining", inst, installationSets, []float64{0}},
				{"RateLimit", inst, installationSets, []float64{5000}},
				{"RateReadingAge", inst, installationSets, []float64{30}},
				{"RateResetIn", inst, installationSets, []float64{600}},
			},
		},
		{
			name: "abandoned",
			arrange: func(t *testing.T, h *harness, id int64) {
				now := h.clock.Now()
				r := h.get(t, id)
				r.FirstFailureAt = job.Millis(now.Add(-2 * time.Hour)) // past the maximum age
				h.store.Put(r)
				saveRate(t, h, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: now.Add(10 * time.Minute), ObservedAt: now})
			},
			want: []want{{"abandoned", map[string]string{"pool": "linux", "class": "rate_limit"}, classSets, []float64{1}}},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, tt.opt)
			c := h.claimer(t, claimerOpt{})
			id := int64(9900 + i)
			h.seed(t, id)
			if tt.arrange != nil {
				tt.arrange(t, h, id)
			}
			h.invoke(t, c, h.receive(t, 1)...)
			points := emftest.Parse(t, []byte(h.logs.String()))
			for _, w := range tt.want {
				got := emftest.Select(points, w.metric, w.dims)
				if len(got) != 1 {
					t.Fatalf("%s %v: got %d points, want 1; all: %v", w.metric, w.dims, len(got), points)
				}
				p := got[0]
				if !reflect.DeepEqual(p.Sets, w.sets) || !reflect.DeepEqual(p.Values, w.values) || p.Dims["function"] != "claimer" || p.Namespace != obs.Namespace {
					t.Errorf("%s: got sets %v values %v dims %v in %q, want %v %v", w.metric, p.Sets, p.Values, p.Dims, p.Namespace, w.sets, w.values)
				}
			}
			for _, other := range []string{"claimed", "retried", "failed", "deferred_rate_limit", "abandoned"} {
				if other != tt.name && other != tt.want[0].metric && len(emftest.Select(points, other, nil)) != 0 {
					t.Errorf("%s was counted too: %v", other, emftest.Names(points))
				}
			}
		})
	}
}

// TestMetricsOfDroppedMessages: a duplicate counts for its pool, a
// malformed message (no record, no pool) fleet-wide only.
func TestMetricsOfDroppedMessages(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{})
	h.seed(t, 9950)
	msgs := h.receive(t, 1)
	h.invoke(t, c, msgs...)
	dup := msgs[0]
	dup.ReceiptHandle += "-again"
	h.invoke(t, c, dup)
	h.esm.raw(`{"nope":`)
	h.invoke(t, c, h.receive(t, 1)...)

	points := emftest.Parse(t, []byte(h.logs.String()))
	for _, w := range []struct {
		metric string
		dims   map[string]string
		sets   [][]string
	}{
		{"duplicates", map[string]string{"pool": "linux"}, [][]string{{"function"}, {"function", "pool"}}},
		{"malformed", nil, [][]string{{"function"}}},
	} {
		got := emftest.Select(points, w.metric, w.dims)
		if len(got) != 1 || got[0].Sum() != 1 || !reflect.DeepEqual(got[0].Sets, w.sets) {
			t.Errorf("%s: got %+v, want one point of 1 under %v", w.metric, got, w.sets)
		}
	}
}

func saveRate(t *testing.T, h *harness, r ratelimit.Reading) {
	t.Helper()
	if err := h.store.SaveRate(context.Background(), installation, r); err != nil {
		t.Fatal(err)
	}
}

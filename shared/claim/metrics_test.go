package claim_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestMetricsOfEachOutcome drives one claim to each outcome and reads the
// claimer's output as CloudWatch would (EMF): one Claims count with its
// outcome and pool, under the fleet-wide and by-outcome sets as well, and
// the class count of the outcomes that carry one, all on the decision's
// own log line.
func TestMetricsOfEachOutcome(t *testing.T) {
	t.Parallel()
	type want struct {
		metric string
		dims   map[string]string
		sets   [][]string
		values []float64
	}
	outcomeSets := [][]string{{"function"}, {"function", "outcome"}, {"function", "outcome", "pool"}}
	poolSets := [][]string{{"function"}, {"function", "pool"}}
	classSets := [][]string{{"function"}, {"class", "function"}, {"class", "function", "pool"}}
	installationSets := [][]string{{"function"}, {"function", "installation"}}
	inst := map[string]string{"installation": "4242"}
	claims := func(outcome string) want {
		return want{"Claims", map[string]string{"pool": "linux", "outcome": outcome}, outcomeSets, []float64{1}}
	}
	tests := []struct {
		name    string
		outcome string // the decision, and the Claims outcome
		opt     setupOpt
		// arrange runs after the job is seeded, before the claimer's invocation.
		arrange func(t *testing.T, h *harness, id int64)
		want    []want
	}{
		{
			name:    "claimed",
			outcome: claim.DecisionClaimed,
			arrange: func(t *testing.T, h *harness, id int64) {
				h.gh.SetRateLimit(installation, 5000, 4000, h.clock.Now().Add(30*time.Minute))
				h.clock.Advance(7 * time.Second) // queued 7 s before the claim
			},
			want: []want{
				{"TimeToProvision", map[string]string{"pool": "linux"}, poolSets, []float64{7000}},
				// The reading the attempt shared: GitHub's, taken just now.
				{"RateLimit", inst, installationSets, []float64{5000}},
				{"RateReadingAge", inst, installationSets, []float64{0}},
				{"RateResetIn", inst, installationSets, []float64{1800 - 7}},
			},
		},
		{
			name:    "retried",
			outcome: claim.DecisionRetry,
			arrange: func(t *testing.T, h *harness, id int64) { h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(502)) },
			want:    []want{{"retried", map[string]string{"pool": "linux", "class": "server_side"}, classSets, []float64{1}}},
		},
		{
			name:    "failed",
			outcome: claim.DecisionFailed,
			opt:     setupOpt{groupID: 99}, // no such runner group: 422
			want:    []want{{"failed", map[string]string{"pool": "linux", "class": "non_retryable"}, classSets, []float64{1}}},
		},
		{
			name:    "deferred",
			outcome: claim.DecisionDeferred,
			arrange: func(t *testing.T, h *harness, id int64) {
				now := h.clock.Now()
				saveRate(t, h, ratelimit.Reading{Limit: 5000, Remaining: 0, ResetAt: now.Add(10 * time.Minute), ObservedAt: now.Add(-30 * time.Second)})
			},
			want: []want{
				// An exhausted budget, read 30 s ago: told apart from a stale one by its age.
				{"RateRemaining", inst, installationSets, []float64{0}},
				{"RateLimit", inst, installationSets, []float64{5000}},
				{"RateReadingAge", inst, installationSets, []float64{30}},
				{"RateResetIn", inst, installationSets, []float64{600}},
			},
		},
		{
			name:    "deferred by a secondary limit",
			outcome: claim.DecisionDeferred,
			arrange: func(t *testing.T, h *harness, id int64) {
				if err := h.store.SaveBlock(context.Background(), installation, h.clock.Now().Add(90*time.Second), 2*time.Minute); err != nil {
					t.Fatal(err)
				}
			},
			want: []want{{"RateBlockedFor", inst, installationSets, []float64{90}}},
		},
		{
			name:    "abandoned",
			outcome: claim.DecisionAbandoned,
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
	classed := []string{"retried", "failed", "abandoned"}
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
			for _, w := range append([]want{claims(tt.outcome)}, tt.want...) {
				got := emftest.Select(points, w.metric, w.dims)
				if len(got) != 1 {
					t.Fatalf("%s %v: got %d points, want 1; all: %v", w.metric, w.dims, len(got), points)
				}
				p := got[0]
				if !reflect.DeepEqual(p.Sets, w.sets) || !reflect.DeepEqual(p.Values, w.values) || p.Dims["function"] != "claimer" || p.Namespace != obs.Namespace {
					t.Errorf("%s: got sets %v values %v dims %v in %q, want %v %v", w.metric, p.Sets, p.Values, p.Dims, p.Namespace, w.sets, w.values)
				}
			}
			if n := len(emftest.Select(points, "Claims", nil)); n != 1 {
				t.Errorf("got %d Claims points, want the decision's one", n)
			}
			for _, other := range classed {
				if other != tt.name && len(emftest.Select(points, other, nil)) != 0 {
					t.Errorf("%s was counted too: %v", other, emftest.Names(points))
				}
			}
			// The counts ride on the decision's line: no line of their own.
			for _, l := range emfLines(t, h.logs.String(), "Claims") {
				if l["msg"] != "claim "+tt.outcome || l["decision"] != tt.outcome || l["outcome"] != tt.outcome || l[obs.KeyJobID] != float64(id) {
					t.Errorf("Claims rode on %v, want the line of decision %s of job %d", l, tt.outcome, id)
				}
			}
		})
	}
}

// emfLines returns the JSON lines of out that carry metric.
func emfLines(t *testing.T, out, metric string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["_aws"] == nil || m[metric] == nil {
			continue
		}
		lines = append(lines, m)
	}
	return lines
}

// TestClaimsCountedWhenTheDecisionLineIsNotLogged: a level that drops the
// decision's line (LOG_LEVEL=error, a claimed job logs at info) does not
// drop its metrics: they go out with the invocation's flushed lines.
func TestClaimsCountedWhenTheDecisionLineIsNotLogged(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	h.log = obs.NewLogger(h.logs, "error")
	c := h.claimer(t, claimerOpt{})
	h.seed(t, 9960)
	h.invoke(t, c, h.receive(t, 1)...)
	if strings.Contains(h.logs.String(), `"msg":"claim claimed"`) {
		t.Fatalf("the claimed line was logged at level error: the test proves nothing")
	}
	points := emftest.Parse(t, []byte(h.logs.String()))
	got := emftest.Select(points, "Claims", map[string]string{"outcome": "claimed", "pool": "linux"})
	if len(got) != 1 || got[0].Sum() != 1 {
		t.Errorf("Claims{claimed, linux}: got %+v, want one count of 1", got)
	}
}

// TestMetricsOfDroppedMessages: a duplicate counts for its pool, a
// malformed message (no record, no pool) by outcome only.
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
		{"Claims", map[string]string{"outcome": "duplicate", "pool": "linux"}, [][]string{{"function"}, {"function", "outcome"}, {"function", "outcome", "pool"}}},
		{"Claims", map[string]string{"outcome": "malformed"}, [][]string{{"function"}, {"function", "outcome"}}},
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

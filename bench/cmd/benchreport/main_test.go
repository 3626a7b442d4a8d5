package main

import (
	"math"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/bench"
)

// TestCostModelCountsTheBaselinesConsumer prices a job life whose figures
// are given, and checks both columns from them by hand: ours is the three
// deliveries, the claimer's invocation and requests and the poller's
// receive and delete; the baseline is the same three deliveries plus the
// consumer's one invocation (a plain queue has a consumer too) and one
// queue round trip.
func TestCostModelCountsTheBaselinesConsumer(t *testing.T) {
	old := claimerInvocation
	t.Cleanup(func() { claimerInvocation = old })
	claimerInvocation = 20 * time.Millisecond

	rep := bench.Report{
		Lifecycle: []bench.Delivery{
			{Action: "queued", Time: bench.Latency{Mean: 4}, Usage: bench.Usage{SQSRequests: 1, WRU: 2}},
			{Action: "in_progress", Time: bench.Latency{Mean: 8}, Usage: bench.Usage{WRU: 2}},
			{Action: "completed", Time: bench.Latency{Mean: 4}, Usage: bench.Usage{WRU: 1}},
		},
		Claims: []bench.ClaimResult{{ClaimerUsage: bench.Usage{WRU: 4}}},
	}
	c := costModel(rep, 15*time.Millisecond, map[string]int{"DynamoDB.Query": 10})

	gbs := func(ms float64) float64 { return 256.0 / 1024 * ms / 1000 }
	wantBase := bench.Usage{Invocations: 4, GBSeconds: 4 * gbs(4), SQSRequests: 3}.Times(1000)
	wantOurs := bench.Usage{Invocations: 4, GBSeconds: gbs(4) + gbs(8) + gbs(4) + gbs(20), SQSRequests: 3, WRU: 9}.Times(1000)
	for _, tc := range []struct {
		name      string
		got, want bench.Usage
	}{{"baseline", c.Baseline, wantBase}, {"ours", c.Ours, wantOurs}} {
		if !near(tc.got.Invocations, tc.want.Invocations) || !near(tc.got.GBSeconds, tc.want.GBSeconds) ||
			!near(tc.got.SQSRequests, tc.want.SQSRequests) || !near(tc.got.WRU, tc.want.WRU) || tc.got.RRU != tc.want.RRU {
			t.Errorf("%s per 1,000 jobs = %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
	p := bench.ListPrices
	if want := math.Round(p.Price(wantOurs).Total/p.Price(wantBase).Total*100) / 100; c.Ratio != want {
		t.Errorf("ratio = %.2f, want %.2f", c.Ratio, want)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/bench"
	"github.com/ghclaim/ghclaim/infra/emulator"
)

// setup deploys a stack of its own for b on the shared emulator.
func setup(b *testing.B) *bench.Env {
	b.Helper()
	srv := emulator.ForTest(b)
	st := emulator.DeployForTest(b, srv)
	return bench.NewEnv(srv.ConfigForTest(b), st)
}

// BenchmarkWebhookHandler is one queued delivery through the handler
// (verify, parse, the record's conditional put, send).
func BenchmarkWebhookHandler(b *testing.B) {
	env := setup(b)
	w, err := bench.NewWebhook(b.Context(), env, nil, 1_000_000)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := env.Count.Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		ev := w.Event(w.NextID())
		b.StartTimer()
		if err := w.Handle(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
	d := env.Count.Snapshot().Since(start)
	b.ReportMetric(float64(d.Total())/float64(b.N), "awscalls/op")
}

// BenchmarkWebhookFloor is one bare SendMessage of the same job's message:
// the TypeScript runner module's whole webhook path.
func BenchmarkWebhookFloor(b *testing.B) {
	env := setup(b)
	w, err := bench.NewWebhook(b.Context(), env, nil, 2_000_000)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := env.Count.Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Floor(ctx, w.NextID()); err != nil {
			b.Fatal(err)
		}
	}
	d := env.Count.Snapshot().Since(start)
	b.ReportMetric(float64(d.Total())/float64(b.N), "awscalls/op")
}

// BenchmarkReclaimPass sweeps 200 stale records per op: one default pass.
func BenchmarkReclaimPass(b *testing.B) {
	env := setup(b)
	ctx := context.Background()
	var base int64 = 10_000_000
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := bench.SeedStale(ctx, env, 200, base, time.Now()); err != nil {
			b.Fatal(err)
		}
		base += 200
		before := env.Count.Snapshot()
		b.StartTimer()
		rc, err := bench.NewReclaimer(ctx, env)
		if err != nil {
			b.Fatal(err)
		}
		rep, err := rc.Run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if rep.RequeuedTotal() != 200 {
			b.Fatalf("requeued %d, want 200", rep.RequeuedTotal())
		}
		b.StopTimer()
		b.ReportMetric(float64(env.Count.Snapshot().Since(before).Total())/200, "awscalls/record")
		b.StartTimer()
	}
}

// BenchmarkWebhookSection is section 1 of `make bench` alone (webhook vs
// one bare SendMessage, 300 of each, interleaved after the same warm-up),
// for checking the headline ratio without running the whole report:
//
//	go test -run X -bench WebhookSection -benchtime 1x -count 3 ./bench
func BenchmarkWebhookSection(b *testing.B) {
	env := setup(b)
	stop := env.KeepQueueShort(b.Context(), 200*time.Millisecond)
	defer stop()
	w, err := bench.NewWebhook(b.Context(), env, nil, 3_000_000)
	if err != nil {
		b.Fatal(err)
	}
	var r bench.WebhookResult
	for b.Loop() {
		if r, err = bench.MeasureWebhook(b.Context(), w, 300, 20, 50); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(r.RatioP50, "ratio_p50")
	b.ReportMetric(r.Handler.P50, "handler_p50_ms")
	b.ReportMetric(r.Floor.P50, "floor_p50_ms")
	b.ReportMetric(r.HandlerOwn.P50, "handler_own_p50_ms")
	b.ReportMetric(r.FloorOwn.P50, "floor_own_p50_ms")
	b.ReportMetric(r.OpLatencyMS["DynamoDB.PutItem"], "putitem_ms")
	b.ReportMetric(r.OpLatencyMS["SQS.SendMessage"], "send_ms")
}

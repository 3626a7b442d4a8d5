package webhook

import (
	"context"
	"io"
	"strconv"
	"testing"

	"github.com/ghclaim/ghclaim/shared/obs"
)

// BenchmarkQueuedOwn is one queued delivery through the handler on
// infra/mem's store and queue, with the production logger and metrics
// writing to io.Discard: the handler's own CPU per delivery (verify,
// parse, decide, build the record and message, the decision line), none
// of the AWS requests' time. bench/ measures the whole delivery against
// the emulator.
func BenchmarkQueuedOwn(b *testing.B) {
	f := setup(b, func(c *Config) {
		c.Metrics = obs.NewMetrics(io.Discard, map[string]string{obs.DimFunction: "webhook"}, nil)
	})
	f.h.cfg.Logger = obs.NewLogger(io.Discard, "info") // setup's logger keeps every line
	base := payload(b, "queued")
	ctx := context.Background()
	var id int64 = 1_000_000
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		id++
		set(base, "workflow_job.id", id)
		req := signedRequest("workflow_job", "guid-"+strconv.FormatInt(id, 10), compact(b, base))
		b.StartTimer()
		resp, err := f.h.Handle(ctx, req)
		if err != nil || resp.StatusCode != 202 {
			b.Fatalf("status %d, %v: %s", resp.StatusCode, err, resp.Body)
		}
	}
}

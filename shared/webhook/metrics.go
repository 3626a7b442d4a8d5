package webhook

import (
	"context"
	"log/slog"
	"time"

	"github.com/ghclaim/ghclaim/shared/obs"
)

// The webhook's metrics ride on each delivery's decision line (obs.Inline):
// one EMF document per delivery at no extra cost, or a line of their own
// when the logger's level drops the decision line (obs.Emit). Their dimension values
// are the line's own "event", "outcome" and "pool". The event is a
// dimension only when it is one ghclaim handles: the header is read before
// the signature is checked, and an unbounded dimension value would mint a
// custom metric per forged header.
var (
	metricDeliveries          = obs.Metric{Name: "Deliveries", Dims: []string{obs.DimEvent, obs.DimOutcome, obs.DimPool}}
	metricDeliveriesByOutcome = obs.Metric{Name: "Deliveries", Dims: []string{obs.DimOutcome}}
	metricJobsCreated         = obs.Metric{Name: "JobsCreated", Dims: []string{obs.DimPool}}
	// metricTimeToRunner is GitHub's own wait of a job (workflow_job
	// started_at − created_at, from the in_progress delivery): from the
	// job's queueing to a runner taking it, as its workflow run saw it.
	metricTimeToRunner = obs.Metric{Name: "TimeToRunner", Unit: obs.Milliseconds, Dims: []string{obs.DimPool}}
	// metricRefusedJobRan counts reports of a job the pools refuse run on
	// the runner of another job of ours (RefusedJobRanAlarm): a public
	// repository's job on a private pool's runner, say, let in by the
	// runner group.
	metricRefusedJobRan = obs.Metric{Name: "refused_job_ran"}
)

// decided logs line, the delivery's decision line, at level as the
// delivery's EMF document (obs.Inline). When the logger's level drops the
// line (LOG_LEVEL=warn drops a 2xx's), its metrics are written as an EMF
// line of their own (obs.Emit): one or the other, never both.
func (h *Handler) decided(ctx context.Context, d *delivery, level slog.Level, msg string, line []slog.Attr) {
	deliveries := metricDeliveriesByOutcome
	if d.event == "workflow_job" || d.event == "ping" {
		deliveries = metricDeliveries
	}
	samples := []obs.Sample{{Metric: deliveries, Value: 1}}
	if d.created {
		samples = append(samples, obs.Sample{Metric: metricJobsCreated, Value: 1})
	}
	if d.refusedRan {
		samples = append(samples, obs.Sample{Metric: metricRefusedJobRan, Value: 1})
	}
	if d.toRunner > 0 {
		samples = append(samples, obs.Sample{Metric: metricTimeToRunner, Value: float64(d.toRunner.Milliseconds())})
	}
	if !h.cfg.Logger.Enabled(ctx, level) {
		h.cfg.Metrics.Emit(line, samples...)
		return
	}
	h.cfg.Logger.LogAttrs(ctx, level, msg, h.cfg.Metrics.Inline(line, samples...)...)
}

// toRunner is how long j waited for a runner, when j says (in_progress
// with both times); 0 otherwise.
func toRunner(j Job) time.Duration {
	if j.Action != ActionInProgress || j.CreatedAt.IsZero() || j.StartedAt.Before(j.CreatedAt) {
		return 0
	}
	return j.StartedAt.Sub(j.CreatedAt)
}

package claim

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// The claimer's metrics (EMF, dimension "function": "claimer" plus those
// declared; see shared/obs).
//
// Every decision (one per message) is one count of Claims, by outcome (the
// decision's name) and pool, carried by the decision's own log line
// (obs.Inline): one line per decision, no line of its own. The decisions
// that end in an error class also count under their own name by class
// (retries, failures and give-ups by class), on the same line; the alarms
// read failed and abandoned fleet-wide. A line the logger's level drops
// would take its metrics with it, so those counts go to the invocation's
// flushed lines instead.
var (
	metricClaims        = obs.Metric{Name: "Claims", Dims: []string{obs.DimPool, obs.DimOutcome}}
	metricFailed        = obs.Metric{Name: "failed", Dims: []string{obs.DimPool, obs.DimClass}}
	metricAbandoned     = obs.Metric{Name: "abandoned", Dims: []string{obs.DimPool, obs.DimClass}}
	metricRetried       = obs.Metric{Name: "retried", Dims: []string{obs.DimPool, obs.DimClass}}
	metricSpareReleased = obs.Metric{Name: "spare_released", Dims: []string{obs.DimPool}}
	// A redelivered message took over its dead claimer's expired lease
	// (not a decision: the claim that follows decides).
	metricTakenOver = obs.Metric{Name: "lease_taken_over", Dims: []string{obs.DimPool}}
	metricDeadline  = obs.Metric{Name: "deadline_released"}
	// A retry because GitHub refused the App's token exchange (its key,
	// id or installation: an operator's to fix, AppRefusedAlarm).
	metricAppRefused = obs.Metric{Name: "app_refused"}

	// MetricTimeToProvision is the time from the queued delivery (the
	// record's creation) to the provisioning call, per attempt.
	metricTimeToProvision = obs.Metric{Name: "TimeToProvision", Unit: obs.Milliseconds, Dims: []string{obs.DimPool}}

	// The installation's rate reading whenever the claimer reads or
	// shares it: a low remaining with a small age is an exhausted budget,
	// with a large age a reading nobody refreshed.
	metricRateLimit     = obs.Metric{Name: "RateLimit", Unit: obs.None, Dims: []string{obs.DimInstallation}}
	metricRateRemaining = obs.Metric{Name: "RateRemaining", Unit: obs.None, Dims: []string{obs.DimInstallation}}
	metricRateReset     = obs.Metric{Name: "RateResetIn", Unit: obs.Seconds, Dims: []string{obs.DimInstallation}}
	metricRateAge       = obs.Metric{Name: "RateReadingAge", Unit: obs.Seconds, Dims: []string{obs.DimInstallation}}
	// While a secondary rate limit blocks the installation: how long yet.
	metricRateBlocked = obs.Metric{Name: "RateBlockedFor", Unit: obs.Seconds, Dims: []string{obs.DimInstallation}}
)

// byClass is the class breakdown of the decisions that carry an error class.
var byClass = map[string]obs.Metric{
	DecisionRetry: metricRetried, DecisionFailed: metricFailed, DecisionAbandoned: metricAbandoned,
}

// decided adds a decision's outcome and pool to line, its log line, and
// makes it the decision's metric line when the logger writes it at level.
func (f *flow) decided(ctx context.Context, level slog.Level, decision string, line []slog.Attr) []slog.Attr {
	line = append(line, slog.String(obs.DimOutcome, decision))
	if p := f.poolName(); p != "" {
		line = append(line, slog.String(obs.DimPool, p))
	}
	samples := []obs.Sample{{Metric: metricClaims, Value: 1}}
	if m, ok := byClass[decision]; ok {
		samples = append(samples, obs.Sample{Metric: m, Value: 1})
	}
	if f.appRefused && decision == DecisionRetry {
		samples = append(samples, obs.Sample{Metric: metricAppRefused, Value: 1})
	}
	if f.c.cfg.Logger.Enabled(ctx, level) {
		return f.c.cfg.Metrics.Inline(line, samples...)
	}
	var dims []obs.Dim
	for _, a := range line {
		if a.Value.Kind() == slog.KindString {
			dims = append(dims, obs.Dim{Name: a.Key, Value: a.Value.String()})
		}
	}
	for _, s := range samples {
		f.c.cfg.Metrics.Count(s.Metric, s.Value, dims...)
	}
	return line
}

// count adds one to metric for the job's pool.
func (f *flow) count(metric obs.Metric, dims ...obs.Dim) {
	f.c.cfg.Metrics.Count(metric, 1, append(dims, obs.Pool(f.poolName()))...)
}

// poolName is the pool the job's decisions count under: the attempt's,
// once it has one (a job whose recorded pool was renamed is claimed, and
// counted, in the pool that serves it now), else the record's.
func (f *flow) poolName() string {
	if f.pool.Name != "" {
		return f.pool.Name
	}
	return f.rec.Pool
}

// rateGauges writes the installation's reading as of now.
func (c *Claimer) rateGauges(inst int64, rd ratelimit.Reading, now time.Time) {
	m, d := c.cfg.Metrics, obs.Installation(strconv.FormatInt(inst, 10))
	if rd.Blocked(now) {
		m.Gauge(metricRateBlocked, rd.BlockedUntil.Sub(now).Seconds(), d)
	}
	if !rd.Known() {
		return
	}
	m.Gauge(metricRateLimit, float64(rd.Limit), d)
	m.Gauge(metricRateRemaining, float64(rd.Remaining), d)
	m.Gauge(metricRateReset, max(rd.ResetAt.Sub(now), 0).Seconds(), d)
	m.Gauge(metricRateAge, max(now.Sub(rd.ObservedAt), 0).Seconds(), d)
}

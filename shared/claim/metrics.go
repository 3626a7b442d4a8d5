package claim

import (
	"strconv"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// The claimer's metrics (EMF, dimension "function": "claimer" plus those
// declared; see shared/obs). Outcomes keep one metric each, as the alarms
// and the dashboard read them; every count carries the job's pool, and
// failures, give-ups and retries their error class.
var (
	metricClaimed       = obs.Metric{Name: "claimed", Dims: []string{obs.DimPool}}
	metricDone          = obs.Metric{Name: "done", Dims: []string{obs.DimPool}}
	metricFailed        = obs.Metric{Name: "failed", Dims: []string{obs.DimPool, obs.DimClass}}
	metricAbandoned     = obs.Metric{Name: "abandoned", Dims: []string{obs.DimPool, obs.DimClass}}
	metricRetried       = obs.Metric{Name: "retried", Dims: []string{obs.DimPool, obs.DimClass}}
	metricDeferred      = obs.Metric{Name: "deferred_rate_limit", Dims: []string{obs.DimPool}}
	metricDuplicates    = obs.Metric{Name: "duplicates", Dims: []string{obs.DimPool}}
	metricEarlyDropped  = obs.Metric{Name: "early_dropped", Dims: []string{obs.DimPool}}
	metricChained       = obs.Metric{Name: "chained"}
	metricSpareReleased = obs.Metric{Name: "spare_released", Dims: []string{obs.DimPool}}
	metricLeaseLost     = obs.Metric{Name: "lease_lost", Dims: []string{obs.DimPool}}
	metricInfraErrors   = obs.Metric{Name: "infra_errors", Dims: []string{obs.DimPool}}
	metricMalformed     = obs.Metric{Name: "malformed"}
	metricDeadline      = obs.Metric{Name: "deadline_released"}

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
)

// outcomeMetric counts the claims that ended in each state.
var outcomeMetric = map[job.State]obs.Metric{
	job.Claimed: metricClaimed, job.Failed: metricFailed, job.Abandoned: metricAbandoned, job.Done: metricDone,
}

// count adds one to metric for the job's pool.
func (f *flow) count(metric obs.Metric, dims ...obs.Dim) {
	f.c.cfg.Metrics.Count(metric, 1, append(dims, obs.Pool(f.rec.Pool))...)
}

// rateGauges writes the installation's reading as of now.
func (c *Claimer) rateGauges(inst int64, rd ratelimit.Reading, now time.Time) {
	if !rd.Known() {
		return
	}
	m, d := c.cfg.Metrics, obs.Installation(strconv.FormatInt(inst, 10))
	m.Gauge(metricRateLimit, float64(rd.Limit), d)
	m.Gauge(metricRateRemaining, float64(rd.Remaining), d)
	m.Gauge(metricRateReset, max(rd.ResetAt.Sub(now), 0).Seconds(), d)
	m.Gauge(metricRateAge, max(now.Sub(rd.ObservedAt), 0).Seconds(), d)
}

package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/failure"
)

// TestFarRateLimitIsCapped: a Retry-After or reset hours or centuries
// ahead (a skewed clock, a reset header in milliseconds read as seconds)
// waits at most MaxRateWait plus the snap jitter. Taken as told, it held a
// job for hours, or overflowed into a negative delay: an immediate retry,
// over and over.
func TestFarRateLimitIsCapped(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]failure.Failure{
		"reset in milliseconds":        {Class: failure.RateLimit, ResetAt: time.Unix(t0.UnixMilli(), 0)},
		"reset centuries ahead":        {Class: failure.RateLimit, ResetAt: time.Unix(9_999_999_999_999, 0)},
		"reset ten hours ahead":        {Class: failure.RateLimit, ResetAt: t0.Add(10 * time.Hour)},
		"retry-after near the int max": {Class: failure.RateLimit, RetryAfter: time.Duration(math.MaxInt64 - int64(time.Second))},
	} {
		d := backoff.Default().Next(backoff.Input{Now: t0, Failure: f, Rand: fixed(0.5, 0.5)})
		if d.GiveUp || d.Delay < backoff.MaxRateWait || d.Delay >= backoff.MaxRateWait+backoff.SnapJitterMax || !d.Due.Equal(t0.Add(d.Delay)) {
			t.Errorf("%s: delay %v due %v (give up %v), want MaxRateWait %v plus the snap jitter", name, d.Delay, d.Due, d.GiveUp, backoff.MaxRateWait)
		}
	}
	// Within the cap, the reset is waited for as told.
	d := backoff.Default().Next(backoff.Input{Now: t0, Failure: failure.Failure{Class: failure.RateLimit, ResetAt: t0.Add(40 * time.Minute)}, Rand: fixed(0.5, 0)})
	if d.Delay != 40*time.Minute+backoff.SnapJitterMin {
		t.Errorf("a reset 40 min ahead: delay %v, want 40m + %v", d.Delay, backoff.SnapJitterMin)
	}
}

// TestSplitOfAFarDueStaysInRange: whatever the due, DelaySeconds stays in
// SQS's 0 to 900 (the rounding overflowed for a due near the end of time).
func TestSplitOfAFarDueStaysInRange(t *testing.T) {
	t.Parallel()
	for _, due := range []time.Time{t0.Add(time.Duration(math.MaxInt64)), t0.Add(time.Duration(math.MaxInt64 - 1)), time.Unix(9_999_999_999_999, 0)} {
		secs, nb := backoff.Split(t0, due)
		if secs != 900 || !nb.After(t0) {
			t.Errorf("Split(now, %v): DelaySeconds %d, not_before %v; want 900 and a not_before ahead", due, secs, nb)
		}
	}
}

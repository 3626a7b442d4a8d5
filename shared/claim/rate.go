package claim

import (
	"context"
	"time"

	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// RateState is this process's rate-limit state: *ratelimit.Tracker, which
// the GitHub client's rate transport feeds with every response's reading.
type RateState interface {
	// Latest is the newest reading this process knows, without I/O.
	Latest(installationID int64) (ratelimit.Reading, bool)
	// Current merges the shared reading (one store read) into Latest.
	Current(ctx context.Context, installationID int64) (ratelimit.Reading, error)
	// Observe records a reading learnt outside the transport (from an error).
	Observe(installationID int64, r ratelimit.Reading)
	// Persist shares the latest reading when it changes what another
	// claimer would decide (ratelimit.PersistRule).
	Persist(ctx context.Context, installationID int64) (bool, error)
	// Rule is the persist rule every claimer shares by: it says which
	// readings the shared item can contradict (ratelimit.PersistRule.Low).
	Rule() ratelimit.PersistRule
}

var _ RateState = (*ratelimit.Tracker)(nil)

// reading returns the installation's newest known reading through the
// claimer's ratelimit.Gate: this process's own, merged with the shared
// rate#<installation> item only when the own reading is unknown, older than
// RateRefresh or Low, and then at most once per RateRefresh. A store error
// is not fatal: the claim goes ahead (a rate-limited GitHub answers 403 and
// the claim is retried, which beats not claiming).
func (c *Claimer) reading(ctx context.Context, inst int64, now time.Time) (ratelimit.Reading, error) {
	r, err := c.gate.Reading(ctx, inst, now)
	c.rateGauges(inst, r, now)
	return r, err
}

package claim

import (
	"context"
	"sync"
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
}

var _ RateState = (*ratelimit.Tracker)(nil)

// rateReads limits reads of the shared rate item to one per installation
// per refresh interval per process.
type rateReads struct {
	refresh time.Duration
	mu      sync.Mutex
	last    map[int64]time.Time
}

// due reports whether the shared reading of inst should be read at now,
// and if so notes the read.
func (r *rateReads) due(inst int64, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.last[inst]
	if ok && now.Sub(last) < r.refresh && !now.Before(last) {
		return false
	}
	r.last[inst] = now
	return true
}

// reading returns the installation's newest known reading: this process's
// own, merged with the shared one when that is due for a read. A store
// error is not fatal: the claim goes ahead (a rate-limited GitHub answers
// 403 and the claim is retried, which beats not claiming).
func (c *Claimer) reading(ctx context.Context, inst int64, now time.Time) (ratelimit.Reading, error) {
	r, err := c.readRate(ctx, inst, now)
	c.rateGauges(inst, r, now)
	return r, err
}

func (c *Claimer) readRate(ctx context.Context, inst int64, now time.Time) (ratelimit.Reading, error) {
	if c.reads.due(inst, now) {
		r, err := c.cfg.Rates.Current(ctx, inst)
		if err != nil && !r.Known() {
			if l, ok := c.cfg.Rates.Latest(inst); ok {
				return l, err
			}
		}
		return r, ignoreNoReading(err)
	}
	r, _ := c.cfg.Rates.Latest(inst)
	return r, nil
}

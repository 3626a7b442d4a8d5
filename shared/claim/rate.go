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
	// Rule is the persist rule every claimer shares by: it says which
	// readings the shared item can contradict (ratelimit.PersistRule.Low).
	Rule() ratelimit.PersistRule
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

// readRate reads the shared item only when this process's own reading
// could be contradicted by it, and then at most once per RateRefresh.
//
// Other claimers write the item on every drop of 10 % of the limit and on
// exhaustion (ratelimit.PersistRule). So an own reading observed less than
// RateRefresh ago with more than that threshold left (not Low) can be
// contradicted by a newer shared reading only if more than 10 % of the
// budget went in those seconds; then this process's own next GitHub
// response says so, its reading turns Low, and the next claim reads the
// item. A shared reading older than the own one loses to it anyway
// (newest wins). A claimer busy with an installation thus reads the item
// when it starts, then only after RateRefresh without a GitHub response or
// once the budget is Low, instead of every RateRefresh; an idle or cold one
// (a stale reading, or none) reads first, as before.
func (c *Claimer) readRate(ctx context.Context, inst int64, now time.Time) (ratelimit.Reading, error) {
	own, _ := c.cfg.Rates.Latest(inst)
	if c.settled(own, now) || !c.reads.due(inst, now) {
		return own, nil
	}
	r, err := c.cfg.Rates.Current(ctx, inst)
	if err != nil && !r.Known() {
		if l, ok := c.cfg.Rates.Latest(inst); ok {
			return l, err
		}
	}
	return r, ignoreNoReading(err)
}

// settled reports whether r, this process's reading, needs no shared read
// at now: observed less than RateRefresh from now and not Low (see
// readRate). Either side of now: now is read when a message starts, and a
// concurrent worker's response often lands after it; a reading further
// ahead comes from a skewed clock and is not trusted.
func (c *Claimer) settled(r ratelimit.Reading, now time.Time) bool {
	age := now.Sub(r.ObservedAt)
	return r.Known() && age.Abs() < c.cfg.RateRefresh && !c.cfg.Rates.Rule().Low(r)
}

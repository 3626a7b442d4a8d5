package claim

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// rates is the claimer's view of each installation's primary rate limit:
// the newest of what this process observed (Local, fed by the rate
// transport on every GitHub response) and what any claimer shared through
// the store (rate#<installation_id>), read at most once per refresh
// interval per installation.
type rates struct {
	store   Store
	local   RateSource // may be nil
	refresh time.Duration

	mu     sync.Mutex
	shared map[int64]sharedReading
}

type sharedReading struct {
	r      ratelimit.Reading
	ok     bool
	readAt time.Time
	saved  bool // true when this process last wrote an exhausted reading
}

func newRates(s Store, local RateSource, refresh time.Duration) *rates {
	return &rates{store: s, local: local, refresh: refresh, shared: map[int64]sharedReading{}}
}

// current returns the newest known reading of inst. The store is read when
// the cached shared reading is older than the refresh interval; a store
// error is not fatal (the claim goes ahead: a rate-limited GitHub answers
// 403 and the claim is retried, which beats not claiming at all).
func (r *rates) current(ctx context.Context, inst int64, now time.Time) (ratelimit.Reading, bool, error) {
	var best ratelimit.Reading
	found := false
	if r.local != nil {
		if l, ok := r.local.Latest(inst); ok {
			best, found = l, true
		}
	}
	r.mu.Lock()
	sh, cached := r.shared[inst]
	r.mu.Unlock()
	var loadErr error
	if !cached || now.Sub(sh.readAt) >= r.refresh || now.Before(sh.readAt) {
		got, err := r.store.LoadRate(ctx, inst)
		switch {
		case err == nil:
			sh = sharedReading{r: got, ok: true, readAt: now, saved: sh.saved}
		case errors.Is(err, ratelimit.ErrNoReading):
			sh = sharedReading{readAt: now, saved: sh.saved}
		default:
			loadErr = err
		}
		if loadErr == nil {
			r.mu.Lock()
			r.shared[inst] = sh
			r.mu.Unlock()
		}
	}
	if sh.ok && (!found || sh.r.ObservedAt.After(best.ObservedAt)) {
		best, found = sh.r, true
	}
	return best, found, loadErr
}

// observe shares a reading with every claimer when it matters: when the
// budget is exhausted (so nobody calls GitHub until the reset), and when it
// is back after this process shared an exhausted one (so nobody waits for
// a reset that already happened). Other readings stay local: sharing every
// response would cost a write per GitHub call.
func (r *rates) observe(ctx context.Context, inst int64, rd ratelimit.Reading) error {
	if rd.ObservedAt.IsZero() || rd.ResetAt.IsZero() {
		return nil
	}
	r.mu.Lock()
	sh := r.shared[inst]
	exhausted := rd.Remaining <= 0
	if !exhausted && !sh.saved {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	if err := r.store.SaveRate(ctx, inst, rd); err != nil {
		return err
	}
	r.mu.Lock()
	sh = r.shared[inst]
	sh.saved = exhausted
	if !sh.ok || !rd.ObservedAt.Before(sh.r.ObservedAt) {
		sh.r, sh.ok = rd, true
	}
	r.shared[inst] = sh
	r.mu.Unlock()
	return nil
}

package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"github.com/ghclaim/ghclaim/shared/clock"
	"math"
	"sync"
	"time"
)

// Store is the shared rate state, one rate#<installation_id> item per
// installation; shared/store implements it.
type Store interface {
	// LoadRate returns the shared reading, or an error wrapping
	// ErrNoReading when there is none.
	LoadRate(ctx context.Context, installationID int64) (Reading, error)
	// SaveRate shares r's primary fields unless the stored reading was
	// observed later (that refusal is not an error). It leaves the stored
	// block as it is.
	SaveRate(ctx context.Context, installationID int64, r Reading) error
	// SaveBlock shares a secondary limit's block until until, of length
	// length (Reading.BlockedFor), unless the stored block ends later (not
	// an error either). It leaves the primary fields as they are.
	SaveBlock(ctx context.Context, installationID int64, until time.Time, length time.Duration) error
}

// PersistRule decides when a reading is worth a write to the Store. See
// the package doc for the cost rule it implements.
type PersistRule struct {
	// DropFraction of the limit: remaining falling by at least this much
	// since the last write triggers a write.
	DropFraction float64
	// MaxInterval: a newer reading is written once the last write is this old.
	MaxInterval time.Duration
}

// DefaultPersistRule writes on a 10 % drop or after 30 s.
func DefaultPersistRule() PersistRule {
	return PersistRule{DropFraction: 0.1, MaxInterval: 30 * time.Second}
}

// ShouldPersist reports whether cur must be written, given the reading
// saved last (zero if none) and when it was written.
func (p PersistRule) ShouldPersist(saved Reading, savedAt time.Time, cur Reading, now time.Time) bool {
	switch {
	case !cur.Known():
		return false
	case !saved.Known():
		return true
	case !Supersedes(cur, saved):
		return false // nothing newer than what is shared
	case !cur.ResetAt.Equal(saved.ResetAt):
		return true // a new window: a new budget, or the end of an exhausted one
	case cur.Remaining <= 0 && saved.Remaining > 0:
		return true // everyone must stop
	case saved.Remaining-cur.Remaining >= p.dropThreshold(cur.Limit, saved.Limit):
		return true
	case now.Sub(savedAt) >= p.MaxInterval:
		return true
	}
	return false
}

// Low reports whether r has at most one drop threshold (DropFraction of
// its limit) left, exhausted included. Above it, the shared item cannot
// turn exhausted without a drop that every claimer writes first: a
// reader may trust a recent reading that is not Low (shared/claim).
func (p PersistRule) Low(r Reading) bool {
	return r.Remaining <= p.dropThreshold(r.Limit)
}

func (p PersistRule) dropThreshold(limits ...int) int {
	limit := 0
	for _, l := range limits {
		limit = max(limit, l)
	}
	return max(1, int(math.Ceil(p.DropFraction*float64(limit))))
}

// Tracker keeps the latest reading of each installation in memory (it is
// the Transport's Observer) and shares it through a Store by the
// PersistRule. It is safe for concurrent use.
type Tracker struct {
	store Store
	rule  PersistRule
	now   clock.Func

	mu sync.Mutex
	by map[int64]*entry
}

type entry struct {
	latest     Reading // newest observed here or loaded from the store
	saved      Reading // newest known to be in the store
	savedAt    time.Time
	savedBlock time.Time // the latest block known to be in the store
	passedAt   time.Time // the last answer of this process that was no rate limit
	saving     bool      // a Persist is writing; no other may start
}

var _ Observer = (*Tracker)(nil)

// NewTracker returns a Tracker sharing through store with rule; now is the
// clock of the write-age rule (time.Now in main).
func NewTracker(store Store, rule PersistRule, now clock.Func) *Tracker {
	now = clock.Or(now)
	return &Tracker{store: store, rule: rule, now: now, by: map[int64]*entry{}}
}

func (t *Tracker) entry(id int64) *entry {
	e := t.by[id]
	if e == nil {
		e = &entry{}
		t.by[id] = e
	}
	return e
}

// Observe records r as installationID's latest reading unless a newer one
// is already known (responses of concurrent requests finish in any order).
// Within one window (the same reset) the budget only falls, so the lower
// remaining is the newer count whichever answer arrived last (Supersedes):
// a slow success must not hide the exhaustion a faster 403 reported. It
// does no I/O.
func (t *Tracker) Observe(installationID int64, r Reading) {
	if !r.Known() && r.BlockedUntil.IsZero() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(installationID)
	e.passedAt = later(e.passedAt, r.PassedAt)
	e.latest = newest(e.latest, r, e.passedAt)
}

// newest merges reading r into known: the count that Supersedes the
// other, dated the later answer within a window (mergePrimary). The block
// is the later of the two, whichever reading wins.
func newest(known, r Reading, passed time.Time) Reading {
	until, length := mergeBlock(known, r, passed)
	out := mergePrimary(known, r)
	out.BlockedUntil, out.BlockedFor = until, length
	return out
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Rule returns the PersistRule the Tracker shares by.
func (t *Tracker) Rule() PersistRule { return t.rule }

// Latest returns the newest reading this process knows for installationID:
// false when it knows neither a primary reading nor a block.
func (t *Tracker) Latest(installationID int64) (Reading, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.by[installationID]; e != nil && (e.latest.Known() || !e.latest.BlockedUntil.IsZero()) {
		return e.latest, true
	}
	return Reading{}, false
}

// Current returns the newest of this process's reading and the shared one
// (one Store read). With a Store error it returns what this process knows
// and the error; with no reading anywhere, an error wrapping ErrNoReading.
func (t *Tracker) Current(ctx context.Context, installationID int64) (Reading, error) {
	shared, err := t.store.LoadRate(ctx, installationID)
	if err != nil && !errors.Is(err, ErrNoReading) {
		local, _ := t.Latest(installationID)
		return local, fmt.Errorf("load rate of installation %d: %w", installationID, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(installationID)
	own := e.latest
	until, length := own.BlockedUntil, own.BlockedFor
	if err == nil {
		e.passedAt = later(e.passedAt, shared.PassedAt)
		// A block is merged apart from the reading, whichever process
		// observed it (a repeat doubles). One read from the item is
		// shared already: no need to write it back.
		until, length = mergeBlock(own, shared, e.passedAt)
		e.savedBlock = later(e.savedBlock, shared.BlockedUntil)
	}
	if err == nil && shared.Known() {
		if Supersedes(shared, e.saved) {
			// Shared already: no need to write it back. Its age is the
			// item's, not the time of this read: a process that read an
			// exhausted item shortly before it went stale, then learnt the
			// same exhaustion from GitHub, must refresh it, or every
			// process trusting no stale item calls GitHub to learn it too.
			e.saved, e.savedAt = shared, shared.ObservedAt
		}
		// Merged as this process's own answers are: a slower success
		// of this process's, observed after an exhaustion another one
		// shared, does not hide it (and is not written over it).
		e.latest = mergePrimary(e.latest, shared)
	}
	e.latest.BlockedUntil, e.latest.BlockedFor = until, length
	if !e.latest.Known() && e.latest.BlockedUntil.IsZero() {
		return Reading{}, fmt.Errorf("rate of installation %d: %w", installationID, ErrNoReading)
	}
	return e.latest, nil
}

// Persist writes installationID's latest reading to the Store when the
// PersistRule says so, and a block this process observed that the Store
// does not hold yet, and reports whether it wrote. One write per
// installation is in flight at a time: a call that finds one returns false
// at once (the concurrent workers of a batch would otherwise all write the
// same first reading), and the writer, once done, decides afresh on the
// latest reading, so a reading those calls skipped (an exhaustion seen
// meanwhile) is still written.
func (t *Tracker) Persist(ctx context.Context, installationID int64) (bool, error) {
	t.mu.Lock()
	e := t.entry(installationID)
	if e.saving {
		t.mu.Unlock()
		return false, nil
	}
	e.saving = true
	t.mu.Unlock()
	// Deferred, so that a write that never returns normally (a panic, or
	// the runtime.Goexit of an invocation killed mid-call) still frees the
	// installation for the next Persist, and the lock is never left held
	// or released twice.
	defer func() {
		t.mu.Lock()
		e.saving = false
		t.mu.Unlock()
	}()
	wrote := false
	for {
		t.mu.Lock()
		now := t.now()
		cur := e.latest
		cur.PassedAt = e.passedAt
		block := cur.BlockedUntil.After(e.savedBlock) && cur.Blocked(now)
		write := t.rule.ShouldPersist(e.saved, e.savedAt, cur, now)
		t.mu.Unlock()
		if block {
			// First: it stops every caller, and it costs a write only
			// when GitHub imposed a block this process had not shared.
			// The stored block is read first and merged (a repeat of it
			// doubles, an overlap keeps its length), so a process that
			// never read it cannot lower the shared doubling level. A read
			// error leaves this process's own block to write.
			_, _ = t.Current(ctx, installationID)
			t.mu.Lock()
			cur = e.latest
			block = cur.BlockedUntil.After(e.savedBlock) && cur.Blocked(now)
			t.mu.Unlock()
			if !block {
				continue
			}
			if err := t.store.SaveBlock(ctx, installationID, cur.BlockedUntil, cur.BlockedFor); err != nil {
				return wrote, fmt.Errorf("save rate block of installation %d: %w", installationID, err)
			}
			wrote = true
			t.mu.Lock()
			e.savedBlock = later(e.savedBlock, cur.BlockedUntil)
			t.mu.Unlock()
			continue
		}
		if !write {
			return wrote, nil
		}
		if err := t.store.SaveRate(ctx, installationID, cur); err != nil {
			return wrote, fmt.Errorf("save rate of installation %d: %w", installationID, err)
		}
		wrote = true
		t.mu.Lock()
		// What was written, or refused for a superseding one the item
		// holds: either way no longer news (the rule asked for cur
		// because it Supersedes e.saved, so this always moves on, and
		// the loop ends unless a newer answer landed meanwhile).
		if Supersedes(cur, e.saved) {
			e.saved, e.savedAt = cur, now
		}
		t.mu.Unlock()
	}
}

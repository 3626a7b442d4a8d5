package ratelimit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultRefresh is how often a Gate reads the shared item at most, per
// installation, when its own reading does not settle the question.
const DefaultRefresh = 5 * time.Second

// Source is the rate state a Gate reads through; *Tracker implements it.
type Source interface {
	// Latest is the newest reading this process knows, without I/O.
	Latest(installationID int64) (Reading, bool)
	// Current merges the shared reading (one Store read) into Latest.
	Current(ctx context.Context, installationID int64) (Reading, error)
	// Rule says which own readings the shared item can contradict (Low).
	Rule() PersistRule
}

var _ Source = (*Tracker)(nil)

// Gate answers "what is this installation's budget now?" before a process
// calls GitHub for it (the claimer, the reclaimer, the janitor), reading
// the shared rate#<installation> item only when the process's own reading
// could be contradicted by it, and then at most once per refresh interval
// per installation.
//
// Every process that calls GitHub for an installation writes the item on
// each drop of a tenth of the limit and on exhaustion (PersistRule), so an
// own reading observed less than the refresh interval ago with more than
// that threshold left (not Low) can be contradicted by a newer shared one
// only if more than a tenth of the budget went within those seconds; then
// the process's own next GitHub response says so, its reading turns Low,
// and the next question reads the item. A shared reading older than the
// own one loses to it anyway (newest wins). A process busy with an
// installation so reads the item when it starts, then only after the
// interval without a response or once the budget is Low; a cold or idle
// one (no reading, or a stale one) reads first. It is safe for concurrent
// use.
type Gate struct {
	src     Source
	refresh time.Duration

	mu   sync.Mutex
	last map[int64]time.Time // the last shared read, per installation
	// reading is closed when the shared read in flight for an
	// installation ends: a question asked meanwhile waits for it.
	reading map[int64]chan struct{}
}

// NewGate returns a Gate over src that reads the shared item at most once
// per refresh (DefaultRefresh when not positive) per installation.
func NewGate(src Source, refresh time.Duration) *Gate {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	return &Gate{src: src, refresh: refresh, last: map[int64]time.Time{}, reading: map[int64]chan struct{}{}}
}

// Reading returns the installation's newest known reading at now: this
// process's own, merged with the shared one when that is due for a read.
// No reading anywhere is a zero Reading and no error. A Store error comes
// with this process's own reading, which the caller goes on with (GitHub
// answers for itself when the budget is gone); only the question that made
// the read gets it, those that waited for it get the own reading alone.
//
// A question asked while another one's shared read is in flight waits for
// that read and answers with what it merged: answered with the own reading
// instead (none, in a cold process), the batch's other workers of a fresh
// claimer called GitHub inside a secondary limit's block that read was
// about to show them, one refused call each (a burst test found it).
func (g *Gate) Reading(ctx context.Context, installationID int64, now time.Time) (Reading, error) {
	own, _ := g.src.Latest(installationID)
	if g.settled(own, now) {
		return own, nil
	}
	done, wait, due := g.due(installationID, now)
	if wait != nil {
		select {
		case <-wait:
			r, _ := g.src.Latest(installationID)
			return r, nil
		case <-ctx.Done():
			return own, nil // the caller's own next step sees ctx end
		}
	}
	if !due {
		// own may predate a read that ended since (between the two
		// looks): answer with what it merged.
		r, _ := g.src.Latest(installationID)
		return r, nil
	}
	defer done()
	r, err := g.src.Current(ctx, installationID)
	if err != nil && !r.Known() {
		if l, ok := g.src.Latest(installationID); ok {
			r = l // a concurrent response landed meanwhile
		}
	}
	if errors.Is(err, ErrNoReading) {
		err = nil
	}
	return r, err
}

// settled reports whether r, this process's reading, needs no shared read
// at now: observed less than the refresh interval from now and not Low.
// Either side of now: now is read when a decision starts, and a concurrent
// worker's response often lands after it; a reading further ahead comes
// from a skewed clock and is not trusted.
func (g *Gate) settled(r Reading, now time.Time) bool {
	age := now.Sub(r.ObservedAt)
	return r.Known() && age.Abs() < g.refresh && !g.src.Rule().Low(r)
}

// due reports whether the shared reading of installationID should be read
// at now, and if so notes the read and returns done, which the reader
// calls when its read ends. While another read is in flight it returns
// that read's channel to wait on instead.
func (g *Gate) due(installationID int64, now time.Time) (done func(), wait <-chan struct{}, due bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ch := g.reading[installationID]; ch != nil {
		return nil, ch, false
	}
	last, ok := g.last[installationID]
	if ok && now.Sub(last) < g.refresh && !now.Before(last) {
		return nil, nil, false
	}
	g.last[installationID] = now
	ch := make(chan struct{})
	g.reading[installationID] = ch
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.reading, installationID)
		close(ch)
	}, nil, true
}

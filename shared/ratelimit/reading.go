// Package ratelimit owns what ghclaim knows about an installation's GitHub
// API budget: the reading taken from X-RateLimit-* headers, the rule for
// when a claimer must not call GitHub at all, the HTTP transport that takes
// a reading from every response, and the rule for when a reading is worth
// sharing with other claimers through the rate#<installation_id> item.
//
// It must never log or keep a header other than X-RateLimit-{Limit,
// Remaining,Reset,Resource} and a 403's or 429's Retry-After (an
// Authorization header passes through the transport untouched and
// unseen), never change a request or a response, and never import an AWS
// package: persistence goes through the Store port that shared/store
// implements.
//
// Decisions written down here:
//   - Exhausted (remaining 0, observed less than Freshness ago, reset still
//     ahead) is DESIGN.md's "do not call GitHub" rule. A reading older than
//     five minutes is not trusted: another process may have seen the reset.
//   - A response counts only when it carries all three of X-RateLimit-Limit,
//     -Remaining and -Reset, parsed; anything else (a 5xx from a proxy, a
//     cached answer) never clobbers the last reading. Nor does a 401,
//     whatever it carries: GitHub could not tie the credential to the App
//     or an installation, and has answered "Bad credentials" with the
//     unauthenticated budget of the caller's address (limit 60, shared by
//     whoever else calls from it: https://github.com/maxlath/backup-github-repo/issues/10,
//     https://github.com/renovatebot/renovate/issues/2286). Taken as the
//     installation's, one such 401 at remaining 0 halted the installation
//     for up to an hour. Readings of a bucket
//     other than core or actions_runner_registration (X-RateLimit-Resource
//     search, graphql, ...) are ignored: the claimer never spends them, and
//     mixing buckets would flap the shared state.
//   - Wrap the installation client's transport, outermost: the
//     installation-token exchange (shared/ghapp) is paid from the app's
//     budget, not the installation's, and must not be read as one.
//   - Cost rule for sharing (Tracker.Persist, PersistRule): a DynamoDB write
//     only when it changes what another claimer would decide or when the
//     shared item is getting old. Write when remaining reaches 0 (everyone
//     must stop), when the reset window changes (a new budget, or recovery
//     from an exhausted one), when remaining dropped by at least 10 % of the
//     limit since the last write, or when the last write is 30 s old. With
//     a 5000-request budget that is at most one write per 500 calls or per
//     30 s per process and installation, instead of one per call. Newer
//     wins, by Supersedes: SaveRate must refuse to overwrite a later
//     window, or a lower count of the same window counted less than
//     Crossing before (the budget only falls within a window: a slower
//     answer's higher count is older, unless the limit rose).
//   - One write in flight per installation and process: a Persist that
//     finds another writing returns false without writing (a batch's
//     workers all hold the same first reading; one PutItem shares it), and
//     the writer, when done, decides again on the latest reading, so what
//     the turned-away calls would have shared (an exhaustion) still is.
//   - Low (PersistRule.Low): at most one drop threshold left. Since every
//     process that calls GitHub writes on each such drop and on
//     exhaustion, a recent reading above it tells a reader the shared item
//     has nothing more urgent to say.
//   - One read path for every process that asks "may I call GitHub for
//     this installation?" (Gate: the claimer, the reclaimer, the janitor):
//     the shared item is read only when the own reading is unknown, older
//     than the refresh interval (DefaultRefresh, 5 s) or Low, and then at
//     most once per interval per installation and process. And one write
//     path: each of them shares what its own calls observed through
//     Tracker.Persist after them, so an exhaustion the reclaimer or the
//     janitor meets stops the claimers too.
//   - A secondary rate limit (a 403 or 429 of GitHub's that is not the
//     primary budget at 0) binds the whole installation, not the one call:
//     GitHub asks every caller to wait for its Retry-After, or at least a
//     minute when it names none, and may ban an integration that goes on
//     calling. So it is recorded as the reading's BlockedUntil, apart from
//     the primary fields (a 429 carries no budget to read), and shared like
//     an exhaustion: a later block is always written (SaveBlock), the item
//     keeps the latest block whatever primary reading lands after it, and
//     every process that asks the Gate stops until it passes (Halted):
//     at once when the Gate reads the item (a cold, idle or Low process),
//     or, for a process busy with the installation (whose own fresh
//     reading spares it the read), at its own next call, which GitHub
//     refuses too. Without it, a backlog after an outage would spend one
//     refused call per queued job, in every claimer. A block is capped at
//     MaxBlock when recorded, and one further ahead than that and NowLag
//     is a skewed clock's and ignored.
//   - A secondary limit met again after the last block ended, with no call
//     of this process going through in between and within RepeatWindow,
//     doubles that block's length (at least GitHub's new wait, at most
//     MaxBlock): "if your request continues to fail due to a secondary
//     rate limit, wait for an exponentially increasing amount of time
//     between retries". A call that went through since (Reading.PassedAt)
//     means the limit lifted: the next one starts from GitHub's wait
//     again. The length travels with the block (BlockedFor), so every
//     process doubles from the same base.
package ratelimit

import (
	"errors"
	"time"
)

// Reading is the last observed primary rate limit of one installation.
type Reading struct {
	Limit     int
	Remaining int
	ResetAt   time.Time
	// ObservedAt is the latest answer this reading stands for: its
	// freshness (Exhausted, the Gate's refresh). Within one window a
	// merged reading keeps the lowest count, dated the latest answer.
	ObservedAt time.Time
	// CountedAt is when the answer that carried Remaining was observed
	// (zero: ObservedAt): what Supersedes compares, so that re-dating a
	// kept count for freshness never makes it newer than a count observed
	// after it.
	CountedAt time.Time
	// BlockedUntil is when a secondary rate limit of the installation
	// ends (zero: none known). It is independent of the fields above,
	// which only a response's X-RateLimit-* headers set: a reading may
	// carry a block and no primary reading (Known false).
	BlockedUntil time.Time
	// BlockedFor is the block's length from when GitHub imposed it
	// (BlockedUntil − BlockedFor): the base a repeat doubles.
	BlockedFor time.Duration
	// PassedAt is the last time a call of the installation went through
	// (its answer was no rate limit): set by the transport on such an
	// answer, kept by the Tracker, and shared with the primary fields, so
	// that no process takes a limit met after it for a repeat.
	PassedAt time.Time
}

// Freshness is how long an exhausted reading is trusted.
const Freshness = 5 * time.Minute

// MinBlock is the wait a secondary rate limit imposes when GitHub names
// none ("wait for at least one minute"); MaxBlock caps a recorded block,
// and a block further ahead than it and NowLag is not trusted.
const (
	MinBlock = time.Minute
	MaxBlock = time.Hour
	// NowLag is how far the now a caller asks with may trail the clock a
	// block was timed with: a reclaimer pass reads its now once and the
	// claimer before its lease, so a cap-length block met during the pass
	// or the claim ends a little more than MaxBlock after that now, and
	// must still hold (a repeated limit doubles to exactly the cap).
	NowLag = 5 * time.Minute
	// RepeatWindow: a secondary limit met this soon after the last block
	// ended is a repeat, and waits twice as long.
	RepeatWindow = 10 * time.Minute
)

// Block is the reading a secondary limit met at now gives: blocked for
// GitHub's Retry-After, or MinBlock without one, at most MaxBlock (before
// any doubling for a repeat, which the Tracker applies).
func Block(now time.Time, retryAfter time.Duration) Reading {
	until := BlockUntil(now, retryAfter)
	return Reading{BlockedUntil: until, BlockedFor: until.Sub(now)}
}

// BlockUntil is the end of the block a secondary rate limit met at now
// imposes: GitHub's Retry-After, or MinBlock without one, at most MaxBlock.
func BlockUntil(now time.Time, retryAfter time.Duration) time.Time {
	if retryAfter <= 0 {
		retryAfter = MinBlock
	}
	return now.Add(min(retryAfter, MaxBlock))
}

// ErrNoReading is wrapped by Store.LoadRate when no reading was ever shared
// for the installation.
var ErrNoReading = errors.New("no rate reading")

// Known reports whether r was ever observed (the zero Reading was not).
func (r Reading) Known() bool { return !r.ObservedAt.IsZero() }

// MaxWindow is GitHub's primary rate-limit window: a reset further ahead
// than it and NowLag comes from a skewed clock or a garbled header.
const MaxWindow = time.Hour

// Exhausted reports whether a claimer must not call GitHub at now: the
// budget was at 0 less than Freshness ago and its reset is still ahead, by
// no more than MaxWindow and NowLag (a reset further ahead is not trusted:
// held to it, every job of the installation would wait hours; GitHub's
// next answer tells again, and the retry policy caps its wait).
func (r Reading) Exhausted(now time.Time) bool {
	return r.Known() && r.Remaining <= 0 &&
		now.Sub(r.ObservedAt) < Freshness && r.ResetAt.After(now) && r.ResetAt.Sub(now) <= MaxWindow+NowLag
}

// Blocked reports whether a secondary rate limit forbids calling GitHub at
// now: BlockedUntil is ahead, by no more than MaxBlock and NowLag (further
// ahead, it comes from a skewed clock).
func (r Reading) Blocked(now time.Time) bool {
	return r.BlockedUntil.After(now) && r.BlockedUntil.Sub(now) <= MaxBlock+NowLag
}

// Halted reports whether no GitHub call may be made at now: the budget is
// exhausted or a secondary limit blocks the installation.
func (r Reading) Halted(now time.Time) bool { return r.Exhausted(now) || r.Blocked(now) }

// ResumeAt is when calls may start again, for a Halted reading: the later
// of the exhausted budget's reset and the block's end. It is the zero time
// when r is not Halted at now.
func (r Reading) ResumeAt(now time.Time) time.Time {
	var at time.Time
	if r.Exhausted(now) {
		at = r.ResetAt
	}
	if r.Blocked(now) && r.BlockedUntil.After(at) {
		at = r.BlockedUntil
	}
	return at
}

// Equal reports whether r and o are the same reading, comparing times as
// instants (== on Reading also compares time zones).
func (r Reading) Equal(o Reading) bool {
	return r.Limit == o.Limit && r.Remaining == o.Remaining &&
		r.ResetAt.Equal(o.ResetAt) && r.ObservedAt.Equal(o.ObservedAt) && r.Counted().Equal(o.Counted()) &&
		r.BlockedUntil.Equal(o.BlockedUntil) && r.BlockedFor == o.BlockedFor
}

// Counted is when r's count was observed: CountedAt, or ObservedAt when
// that is not set (a reading straight from an answer).
func (r Reading) Counted() time.Time {
	if r.CountedAt.IsZero() {
		return r.ObservedAt
	}
	return r.CountedAt
}

// Crossing is how far apart two answers of one window may have been
// counted by GitHub in the opposite order to their observation: a
// request's timeout and the clock lag between processes. Within one
// window the budget only falls, so of two counts the lower is the newer,
// unless the higher one was observed more than Crossing after it: then
// the limit rose.
const Crossing = 30 * time.Second

// Supersedes reports whether r's primary fields (the count) must replace
// known's, wherever two readings meet (the tracker's merges, the shared
// item's condition, the write rule): of two windows (resets), the one
// observed later; within one window, the lower count, unless the higher
// one was counted more than Crossing after it; of two equal counts, the
// one observed later (a refresh). A slow success GitHub counted before an
// exhaustion, answered after it, so never replaces it: every process that
// read the item would make a refused call.
func Supersedes(r, known Reading) bool {
	// In whole milliseconds, as the shared item stores its times: a
	// reading the tracker takes for newer must be one the item takes too.
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	crossing := Crossing.Milliseconds()
	switch {
	case !r.Known():
		return false
	case !known.Known():
		return true
	case !r.ResetAt.Equal(known.ResetAt):
		return ms(r.ObservedAt) > ms(known.ObservedAt)
	case r.Remaining < known.Remaining:
		return ms(known.Counted()) <= ms(r.Counted())+crossing
	case r.Remaining > known.Remaining:
		return ms(r.Counted()) > ms(known.Counted())+crossing
	}
	return ms(r.ObservedAt) > ms(known.ObservedAt)
}

// Admits reports whether a Store takes r over stored: r Supersedes it, or
// the two tie at the item's millisecond precision (the same instant, and
// another window or the same count), which the item's condition lets
// through as a rewrite. Both stores decide by it.
func Admits(r, stored Reading) bool {
	if Supersedes(r, stored) {
		return true
	}
	return r.Known() && stored.Known() && r.ObservedAt.UnixMilli() == stored.ObservedAt.UnixMilli() &&
		(!r.ResetAt.Equal(stored.ResetAt) || r.Remaining == stored.Remaining)
}

// mergePrimary is the primary fields once known and r are both known:
// the superseding count, dated (ObservedAt) the later of the two answers
// when they share a window, so that freshness follows the latest answer
// while CountedAt keeps the count's own time. A reading without primary
// fields (a block alone) never replaces them.
func mergePrimary(known, r Reading) Reading {
	win, lose := known, r
	if Supersedes(r, known) {
		win, lose = r, known
	}
	if !lose.Known() {
		return win
	}
	win.CountedAt = win.Counted()
	if win.ResetAt.Equal(lose.ResetAt) && lose.ObservedAt.After(win.ObservedAt) {
		win.ObservedAt = lose.ObservedAt
	}
	return win
}

// blockMet is when GitHub imposed r's block.
func blockMet(r Reading) time.Time { return r.BlockedUntil.Add(-r.BlockedFor) }

// mergeBlock is the block that holds once two are known, whichever
// process saw which and in whatever order: of two blocks that overlap,
// the later end holds with the longer length (the doubling level: a
// refusal of a call made during a block does not lower it); a block
// imposed after the other ended, within RepeatWindow and with no call
// gone through since it ended (passed, the last that did), is a repeat
// and doubles the other's length (at least its own); otherwise the later
// block holds alone.
func mergeBlock(known, r Reading, passed time.Time) (time.Time, time.Duration) {
	switch {
	case r.BlockedUntil.IsZero():
		return known.BlockedUntil, known.BlockedFor
	case known.BlockedUntil.IsZero():
		return r.BlockedUntil, r.BlockedFor
	}
	first, next := known, r
	if blockMet(next).Before(blockMet(first)) {
		first, next = next, first
	}
	met := blockMet(next)
	switch {
	case met.Before(first.BlockedUntil): // they overlap
		return later(first.BlockedUntil, next.BlockedUntil), max(first.BlockedFor, next.BlockedFor)
	case next.BlockedFor > 0 && met.Sub(first.BlockedUntil) <= RepeatWindow && !passed.After(first.BlockedUntil):
		w := min(max(next.BlockedFor, 2*first.BlockedFor), MaxBlock)
		return met.Add(w), w
	}
	return next.BlockedUntil, next.BlockedFor
}

// Package backoff owns the retry policy of a failed claim: the delay ladder
// with its jitter, the rate-limit snaps, the maximum age after which a job
// is abandoned, and the split of a long delay into SQS's 900 s DelaySeconds
// plus a not_before for the remainder.
//
// It is a pure policy: Next takes values (now, the job's ladder position,
// its first failure time, the classified failure, a random source) and
// returns a Decision. It must never read the clock, draw global randomness,
// do I/O or keep state; the caller stores Decision.Rung and
// Decision.FirstFailureAt on the job record and feeds them back into the
// next call. A re-send that drops them pins the ladder at its first rung
// forever and never gives up.
//
// Decisions written down here:
//   - Input.Rung is the number of retryable failures the job has already
//     had (0 at its first). Every retryable failure, rate limits included,
//     moves it one rung up; non-failures (a chained not_before re-send, a
//     duplicate message) do not call Next at all.
//   - Next is only for retryable failures. Whether a failure is retryable is
//     the caller's decision (failure.Class.Retryable): a non_retryable
//     failure passed in anyway gets the ladder, because retrying is safer
//     than losing the job.
//   - GiveUp is decided before any delay: once Now − FirstFailureAt exceeds
//     MaxAge the job is abandoned. A delay is never cut short to fit the
//     age; the next failure after it gives up.
//   - Rate limits follow GitHub's order: Retry-After, else the reset, else
//     (a secondary limit, or an AWS throttle, neither of which says when)
//     max(1 m, the jittered ladder rung). A snapped wait (Retry-After, the
//     reset, or the 1 m floor when it wins) gets + [5 s, 25 s) of jitter so
//     claimers sharing an installation do not stampede at the same second.
//     A reset already in the past gets the snap jitter alone.
//   - Randomness: each Next draws exactly one number for the ladder jitter
//     (even when unused) and one for the snap jitter, in that order, so a
//     fixed source gives exact, reproducible delays.
package backoff

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/random"
)

// Defaults from DESIGN.md's retry policy.
const (
	DefaultLadder = "30s,1m,2m,5m,10m"
	DefaultJitter = 0.2
	DefaultMaxAge = 90 * time.Minute

	// SecondaryMinimum is the least wait after a rate limit that says
	// neither Retry-After nor a reset (GitHub: "at least one minute").
	SecondaryMinimum = time.Minute
	// SnapJitterMin and SnapJitterMax bound the jitter added to a snapped
	// wait: [SnapJitterMin, SnapJitterMax).
	SnapJitterMin = 5 * time.Second
	SnapJitterMax = 25 * time.Second

	// MaxSQSDelay is SQS's cap on DelaySeconds.
	MaxSQSDelay = 900 * time.Second

	// MaxRateWait caps the wait a rate limit's Retry-After or reset asks
	// for: GitHub's primary window is an hour, and its secondary limits
	// ask minutes. A reset further ahead is a skewed clock or a garbled
	// header (seconds read from milliseconds): waited for as told, it
	// would hold a job for hours, or overflow into a negative delay and
	// an immediate retry.
	MaxRateWait = time.Hour
)

// Policy is the retry policy. Build it from Default and override fields;
// call Validate at start-up. Its zero value is not valid.
type Policy struct {
	// Ladder holds the delays of successive retryable failures; the last
	// rung repeats forever.
	Ladder []time.Duration
	// Jitter is the fraction each ladder delay varies by, uniformly within
	// ±Jitter (0.2: a 1 m rung waits 48 s to 72 s).
	Jitter float64
	// MaxAge is how long after its first failure a job keeps being retried.
	MaxAge time.Duration
}

// Default returns DESIGN.md's policy: 30s, 1m, 2m, 5m, 10m, then 10m
// forever, ±20 %, abandoned 90 m after the first failure.
func Default() Policy {
	l, _ := ParseLadder(DefaultLadder)
	return Policy{Ladder: l, Jitter: DefaultJitter, MaxAge: DefaultMaxAge}
}

// ErrInvalid is wrapped by every Validate and ParseLadder error.
var ErrInvalid = errors.New("invalid backoff policy")

// ParseLadder parses a comma-separated list of Go durations, e.g.
// "30s,1m,2m,5m,10m". Errors name the bad element and its position.
func ParseLadder(s string) ([]time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty ladder", ErrInvalid)
	}
	parts := strings.Split(s, ",")
	out := make([]time.Duration, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		d, err := time.ParseDuration(p)
		if err != nil {
			return nil, fmt.Errorf("%w: ladder element %d %q: not a duration", ErrInvalid, i+1, p)
		}
		if d <= 0 {
			return nil, fmt.Errorf("%w: ladder element %d %q: must be positive", ErrInvalid, i+1, p)
		}
		out = append(out, d)
	}
	return out, nil
}

// Validate reports the first problem with p.
func (p Policy) Validate() error {
	if len(p.Ladder) == 0 {
		return fmt.Errorf("%w: empty ladder", ErrInvalid)
	}
	for i, d := range p.Ladder {
		if d <= 0 {
			return fmt.Errorf("%w: ladder element %d %v: must be positive", ErrInvalid, i+1, d)
		}
	}
	if math.IsNaN(p.Jitter) || p.Jitter < 0 || p.Jitter >= 1 {
		return fmt.Errorf("%w: jitter %v: must be in [0, 1)", ErrInvalid, p.Jitter)
	}
	if p.MaxAge <= 0 {
		return fmt.Errorf("%w: max age %v: must be positive", ErrInvalid, p.MaxAge)
	}
	return nil
}

// Input is what Next decides from.
type Input struct {
	// Now is the moment of the failure, read once by the caller.
	Now time.Time
	// FirstFailureAt is the job's first retryable failure; zero when this
	// failure is the first.
	FirstFailureAt time.Time
	// Rung is the job's ladder position: the number of retryable failures
	// it has already had (0 at the first). Stored on the job record.
	Rung int
	// Failure is the classified error of this attempt.
	Failure failure.Failure
	// Rand is the random source. Nil means no jitter at all (the midpoint
	// of every range), which only tests of other packages should want.
	Rand random.Source
}

// Basis says which rule produced a delay, for the one log line per decision.
type Basis string

// The rules Next applies.
const (
	BasisLadder     Basis = "ladder"
	BasisRetryAfter Basis = "retry_after"
	BasisReset      Basis = "reset"
	BasisSecondary  Basis = "secondary_minimum"
	BasisGiveUp     Basis = "max_age"
)

// Decision is what to do after a retryable failure.
type Decision struct {
	// GiveUp is true when MaxAge has passed since FirstFailureAt: the job
	// is abandoned and Delay/Due are zero.
	GiveUp bool
	// Delay is how long to wait from Now; Due = Now + Delay.
	Delay time.Duration
	Due   time.Time
	// FirstFailureAt is Now on the first failure, otherwise the input's.
	FirstFailureAt time.Time
	// Rung is the ladder position to store for the next failure.
	Rung int
	// Basis names the rule that produced Delay.
	Basis Basis
}

// Next decides the wait after a retryable failure. See the package doc.
func (p Policy) Next(in Input) Decision {
	first := in.FirstFailureAt
	if first.IsZero() {
		first = in.Now
	}
	rung := max(in.Rung, 0)
	if in.Now.Sub(first) > p.MaxAge {
		return Decision{GiveUp: true, FirstFailureAt: first, Rung: rung, Basis: BasisGiveUp}
	}
	ladderR, snapR := 0.5, 0.5
	if in.Rand != nil {
		ladderR = in.Rand.Float64()
		snapR = in.Rand.Float64()
	}
	ladder := p.rungDelay(rung, ladderR)
	snap := SnapJitter(snapR)

	delay, basis := ladder, BasisLadder
	if in.Failure.Class == failure.RateLimit {
		f := in.Failure
		switch {
		case f.RetryAfter > 0:
			delay, basis = min(f.RetryAfter, MaxRateWait)+snap, BasisRetryAfter
		case !f.ResetAt.IsZero():
			delay, basis = min(max(f.ResetAt.Sub(in.Now), 0), MaxRateWait)+snap, BasisReset
		case ladder < SecondaryMinimum:
			delay, basis = SecondaryMinimum+snap, BasisSecondary
		}
	}
	return Decision{
		Delay:          delay,
		Due:            in.Now.Add(delay),
		FirstFailureAt: first,
		Rung:           rung + 1,
		Basis:          basis,
	}
}

// SnapJitter is the jitter added to a wait snapped to a rate limit's end,
// for r uniform in [0, 1): in [SnapJitterMin, SnapJitterMax), so that the
// processes waiting on one installation do not all call at its reset second.
func SnapJitter(r float64) time.Duration {
	return SnapJitterMin + time.Duration(r*float64(SnapJitterMax-SnapJitterMin))
}

// rungDelay is Ladder[min(rung, last)] scaled by 1 + Jitter·(2r − 1).
func (p Policy) rungDelay(rung int, r float64) time.Duration {
	if len(p.Ladder) == 0 {
		return 0
	}
	base := p.Ladder[min(rung, len(p.Ladder)-1)]
	return time.Duration(float64(base) * (1 + p.Jitter*(2*r-1)))
}

// Split turns the wait until due into an SQS DelaySeconds and, when the
// wait is longer than SQS's 900 s cap, a not_before for the claimer to
// honour (it re-sends with the remainder, calling Split again).
// Delays round up to whole seconds so a job is never early; notBefore is
// due rounded up to the millisecond, and zero when no chaining is needed.
// A due time in the past gives (0, zero).
func Split(now, due time.Time) (delaySeconds int32, notBefore time.Time) {
	wait := due.Sub(now)
	if wait <= 0 {
		return 0, time.Time{}
	}
	if wait <= MaxSQSDelay { // rounded up below: no overflow for a wait this short
		return int32((wait + time.Second - 1) / time.Second), time.Time{}
	}
	// not_before is due itself, not now + the rounded wait: each hop rounds
	// its own remainder up again, so rounding here would add up to a second
	// per hop. It travels as epoch milliseconds: round up, never down.
	notBefore = due
	if ms := notBefore.Truncate(time.Millisecond); ms.Before(notBefore) {
		notBefore = ms.Add(time.Millisecond)
	}
	return int32(MaxSQSDelay / time.Second), notBefore
}

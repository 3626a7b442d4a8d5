package ratelimit

import (
	"github.com/ghclaim/ghclaim/shared/clock"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers a reading is taken from. Nothing else is ever read.
const (
	headerLimit     = "X-RateLimit-Limit"
	headerRemaining = "X-RateLimit-Remaining"
	headerReset     = "X-RateLimit-Reset"
	headerResource  = "X-RateLimit-Resource"
	// Retry-After is read only on a 403 or 429: a secondary limit's wait.
	headerRetryAfter = "Retry-After"
)

// ParseHeaders takes a reading from a response's headers, observed at now.
// ok is false when a header is missing or malformed, or when the reading is
// of a bucket the claimer does not spend (see the package doc).
func ParseHeaders(h http.Header, now time.Time) (r Reading, ok bool) {
	if !spent(h) {
		return Reading{}, false
	}
	limit, err1 := strconv.Atoi(strings.TrimSpace(h.Get(headerLimit)))
	remaining, err2 := strconv.Atoi(strings.TrimSpace(h.Get(headerRemaining)))
	reset, err3 := strconv.ParseInt(strings.TrimSpace(h.Get(headerReset)), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || limit < 0 || remaining < 0 || reset <= 0 {
		return Reading{}, false
	}
	return Reading{Limit: limit, Remaining: remaining, ResetAt: time.Unix(reset, 0).UTC(), ObservedAt: now}, true
}

// Observer receives every reading a Transport takes. It is called from the
// goroutine making the request, possibly from many at once, and must not
// block: Tracker.Observe only updates memory.
type Observer interface {
	Observe(installationID int64, r Reading)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(installationID int64, r Reading)

// Observe calls f.
func (f ObserverFunc) Observe(installationID int64, r Reading) { f(installationID, r) }

// Transport is an http.RoundTripper that takes a reading from every
// response of one installation's GitHub client, errors included, and hands
// it to an Observer. It changes neither request nor response.
type Transport struct {
	base           http.RoundTripper
	installationID int64
	observer       Observer
	now            clock.Func
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport wraps base (a clone of http.DefaultTransport when nil) for the client
// of installationID. now is the clock for ObservedAt; main passes
// time.Now, tests a fixed clock.
func NewTransport(base http.RoundTripper, installationID int64, observer Observer, now clock.Func) *Transport {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	now = clock.Or(now)
	return &Transport{base: base, installationID: installationID, observer: observer, now: now}
}

// RoundTrip sends req through the base transport and observes the answer.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp == nil || t.observer == nil {
		return resp, err
	}
	// A cached answer (httpcache) repeats an old reading: skip it, as
	// go-github does.
	if resp.Header.Get("X-From-Cache") != "" {
		return resp, err
	}
	// A 401 is GitHub's answer to a credential it could not resolve: its
	// rate headers, when it sends any, are the unauthenticated budget of
	// the caller's address (limit 60), not this client's budget (see the
	// package doc).
	if resp.StatusCode == http.StatusUnauthorized {
		return resp, err
	}
	now := t.now()
	r, ok := ParseHeaders(resp.Header, now)
	if until, blocked := blockOf(resp, now); blocked {
		r.BlockedUntil, r.BlockedFor, ok = until, until.Sub(now), true
	} else if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		r.PassedAt = now // the call went through the rate limits
	}
	if ok {
		t.observer.Observe(t.installationID, r)
	}
	return resp, err
}

// spent reports whether h's answer is of a bucket the claimer spends.
func spent(h http.Header) bool {
	switch strings.ToLower(h.Get(headerResource)) {
	case "", "core", "actions_runner_registration":
		return true
	}
	return false
}

// blockOf reads a secondary rate limit's block from a response's status
// and Retry-After alone (the body is not the transport's to read): a 429,
// or a 403 with Retry-After, that is not the primary budget at 0. A 429
// without Retry-After blocks for MinBlock; a 403 without it may be a
// permission error, and is left to the caller, which reads GitHub's
// message (failure.Failure.Secondary).
func blockOf(resp *http.Response, now time.Time) (time.Time, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusForbidden || !spent(resp.Header) {
		return time.Time{}, false
	}
	v := strings.TrimSpace(resp.Header.Get(headerRetryAfter))
	if v == "" {
		if resp.StatusCode == http.StatusForbidden || strings.TrimSpace(resp.Header.Get(headerRemaining)) == "0" {
			return time.Time{}, false
		}
		return BlockUntil(now, 0), true
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs > 0 {
		// Capped before the multiplication, which would wrap for a
		// garbled value (BlockUntil caps at MaxBlock).
		return BlockUntil(now, time.Duration(min(secs, int64(MaxBlock/time.Second)))*time.Second), true
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return BlockUntil(now, at.Sub(now)), true
	}
	return BlockUntil(now, 0), true // a Retry-After we cannot read: the least wait
}

// Package ratelimit owns what ghclaim knows about an installation's GitHub
// API budget: the reading taken from X-RateLimit-* headers and the rule for
// when a claimer must not call GitHub at all.
package ratelimit

import (
	"errors"
	"time"
)

// Reading is the last observed primary rate limit of one installation.
type Reading struct {
	Limit      int
	Remaining  int
	ResetAt    time.Time
	ObservedAt time.Time
}

// ErrNoReading means no reading has been observed or shared yet.
var ErrNoReading = errors.New("ratelimit: no reading")

// Package random owns the one randomness type of the tree: Source.
//
// Randomness is an input (STYLE.md 4): the backoff jitter, the reclaim
// spread, the claimer's rung jitter and the chaos plans all draw from a
// Source, so a test passes a seeded one and asserts exact values. Every
// Source handed to a component must be safe for concurrent use: New locks
// a seeded generator and Global is math/rand/v2's process-wide source, so
// no consumer keeps a lock of its own.
package random

import (
	"math/rand/v2"
	"sync"
)

// Source is a random source. *math/rand/v2.Rand has these methods (but is
// not safe for concurrent use; wrap it with Locked).
type Source interface {
	// Float64 returns a uniform value in [0, 1).
	Float64() float64
	// IntN returns a uniform value in [0, n); it panics when n <= 0.
	IntN(n int) int
	// Perm returns a random permutation of 0…n-1.
	Perm(n int) []int
}

// New returns a goroutine-safe source seeded with seed: the same seed
// gives the same sequence.
func New(seed uint64) *Locked {
	return &Locked{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Locked serialises a *math/rand/v2.Rand between goroutines.
type Locked struct {
	mu sync.Mutex
	r  *rand.Rand
}

// Float64 implements Source.
func (l *Locked) Float64() float64 { l.mu.Lock(); defer l.mu.Unlock(); return l.r.Float64() }

// IntN implements Source.
func (l *Locked) IntN(n int) int { l.mu.Lock(); defer l.mu.Unlock(); return l.r.IntN(n) }

// Int64N returns a uniform value in [0, n).
func (l *Locked) Int64N(n int64) int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.r.Int64N(n) }

// Uint64 returns a uniform 64-bit value.
func (l *Locked) Uint64() uint64 { l.mu.Lock(); defer l.mu.Unlock(); return l.r.Uint64() }

// Perm implements Source.
func (l *Locked) Perm(n int) []int { l.mu.Lock(); defer l.mu.Unlock(); return l.r.Perm(n) }

// Global is math/rand/v2's process-wide source: randomly seeded and safe
// for concurrent use. Production components default to it.
var Global Source = global{}

type global struct{}

func (global) Float64() float64 { return rand.Float64() }
func (global) IntN(n int) int   { return rand.IntN(n) }
func (global) Perm(n int) []int { return rand.Perm(n) }

// Or returns s, or Global when s is nil: the one place a default source
// is chosen.
func Or(s Source) Source {
	if s == nil {
		return Global
	}
	return s
}

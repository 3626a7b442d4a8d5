package backoff_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/failure"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// seq is a random source that returns its numbers in order, then repeats
// the last one.
type seq []float64

func (s *seq) Float64() float64 {
	v := (*s)[0]
	if len(*s) > 1 {
		*s = (*s)[1:]
	}
	return v
}

// IntN and Perm complete random.Source; the ladder draws only Float64.
func (s *seq) IntN(n int) int { return int(s.Float64() * float64(n)) }
func (s *seq) Perm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

func fixed(vs ...float64) *seq { s := seq(vs); return &s }

func TestParseLadder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []time.Duration
		wantErr string
	}{
		{name: "default", in: "30s,1m,2m,5m,10m", want: []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}},
		{name: "spaces", in: " 1s , 2s ", want: []time.Duration{time.Second, 2 * time.Second}},
		{name: "bad element", in: "30s,1m,two,5m", wantErr: `element 3 "two"`},
		{name: "zero element", in: "30s,0s", wantErr: `element 2 "0s": must be positive`},
		{name: "negative element", in: "-1m", wantErr: `element 1 "-1m"`},
		{name: "empty element", in: "30s,,1m", wantErr: `element 2 ""`},
		{name: "empty", in: "", wantErr: "empty ladder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := backoff.ParseLadder(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, backoff.ErrInvalid) {
					t.Fatalf("got err %v, want one containing %q and wrapping ErrInvalid", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got err %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mod     func(*backoff.Policy)
		wantErr string
	}{
		{name: "default is valid", mod: func(*backoff.Policy) {}},
		{name: "zero jitter is valid", mod: func(p *backoff.Policy) { p.Jitter = 0 }},
		{name: "empty ladder", mod: func(p *backoff.Policy) { p.Ladder = nil }, wantErr: "empty ladder"},
		{name: "non-positive rung", mod: func(p *backoff.Policy) { p.Ladder = []time.Duration{time.Second, 0} }, wantErr: "ladder element 2"},
		{name: "negative jitter", mod: func(p *backoff.Policy) { p.Jitter = -0.1 }, wantErr: "jitter"},
		{name: "jitter of one", mod: func(p *backoff.Policy) { p.Jitter = 1 }, wantErr: "jitter"},
		{name: "zero max age", mod: func(p *backoff.Policy) { p.MaxAge = 0 }, wantErr: "max age"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := backoff.Default()
			tt.mod(&p)
			err := p.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, backoff.ErrInvalid) {
				t.Fatalf("got %v, want an ErrInvalid containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	p := backoff.Default()
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}
	if len(p.Ladder) != len(want) {
		t.Fatalf("ladder: got %v, want %v", p.Ladder, want)
	}
	for i := range want {
		if p.Ladder[i] != want[i] {
			t.Fatalf("ladder: got %v, want %v", p.Ladder, want)
		}
	}
	if p.Jitter != 0.2 || p.MaxAge != 90*time.Minute {
		t.Fatalf("got jitter %v max age %v, want 0.2 and 90m", p.Jitter, p.MaxAge)
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	server := failure.Failure{Class: failure.ServerSide}
	secondary := failure.Failure{Class: failure.RateLimit}
	tests := []struct {
		name  string
		in    backoff.Input
		want  backoff.Decision
		wantD time.Duration // Delay; Due must be Now+Delay
	}{
		{
			name:  "first failure, lowest jitter",
			in:    backoff.Input{Now: t0, Failure: server, Rand: fixed(0, 0)},
			want:  backoff.Decision{FirstFailureAt: t0, Rung: 1, Basis: backoff.BasisLadder},
			wantD: 24 * time.Second,
		},
		{
			name:  "first failure, upper jitter",
			in:    backoff.Input{Now: t0, Failure: server, Rand: fixed(0.75, 0)},
			want:  backoff.Decision{FirstFailureAt: t0, Rung: 1, Basis: backoff.BasisLadder},
			wantD: 33 * time.Second,
		},
		{
			name:  "third rung keeps first failure",
			in:    backoff.Input{Now: t0, FirstFailureAt: t0.Add(-5 * time.Minute), Rung: 2, Failure: server, Rand: fixed(0.25, 0)},
			want:  backoff.Decision{FirstFailureAt: t0.Add(-5 * time.Minute), Rung: 3, Basis: backoff.BasisLadder},
			wantD: 108 * time.Second,
		},
		{
			name:  "past the end clamps to the last rung",
			in:    backoff.Input{Now: t0, FirstFailureAt: t0.Add(-time.Hour), Rung: 40, Failure: failure.Failure{Class: failure.Network}, Rand: fixed(0.5, 0.5)},
			want:  backoff.Decision{FirstFailureAt: t0.Add(-time.Hour), Rung: 41, Basis: backoff.BasisLadder},
			wantD: 10 * time.Minute,
		},
		{
			name:  "nil rand is the midpoint",
			in:    backoff.Input{Now: t0, Rung: 1, Failure: failure.Failure{Class: failure.UnknownRetryable}},
			want:  backoff.Decision{FirstFailureAt: t0, Rung: 2, Basis: backoff.BasisLadder},
			wantD: time.Minute,
		},
		{
			name:  "retry-after snaps plus jitter",
			in:    backoff.Input{Now: t0, Failure: failure.Failure{Class: failure.RateLimit, RetryAfter: time.Minute}, Rand: fixed(0.9, 0)},
			want:  backoff.Decision{FirstFailureAt: t0, Rung: 1, Basis: backoff.BasisRetryAfter},
			wantD: 65 * time.Second,
		},
		{
			name:  "retry-after wins over the reset",
			in:    backoff.Input{Now: t0, Failure: failure.Failure{Class: failure.RateLimit, RetryAfter: 30 * time.Second, ResetAt: t0.Add(time.Hour)}, Rand: fixed(0, 0.5)},
			want:  backoff.Decision{FirstFailureAt: t0, Rung: 1, Basis: backoff.BasisRetryAfter},
			wantD: 45 * time.Second,
		},
		{
			name:  "reset snaps plus jitter",
			in:    backoff.Input{Now: t0, Failure: failure.Failure{Class: failure.RateLimit, ResetAt: t0.Add(37 * time.Minute)}, Rand: fixed(0, 0.999)},
			want:  backoff.Decision{FirstFailureAt: t0, Rung: 1, Basis: backoff.BasisReset},
			wantD: 37*time.Minute + 5*time.Second + time.Duration(0.999*float64(20*time.Second)),
		},
		{
			name:  "reset already passed waits the snap jitter only",
			in:    backoff.Input{Now: t0, Failure: failure.Failure{Class: failure.RateLimit, ResetAt: t0.Add(-time.Second)}, Rand: fixed(0, 0)},
			want:  backoff.Decision{FirstFailureAt: t0, Rung: 1, Basis: backoff.BasisReset},
			wantD: 5 * time.Second,
		},
		{
			name:  "secondary limit waits at least a minute",
			in:    backoff.Input{Now: t0, Failure: secondary, Rand: fixed(1-1e-9, 0.5)},
			want:  backoff.Decision{FirstFailureAt: t0, Rung: 1, Basis: backoff.BasisSecondary},
			wantD: 75 * time.Second,
		},
		{
			name:  "secondary limit then the ladder",
			in:    backoff.Input{Now: t0, FirstFailureAt: t0.Add(-4 * time.Minute), Rung: 3, Failure: secondary, Rand: fixed(0, 0.5)},
			want:  backoff.Decision{FirstFailureAt: t0.Add(-4 * time.Minute), Rung: 4, Basis: backoff.BasisLadder},
			wantD: 4 * time.Minute,
		},
		{
			name:  "aws throttle without reset is a secondary-like limit",
			in:    backoff.Input{Now: t0, FirstFailureAt: t0.Add(-time.Minute), Rung: 1, Failure: failure.Failure{Class: failure.RateLimit, Reason: "aws RequestLimitExceeded"}, Rand: fixed(0.25, 0)},
			want:  backoff.Decision{FirstFailureAt: t0.Add(-time.Minute), Rung: 2, Basis: backoff.BasisSecondary},
			wantD: 65 * time.Second,
		},
		{
			name:  "exactly max age still retries",
			in:    backoff.Input{Now: t0, FirstFailureAt: t0.Add(-90 * time.Minute), Rung: 12, Failure: server, Rand: fixed(0.5, 0.5)},
			want:  backoff.Decision{FirstFailureAt: t0.Add(-90 * time.Minute), Rung: 13, Basis: backoff.BasisLadder},
			wantD: 10 * time.Minute,
		},
		{
			name: "past max age gives up",
			in:   backoff.Input{Now: t0, FirstFailureAt: t0.Add(-90*time.Minute - time.Millisecond), Rung: 12, Failure: server, Rand: fixed(0.5, 0.5)},
			want: backoff.Decision{GiveUp: true, FirstFailureAt: t0.Add(-90*time.Minute - time.Millisecond), Rung: 12, Basis: backoff.BasisGiveUp},
		},
		{
			name: "past max age gives up even when rate limited",
			in:   backoff.Input{Now: t0, FirstFailureAt: t0.Add(-2 * time.Hour), Rung: 3, Failure: failure.Failure{Class: failure.RateLimit, RetryAfter: time.Second}, Rand: fixed(0.5, 0.5)},
			want: backoff.Decision{GiveUp: true, FirstFailureAt: t0.Add(-2 * time.Hour), Rung: 3, Basis: backoff.BasisGiveUp},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := backoff.Default().Next(tt.in)
			want := tt.want
			want.Delay = tt.wantD
			if !want.GiveUp {
				want.Due = tt.in.Now.Add(tt.wantD)
			}
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// Every delay lies within ±Jitter of its rung, and every snap within
// [snap+5s, snap+25s), whatever the random source says.
func TestNextBounds(t *testing.T) {
	t.Parallel()
	p := backoff.Default()
	for seed := uint64(0); seed < 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		rung := r.IntN(9)
		base := p.Ladder[min(rung, len(p.Ladder)-1)]

		d := p.Next(backoff.Input{Now: t0, Rung: rung, Failure: failure.Failure{Class: failure.ServerSide}, Rand: r})
		lo, hi := time.Duration(float64(base)*0.8), time.Duration(float64(base)*1.2)
		if d.Delay < lo || d.Delay >= hi || !d.Due.Equal(t0.Add(d.Delay)) {
			t.Fatalf("seed %d rung %d: ladder delay %v, want in [%v, %v)", seed, rung, d.Delay, lo, hi)
		}

		reset := t0.Add(time.Duration(r.IntN(3600)) * time.Second)
		d = p.Next(backoff.Input{Now: t0, Rung: rung, Failure: failure.Failure{Class: failure.RateLimit, ResetAt: reset}, Rand: r})
		if d.Due.Before(reset.Add(5*time.Second)) || !d.Due.Before(reset.Add(25*time.Second)) {
			t.Fatalf("seed %d: reset snap due %v, want in [reset+5s, reset+25s) = [%v, %v)", seed, d.Due, reset.Add(5*time.Second), reset.Add(25*time.Second))
		}

		after := time.Duration(1+r.IntN(120)) * time.Second
		d = p.Next(backoff.Input{Now: t0, Rung: rung, Failure: failure.Failure{Class: failure.RateLimit, RetryAfter: after}, Rand: r})
		if d.Delay < after+5*time.Second || d.Delay >= after+25*time.Second {
			t.Fatalf("seed %d: retry-after %v gave %v, want in [+5s, +25s)", seed, after, d.Delay)
		}

		d = p.Next(backoff.Input{Now: t0, Rung: rung, Failure: failure.Failure{Class: failure.RateLimit}, Rand: r})
		switch d.Basis {
		case backoff.BasisSecondary:
			if d.Delay < time.Minute+5*time.Second || d.Delay >= time.Minute+25*time.Second || lo >= time.Minute {
				t.Fatalf("seed %d rung %d: secondary floor %v, want 1m+[5s, 25s) and only below a 1m rung", seed, rung, d.Delay)
			}
		case backoff.BasisLadder:
			if d.Delay < time.Minute || d.Delay < lo || d.Delay >= hi {
				t.Fatalf("seed %d rung %d: secondary delay %v, want ≥ 1m and in [%v, %v)", seed, rung, d.Delay, lo, hi)
			}
		default:
			t.Fatalf("seed %d: secondary basis %q", seed, d.Basis)
		}
	}
}

// job is the part of a job record the retry loop carries.
type job struct {
	rung  int
	first time.Time
}

// TestLadderThroughResends runs the whole fire → fail → re-send loop: the
// record's rung and first failure time go into Next, its output goes back
// into the record, the message fires when due, and the attempt fails again.
func TestLadderThroughResends(t *testing.T) {
	t.Parallel()
	p := backoff.Default()
	rec := job{}
	now := t0
	var delays []time.Duration
	for range 100 {
		d := p.Next(backoff.Input{Now: now, FirstFailureAt: rec.first, Rung: rec.rung, Failure: failure.Failure{Class: failure.ServerSide}, Rand: fixed(0.5, 0.5)})
		if d.GiveUp {
			break
		}
		if !d.FirstFailureAt.Equal(t0) {
			t.Fatalf("failure %d: FirstFailureAt %v, want %v (preserved)", len(delays)+1, d.FirstFailureAt, t0)
		}
		delays = append(delays, d.Delay)
		rec = job{rung: d.Rung, first: d.FirstFailureAt} // re-send: the record keeps both
		sqsDelay, notBefore := backoff.Split(now, d.Due)
		if !notBefore.IsZero() {
			t.Fatalf("ladder delay %v needed chaining", d.Delay)
		}
		now = now.Add(time.Duration(sqsDelay) * time.Second) // the message fires, the attempt fails
	}
	m := time.Minute
	want := []time.Duration{30 * time.Second, m, 2 * m, 5 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m, 10 * m}
	if len(delays) != len(want) {
		t.Fatalf("got %d retries %v, want %d %v then give up", len(delays), delays, len(want), want)
	}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("retry %d: got %v, want %v (all: %v)", i+1, delays[i], want[i], delays)
		}
	}
	if age := now.Sub(t0); age <= 90*time.Minute || age > 100*time.Minute {
		t.Fatalf("gave up at age %v, want the first failure after 90m", age)
	}
}

// With real jitter the loop still climbs the ladder and gives up on time.
func TestLadderThroughResendsJittered(t *testing.T) {
	t.Parallel()
	p := backoff.Default()
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		rec := job{}
		now := t0
		for i := 0; ; i++ {
			d := p.Next(backoff.Input{Now: now, FirstFailureAt: rec.first, Rung: rec.rung, Failure: failure.Failure{Class: failure.Network}, Rand: r})
			age := now.Sub(t0)
			if d.GiveUp != (age > 90*time.Minute) {
				t.Fatalf("seed %d failure %d at age %v: GiveUp %v", seed, i+1, age, d.GiveUp)
			}
			if d.GiveUp {
				break
			}
			base := p.Ladder[min(i, len(p.Ladder)-1)]
			if d.Delay < base*8/10 || d.Delay >= base*12/10 {
				t.Fatalf("seed %d failure %d: delay %v, want within ±20%% of %v", seed, i+1, d.Delay, base)
			}
			rec = job{rung: d.Rung, first: d.FirstFailureAt}
			now = d.Due
		}
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 123_456_789, time.UTC)
	tests := []struct {
		name          string
		wait          time.Duration
		wantSecs      int32
		wantNotBefore time.Time
	}{
		{name: "past", wait: -time.Second},
		{name: "now", wait: 0},
		{name: "a nanosecond rounds up", wait: time.Nanosecond, wantSecs: 1},
		{name: "fraction rounds up", wait: 1500 * time.Millisecond, wantSecs: 2},
		{name: "whole seconds", wait: 30 * time.Second, wantSecs: 30},
		{name: "exactly the cap", wait: 900 * time.Second, wantSecs: 900},
		{name: "just past the cap", wait: 900*time.Second + time.Millisecond, wantSecs: 900,
			wantNotBefore: time.Date(2026, 11, 30, 9, 15, 0, 125_000_000, time.UTC)},
		{name: "an hour", wait: time.Hour, wantSecs: 900,
			wantNotBefore: time.Date(2026, 11, 30, 10, 0, 0, 124_000_000, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			secs, nb := backoff.Split(now, now.Add(tt.wait))
			if secs != tt.wantSecs || !nb.Equal(tt.wantNotBefore) {
				t.Errorf("got (%d, %v), want (%d, %v)", secs, nb, tt.wantSecs, tt.wantNotBefore)
			}
		})
	}
}

// A long wait chained through not_before arrives no earlier than due and
// less than a second after it, however many hops it takes.
func TestSplitChain(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 987_654_321, time.UTC)
	due := now.Add(57*time.Minute + 3*time.Second + 1)
	orig := due
	hops := 0
	for {
		secs, nb := backoff.Split(now, due)
		if secs > 900 || secs < 0 {
			t.Fatalf("DelaySeconds %d out of SQS's range", secs)
		}
		now = now.Add(time.Duration(secs) * time.Second)
		hops++
		if nb.IsZero() {
			break
		}
		// The claimer sees not_before in epoch ms and re-splits from it.
		due = time.UnixMilli(nb.UnixMilli()).UTC()
		if hops > 10 {
			t.Fatal("chain does not end")
		}
	}
	if hops != 4 {
		t.Errorf("hops: got %d, want 4 (900+900+900+723 s)", hops)
	}
	if now.Before(orig) || now.Sub(orig) >= time.Second {
		t.Errorf("arrived %v, want in [due, due+1s) with due %v", now, orig)
	}
}

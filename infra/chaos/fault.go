// Package chaos owns ghclaim's proof that it loses nothing: fault-injecting
// decorators for every external call the functions make (DynamoDB, SQS,
// GitHub, the provisioner), claimer kills at random points of a claim, a
// generator of signed, duplicated and reordered workflow_job deliveries, a
// driver that runs the real webhook, claimer and reclaimer handlers
// in-process against an AWS emulator the way Lambda would, and the
// accounting that turns the end state into figures (Report).
//
// The decorators implement the consumers' own narrow ports with the SDK's
// method signatures (store.DynamoDB, queue.SQS, claim.Provisioner,
// claim.GitHub), so the code under test is exactly the production code with
// a different client underneath. Faults are the errors the SDK and GitHub
// really produce, one per error class of DESIGN.md (the tests pin each to its
// class through failure.Classify), plus "after effect": the call is made on
// the real client and then a timeout is returned, so the write happened and
// the caller saw a failure.
//
// Decisions:
//   - Faults are drawn from one seeded random source under a lock, so a run's
//     fault plan is reproducible up to goroutine scheduling.
//   - A kill is an invocation ending abruptly, as a Lambda that times out or
//     crashes: at its chosen call (before or after the call reaches the
//     service) the calling goroutine ends with runtime.Goexit, the
//     invocation's context is cancelled, and every later call of that
//     invocation fails without reaching the service. The driver then deletes
//     none of the batch's messages, exactly as the event source mapping
//     would after a failed invocation.
//   - Time is compressed by configuration (ladder, lease, graces, visibility
//     timeout), not by a fake clock: SQS delays and moto run on the wall
//     clock, and one clock for every actor is what makes the run honest.
//   - The run counts what users count: a job "ran" when GitHub (the
//     stand-in) gave it to a runner of ours, which happens only on a machine
//     the provisioner started (machine.go: some never boot, some runners die
//     before their job). Deliveries go through the stand-in's delivery log;
//     during the outage window they fail there unreached and only the
//     redeliverer (shared/redeliver) brings them in. The reclaimer runs with
//     its liveness check, the janitor on its schedule; the run ends with one
//     fault-free janitor pass, then every runner and machine left is an
//     orphan (every job has ended by then).
//   - A small run forces the first of each injected event (Config.ForceFirst,
//     force.go): at a dozen jobs the draws alone may skip a kill, a dead
//     machine or the outage, and the run would pass having proved nothing
//     about that recovery. The rest stays drawn.
//
// This package is test tooling: it must never be wired into a function's
// main, and it never talks to anything but 127.0.0.1.
package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ghclaim/ghclaim/shared/random"
)

// Target is a kind of external dependency faults are injected into.
type Target string

// Targets.
const (
	TargetDynamoDB  Target = "dynamodb"
	TargetSQS       Target = "sqs"
	TargetGitHub    Target = "github"
	TargetProvision Target = "provision"
)

// Targets lists every Target in report order.
var Targets = []Target{TargetDynamoDB, TargetSQS, TargetGitHub, TargetProvision}

// Kind is what an injected fault does.
type Kind string

// Fault kinds, one per error class of DESIGN.md plus the after-effect timeout.
const (
	// Throttle is the service's throttling error (rate_limit).
	Throttle Kind = "throttle"
	// Server is an internal error or 5xx (server_side).
	Server Kind = "server"
	// Network is a connection reset before any answer (network).
	Network Kind = "network"
	// AfterEffect performs the call, then reports a timeout (network): the
	// write happened, the caller cannot know.
	AfterEffect Kind = "after_effect"
	// Unknown is an error nobody recognises (unknown_retryable).
	Unknown Kind = "unknown"
	// Fatal is an error a retry cannot fix (non_retryable).
	Fatal Kind = "non_retryable"
)

// Kinds lists every Kind in report order.
var Kinds = []Kind{Throttle, Server, Network, AfterEffect, Unknown, Fatal}

// EntryRefused is SQS refusing some entries of a SendMessageBatch it
// answered 200 (Failed, SenderFault false: "check for batch errors even
// when the call returns an HTTP status code of 200"): drawn per call by
// RefuseEntries, apart from the call's own fault.
const EntryRefused Kind = "entry_refused"

// DefaultWeights are the relative frequencies of the kinds. Fatal is rare:
// it ends a job as failed (terminal with a reason), which is correct but
// measures nothing about loss.
var DefaultWeights = map[Kind]int{Throttle: 24, Server: 24, Network: 20, AfterEffect: 24, Unknown: 6, Fatal: 2}

// Injector decides, call by call, whether a call fails and how, and counts
// what it did. It is safe for concurrent use.
type Injector struct {
	mu      sync.Mutex
	rnd     random.Source
	rate    map[Target]float64
	weights map[Kind]int
	total   int
	calls   map[Target]int
	callers map[string]map[Target]int
	faults  map[Target]map[Kind]int
	kills   int
	// failNext: the next call to a target whose rate is above zero faults.
	failNext bool
}

// NewInjector returns an injector that fails each call with probability
// rate (0–1), drawing from rnd. A nil weights map means DefaultWeights.
func NewInjector(rnd random.Source, rate float64, weights map[Kind]int) *Injector {
	if weights == nil {
		weights = DefaultWeights
	}
	in := &Injector{rnd: rnd, rate: map[Target]float64{}, weights: map[Kind]int{}, calls: map[Target]int{}, callers: map[string]map[Target]int{}, faults: map[Target]map[Kind]int{}}
	for _, k := range Kinds {
		if w := weights[k]; w > 0 {
			in.weights[k] = w
			in.total += w
		}
	}
	for _, t := range Targets {
		in.rate[t] = rate
		in.faults[t] = map[Kind]int{}
	}
	return in
}

// SetRate changes the fault rate of one target (0 switches it off).
func (in *Injector) SetRate(t Target, rate float64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rate[t] = rate
}

// Draw counts a call to t by caller (a function name, for the per-caller
// figures; may be empty) and decides whether it fails, and how.
func (in *Injector) Draw(t Target, caller string) (Kind, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.calls[t]++
	if in.callers[caller] == nil {
		in.callers[caller] = map[Target]int{}
	}
	in.callers[caller][t]++
	forced := in.failNext && in.rate[t] > 0
	if in.total == 0 || in.rnd.Float64() >= in.rate[t] && !forced {
		return "", false
	}
	in.failNext = in.failNext && !forced
	n := in.rnd.IntN(in.total)
	for _, k := range Kinds {
		if n < in.weights[k] {
			in.faults[t][k]++
			return k, true
		}
		n -= in.weights[k]
	}
	return "", false // unreachable: weights sum to total
}

// RefuseEntries decides, with t's fault rate, whether a batch call of n
// entries has some of them refused, and returns which (a random non-empty
// set of indexes, in order), counted as EntryRefused faults; nil for
// none.
func (in *Injector) RefuseEntries(t Target, n int) []int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if n == 0 || in.rnd.Float64() >= in.rate[t] {
		return nil
	}
	var out []int
	for i := range n {
		if in.rnd.IntN(2) == 0 {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		out = []int{in.rnd.IntN(n)}
	}
	in.faults[t][EntryRefused] += len(out)
	return out
}

// FailNext makes the next call to a target whose rate is above zero fault,
// whatever the draw (its kind is drawn as usual).
func (in *Injector) FailNext() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.failNext = true
}

// Intn draws from the injector's source (for plans that must share its seed).
func (in *Injector) Intn(n int) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rnd.IntN(n)
}

// Float64 draws from the injector's source.
func (in *Injector) Float64() float64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rnd.Float64()
}

func (in *Injector) countKill() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.kills++
}

// Counts is a snapshot of what an Injector did.
type Counts struct {
	Calls map[Target]int
	// ByCaller counts calls per caller and target.
	ByCaller map[string]map[Target]int
	Faults   map[Target]map[Kind]int
	Kills    int
}

// Counts returns a copy of the counters.
func (in *Injector) Counts() Counts {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := Counts{Calls: map[Target]int{}, Faults: map[Target]map[Kind]int{}, Kills: in.kills}
	for t, n := range in.calls {
		c.Calls[t] = n
	}
	c.ByCaller = map[string]map[Target]int{}
	for who, m := range in.callers {
		c.ByCaller[who] = map[Target]int{}
		for t, n := range m {
			c.ByCaller[who][t] = n
		}
	}
	for t, m := range in.faults {
		c.Faults[t] = map[Kind]int{}
		for k, n := range m {
			c.Faults[t][k] = n
		}
	}
	return c
}

// TotalFaults sums the injected faults over every target and kind.
func (c Counts) TotalFaults() int {
	n := 0
	for _, m := range c.Faults {
		for _, v := range m {
			n += v
		}
	}
	return n
}

// String is a one-line breakdown, "dynamodb:throttle=3,… sqs:…".
func (c Counts) String() string {
	var parts []string
	for _, t := range Targets {
		var ks []string
		for _, k := range append(slices.Clone(Kinds), EntryRefused) {
			if n := c.Faults[t][k]; n > 0 {
				ks = append(ks, fmt.Sprintf("%s=%d", k, n))
			}
		}
		sort.Strings(ks)
		parts = append(parts, fmt.Sprintf("%s(calls=%d):%s", t, c.Calls[t], strings.Join(ks, ",")))
	}
	return strings.Join(parts, " ")
}

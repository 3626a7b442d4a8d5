// Package scenario plays signed GitHub deliveries against a running rig (the whole stack with
// the real binaries) and judges where every job ended: the demonstration behind `make run` and
// the end-to-end test. A scenario is a list of cases, each a job with what must become of it;
// the player drives deliveries and faults, shows progress as job records change, and returns
// one Result per case with OK or the reason it is not.
//
// Expectations are about outcomes a user can see, never about internals: the record's final
// state, how many attempts reached GitHub, the runner registered at GitHub (exactly one per
// claimed job, named <pool>-<job_id>), the JIT config dispatched to exactly one host, and how
// long the claim took. Time bounds carry the proof of the path taken: an ordinary job claimed
// faster than the pending grace went through the webhook's SQS send, not the reclaimer's
// outbox sweep; a killed claimer's job claimed after its lease expired was recovered by the
// reclaimer, not by SQS redelivery (the queue's visibility timeout is minutes).
//
// Everything is configuration (Settings): the compressed retry ladder and short leases are
// template parameters and environment variables the functions read anyway.
//
// This package must never reach into the functions' code: it only sends what GitHub would
// send, programs the GitHub stand-in, and reads the table, the stand-in and the dispatch queue.
package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/local/rig"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/store"
)

// Compressed timings of local runs. The lease outlives the claimer's timeout, as DESIGN.md
// requires; the graces are long enough that a job claimed within them cannot have been rescued
// by the reclaimer's outbox sweep.
//
// The claimer starts no message with less than 10 s of its invocation left (its safety margin,
// not configurable), so its timeout cannot be compressed below that plus the time a claim takes.
const (
	Lease          = 16 * time.Second
	ClaimerTimeout = 15 * time.Second
	PendingGrace   = 20 * time.Second
	QueuedGrace    = 20 * time.Second
	SweepEvery     = 2 * time.Second
	// FastClaim bounds the time to claim of a job that nothing got in the way of: well below
	// PendingGrace, so it proves the webhook sent the claim message itself.
	FastClaim = 10 * time.Second
)

// Settings are the rig options of local runs: the compressed ladder and timings.
func Settings() rig.Options {
	return rig.Options{
		Params: map[string]string{
			"RetryLadder":     "1s,2s,3s",
			"MaxAge":          "2m",
			"ReclaimSchedule": "rate(2 seconds)",
			"LogLevel":        "DEBUG",
		},
		Env: map[string]map[string]string{
			"*": {
				"PENDING_GRACE": PendingGrace.String(),
				"QUEUED_GRACE":  QueuedGrace.String(),
			},
			"claimer":   {"LEASE_DURATION": Lease.String()},
			"reclaimer": {"SWEEP_BUDGET": "3s"},
		},
		// The reclaimer keeps the template's timeout: it reserves 5 s before its deadline, and
		// SWEEP_BUDGET already bounds a pass.
		Timeouts:   map[string]time.Duration{"claimer": ClaimerTimeout},
		SweepEvery: SweepEvery,
		Claimers:   2,
	}
}

// NoRecord is the "state" of a job the webhook skipped: only its delivery key exists.
const NoRecord job.State = "no record"

// Case is one job of a scenario and what must become of it.
type Case struct {
	// Name says what the case shows, e.g. "JIT fails twice with 502".
	Name string
	Job  Job
	// Want is the final state; NoRecord for a skipped job.
	Want job.State
	// Attempts bounds the record's final attempt count (inclusive).
	MinAttempts, MaxAttempts int
	// Runner is the runner the record must name at the end ("" for none).
	Runner string
	// Ours is the runner name ghclaim derives for the job (<pool>-<job_id>; "" when the job
	// matches no pool). A claimed job must have exactly one runner of that name registered at
	// GitHub and dispatched to a host; any other job none.
	Ours string
	// MinClaim and MaxClaim bound the time from the queued delivery to the final write
	// (0: unbounded).
	MinClaim, MaxClaim time.Duration
}

// Job is a workflow job as GitHub's payload describes it.
type Job struct {
	ID           int64
	RunID        int64
	Repo         string // owner/name
	Installation int64
	Labels       []string
}

// Result is what became of a case.
type Result struct {
	Case
	Record     job.Record
	Found      bool
	ClaimTime  time.Duration // 0 when not terminal
	Registered int           // runners at GitHub with the expected name
	Dispatched int           // JIT configs dispatched for the expected name
	OK         bool
	Why        string // when not OK
}

// Payload is the workflow_job delivery body for j with action (and the runner that took it,
// for in_progress / completed), as GitHub sends it for a private repository; a completed
// job was cancelled.
func Payload(j Job, action, runnerName string) []byte {
	return ghfake.WorkflowJobPayload(ghfake.Delivery{
		Action: action, Repo: j.Repo, Private: true, JobID: j.ID, RunID: j.RunID, Labels: j.Labels,
		RunnerName: runnerName, Conclusion: conclusion(action), Installation: j.Installation,
	})
}

func conclusion(action string) string {
	if action == "completed" {
		return "cancelled"
	}
	return ""
}

// Player drives one scenario on a rig.
type Player struct {
	Rig *rig.Rig
	// Out receives progress lines (nil: discard).
	Out io.Writer
	// Poll is how often job records are read for progress (default 200 ms).
	Poll time.Duration

	once     sync.Once // init: Watch and the play start it from two goroutines
	start    time.Time
	mu       sync.Mutex
	cases    []Case
	queuedAt map[int64]time.Time
	seen     map[int64]string
	notes    []string
}

// Start begins the clock and the progress display; it returns when ctx ends or Stop is called.
func (p *Player) init() {
	p.once.Do(func() {
		p.start = time.Now()
		p.queuedAt = map[int64]time.Time{}
		p.seen = map[int64]string{}
		if p.Out == nil {
			p.Out = io.Discard
		}
		if p.Poll <= 0 {
			p.Poll = 200 * time.Millisecond
		}
	})
}

// Say prints one progress line, stamped with the time since the scenario began.
func (p *Player) Say(format string, args ...any) {
	p.init()
	fmt.Fprintf(p.Out, "  %6.1fs  %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// Add registers cases, whose records the progress display follows.
func (p *Player) Add(cs ...Case) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cases = append(p.cases, cs...)
}

// Update changes the expectation of the case of job id (e.g. a bound known only mid-play).
func (p *Player) Update(id int64, f func(*Case)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.cases {
		if p.cases[i].Job.ID == id {
			f(&p.cases[i])
		}
	}
}

// Deliver sends one signed workflow_job delivery and checks the webhook's status.
func (p *Player) Deliver(ctx context.Context, c Case, action, delivery, runner string, wantStatus int) error {
	p.init()
	if action == "queued" {
		p.mu.Lock()
		if _, ok := p.queuedAt[c.Job.ID]; !ok {
			p.queuedAt[c.Job.ID] = time.Now()
		}
		p.mu.Unlock()
	}
	status, body, err := p.Rig.Deliver(ctx, "workflow_job", delivery, Payload(c.Job, action, runner))
	if err != nil {
		return err
	}
	var reply struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal([]byte(body), &reply)
	p.Say("job %-6d %-28s %s delivery %s → %d %s", c.Job.ID, "["+c.Name+"]", action, short(delivery), status, reply.Status)
	if status != wantStatus {
		return fmt.Errorf("job %d (%s): %s delivery answered %d %s, want %d", c.Job.ID, c.Name, action, status, strings.TrimSpace(body), wantStatus)
	}
	return nil
}

// short is a delivery GUID's tail: the scenario's GUIDs share their head.
func short(s string) string {
	if len(s) > 8 {
		return s[len(s)-8:]
	}
	return s
}

// Watch prints a progress line whenever a case's record changes state or attempt, until ctx
// ends, and once more at the end. Run it in its own goroutine.
func (p *Player) Watch(ctx context.Context) {
	p.init()
	t := time.NewTicker(p.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.Refresh(context.WithoutCancel(ctx))
			return
		case <-t.C:
			p.Refresh(ctx)
		}
	}
}

// Refresh reads every case's record once and prints what changed.
func (p *Player) Refresh(ctx context.Context) {
	p.init()
	p.mu.Lock()
	cs := append([]Case(nil), p.cases...)
	p.mu.Unlock()
	for _, c := range cs {
		rec, err := p.Rig.Store.Get(ctx, c.Job.ID)
		if err != nil {
			continue
		}
		line := fmt.Sprintf("%s attempt %d", rec.State, rec.Attempt)
		if rec.LastErrorClass != "" && !rec.State.Settled() {
			line += " (last error: " + rec.LastErrorClass + ")"
		}
		if rec.State == job.Claimed || rec.State == job.Done {
			line += " runner " + rec.RunnerName
		}
		p.mu.Lock()
		changed := p.seen[c.Job.ID] != line
		p.seen[c.Job.ID] = line
		p.mu.Unlock()
		if changed {
			p.Say("job %-6d %-28s %s", c.Job.ID, "["+c.Name+"]", line)
		}
	}
}

// Until polls cond every Poll until it holds or ctx ends.
func (p *Player) Until(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	p.init()
	t := time.NewTicker(p.Poll / 2)
	defer t.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// Settled reports whether every case with a record-bearing expectation has a terminal record
// (or, for NoRecord cases, nothing to wait for).
func (p *Player) Settled(ctx context.Context, cs ...Case) (bool, error) {
	for _, c := range cs {
		if c.Want == NoRecord {
			continue
		}
		rec, err := p.Rig.Store.Get(ctx, c.Job.ID)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !rec.State.Settled() {
			return false, nil
		}
	}
	return true, nil
}

// Note adds a line to the report printed under the table.
func (p *Player) Note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, fmt.Sprintf(format, args...))
}

// Notes are the lines added by Note.
func (p *Player) Notes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.notes...)
}

// Judge reads where every case ended and compares it with what it should be.
func (p *Player) Judge(ctx context.Context) ([]Result, error) {
	p.init()
	dispatched, err := p.dispatched(ctx)
	if err != nil {
		return nil, err
	}
	registered := map[string]int{}
	for _, r := range p.Rig.GitHub.Runners() {
		registered[strings.ToLower(r.Name)]++
	}
	p.mu.Lock()
	cs := append([]Case(nil), p.cases...)
	p.mu.Unlock()
	var out []Result
	for _, c := range cs {
		res := Result{Case: c}
		rec, err := p.Rig.Store.Get(ctx, c.Job.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			res.Record, res.Found = rec, true
		}
		if res.Found && rec.State.Settled() {
			if at, ok := p.queuedAt[c.Job.ID]; ok {
				res.ClaimTime = job.FromMillis(rec.UpdatedAt).Sub(at)
			}
		}
		if c.Ours != "" {
			ours := strings.ToLower(c.Ours)
			res.Registered, res.Dispatched = registered[ours], dispatched[ours]
		}
		res.OK, res.Why = judge(res)
		out = append(out, res)
	}
	return out, nil
}

func judge(r Result) (bool, string) {
	state := NoRecord
	if r.Found {
		state = r.Record.State
	}
	if state != r.Want {
		return false, fmt.Sprintf("ended %s, want %s", state, r.Want)
	}
	if !r.Found {
		return true, ""
	}
	if a := r.Record.Attempt; a < r.MinAttempts || a > r.MaxAttempts {
		return false, fmt.Sprintf("%d attempts, want %d..%d", a, r.MinAttempts, r.MaxAttempts)
	}
	if r.Record.RunnerName != r.Runner {
		return false, fmt.Sprintf("runner %q, want %q", r.Record.RunnerName, r.Runner)
	}
	if r.Want == job.Claimed && (r.Registered != 1 || r.Dispatched != 1) {
		return false, fmt.Sprintf("%d runners registered and %d dispatched, want exactly 1 each", r.Registered, r.Dispatched)
	}
	if r.Want != job.Claimed && (r.Registered != 0 || r.Dispatched != 0) {
		return false, fmt.Sprintf("%d runners registered and %d dispatched, want none", r.Registered, r.Dispatched)
	}
	if r.MinClaim > 0 && r.ClaimTime < r.MinClaim {
		return false, fmt.Sprintf("took %s, want at least %s", r.ClaimTime.Round(100*time.Millisecond), r.MinClaim)
	}
	if r.MaxClaim > 0 && r.ClaimTime > r.MaxClaim {
		return false, fmt.Sprintf("took %s, want at most %s", r.ClaimTime.Round(100*time.Millisecond), r.MaxClaim)
	}
	return true, ""
}

// dispatched drains the dispatch queue and counts JIT configs per runner name. The configs
// themselves are never kept or printed.
func (p *Player) dispatched(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for {
		res, err := p.Rig.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.Rig.DispatchQueueURL), MaxNumberOfMessages: 10, VisibilityTimeout: 300,
		})
		if err != nil {
			return nil, fmt.Errorf("read the dispatch queue: %w", err)
		}
		if len(res.Messages) == 0 {
			return out, nil
		}
		for _, m := range res.Messages {
			var d struct {
				RunnerName string `json:"runner_name"`
				JITConfig  string `json:"jit_config"`
			}
			if json.Unmarshal([]byte(aws.ToString(m.Body)), &d) == nil && d.JITConfig != "" {
				out[strings.ToLower(d.RunnerName)]++
			}
		}
	}
}

// Table renders results as the table make run ends with.
func Table(w io.Writer, rs []Result) {
	rows := [][]string{{"JOB", "SCENARIO", "FINAL STATE", "ATTEMPTS", "TIME TO END", "RUNNER", "EXPECTED", ""}}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Job.ID < rs[j].Job.ID })
	for _, r := range rs {
		state, attempts, took, runner := string(NoRecord), "-", "-", "-"
		if r.Found {
			state, attempts = string(r.Record.State), fmt.Sprint(r.Record.Attempt)
			if r.Record.RunnerName != "" {
				runner = r.Record.RunnerName
			}
		}
		if r.ClaimTime > 0 {
			took = fmt.Sprintf("%.1fs", r.ClaimTime.Seconds())
		}
		want := string(r.Want)
		if r.Want != NoRecord {
			if r.MinAttempts == r.MaxAttempts {
				want += fmt.Sprintf(", %d att.", r.MinAttempts)
			} else {
				want += fmt.Sprintf(", %d-%d att.", r.MinAttempts, r.MaxAttempts)
			}
		}
		if r.MinClaim > 0 {
			want += fmt.Sprintf(", ≥%s", r.MinClaim.Round(100*time.Millisecond))
		}
		if r.MaxClaim > 0 {
			want += fmt.Sprintf(", ≤%s", r.MaxClaim)
		}
		verdict := "OK"
		if !r.OK {
			verdict = "FAIL: " + r.Why
		}
		rows = append(rows, []string{fmt.Sprint(r.Job.ID), r.Name, state, attempts, took, runner, want, verdict})
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(cell))+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// AllOK reports whether every result is OK.
func AllOK(rs []Result) bool {
	for _, r := range rs {
		if !r.OK {
			return false
		}
	}
	return len(rs) > 0
}

package claim_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
)

func within(got, want time.Duration, frac float64) bool {
	lo := time.Duration(float64(want) * (1 - frac))
	hi := time.Duration(float64(want) * (1 + frac))
	return got >= lo-time.Second && got <= hi+time.Second // SQS rounds up to whole seconds
}

// TestLadder drives the whole fire → fail → re-send path: every re-sent
// message is received from the real queue and fed back with the clock
// advanced by its delay. The ladder must climb (not restart) and give up
// once the maximum age since the first failure has passed.
func TestLadder(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{})
	h.gh.Fail(ghfake.RouteRepoJIT, 0, ghfake.ServerError(http.StatusBadGateway))
	const id = 1001
	h.seed(t, id)
	start := h.clock.Now()

	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for attempt := 1; ; attempt++ {
		msgs := h.receive(t, 1)
		if resp := h.invoke(t, c, msgs...); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("attempt %d: batch item failures %v, want none", attempt, resp.BatchItemFailures)
		}
		r := h.get(t, id)
		if r.State == job.Abandoned {
			if age := h.clock.Now().Sub(start); age <= 90*time.Minute {
				t.Fatalf("abandoned after %s, want only past the 90m max age", age)
			}
			if attempt < 10 {
				t.Fatalf("abandoned at attempt %d: the ladder cannot have reached 90m", attempt)
			}
			if r.LastErrorClass != "server_side" {
				t.Errorf("last_error_class %q, want server_side", r.LastErrorClass)
			}
			h.receiveNone(t)
			if n := len(h.gh.Runners()); n != 0 {
				t.Errorf("%d runners registered after abandoning, want 0", n)
			}
			checkDecisionLines(t, h)
			return
		}
		if r.State != job.Queued || r.Attempt != attempt {
			t.Fatalf("attempt %d: record %s attempt %d, want queued attempt %d", attempt, r.State, r.Attempt, attempt)
		}
		if r.FirstFailureAt != job.Millis(start) {
			t.Fatalf("attempt %d: first_failure_at %d, want %d (the first failure)", attempt, r.FirstFailureAt, job.Millis(start))
		}
		if r.LastErrorClass != "server_side" {
			t.Errorf("attempt %d: last_error_class %q, want server_side", attempt, r.LastErrorClass)
		}
		s := h.lastSend(t)
		if s.Msg.Version != r.Version || s.Msg.Attempt != attempt {
			t.Fatalf("attempt %d: sent version %d attempt %d, record version %d", attempt, s.Msg.Version, s.Msg.Attempt, r.Version)
		}
		rung := want[min(attempt-1, len(want)-1)]
		if !within(s.Delay, rung, 0.2) {
			t.Fatalf("attempt %d: delay %s, want %s ±20%%", attempt, s.Delay, rung)
		}
		if due := job.FromMillis(r.DueAt).Sub(h.clock.Now()); !within(due, rung, 0.2) {
			t.Errorf("attempt %d: due_at in %s, want %s ±20%%", attempt, due, rung)
		}
		h.clock.Advance(s.Delay)
	}
}

// TestLadderEndsOnSuccess: a success after failures claims the job and
// sends nothing more.
func TestLadderEndsOnSuccess(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{})
	h.gh.Fail(ghfake.RouteRepoJIT, 3, ghfake.ServerError(http.StatusBadGateway))
	const id = 1002
	h.seed(t, id)
	for range 3 {
		h.invoke(t, c, h.receive(t, 1)...)
		h.clock.Advance(h.lastSend(t).Delay)
	}
	sends := len(h.queue.Sent())
	if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	r := h.get(t, id)
	if r.State != job.Claimed || r.Attempt != 4 || r.RunnerName != "linux-1002" {
		t.Fatalf("record %s attempt %d runner %q, want claimed attempt 4 runner linux-1002", r.State, r.Attempt, r.RunnerName)
	}
	if n := len(h.queue.Sent()); n != sends {
		t.Errorf("%d messages sent after the success, want 0", n-sends)
	}
	h.receiveNone(t)
	ms := h.prov.Machines(id)
	if cfg, _ := h.prov.Config("linux-1002"); len(ms) != 1 || ms[0].RunnerName != "linux-1002" || cfg == "" {
		t.Fatalf("machines %v, want one for linux-1002 with its JIT config", ms)
	}
	if rs := h.gh.Runners(); len(rs) != 1 || rs[0].Name != "linux-1002" {
		t.Fatalf("runners %v, want exactly linux-1002", rs)
	}
}

// checkDecisionLines: every retry decision is one JSON line with the
// fields operators query by.
func checkDecisionLines(t *testing.T, h *harness) {
	t.Helper()
	retries := 0
	for _, d := range h.logs.decisions(t) {
		if d["decision"] != "retry" {
			continue
		}
		retries++
		for _, k := range []string{"job_id", "attempt", "class", "version", "decision", "delay_ms"} {
			if _, ok := d[k]; !ok {
				t.Fatalf("retry line %v lacks %q", d, k)
			}
		}
	}
	if retries == 0 {
		t.Fatal("no retry decision logged")
	}
}

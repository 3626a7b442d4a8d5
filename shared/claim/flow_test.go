package claim_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
)

// TestSameMessageTwoClaimers: SQS delivers one message to two claimers at
// once; the lease lets one of them claim: one runner, one instance.
func TestSameMessageTwoClaimers(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{ec2: true})
	a := h.claimer(t, claimerOpt{instance: "a", seed: 1})
	b := h.claimer(t, claimerOpt{instance: "b", seed: 2})
	const id = 4001
	h.seed(t, id)
	msg := h.receive(t, 1)

	var wg sync.WaitGroup
	for _, c := range []*claim.Claimer{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithDeadline(context.Background(), h.clock.Now().Add(time.Minute))
			defer cancel()
			resp, err := c.Handle(ctx, events.SQSEvent{Records: msg})
			if err != nil {
				t.Errorf("handle: %v", err)
			}
			h.esm.settle(msg, resp, false)
		}()
	}
	wg.Wait()

	if r := h.get(t, id); r.State != job.Claimed || r.Attempt != 1 {
		t.Fatalf("record %s attempt %d, want claimed attempt 1", r.State, r.Attempt)
	}
	if rs := h.gh.Runners(); len(rs) != 1 {
		t.Fatalf("runners %v, want exactly one", rs)
	}
	if n := h.instances(id); n != 1 {
		t.Fatalf("%d instances launched, want 1", n)
	}
	if st := h.gh.Stats(); st.JITCalls != 1 {
		t.Fatalf("JIT calls %d, want 1: the loser must not reach GitHub", st.JITCalls)
	}
	// The loser cannot tell a live holder in another invocation from a
	// dead one: it drops the message when the claim has ended already, or
	// hides it until the lease's expiry, and then finds the claim ended.
	dups, held := h.logs.count(t, claim.DecisionDuplicate), h.logs.count(t, claim.DecisionLeaseHeld)
	if dups+held != 1 {
		t.Fatalf("%d duplicate and %d lease-held decisions logged, want one of them", dups, held)
	}
	h.clock.Advance(time.Hour)
	if back := h.esm.receive(1); len(back) > 0 {
		h.invoke(t, h.claimer(t, claimerOpt{instance: "c"}), back...)
		if n := h.logs.count(t, claim.DecisionDuplicate); n != dups+1 {
			t.Fatalf("the message back after the lease: %d duplicate decisions, want %d", n, dups+1)
		}
	}
	if st := h.gh.Stats(); st.JITCalls != 1 {
		t.Fatalf("JIT calls %d, want 1", st.JITCalls)
	}
	h.receiveNone(t)
}

// TestCrashAfterJIT: a claimer dies after GitHub registered the runner and
// before the claim was recorded. The next attempt (a reclaimer's take-back,
// or the re-sent message when only the answer was lost) ends with exactly
// one registered runner and one instance.
func TestCrashAfterJIT(t *testing.T) {
	t.Parallel()
	type row struct {
		name string
		// arm sets up the failure of the first attempt; reclaim says the
		// claimer died (the reclaimer must take the job back).
		arm     func(h *harness)
		reclaim bool
		// keepsRunner: the first attempt's machine is up with that
		// runner's config, so the registration must survive.
		keepsRunner bool
	}
	rows := []row{
		{name: "dies before provisioning", reclaim: true, arm: func(h *harness) {
			h.spy.set(func(n int) error {
				if n == 1 {
					h.crash()
				}
				return nil
			}, nil)
		}},
		{name: "dies after provisioning", reclaim: true, keepsRunner: true, arm: func(h *harness) {
			h.spy.set(nil, func(n int) {
				if n == 1 {
					h.crash()
				}
			})
		}},
		{name: "JIT answer lost after effect", arm: func(h *harness) {
			h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway).AfterEffect())
		}},
	}
	for i, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			id := int64(4100 + i)
			h.seed(t, id)
			tc.arm(h)
			h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
			first := h.gh.Runners()
			if len(first) != 1 || first[0].Status != "offline" {
				t.Fatalf("after the first attempt: runners %v, want one offline registration", first)
			}
			if tc.reclaim {
				r := h.get(t, id)
				if r.State != job.Claiming {
					t.Fatalf("record %s after the crash, want claiming (the lease was never released)", r.State)
				}
				// What the reclaimer does once the lease has expired.
				h.clock.Set(job.FromMillis(r.LeaseExpiresAt).Add(time.Second))
				taken, err := h.store.TakeBack(context.Background(), r, job.Queued, h.clock.Now(), "lease expired", h.clock.Now())
				if err != nil {
					t.Fatal(err)
				}
				if err := h.queue.Send(context.Background(), job.Message{JobID: id, Version: taken.Version, Attempt: taken.Attempt}, 0); err != nil {
					t.Fatal(err)
				}
			} else {
				h.clock.Advance(h.lastSend(t).Delay)
			}
			h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)

			r := h.get(t, id)
			if r.State != job.Claimed {
				t.Fatalf("record %s (%s), want claimed", r.State, r.LastError)
			}
			rs := h.gh.Runners()
			if len(rs) != 1 || rs[0].Name != job.RunnerName("linux", id) {
				t.Fatalf("runners %v, want exactly one named %s", rs, job.RunnerName("linux", id))
			}
			if n := h.instances(id); n != 1 {
				t.Fatalf("%d instances, want 1", n)
			}
			if tc.keepsRunner && rs[0].ID != first[0].ID {
				t.Fatalf("runner %d replaced by %d while the first attempt's machine was up with its config: that machine can never connect",
					first[0].ID, rs[0].ID)
			}
		})
	}
}

// TestBatchMixed: a batch of 10 with mixed outcomes reports exactly the
// messages that must come back as batch item failures.
func TestBatchMixed(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{})
	raw := h.esm.raw
	// 5001–5005 are claimed, but the batch's first JIT call answers 502:
	// that job is re-sent for a retry (handled, not a batch item failure).
	for id := int64(5001); id <= 5005; id++ {
		h.seed(t, id)
	}
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway))
	raw(`{"job_id":5005,"version":1}`) // a duplicate delivery of 5005's message
	raw(`{"job_id":`)                  // malformed
	raw(`{"job_id":5999,"version":1}`) // unknown job
	h.record(t, 5006)
	raw(`{"job_id":5006,"version":3}`) // newer than its record: early, comes back
	h.record(t, 5007)
	raw(fmt.Sprintf(`{"job_id":5007,"version":1,"not_before":%d}`, job.Millis(h.clock.Now().Add(20*time.Minute)))) // chained

	batch := h.receive(t, 10)
	var early string
	for _, m := range batch {
		if m.Body == `{"job_id":5006,"version":3}` {
			early = m.MessageId
		}
	}
	resp := h.invoke(t, c, batch...)
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if !slices.Equal(failed, []string{early}) {
		t.Fatalf("batch item failures %v, want exactly the early message %s", failed, early)
	}
	if d, ok := h.queue.Visibility(receiptOf(batch, early)); !ok || d != 5*time.Second {
		t.Fatalf("early message visibility %s (set %v), want 5s", d, ok)
	}
	if r := h.get(t, 5007); r.State != job.Queued || r.Version != 1 {
		t.Fatalf("chained job: record %s version %d, want untouched (queued, 1)", r.State, r.Version)
	}
	claimed, queued := 0, 0
	for id := int64(5001); id <= 5005; id++ {
		switch h.get(t, id).State {
		case job.Claimed:
			claimed++
		case job.Queued:
			queued++
		}
	}
	if claimed != 4 || queued != 1 {
		t.Fatalf("%d claimed and %d queued for retry, want 4 and 1", claimed, queued)
	}
	// Left in the queue: the early message (back for another look), the
	// retry of the 502 job and 5007's chained hop. Everything else (the
	// duplicate, the malformed and the unknown job's message) was deleted.
	var left []int64
	for _, m := range h.receive(t, 3) {
		msg, err := job.DecodeMessage(m.Body)
		if err != nil {
			t.Fatalf("left in the queue: %q", m.Body)
		}
		left = append(left, msg.JobID)
	}
	slices.Sort(left)
	if left[0] < 5001 || left[0] > 5005 || left[1] != 5006 || left[2] != 5007 {
		t.Fatalf("jobs left in the queue %v, want one of 5001–5005 (retry), 5006 (early), 5007 (chained)", left)
	}
	h.receiveNone(t)
}

func receiptOf(msgs []events.SQSMessage, id string) string {
	for _, m := range msgs {
		if m.MessageId == id {
			return m.ReceiptHandle
		}
	}
	return ""
}

// TestDeadlineReleasesUnstarted: with less than the safety margin left no
// message is started; the unstarted ones come back at once, spread by
// reclaim.Spread, as batch item failures.
func TestDeadlineReleasesUnstarted(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{concurrency: 1, seed: 5})
	for id := int64(6001); id <= 6010; id++ {
		h.seed(t, id)
	}
	// Each provisioning takes 17 s of the 60 s budget: three messages start
	// (60, 43 and 26 s left), the fourth would start with 9 s left, under
	// the 10 s safety margin; the release has those 9 s.
	h.spy.set(nil, func(int) { h.clock.Advance(17 * time.Second) })
	msgs := h.receive(t, 10)
	resp := h.invoke(t, c, msgs...)
	if h.spy.Calls() != 3 {
		t.Fatalf("%d messages started, want 3", h.spy.Calls())
	}
	want := reclaim.Spread(7, random.New(5))
	if len(resp.BatchItemFailures) != 7 {
		t.Fatalf("%d batch item failures, want 7", len(resp.BatchItemFailures))
	}
	for k, f := range resp.BatchItemFailures {
		if f.ItemIdentifier != msgs[3+k].MessageId {
			t.Fatalf("failure %d is %s, want the unstarted %s", k, f.ItemIdentifier, msgs[3+k].MessageId)
		}
		got, ok := h.queue.Visibility(msgs[3+k].ReceiptHandle)
		if w := time.Duration(math.Ceil(want[k].Seconds())) * time.Second; !ok || got != w {
			t.Fatalf("unstarted %d visibility %s (set %v), want %s (Spread's %s rounded up)", k, got, ok, w, want[k])
		}
	}
}

// TestNoReleaseAfterTheAnswerIsDue: when the messages handled used the
// invocation up, the unstarted ones are not released past the time the
// answer is due. Lambda would discard a late answer and fail the whole
// batch, the handled messages too; answered in time, only the unstarted
// ones come back, after the visibility timeout.
func TestNoReleaseAfterTheAnswerIsDue(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{concurrency: 1, seed: 5})
	for id := int64(6021); id <= 6024; id++ {
		h.seed(t, id)
	}
	// Each provisioning takes 20 s of the 60 s budget: three messages
	// start (60, 40 and 20 s left), then none is left.
	h.spy.set(nil, func(int) { h.clock.Advance(20 * time.Second) })
	msgs := h.receive(t, 4)
	resp := h.invoke(t, c, msgs...)
	if h.spy.Calls() != 3 {
		t.Fatalf("%d messages started, want 3", h.spy.Calls())
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != msgs[3].MessageId {
		t.Fatalf("batch item failures %v, want the unstarted %s only", resp.BatchItemFailures, msgs[3].MessageId)
	}
	if d, ok := h.queue.Visibility(msgs[3].ReceiptHandle); ok {
		t.Errorf("the unstarted message was released (visibility %s) after the answer was due", d)
	}
	if !strings.Contains(h.logs.String(), "no time left before the answer is due") {
		t.Errorf("no log line says the release was skipped:\n%s", h.logs.String())
	}
}

// TestDoneWhileRetryWaits: the job is reported done while its retry
// message waits; the retry stops without calling GitHub.
func TestDoneWhileRetryWaits(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{})
	const id = 7001
	h.seed(t, id)
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway))
	h.invoke(t, c, h.receive(t, 1)...)
	if r := h.get(t, id); r.State != job.Queued {
		t.Fatalf("record %s, want queued for retry", r.State)
	}
	h.markDone(t, id, "someone-else")
	before := h.gh.Stats()
	h.clock.Advance(h.lastSend(t).Delay)
	if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	after := h.gh.Stats()
	if after.JITCalls != before.JITCalls || after.Calls[ghfake.RouteRepoRunners] != before.Calls[ghfake.RouteRepoRunners] {
		t.Fatalf("GitHub called after done: before %+v after %+v", before, after)
	}
	if r := h.get(t, id); r.State != job.Done || r.RunnerName != "someone-else" {
		t.Fatalf("record %s runner %q, want done by someone-else", r.State, r.RunnerName)
	}
	h.receiveNone(t)
}

// TestCheckQueued: a pool that checks the job first ends a claim whose job
// already runs without registering a runner; a failing check claims anyway.
func TestCheckQueued(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{checkQueued: true})
	c := h.claimer(t, claimerOpt{})
	h.gh.SetJob("octo-org", "octo-repo", ghfake.Job{ID: 8001, Status: "in_progress"})
	h.seed(t, 8001)
	h.invoke(t, c, h.receive(t, 1)...)
	if r := h.get(t, 8001); r.State != job.Done || r.Attempt != 1 {
		t.Fatalf("record %s attempt %d, want done attempt 1", r.State, r.Attempt)
	}
	if n := h.gh.Stats().JITCalls; n != 0 {
		t.Fatalf("%d JIT calls, want 0", n)
	}
	// Unknown to GitHub (404): the check fails, the job is claimed anyway.
	h.seed(t, 8002)
	h.invoke(t, c, h.receive(t, 1)...)
	if r := h.get(t, 8002); r.State != job.Claimed {
		t.Fatalf("record %s (%s), want claimed", r.State, r.LastError)
	}
}

// TestLeaseLostChangesNothing: the job is reported done while a claimer
// provisions it; the claimer's fenced Finish fails and it stops: no runner
// deleted, nothing re-sent, the record stays done.
func TestLeaseLostChangesNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{})
	const id = 9001
	h.seed(t, id)
	h.spy.set(func(int) error {
		h.markDone(t, id, "")
		return awsErr("RunInstances", "InvalidParameterValue", "bad")
	}, nil)
	sends := len(h.queue.Sent())
	if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	if r := h.get(t, id); r.State != job.Done {
		t.Fatalf("record %s, want done", r.State)
	}
	if rs := h.gh.Runners(); len(rs) != 1 {
		t.Fatalf("runners %v, want the registration untouched", rs)
	}
	if n := len(h.queue.Sent()); n != sends {
		t.Fatalf("%d messages sent, want none", n-sends)
	}
	h.receiveNone(t)
}

// TestHungGitHubCallStillHandsOff: a JIT call that hangs is cut off
// HandOffReserve before the invocation ends, so the attempt is recorded as
// a network failure and handed off instead of dying with the lease held.
func TestHungGitHubCallStillHandsOff(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	// The deadline is a real one: the hang is cut a second in (the
	// deadline minus HandOffReserve), and the hand-off then has the
	// reserve, 9 s, to write and send before the invocation's deadline,
	// however slow the box.
	c := h.claimer(t, claimerOpt{safety: 9500 * time.Millisecond, reserve: 9 * time.Second})
	const id = 9101
	h.seed(t, id)
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.Slow(time.Minute))
	msgs := h.receive(t, 1)
	// Over the safety margin left: the message starts, the JIT call hangs
	// until the work context ends HandOffReserve before the invocation.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(10*time.Second))
	defer cancel()
	if resp := h.invokeCtx(t, ctx, c, msgs...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	r := h.get(t, id)
	if r.State != job.Queued || r.LastErrorClass != "network" || r.Attempt != 1 {
		t.Fatalf("record %s class %q attempt %d (%s), want queued, network, attempt 1", r.State, r.LastErrorClass, r.Attempt, r.LastError)
	}
	if s := h.lastSend(t); s.Msg.Version != r.Version {
		t.Fatalf("sent version %d, record %d", s.Msg.Version, r.Version)
	}
}

// TestLiveRunnerIsReused: the claimer died after provisioning, and the
// machine's runner came online. The next attempt's 409 finds it alive and
// claims the job with it: no second registration, no second machine.
func TestLiveRunnerIsReused(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	const id = 9201
	h.seed(t, id)
	h.spy.set(nil, func(n int) {
		if n == 1 {
			h.crash()
		}
	})
	h.invoke(t, h.claimer(t, claimerOpt{instance: "first"}), h.receive(t, 1)...)
	first := h.gh.Runners()
	if len(first) != 1 {
		t.Fatalf("runners %v, want one", first)
	}
	if err := h.gh.SetRunner(first[0].Name, "online", false); err != nil {
		t.Fatal(err)
	}
	r := h.get(t, id)
	h.clock.Set(job.FromMillis(r.LeaseExpiresAt).Add(time.Second))
	taken, err := h.store.TakeBack(context.Background(), r, job.Queued, h.clock.Now(), "lease expired", h.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.queue.Send(context.Background(), job.Message{JobID: id, Version: taken.Version}, 0); err != nil {
		t.Fatal(err)
	}
	h.invoke(t, h.claimer(t, claimerOpt{instance: "second"}), h.receive(t, 1)...)
	if got := h.get(t, id); got.State != job.Claimed || got.RunnerName != first[0].Name {
		t.Fatalf("record %s runner %q, want claimed by %s", got.State, got.RunnerName, first[0].Name)
	}
	if rs := h.gh.Runners(); len(rs) != 1 || rs[0].ID != first[0].ID {
		t.Fatalf("runners %v, want the first registration %d only", rs, first[0].ID)
	}
	if n := h.spy.Calls(); n != 1 {
		t.Fatalf("%d provisionings, want 1", n)
	}
	if n := h.instances(id); n != 1 {
		t.Fatalf("%d machines (dispatches), want 1", n)
	}
}

// TestSpareRunnerAfterDone: the job is cancelled (or taken by a runner that
// is not ours) while this attempt provisions. The claim cannot be recorded,
// and the runner it registered would idle on its machine: it is removed.
// When GitHub names our runner, the job is ours and nothing is touched.
func TestSpareRunnerAfterDone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		id        int64
		takenBy   func(id int64) string
		wantKept  bool
		wantParam bool
	}{
		{name: "cancelled", id: 9201, takenBy: func(int64) string { return "" }},
		{name: "taken by another runner", id: 9202, takenBy: func(int64) string { return "hosted-runner-7" }},
		{name: "taken by ours", id: 9203, takenBy: func(id int64) string { return job.RunnerName("linux", id) }, wantKept: true, wantParam: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{ec2: true})
			c := h.claimer(t, claimerOpt{})
			h.seed(t, tt.id)
			h.spy.set(nil, func(int) { h.markDone(t, tt.id, tt.takenBy(tt.id)) })
			if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("batch item failures %v", resp.BatchItemFailures)
			}
			if r := h.get(t, tt.id); r.State != job.Done {
				t.Fatalf("record %s, want done", r.State)
			}
			rs := h.gh.Runners()
			if kept := len(rs) == 1; kept != tt.wantKept {
				t.Fatalf("runners %v, want kept=%v", rs, tt.wantKept)
			}
			if has := h.hasParameter(job.RunnerName("linux", tt.id)); has != tt.wantParam {
				t.Fatalf("JIT parameter present=%v, want %v", has, tt.wantParam)
			}
		})
	}
}

package claim_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
)

// TestSecondaryLimitBlocksTheInstallation: GitHub answers one claim with a
// secondary rate limit (a 403 with Retry-After, or a 429 naming no wait:
// then at least a minute). GitHub asks every caller to wait, so the jobs
// after it, in the same claimer and in another one that never met the
// limit, are deferred past the block without a GitHub call, instead of
// each spending a refused call; after the block they are claimed.
func TestSecondaryLimitBlocksTheInstallation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		fault ghfake.Fault
		block time.Duration
		// same: the claimer that met the limit claims after the block.
		// (After a Retry-After, go-github itself holds that claimer's
		// client for it by the wall clock, which the test does not move.)
		same bool
	}{
		{"403 with Retry-After", ghfake.SecondaryRateLimit(2 * time.Minute), 2 * time.Minute, false},
		{"429 without Retry-After", ghfake.TooManyRequests(0), ratelimit.MinBlock, true},
		// Only GitHub's message says so: the claimer records it, not the
		// transport; and go-github must not hold it until the primary reset.
		{"403 without Retry-After", ghfake.SecondaryRateLimit(0), ratelimit.MinBlock, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			a := h.claimer(t, claimerOpt{instance: "a", seed: 1})
			b := h.claimer(t, claimerOpt{instance: "b", seed: 2})
			h.gh.SetRateLimit(installation, 5000, 4000, h.clock.Now().Add(30*time.Minute))
			for id := int64(2201); id <= 2203; id++ {
				h.seed(t, id)
			}
			msgs := h.receive(t, 3)

			h.gh.Fail(ghfake.RouteRepoJIT, 1, tt.fault)
			met := h.clock.Now()
			h.invoke(t, a, msgs[0])
			first := h.get(t, jobOf(t, msgs[0].Body))
			if first.State != job.Queued || first.Attempt != 1 || first.LastErrorClass != "rate_limit" {
				t.Fatalf("the job that met the limit: %s attempt %d class %q, want queued, attempt 1, rate_limit", first.State, first.Attempt, first.LastErrorClass)
			}
			end := met.Add(tt.block)

			// The same claimer, a second later, and another claimer that
			// learns the block only from the shared item.
			for i, c := range []struct {
				name string
				msg  int
			}{{"the same claimer", 1}, {"another claimer", 2}} {
				h.clock.Advance(time.Second)
				before := h.gh.Stats()
				cl := a
				if i == 1 {
					cl = b
				}
				h.invoke(t, cl, msgs[c.msg])
				after := h.gh.Stats()
				if after.JITCalls != before.JITCalls || len(after.TokenRequests) != len(before.TokenRequests) || after.TokenRequests[installation] != before.TokenRequests[installation] {
					t.Fatalf("%s called GitHub during the block: before %+v after %+v", c.name, before, after)
				}
				r := h.get(t, jobOf(t, msgs[c.msg].Body))
				if r.State != job.Queued || r.Attempt != 0 || r.LastErrorClass != "rate_limit" {
					t.Fatalf("%s: record %s attempt %d class %q, want queued, attempt 0 (deferred, not attempted), rate_limit", c.name, r.State, r.Attempt, r.LastErrorClass)
				}
				s := h.lastSend(t)
				back := h.clock.Now().Add(s.Delay)
				if back.Before(end.Add(5*time.Second)) || !back.Before(end.Add(25*time.Second)) {
					t.Fatalf("%s: message back at block end%+v, want end + [5s, 25s)", c.name, back.Sub(end))
				}
			}

			// After the block: claimed, one JIT call each.
			h.clock.Set(end.Add(25 * time.Second))
			before := h.gh.Stats().JITCalls
			after := b
			if tt.same {
				after = a
			}
			h.invoke(t, after, h.receive(t, 3)...)
			for _, m := range msgs {
				if r := h.get(t, jobOf(t, m.Body)); r.State != job.Claimed {
					t.Errorf("job %d after the block: %s, want claimed", r.JobID, r.State)
				}
			}
			if got := h.gh.Stats().JITCalls - before; got != 3 {
				t.Errorf("JIT calls after the block %d, want 3", got)
			}
		})
	}
}

// TestAWSThrottleBlocksNothing: an AWS throttle is of the same class as a
// secondary limit, but binds only its own call: the next job calls GitHub.
func TestAWSThrottleBlocksNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	a := h.claimer(t, claimerOpt{instance: "a", seed: 1})
	h.seed(t, 2301)
	h.seed(t, 2302)
	msgs := h.receive(t, 2)
	h.prov.Fail(awsErr("RunInstances", "RequestLimitExceeded", "Request limit exceeded."), 1)
	h.invoke(t, a, msgs[0])
	if r := h.get(t, jobOf(t, msgs[0].Body)); r.State != job.Queued || r.LastErrorClass != "rate_limit" {
		t.Fatalf("throttled job: %s class %q, want queued, rate_limit", r.State, r.LastErrorClass)
	}
	h.clock.Advance(time.Second)
	h.invoke(t, a, msgs[1])
	if r := h.get(t, jobOf(t, msgs[1].Body)); r.State != job.Claimed {
		t.Fatalf("the next job: %s, want claimed (an AWS throttle blocks no GitHub call)", r.State)
	}
	if rd, err := h.store.LoadRate(context.Background(), installation); err == nil && !rd.BlockedUntil.IsZero() {
		t.Errorf("shared item %+v: an AWS throttle recorded a block", rd)
	}
}

// TestTokenExchangeLimitBlocksNoInstallation: the App's token exchange is
// refused (its budget at 0, or a secondary limit). go-github then refuses
// the installation's next calls itself, from its memory of that answer.
// Neither the answer nor the memory is the installation's: the shared
// item records no exhaustion and no block for it.
func TestTokenExchangeLimitBlocksNoInstallation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		refuse func(h *harness)
	}{
		{"the App's budget at 0", func(h *harness) {
			h.gh.SetAppRateLimit(5000, 0, h.clock.Now().Add(45*time.Minute).Truncate(time.Second))
		}},
		{"a secondary limit on the exchange", func(h *harness) {
			h.gh.Fail(ghfake.RouteAccessToken, 1, ghfake.SecondaryRateLimit(2*time.Minute))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			c := h.claimer(t, claimerOpt{instance: "a", seed: 1})
			h.seed(t, 2401)
			h.seed(t, 2402)
			msgs := h.receive(t, 2)
			tt.refuse(h)
			h.invoke(t, c, msgs[0])
			h.clock.Advance(time.Second)
			h.invoke(t, c, msgs[1])
			for i, m := range msgs {
				r := h.get(t, jobOf(t, m.Body))
				if r.State != job.Queued || r.LastErrorClass != "rate_limit" {
					t.Errorf("job %d: %s class %q, want queued, rate_limit", r.JobID, r.State, r.LastErrorClass)
				}
				// The first reached GitHub (the exchange); the second was
				// refused by go-github's memory: deferred, not attempted.
				if want := 1 - i; r.Attempt != want || (i == 1 && !strings.HasPrefix(r.LastError, "deferred: ")) {
					t.Errorf("job %d: attempt %d, error %q; want attempt %d (a refusal from memory is no attempt)", r.JobID, r.Attempt, r.LastError, want)
				}
			}
			if got, err := h.store.LoadRate(context.Background(), installation); err == nil && (got.Remaining == 0 && got.Known() || !got.BlockedUntil.IsZero()) {
				t.Errorf("shared reading %+v: the App's limit recorded as the installation's", got)
			}
		})
	}
}

// TestRepeatedSecondaryLimitsBackOff: GitHub refuses again right after the
// block: the next block is twice as long, and the job after it is deferred
// to that longer block's end.
func TestRepeatedSecondaryLimitsBackOff(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{instance: "a", seed: 1})
	h.gh.SetRateLimit(installation, 5000, 4000, h.clock.Now().Add(30*time.Minute))
	for id := int64(2501); id <= 2503; id++ {
		h.seed(t, id)
	}
	msgs := h.receive(t, 3)
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.TooManyRequests(0))
	h.invoke(t, c, msgs[0]) // blocked for a minute
	h.clock.Advance(ratelimit.MinBlock + 10*time.Second)
	h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.TooManyRequests(0))
	again := h.clock.Now()
	h.invoke(t, c, msgs[1]) // refused again just after: two minutes
	if r := h.get(t, jobOf(t, msgs[1].Body)); r.Attempt != 1 || r.LastErrorClass != "rate_limit" {
		t.Fatalf("second job: attempt %d class %q, want it attempted and refused", r.Attempt, r.LastErrorClass)
	}
	h.clock.Advance(time.Second)
	h.invoke(t, c, msgs[2])
	end := again.Add(2 * ratelimit.MinBlock)
	back := h.clock.Now().Add(h.lastSend(t).Delay)
	if back.Before(end.Add(5*time.Second)) || !back.Before(end.Add(25*time.Second)) {
		t.Fatalf("third job back at the doubled block's end%+v, want end + [5s, 25s)", back.Sub(end))
	}
}

// memoryAfterAReach is a GitHub whose JIT call reaches GitHub and answers
// 409 (a runner of that name exists), and whose runner look-up is then
// refused by go-github's memory without a request.
type memoryAfterAReach struct{ claim.GitHub }

func (g memoryAfterAReach) GenerateJIT(ctx context.Context, installationID int64, req ghapp.JITRequest) (ghapp.JIT, error) {
	_, _ = g.GitHub.GenerateJIT(ctx, installationID, req) // reaches the stand-in
	return ghapp.JIT{}, &github.ErrorResponse{Message: "Already exists - A runner with the name already exists.",
		Response: &http.Response{StatusCode: http.StatusConflict, Header: http.Header{"X-Github-Request-Id": {"1"}},
			Request: &http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/repos/octo/repo/actions/runners/generate-jitconfig"}}}}
}

func (g memoryAfterAReach) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	wait := 2 * time.Minute
	return ghapp.Runner{}, &github.AbuseRateLimitError{Message: "API secondary rate limit exceeded, not making remote request.", RetryAfter: &wait,
		Response: &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{},
			Request: &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/repos/octo/repo/actions/runners"}}}}
}

// TestMemoryRefusalAfterAReachIsAnAttempt: a refusal from go-github's
// memory is no attempt only when nothing of the attempt reached GitHub;
// after a call that did, the attempt counts and is retried.
func TestMemoryRefusalAfterAReachIsAnAttempt(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	c := h.claimer(t, claimerOpt{instance: "a", seed: 1, github: func(g claim.GitHub) claim.GitHub { return memoryAfterAReach{g} }})
	h.seed(t, 2601)
	h.invoke(t, c, h.receive(t, 1)...)
	r := h.get(t, 2601)
	if r.State != job.Queued || r.Attempt != 1 || strings.HasPrefix(r.LastError, "deferred") {
		t.Fatalf("record %s attempt %d error %q, want queued after attempt 1 (the JIT call reached GitHub)", r.State, r.Attempt, r.LastError)
	}
}

// TestBurstMeetsTheSecondaryLimitOnce: 200 jobs of one installation at
// once. GitHub's secondary limit on points (900 a minute, 5 a POST) lets
// 180 registrations through, then refuses; ghfake enforces it. The claims
// after the first refusal are deferred past the block without calling
// GitHub, so the refusals stay within what was in flight (the batch's
// workers), not one per job of the backlog, in this claimer and in
// another one; after the block, the rest are claimed.
func TestBurstMeetsTheSecondaryLimitOnce(t *testing.T) {
	t.Parallel()
	const jobs, workers = 200, 4
	h := setup(t, setupOpt{})
	a := h.claimer(t, claimerOpt{instance: "a", seed: 1, concurrency: workers})
	for id := int64(1); id <= jobs; id++ {
		h.seed(t, 30_000+id)
	}
	for range jobs / 10 {
		h.invoke(t, a, h.receive(t, 10)...)
	}
	claimed := func() int {
		n := 0
		for id := int64(1); id <= jobs; id++ {
			if h.get(t, 30_000+id).State == job.Claimed {
				n++
			}
		}
		return n
	}
	st := h.gh.Stats()
	if n := claimed(); n < 180-workers || n > 180 {
		t.Fatalf("%d claimed at once, want about 180 (900 points a minute)", n)
	}
	if st.SecondaryLimited < 1 || st.SecondaryLimited > workers || st.JITCalls > 180+workers {
		t.Fatalf("GitHub refused %d calls of %d JIT calls for %d jobs: want at least one and at most the %d in flight, no call per deferred job",
			st.SecondaryLimited, st.JITCalls, jobs, workers)
	}
	// Deferred by the block, not attempted: go-github's own hold of the
	// client would also keep the calls from GitHub, but each job would
	// then spend an attempt on a refusal it made up.
	if n := h.logs.count(t, "deferred_rate_limit"); n < jobs-180-workers {
		t.Fatalf("%d claims deferred by the block, want the %d or so neither claimed nor refused", n, jobs-180)
	}

	// During the block, another claimer (which never met the limit, and
	// whose go-github holds nothing) gets the deferred copies: it learns
	// the block from the shared rate item and defers them without a call.
	h.clock.Advance(time.Second)
	c := h.claimer(t, claimerOpt{instance: "c", seed: 3, concurrency: workers})
	h.invoke(t, c, h.receive(t, 10)...)
	if got := h.gh.Stats(); got.JITCalls != st.JITCalls || got.SecondaryLimited != st.SecondaryLimited {
		t.Fatalf("a claimer called GitHub during the block: JIT calls %d → %d, refusals %d → %d",
			st.JITCalls, got.JITCalls, st.SecondaryLimited, got.SecondaryLimited)
	}

	// A minute on (the block's end and its jitter), another claimer takes
	// what was deferred.
	h.clock.Advance(time.Minute + 25*time.Second)
	b := h.claimer(t, claimerOpt{instance: "b", seed: 2, concurrency: workers})
	for {
		msgs := h.esm.receive(10)
		if len(msgs) == 0 {
			break
		}
		h.invoke(t, b, msgs...)
	}
	if n := claimed(); n != jobs {
		t.Errorf("%d of %d claimed after the block", n, jobs)
	}
	if got := h.gh.Stats().SecondaryLimited; got != st.SecondaryLimited {
		t.Errorf("%d more refusals after the block, want none", got-st.SecondaryLimited)
	}
}

package ghfake_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestSecondaryLimitPointsPerMinute: GitHub refuses an installation past
// 900 points a minute on one endpoint (a POST costs 5, a GET 1) with its
// secondary rate limit's 403 and Retry-After, whatever its hourly budget
// says: 180 runner registrations a minute, not 5000. A fake that
// registered runners without end hid from every burst test the limit a
// real burst meets. Another endpoint has points of its own.
func TestSecondaryLimitPointsPerMinute(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	f := setup(t, ghfake.WithClock(clock))
	ctx := context.Background()
	token := f.fake.IssueToken(inst)
	// go-github holds a 403 with Retry-After on its own (wall) clock: a
	// new client for each request asks the fake every time.
	gh := func() *github.Client { return client(t, f.srv.URL+"/", token) }
	register := func(i int) error {
		_, _, err := gh().Actions.GenerateRepoJITConfig(ctx, "octo", "hello", jitReq(fmt.Sprintf("linux-%d", i)))
		return err
	}
	for i := range 180 {
		if i == 90 {
			now.Add(int64(30 * time.Second)) // the window is a sliding minute
		}
		if err := register(i); err != nil {
			t.Fatalf("registration %d (%d points this minute): %v", i+1, 5*(i+1), err)
		}
	}
	err := register(180)
	var abuse *github.AbuseRateLimitError
	if !errors.As(err, &abuse) || abuse.RetryAfter == nil {
		t.Fatalf("181st registration in a minute (905 points): %v, want GitHub's secondary rate limit with Retry-After", err)
	}
	// The first 90 (450 points) leave the window 60 s after they were
	// made, 30 s from now: that is when there is room again.
	if *abuse.RetryAfter != 30*time.Second {
		t.Errorf("Retry-After %v, want 30s (until the minute's oldest points leave it)", *abuse.RetryAfter)
	}
	if abuse.Response.StatusCode != 403 || f.fake.Stats().SecondaryLimited != 1 {
		t.Errorf("status %d, %d refused counted: want 403 and 1", abuse.Response.StatusCode, f.fake.Stats().SecondaryLimited)
	}
	if rem := abuse.Response.Header.Get("X-RateLimit-Remaining"); rem != "4820" {
		t.Errorf("X-RateLimit-Remaining %q, want 4820 (180 charged, the refused one not): the hourly budget is not what ran out", rem)
	}
	// Another endpoint (the runner list) has its points of its own: 900
	// reads a minute, the 901st refused.
	for i := range 900 {
		if _, _, err := gh().Actions.ListRunners(ctx, "octo", "hello", nil); err != nil {
			t.Fatalf("read %d of the runner list with the registrations' points spent: %v", i+1, err)
		}
	}
	if _, _, err := gh().Actions.ListRunners(ctx, "octo", "hello", nil); !errors.As(err, &abuse) {
		t.Errorf("the 901st read of a minute: %v, want the secondary limit", err)
	}
	now.Add(int64(30 * time.Second))
	if err := register(181); err != nil {
		t.Errorf("after the Retry-After: %v, want the registration made", err)
	}

	// Another installation has its own points.
	other := client(t, f.srv.URL+"/", f.fake.IssueToken(inst+1))
	if _, _, err := other.Actions.ListRunners(ctx, "octo", "hello", nil); errors.As(err, &abuse) {
		t.Errorf("another installation refused by this one's points: %v", err)
	}
}

// TestSecondaryLimitLifted: WithSecondaryLimit(0) is for a benchmark that
// measures our side alone.
func TestSecondaryLimitLifted(t *testing.T) {
	t.Parallel()
	f := setup(t, ghfake.WithSecondaryLimit(0))
	for i := range 200 {
		if _, _, err := f.gh.Actions.GenerateRepoJITConfig(context.Background(), "octo", "hello", jitReq(fmt.Sprintf("linux-%d", i))); err != nil {
			t.Fatalf("registration %d with the limit lifted: %v", i+1, err)
		}
	}
}

// TestSecondaryLimitBelowOnePost: a limit below one POST's 5 points
// refuses every POST (it was charged and served: its points never fitted
// the refusal's arithmetic), with a minute's Retry-After.
func TestSecondaryLimitBelowOnePost(t *testing.T) {
	t.Parallel()
	f := setup(t, ghfake.WithSecondaryLimit(4))
	_, _, err := f.gh.Actions.GenerateRepoJITConfig(context.Background(), "octo", "hello", jitReq("linux-1"))
	var abuse *github.AbuseRateLimitError
	if !errors.As(err, &abuse) || abuse.RetryAfter == nil || *abuse.RetryAfter != time.Minute {
		t.Fatalf("a POST under a 4-point limit: %v, want refused with a minute's Retry-After", err)
	}
}

// TestConcurrentRequestsLimit: GitHub allows one installation at most 100
// requests in flight ("No more than 100 concurrent requests are
// allowed"); the 101st gets the secondary limit's 403 with no Retry-After
// (a client then waits at least a minute), uncharged, whatever its points
// and budget. Another installation is not held by it, and once the
// hundred are answered the installation is served again.
func TestConcurrentRequestsLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		held ghfake.Fault
		// remaining is the budget the refusal reports: the held hundred
		// are charged once served.
		remaining string
	}{
		{"slow to answer", ghfake.Slow(time.Second), "5000"},
		{"slow after serving", ghfake.Slow(time.Second).AfterEffect(), "4900"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			concurrentRequestsLimit(t, tt.held, tt.remaining)
		})
	}
}

func concurrentRequestsLimit(t *testing.T, held ghfake.Fault, remaining string) {
	entered, release := make(chan struct{}), make(chan struct{})
	f := setup(t, ghfake.WithSleep(func(ctx context.Context, _ time.Duration) error {
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the server closes: a failed test leaves none held
	ctx := context.Background()
	// Each of the first hundred reads is held (before or after it was
	// served): in flight until the test releases it.
	f.fake.Fail(ghfake.RouteRepoRunners, ghfake.DefaultConcurrentRequests, held)
	var wg sync.WaitGroup
	errs := make(chan error, ghfake.DefaultConcurrentRequests)
	for range ghfake.DefaultConcurrentRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := f.gh.Actions.ListRunners(ctx, "octo", "hello", nil)
			errs <- err
		}()
	}
	for range ghfake.DefaultConcurrentRequests {
		<-entered
	}
	_, _, err := f.gh.Actions.ListRunners(ctx, "octo", "hello", nil)
	var abuse *github.AbuseRateLimitError
	if !errors.As(err, &abuse) || abuse.Response.StatusCode != 403 {
		t.Fatalf("the 101st request in flight: %v, want GitHub's secondary rate limit (403)", err)
	}
	if ra := abuse.Response.Header.Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After %q, want none (GitHub names no wait for this limit)", ra)
	}
	if rem := abuse.Response.Header.Get("X-RateLimit-Remaining"); rem != remaining {
		t.Errorf("X-RateLimit-Remaining %q, want %s (the refused one uncharged)", rem, remaining)
	}
	other := client(t, f.srv.URL+"/", f.fake.IssueToken(inst+1))
	if _, _, err := other.Actions.ListRunners(ctx, "octo", "hello", nil); err != nil {
		t.Errorf("another installation while this one has a hundred in flight: %v", err)
	}
	free()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a held request: %v, want answered", err)
		}
	}
	// go-github holds a secondary limit on its own: a new client asks the fake.
	again := client(t, f.srv.URL+"/", f.fake.IssueToken(inst))
	if _, _, err := again.Actions.ListRunners(ctx, "octo", "hello", nil); err != nil {
		t.Errorf("after the hundred were answered: %v, want served", err)
	}
	if got := f.fake.Stats().SecondaryLimited; got != 1 {
		t.Errorf("SecondaryLimited %d, want 1", got)
	}
}

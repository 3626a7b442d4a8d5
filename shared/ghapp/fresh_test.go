package ghapp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// lagging is GitHub refusing the first refuse API calls (not the token
// exchange) with 401 Bad credentials, as it refuses an installation token
// that has not replicated yet; the rest reach fake.
type lagging struct {
	fake    *ghfake.Server
	refuse  atomic.Int32
	clock   *clocktest.Clock
	mu      sync.Mutex
	waits   []time.Duration
	tokens  atomic.Int32
	client  *ghapp.Client
	servers *httptest.Server
}

func newLagging(t *testing.T) *lagging {
	t.Helper()
	pemBytes, pub := testKey(t)
	l := &lagging{clock: clocktest.New(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))}
	l.fake = ghfake.New(ghfake.WithAppID(appID), ghfake.WithPublicKey(pub), ghfake.WithClock(l.clock.Now))
	l.servers = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isTokenRequest(r) {
			l.tokens.Add(1)
		} else if l.refuse.Add(-1) >= 0 {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}`)
			return
		}
		l.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(l.servers.Close)
	c, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: pemBytes, BaseURL: l.servers.URL, Now: l.clock.Now,
		Sleep: func(ctx context.Context, d time.Duration) error {
			l.mu.Lock()
			l.waits = append(l.waits, d)
			l.mu.Unlock()
			l.clock.Advance(d)
			return ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	l.client = c
	return l
}

// TestFreshTokenRefusalIsWaitedOut: GitHub may refuse an installation
// token for a few seconds after minting it (401 until it has replicated;
// octokit's auth-app retries such a 401 while the token is younger than
// 5 s). A 401 is non_retryable, so the first call of a cold start would
// fail its claim for good: within 5 s of the token's receipt the request
// is sent again with the same token after 1 s, 2 s, then 3 s (its body
// too), and only a refusal past that stands. A token received long ago is
// not waited for: it is dropped and a new one fetched, whose own refusal is
// waited for in turn.
func TestFreshTokenRefusalIsWaitedOut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		old       bool  // the token was received ten minutes before the refusal
		refuse    int32 // 401s before GitHub takes it
		wantWaits []time.Duration
		wantErr   bool
		tokens    int32
	}{
		{name: "one refusal of a token minted now", refuse: 1, wantWaits: []time.Duration{time.Second}, tokens: 1},
		{name: "two refusals", refuse: 2, wantWaits: []time.Duration{time.Second, 2 * time.Second}, tokens: 1},
		// The last try at 3 s is still inside the 5 s window: one more,
		// about 6 s after the token's receipt (octokit's schedule).
		{name: "three refusals", refuse: 3, wantWaits: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, tokens: 1},
		{name: "refused past the window: stands", refuse: 10, wantWaits: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, wantErr: true, tokens: 1},
		{name: "old token refused: a new one, no wait", old: true, refuse: 1, tokens: 2},
		{name: "old token refused, then its new one once: that one waited for", old: true, refuse: 2, wantWaits: []time.Duration{time.Second}, tokens: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLagging(t)
			ctx := context.Background()
			if tt.old {
				if _, err := l.client.GenerateJIT(ctx, inst, repoJIT("first")); err != nil {
					t.Fatal(err)
				}
				l.clock.Advance(10 * time.Minute)
			}
			l.refuse.Store(tt.refuse)
			jit, err := l.client.GenerateJIT(ctx, inst, repoJIT("lagged"))
			if slices.Compare(l.waits, tt.wantWaits) != 0 {
				t.Errorf("waits %v, want %v", l.waits, tt.wantWaits)
			}
			if got := l.tokens.Load(); got != tt.tokens {
				t.Errorf("%d token exchanges, want %d", got, tt.tokens)
			}
			if tt.wantErr {
				if fl := failure.Classify(err); err == nil || fl.Class != failure.NonRetryable {
					t.Fatalf("err %v, want the 401 to stand (non_retryable)", err)
				}
				return
			}
			if err != nil || jit.RunnerID == 0 {
				t.Fatalf("GenerateJIT: %+v, %v; want the runner registered once GitHub takes the token", jit, err)
			}
			if _, ok := l.fake.RunnerByName("lagged"); !ok {
				t.Fatal("the runner is not registered: the body was not sent again")
			}
		})
	}
}

// TestStaleTokenThenExchangeFailure: a cached token GitHub refuses is
// dropped and a new one asked for; when that exchange fails for a passing
// reason (a 502), its error is the answer (server_side: retried), not the
// stale token's 401 (non_retryable: the job failed for good).
func TestStaleTokenThenExchangeFailure(t *testing.T) {
	t.Parallel()
	f := revoked(t)
	f.fake.Fail(ghfake.RouteAccessToken, 1, ghfake.ServerError(http.StatusBadGateway))
	_, err := f.client.GenerateJIT(context.Background(), inst, repoJIT("after-revoke"))
	if fl := failure.Classify(err); err == nil || !fl.Retryable() {
		t.Fatalf("err %v classified %v (%q), want the exchange's 502: retryable", err, fl.Class, fl.Reason)
	}
}

// TestAPIErrorCarriesNoToken: an API error's response keeps the request
// as the caller made it, without the installation token, so nothing that
// dumps or logs it can leak the credential.
func TestAPIErrorCarriesNoToken(t *testing.T) {
	t.Parallel()
	c := answering(t, http.MethodPost, "/repos/octo/hello/actions/runners/generate-jitconfig", http.StatusUnprocessableEntity,
		`{"message":"Validation Failed","documentation_url":"https://docs.github.com/rest","status":"422"}`)
	_, err := c.GenerateJIT(context.Background(), inst, repoJIT("a"))
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil || er.Response.Request == nil {
		t.Fatalf("err = %v, want a go-github error response", err)
	}
	if auth := er.Response.Request.Header.Get("Authorization"); auth != "" {
		t.Fatalf("the error's request carries Authorization (%d characters)", len(auth))
	}
}

// TestExchangeNotFoundIsNotAGoneRunner: a 404 from the token exchange (the
// installation is gone) never reached the runner: DeleteRunner must not
// report the runner deleted, nor IsAlreadyExists/IsStillRunning read the
// exchange's answer as the route's.
func TestExchangeNotFoundIsNotAGoneRunner(t *testing.T) {
	t.Parallel()
	c := answering(t, http.MethodPost, "/app/installations/42/access_tokens", http.StatusNotFound,
		`{"message":"Not Found","documentation_url":"https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app","status":"404"}`)
	if err := c.DeleteRunner(context.Background(), inst, ghapp.ScopeRepo, "octo", "hello", 99); err == nil {
		t.Fatal("DeleteRunner = nil though the token exchange was refused: no DELETE was sent")
	}
}

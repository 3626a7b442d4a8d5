package ghapp_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

func isTokenRequest(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/access_tokens") }

// recording is a network transport that keeps the Authorization header of
// every request, token exchange and API call alike.
type recording struct {
	mu    sync.Mutex
	auths []string // "token-request <auth>" or "api <auth>"
}

func (rec *recording) transport() http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		kind := "api"
		if isTokenRequest(r) {
			kind = "token-request"
		}
		rec.mu.Lock()
		rec.auths = append(rec.auths, kind+" "+r.Header.Get("Authorization"))
		rec.mu.Unlock()
		return upstream.RoundTrip(r)
	})
}

func (rec *recording) all() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.auths...)
}

// TestAppJWT: the App JWT is RS256, verifies with the App's public key, and
// carries iat = now − 60 s, exp = iat + 10 min, iss = the App id as a
// string; for a PKCS#1 and a PKCS#8 key alike.
func TestAppJWT(t *testing.T) {
	t.Parallel()
	pkcs1, pub := testKey(t)
	block, _ := pem.Decode(pkcs1)
	priv, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8 := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 500_000_000, time.UTC)
	for name, key := range map[string][]byte{"pkcs1": pkcs1, "pkcs8": pkcs8} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := &recording{}
			now := func() time.Time { return t0 }
			f := setup(t, option{fake: []ghfake.Option{ghfake.WithClock(now)}, cfg: func(c *ghapp.Config) {
				c.PrivateKey, c.Now, c.Transport = key, now, rec.transport()
			}})
			f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
			if _, err := f.client.JobStatus(context.Background(), inst, "octo", "hello", 7); err != nil {
				t.Fatal(err)
			}
			auths := rec.all()
			if len(auths) != 2 || !strings.HasPrefix(auths[0], "token-request Bearer ") {
				t.Fatalf("requests = %q, want a token request with a Bearer JWT, then the API call", auths)
			}
			parts := strings.Split(strings.TrimPrefix(auths[0], "token-request Bearer "), ".")
			if len(parts) != 3 {
				t.Fatalf("JWT has %d parts, want 3", len(parts))
			}
			var head map[string]string
			decode(t, parts[0], &head)
			if head["alg"] != "RS256" || head["typ"] != "JWT" {
				t.Errorf("header = %v, want alg RS256, typ JWT", head)
			}
			sig, err := base64.RawURLEncoding.DecodeString(parts[2])
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
			if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
				t.Errorf("signature does not verify with the App's public key: %v", err)
			}
			var claims map[string]json.RawMessage
			decode(t, parts[1], &claims)
			want := map[string]string{
				"iat": "1772600707", // t0 − 60 s, whole seconds
				"exp": "1772601307", // iat + 600 s: t0 + 9 min
				"iss": `"1234"`,
			}
			if len(claims) != len(want) {
				t.Errorf("claims = %s, want exactly iat, exp, iss", mustJSON(t, claims))
			}
			for k, v := range want {
				if string(claims[k]) != v {
					t.Errorf("claim %s = %s, want %s", k, claims[k], v)
				}
			}
			if want := "api token ghs_"; !strings.HasPrefix(auths[1], want) {
				t.Errorf("API call authorised by %q, want the installation token", auths[1])
			}
		})
	}
}

func decode(t *testing.T, seg string, v any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

// TestTokenRefreshedBeforeExpiry: the installation token (GitHub: valid for
// one hour) is reused until 5 minutes before its expires_at, then replaced,
// and the new token authorises the calls after that.
func TestTokenRefreshedBeforeExpiry(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	clk := clocktest.New(t0)
	rec := &recording{}
	f := setup(t, option{
		fake: []ghfake.Option{ghfake.WithClock(clk.Now)},
		cfg:  func(c *ghapp.Config) { c.Now, c.Transport = clk.Now, rec.transport() },
	})
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
	steps := []struct {
		at        time.Duration
		exchanges int
	}{
		{at: 0, exchanges: 1},
		{at: 30 * time.Minute, exchanges: 1},
		{at: 55*time.Minute - time.Second, exchanges: 1},
		{at: 55 * time.Minute, exchanges: 2}, // expires_at − 5 min
		{at: 55*time.Minute + 54*time.Minute, exchanges: 2},
		{at: 2 * 55 * time.Minute, exchanges: 3},
	}
	var tokens []string
	for _, st := range steps {
		clk.Set(t0.Add(st.at))
		if _, err := f.client.JobStatus(context.Background(), inst, "octo", "hello", 7); err != nil {
			t.Fatal(err)
		}
		if got := f.fake.Stats().TokenRequests[inst]; got != st.exchanges {
			t.Errorf("at +%v: %d token exchanges, want %d", st.at, got, st.exchanges)
		}
		auths := rec.all()
		tokens = append(tokens, auths[len(auths)-1])
	}
	for i := 1; i < len(steps); i++ {
		renewed := steps[i].exchanges != steps[i-1].exchanges
		if changed := tokens[i] != tokens[i-1]; changed != renewed {
			t.Errorf("at +%v: call authorised by %q after %q; want a new token only after an exchange", steps[i].at, tokens[i], tokens[i-1])
		}
	}
}

// handlerTransport serves requests in memory, so every goroutine of a
// synctest bubble is visible to synctest.Wait.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	in := r.Clone(r.Context())
	if in.Body == nil {
		in.Body = http.NoBody // a server's request always has a body
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, in)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// heldExchanges is a client of fake, in memory (handlerTransport), whose
// token exchanges wait until release is closed; exchanges counts them.
func heldExchanges(t *testing.T, fake *ghfake.Server, pemBytes []byte) (c *ghapp.Client, release chan struct{}, exchanges *atomic.Int32) {
	t.Helper()
	release, exchanges = make(chan struct{}), new(atomic.Int32)
	held := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isTokenRequest(r) {
			exchanges.Add(1)
			<-release
		}
		fake.ServeHTTP(w, r)
	})
	c, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: pemBytes, BaseURL: "http://github.test",
		Transport: handlerTransport{held}})
	if err != nil {
		t.Fatal(err)
	}
	return c, release, exchanges
}

// TestConcurrentCallersShareOneExchange: callers that need a token while an
// exchange is in flight wait for it instead of starting their own, whether
// it succeeds or fails (a bad key must cost one POST, not one per message),
// and each gets the outcome. A refusal is GitHub's own answer for the
// caller that started the exchange only: the others made no request, and
// meet it marked held (Remembered), as the callers after them do, so a
// batch of claims waiting on one refused exchange is one attempt and one
// app_refused, not one each.
func TestConcurrentCallersShareOneExchange(t *testing.T) {
	t.Parallel()
	const callers = 8
	each := func(check func(t *testing.T, err error)) func(t *testing.T, errs []error) {
		return func(t *testing.T, errs []error) {
			for _, err := range errs {
				check(t, err)
			}
		}
	}
	tests := []struct {
		name   string
		fault  []ghfake.Fault
		refuse bool // GitHub refuses the App's installation (suspended)
		check  func(t *testing.T, errs []error)
	}{
		{name: "success", check: each(func(t *testing.T, err error) {
			if err != nil {
				t.Errorf("JobStatus: %v", err)
			}
		})},
		{name: "failure", fault: []ghfake.Fault{ghfake.ServerError(502)}, check: each(func(t *testing.T, err error) {
			// Each caller reads its own copy of GitHub's answer, and none
			// is held: a 5xx may pass at once.
			if er := errorResponse(t, err, 502); er.Message == "" {
				t.Errorf("message empty: the body was consumed by another caller")
			}
			if failure.Classify(err).Remembered {
				t.Errorf("a 502 marked held: %v", err)
			}
		})},
		{name: "refusal", refuse: true, check: func(t *testing.T, errs []error) {
			own := 0
			for _, err := range errs {
				fl := failure.Classify(err)
				if er := errorResponse(t, err, 403); er.Message == "" || !fl.AppRefused {
					t.Errorf("%v classified %+v: want GitHub's refusal, AppRefused, with its message", err, fl)
				}
				if !fl.Remembered {
					own++
				}
			}
			if own != 1 {
				t.Errorf("%d of %d callers met the refusal as their own answer, want 1 (the one whose exchange it was); the rest held", own, callers)
			}
		}},
	}
	pemBytes, pub := testKey(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fake := ghfake.New(ghfake.WithAppID(appID), ghfake.WithPublicKey(pub))
				fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
				for _, fault := range tt.fault {
					fake.Fail(ghfake.RouteAccessToken, 1, fault)
				}
				if tt.refuse {
					fake.Suspend(inst)
				}
				c, release, exchanges := heldExchanges(t, fake, pemBytes)
				errs := make(chan error, callers)
				for range callers {
					go func() {
						_, err := c.JobStatus(context.Background(), inst, "octo", "hello", 7)
						errs <- err
					}()
				}
				synctest.Wait() // every caller is blocked: on the exchange, or waiting for it
				if n := exchanges.Load(); n != 1 {
					t.Errorf("%d token exchanges in flight for %d concurrent callers, want 1", n, callers)
				}
				close(release)
				got := make([]error, 0, callers)
				for range callers {
					got = append(got, <-errs)
				}
				tt.check(t, got)
				if n := exchanges.Load(); n != 1 {
					t.Errorf("%d token exchanges for %d concurrent callers, want 1", n, callers)
				}
				// go-github's CheckResponse swaps an error response's body
				// without closing it, so net/http's timeout timer lives on
				// until Timeout: run the bubble's fake clock past it.
				time.Sleep(ghapp.DefaultTimeout)
			})
		})
	}
}

// TestTokenExchangeClassified: a failed exchange is classified by the token
// endpoint's status, as the claimer's retry policy needs: a wrong key, a
// gone or suspended installation is the App's fault, not the job's
// (retried, AppRefused), GitHub's 5xx and rate limits retry; never a
// network blip.
func TestTokenExchangeClassified(t *testing.T) {
	t.Parallel()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	tokenPath := "/app/installations/42/access_tokens"
	tests := []struct {
		name   string
		client func(t *testing.T) *ghapp.Client
		class  failure.Class
		// refused: GitHub refused the App's credentials or installation.
		refused bool
		status  int
		reason  string // prefix
		says    string // GitHub's message, after the status and request id
	}{
		{name: "401 wrong key", class: failure.UnknownRetryable, refused: true, status: 401, reason: "github token 401", says: ": A JSON web token", client: func(t *testing.T) *ghapp.Client {
			return setup(t, option{cfg: func(c *ghapp.Config) { c.PrivateKey = otherPEM }}).client
		}},
		{name: "404 installation gone", class: failure.UnknownRetryable, refused: true, status: 404, reason: "github token 404", says: ": Not Found", client: func(t *testing.T) *ghapp.Client {
			return answering(t, http.MethodPost, tokenPath, 404,
				`{"message":"Not Found","documentation_url":"https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app","status":"404"}`)
		}},
		{name: "403 installation suspended", class: failure.UnknownRetryable, refused: true, status: 403, reason: "github token 403", says: ": This installation has been suspended", client: func(t *testing.T) *ghapp.Client {
			f := setup(t, option{})
			f.fake.Suspend(inst)
			return f.client
		}},
		{name: "502", class: failure.ServerSide, status: 502, reason: "github token 502", client: func(t *testing.T) *ghapp.Client {
			f := setup(t, option{})
			f.fake.Fail(ghfake.RouteAccessToken, 1, ghfake.ServerError(502))
			return f.client
		}},
		{name: "403 secondary rate limit", class: failure.RateLimit, status: 403, reason: "github token secondary rate limit", client: func(t *testing.T) *ghapp.Client {
			f := setup(t, option{})
			f.fake.Fail(ghfake.RouteAccessToken, 1, ghfake.SecondaryRateLimit(time.Minute))
			return f.client
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.client(t).GenerateJIT(context.Background(), inst, repoJIT("a"))
			if err == nil {
				t.Fatal("GenerateJIT: no error, want the token endpoint's")
			}
			got := failure.Classify(err)
			if got.Class != tt.class || got.Status != tt.status || !strings.HasPrefix(got.Reason, tt.reason) || !strings.Contains(got.Reason, tt.says) {
				t.Errorf("Classify = %v %d %q, want %v %d %q…", got.Class, got.Status, got.Reason, tt.class, tt.status, tt.reason)
			}
			if got.AppRefused != tt.refused {
				t.Errorf("AppRefused = %v, want %v", got.AppRefused, tt.refused)
			}
			if strings.Contains(err.Error(), "Bearer") || strings.Contains(err.Error(), "ghs_") {
				t.Errorf("error carries a credential: %v", err)
			}
			var ue interface{ Timeout() bool }
			if errors.As(err, &ue) {
				t.Errorf("err = %T %v: a net.Error, would be retried as a network blip", err, err)
			}
		})
	}
}

// TestSecondaryLimitWithoutRetryAfterIsNotHeldToTheReset: GitHub answers a
// secondary limit naming no Retry-After, with its rate headers (the reset
// up to an hour ahead). go-github would take that reset as the wait and
// refuse every later call of the client itself until then; ghclaim keeps
// it from doing so (the installation's block is shared for a minute
// instead), on the App's own routes and installation calls alike: the
// next call is made, and answered. (The token exchange's is held a
// minute for the whole App: TestRateLimitedExchangeIsHeldForTheApp.)
func TestSecondaryLimitWithoutRetryAfterIsNotHeldToTheReset(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		route string
		call  func(c *ghapp.Client) error
	}{
		{"installation call", ghfake.RouteRepoJIT, func(c *ghapp.Client) error {
			_, err := c.GenerateJIT(context.Background(), inst, repoJIT("b"))
			return err
		}},
		{"App route", ghfake.RouteDeliveries, func(c *ghapp.Client) error {
			_, err := c.ListHookDeliveries(context.Background(), "", 10)
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, option{})
			f.fake.Fail(tt.route, 1, ghfake.SecondaryRateLimit(0))
			err := tt.call(f.client)
			if fl := failure.Classify(err); fl.Class != failure.RateLimit || fl.Remembered {
				t.Fatalf("first call: %v (%+v), want GitHub's secondary limit", err, fl)
			}
			if err := tt.call(f.client); err != nil {
				t.Fatalf("second call: %v (%+v), want it made and answered, not refused from go-github's memory", err, failure.Classify(err))
			}
		})
	}
}

// TestAppErrorCarriesNoJWT: an error of the App's own routes (hook
// deliveries, installations, GET /app) keeps no Authorization: go-github
// holds the request in every error it returns, and the App JWT mints
// installation tokens for minutes. Only the installation routes were
// cleaned before.
func TestAppErrorCarriesNoJWT(t *testing.T) {
	t.Parallel()
	pemBytes, _ := testKey(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, `{"message":"Server Error"}`)
	}))
	t.Cleanup(srv.Close)
	c, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: pemBytes, BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := map[string]func() error{
		"ListHookDeliveries":    func() error { _, err := c.ListHookDeliveries(ctx, "", 100); return err },
		"RedeliverHookDelivery": func() error { return c.RedeliverHookDelivery(ctx, 1) },
		"Installations":         func() error { _, err := c.Installations(ctx); return err },
		"App":                   func() error { _, err := c.App(ctx); return err },
	}
	for name, call := range calls {
		err := call()
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response == nil || er.Response.Request == nil {
			t.Fatalf("%s: err = %v, want a go-github error response", name, err)
		}
		if auth := er.Response.Request.Header.Get("Authorization"); auth != "" {
			t.Errorf("%s: the error's request carries the App JWT (%q…, %d characters)", name, auth[:min(len(auth), 12)], len(auth))
		}
	}
}

package ghapp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

const (
	appID = 1234
	inst  = 42
)

var (
	keyOnce sync.Once
	keyPEM  []byte
	keyPub  *rsa.PublicKey
)

// testKey is one RSA key for the whole run: 2048-bit generation is slow.
func testKey(t *testing.T) ([]byte, *rsa.PublicKey) {
	t.Helper()
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
		keyPub = &k.PublicKey
	})
	return keyPEM, keyPub
}

type fixture struct {
	fake   *ghfake.Server
	srv    *httptest.Server
	client *ghapp.Client
}

type option struct {
	prefix string
	fake   []ghfake.Option
	cfg    func(*ghapp.Config)
}

func setup(t *testing.T, opt option) fixture {
	t.Helper()
	pemBytes, pub := testKey(t)
	opts := []ghfake.Option{ghfake.WithAppID(appID), ghfake.WithPublicKey(pub)}
	if opt.prefix != "" {
		opts = append(opts, ghfake.WithPathPrefix(opt.prefix))
	}
	opts = append(opts, opt.fake...)
	fake := ghfake.New(opts...)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	// No real wait before a fresh token's refusal is sent again: the
	// tests' tokens are always fresh on the wall clock.
	cfg := ghapp.Config{AppID: appID, PrivateKey: pemBytes, BaseURL: srv.URL + opt.prefix,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
	if opt.cfg != nil {
		opt.cfg(&cfg)
	}
	c, err := ghapp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{fake: fake, srv: srv, client: c}
}

func errorResponse(t *testing.T, err error, status int) *github.ErrorResponse {
	t.Helper()
	var er *github.ErrorResponse
	if !errors.As(err, &er) {
		t.Fatalf("err = %T %v, want *github.ErrorResponse", err, err)
	}
	if er.Response.StatusCode != status {
		t.Fatalf("status = %d, want %d (%v)", er.Response.StatusCode, status, err)
	}
	return er
}

func repoJIT(name string) ghapp.JITRequest {
	return ghapp.JITRequest{Scope: ghapp.ScopeRepo, Owner: "octo", Repo: "hello", Name: name, Labels: []string{"self-hosted", "linux"}}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	pemBytes, _ := testKey(t)
	ecKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("junk")})
	tests := []struct {
		name string
		cfg  ghapp.Config
		want string
	}{
		{name: "no app id", cfg: ghapp.Config{PrivateKey: pemBytes}, want: "app id"},
		{name: "no key", cfg: ghapp.Config{AppID: 1}, want: "private key: empty"},
		{name: "bad key", cfg: ghapp.Config{AppID: 1, PrivateKey: ecKey}, want: "neither a PKCS#1 nor a PKCS#8"},
		{name: "relative url", cfg: ghapp.Config{AppID: 1, PrivateKey: pemBytes, BaseURL: "api.github.com"}, want: "base url"},
		{name: "ok", cfg: ghapp.Config{AppID: 1, PrivateKey: pemBytes}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ghapp.New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("err = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("error echoes the key: %v", err)
			}
		})
	}
}

func TestTokenFetchedOnceAndReused(t *testing.T) {
	t.Parallel()
	f := setup(t, option{})
	ctx := context.Background()
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
	for i := range 3 {
		jit, err := f.client.GenerateJIT(ctx, inst, repoJIT(fmt.Sprintf("r-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.client.FindRunner(ctx, inst, ghapp.ScopeRepo, "octo", "hello", jit.Name); err != nil {
			t.Fatal(err)
		}
		if err := f.client.DeleteRunner(ctx, inst, ghapp.ScopeRepo, "octo", "hello", jit.RunnerID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.client.JobStatus(ctx, inst+1, "octo", "hello", 7); err != nil {
		t.Fatal(err)
	}
	st := f.fake.Stats()
	if st.TokenRequests[inst] != 1 || st.TokenRequests[inst+1] != 1 {
		t.Errorf("token requests = %v, want one per installation", st.TokenRequests)
	}
	if st.InstallationCalls[inst] != 12 || st.InstallationCalls[inst+1] != 1 {
		t.Errorf("installation calls = %v, want 12 and 1", st.InstallationCalls)
	}
}

// revoked is a fixture whose client holds a cached token of inst that
// GitHub has since revoked.
func revoked(t *testing.T) fixture {
	t.Helper()
	f := setup(t, option{})
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
	if _, err := f.client.JobStatus(context.Background(), inst, "octo", "hello", 7); err != nil {
		t.Fatal(err)
	}
	f.fake.RevokeTokens(inst)
	return f
}

// TestRevokedTokenIsReplaced: GitHub refuses a cached token before its
// expiry (revoked, the installation suspended and back): the client drops
// it and sends the request once more with a fresh token, a POST with its
// body too. Before, every call of the installation failed with the 401,
// which fails a claim for good, until the token's refresh time (up to 55
// minutes). A 401 on a fresh token stands.
func TestRevokedTokenIsReplaced(t *testing.T) {
	t.Parallel()
	f := revoked(t)
	ctx := context.Background()
	jit, err := f.client.GenerateJIT(ctx, inst, repoJIT("after-revoke"))
	if err != nil {
		t.Fatalf("GenerateJIT after the token was revoked: %v, want it sent again with a fresh token", err)
	}
	if jit.Name != "after-revoke" {
		t.Errorf("registered %q, want the request's body sent again", jit.Name)
	}
	if got := f.fake.Stats().TokenRequests[inst]; got != 2 {
		t.Errorf("%d token exchanges, want 2 (the first, and one after the refusal)", got)
	}
	if _, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7); err != nil {
		t.Fatalf("the next call: %v, want the fresh token reused", err)
	}
	if got := f.fake.Stats().TokenRequests[inst]; got != 2 {
		t.Errorf("%d token exchanges after the next call, want still 2", got)
	}
}

func TestConcurrentInstallations(t *testing.T) {
	t.Parallel()
	f := setup(t, option{})
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "in_progress"})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := f.client.JobStatus(context.Background(), int64(100+i%4), "octo", "hello", 7)
			if err != nil || st != "in_progress" {
				t.Errorf("JobStatus = %q, %v", st, err)
			}
		}()
	}
	wg.Wait()
	for id := int64(100); id < 104; id++ {
		if n := f.fake.Stats().TokenRequests[id]; n != 1 {
			t.Errorf("token requests for %d = %d, want 1", id, n)
		}
	}
}

func TestGenerateJIT(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		prefix string
		req    ghapp.JITRequest
		want   ghfake.Runner
	}{
		{
			name: "repo",
			req:  ghapp.JITRequest{Scope: "repo", Owner: "octo", Repo: "hello", Name: "pool-1", Labels: []string{"linux", "x64"}, WorkFolder: "/w"},
			want: ghfake.Runner{ID: 1, Name: "pool-1", Scope: "repo", Owner: "octo", Repo: "hello", OS: "unknown", Status: "offline",
				Labels: []string{"linux", "x64"}, RunnerGroupID: 1, WorkFolder: "/w", Installation: inst},
		},
		{
			name: "org with group",
			req:  ghapp.JITRequest{Scope: "org", Owner: "octo", Name: "pool-2", Labels: []string{"gpu"}, RunnerGroupID: 3},
			want: ghfake.Runner{ID: 1, Name: "pool-2", Scope: "org", Owner: "octo", OS: "unknown", Status: "offline",
				Labels: []string{"gpu"}, RunnerGroupID: 3, WorkFolder: "_work", Installation: inst}, // no work folder sent: GitHub's default
		},
		{
			name:   "enterprise server path",
			prefix: "/api/v3",
			req:    ghapp.JITRequest{Scope: "org", Owner: "octo", Name: "pool-3", Labels: []string{"gpu"}},
			want: ghfake.Runner{ID: 1, Name: "pool-3", Scope: "org", Owner: "octo", OS: "unknown", Status: "offline",
				Labels: []string{"gpu"}, RunnerGroupID: 1, WorkFolder: "_work", Installation: inst},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, option{prefix: tt.prefix, fake: []ghfake.Option{ghfake.WithRunnerGroups(1, 3)}})
			fake := f.fake
			jit, err := f.client.GenerateJIT(context.Background(), inst, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if jit.RunnerID != 1 || jit.Name != tt.req.Name {
				t.Errorf("jit = %d %q, want 1 %q", jit.RunnerID, jit.Name, tt.req.Name)
			}
			raw, err := base64.StdEncoding.DecodeString(jit.EncodedConfig.Reveal())
			if err != nil || !bytes.Contains(raw, []byte(".runner")) {
				t.Errorf("config = %q, %v; want the fake's base64 JSON", raw, err)
			}
			got, ok := fake.RunnerByName(tt.req.Name)
			if !ok {
				t.Fatal("runner not registered")
			}
			if g, w := mustJSON(t, got), mustJSON(t, tt.want); g != w {
				t.Errorf("registered %s, want %s", g, w)
			}
			st := fake.Stats()
			if st.TokenRequests[inst] != 1 || st.Calls[""] != 0 {
				t.Errorf("stats = %+v, want one token request and no call outside %q", st, tt.prefix)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGenerateJITAlreadyExists(t *testing.T) {
	t.Parallel()
	f := setup(t, option{})
	ctx := context.Background()
	if _, err := f.client.GenerateJIT(ctx, inst, repoJIT("pool-9")); err != nil {
		t.Fatal(err)
	}
	_, err := f.client.GenerateJIT(ctx, inst, repoJIT("pool-9"))
	if !ghapp.IsAlreadyExists(err) {
		t.Fatalf("IsAlreadyExists(%v) = false, want true", err)
	}
	er := errorResponse(t, err, 409)
	if !strings.HasPrefix(er.Message, "Already exists - A runner with the name pool-9") {
		t.Errorf("message = %q", er.Message)
	}
	if !strings.Contains(err.Error(), "generate jit config for runner pool-9 in repo octo/hello") {
		t.Errorf("error %q lacks context", err)
	}
	for _, other := range []error{nil, errors.New("x"), &github.ErrorResponse{Response: &http.Response{StatusCode: 422}}} {
		if ghapp.IsAlreadyExists(other) {
			t.Errorf("IsAlreadyExists(%v) = true", other)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	f := setup(t, option{})
	ctx := context.Background()
	calls := map[string]func() error{
		"jit scope": func() error {
			r := repoJIT("a")
			r.Scope = "team"
			_, err := f.client.GenerateJIT(ctx, inst, r)
			return err
		},
		"jit no repo": func() error { r := repoJIT("a"); r.Repo = ""; _, err := f.client.GenerateJIT(ctx, inst, r); return err },
		"jit no name": func() error { _, err := f.client.GenerateJIT(ctx, inst, repoJIT("")); return err },
		"jit no inst": func() error { _, err := f.client.GenerateJIT(ctx, 0, repoJIT("a")); return err },
		"find owner":  func() error { _, err := f.client.FindRunner(ctx, inst, "org", "", "", "a"); return err },
		"delete":      func() error { return f.client.DeleteRunner(ctx, inst, "", "o", "r", 1) },
		"job":         func() error { _, err := f.client.JobStatus(ctx, inst, "o", "", 1); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, ghapp.ErrInvalidRequest) {
				t.Errorf("err = %v, want ErrInvalidRequest", err)
			}
		})
	}
	if n := len(f.fake.Stats().Calls); n != 0 {
		t.Errorf("%d routes called, want none", n)
	}
}

func TestFindAndDeleteRunner(t *testing.T) {
	t.Parallel()
	tests := []struct{ scope, owner, repo string }{
		{scope: "repo", owner: "octo", repo: "hello"},
		{scope: "org", owner: "octo"},
	}
	for _, tt := range tests {
		t.Run(tt.scope, func(t *testing.T) {
			t.Parallel()
			f := setup(t, option{})
			ctx := context.Background()
			for _, n := range []string{"pool-1", "pool-2"} {
				req := ghapp.JITRequest{Scope: tt.scope, Owner: tt.owner, Repo: tt.repo, Name: n, Labels: []string{"x"}}
				if _, err := f.client.GenerateJIT(ctx, inst, req); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.fake.SetRunner("pool-2", "online", true); err != nil {
				t.Fatal(err)
			}
			got, err := f.client.FindRunner(ctx, inst, tt.scope, tt.owner, tt.repo, "pool-2")
			if err != nil || got != (ghapp.Runner{ID: 2, Name: "pool-2", Status: "online", Busy: true}) {
				t.Fatalf("FindRunner = %+v, %v; want runner 2 online busy", got, err)
			}
			_, err = f.client.FindRunner(ctx, inst, tt.scope, tt.owner, tt.repo, "pool-3")
			if !errors.Is(err, ghapp.ErrRunnerNotFound) {
				t.Errorf("FindRunner(pool-3) err = %v, want ErrRunnerNotFound", err)
			}

			err = f.client.DeleteRunner(ctx, inst, tt.scope, tt.owner, tt.repo, 2)
			if er := errorResponse(t, err, 422); !strings.Contains(er.Message, "still running a job") || !ghapp.IsStillRunning(err) {
				t.Errorf("busy delete message = %q (IsStillRunning %t), want the busy runner's refusal", er.Message, ghapp.IsStillRunning(err))
			}
			if err := f.client.DeleteRunner(ctx, inst, tt.scope, tt.owner, tt.repo, 1); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, ok := f.fake.RunnerByName("pool-1"); ok {
				t.Error("pool-1 still registered")
			}
			if err := f.client.DeleteRunner(ctx, inst, tt.scope, tt.owner, tt.repo, 1); err != nil {
				t.Errorf("delete of a gone runner = %v, want nil", err)
			}
			if n := f.fake.Stats().Calls[map[string]string{"repo": ghfake.RouteRepoDeleteRunner, "org": ghfake.RouteOrgDeleteRunner}[tt.scope]]; n != 3 {
				t.Errorf("delete calls = %d, want 3", n)
			}
		})
	}
}

func TestJobStatus(t *testing.T) {
	t.Parallel()
	f := setup(t, option{})
	ctx := context.Background()
	for _, st := range []string{"queued", "in_progress", "completed"} {
		f.fake.SetJob("octo", "hello", ghfake.Job{ID: 5, Status: st})
		got, err := f.client.JobStatus(ctx, inst, "octo", "hello", 5)
		if err != nil || got != st {
			t.Errorf("JobStatus = %q, %v; want %q", got, err, st)
		}
	}
	_, err := f.client.JobStatus(ctx, inst, "octo", "hello", 6)
	errorResponse(t, err, 404)
}

func TestErrorsAreGoGithubTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		route string
		fault ghfake.Fault
		check func(t *testing.T, err error)
	}{
		{name: "502", route: ghfake.RouteRepoJIT, fault: ghfake.ServerError(502), check: func(t *testing.T, err error) { errorResponse(t, err, 502) }},
		{name: "429", route: ghfake.RouteRepoJIT, fault: ghfake.TooManyRequests(time.Minute), check: func(t *testing.T, err error) {
			if er := errorResponse(t, err, 429); er.Response.Header.Get("Retry-After") != "60" {
				t.Errorf("Retry-After = %q", er.Response.Header.Get("Retry-After"))
			}
		}},
		{name: "secondary", route: ghfake.RouteRepoJIT, fault: ghfake.SecondaryRateLimit(2 * time.Minute), check: func(t *testing.T, err error) {
			var ae *github.AbuseRateLimitError
			if !errors.As(err, &ae) || ae.GetRetryAfter() != 2*time.Minute {
				t.Errorf("err = %T %v, want *github.AbuseRateLimitError 2m", err, err)
			}
		}},
		{name: "reset", route: ghfake.RouteRepoJIT, fault: ghfake.ConnectionReset(), check: func(t *testing.T, err error) {
			var ne net.Error
			var er *github.ErrorResponse
			if !errors.As(err, &ne) || errors.As(err, &er) {
				t.Errorf("err = %T %v, want a net.Error", err, err)
			}
		}},
		{name: "token endpoint 502", route: ghfake.RouteAccessToken, fault: ghfake.ServerError(502), check: func(t *testing.T, err error) {
			er := errorResponse(t, err, 502)
			if !strings.HasSuffix(er.Response.Request.URL.Path, "/access_tokens") {
				t.Errorf("request = %v, want the token request", er.Response.Request.URL)
			}
		}},
		{name: "token endpoint secondary", route: ghfake.RouteAccessToken, fault: ghfake.SecondaryRateLimit(time.Minute), check: func(t *testing.T, err error) {
			var ae *github.AbuseRateLimitError
			if !errors.As(err, &ae) {
				t.Errorf("err = %T %v, want *github.AbuseRateLimitError", err, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, option{})
			f.fake.Fail(tt.route, 1, tt.fault)
			_, err := f.client.GenerateJIT(context.Background(), inst, repoJIT("a"))
			tt.check(t, err)
			if n := len(f.fake.Runners()); n != 0 {
				t.Errorf("%d runners registered, want 0", n)
			}
		})
	}
}

func TestRateLimitError(t *testing.T) {
	t.Parallel()
	f := setup(t, option{})
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	f.fake.SetRateLimit(inst, 5000, 0, reset)
	_, err := f.client.FindRunner(context.Background(), inst, "repo", "o", "r", "x")
	var rle *github.RateLimitError
	if !errors.As(err, &rle) {
		t.Fatalf("err = %T %v, want *github.RateLimitError", err, err)
	}
	if !rle.Rate.Reset.Time.Equal(reset) || rle.Message != "API rate limit exceeded for installation ID 42." {
		t.Errorf("rate error = %q reset %v, want reset %v", rle.Message, rle.Rate.Reset, reset)
	}
}

func TestWrapSeesInstallationResponsesOnly(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen []string
	)
	f := setup(t, option{cfg: func(c *ghapp.Config) {
		c.Wrap = func(id int64, base http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := base.RoundTrip(r)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					seen = append(seen, fmt.Sprintf("%d %s %s", id, r.URL.Path, resp.Header.Get("X-RateLimit-Remaining")))
				} else {
					seen = append(seen, fmt.Sprintf("%d %s error", id, r.URL.Path))
				}
				return resp, err
			})
		}
	}})
	ctx := context.Background()
	if _, err := f.client.FindRunner(ctx, inst, "org", "octo", "", "x"); !errors.Is(err, ghapp.ErrRunnerNotFound) {
		t.Fatal(err)
	}
	f.fake.Fail(ghfake.RouteAccessToken, 1, ghfake.ServerError(502))
	if _, err := f.client.FindRunner(ctx, inst+1, "org", "octo", "", "x"); err == nil {
		t.Fatal("no error, want the token endpoint's 502")
	}
	want := []string{"42 /orgs/octo/actions/runners 4999", "43 /orgs/octo/actions/runners error"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("wrap saw %q, want %q", seen, want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestBaseURLVariants(t *testing.T) {
	t.Parallel()
	pemBytes, _ := testKey(t)
	fake := ghfake.New(ghfake.WithPathPrefix("/api/v3"))
	srv := httptest.NewServer(fake)
	defer srv.Close()
	for _, base := range []string{srv.URL + "/api/v3", srv.URL + "/api/v3/"} {
		c, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: pemBytes, BaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.FindRunner(context.Background(), inst, "repo", "o", "r", "x"); !errors.Is(err, ghapp.ErrRunnerNotFound) {
			t.Errorf("%s: err = %v, want ErrRunnerNotFound", base, err)
		}
	}
	if n := fake.Stats().Calls[""]; n != 0 {
		t.Errorf("%d calls outside /api/v3", n)
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	t.Parallel()
	const value = "c2VjcmV0LWppdC1jb25maWc="
	jit := ghapp.JIT{RunnerID: 1, Name: "r", EncodedConfig: ghapp.NewSecret(value)}
	type holder struct {
		inner ghapp.JIT // reached through an unexported field: fmt skips methods here
		Outer ghapp.JIT
	}
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("claimed", "jit", jit, "config", jit.EncodedConfig)
	js, err := json.Marshal(holder{inner: jit, Outer: jit})
	if err != nil {
		t.Fatal(err)
	}
	text, err := jit.EncodedConfig.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", jit), "%+v": fmt.Sprintf("%+v", jit), "%#v": fmt.Sprintf("%#v", jit),
		"%s": fmt.Sprintf("%s", jit.EncodedConfig), "%q": fmt.Sprintf("%q", jit.EncodedConfig),
		"%x": fmt.Sprintf("%x", jit.EncodedConfig), "%d": fmt.Sprintf("%d", jit.EncodedConfig),
		"unexported field": fmt.Sprintf("%+v", holder{inner: jit}),
		"pointer":          fmt.Sprintf("%v", &jit),
		"error":            fmt.Errorf("claim: %v", jit).Error(),
		"slog":             logBuf.String(),
		"json":             string(js),
		"text":             string(text),
	}
	for name, out := range outputs {
		if strings.Contains(out, value) || strings.Contains(out, fmt.Sprintf("%x", value)) {
			t.Errorf("%s leaks the secret: %s", name, out)
		}
	}
	if !strings.Contains(outputs["%v"], "[REDACTED]") || !strings.Contains(outputs["slog"], "[REDACTED]") {
		t.Errorf("redaction marker missing: %s / %s", outputs["%v"], outputs["slog"])
	}
	if jit.EncodedConfig.Reveal() != value || ghapp.NewSecret("").Reveal() != "" || !(ghapp.Secret{}).IsZero() {
		t.Error("Reveal does not return the value")
	}
}

package ghfake_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/ghfake"
)

const (
	appID = 1234
	inst  = 42
)

// t0 is the fake's clock. It is fixed so tests assert exact expiry and reset times.
var t0 = time.Unix(1_900_000_000, 0).UTC()

// web is the tests' HTTP client, on a transport of its own: each test's
// httptest server closes http.DefaultTransport's idle connections when it
// stops, which breaks a request another test has in flight on that one.
var web = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

var (
	keyOnce sync.Once
	testKey *rsa.PrivateKey
)

func key(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	return testKey
}

type fixture struct {
	fake   *ghfake.Server
	srv    *httptest.Server
	gh     *github.Client // authenticated as installation inst
	sleeps *[]time.Duration
}

func setup(t *testing.T, opts ...ghfake.Option) fixture {
	t.Helper()
	var (
		mu     sync.Mutex
		sleeps []time.Duration
	)
	base := []ghfake.Option{
		ghfake.WithAppID(appID),
		ghfake.WithPublicKey(&key(t).PublicKey),
		ghfake.WithClock(func() time.Time { return t0 }),
		ghfake.WithSleep(func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			sleeps = append(sleeps, d)
			return nil
		}),
	}
	fake := ghfake.New(append(base, opts...)...)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fixture{fake: fake, srv: srv, gh: client(t, srv.URL+"/", fake.IssueToken(inst)), sleeps: &sleeps}
}

func client(t *testing.T, base, token string) *github.Client {
	t.Helper()
	gh := github.NewClient(web).WithAuthToken(token)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	gh.BaseURL = u
	return gh
}

func signJWT(t *testing.T, k *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
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

func jitReq(name string) *github.GenerateJITConfigRequest {
	return &github.GenerateJITConfigRequest{Name: name, RunnerGroupID: 1, Labels: []string{"self-hosted", "linux"}}
}

func TestAccessToken(t *testing.T) {
	t.Parallel()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iat := t0.Add(-30 * time.Second).Unix()
	good := map[string]any{"iss": "1234", "iat": iat, "exp": iat + 120}
	tests := []struct {
		name    string
		jwt     func(t *testing.T) string
		status  int
		message string
	}{
		{name: "no token", jwt: func(*testing.T) string { return "" }, status: 401, message: "A JSON web token could not be decoded"},
		{name: "garbage", jwt: func(*testing.T) string { return "not.a.jwt" }, status: 401, message: "A JSON web token could not be decoded"},
		{name: "other key", jwt: func(t *testing.T) string { return signJWT(t, other, good) }, status: 401, message: "A JSON web token could not be decoded"},
		{name: "wrong issuer", jwt: func(t *testing.T) string {
			return signJWT(t, key(t), map[string]any{"iss": "999", "iat": iat, "exp": iat + 120})
		}, status: 401, message: "'Issuer' claim ('iss') must be an Integer"},
		{name: "exp too far", jwt: func(t *testing.T) string {
			return signJWT(t, key(t), map[string]any{"iss": 1234, "iat": iat, "exp": iat + 3600})
		}, status: 401, message: "'Expiration time' claim ('exp') is too far in the future"},
		{name: "good, numeric iss", jwt: func(t *testing.T) string {
			return signJWT(t, key(t), map[string]any{"iss": 1234, "iat": iat, "exp": iat + 600})
		}, status: 201},
		{name: "good", jwt: func(t *testing.T) string { return signJWT(t, key(t), good) }, status: 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			// WithAuthToken("") would send "Bearer " with nothing after it.
			var gh *github.Client
			if j := tt.jwt(t); j == "" {
				gh = github.NewClient(web)
				gh.BaseURL, _ = url.Parse(f.srv.URL + "/")
			} else {
				gh = client(t, f.srv.URL+"/", j)
			}
			tok, resp, err := gh.Apps.CreateInstallationToken(context.Background(), 77, nil)
			if got := f.fake.Stats().TokenRequests[77]; got != 1 {
				t.Errorf("TokenRequests[77] = %d, want 1", got)
			}
			if resp.Header.Get("X-RateLimit-Limit") == "" {
				t.Errorf("no X-RateLimit-Limit header")
			}
			if tt.status != 201 {
				er := errorResponse(t, err, tt.status)
				if er.Message != tt.message {
					t.Errorf("message = %q, want %q", er.Message, tt.message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 201 || !strings.HasPrefix(tok.GetToken(), "ghs_") {
				t.Errorf("got %d %q, want 201 ghs_…", resp.StatusCode, tok.GetToken())
			}
			if want := t0.Add(time.Hour); !tok.GetExpiresAt().Time.Equal(want) {
				t.Errorf("expires_at = %v, want %v", tok.GetExpiresAt(), want)
			}
			// The token authenticates installation 77 and is charged to it.
			if _, _, err := client(t, f.srv.URL+"/", tok.GetToken()).Actions.ListRunners(context.Background(), "o", "r", nil); err != nil {
				t.Fatal(err)
			}
			if got := f.fake.Stats().InstallationCalls[77]; got != 1 {
				t.Errorf("InstallationCalls[77] = %d, want 1", got)
			}
		})
	}
}

// TestBadCredentials: a token the fake never issued, or one past its hour
// (GitHub's installation tokens expire one hour after they were created),
// is a 401. Before, the fake honoured a token forever, so no test could
// catch a client that kept an old one (a wrong clock, a stale cache).
func TestBadCredentials(t *testing.T) {
	t.Parallel()
	for _, age := range []time.Duration{-1, time.Hour} { // -1: never issued
		clk := clocktest.New(t0)
		f := setup(t, ghfake.WithClock(clk.Now))
		tok := "ghs_nope"
		if age >= 0 {
			tok = f.fake.IssueToken(inst)
			clk.Advance(age - time.Second)
			if _, _, err := client(t, f.srv.URL+"/", tok).Actions.ListRunners(context.Background(), "o", "r", nil); err != nil {
				t.Fatalf("a token one second before its hour is up: %v", err)
			}
			clk.Advance(time.Second)
		}
		_, _, err := client(t, f.srv.URL+"/", tok).Actions.ListRunners(context.Background(), "o", "r", nil)
		if er := errorResponse(t, err, 401); er.Message != "Bad credentials" {
			t.Errorf("token aged %v: message = %q, want Bad credentials", age, er.Message)
		}
	}
}

func TestGenerateJIT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		call func(gh *github.Client, req *github.GenerateJITConfigRequest) (*github.JITRunnerConfig, *github.Response, error)
		want ghfake.Runner
	}{
		{
			name: "repo",
			call: func(gh *github.Client, req *github.GenerateJITConfigRequest) (*github.JITRunnerConfig, *github.Response, error) {
				return gh.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", req)
			},
			want: ghfake.Runner{ID: 1, Name: "pool-7", Scope: "repo", Owner: "octo", Repo: "hello", OS: "unknown", Status: "offline",
				Labels: []string{"self-hosted", "linux"}, RunnerGroupID: 1, WorkFolder: "_work", Installation: inst},
		},
		{
			name: "org",
			call: func(gh *github.Client, req *github.GenerateJITConfigRequest) (*github.JITRunnerConfig, *github.Response, error) {
				return gh.Actions.GenerateOrgJITConfig(ctx, "octo", req)
			},
			want: ghfake.Runner{ID: 1, Name: "pool-7", Scope: "org", Owner: "octo", OS: "unknown", Status: "offline",
				Labels: []string{"self-hosted", "linux"}, RunnerGroupID: 1, WorkFolder: "_work", Installation: inst},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			req := jitReq("pool-7")
			req.WorkFolder = github.String("_work")
			cfg, resp, err := tt.call(f.gh, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 201 {
				t.Errorf("status = %d, want 201", resp.StatusCode)
			}
			r := cfg.GetRunner()
			if r.GetID() != 1 || r.GetName() != "pool-7" || r.GetStatus() != "offline" || r.GetBusy() || len(r.Labels) != 2 ||
				r.Labels[0].GetType() != "read-only" || r.Labels[1].GetName() != "linux" || r.Labels[1].GetType() != "custom" {
				t.Errorf("runner = %+v, want id 1 pool-7 offline idle with 2 labels", r)
			}
			raw, err := base64.StdEncoding.DecodeString(cfg.GetEncodedJITConfig())
			if err != nil {
				t.Fatalf("encoded_jit_config is not base64: %v", err)
			}
			var files map[string]string
			if err := json.Unmarshal(raw, &files); err != nil || files[".runner"] == "" {
				t.Errorf("jit config = %s, want JSON with .runner", raw)
			}
			got, ok := f.fake.RunnerByName("POOL-7")
			if !ok {
				t.Fatal("runner not registered")
			}
			if g, w := mustJSON(t, got), mustJSON(t, tt.want); g != w {
				t.Errorf("registered = %s, want %s", g, w)
			}
			if f.fake.Stats().JITCalls != 1 {
				t.Errorf("JITCalls = %d, want 1", f.fake.Stats().JITCalls)
			}

			// Same name, same scope: 409, nothing new registered.
			_, _, err = tt.call(f.gh, jitReq("pool-7"))
			er := errorResponse(t, err, 409)
			if want := "Already exists - A runner with the name pool-7 already exists."; er.Message != want {
				t.Errorf("message = %q, want %q", er.Message, want)
			}
			if n := len(f.fake.Runners()); n != 1 {
				t.Errorf("%d runners, want 1", n)
			}
		})
	}
}

func TestGenerateJITScopesAreSeparate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	if _, _, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "a", jitReq("x")); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error {
			_, _, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "b", jitReq("x"))
			return err
		},
		func() error { _, _, err := f.gh.Actions.GenerateOrgJITConfig(ctx, "octo", jitReq("x")); return err },
	} {
		if err := call(); err != nil {
			t.Errorf("same name in another scope: %v, want success", err)
		}
	}
}

func TestGenerateJITValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		req   *github.GenerateJITConfigRequest
		field string
	}{
		{name: "no labels", req: &github.GenerateJITConfigRequest{Name: "a", RunnerGroupID: 1}, field: "labels"},
		{name: "empty labels", req: &github.GenerateJITConfigRequest{Name: "a", RunnerGroupID: 1, Labels: []string{}}, field: "labels"},
		{name: "unknown group", req: &github.GenerateJITConfigRequest{Name: "a", RunnerGroupID: 9, Labels: []string{"x"}}, field: "runner_group_id"},
		{name: "group zero", req: &github.GenerateJITConfigRequest{Name: "a", Labels: []string{"x"}}, field: "runner_group_id"},
		{name: "no name", req: &github.GenerateJITConfigRequest{RunnerGroupID: 1, Labels: []string{"x"}}, field: "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			_, _, err := f.gh.Actions.GenerateRepoJITConfig(context.Background(), "o", "r", tt.req)
			er := errorResponse(t, err, 422)
			if !strings.HasPrefix(er.Message, "Invalid request.") || !strings.Contains(er.Message, `"`+tt.field+`"`) {
				t.Errorf("message = %q, want Invalid request naming %q", er.Message, tt.field)
			}
			if n := len(f.fake.Runners()); n != 0 {
				t.Errorf("%d runners registered, want 0", n)
			}
		})
	}
}

// TestRunnerGroupsOption: WithRunnerGroups sets the organisation's groups
// (runner groups are an organisation's; a repository's route takes the
// Default group only: TestJITRepoScopeHasOnlyTheDefaultGroup).
func TestRunnerGroupsOption(t *testing.T) {
	t.Parallel()
	f := setup(t, ghfake.WithRunnerGroups(5))
	req := jitReq("a")
	req.RunnerGroupID = 5
	if _, _, err := f.gh.Actions.GenerateOrgJITConfig(context.Background(), "o", req); err != nil {
		t.Fatalf("group 5: %v", err)
	}
	_, _, err := f.gh.Actions.GenerateOrgJITConfig(context.Background(), "o", jitReq("b"))
	errorResponse(t, err, 422)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRunnersRepoAndOrg(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type ops struct {
		jit    func(gh *github.Client, name string) (*github.JITRunnerConfig, *github.Response, error)
		list   func(gh *github.Client, opts *github.ListRunnersOptions) (*github.Runners, *github.Response, error)
		get    func(gh *github.Client, id int64) (*github.Runner, *github.Response, error)
		remove func(gh *github.Client, id int64) (*github.Response, error)
	}
	tests := []struct {
		name string
		ops  ops
	}{
		{name: "repo", ops: ops{
			jit: func(gh *github.Client, n string) (*github.JITRunnerConfig, *github.Response, error) {
				return gh.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", jitReq(n))
			},
			list: func(gh *github.Client, o *github.ListRunnersOptions) (*github.Runners, *github.Response, error) {
				return gh.Actions.ListRunners(ctx, "octo", "hello", o)
			},
			get: func(gh *github.Client, id int64) (*github.Runner, *github.Response, error) {
				return gh.Actions.GetRunner(ctx, "octo", "hello", id)
			},
			remove: func(gh *github.Client, id int64) (*github.Response, error) {
				return gh.Actions.RemoveRunner(ctx, "octo", "hello", id)
			},
		}},
		{name: "org", ops: ops{
			jit: func(gh *github.Client, n string) (*github.JITRunnerConfig, *github.Response, error) {
				return gh.Actions.GenerateOrgJITConfig(ctx, "octo", jitReq(n))
			},
			list: func(gh *github.Client, o *github.ListRunnersOptions) (*github.Runners, *github.Response, error) {
				return gh.Actions.ListOrganizationRunners(ctx, "octo", o)
			},
			get: func(gh *github.Client, id int64) (*github.Runner, *github.Response, error) {
				return gh.Actions.GetOrganizationRunner(ctx, "octo", id)
			},
			remove: func(gh *github.Client, id int64) (*github.Response, error) {
				return gh.Actions.RemoveOrganizationRunner(ctx, "octo", id)
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			for _, n := range []string{"a", "b", "c"} {
				if _, _, err := tt.ops.jit(f.gh, n); err != nil {
					t.Fatal(err)
				}
			}
			// A runner of another scope never shows up.
			if _, _, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "other", jitReq("b")); err != nil {
				t.Fatal(err)
			}

			all, _, err := tt.ops.list(f.gh, nil)
			if err != nil || all.TotalCount != 3 || len(all.Runners) != 3 {
				t.Fatalf("list = %+v, %v; want 3 runners", all, err)
			}
			byName, _, err := tt.ops.list(f.gh, &github.ListRunnersOptions{Name: github.String("b")})
			if err != nil || byName.TotalCount != 1 || byName.Runners[0].GetName() != "b" || byName.Runners[0].GetID() != 2 {
				t.Fatalf("list name=b = %+v, %v; want runner 2", byName, err)
			}
			page, _, err := tt.ops.list(f.gh, &github.ListRunnersOptions{ListOptions: github.ListOptions{PerPage: 2, Page: 2}})
			if err != nil || page.TotalCount != 3 || len(page.Runners) != 1 || page.Runners[0].GetID() != 3 {
				t.Fatalf("page 2 of 2 = %+v, %v; want runner 3 alone", page, err)
			}
			none, _, err := tt.ops.list(f.gh, &github.ListRunnersOptions{Name: github.String("zzz")})
			if err != nil || none.TotalCount != 0 || none.Runners == nil {
				t.Fatalf("list name=zzz = %+v, %v; want empty list", none, err)
			}

			if err := f.fake.SetRunner("b", "online", true); err != nil {
				t.Fatal(err)
			}
			got, _, err := tt.ops.get(f.gh, 2)
			if err != nil || got.GetStatus() != "online" || !got.GetBusy() {
				t.Fatalf("get 2 = %+v, %v; want online busy", got, err)
			}
			_, err = tt.ops.remove(f.gh, 2)
			if er := errorResponse(t, err, 422); er.Message != `Bad request - Runner "b" is still running a job"` {
				t.Errorf("busy delete message = %q", er.Message)
			}

			resp, err := tt.ops.remove(f.gh, 1)
			if err != nil || resp.StatusCode != 204 {
				t.Fatalf("delete 1 = %v, %v; want 204", resp, err)
			}
			_, err = tt.ops.remove(f.gh, 1)
			if er := errorResponse(t, err, 404); er.Message != "Not Found" {
				t.Errorf("second delete message = %q, want Not Found", er.Message)
			}
			_, _, err = tt.ops.get(f.gh, 1)
			errorResponse(t, err, 404)
			_, _, err = tt.ops.get(f.gh, 4) // the other scope's runner
			errorResponse(t, err, 404)
		})
	}
}

func TestJob(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetJob("Octo", "Hello", ghfake.Job{ID: 9, RunID: 3, Status: "in_progress", Labels: []string{"linux"}, RunnerID: 5, RunnerName: "pool-9"})
	j, _, err := f.gh.Actions.GetWorkflowJobByID(context.Background(), "octo", "hello", 9)
	if err != nil {
		t.Fatal(err)
	}
	if j.GetID() != 9 || j.GetStatus() != "in_progress" || j.GetRunnerName() != "pool-9" || j.Conclusion != nil || j.Labels[0] != "linux" {
		t.Errorf("job = %+v, want 9 in_progress on pool-9, no conclusion", j)
	}
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 9, Status: "completed", Conclusion: "success"})
	j, _, err = f.gh.Actions.GetWorkflowJobByID(context.Background(), "octo", "hello", 9)
	if err != nil || j.GetStatus() != "completed" || j.GetConclusion() != "success" {
		t.Errorf("job = %+v, %v; want completed success", j, err)
	}
	_, _, err = f.gh.Actions.GetWorkflowJobByID(context.Background(), "octo", "hello", 10)
	errorResponse(t, err, 404)
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	reset := t0.Add(20 * time.Minute)
	f.fake.SetRateLimit(inst, 100, 2, reset)

	_, resp, err := f.gh.Actions.ListRunners(ctx, "o", "r", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := resp.Header
	if h.Get("X-RateLimit-Limit") != "100" || h.Get("X-RateLimit-Remaining") != "1" || h.Get("X-RateLimit-Used") != "99" ||
		h.Get("X-RateLimit-Reset") != "1900001200" || h.Get("X-RateLimit-Resource") != "core" {
		t.Errorf("headers = %v, want 100/1/99/1900001200/core", h)
	}
	// Errors carry the headers too.
	_, resp, err = f.gh.Actions.GetRunner(ctx, "o", "r", 99)
	errorResponse(t, err, 404)
	if resp.Rate.Remaining != 0 || resp.Rate.Limit != 100 {
		t.Errorf("rate on 404 = %+v, want 0 of 100", resp.Rate)
	}

	// go-github v62 saw "Remaining: 0" and now refuses locally, without a
	// request, until the reset: only a fresh client reaches the fake.
	_, _, err = f.gh.Actions.ListRunners(ctx, "o", "r", nil)
	var rle *github.RateLimitError
	if !errors.As(err, &rle) || !strings.HasSuffix(rle.Message, "not making remote request.") {
		t.Fatalf("err = %T %v, want go-github's local *github.RateLimitError", err, err)
	}
	_, resp, err = client(t, f.srv.URL+"/", f.fake.IssueToken(inst)).Actions.ListRunners(ctx, "o", "r", nil)
	if !errors.As(err, &rle) {
		t.Fatalf("err = %T %v, want *github.RateLimitError", err, err)
	}
	if rle.Message != "API rate limit exceeded for installation ID 42." || !rle.Rate.Reset.Time.Equal(reset) || rle.Rate.Remaining != 0 {
		t.Errorf("rate error = %q %+v, want installation 42, reset %v", rle.Message, rle.Rate, reset)
	}
	if resp.StatusCode != 403 {
		t.Errorf("status = %d, want 403", resp.StatusCode)
	}
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if body["documentation_url"] != "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting" {
		t.Errorf("documentation_url = %q", body["documentation_url"])
	}
	if n := f.fake.Stats().Calls[ghfake.RouteRepoRunners]; n != 2 {
		t.Errorf("list calls reaching the fake = %d, want 2", n)
	}
	// Another installation has its own budget.
	other := client(t, f.srv.URL+"/", f.fake.IssueToken(43))
	if _, resp, err := other.Actions.ListRunners(ctx, "o", "r", nil); err != nil || resp.Rate.Remaining != 4999 {
		t.Errorf("installation 43: %v, remaining %d; want 4999", err, resp.Rate.Remaining)
	}
}

func TestRateLimitRefillsAtReset(t *testing.T) {
	t.Parallel()
	now := t0
	var mu sync.Mutex
	f := setup(t, ghfake.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	f.fake.SetRateLimit(inst, 10, 0, t0.Add(time.Minute))
	_, _, err := f.gh.Actions.ListRunners(context.Background(), "o", "r", nil)
	var rle *github.RateLimitError
	if !errors.As(err, &rle) {
		t.Fatalf("err = %v, want *github.RateLimitError", err)
	}
	mu.Lock()
	now = t0.Add(time.Minute)
	mu.Unlock()
	// A fresh client: go-github refuses locally until the wall-clock reset.
	_, resp, err := client(t, f.srv.URL+"/", f.fake.IssueToken(inst)).Actions.ListRunners(context.Background(), "o", "r", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Rate.Remaining != 9 || resp.Rate.Reset.Unix() != t0.Add(time.Minute+time.Hour).Unix() {
		t.Errorf("rate = %+v, want 9 left, reset an hour after the refill", resp.Rate)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		fault ghfake.Fault
		check func(t *testing.T, resp *github.Response, err error)
	}{
		{name: "502", fault: ghfake.ServerError(502), check: func(t *testing.T, _ *github.Response, err error) {
			if er := errorResponse(t, err, 502); er.Message != "Server Error" {
				t.Errorf("message = %q, want Server Error", er.Message)
			}
		}},
		{name: "500", fault: ghfake.ServerError(500), check: func(t *testing.T, resp *github.Response, err error) {
			errorResponse(t, err, 500)
			if resp.Header.Get("X-RateLimit-Remaining") != "5000" {
				t.Errorf("X-RateLimit-Remaining = %q, want 5000: the API's own JSON answer shows the budget", resp.Header.Get("X-RateLimit-Remaining"))
			}
		}},
		{name: "503 unicorn", fault: ghfake.ServerError(503), check: func(t *testing.T, resp *github.Response, err error) {
			er := errorResponse(t, err, 503)
			if er.Message != "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Errorf("got message %q, type %q; want an HTML page go-github cannot parse", er.Message, resp.Header.Get("Content-Type"))
			}
			for k := range resp.Header {
				if strings.HasPrefix(k, "X-Ratelimit-") {
					t.Errorf("%s: %q on the front end's page, want no rate headers", k, resp.Header.Get(k))
				}
			}
			if resp.Header.Get("X-GitHub-Request-Id") == "" {
				t.Errorf("no X-GitHub-Request-Id: the front end names the request too")
			}
		}},
		{name: "429", fault: ghfake.TooManyRequests(30 * time.Second), check: func(t *testing.T, resp *github.Response, err error) {
			errorResponse(t, err, 429) // go-github v62 does not type a 429
			if resp.Header.Get("Retry-After") != "30" {
				t.Errorf("Retry-After = %q, want 30", resp.Header.Get("Retry-After"))
			}
		}},
		{name: "secondary", fault: ghfake.SecondaryRateLimit(time.Minute), check: func(t *testing.T, resp *github.Response, err error) {
			var ae *github.AbuseRateLimitError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %T %v, want *github.AbuseRateLimitError", err, err)
			}
			if ae.GetRetryAfter() != time.Minute || !strings.HasPrefix(ae.Message, "You have exceeded a secondary rate limit") {
				t.Errorf("got %v %q, want 1m secondary", ae.GetRetryAfter(), ae.Message)
			}
			if resp.Header.Get("X-RateLimit-Remaining") != "5000" {
				t.Errorf("X-RateLimit-Remaining = %q, want 5000 (not charged)", resp.Header.Get("X-RateLimit-Remaining"))
			}
		}},
		{name: "connection reset", fault: ghfake.ConnectionReset(), check: func(t *testing.T, resp *github.Response, err error) {
			var ue *url.Error
			var er *github.ErrorResponse
			if !errors.As(err, &ue) || errors.As(err, &er) || resp != nil {
				t.Errorf("err = %T %v, resp %v; want a transport *url.Error and no response", err, err, resp)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.fake.Fail(ghfake.RouteRepoJIT, 1, tt.fault)
			_, resp, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "o", "r", jitReq("a"))
			tt.check(t, resp, err)
			if n := len(f.fake.Runners()); n != 0 {
				t.Errorf("%d runners after a before-the-action fault, want 0", n)
			}
			// The fault was for one call only; a fresh client (go-github
			// remembers a secondary limit) now succeeds.
			gh := client(t, f.srv.URL+"/", f.fake.IssueToken(inst))
			if _, _, err := gh.Actions.GenerateRepoJITConfig(ctx, "o", "r", jitReq("a")); err != nil {
				t.Errorf("second call: %v, want success", err)
			}
			if n := f.fake.Stats().JITCalls; n != 2 {
				t.Errorf("JITCalls = %d, want 2", n)
			}
		})
	}
}

func TestAfterEffectFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		fault ghfake.Fault
	}{
		{name: "502 after", fault: ghfake.ServerError(502).AfterEffect()},
		{name: "reset after", fault: ghfake.ConnectionReset().AfterEffect()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.fake.Fail(ghfake.RouteOrgJIT, 1, tt.fault)
			if _, _, err := f.gh.Actions.GenerateOrgJITConfig(ctx, "o", jitReq("pool-1")); err == nil {
				t.Fatal("no error, want the injected fault")
			}
			if _, ok := f.fake.RunnerByName("pool-1"); !ok {
				t.Fatal("runner not registered: the action should have taken effect")
			}
			_, _, err := f.gh.Actions.GenerateOrgJITConfig(ctx, "o", jitReq("pool-1"))
			errorResponse(t, err, 409)
		})
	}
}

func TestSlowFault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fault ghfake.Fault
		want  time.Duration
	}{
		{name: "slow", fault: ghfake.Slow(3 * time.Second), want: 3 * time.Second},
		{name: "bounded", fault: ghfake.Slow(time.Hour), want: 10 * time.Second},
		{name: "slow after", fault: ghfake.Slow(2 * time.Second).AfterEffect(), want: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, ghfake.WithMaxDelay(10*time.Second))
			f.fake.Fail(ghfake.RouteRepoJIT, 1, tt.fault)
			if _, _, err := f.gh.Actions.GenerateRepoJITConfig(context.Background(), "o", "r", jitReq("a")); err != nil {
				t.Fatal(err)
			}
			if len(*f.sleeps) != 1 || (*f.sleeps)[0] != tt.want {
				t.Errorf("slept %v, want [%v]", *f.sleeps, tt.want)
			}
		})
	}
}

func TestSlowFaultGivesUpWhenClientLeaves(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	fake := ghfake.New(ghfake.WithSleep(func(ctx context.Context, d time.Duration) error {
		close(entered)
		// A delay longer than the client waits. The guard bounds the test if
		// the server never notices the client left (it then fails below).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return errors.New("the server never saw the client leave")
		}
	}))
	srv := httptest.NewServer(fake)
	defer srv.Close()
	fake.Fail(ghfake.RouteRepoJIT, 1, ghfake.Slow(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	_, _, err := client(t, srv.URL+"/", fake.IssueToken(inst)).Actions.GenerateRepoJITConfig(ctx, "o", "r", jitReq("a"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n := len(fake.Runners()); n != 0 {
		t.Errorf("%d runners, want 0: the request never ran", n)
	}
}

func TestFaultCountsAndRouteAny(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.fake.Fail(ghfake.RouteAny, 2, ghfake.ServerError(502))
	f.fake.Fail(ghfake.RouteJob, 1, ghfake.ServerError(500))
	f.fake.SetJob("o", "r", ghfake.Job{ID: 1, Status: "queued"})
	_, _, err := f.gh.Actions.ListRunners(ctx, "o", "r", nil)
	errorResponse(t, err, 502)
	_, _, err = f.gh.Actions.GetWorkflowJobByID(ctx, "o", "r", 1)
	errorResponse(t, err, 502)
	_, _, err = f.gh.Actions.GetWorkflowJobByID(ctx, "o", "r", 1)
	errorResponse(t, err, 500)
	if _, _, err := f.gh.Actions.GetWorkflowJobByID(ctx, "o", "r", 1); err != nil {
		t.Errorf("after the faults ran out: %v", err)
	}
	f.fake.Fail(ghfake.RouteJob, 0, ghfake.ServerError(503))
	for i := range 3 {
		_, _, err = f.gh.Actions.GetWorkflowJobByID(ctx, "o", "r", 1)
		if err == nil {
			t.Fatalf("call %d succeeded under a forever fault", i)
		}
	}
	f.fake.ClearFaults()
	if _, _, err := f.gh.Actions.GetWorkflowJobByID(ctx, "o", "r", 1); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}
	if got := f.fake.Stats().Calls[ghfake.RouteJob]; got != 7 {
		t.Errorf("Calls[RouteJob] = %d, want 7", got)
	}
}

func TestPathPrefix(t *testing.T) {
	t.Parallel()
	f := setup(t, ghfake.WithPathPrefix("/api/v3"))
	gh := client(t, f.srv.URL+"/api/v3/", f.fake.IssueToken(inst))
	if _, _, err := gh.Actions.GenerateRepoJITConfig(context.Background(), "o", "r", jitReq("a")); err != nil {
		t.Fatalf("under /api/v3: %v", err)
	}
	_, _, err := f.gh.Actions.ListRunners(context.Background(), "o", "r", nil) // at the root
	errorResponse(t, err, 404)
}

func TestControlAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	do := func(method, path, body string, want int) []byte {
		t.Helper()
		req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := web.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, buf.String(), want)
		}
		return buf.Bytes()
	}

	var tok struct{ Token string }
	if err := json.Unmarshal(do("POST", "/_fake/tokens/7", "", 201), &tok); err != nil || !strings.HasPrefix(tok.Token, "ghs_") {
		t.Fatalf("token = %+v, %v", tok, err)
	}
	gh := client(t, f.srv.URL+"/", tok.Token)

	do("POST", "/_fake/faults", `{"route":"POST /repos/{owner}/{repo}/actions/runners/generate-jitconfig","count":1,"fault":{"kind":"server_error","status":502,"after":true}}`, 204)
	do("POST", "/_fake/faults", `{"route":"*","count":1,"fault":{"kind":"bogus"}}`, 422)
	_, _, err := gh.Actions.GenerateRepoJITConfig(ctx, "o", "r", jitReq("run-1"))
	errorResponse(t, err, 502)

	var rn ghfake.Runner
	if err := json.Unmarshal(do("PATCH", "/_fake/runners/run-1", `{"busy":true,"status":"online"}`, 200), &rn); err != nil || !rn.Busy || rn.Status != "online" || rn.Installation != 7 {
		t.Fatalf("patched runner = %+v, %v", rn, err)
	}
	do("PATCH", "/_fake/runners/nobody", `{"busy":true}`, 404)
	_, err = gh.Actions.RemoveRunner(ctx, "o", "r", rn.ID)
	errorResponse(t, err, 422)

	do("PUT", "/_fake/jobs/o/r/55", `{"status":"queued"}`, 204)
	if j, _, err := gh.Actions.GetWorkflowJobByID(ctx, "o", "r", 55); err != nil || j.GetStatus() != "queued" {
		t.Errorf("job 55 = %+v, %v; want queued", j, err)
	}

	do("PUT", "/_fake/rate/7", `{"limit":50,"remaining":0,"reset":1900000600}`, 204)
	var rate ghfake.Rate
	if err := json.Unmarshal(do("GET", "/_fake/rate/7", "", 200), &rate); err != nil || rate != (ghfake.Rate{Limit: 50, Remaining: 0, Reset: 1900000600}) {
		t.Errorf("rate = %+v, %v", rate, err)
	}
	_, _, err = gh.Actions.ListRunners(ctx, "o", "r", nil)
	var rle *github.RateLimitError
	if !errors.As(err, &rle) {
		t.Errorf("err = %v, want *github.RateLimitError", err)
	}

	do("POST", "/_fake/faults", `{"route":"*","count":3,"fault":{"kind":"slow","delay_ms":100}}`, 204)
	var st ghfake.State
	if err := json.Unmarshal(do("GET", "/_fake/state", "", 200), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Runners) != 1 || st.Stats.JITCalls != 1 || st.Stats.InstallationCalls[7] != 4 || len(st.Faults) != 1 || st.Faults[0].Count != 3 {
		t.Errorf("state = %+v", st)
	}
	do("DELETE", "/_fake/faults", "", 204)
	do("POST", "/_fake/reset", "", 204)
	if err := json.Unmarshal(do("GET", "/_fake/state", "", 200), &st); err != nil || len(st.Runners) != 0 || st.Stats.JITCalls != 0 || len(st.Faults) != 0 {
		t.Errorf("state after reset = %+v, %v", st, err)
	}
}

func TestConcurrentJITRegistersOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := f.gh.Actions.GenerateRepoJITConfig(context.Background(), "o", "r", jitReq("same"))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok, conflicts := 0, 0
	for err := range errs {
		var er *github.ErrorResponse
		switch {
		case err == nil:
			ok++
		case errors.As(err, &er) && er.Response.StatusCode == 409:
			conflicts++
		default:
			t.Errorf("unexpected %v", err)
		}
	}
	if ok != 1 || conflicts != 19 {
		t.Errorf("%d created, %d conflicts; want 1 and 19", ok, conflicts)
	}
}

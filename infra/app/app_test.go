package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/infra/app"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
)

// browser and upstream are the tests' transports, their own: httptest's
// Close closes the idle connections of http.DefaultTransport, which would
// break a request another test has in flight on it.
var (
	browser  = &http.Client{Transport: upstream}
	upstream = http.DefaultTransport.(*http.Transport).Clone()
)

const hookURL = "https://abc123.lambda-url.us-east-1.on.aws/"

type fixture struct {
	fake  *ghfake.Server
	gh    *httptest.Server
	stack *emulator.Stack
	cf    *cloudformation.Client
	sm    *secretsmanager.Client
	// reader reads the secrets as the functions do.
	reader *secretsapi.Client
}

func setup(t *testing.T) fixture {
	t.Helper()
	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	cfg := srv.ConfigForTest(t)
	fake := ghfake.New()
	gh := httptest.NewServer(fake)
	t.Cleanup(gh.Close)
	return fixture{fake: fake, gh: gh, stack: stack, cf: cloudformation.NewFromConfig(cfg), sm: secretsmanager.NewFromConfig(cfg), reader: secretsapi.New(cfg)}
}

func (f fixture) config(drive func(pageURL string)) app.Config {
	return app.Config{
		Stack:      f.stack.Name,
		Name:       "ghclaim-e2e", // the default, ghclaim-<stack>, is too long for these stacks' names
		WebhookURL: hookURL,       // moto's stack has no Function URL: its output is dropped
		GitHubURL:  f.gh.URL,
		APIURL:     f.gh.URL,
		Addr:       "127.0.0.1:0",
		Timeout:    time.Minute,
		Listening:  func(u string) { go drive(u) },
	}
}

func (f fixture) secretValue(t *testing.T, arn string) string {
	t.Helper()
	out, err := f.sm.GetSecretValue(context.Background(), &secretsmanager.GetSecretValueInput{SecretId: &arn})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.SecretString)
}

var (
	formRe     = regexp.MustCompile(`<form id="manifest-form" method="post" action="([^"]+)">`)
	manifestRe = regexp.MustCompile(`name="manifest" value="([^"]+)"`)
)

// pageForm reads the page's form: where it posts and the manifest.
func pageForm(pageURL string) (action, manifest string, err error) {
	resp, err := browser.Get(pageURL)
	if err != nil {
		return "", "", err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fm, mm := formRe.FindSubmatch(page), manifestRe.FindSubmatch(page)
	if fm == nil || mm == nil {
		return "", "", fmt.Errorf("no manifest form in %s", page)
	}
	return html.UnescapeString(string(fm[1])), html.UnescapeString(string(mm[1])), nil
}

// submit plays the browser: GET the page, post its form where its action
// says, follow GitHub's redirect back to the page's callback.
func submit(pageURL string) (string, error) {
	action, manifest, err := pageForm(pageURL)
	if err != nil {
		return "", err
	}
	resp, err := browser.PostForm(action, url.Values{"manifest": {manifest}})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), nil
}

// TestFlowEndToEnd runs make app's whole flow against the GitHub stand-in
// and moto: page → form post → GitHub's redirect with code and state →
// conversion → both secrets stored in the stack's Secrets Manager secrets
// (found through DescribeStacks) → next steps printed, and no secret in
// the output or the pages.
func TestFlowEndToEnd(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()

	// A function started before make app: no key yet.
	keyCache := secret.NewCache(f.reader, f.stack.GitHubAppPrivateKeyARN, "", secret.CacheOptions{})
	if _, err := keyCache.Get(ctx); !errors.Is(err, secret.ErrNotSet) {
		t.Fatalf("before make app: got %v, want ErrNotSet (the template's placeholder)", err)
	}

	pages := make(chan string, 1)
	var out bytes.Buffer
	res, err := app.Run(ctx, f.config(func(u string) {
		body, err := submit(u)
		if err != nil {
			body = "error: " + err.Error()
		}
		pages <- body
	}), f.cf, f.sm, &out)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	done := <-pages

	apps := f.fake.Apps()
	if len(apps) != 1 || !apps[0].Converted {
		t.Fatalf("fake apps %+v, want one, converted", apps)
	}
	a := apps[0]
	if got := f.secretValue(t, f.stack.GitHubAppPrivateKeyARN); got != a.PEM {
		t.Errorf("private key secret holds %d bytes, want the App's pem", len(got))
	}
	if got := f.secretValue(t, f.stack.WebhookSecretARN); got != a.WebhookSecret {
		t.Errorf("webhook secret not the App's")
	}
	if res.AppID != a.ID || res.InstallURL != f.gh.URL+"/apps/"+a.Slug+"/installations/new" || a.Slug != "ghclaim-e2e" {
		t.Errorf("result %+v, app %d %q", res, a.ID, a.Slug)
	}

	var m ghfake.Manifest
	if err := json.Unmarshal(a.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	// A user's App (the test registers no -org): no organisation runners.
	wantPerms := map[string]string{"administration": "write", "actions": "read", "metadata": "read"}
	if fmt.Sprint(m.DefaultPermissions) != fmt.Sprint(wantPerms) || fmt.Sprint(m.DefaultEvents) != "[workflow_job]" ||
		m.HookAttributes == nil || m.HookAttributes.URL != hookURL || m.Public || !strings.HasSuffix(m.RedirectURL, "/callback") {
		t.Errorf("manifest GitHub received: %s", a.Manifest)
	}

	text := out.String()
	for _, want := range []string{fmt.Sprintf("GitHubAppId=%d", a.ID), res.InstallURL, f.stack.GitHubAppPrivateKeyARN} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for name, s := range map[string]string{"pem": a.PEM, "webhook secret": a.WebhookSecret, "client secret": a.ClientSecret, "key body": pemBody(a.PEM)} {
		if strings.Contains(text, s) || strings.Contains(done, s) {
			t.Errorf("the %s reached the output or the page", name)
		}
	}
	if !strings.Contains(done, "registered") || !strings.Contains(done, res.InstallURL) {
		t.Errorf("callback page: %s", done)
	}

	// The same function, after the cache's retry: the key is there.
	later := secret.NewCache(f.reader, f.stack.GitHubAppPrivateKeyARN, "", secret.CacheOptions{})
	if v, err := later.Get(ctx); err != nil || v != a.PEM {
		t.Errorf("after make app: got %d bytes, %v; want the pem", len(v), err)
	}
}

func pemBody(p string) string {
	lines := strings.Split(strings.TrimSpace(p), "\n")
	if len(lines) < 3 {
		return p
	}
	return lines[1]
}

// failingConversion is a transport that never reaches GitHub's
// conversion (the network failed) and remembers the code it carried;
// every other request goes through.
// failingConversion resets the connection of the first fails conversions
// (every one when fails is negative) before they reach GitHub.
type failingConversion struct {
	mu    sync.Mutex
	code  string
	fails int
}

func (f *failingConversion) RoundTrip(r *http.Request) (*http.Response, error) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/app-manifests/"); ok {
		f.mu.Lock()
		f.code, _, _ = strings.Cut(rest, "/")
		fail := f.fails != 0
		f.fails--
		f.mu.Unlock()
		if fail {
			return nil, errors.New("connection reset by peer")
		}
	}
	return upstream.RoundTrip(r)
}

// TestFailedConversionKeepsTheCodeOut: when the conversion never reached
// GitHub, its one-time code can still be exchanged for the App's key and
// webhook secret, so neither the error, the printed output nor the page
// shown in the browser may quote it. The page keeps serving (a reload may
// get through); the operator's interrupt ends the run with the last
// failure.
func TestFailedConversionKeepsTheCodeOut(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tr := &failingConversion{fails: -1}
	cfg := f.config(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pages := make(chan string, 1)
	cfg.Listening = func(u string) {
		go func() {
			body, err := submit(u)
			if err != nil {
				body = "error: " + err.Error()
			}
			pages <- body
			cancel() // the operator gives up
		}()
	}
	cfg.HTTP = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var out bytes.Buffer
	_, err := app.Run(ctx, cfg, f.cf, f.sm, &out)
	page := <-pages
	if !strings.Contains(page, "Reload this page to try again") {
		t.Errorf("page %q: want the operator told a reload tries again", page)
	}
	if err == nil {
		t.Fatal("Run succeeded though the conversion failed")
	}
	tr.mu.Lock()
	code := tr.code
	tr.mu.Unlock()
	if code == "" {
		t.Fatal("the conversion was never attempted")
	}
	for name, text := range map[string]string{"error": err.Error(), "output": out.String(), "page": page} {
		if strings.Contains(text, code) {
			t.Errorf("the one-time code reached the %s: %s", name, text)
		}
	}
	if !strings.Contains(err.Error(), "connection reset by peer") || !strings.Contains(err.Error(), "conversions") {
		t.Errorf("error %q does not say what failed", err)
	}
}

// TestCallbackRefusesAForeignState: a redirect whose state is not the
// page's converts nothing and stores nothing; the real one still works.
func TestCallbackRefusesAForeignState(t *testing.T) {
	t.Parallel()
	f := setup(t)
	before := f.secretValue(t, f.stack.WebhookSecretARN)
	var out bytes.Buffer
	refused := make(chan int, 4)
	_, err := app.Run(context.Background(), f.config(func(pageURL string) {
		// A code GitHub really issued, delivered with someone else's state.
		loc, err := postManifestFor(pageURL)
		if err != nil {
			refused <- -1
			return
		}
		q := loc.Query()
		q.Set("state", "0123456789abcdef0123456789abcdef")
		forged := *loc
		forged.RawQuery = q.Encode()
		resp, err := browser.Get(forged.String())
		if err != nil {
			refused <- -1
			return
		}
		resp.Body.Close()
		refused <- resp.StatusCode
		if apps := f.fake.Apps(); len(apps) != 1 || apps[0].Converted {
			refused <- -2
		}
		if _, err := submitTo(loc); err != nil { // the genuine redirect
			refused <- -3
		}
	}), f.cf, f.sm, &out)
	if got := <-refused; got != http.StatusBadRequest {
		t.Fatalf("forged callback: got %d, want 400", got)
	}
	select {
	case code := <-refused:
		t.Fatalf("step failed: %d", code)
	default:
	}
	if err != nil {
		t.Fatalf("the genuine callback after a forged one: %v", err)
	}
	if after := f.secretValue(t, f.stack.WebhookSecretARN); after == before {
		t.Error("the genuine callback stored nothing")
	}
}

// TestConversionRetriedByAReload: a conversion that never reached GitHub
// (a reset connection) leaves its code unspent; the page keeps serving, and
// the operator's reload of GitHub's redirect converts it and stores the
// App's key and secret. Before, the first failure ended make app and the
// App GitHub had made could never be converted.
func TestConversionRetriedByAReload(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tr := &failingConversion{fails: 1}
	statuses := make(chan []int, 1)
	cfg := f.config(func(pageURL string) {
		loc, err := postManifestFor(pageURL)
		if err != nil {
			statuses <- nil
			return
		}
		first, _ := submitTo(loc)
		second, _ := submitTo(loc) // the reload
		statuses <- []int{first, second}
	})
	cfg.HTTP = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var out bytes.Buffer
	res, err := app.Run(context.Background(), cfg, f.cf, f.sm, &out)
	got := <-statuses
	if err != nil || len(got) != 2 || got[0] != http.StatusBadGateway || got[1] != http.StatusOK {
		t.Fatalf("Run: %+v, %v; callbacks answered %v, want 502 then 200", res, err, got)
	}
	apps := f.fake.Apps()
	if len(apps) != 1 || f.secretValue(t, f.stack.GitHubAppPrivateKeyARN) != apps[0].PEM {
		t.Fatal("the reload did not store the App's private key")
	}
}

// TestPageAnswersOnlyItsOwnHost: a web page that rebinds its own domain to
// 127.0.0.1 reaches the local page with its own Host: refused (421), so it
// can neither read the state from the page nor have a code of its own
// App converted into the stack's secrets.
func TestPageAnswersOnlyItsOwnHost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	type seen struct{ page, callback, genuine int }
	got := make(chan seen, 1)
	_, err := app.Run(context.Background(), f.config(func(pageURL string) {
		var s seen
		defer func() { got <- s }()
		pu, _ := url.Parse(pageURL)
		_, port, _ := net.SplitHostPort(pu.Host)
		foreign := func(u string) int {
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			req.Host = "attacker.example:" + port
			resp, err := browser.Do(req)
			if err != nil {
				return -1
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		s.page = foreign(pageURL)
		loc, err := postManifestFor(pageURL)
		if err != nil {
			return
		}
		s.callback = foreign(loc.String())
		s.genuine, _ = submitTo(loc)
	}), f.cf, f.sm, &bytes.Buffer{})
	s := <-got
	if s.page != http.StatusMisdirectedRequest || s.callback != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host: page %d, callback %d; want 421 for both", s.page, s.callback)
	}
	if err != nil || s.genuine != http.StatusOK {
		t.Fatalf("the genuine callback after the foreign ones: %d, %v", s.genuine, err)
	}
}

// heldConversion holds the conversion request, once it is on its way,
// until gone is closed (the browser has left), then sends it on: unless
// its own context ended meanwhile.
type heldConversion struct {
	once           sync.Once
	received, gone chan struct{}
}

func (h *heldConversion) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/app-manifests/") {
		h.once.Do(func() { close(h.received) })
		select {
		case <-h.gone:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return upstream.RoundTrip(r)
}

// TestBrowserLeavingMidConversion: the browser dropping the callback
// request while the code is converted (a tab closed) does not drop
// GitHub's answer, the only copy of the App's key and webhook secret.
func TestBrowserLeavingMidConversion(t *testing.T) {
	t.Parallel()
	f := setup(t)
	h := &heldConversion{received: make(chan struct{}), gone: make(chan struct{})}
	cfg := f.config(func(pageURL string) {
		loc, err := postManifestFor(pageURL)
		if err != nil {
			close(h.gone)
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-h.received
			cancel() // the tab is closed
			close(h.gone)
		}()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
		if resp, err := browser.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	cfg.HTTP = &http.Client{Transport: h, Timeout: 10 * time.Second}
	res, err := app.Run(context.Background(), cfg, f.cf, f.sm, &bytes.Buffer{})
	apps := f.fake.Apps()
	if err != nil || len(apps) != 1 || f.secretValue(t, f.stack.GitHubAppPrivateKeyARN) != apps[0].PEM {
		t.Fatalf("Run: %+v, %v: want the App's key stored though the browser left", res, err)
	}
}

// postManifestFor posts the page's form to GitHub without following the
// redirect, and returns where GitHub sends the browser.
func postManifestFor(pageURL string) (*url.URL, error) {
	action, manifest, err := pageForm(pageURL)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: browser.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(action, url.Values{"manifest": {manifest}})
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return url.Parse(resp.Header.Get("Location"))
}

func submitTo(u *url.URL) (int, error) {
	resp, err := browser.Get(u.String())
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestFormURL: a user's App, an organisation's, and GitHub Enterprise
// Server's host, each with the state.
func TestFormURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, org, github, want string
	}{
		{name: "user", github: "https://github.com", want: "https://github.com/settings/apps/new?state="},
		{name: "org", org: "octo-org", github: "https://github.com", want: "https://github.com/organizations/octo-org/settings/apps/new?state="},
		{name: "GHES org", org: "eng", github: "https://ghe.example.com/", want: "https://ghe.example.com/organizations/eng/settings/apps/new?state="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := app.FormURL(app.Config{Org: tt.org, GitHubURL: tt.github}, "s1")
			if got != tt.want+"s1" {
				t.Errorf("got %s, want %ss1", got, tt.want)
			}
		})
	}
}

// TestPageInHeadlessChromium drives the page with a real browser: Chromium
// loads it, its script posts the form to the stand-in, follows GitHub's
// redirect to the callback and renders the result. Skipped only when
// Chromium is missing outside CI (.ci/run installs it).
func TestPageInHeadlessChromium(t *testing.T) {
	t.Parallel()
	bin := chromium()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed and CI is set: .ci/run installs it (apt-get install chromium)")
		}
		t.Skip("chromium not installed (apt-get install chromium); CI runs this test")
	}
	f := setup(t)
	dom := make(chan string, 1)
	var out bytes.Buffer
	res, err := app.Run(context.Background(), f.config(func(pageURL string) {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
			"--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom", pageURL)
		b, err := cmd.Output()
		if err != nil {
			b = append(b, []byte("\nchromium: "+err.Error())...)
		}
		dom <- string(b)
	}), f.cf, f.sm, &out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := <-dom
	if !strings.Contains(got, `id="result"`) || !strings.Contains(got, "registered") || !strings.Contains(got, res.InstallURL) {
		t.Errorf("chromium ended on:\n%s", got)
	}
	if apps := f.fake.Apps(); len(apps) != 1 || f.secretValue(t, f.stack.GitHubAppPrivateKeyARN) != apps[0].PEM {
		t.Error("the browser's flow did not store the App's key")
	}
}

func chromium() string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

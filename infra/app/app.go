// Package app owns `make app`: it registers ghclaim's GitHub App from a
// manifest and stores the App's credentials where the deployed stack reads
// them, so setup is: deploy, run make app, click twice, install the App.
//
// The flow (docs.github.com, "Registering a GitHub App from a manifest"):
// a page served on 127.0.0.1 posts the manifest to GitHub's
// settings/apps/new (a user's App) or organizations/ORG/settings/apps/new
// (an organisation's; GitHub Enterprise Server has the same paths on its
// own host); GitHub creates the App and redirects the browser to this
// page's /callback with ?code=…&state=…; the code is converted once with
// POST /app-manifests/{code}/conversions (unauthenticated, single-use,
// valid one hour) into the App's id, private key (pem) and webhook secret;
// the key and then the secret are written (PutSecretValue) into the
// stack's Secrets Manager secrets, found through the stack's outputs.
//
// Decisions:
//   - The private key is written before the webhook secret: the webhook
//     accepts nothing until its secret exists, so any job it accepts finds
//     the key already there.
//   - state is 128 random bits, compared in constant time; a callback
//     without it (another page, a replayed link) converts nothing. The
//     page listens on 127.0.0.1 only and stops after one good callback.
//   - The manifest asks for the least the calls need for pools of either
//     scope (ghapp.Needs, from GitHub's "Permissions required for GitHub
//     Apps"): administration write (JIT runners for repository pools),
//     organization self-hosted runners write (organisation pools, so only
//     for an App registered on an organisation), actions
//     read (a job's status, and GitHub subscribes an App to workflow_job
//     only with it), metadata read (always granted), and only the
//     workflow_job event. permissions_test.go checks it against GitHub's
//     own table. The App is private (public false): only its owner can
//     install it.
//   - The App id is not a secret and the template takes it as the
//     GitHubAppId parameter, so it is printed with the redeploy command,
//     not stored: a parameter cannot be changed without a deploy.
//   - The pem, the webhook secret and the client secret never reach the
//     output, a log line or an error; the client secret (OAuth, unused by
//     ghclaim) is not kept at all.
//
// It must never talk to anything but GitHub, the stack's CloudFormation
// and Secrets Manager, and a browser on 127.0.0.1.
package app

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// Defaults of Config.
const (
	DefaultGitHubURL = "https://github.com"
	DefaultAPIURL    = "https://api.github.com"
	DefaultAddr      = "127.0.0.1:0"
	DefaultTimeout   = 15 * time.Minute
	// ProjectURL is the manifest's url, the App's homepage.
	ProjectURL = "https://github.com/ghclaim/ghclaim"
	// maxName is GitHub's limit on an App's name.
	maxName = 34
)

// Stack outputs the command reads (template.yaml).
const (
	OutputWebhookURL       = "WebhookUrl"
	OutputWebhookSecretARN = "WebhookSecretArn"
	OutputPrivateKeyARN    = "GitHubAppPrivateKeyArn"
)

// CloudFormation is the part of the CloudFormation API used here.
type CloudFormation interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// SecretsManager is the part of the Secrets Manager API used here.
type SecretsManager interface {
	PutSecretValue(ctx context.Context, in *secretsmanager.PutSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
}

var (
	_ CloudFormation = (*cloudformation.Client)(nil)
	_ SecretsManager = (*secretsmanager.Client)(nil)
)

// Config is what Run needs. Stack is required unless the three values it
// provides (WebhookURL, WebhookSecretARN, PrivateKeyARN) are all given.
type Config struct {
	Stack            string
	Org              string // register the App on this organisation; empty: the signed-in user
	Name             string // default "ghclaim-<stack>"
	GitHubURL        string // web root: https://github.com or https://HOST (GHES)
	APIURL           string // REST root: https://api.github.com or https://HOST/api/v3
	Addr             string // where the local page listens; 127.0.0.1 only
	WebhookURL       string
	WebhookSecretARN string
	PrivateKeyARN    string
	Timeout          time.Duration // how long to wait for the browser
	HTTP             *http.Client  // for the conversion; default a 30 s client
	// Listening, when set, is told the local page's URL (tests drive a
	// browser to it); the URL is always printed to Out.
	Listening func(pageURL string)
}

// Result is what the flow made; it carries no secret.
type Result struct {
	AppID      int64
	Slug       string
	HTMLURL    string
	Owner      string
	InstallURL string
}

// Run serves the page, waits for GitHub's redirect, converts the code,
// stores the credentials and prints what is left to out.
func Run(ctx context.Context, cfg Config, cf CloudFormation, sm SecretsManager, out io.Writer) (Result, error) {
	if err := cfg.fill(ctx, cf); err != nil {
		return Result{}, err
	}
	state, err := randomState()
	if err != nil {
		return Result{}, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return Result{}, fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	if !ln.Addr().(*net.TCPAddr).IP.IsLoopback() {
		ln.Close()
		return Result{}, fmt.Errorf("listen %s: the page must listen on 127.0.0.1 only", cfg.Addr)
	}
	base := "http://" + ln.Addr().String()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	f := &flow{cfg: cfg, cf: cf, sm: sm, state: state, base: base, done: make(chan outcome, 1),
		hosts: []string{ln.Addr().String(), "localhost:" + port}}
	if port == "80" { // a browser leaves the default port out of Host
		f.hosts = append(f.hosts, host, "localhost")
	}
	srv := &http.Server{Handler: f.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	fmt.Fprintf(out, "Open %s/ in a browser signed in to %s, check the App's name and click \"Create GitHub App\".\n", base, cfg.GitHubURL)
	fmt.Fprintf(out, "Waiting up to %s for GitHub's redirect…\n", cfg.Timeout)
	if cfg.Listening != nil {
		cfg.Listening(base + "/")
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	got := func(o outcome) (Result, error) {
		if o.err != nil {
			return Result{}, o.err
		}
		printNext(out, cfg, o.res)
		return o.res, nil
	}
	select {
	case o := <-f.done:
		return got(o)
	case <-wctx.Done():
	}
	// Out of time, or interrupted: a conversion under way has spent its
	// code, and only its answer holds the App's key and secret, so it is
	// waited for (its own bound), and its outcome is the run's. Under way
	// is read before done is: end sends, then clears it, so one that ends
	// between the two reads is found in done either way.
	busy := f.underWay()
	select {
	case o := <-f.done:
		return got(o)
	default:
	}
	if busy {
		fmt.Fprintln(out, "A conversion is under way: waiting for it to store the App's secrets…")
		select {
		case o := <-f.done:
			return got(o)
		case <-time.After(conversionTimeout + 5*time.Second):
		}
	}
	if err := f.failed(); err != nil {
		return Result{}, fmt.Errorf("no conversion within %s (%w); the last try: %w", cfg.Timeout, wctx.Err(), err)
	}
	return Result{}, fmt.Errorf("no redirect from GitHub within %s: %w", cfg.Timeout, wctx.Err())
}

// fill sets defaults and reads what is missing from the stack's outputs.
func (c *Config) fill(ctx context.Context, cf CloudFormation) error {
	c.GitHubURL = strings.TrimRight(defaultTo(c.GitHubURL, DefaultGitHubURL), "/")
	c.APIURL = strings.TrimRight(defaultTo(c.APIURL, DefaultAPIURL), "/")
	c.Addr = defaultTo(c.Addr, DefaultAddr)
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second}
	}
	if c.WebhookURL == "" || c.WebhookSecretARN == "" || c.PrivateKeyARN == "" {
		if c.Stack == "" {
			return errors.New("app: -stack is required (or -webhook-url, -webhook-secret-arn and -private-key-arn)")
		}
		if cf == nil {
			return errors.New("app: no CloudFormation client to read the stack's outputs")
		}
		outs, err := stackOutputs(ctx, cf, c.Stack)
		if err != nil {
			return err
		}
		for _, o := range []struct {
			dst  *string
			name string
		}{{&c.WebhookURL, OutputWebhookURL}, {&c.WebhookSecretARN, OutputWebhookSecretARN}, {&c.PrivateKeyARN, OutputPrivateKeyARN}} {
			if *o.dst != "" {
				continue
			}
			if *o.dst = outs[o.name]; *o.dst == "" {
				return fmt.Errorf("app: stack %s has no output %s (deploy template.yaml first, or pass it as a flag)", c.Stack, o.name)
			}
		}
	}
	if c.Name == "" {
		c.Name = "ghclaim-" + defaultTo(c.Stack, "runners")
	}
	if len(c.Name) > maxName {
		return fmt.Errorf("app: name %q is longer than GitHub's %d characters: pass -name", c.Name, maxName)
	}
	for _, u := range []struct{ flag, v string }{{"-github-url", c.GitHubURL}, {"-api-url", c.APIURL}, {"-webhook-url", c.WebhookURL}} {
		if p, err := url.Parse(u.v); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return fmt.Errorf("app: %s %q is not an absolute http(s) URL", u.flag, u.v)
		}
	}
	return nil
}

func stackOutputs(ctx context.Context, cf CloudFormation, stack string) (map[string]string, error) {
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: &stack})
	if err != nil {
		return nil, fmt.Errorf("app: describe stack %s: %w", stack, err)
	}
	if len(out.Stacks) == 0 {
		return nil, fmt.Errorf("app: stack %s not found", stack)
	}
	m := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		if o.OutputKey != nil && o.OutputValue != nil {
			m[*o.OutputKey] = *o.OutputValue
		}
	}
	return m, nil
}

func defaultTo(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func randomState() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("app: state: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Manifest is the GitHub App manifest ghclaim registers.
type Manifest struct {
	Name               string            `json:"name"`
	URL                string            `json:"url"`
	HookAttributes     HookAttributes    `json:"hook_attributes"`
	RedirectURL        string            `json:"redirect_url"`
	Public             bool              `json:"public"`
	DefaultEvents      []string          `json:"default_events"`
	DefaultPermissions map[string]string `json:"default_permissions"`
}

// HookAttributes is the manifest's webhook.
type HookAttributes struct {
	URL    string `json:"url"`
	Active bool   `json:"active"`
}

// NewManifest returns the manifest for a stack's webhook URL, redirecting
// to callback, for an App registered on org ("": the signed-in user).
func NewManifest(name, webhookURL, callback, org string) Manifest {
	return Manifest{
		Name:               name,
		URL:                ProjectURL,
		HookAttributes:     HookAttributes{URL: webhookURL, Active: true},
		RedirectURL:        callback,
		Public:             false,
		DefaultEvents:      []string{ghapp.EventWorkflowJob},
		DefaultPermissions: manifestPermissions(org),
	}
}

// manifestPermissions is what the calls need for pools of the scopes the
// App can serve, and metadata read, which GitHub grants every App. An App
// of an organisation serves pools of both scopes. A user's App is private
// (public false): only that account can install it, and a user account
// has no organisation runners, so it asks no organisation permission.
func manifestPermissions(org string) map[string]string {
	scopes := []string{ghapp.ScopeRepo}
	if org != "" {
		scopes = append(scopes, ghapp.ScopeOrg)
	}
	p := ghapp.Needs(scopes...)
	p["metadata"] = "read"
	return p
}

// FormURL is where the manifest is posted, with the state GitHub hands back.
func FormURL(c Config, state string) string {
	c.GitHubURL = strings.TrimRight(c.GitHubURL, "/")
	path := "/settings/apps/new"
	if c.Org != "" {
		path = "/organizations/" + url.PathEscape(c.Org) + "/settings/apps/new"
	}
	return c.GitHubURL + path + "?" + url.Values{"state": {state}}.Encode()
}

type outcome struct {
	res Result
	err error
}

type flow struct {
	cfg   Config
	cf    CloudFormation
	sm    SecretsManager
	state string
	base  string
	done  chan outcome
	hosts []string // the Host headers the page answers

	mu      sync.Mutex
	lastErr error // the last conversion that failed for a passing reason
	// converting: a callback is converting a code and storing the
	// secrets; stored: the App whose secrets were stored (begin).
	converting bool
	stored     *Result
}

// begin reports whether a callback may convert its code now. GitHub's code
// works once, so a reload of the redirect while another callback converts
// (the page looks stuck) or after one stored its App must not convert
// again: its 404 ended make app as a failure while the first callback
// stored the App's key and secret, and the App id was never shown.
// stored is that App, when there is one; busy, a conversion under way.
func (f *flow) begin() (stored *Result, busy bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stored != nil || f.converting {
		return f.stored, f.converting
	}
	f.converting = true
	return nil, false
}

// end records a conversion's outcome: sent to Run first, then no longer
// under way, so that Run, finding none under way, finds its outcome.
func (f *flow) end(res Result, err error) {
	f.mu.Lock()
	if err == nil {
		f.stored = &res
	}
	f.mu.Unlock()
	select {
	case f.done <- outcome{res: res, err: err}:
	default: // a second callback after the first: the first one counts
	}
	f.mu.Lock()
	f.converting = false
	f.mu.Unlock()
}

// underWay reports whether a callback is converting a code.
func (f *flow) underWay() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.converting
}

func (f *flow) routes() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", f.page)
	m.HandleFunc("GET /callback", f.callback)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only a browser that asked for 127.0.0.1 (or localhost) by name:
		// a web page that rebinds its own domain to 127.0.0.1 sends its
		// own Host, and could otherwise read the state from the page and
		// have its own App's code converted into the stack's secrets.
		if !slices.Contains(f.hosts, strings.ToLower(r.Host)) {
			http.Error(w, "this page answers only http://"+f.hosts[0]+"/", http.StatusMisdirectedRequest)
			return
		}
		m.ServeHTTP(w, r)
	})
}

// failed is the last conversion that failed for a passing reason, if any.
func (f *flow) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// passing marks a conversion error that a reload of GitHub's redirect may
// get past (the request never reached GitHub, or GitHub failed): the code
// is still unspent, and works for an hour.
type passing struct{ error }

func (p passing) Unwrap() error { return p.error }

var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ghclaim: register the GitHub App</title></head>
<body>
<h1>Register ghclaim's GitHub App</h1>
<p>This page posts the App's manifest to <code>{{.Action}}</code> (at once, or when you click the button). GitHub asks you to confirm the name, creates the App and sends you back here.</p>
<form id="manifest-form" method="post" action="{{.Action}}">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<button id="create" type="submit">Create the GitHub App on GitHub</button>
</form>
<pre>{{.Pretty}}</pre>
<script>document.getElementById("manifest-form").submit();</script>
</body></html>
`))

func (f *flow) page(w http.ResponseWriter, _ *http.Request) {
	m := NewManifest(f.cfg.Name, f.cfg.WebhookURL, f.base+"/callback", f.cfg.Org)
	compact, _ := json.Marshal(m)
	pretty, _ := json.MarshalIndent(m, "", "  ")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = pageTmpl.Execute(w, map[string]any{
		"Action":   template.URL(FormURL(f.cfg, f.state)),
		"Manifest": string(compact),
		"Pretty":   string(pretty),
	})
}

var doneTmpl = template.Must(template.New("done").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ghclaim: App registered</title></head>
<body><h1 id="result">{{.Title}}</h1><p>{{.Text}}</p>{{if .Install}}<p><a id="install" href="{{.Install}}">Install the App</a></p>{{end}}</body></html>
`))

func (f *flow) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.state)) != 1 {
		w.WriteHeader(http.StatusBadRequest)
		_ = doneTmpl.Execute(w, map[string]string{"Title": "Refused", "Text": "This callback's state does not match the page that posted the manifest: nothing was converted. Start again from the page."})
		return
	}
	code := q.Get("code")
	if code == "" {
		w.WriteHeader(http.StatusBadRequest)
		_ = doneTmpl.Execute(w, map[string]string{"Title": "Refused", "Text": "GitHub's redirect carries no code."})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	stored, busy := f.begin()
	switch {
	case busy:
		w.WriteHeader(http.StatusConflict)
		_ = doneTmpl.Execute(w, map[string]string{"Title": "Under way", "Text": "GitHub's answer to this App is being converted and stored: the terminal shows the outcome. Reload this page in a moment to see it here."})
		return
	case stored != nil:
		registered(w, *stored)
		return
	}
	// Not the browser's context: a tab closed while GitHub answers would
	// drop the answer, the only copy of the App's key and webhook secret.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), conversionTimeout)
	res, err := f.finish(ctx, code)
	cancel()
	if p := (passing{}); errors.As(err, &p) {
		// The page keeps serving: a reload of GitHub's redirect tries again.
		f.mu.Lock()
		f.lastErr, f.converting = err, false
		f.mu.Unlock()
		w.WriteHeader(http.StatusBadGateway)
		_ = doneTmpl.Execute(w, map[string]string{"Title": "Failed, for now", "Text": err.Error() + ". Reload this page to try again: the code works once, for an hour."})
		return
	}
	f.end(res, err)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		_ = doneTmpl.Execute(w, map[string]string{"Title": "Failed", "Text": err.Error()})
		return
	}
	registered(w, res)
}

// conversionTimeout bounds one callback's conversion and the storing of
// its secrets.
const conversionTimeout = 2 * time.Minute

// registered is the page of an App whose secrets are stored.
func registered(w http.ResponseWriter, res Result) {
	_ = doneTmpl.Execute(w, map[string]string{
		"Title":   fmt.Sprintf("GitHub App %s registered", res.Slug),
		"Text":    "Its private key and webhook secret are stored in the stack's Secrets Manager secrets. Back to the terminal for the last steps.",
		"Install": res.InstallURL,
	})
}

// conversion is the part of POST /app-manifests/{code}/conversions' answer
// that is kept. Secrets are fields only here, and leave only for Secrets
// Manager.
type conversion struct {
	ID            int64  `json:"id"`
	Slug          string `json:"slug"`
	HTMLURL       string `json:"html_url"`
	PEM           string `json:"pem"`
	WebhookSecret string `json:"webhook_secret"`
	Owner         struct {
		Login string `json:"login"`
	} `json:"owner"`
}

// finish converts the code and stores the credentials.
func (f *flow) finish(ctx context.Context, code string) (Result, error) {
	c, err := f.convert(ctx, code)
	if err != nil {
		return Result{}, err
	}
	if c.ID <= 0 || c.PEM == "" || c.WebhookSecret == "" {
		return Result{}, errors.New("app: GitHub's conversion answer lacks the App id, private key or webhook secret")
	}
	for _, s := range []struct{ what, arn, value string }{
		{"private key", f.cfg.PrivateKeyARN, c.PEM},
		{"webhook secret", f.cfg.WebhookSecretARN, c.WebhookSecret},
	} {
		if s.arn == f.cfg.WebhookSecretARN && strings.Contains(s.value, ",") {
			// The webhook reads the secret as a rotation list ("new,old"):
			// stored, it would check every delivery against its pieces and
			// refuse them all. GitHub's generated secrets are hex; this one
			// is not. The key is stored.
			return Result{}, fmt.Errorf("app: the webhook secret GitHub generated for the App %s holds a comma, which ghclaim reads as a rotation list (\"new,old\"); "+
				"it was not stored in %s: set a new webhook secret without commas in the App's settings and store the same value there", c.Slug, s.arn)
		}
		if _, err := f.sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: &s.arn, SecretString: &s.value}); err != nil {
			// GitHub's answer was the only copy of the key and the
			// secret, and neither is shown: new ones must be made.
			return Result{}, fmt.Errorf("app: store the App's %s in %s: %w (the App %s exists, its key and webhook secret are not kept: "+
				"delete the App on GitHub and run make app again, or generate a new private key and webhook secret in its settings and store them in the stack's secrets)", s.what, s.arn, err, c.Slug)
		}
	}
	return Result{
		AppID: c.ID, Slug: c.Slug, HTMLURL: c.HTMLURL, Owner: c.Owner.Login,
		InstallURL: strings.TrimRight(c.HTMLURL, "/") + "/installations/new",
	}, nil
}

func (f *flow) convert(ctx context.Context, code string) (conversion, error) {
	u := f.cfg.APIURL + "/app-manifests/" + url.PathEscape(code) + "/conversions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return conversion{}, fmt.Errorf("app: conversion: %w", err)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := f.cfg.HTTP.Do(req)
	if err != nil {
		// The request's URL holds the one-time code, which buys the App's
		// key and webhook secret for an hour if the request never reached
		// GitHub: the error names the route, never the code.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return conversion{}, passing{fmt.Errorf("app: conversion (POST %s/app-manifests/{code}/conversions): %w", f.cfg.APIURL, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return conversion{}, fmt.Errorf("app: conversion: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &e) // an error body carries no secret
		if resp.StatusCode >= 500 {
			return conversion{}, passing{fmt.Errorf("app: conversion: GitHub answered %d %q", resp.StatusCode, e.Message)}
		}
		return conversion{}, fmt.Errorf("app: conversion: GitHub answered %d %q (a code works once and for one hour: start again)", resp.StatusCode, e.Message)
	}
	var c conversion
	if err := json.Unmarshal(body, &c); err != nil {
		return conversion{}, errors.New("app: conversion: GitHub's answer is not the expected JSON")
	}
	return c, nil
}

// printNext prints what is left to do. Nothing secret is in Result.
func printNext(out io.Writer, cfg Config, r Result) {
	stack := defaultTo(cfg.Stack, "<stack>")
	fmt.Fprintf(out, `
GitHub App %s (id %d) registered for %s: %s
Stored in Secrets Manager: its private key in %s, its webhook secret in %s.
The functions pick both up within 5 minutes, without a redeploy.

What is left:
  1. Give the stack the App id (a template parameter, not a secret):
       sam deploy --stack-name %s --parameter-overrides GitHubAppId=%d
     (or set GitHubAppId=%d in samconfig.toml's parameter_overrides, then sam deploy)
  2. Install the App on the repositories or organisation whose jobs it runs:
       %s
  3. Run a workflow with runs-on set to a pool's labels.
`, r.Slug, r.AppID, r.Owner, r.HTMLURL, cfg.PrivateKeyARN, cfg.WebhookSecretARN, stack, r.AppID, r.AppID, r.InstallURL)
}

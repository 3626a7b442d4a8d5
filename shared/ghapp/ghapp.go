// Package ghapp owns ghclaim's GitHub App client: App authentication
// (App JWT → installation token, cached) and the five REST operations the
// claimer needs — generate a JIT runner configuration, find a runner by
// name, delete a runner, read a job's status, read a repository's
// visibility and owner type — each exactly one GitHub call;
// and, authenticated as the App itself (JWT, never an installation token),
// the two the redeliverer needs: read the App's webhook delivery log and
// ask for a redelivery (app.go); and, for the operator CLI, GET /app.
//
// It must never retry, sleep, classify errors or log: the claimer owns the
// retry policy (DESIGN.md), and a retry hidden here would spend rate budget
// behind its back. Errors come back as go-github produced them, wrapped with
// context (%w), so errors.As still finds *github.ErrorResponse,
// *github.RateLimitError, *github.AbuseRateLimitError or a *url.Error.
// It must never log or put into an error a token, the private key or a JIT
// configuration (see Secret).
//
// Design decisions:
//   - App authentication is our own (auth.go), not ghinstallation: that
//     library pulled a second go-github major (v88) and golang-jwt into
//     every binary, for one RS256 signature and one POST. The App JWT is
//     signed with crypto/rsa: iat = now − 60 s (GitHub's advice against
//     clock drift), exp = iat + 10 min (GitHub's maximum, so now + 9 min),
//     iss = the App id as a decimal string. The private key is parsed once
//     and never leaves memory; neither the key, the JWT nor a token is
//     ever put into an error (the failed exchange's request is kept without
//     its Authorization header).
//   - Clients are built once per process and reused by warm invocations:
//     one go-github client per installation, cached in a map under a mutex,
//     each with its installation token cached until 5 minutes before its
//     expires_at (so it outlives the attempt that fetched it). The clock is
//     injected (Config.Now): tests move it to prove the refresh.
//   - One exchange per installation at a time: callers that need a token
//     while an exchange is in flight wait for its result (token or error)
//     instead of starting their own, so a cold start with a batch of
//     messages, or a bad key, costs one POST, not one per message. The
//     exchange runs apart from the caller's context, bounded by Timeout, so
//     one caller giving up does not fail the others; each caller still
//     stops waiting when its own context ends. A failed exchange is not
//     cached (the next caller tries again), except GitHub's refusal of the
//     App's credentials or installation (401, 404, a 403 that is no rate
//     limit): that answer is handed to every caller of the installation
//     for 20 s (refusalHold) without a new exchange, so a rotated key or
//     a suspension with hundreds of queued jobs costs GitHub one refused
//     exchange per installation and process every 20 s, not one (or two)
//     per claim attempt. Held, it is still GitHub's answer, typed and
//     classified as when it came: this package judges only which answers
//     a moment's wait cannot change, never a retry; a 5xx, a rate limit
//     or a network failure is never held.
//   - Config.Wrap wraps each installation's transport from the outside
//     (go-github → Wrap → token exchange → network), so a rate-reading
//     transport sees the API's responses with the installation's budget and
//     never the token endpoint's, whose X-RateLimit-* describe the App's own
//     JWT budget and would clobber the installation's reading. Through
//     Wrap, a failed exchange is an error, never a response.
//   - A failed token exchange must not look like a network blip (a
//     *url.Error is a net.Error, retried as a blip, its cause unnamed, even
//     when the private key is wrong). Outside Wrap, the token endpoint's
//     answer is handed to go-github as the response, so the caller sees
//     the ordinary typed error (401 → *github.ErrorResponse, 403 with
//     Remaining 0 → *github.RateLimitError, …) that shared/failure
//     classifies by status and names (a refusal of the App's key or
//     installation is retried as the App's fault, never failed as the
//     job's); its Response.Request is the access_tokens request. Callers
//     that shared one failed exchange each get their own copy of the answer.
//   - GITHUB_API_URL is used verbatim as the API root, for the token
//     exchange and go-github alike: "https://api.github.com", or
//     "https://HOST/api/v3" for GitHub Enterprise Server. go-github's
//     WithEnterpriseURLs is not used because it appends "/api/v3/" to any
//     URL without it, which breaks a stand-in served at the root.
//   - A runner group id of 0 means GitHub's "Default" group, id 1, as in
//     RUNNER_POOLS.
package ghapp

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/google/go-github/v62/github"
)

// DefaultBaseURL is GitHub.com's REST API root.
const DefaultBaseURL = "https://api.github.com"

// DefaultTimeout bounds one HTTP exchange with GitHub.
const DefaultTimeout = 10 * time.Second

// Scopes a JIT runner is registered at (the values of pool.Scope*).
const (
	ScopeRepo = "repo"
	ScopeOrg  = "org"
)

// defaultRunnerGroupID is GitHub's "Default" runner group.
const defaultRunnerGroupID = 1

var (
	// ErrRunnerNotFound: no runner with that name is registered in the scope.
	ErrRunnerNotFound = errors.New("runner not found")
	// ErrInvalidRequest: the call was refused before reaching GitHub
	// because its arguments cannot be right (unknown scope, missing name…).
	// Retrying does not help.
	ErrInvalidRequest error = permanent("invalid request")
)

// Config is what New needs. Only AppID and PrivateKey are required.
type Config struct {
	// AppID is the GitHub App's id (GITHUB_APP_ID).
	AppID int64
	// PrivateKey is the App's private key, PEM (PKCS#1 as GitHub issues
	// it, or PKCS#8). Resolved by the caller from Secrets Manager.
	PrivateKey []byte
	// KeyName says where PrivateKey was read from (a secret's ARN), so
	// that an unusable key's error names it. Never the key itself.
	KeyName string
	// BaseURL is the REST API root (GITHUB_API_URL); default DefaultBaseURL.
	BaseURL string
	// Transport is the network transport; default a clone of
	// http.DefaultTransport, this client's own: whatever else in the
	// process closes the shared one's idle connections cannot break a call.
	Transport http.RoundTripper
	// Wrap, when set, wraps each installation's authenticated transport,
	// e.g. with the transport that records X-RateLimit-* readings.
	Wrap func(installationID int64, base http.RoundTripper) http.RoundTripper
	// WrapApp, when set, wraps the transport of the App's own
	// JWT-authenticated client (the /app routes: the webhook delivery
	// log), whose X-RateLimit-* describe the App's budget.
	WrapApp func(base http.RoundTripper) http.RoundTripper
	// Timeout bounds one HTTP exchange; default DefaultTimeout.
	Timeout time.Duration
	// Now is the clock that dates App JWTs and decides when a cached
	// installation token is refreshed; default time.Now.
	Now clock.Func
	// Sleep waits before a request refused with a token minted moments
	// ago is sent again (see installTransport); default clock.Sleep.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client is the GitHub App client. It is safe for concurrent use; build one
// per process.
type Client struct {
	appID   int64
	key     *rsa.PrivateKey
	apiRoot string   // no trailing slash, for the token exchange
	baseURL *url.URL // with a trailing slash, for go-github
	tr      http.RoundTripper
	wrap    func(int64, http.RoundTripper) http.RoundTripper
	timeout time.Duration
	now     clock.Func
	sleep   func(context.Context, time.Duration) error
	wrapApp func(http.RoundTripper) http.RoundTripper
	appState

	mu      sync.Mutex
	clients map[int64]*github.Client

	// limited is a rate limit GitHub answered a token exchange with,
	// handed to every exchange of the App until limitedUntil (holdLimit).
	limitMu      sync.Mutex
	limited      *exchangeError
	limitedUntil time.Time
}

// New validates cfg, fills its defaults and parses the private key. It
// makes no network call.
func New(cfg Config) (*Client, error) {
	if cfg.AppID <= 0 {
		return nil, fmt.Errorf("ghapp: app id %d: want a positive GitHub App id", cfg.AppID)
	}
	key, err := parseKey(cfg.PrivateKey)
	if err != nil {
		if cfg.KeyName != "" {
			return nil, fmt.Errorf("ghapp: private key in %s: %w", cfg.KeyName, err)
		}
		return nil, fmt.Errorf("ghapp: private key: %w", err)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	root := strings.TrimRight(cfg.BaseURL, "/")
	u, err := url.Parse(root + "/")
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("ghapp: base url %q: want an absolute http(s) URL", cfg.BaseURL)
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	cfg.Now = clock.Or(cfg.Now)
	if cfg.Sleep == nil {
		cfg.Sleep = clock.Sleep
	}
	return &Client{
		appID: cfg.AppID, key: key, apiRoot: root, baseURL: u,
		tr: cfg.Transport, wrap: cfg.Wrap, wrapApp: cfg.WrapApp, timeout: cfg.Timeout, now: cfg.Now, sleep: cfg.Sleep,
		clients: map[int64]*github.Client{},
	}, nil
}

// client returns the installation's go-github client, built on first use.
func (c *Client) client(installationID int64) (*github.Client, error) {
	if installationID <= 0 {
		return nil, fmt.Errorf("installation id %d: %w", installationID, ErrInvalidRequest)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gh, ok := c.clients[installationID]; ok {
		return gh, nil
	}
	var rt http.RoundTripper = installTransport{in: &installation{c: c, id: installationID}, next: c.tr}
	if c.wrap != nil {
		rt = c.wrap(installationID, rt)
	}
	gh := github.NewClient(&http.Client{Transport: tokenErrors{next: rateTrim{rt}, now: c.now}, Timeout: c.timeout})
	gh.BaseURL = c.baseURL
	c.clients[installationID] = gh
	return gh, nil
}

// JITRequest asks for a just-in-time runner configuration.
type JITRequest struct {
	// Scope is ScopeRepo or ScopeOrg.
	Scope string
	// Owner is the repository's owner, or the organisation.
	Owner string
	// Repo is the repository name (ScopeRepo only).
	Repo string
	// Name is the runner's name, unique in its scope (job.RunnerName).
	Name string
	// Labels are the runner's labels; GitHub requires at least one.
	Labels []string
	// RunnerGroupID is the runner group; 0 means the Default group (1).
	RunnerGroupID int64
	// WorkFolder is the runner's work directory; empty means GitHub's default.
	WorkFolder string
}

// JIT is a registered just-in-time runner and its configuration.
type JIT struct {
	RunnerID int64
	Name     string
	// EncodedConfig is the base64 blob for `run.sh --jitconfig`. It lets
	// anyone who holds it run jobs as this runner: it is a Secret.
	EncodedConfig Secret
}

// Runner is a registered self-hosted runner.
type Runner struct {
	ID     int64
	Name   string
	Status string // "online" or "offline"
	Busy   bool
}

// where names a scope for error messages.
func where(scope, owner, repo string) string {
	if scope == ScopeOrg {
		return "org " + owner
	}
	return "repo " + owner + "/" + repo
}

func checkScope(scope, owner, repo string) error {
	switch {
	case scope != ScopeRepo && scope != ScopeOrg:
		return fmt.Errorf("scope %q: want %q or %q: %w", scope, ScopeRepo, ScopeOrg, ErrInvalidRequest)
	case owner == "":
		return fmt.Errorf("owner: required: %w", ErrInvalidRequest)
	case scope == ScopeRepo && repo == "":
		return fmt.Errorf("repo: required at scope repo: %w", ErrInvalidRequest)
	}
	return nil
}

// GenerateJIT registers a runner and returns its JIT configuration
// (POST …/actions/runners/generate-jitconfig). A name already taken in the
// scope fails with a 409 that IsAlreadyExists recognises.
func (c *Client) GenerateJIT(ctx context.Context, installationID int64, req JITRequest) (JIT, error) {
	if err := checkScope(req.Scope, req.Owner, req.Repo); err != nil {
		return JIT{}, fmt.Errorf("generate jit config: %w", err)
	}
	if req.Name == "" {
		return JIT{}, fmt.Errorf("generate jit config: name: required: %w", ErrInvalidRequest)
	}
	gh, err := c.client(installationID)
	if err != nil {
		return JIT{}, fmt.Errorf("generate jit config: %w", err)
	}
	body := &github.GenerateJITConfigRequest{Name: req.Name, RunnerGroupID: req.RunnerGroupID, Labels: req.Labels}
	if body.RunnerGroupID == 0 {
		body.RunnerGroupID = defaultRunnerGroupID
	}
	if req.WorkFolder != "" {
		body.WorkFolder = github.String(req.WorkFolder)
	}
	var cfg *github.JITRunnerConfig
	if req.Scope == ScopeOrg {
		cfg, _, err = gh.Actions.GenerateOrgJITConfig(ctx, req.Owner, body)
	} else {
		cfg, _, err = gh.Actions.GenerateRepoJITConfig(ctx, req.Owner, req.Repo, body)
	}
	if err != nil {
		return JIT{}, fmt.Errorf("generate jit config for runner %s in %s: %w", req.Name, where(req.Scope, req.Owner, req.Repo), err)
	}
	if cfg.GetRunner().GetID() == 0 || cfg.GetEncodedJITConfig() == "" {
		return JIT{}, fmt.Errorf("generate jit config for runner %s in %s: answer without runner id or config", req.Name, where(req.Scope, req.Owner, req.Repo))
	}
	name := cfg.GetRunner().GetName()
	if name == "" {
		name = req.Name
	}
	return JIT{RunnerID: cfg.GetRunner().GetID(), Name: name, EncodedConfig: NewSecret(cfg.GetEncodedJITConfig())}, nil
}

// FindRunner returns the runner registered under name in the scope
// (GET …/actions/runners?name=). None: an error wrapping ErrRunnerNotFound.
func (c *Client) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (Runner, error) {
	if err := checkScope(scope, owner, repo); err != nil {
		return Runner{}, fmt.Errorf("find runner %s: %w", name, err)
	}
	gh, err := c.client(installationID)
	if err != nil {
		return Runner{}, fmt.Errorf("find runner %s: %w", name, err)
	}
	opts := &github.ListRunnersOptions{Name: github.String(name), ListOptions: github.ListOptions{PerPage: 100}}
	var rs *github.Runners
	var resp *github.Response
	if scope == ScopeOrg {
		rs, resp, err = gh.Actions.ListOrganizationRunners(ctx, owner, opts)
	} else {
		rs, resp, err = gh.Actions.ListRunners(ctx, owner, repo, opts)
	}
	if err != nil {
		return Runner{}, fmt.Errorf("find runner %s in %s: %w", name, where(scope, owner, repo), err)
	}
	// The name filter is GitHub's; checking again costs nothing and keeps
	// a server that ignores it from handing us someone else's runner.
	for _, r := range rs.Runners {
		if strings.EqualFold(r.GetName(), name) {
			return Runner{ID: r.GetID(), Name: r.GetName(), Status: r.GetStatus(), Busy: r.GetBusy()}, nil
		}
	}
	if resp != nil && resp.NextPage != 0 {
		// More pages: the server listed runners the filter should have
		// left out, and ours may be on another page. Not found would end
		// a machine whose runner may be at work.
		return Runner{}, fmt.Errorf("find runner %s in %s: the answer ignores the name filter and has more pages: not known", name, where(scope, owner, repo))
	}
	return Runner{}, fmt.Errorf("find runner %s in %s: %w", name, where(scope, owner, repo), ErrRunnerNotFound)
}

// DeleteRunner removes a runner (DELETE …/actions/runners/{id}). A runner
// that is already gone (404) is not an error. A busy runner fails with
// GitHub's 422.
func (c *Client) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, runnerID int64) error {
	if err := checkScope(scope, owner, repo); err != nil {
		return fmt.Errorf("delete runner %d: %w", runnerID, err)
	}
	gh, err := c.client(installationID)
	if err != nil {
		return fmt.Errorf("delete runner %d: %w", runnerID, err)
	}
	if scope == ScopeOrg {
		_, err = gh.Actions.RemoveOrganizationRunner(ctx, owner, runnerID)
	} else {
		_, err = gh.Actions.RemoveRunner(ctx, owner, repo, runnerID)
	}
	if isStatus(err, http.StatusNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete runner %d in %s: %w", runnerID, where(scope, owner, repo), err)
	}
	return nil
}

// JobStatus returns a workflow job's status: "queued", "in_progress",
// "completed", "waiting"… (GET /repos/{owner}/{repo}/actions/jobs/{id}).
func (c *Client) JobStatus(ctx context.Context, installationID int64, owner, repo string, jobID int64) (string, error) {
	if err := checkScope(ScopeRepo, owner, repo); err != nil {
		return "", fmt.Errorf("job %d status: %w", jobID, err)
	}
	gh, err := c.client(installationID)
	if err != nil {
		return "", fmt.Errorf("job %d status: %w", jobID, err)
	}
	j, _, err := gh.Actions.GetWorkflowJobByID(ctx, owner, repo, jobID)
	if err != nil {
		return "", fmt.Errorf("job %d status in %s/%s: %w", jobID, owner, repo, err)
	}
	return j.GetStatus(), nil
}

// Repository is what the claimer reads of a job's repository when it
// resolves the job's pool again (a pool renamed or relabelled under it):
// the webhook read the same from the delivery, but the job record does
// not keep it.
type Repository struct {
	// Public is pool.IsPublic of GitHub's private flag and visibility, as
	// the webhook reads a delivery's repository: an internal repository
	// is not public.
	Public bool
	// UserOwned is true when the owner is a user account (owner.type
	// "User"), which has no organisation runners.
	UserOwned bool
}

// Repository reads a repository's visibility and owner type
// (GET /repos/{owner}/{repo}, "metadata" read, which every App holds).
func (c *Client) Repository(ctx context.Context, installationID int64, owner, repo string) (Repository, error) {
	if err := checkScope(ScopeRepo, owner, repo); err != nil {
		return Repository{}, fmt.Errorf("repository: %w", err)
	}
	gh, err := c.client(installationID)
	if err != nil {
		return Repository{}, fmt.Errorf("repository %s/%s: %w", owner, repo, err)
	}
	r, _, err := gh.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return Repository{}, fmt.Errorf("repository %s/%s: %w", owner, repo, err)
	}
	return Repository{
		Public:    pool.IsPublic(r.Private, r.Visibility),
		UserOwned: strings.EqualFold(r.GetOwner().GetType(), "User"),
	}, nil
}

// IsAlreadyExists reports whether err is GitHub's 409 "Already exists - A
// runner with the name … already exists." from generate-jitconfig, the only
// 409 that route answers.
func IsAlreadyExists(err error) bool {
	return isStatus(err, http.StatusConflict)
}

// IsStillRunning reports whether err is GitHub's refusal to delete a busy
// runner: a 422 whose message says the runner is running a job. The
// route's 422 is also GitHub's generic "Validation failed, or the endpoint
// has been spammed" (its OpenAPI description), which is no busy runner:
// taken for one, the runner was left forever and its job's claim reused
// a runner nothing would run. GitHub documents no exact message: it has
// been seen as `Bad request - Runner "x" is still running a job"` (the
// stray quote is GitHub's) and as `Bad request - Runner x is currently
// running a job and cannot be deleted.`, so "running a job" is matched.
func IsStillRunning(err error) bool {
	var er *github.ErrorResponse
	return isStatus(err, http.StatusUnprocessableEntity) && errors.As(err, &er) &&
		strings.Contains(strings.ToLower(er.Message), "running a job")
}

// isStatus reports whether err is GitHub's answer status to the route
// called, not to the token exchange before it (an installation gone
// answers the exchange 404, which is no "runner already gone").
func isStatus(err error, status int) bool {
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil || er.Response.StatusCode != status {
		return false
	}
	r := er.Response.Request
	return r == nil || r.URL == nil || !strings.HasSuffix(r.URL.Path, "/access_tokens")
}

// permanent is an error the retry classifier (shared/failure) treats as
// non-retryable through its Permanent method, without this package
// importing the classifier.
type permanent string

func (e permanent) Error() string { return string(e) }

// Permanent reports that retrying cannot help.
func (permanent) Permanent() bool { return true }

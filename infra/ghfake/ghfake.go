// Package ghfake owns a stand-in for the slice of GitHub's REST API that
// ghclaim calls: the App itself (GET /app, for the operator CLI), installation access tokens, just-in-time (JIT) runner
// configuration, self-hosted runners (list by name, get, delete),
// workflow jobs, repositories (GET /repos/{owner}/{repo}, repos.go), the
// App's webhook delivery log with redelivery, whose
// deliveries reach a webhook Target (deliveries.go), the App's installations
// (installations.go) and the GitHub App manifest flow (the settings/apps/new
// form and POST /app-manifests/{code}/conversions, manifest.go). It is an
// http.Handler, served by httptest in tests and by a
// real listener under `make run`. WorkflowJobPayload builds the webhook
// bodies GitHub sends, for the kits that deliver them.
//
// It speaks GitHub's real shapes, because the code under test branches on
// them: status codes, JSON error bodies ({"message", "documentation_url",
// "status"}), and X-RateLimit-{Limit,Remaining,Used,Reset,Resource} headers
// on every response, with a per-installation budget that runs out into
// GitHub's 403 "API rate limit exceeded for installation ID N."; a 401
// shows no budget of the App's or an installation's but the
// unauthenticated one of the caller's address (unauthenticated.go). A real
// go-github client turns these into its own typed errors
// (*github.ErrorResponse, *github.RateLimitError, *github.AbuseRateLimitError)
// exactly as it would against api.github.com.
//
// Faults are injected per route and per count (Fail), either before the
// action (the request changes nothing) or after it (AfterEffect: the runner
// is registered, then the answer is lost), which is the case that makes JIT
// claiming hard. A JSON control API under /_fake/ lets another process drive
// the same knobs.
//
// Design decisions:
//   - Time and sleeping are injected (WithClock, WithSleep) so a test can
//     assert exact reset times and "slow" answers without waiting. Note that
//     ghinstallation decides token refresh on the wall clock, so token
//     expiry is computed from the injected clock: keep it near real time
//     or every call refreshes the token.
//   - Tokens are opaque "ghs_…" strings mapped to installation ids; any
//     installation id is accepted (GitHub would 404 an unknown one) until
//     a test refuses it as GitHub does: Uninstall (404), Suspend (403),
//     or a rotated App key (SetPublicKey: 401), refusals.go.
//   - The token endpoint is authenticated by the App JWT and charged to the
//     App's own budget, never to an installation's, as on GitHub.
//   - Each installation route needs the App permission GitHub's docs give
//     it (permission.go); an installation holds DefaultPermissions (the
//     manifest's) unless AddInstallation says otherwise, and its tokens
//     report and are refused by what it holds (403 "Resource not
//     accessible by integration"), so a missing permission fails a test.
//   - A repository has a stable numeric id. RenameRepo renames or
//     transfers one: its runners and jobs move with it, and a request
//     naming it by its old owner/name is answered as GitHub answers it, a
//     redirect (301 for GET, 307 for other methods) to
//     /repositories/{id}/…, which serves the repository at its current
//     name (moved.go).
//   - Runner names are unique per scope (a repository, or an organisation),
//     compared case-insensitively.
//   - Every answer is checked against GitHub's published OpenAPI
//     description of its route (infra/ghfake/openapi), so the fake cannot
//     drift from GitHub's shapes: e.g. generate-jitconfig's 422 is the
//     "simple" validation error (the problem in the message, no field
//     objects), and a job carries every field the description requires.
//
// ghfake must never be wired into a production binary's GitHub client: it
// exists for tests and local runs only. It never calls the network.
package ghfake

import (
	"context"
	"crypto/rsa"
	"fmt"
	"github.com/ghclaim/ghclaim/shared/clock"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Routes, as net/http patterns. They name a route in Fail and in Stats.Calls.
const (
	RouteAccessToken       = "POST /app/installations/{installation_id}/access_tokens"
	RouteRepoJIT           = "POST /repos/{owner}/{repo}/actions/runners/generate-jitconfig"
	RouteOrgJIT            = "POST /orgs/{org}/actions/runners/generate-jitconfig"
	RouteRepoRunners       = "GET /repos/{owner}/{repo}/actions/runners"
	RouteOrgRunners        = "GET /orgs/{org}/actions/runners"
	RouteRepoRunner        = "GET /repos/{owner}/{repo}/actions/runners/{runner_id}"
	RouteOrgRunner         = "GET /orgs/{org}/actions/runners/{runner_id}"
	RouteRepoDeleteRunner  = "DELETE /repos/{owner}/{repo}/actions/runners/{runner_id}"
	RouteOrgDeleteRunner   = "DELETE /orgs/{org}/actions/runners/{runner_id}"
	RouteJob               = "GET /repos/{owner}/{repo}/actions/jobs/{job_id}"
	RouteAny               = "*" // matches every API route in Fail
	controlPrefix          = "/_fake/"
	defaultRateLimit       = 5000
	defaultMaxDelay        = time.Minute
	defaultTokenTTL        = time.Hour
	rateWindow             = time.Hour
	defaultRunnerGroupID   = 1
	docsRateLimit          = "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"
	docsSecondaryRateLimit = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	docsREST               = "https://docs.github.com/rest"
)

// Scopes a runner is registered at (the same values as pool.Scope*).
const (
	ScopeRepo = "repo"
	ScopeOrg  = "org"
)

// Runner is a registered self-hosted runner as the fake holds it.
type Runner struct {
	ID            int64    `json:"id"`
	Name          string   `json:"name"`
	Scope         string   `json:"scope"`
	Owner         string   `json:"owner"`
	Repo          string   `json:"repo,omitempty"`
	OS            string   `json:"os"`
	Status        string   `json:"status"` // "online" or "offline"
	Busy          bool     `json:"busy"`
	Labels        []string `json:"labels"`
	RunnerGroupID int64    `json:"runner_group_id"`
	WorkFolder    string   `json:"work_folder,omitempty"`
	// Installation registered the runner.
	Installation int64 `json:"installation_id"`
	// seen is when the runner was last connected (registered, for one
	// never online): EphemeralLifetime counts from it.
	seen time.Time
}

// Job is a workflow job as GET /repos/{owner}/{repo}/actions/jobs/{id}
// returns it. Status is "queued", "in_progress", "completed" (or "waiting").
type Job struct {
	ID         int64    `json:"id"`
	RunID      int64    `json:"run_id,omitempty"`
	Name       string   `json:"name,omitempty"`
	Status     string   `json:"status"`
	Conclusion string   `json:"conclusion,omitempty"`
	Labels     []string `json:"labels,omitempty"`
	RunnerID   int64    `json:"runner_id,omitempty"`
	RunnerName string   `json:"runner_name,omitempty"`
}

// Stats counts what the fake was asked. Maps are copies.
type Stats struct {
	// TokenRequests counts access-token requests per installation id,
	// answered or not.
	TokenRequests map[int64]int `json:"token_requests"`
	// Calls counts requests per route pattern (Route* constants), faulted
	// ones included; unknown paths count under "".
	Calls map[string]int `json:"calls"`
	// InstallationCalls counts requests authenticated by an installation token.
	InstallationCalls map[int64]int `json:"installation_calls"`
	// JITCalls counts requests to either generate-jitconfig route.
	JITCalls int `json:"jit_calls"`
	// Redirects counts, per route, the requests that named a renamed
	// repository by an old owner/name and were answered with GitHub's
	// redirect (RenameRepo); each is in Calls too.
	Redirects map[string]int `json:"redirects"`
	// SecondaryLimited counts requests refused by the secondary rate
	// limit on points a minute (WithSecondaryLimit); faults injected as
	// SecondaryRateLimit are not counted here.
	SecondaryLimited int `json:"secondary_limited"`
}

// Rate is one budget's state, as the X-RateLimit-* headers show it.
type Rate struct {
	Limit     int   `json:"limit"`
	Remaining int   `json:"remaining"`
	Reset     int64 `json:"reset"` // epoch seconds
}

type bucket struct {
	limit, remaining int
	reset            time.Time
}

// Option configures a Server.
type Option func(*Server)

// WithAppID makes the token endpoint require a JWT whose `iss` is this id.
func WithAppID(id int64) Option { return func(s *Server) { s.appID = id } }

// WithPublicKey makes the token endpoint verify the JWT's RS256 signature.
func WithPublicKey(k *rsa.PublicKey) Option { return func(s *Server) { s.pub = k } }

// WithClock sets the clock used for token expiry and rate-limit resets.
func WithClock(now clock.Func) Option { return func(s *Server) { s.now = now } }

// WithSleep sets how a Slow fault waits; it must return early with an
// error when ctx ends.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(s *Server) { s.sleep = sleep }
}

// WithMaxDelay bounds a Slow fault's delay (default one minute).
func WithMaxDelay(d time.Duration) Option { return func(s *Server) { s.maxDelay = d } }

// WithPathPrefix serves the API under a prefix, as GitHub Enterprise Server
// does under "/api/v3"; requests outside it get 404. /_fake/ stays at the root.
func WithPathPrefix(p string) Option {
	return func(s *Server) { s.prefix = strings.TrimRight(p, "/") }
}

// WithRateLimit sets every new installation's hourly budget (default 5000).
func WithRateLimit(limit int) Option { return func(s *Server) { s.limit = limit } }

// WithPrimaryLimitStatus sets the status of the answer to a request past
// its primary budget (an installation's or the App's): 403 (the default)
// or 429, both GitHub's ("If you exceed your primary rate limit, you will
// receive a 403 Forbidden or 429 Too Many Requests response, and the
// x-ratelimit-remaining header will be 0",
// https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api#rate-limit-errors).
// go-github v62 types only the 403 (*github.RateLimitError); a 429 at
// remaining 0 reaches a client as a plain *github.ErrorResponse, which it
// must still read as the budget spent until the reset, not as a secondary
// limit's minute. It panics on another status, a bug in the test.
func WithPrimaryLimitStatus(status int) Option {
	if status != http.StatusForbidden && status != http.StatusTooManyRequests {
		panic(fmt.Sprintf("ghfake: primary limit status %d: want 403 or 429", status))
	}
	return func(s *Server) { s.primaryStatus = status }
}

// WithRunnerGroups sets the organisation runner group ids that
// generate-jitconfig accepts at org scope (default: 1, GitHub's "Default"
// group). A repository has no runner groups: its route takes the Default
// group only, whatever this says.
func WithRunnerGroups(ids ...int64) Option {
	return func(s *Server) {
		s.groups = map[int64]bool{}
		for _, id := range ids {
			s.groups[id] = true
		}
	}
}

// Server is the fake. The zero value is not usable: call New.
type Server struct {
	appID    int64
	pub      *rsa.PublicKey
	now      clock.Func
	sleep    func(context.Context, time.Duration) error
	maxDelay time.Duration
	prefix   string
	limit    int
	groups   map[int64]bool
	api      *http.ServeMux

	control *http.ServeMux

	mu        sync.Mutex
	tokens    map[string]issued // installation tokens
	tokenSeq  int
	rates     map[int64]*bucket
	appRate   *bucket
	anonLimit int
	// primaryStatus answers a request past its primary budget.
	primaryStatus int
	anonRate      *bucket // the unauthenticated budget a 401 shows (unauthenticated.go)
	runners       map[int64]*Runner
	runnerSeq     int64
	jobs          map[string]storedJob // jobKey → job
	apps          map[string]*App      // manifest code → App
	appSeq        int64
	web           *http.ServeMux
	installs      map[int64]installationOf
	repos         map[string]Repo // repoKey → SetRepo's
	faults        []*rule
	requestSeq    int
	stats         Stats

	// Repository ids and renames (moved.go): the id of a current name,
	// the current name of an id, the id an old name redirects to.
	repoIDs map[string]int64
	byID    map[int64]repoName
	moved   map[string]int64

	// Installations whose token exchange is refused (refusals.go):
	// suspended ones by when they were suspended, which their listing
	// shows.
	suspended   map[int64]time.Time
	uninstalled map[int64]bool

	// The App's webhook delivery log (deliveries.go).
	retention    time.Duration
	target       Target
	secret       string
	deliveries   []HookDelivery
	deliverySeq  int64
	guidSeq      int
	redeliveries map[string]int
	// Redeliveries asked and not logged yet (Drain waits for none).
	pendingMu   sync.Mutex
	pendingDone *sync.Cond
	pendingN    int

	// GitHub's secondary rate limit (secondary.go): the points a minute
	// an actor may spend on one endpoint, and each actor's requests of the
	// last minute by endpoint.
	secondaryPoints int
	secondary       map[spender][]spent
	// concurrent is how many requests an actor may have in flight;
	// inflight counts them by actor (0: the App).
	concurrent int
	inflight   map[int64]int
}

// New returns a fake with no runners, no jobs and no faults.
func New(opts ...Option) *Server {
	s := &Server{
		now:       time.Now,
		sleep:     sleepCtx,
		maxDelay:  defaultMaxDelay,
		limit:     defaultRateLimit,
		anonLimit: DefaultUnauthenticatedLimit,

		primaryStatus: http.StatusForbidden,
		groups:        map[int64]bool{defaultRunnerGroupID: true},
		retention:     DefaultRetention,

		secondaryPoints: DefaultSecondaryPoints,
		concurrent:      DefaultConcurrentRequests,
		inflight:        map[int64]int{},
	}
	s.pendingDone = sync.NewCond(&s.pendingMu)
	for _, o := range opts {
		o(s)
	}
	s.resetState()
	s.api = http.NewServeMux()
	s.api.HandleFunc(RouteAccessToken, s.accessToken)
	s.api.HandleFunc(RouteApp, s.getApp)
	s.api.HandleFunc(RouteRepoJIT, s.generateJIT)
	s.api.HandleFunc(RouteOrgJIT, s.generateJIT)
	s.api.HandleFunc(RouteRepoRunners, s.listRunners)
	s.api.HandleFunc(RouteOrgRunners, s.listRunners)
	s.api.HandleFunc(RouteRepoRunner, s.getRunner)
	s.api.HandleFunc(RouteOrgRunner, s.getRunner)
	s.api.HandleFunc(RouteRepoDeleteRunner, s.deleteRunner)
	s.api.HandleFunc(RouteOrgDeleteRunner, s.deleteRunner)
	s.api.HandleFunc(RouteJob, s.getJob)
	s.api.HandleFunc(RouteRepo, s.getRepo)
	s.api.HandleFunc(RouteManifestConversion, s.convertManifest)
	s.web = http.NewServeMux()
	s.web.HandleFunc(WebNewApp, s.newApp)
	s.web.HandleFunc(WebNewOrgApp, s.newApp)
	s.api.HandleFunc(RouteInstallations, s.listInstallations)
	s.api.HandleFunc(RouteInstallRepos, s.listInstallRepos)
	s.api.HandleFunc(RouteDeliveries, s.listDeliveries)
	s.api.HandleFunc(RouteDelivery, s.getDelivery)
	s.api.HandleFunc(RouteRedeliver, s.redeliver)
	s.control = s.controlMux()
	return s
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) resetState() {
	s.tokens = map[string]issued{}
	s.tokenSeq = 0
	s.rates = map[int64]*bucket{}
	s.appRate, s.anonRate = nil, nil
	s.secondary = map[spender][]spent{}
	s.runners = map[int64]*Runner{}
	s.runnerSeq = 0
	s.jobs = map[string]storedJob{}
	s.apps = map[string]*App{}
	s.appSeq = 0
	s.installs = map[int64]installationOf{}
	s.repos = map[string]Repo{}
	s.repoIDs, s.byID, s.moved = map[string]int64{}, map[int64]repoName{}, map[string]int64{}
	s.suspended, s.uninstalled = map[int64]time.Time{}, map[int64]bool{}
	s.faults = nil
	s.requestSeq = 0
	s.deliveries, s.deliverySeq, s.guidSeq, s.redeliveries = nil, 0, 0, map[string]int{}
	s.stats = Stats{
		TokenRequests:     map[int64]int{},
		Calls:             map[string]int{},
		InstallationCalls: map[int64]int{},
		Redirects:         map[string]int{},
	}
}

// Reset forgets every token, installation, repository (and rename), runner, job, fault, rate budget and counter,
// and the delivery log. It first waits for the redeliveries under way (Drain), so that none lands in the
// emptied log.
func (s *Server) Reset() {
	s.Drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetState()
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{
		TokenRequests:     map[int64]int{},
		Calls:             map[string]int{},
		InstallationCalls: map[int64]int{},
		JITCalls:          s.stats.JITCalls,
		Redirects:         maps.Clone(s.stats.Redirects),
		SecondaryLimited:  s.stats.SecondaryLimited,
	}
	for k, v := range s.stats.TokenRequests {
		out.TokenRequests[k] = v
	}
	for k, v := range s.stats.Calls {
		out.Calls[k] = v
	}
	for k, v := range s.stats.InstallationCalls {
		out.InstallationCalls[k] = v
	}
	return out
}

// Runners returns copies of every registered runner, ordered by id.
func (s *Server) Runners() []Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedRunners(func(*Runner) bool { return true })
}

// RunnerByName returns the first registered runner (lowest id) with this
// name, in any scope.
func (s *Server) RunnerByName(name string) (Runner, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.sortedRunners(func(r *Runner) bool { return strings.EqualFold(r.Name, name) })
	if len(rs) == 0 {
		return Runner{}, false
	}
	return rs[0], true
}

// ErrNoRunner is returned by SetRunner when no runner has the name.
var ErrNoRunner = errorString("ghfake: no runner with that name")

type errorString string

func (e errorString) Error() string { return string(e) }

// SetRunner sets the status ("online"/"offline") and busy flag of every
// runner with this name, as a runner process picking up a job would.
func (s *Server) SetRunner(name, status string, busy bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireRunners()
	found := false
	for _, r := range s.runners {
		if strings.EqualFold(r.Name, name) {
			s.setRunnerStatus(r, status, busy)
			found = true
		}
	}
	if !found {
		return ErrNoRunner
	}
	return nil
}

// SetRunnerByID sets the status and busy flag of the runner with this id
// (a machine knows its registration by the id in its JIT config).
func (s *Server) SetRunnerByID(id int64, status string, busy bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireRunners()
	r, ok := s.runners[id]
	if !ok {
		return ErrNoRunner
	}
	s.setRunnerStatus(r, status, busy)
	return nil
}

// RemoveRunner deregisters the runner with this id, as GitHub does with an
// ephemeral runner once its job is over. It reports whether one was there.
func (s *Server) RemoveRunner(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireRunners()
	_, ok := s.runners[id]
	delete(s.runners, id)
	return ok
}

// SetJob creates or replaces a workflow job of owner/repo.
func (s *Server) SetJob(owner, repo string, j Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, repo = s.current(owner, repo)
	k, now := jobKey(owner, repo, j.ID), s.now().UTC().Truncate(time.Second)
	created := now
	if prev, ok := s.jobs[k]; ok {
		created = prev.created
	}
	s.jobs[k] = storedJob{Job: j, created: created, updated: now}
}

// storedJob is a job with the times GitHub reports for it: created when it
// was first set, updated (its completed_at once completed) when last set.
type storedJob struct {
	Job
	created, updated time.Time
}

// SetRateLimit sets an installation's budget; the window then runs until reset.
func (s *Server) SetRateLimit(installationID int64, limit, remaining int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rates[installationID] = &bucket{limit: limit, remaining: remaining, reset: reset}
}

// RateLimit returns an installation's current budget.
func (s *Server) RateLimit(installationID int64) Rate {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucketFor(installationID)
	return Rate{Limit: b.limit, Remaining: b.remaining, Reset: b.reset.Unix()}
}

// bucketFor returns the installation's budget, refilled when its window
// has passed. Callers hold s.mu.
func (s *Server) bucketFor(installationID int64) *bucket {
	b := s.rates[installationID]
	if b == nil {
		b = &bucket{limit: s.limit, remaining: s.limit, reset: s.now().Add(rateWindow)}
		s.rates[installationID] = b
	}
	s.refill(b)
	return b
}

func (s *Server) appBucket() *bucket {
	if s.appRate == nil {
		s.appRate = &bucket{limit: s.limit, remaining: s.limit, reset: s.now().Add(rateWindow)}
	}
	s.refill(s.appRate)
	return s.appRate
}

func (s *Server) refill(b *bucket) {
	if now := s.now(); !now.Before(b.reset) {
		b.remaining = b.limit
		b.reset = now.Add(rateWindow)
	}
}

// issued is an installation token: its installation and when it expires
// (GitHub: one hour after it was created; a request with it after that is
// a 401).
type issued struct {
	installation int64
	expires      time.Time
	// scope is the installation's repository selection when the token
	// was created (nil: an installation the fake was not told about): a
	// token keeps it, so a repository added to the installation later is
	// out of the token's reach (404) until a new token is created.
	scope *installationOf
}

// issue mints an installation token of installationID; s.mu is held.
func (s *Server) issue(installationID int64) (string, time.Time) {
	s.tokenSeq++
	tok := fmt.Sprintf("ghs_%036d", s.tokenSeq)
	exp := s.now().Add(defaultTokenTTL).UTC().Truncate(time.Second)
	t := issued{installation: installationID, expires: exp}
	if in, ok := s.installs[installationID]; ok {
		in.repos = append([]string(nil), in.repos...)
		in.perms = maps.Clone(in.perms)
		t.scope = &in
	}
	s.tokens[tok] = t
	return tok, exp
}

// installationOfToken returns the installation tok belongs to, false when
// the fake never issued it or it has expired; s.mu is held.
func (s *Server) installationOfToken(tok string) (int64, bool) {
	t, ok := s.tokens[tok]
	if !ok || !s.now().Before(t.expires) {
		return 0, false
	}
	return t.installation, true
}

// RevokeTokens revokes every token of installationID (GitHub: DELETE
// /installation/token, a leaked token revoked, the installation suspended):
// a request with one is a 401 from then on.
func (s *Server) RevokeTokens(installationID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoke(installationID)
}

// revoke is RevokeTokens; s.mu is held.
func (s *Server) revoke(installationID int64) {
	for tok, t := range s.tokens {
		if t.installation == installationID {
			delete(s.tokens, tok)
		}
	}
}

// IssueToken mints an installation token without an App JWT, for tests and
// local runs that drive the API with a plain token client. It expires an
// hour after it was issued, by the fake's clock, like every token.
func (s *Server) IssueToken(installationID int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, _ := s.issue(installationID)
	return tok
}

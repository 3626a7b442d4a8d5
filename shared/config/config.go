// Package config reads each function's environment into a typed struct,
// fills defaults in one place and validates everything at start-up, so a
// bad deployment fails on its first cold start with a message that names
// the variable, instead of losing jobs later.
//
// Each function requires only the variables it uses: the webhook needs no
// private key; the reclaimer needs the GitHub App and RUNNER_POOLS because
// abandoning an expired lease removes that attempt's runner and machine. Secrets are referenced here, never
// resolved: WEBHOOK_SECRET_ARN / GITHUB_APP_PRIVATE_KEY_ARN name Secrets
// Manager secrets that main resolves once per cold start; the plain
// WEBHOOK_SECRET / GITHUB_APP_PRIVATE_KEY are for local runs only. This
// package must never log or print a secret value.
//
// RUNNER_POOLS may come from an SSM parameter instead (RUNNER_POOLS_PARAMETER,
// read by Start): Lambda holds 4 KB of environment in all, which leaves
// RUNNER_POOLS 2,000 characters of ASCII (template.yaml's RunnerPools MaxLength). It is read
// once per cold start, not with a TTL, because the flows take their pools
// as a slice at construction; a re-read would need them to take a function.
// METRICS_NAMESPACE is checked against CloudWatch's namespace rules here, as
// a namespace CloudWatch refuses would drop every metric line silently.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/redact"
	"github.com/ghclaim/ghclaim/shared/store"
)

// Getenv looks a variable up (os.Getenv in main, a map in tests).
type Getenv func(string) string

// Error is a configuration error naming the variable.
type Error struct {
	Var string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("config %s: %v", e.Var, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Defaults.
const (
	DefaultLadder       = "30s,1m,2m,5m,10m"
	DefaultMaxAge       = 90 * time.Minute
	DefaultMaxBody      = 1 << 20
	DefaultLease        = 3 * time.Minute
	DefaultSweepShards  = job.DefaultShards
	DefaultPendingGrace = job.DefaultPendingGrace
	DefaultQueuedGrace  = job.DefaultQueuedGrace
	// DefaultRecordTTL keeps a job record, which is the webhook's dedup
	// key, past GitHub's 3-day manual-redelivery window.
	DefaultRecordTTL    = job.DefaultRecordTTL
	DefaultGitHubAPIURL = "https://api.github.com"
)

// Common is what every function reads.
type Common struct {
	TableName      string
	ClaimsQueueURL string
	SweepShards    int
	PendingGrace   time.Duration
	QueuedGrace    time.Duration
	RecordTTL      time.Duration
	LogLevel       string
	// MetricsNamespace is the CloudWatch namespace of the EMF metrics
	// (METRICS_NAMESPACE; template.yaml passes the stack's name by default).
	MetricsNamespace string
	// Stack names the deployment (GHCLAIM_STACK; template.yaml passes the
	// stack's name): the EC2 adapter tags its machines and JIT configs with
	// it, and its lookups and the janitor leave another stack's alone
	// (provision.OfStack). Unset: nothing is tagged and everything is seen.
	Stack string
}

// Webhook is the webhook function's configuration.
type Webhook struct {
	Common
	SecretARN     string
	Secret        string // local only; comma-separated for rotation
	Pools         []pool.Pool
	AllowedOwners []string // empty: any owner
	MaxBodyBytes  int
	// MaxAge bounds the new attempt the webhook starts for a job whose
	// runner another job took (MAX_AGE, default 90m): past it, the job is
	// left to the reclaimer, which abandons it.
	MaxAge time.Duration
}

// GitHubApp is how a function reaches GitHub as the App.
type GitHubApp struct {
	AppID         int64
	PrivateKeyARN string
	PrivateKey    string // PEM, local only
	GitHubAPIURL  string
}

// Claimer is the claimer function's configuration.
type Claimer struct {
	Common
	GitHubApp
	Pools  []pool.Pool
	Ladder []time.Duration
	MaxAge time.Duration
	Lease  time.Duration
}

// Reclaimer is the reclaimer function's configuration. It needs the GitHub
// App and the pools to remove the runner and machine of an attempt it
// abandons (claiming past max age).
type Reclaimer struct {
	Common
	GitHubApp
	Pools  []pool.Pool
	MaxAge time.Duration
	// Budget bounds one sweep so it finishes well inside the invocation.
	Budget time.Duration
	// MaxReplacements caps the new attempts of a claimed job whose runner
	// never took it (MAX_REPLACEMENTS, default 3).
	MaxReplacements int
	// LivenessMaxChecks bounds how often an online but idle runner gets
	// another grace (LIVENESS_MAX_CHECKS, default 3).
	LivenessMaxChecks int
	// SweepIndex is the index the sweep reads (SWEEP_INDEX, default
	// store.SweepIndex; store.LegacySweepIndex while an upgrade keeps it).
	SweepIndex string
}

// quote is a bad value as its error quotes it: through redact.Input, so a
// secret pasted into the wrong variable (the webhook secret as
// GITHUB_APP_ID, the App key as LOG_LEVEL) is named by its variable but
// never printed (main prints a start-up error on stderr, unredacted).
func quote(s string) string { return strconv.Quote(redact.Input(s)) }

type reader struct {
	get  Getenv
	errs []error
}

func (r *reader) fail(v string, err error) { r.errs = append(r.errs, &Error{Var: v, Err: err}) }

func (r *reader) required(v string) string {
	s := strings.TrimSpace(r.get(v))
	if s == "" {
		r.fail(v, errors.New("required, not set"))
	}
	return s
}

func (r *reader) duration(v string, def time.Duration) time.Duration {
	s := strings.TrimSpace(r.get(v))
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		r.fail(v, fmt.Errorf("%s is not a positive duration like 90m or 30s", quote(s)))
		return def
	}
	return d
}

// bounded is duration with an upper bound: a larger value fails naming
// the variable and why.
func (r *reader) bounded(v string, def, max time.Duration, why string) time.Duration {
	d := r.duration(v, def)
	if d > max {
		r.fail(v, fmt.Errorf("%s is longer than %s: %s", d, max, why))
		return def
	}
	return d
}

// Upper bounds of the durations, and why.
const (
	maxLease       = 15 * time.Minute
	whyLease       = "no claimer runs longer than Lambda's 15-minute maximum, so a longer lease only delays a dead claimer's job"
	maxGrace       = 6 * time.Hour
	whyGrace       = "a stale record waits this long before the reclaimer takes it back, and GitHub cancels a job queued for 24 hours"
	maxMaxAge      = 24 * time.Hour
	whyMaxAge      = "GitHub cancels a job still queued after 24 hours"
	maxSweepBudget = 15 * time.Minute
	whySweep       = "no invocation runs longer than Lambda's 15-minute maximum"
)

func (r *reader) integer(v string, def int64, min int64) int64 {
	s := strings.TrimSpace(r.get(v))
	if s == "" {
		return def
	}
	x, err := strconv.ParseInt(s, 10, 64)
	if err != nil || x < min {
		r.fail(v, fmt.Errorf("%s is not an integer ≥ %d", quote(s), min))
		return def
	}
	return x
}

// shards reads SWEEP_SHARDS: 1 to job.MaxShards, the template's bounds
// (the reclaimer visits every shard up to job.MaxShards).
func (r *reader) shards() int {
	n := r.integer("SWEEP_SHARDS", DefaultSweepShards, 1)
	if n > job.MaxShards {
		r.fail("SWEEP_SHARDS", fmt.Errorf("%d: at most %d shards", n, job.MaxShards))
		return DefaultSweepShards
	}
	return int(n)
}

// pools reads RUNNER_POOLS, and RUNNER_START_GRACE: the runner start grace
// of every pool that sets none (a pool's runner_start_grace wins; both
// unset: job.DefaultRunnerStartGrace).
func (r *reader) pools() []pool.Pool {
	ps, err := pool.Parse(r.get("RUNNER_POOLS"))
	if err != nil {
		v := "RUNNER_POOLS"
		if p := strings.TrimSpace(r.get(PoolsParameterVar)); p != "" {
			v += " (SSM parameter " + shownName(p) + ")"
		}
		r.fail(v, err)
	}
	const v = "RUNNER_START_GRACE"
	s := strings.TrimSpace(r.get(v))
	if s == "" {
		return ps
	}
	if d, err := time.ParseDuration(s); err != nil || d < pool.MinRunnerStartGrace || d > pool.MaxRunnerStartGrace {
		r.fail(v, fmt.Errorf("%s: want a duration from %s to %s", quote(s), pool.MinRunnerStartGrace, pool.MaxRunnerStartGrace))
		return ps
	}
	for i := range ps {
		if ps[i].RunnerStartGrace == "" {
			ps[i].RunnerStartGrace = s
		}
	}
	return ps
}

func (r *reader) common() Common {
	c := Common{
		TableName:      r.required("TABLE_NAME"),
		ClaimsQueueURL: r.required("CLAIMS_QUEUE_URL"),
		SweepShards:    r.shards(),
		PendingGrace:   r.bounded("PENDING_GRACE", DefaultPendingGrace, maxGrace, whyGrace),
		QueuedGrace:    r.bounded("QUEUED_GRACE", DefaultQueuedGrace, maxGrace, whyGrace),
		RecordTTL:      r.duration("RECORD_TTL", DefaultRecordTTL),
		LogLevel:       r.logLevel(),
	}
	c.MetricsNamespace = r.namespace()
	c.Stack = r.stack()
	// The job record is the webhook's dedup key: it must outlive GitHub's
	// 3-day manual-redelivery window, or a redelivery would claim again.
	if c.RecordTTL < 72*time.Hour {
		r.fail("RECORD_TTL", fmt.Errorf("%s is shorter than GitHub's 3-day redelivery window", c.RecordTTL))
	}
	return c
}

// stack reads GHCLAIM_STACK under CloudFormation's rule for a stack name
// (a letter, then up to 127 letters, digits and hyphens), which also makes
// it a valid EC2 and SSM tag value.
func (r *reader) stack() string {
	const v = "GHCLAIM_STACK"
	s := strings.TrimSpace(r.get(v))
	if s != "" && !stackName(s) {
		r.fail(v, fmt.Errorf("%s: want a CloudFormation stack name (a letter, then up to 127 letters, digits and hyphens)", quote(s)))
		return ""
	}
	return s
}

// stackName reports whether s is a CloudFormation stack name. A loop, not
// a regexp: `{0,127}` compiles to 127 copies of its class, over a
// millisecond of every cold start.
func stackName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !letter || !letter && !(c >= '0' && c <= '9') && c != '-' {
			return false
		}
	}
	return true
}

// ownerLogin reports whether s can be a repository owner's login as the
// webhook accepts one (shared/webhook: a letter or digit, then letters,
// digits, '_', '.' or '-', at most 100).
func ownerLogin(s string) bool {
	if len(s) == 0 || len(s) > 100 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// logLevel reads LOG_LEVEL: debug, info (the default), warn or error, in
// any case. Anything else fails the cold start, naming the variable.
func (r *reader) logLevel() string {
	l := strings.ToLower(strings.TrimSpace(r.get("LOG_LEVEL")))
	switch l {
	case "":
		return "info"
	case "debug", "info", "warn", "error":
		return l
	}
	r.fail("LOG_LEVEL", fmt.Errorf("%s: want debug, info, warn or error", quote(l)))
	return "info"
}

// namespace reads METRICS_NAMESPACE under CloudWatch's rules for a
// namespace (PutMetricData): 1-255 of A-Z a-z 0-9 . - _ / # : and space,
// not starting with ':' (the API's pattern is [^:].*) or the reserved
// "AWS/". A namespace CloudWatch refuses would drop every EMF line
// silently, so it fails the cold start instead.
func (r *reader) namespace() string {
	const v = "METRICS_NAMESPACE"
	s := strings.TrimSpace(r.get(v))
	if s == "" {
		return obs.Namespace
	}
	switch {
	case len(s) > 255:
		r.fail(v, fmt.Errorf("%d characters; CloudWatch allows at most 255", len(s)))
	case strings.HasPrefix(s, ":"):
		r.fail(v, fmt.Errorf("%s: CloudWatch refuses a namespace that starts with ':'", quote(s)))
	case strings.HasPrefix(s, "AWS/"):
		r.fail(v, fmt.Errorf("%s: the AWS/ prefix is reserved for AWS services", quote(s)))
	case strings.IndexFunc(s, badNamespaceRune) >= 0:
		r.fail(v, fmt.Errorf("%s: CloudWatch allows only letters, digits, space and . - _ / # :", quote(s)))
	}
	return s
}

func badNamespaceRune(c rune) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return false
	}
	return !strings.ContainsRune(".-_/#: ", c)
}

func (r *reader) githubApp() GitHubApp {
	c := GitHubApp{
		AppID:         r.integer("GITHUB_APP_ID", 0, 1),
		PrivateKeyARN: strings.TrimSpace(r.get("GITHUB_APP_PRIVATE_KEY_ARN")),
		PrivateKey:    r.get("GITHUB_APP_PRIVATE_KEY"),
		GitHubAPIURL:  strings.TrimRight(strings.TrimSpace(r.get("GITHUB_API_URL")), "/"),
	}
	if c.AppID == 0 {
		r.required("GITHUB_APP_ID")
	}
	if c.PrivateKeyARN == "" && strings.TrimSpace(c.PrivateKey) == "" {
		r.fail("GITHUB_APP_PRIVATE_KEY_ARN", errors.New("required (or GITHUB_APP_PRIVATE_KEY for local runs), neither is set"))
	}
	if c.GitHubAPIURL == "" {
		c.GitHubAPIURL = DefaultGitHubAPIURL
	} else if !strings.HasPrefix(c.GitHubAPIURL, "https://") && !strings.HasPrefix(c.GitHubAPIURL, "http://") {
		r.fail("GITHUB_API_URL", fmt.Errorf("%s is not an http(s) URL", quote(c.GitHubAPIURL)))
	}
	return c
}

func (r *reader) err() error { return errors.Join(r.errs...) }

// LoadWebhook reads the webhook's configuration.
func LoadWebhook(get Getenv) (Webhook, error) {
	r := &reader{get: get}
	c := Webhook{
		Common:       r.common(),
		SecretARN:    strings.TrimSpace(get("WEBHOOK_SECRET_ARN")),
		Secret:       get("WEBHOOK_SECRET"),
		Pools:        r.pools(),
		MaxBodyBytes: int(r.integer("MAX_BODY_BYTES", DefaultMaxBody, 1024)),
		MaxAge:       r.bounded("MAX_AGE", DefaultMaxAge, maxMaxAge, whyMaxAge),
	}
	for _, o := range strings.Split(get("ALLOWED_OWNERS"), ",") {
		switch o = strings.TrimSpace(o); {
		case o == "":
		case !ownerLogin(o):
			// "octo/app", "@octo" or a URL never equals an owner's login:
			// every job would be refused as not allowed, silently.
			r.fail("ALLOWED_OWNERS", fmt.Errorf("%s is not an owner's login (an organisation or user name, no slash, @ or URL)", quote(o)))
		default:
			c.AllowedOwners = append(c.AllowedOwners, o)
		}
	}
	if c.SecretARN == "" && strings.TrimSpace(c.Secret) == "" {
		r.fail("WEBHOOK_SECRET_ARN", errors.New("required (or WEBHOOK_SECRET for local runs), neither is set"))
	}
	return c, r.err()
}

// LoadClaimer reads the claimer's configuration.
func LoadClaimer(get Getenv) (Claimer, error) {
	r := &reader{get: get}
	c := Claimer{
		Common:    r.common(),
		GitHubApp: r.githubApp(),
		Pools:     r.pools(),
		MaxAge:    r.bounded("MAX_AGE", DefaultMaxAge, maxMaxAge, whyMaxAge),
		Lease:     r.bounded("LEASE_DURATION", DefaultLease, maxLease, whyLease),
	}
	ladder := strings.TrimSpace(get("RETRY_LADDER"))
	if ladder == "" {
		ladder = DefaultLadder
	}
	for i, part := range strings.Split(ladder, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			r.fail("RETRY_LADDER", fmt.Errorf("element %d %s is not a positive duration", i+1, quote(strings.TrimSpace(part))))
			continue
		}
		c.Ladder = append(c.Ladder, d)
	}
	return c, r.err()
}

// LoadReclaimer reads the reclaimer's configuration.
func LoadReclaimer(get Getenv) (Reclaimer, error) {
	r := &reader{get: get}
	c := Reclaimer{
		Common:    r.common(),
		GitHubApp: r.githubApp(),
		Pools:     r.pools(),
		MaxAge:    r.bounded("MAX_AGE", DefaultMaxAge, maxMaxAge, whyMaxAge),
		Budget:    r.bounded("SWEEP_BUDGET", 40*time.Second, maxSweepBudget, whySweep),

		MaxReplacements:   int(r.integer("MAX_REPLACEMENTS", 3, 1)),
		LivenessMaxChecks: int(r.integer("LIVENESS_MAX_CHECKS", 3, 1)),
		SweepIndex:        store.SweepIndex,
	}
	switch v := strings.TrimSpace(r.get("SWEEP_INDEX")); v {
	case "":
	case store.SweepIndex, store.LegacySweepIndex:
		c.SweepIndex = v
	default:
		r.fail("SWEEP_INDEX", fmt.Errorf("%s: want %s, or %s while an upgrade keeps the old index (template parameter LegacySweepIndex)",
			quote(v), store.SweepIndex, store.LegacySweepIndex))
	}
	return c, r.err()
}

// Janitor is the janitor function's configuration: the GitHub App (runner
// lists and deletes), the pools (which runner names are ours), the table
// (job records and rate readings, read only).
type Janitor struct {
	TableName        string
	LogLevel         string
	MetricsNamespace string
	GitHubApp
	Pools []pool.Pool
	// UnknownGrace: a machine of a job with no record is ended only once
	// launched this long ago (JANITOR_UNKNOWN_GRACE, default 1h).
	UnknownGrace time.Duration
	// ConfigGrace: a JIT config parameter is deleted only once this old
	// (JANITOR_CONFIG_GRACE, default 15m).
	ConfigGrace time.Duration
	// MaxCalls bounds one pass's GitHub calls (JANITOR_MAX_CALLS, default 100).
	MaxCalls int
	// Stack is Common.Stack: the janitor lists only this stack's machines
	// and configs.
	Stack string
}

// LoadJanitor reads the janitor's configuration.
func LoadJanitor(get Getenv) (Janitor, error) {
	r := &reader{get: get}
	c := Janitor{
		TableName:        r.required("TABLE_NAME"),
		LogLevel:         r.logLevel(),
		MetricsNamespace: r.namespace(),
		GitHubApp:        r.githubApp(),
		Pools:            r.pools(),
		UnknownGrace:     r.duration("JANITOR_UNKNOWN_GRACE", time.Hour),
		ConfigGrace:      r.duration("JANITOR_CONFIG_GRACE", 15*time.Minute),
		MaxCalls:         int(r.integer("JANITOR_MAX_CALLS", 100, 1)),
		Stack:            r.stack(),
	}
	return c, r.err()
}

// Redeliverer is the redeliverer function's configuration: the table (its
// redeliver# items) and the GitHub App, whose JWT reads the delivery log.
// It needs no queue and no pools.
type Redeliverer struct {
	TableName        string
	LogLevel         string
	MetricsNamespace string
	GitHubApp
	// Window: failed deliveries older than this are never asked
	// (REDELIVERY_WINDOW, default 3h, at most GitHub's 72h retention).
	Window time.Duration
	// MaxAttempts per delivery GUID (REDELIVERY_MAX_ATTEMPTS, default 3).
	MaxAttempts int
	// MinRemaining: a pass stops below this App budget
	// (REDELIVERY_MIN_REMAINING, default 50).
	MinRemaining int
}

// LoadRedeliverer reads the redeliverer's configuration.
func LoadRedeliverer(get Getenv) (Redeliverer, error) {
	r := &reader{get: get}
	c := Redeliverer{
		TableName:        r.required("TABLE_NAME"),
		LogLevel:         r.logLevel(),
		MetricsNamespace: r.namespace(),
		GitHubApp:        r.githubApp(),
		Window:           r.duration("REDELIVERY_WINDOW", 3*time.Hour),
		MaxAttempts:      int(r.integer("REDELIVERY_MAX_ATTEMPTS", 3, 1)),
		MinRemaining:     int(r.integer("REDELIVERY_MIN_REMAINING", 50, 0)),
	}
	if c.Window > 72*time.Hour {
		r.fail("REDELIVERY_WINDOW", fmt.Errorf("%s is longer than GitHub's 72h retention of the delivery log", c.Window))
	}
	return c, r.err()
}

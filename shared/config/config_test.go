package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/store"
)

const pools = `[{"name":"linux","labels":["self-hosted","linux"],"provisioner":{"type":"ec2","launch_template":"lt-1"}}]`

func env(m map[string]string) Getenv { return func(k string) string { return m[k] } }

func base() map[string]string {
	return map[string]string{
		"TABLE_NAME":             "t",
		"CLAIMS_QUEUE_URL":       "http://q",
		"RUNNER_POOLS":           pools,
		"WEBHOOK_SECRET":         "s",
		"GITHUB_APP_ID":          "7",
		"GITHUB_APP_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\n...",
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	w, err := LoadWebhook(env(base()))
	if err != nil {
		t.Fatalf("LoadWebhook: %v", err)
	}
	if w.RecordTTL != 7*24*time.Hour || w.PendingGrace != 15*time.Minute || w.MaxBodyBytes != DefaultMaxBody || w.SweepShards != 8 || w.LogLevel != "info" {
		t.Errorf("webhook defaults: %+v", w)
	}
	c, err := LoadClaimer(env(base()))
	if err != nil {
		t.Fatalf("LoadClaimer: %v", err)
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}
	if len(c.Ladder) != len(want) {
		t.Fatalf("got ladder %v, want %v", c.Ladder, want)
	}
	for i := range want {
		if c.Ladder[i] != want[i] {
			t.Errorf("rung %d: got %v, want %v", i, c.Ladder[i], want[i])
		}
	}
	if c.MaxAge != 90*time.Minute || c.GitHubAPIURL != DefaultGitHubAPIURL || c.AppID != 7 {
		t.Errorf("claimer defaults: max age %v, url %q, app %d", c.MaxAge, c.GitHubAPIURL, c.AppID)
	}
}

func TestEachFunctionRequiresOnlyWhatItUses(t *testing.T) {
	t.Parallel()
	m := map[string]string{"TABLE_NAME": "t", "CLAIMS_QUEUE_URL": "q", "RUNNER_POOLS": pools,
		"GITHUB_APP_ID": "7", "GITHUB_APP_PRIVATE_KEY_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:k"}
	c, err := LoadReclaimer(env(m))
	if err != nil {
		t.Fatalf("reclaimer needs no webhook secret: %v", err)
	}
	if c.AppID != 7 || len(c.Pools) != 1 || c.GitHubAPIURL != DefaultGitHubAPIURL {
		t.Errorf("reclaimer: app %d, %d pools, url %q; want app 7, 1 pool, the default URL", c.AppID, len(c.Pools), c.GitHubAPIURL)
	}
	if c.MaxReplacements != 3 || c.LivenessMaxChecks != 3 {
		t.Errorf("reclaimer liveness bounds: %d replacements, %d checks; want 3 and 3", c.MaxReplacements, c.LivenessMaxChecks)
	}
	m["MAX_REPLACEMENTS"] = "0"
	if _, err := LoadReclaimer(env(m)); err == nil || !strings.Contains(err.Error(), "MAX_REPLACEMENTS") {
		t.Errorf("MAX_REPLACEMENTS=0: got %v, want an error naming it", err)
	}
	delete(m, "MAX_REPLACEMENTS")
	delete(m, "GITHUB_APP_ID")
	delete(m, "GITHUB_APP_PRIVATE_KEY_ARN")
	m["WEBHOOK_SECRET"] = "s"
	if _, err := LoadWebhook(env(m)); err != nil {
		t.Fatalf("webhook needs no private key: %v", err)
	}
}

func TestErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		load    func(Getenv) error
		set     map[string]string
		unset   []string
		wantVar string
	}{
		{"table", webhook, nil, []string{"TABLE_NAME"}, "TABLE_NAME"},
		{"queue", claimer, nil, []string{"CLAIMS_QUEUE_URL"}, "CLAIMS_QUEUE_URL"},
		{"no secret", webhook, nil, []string{"WEBHOOK_SECRET"}, "WEBHOOK_SECRET_ARN"},
		{"short record ttl", webhook, map[string]string{"RECORD_TTL": "24h"}, nil, "RECORD_TTL"},
		{"bad pools", webhook, map[string]string{"RUNNER_POOLS": "[{}]"}, nil, "RUNNER_POOLS"},
		{"bad ladder", claimer, map[string]string{"RETRY_LADDER": "30s,soon"}, nil, "RETRY_LADDER"},
		{"bad max age", claimer, map[string]string{"MAX_AGE": "-1m"}, nil, "MAX_AGE"},
		{"no app id", claimer, nil, []string{"GITHUB_APP_ID"}, "GITHUB_APP_ID"},
		{"bad app id", claimer, map[string]string{"GITHUB_APP_ID": "x"}, nil, "GITHUB_APP_ID"},
		{"no key", claimer, nil, []string{"GITHUB_APP_PRIVATE_KEY"}, "GITHUB_APP_PRIVATE_KEY_ARN"},
		{"bad api url", claimer, map[string]string{"GITHUB_API_URL": "api.github.com"}, nil, "GITHUB_API_URL"},
		{"bad shards", reclaimer, map[string]string{"SWEEP_SHARDS": "0"}, nil, "SWEEP_SHARDS"},
		{"too many shards", reclaimer, map[string]string{"SWEEP_SHARDS": "65"}, nil, "SWEEP_SHARDS"},
		{"unknown sweep index", reclaimer, map[string]string{"SWEEP_INDEX": "sweep-v2"}, nil, "SWEEP_INDEX"},
		{"bad level", reclaimer, map[string]string{"LOG_LEVEL": "loud"}, nil, "LOG_LEVEL"},
		{"janitor: bad level", janitor, map[string]string{"LOG_LEVEL": "loud"}, nil, "LOG_LEVEL"},
		{"redeliverer: bad level", redeliverer, map[string]string{"LOG_LEVEL": "verbose"}, nil, "LOG_LEVEL"},
		{"reclaimer: no app id", reclaimer, nil, []string{"GITHUB_APP_ID"}, "GITHUB_APP_ID"},
		{"reclaimer: no key", reclaimer, nil, []string{"GITHUB_APP_PRIVATE_KEY"}, "GITHUB_APP_PRIVATE_KEY_ARN"},
		{"reclaimer: no pools", reclaimer, nil, []string{"RUNNER_POOLS"}, "RUNNER_POOLS"},
		{"lease past Lambda's longest run", claimer, map[string]string{"LEASE_DURATION": "30h"}, nil, "LEASE_DURATION"},
		{"pending grace past 6h", webhook, map[string]string{"PENDING_GRACE": "7h"}, nil, "PENDING_GRACE"},
		{"queued grace past 6h", reclaimer, map[string]string{"QUEUED_GRACE": "12h"}, nil, "QUEUED_GRACE"},
		{"max age past GitHub's 24h", claimer, map[string]string{"MAX_AGE": "25h"}, nil, "MAX_AGE"},
		{"sweep budget past 15m", reclaimer, map[string]string{"SWEEP_BUDGET": "20m"}, nil, "SWEEP_BUDGET"},
		{"runner start grace too short", reclaimer, map[string]string{"RUNNER_START_GRACE": "10s"}, nil, "RUNNER_START_GRACE"},
		{"runner start grace not a duration", claimer, map[string]string{"RUNNER_START_GRACE": "soon"}, nil, "RUNNER_START_GRACE"},
		{"stack name with a slash", janitor, map[string]string{"GHCLAIM_STACK": "ci/a"}, nil, "GHCLAIM_STACK"},
		{"stack name starting with a digit", claimer, map[string]string{"GHCLAIM_STACK": "1ci"}, nil, "GHCLAIM_STACK"},
		{"stack name too long", reclaimer, map[string]string{"GHCLAIM_STACK": "a" + strings.Repeat("b", 128)}, nil, "GHCLAIM_STACK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base()
			for k, v := range tt.set {
				m[k] = v
			}
			for _, k := range tt.unset {
				delete(m, k)
			}
			err := tt.load(env(m))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *Error", err)
			}
			if !strings.Contains(err.Error(), tt.wantVar) {
				t.Fatalf("got %q, want it to name %s", err, tt.wantVar)
			}
		})
	}
}

// TestStackNamesTheDeployment: GHCLAIM_STACK reaches every function's
// configuration as given, and is optional.
func TestStackNamesTheDeployment(t *testing.T) {
	t.Parallel()
	m := base()
	c, err := LoadJanitor(env(m))
	if err != nil || c.Stack != "" {
		t.Fatalf("unset: stack %q, %v; want none and no error", c.Stack, err)
	}
	m["GHCLAIM_STACK"] = " ghclaim-prod-2 "
	for name, load := range map[string]func(Getenv) (string, error){
		"claimer":   func(g Getenv) (string, error) { c, err := LoadClaimer(g); return c.Stack, err },
		"reclaimer": func(g Getenv) (string, error) { c, err := LoadReclaimer(g); return c.Stack, err },
		"janitor":   func(g Getenv) (string, error) { c, err := LoadJanitor(g); return c.Stack, err },
	} {
		stack, err := load(env(m))
		if err != nil || stack != "ghclaim-prod-2" {
			t.Errorf("%s: stack %q, %v; want ghclaim-prod-2", name, stack, err)
		}
	}
}

// TestSweepIndex: the reclaimer reads the keys-only index, or the old one
// while an upgrade keeps it (template.yaml's LegacySweepIndex).
func TestSweepIndex(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{"": store.SweepIndex, "sweep_keys": store.SweepIndex, " sweep ": store.LegacySweepIndex} {
		m := base()
		m["SWEEP_INDEX"] = v
		c, err := LoadReclaimer(env(m))
		if err != nil || c.SweepIndex != want {
			t.Errorf("SWEEP_INDEX %q: %q, %v; want %q", v, c.SweepIndex, err, want)
		}
	}
}

// TestRunnerStartGraceIsEveryPoolsDefault: RUNNER_START_GRACE fills the
// runner start grace of the pools that set none, for every function that
// reads the pools; a pool's own runner_start_grace wins.
func TestRunnerStartGraceIsEveryPoolsDefault(t *testing.T) {
	t.Parallel()
	m := base()
	m["RUNNER_POOLS"] = `[{"name":"a","labels":["x"],"provisioner":{"type":"dispatch","queue_url":"q"}},` +
		`{"name":"b","labels":["y"],"runner_start_grace":"5m","provisioner":{"type":"dispatch","queue_url":"q"}}]`
	m["RUNNER_START_GRACE"] = "25m"
	c, err := LoadClaimer(env(m))
	if err != nil {
		t.Fatal(err)
	}
	r, err := LoadReclaimer(env(m))
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range [][]pool.Pool{c.Pools, r.Pools} {
		if got := []time.Duration{ps[0].StartGrace(), ps[1].StartGrace()}; got[0] != 25*time.Minute || got[1] != 5*time.Minute {
			t.Errorf("grace of pools a, b: %v, want [25m 5m] (the variable for a, b's own)", got)
		}
	}
}

// TestErrorsNeverQuoteASecret: a secret pasted into a variable whose bad
// value the error describes (a swapped parameter, a local .env) is named by
// its variable, never quoted: main prints the error on stderr as it is.
// A harmless bad value is still quoted.
func TestErrorsNeverQuoteASecret(t *testing.T) {
	t.Parallel()
	const hook = "5ec5ca9e0f1b2c3d4e5f60718293a4b5c6d7e8f9" // GitHub's webhook secret shape: lower-case hex
	key := "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfnQdVx8qO4r2Jm\n-----END RSA PRIVATE KEY-----"
	jit := "eyIuY3JlZGVudGlhbHMiOiJleUpFWVhSaElqcDdJa0YxZEdodmNtbDZZWFJwYjI1VmNtd2lPaUpv"
	tests := []struct {
		name, variable, value, secret string
		load                          func(Getenv) error
	}{
		{"webhook secret as app id", "GITHUB_APP_ID", hook, hook, claimer},
		{"key as app id", "GITHUB_APP_ID", key, "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn", claimer},
		{"webhook secret as level", "LOG_LEVEL", hook, hook, reclaimer},
		{"webhook secret as body cap", "MAX_BODY_BYTES", hook, hook, webhook},
		{"webhook secret as api url", "GITHUB_API_URL", hook, hook, claimer},
		{"webhook secret in the ladder", "RETRY_LADDER", "30s," + hook, hook, claimer},
		{"webhook secret as max age", "MAX_AGE", hook, hook, reclaimer},
		{"jit config as namespace", "METRICS_NAMESPACE", jit + "!", jit[:24], webhook},
		{"harmless value quoted", "LOG_LEVEL", "loud", "", reclaimer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := base()
			m[tt.variable] = tt.value
			err := tt.load(env(m))
			if err == nil || !strings.Contains(err.Error(), tt.variable) {
				t.Fatalf("got %v, want an error naming %s", err, tt.variable)
			}
			if tt.secret == "" {
				if !strings.Contains(err.Error(), `"`+tt.value+`"`) {
					t.Errorf("got %q, want it to quote %q", err, tt.value)
				}
				return
			}
			if strings.Contains(err.Error(), tt.secret) {
				t.Errorf("got %q: it quotes the secret", err)
			}
		})
	}
}

func webhook(g Getenv) error   { _, err := LoadWebhook(g); return err }
func claimer(g Getenv) error   { _, err := LoadClaimer(g); return err }
func reclaimer(g Getenv) error { _, err := LoadReclaimer(g); return err }
func janitor(g Getenv) error   { _, err := LoadJanitor(g); return err }
func redeliverer(g Getenv) error {
	_, err := LoadRedeliverer(g)
	return err
}

func TestLoadRedeliverer(t *testing.T) {
	t.Parallel()
	base := map[string]string{"TABLE_NAME": "t", "GITHUB_APP_ID": "7", "GITHUB_APP_PRIVATE_KEY": "pem"}
	tests := []struct {
		name    string
		set     map[string]string
		badVar  string
		window  time.Duration
		attempt int
	}{
		{name: "defaults", window: 3 * time.Hour, attempt: 3},
		{name: "set", set: map[string]string{"REDELIVERY_WINDOW": "72h", "REDELIVERY_MAX_ATTEMPTS": "5"}, window: 72 * time.Hour, attempt: 5},
		{name: "window past retention", set: map[string]string{"REDELIVERY_WINDOW": "73h"}, badVar: "REDELIVERY_WINDOW"},
		{name: "bad window", set: map[string]string{"REDELIVERY_WINDOW": "soon"}, badVar: "REDELIVERY_WINDOW"},
		{name: "zero attempts", set: map[string]string{"REDELIVERY_MAX_ATTEMPTS": "0"}, badVar: "REDELIVERY_MAX_ATTEMPTS"},
		{name: "no table", set: map[string]string{"TABLE_NAME": ""}, badVar: "TABLE_NAME"},
		{name: "no app", set: map[string]string{"GITHUB_APP_ID": ""}, badVar: "GITHUB_APP_ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.set {
				env[k] = v
			}
			c, err := LoadRedeliverer(func(k string) string { return env[k] })
			if tt.badVar != "" {
				var ce *Error
				if !errors.As(err, &ce) || ce.Var != tt.badVar {
					t.Fatalf("err = %v, want a config error naming %s", err, tt.badVar)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Window != tt.window || c.MaxAttempts != tt.attempt {
				t.Errorf("window, attempts = %s, %d, want %s, %d", c.Window, c.MaxAttempts, tt.window, tt.attempt)
			}
		})
	}
}

func TestMetricsNamespace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   string
		want    string
		wantErr string
	}{
		{name: "unset: the default", value: "", want: "ghclaim"},
		{name: "a stack name", value: "ghclaim-prod", want: "ghclaim-prod"},
		{name: "every allowed character", value: "Team/ci.runners_2#eu: west-1", want: "Team/ci.runners_2#eu: west-1"},
		{name: "AWS prefix is reserved", value: "AWS/Lambda", wantErr: "reserved"},
		{name: "a leading colon (CloudWatch's pattern is [^:].*)", value: ":ghclaim", wantErr: "starts with ':'"},
		{name: "a character CloudWatch refuses", value: "ghclaim$prod", wantErr: "only letters"},
		{name: "non-ASCII", value: "ghcläim", wantErr: "only letters"},
		{name: "too long", value: strings.Repeat("n", 256), wantErr: "at most 255"},
	}
	loaders := map[string]func(Getenv) (string, error){
		"webhook":     func(g Getenv) (string, error) { c, err := LoadWebhook(g); return c.MetricsNamespace, err },
		"claimer":     func(g Getenv) (string, error) { c, err := LoadClaimer(g); return c.MetricsNamespace, err },
		"reclaimer":   func(g Getenv) (string, error) { c, err := LoadReclaimer(g); return c.MetricsNamespace, err },
		"janitor":     func(g Getenv) (string, error) { c, err := LoadJanitor(g); return c.MetricsNamespace, err },
		"redeliverer": func(g Getenv) (string, error) { c, err := LoadRedeliverer(g); return c.MetricsNamespace, err },
	}
	for _, tt := range tests {
		for fn, load := range loaders {
			t.Run(tt.name+"/"+fn, func(t *testing.T) {
				t.Parallel()
				m := base()
				m["METRICS_NAMESPACE"] = tt.value
				got, err := load(env(m))
				if tt.wantErr == "" {
					if err != nil || got != tt.want {
						t.Fatalf("got %q, %v, want %q", got, err, tt.want)
					}
					return
				}
				var ce *Error
				if !errors.As(err, &ce) || ce.Var != "METRICS_NAMESPACE" || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want a METRICS_NAMESPACE error containing %q", err, tt.wantErr)
				}
			})
		}
	}
}

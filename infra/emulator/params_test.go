package emulator

import (
	"regexp"
	"testing"

	"github.com/ghclaim/ghclaim/shared/config"
)

// TestParameterPatternsAcceptOnlyWhatTheFunctionsAccept: a value a
// parameter's AllowedPattern accepts must start every function that reads
// it; otherwise the deploy succeeds and each cold start fails. Each sample
// value, good or bad, is tried against both: the pattern may refuse more
// than the code, never less.
func TestParameterPatternsAcceptOnlyWhatTheFunctionsAccept(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	base := map[string]string{
		"TABLE_NAME": "t", "CLAIMS_QUEUE_URL": "http://q", "WEBHOOK_SECRET": "s",
		"RUNNER_POOLS":  `[{"name":"linux","labels":["self-hosted"],"provisioner":{"type":"dispatch","queue_url":"q"}}]`,
		"GITHUB_APP_ID": "7", "GITHUB_APP_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----",
	}
	load := map[string]func(config.Getenv) error{
		"webhook":     func(g config.Getenv) error { _, err := config.LoadWebhook(g); return err },
		"claimer":     func(g config.Getenv) error { _, err := config.LoadClaimer(g); return err },
		"reclaimer":   func(g config.Getenv) error { _, err := config.LoadReclaimer(g); return err },
		"janitor":     func(g config.Getenv) error { _, err := config.LoadJanitor(g); return err },
		"redeliverer": func(g config.Getenv) error { _, err := config.LoadRedeliverer(g); return err },
	}
	for _, tt := range []struct {
		param, env string
		readers    []string
		values     []string
	}{
		{"MaxAge", "MAX_AGE", []string{"webhook", "claimer", "reclaimer"},
			[]string{"90m", "1m", "1440m", "24h", "1441m", "25h", "2d", "90", "0m", "-1m", "1h30m"}},
		{"RunnerStartGrace", "RUNNER_START_GRACE", []string{"webhook", "claimer", "reclaimer", "janitor"},
			[]string{"", "1m", "10m", "360m", "6h", "30s", "0m", "7h", "361m", "1h30m", "soon"}},
		{"RetryLadder", "RETRY_LADDER", []string{"claimer"},
			[]string{"30s,1m,2m,5m,10m", "1s", "500ms,1s", "1m, 2m", "30,60", "", "0s", "1m,,2m", "soon"}},
		{"GitHubApiUrl", "GITHUB_API_URL", []string{"claimer", "reclaimer", "janitor", "redeliverer"},
			[]string{"https://api.github.com", "https://ghe.example.com/api/v3", "http://127.0.0.1:8081", "api.github.com", "ftp://x", ""}},
		{"RedeliveryWindow", "REDELIVERY_WINDOW", []string{"redeliverer"},
			[]string{"3h", "1h", "72h", "4320m", "1m", "73h", "100h", "4321m", "0h", "0m"}},
		{"MetricsNamespace", "METRICS_NAMESPACE", []string{"webhook", "claimer", "reclaimer", "janitor", "redeliverer"},
			[]string{"", "ghclaim", "ghclaim-prod", "Team/ghclaim", " ghclaim", "ghclaim ", "bad!name"}},
	} {
		p, _ := dig(tmpl, "Parameters", tt.param).(map[string]any)
		pat, _ := p["AllowedPattern"].(string)
		if pat == "" {
			t.Errorf("parameter %s has no AllowedPattern: any string deploys", tt.param)
			continue
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			t.Fatalf("parameter %s: pattern %q: %v", tt.param, pat, err)
		}
		for _, v := range tt.values {
			if !re.MatchString(v) {
				continue // refused at deploy: fine
			}
			for _, fn := range tt.readers {
				env := map[string]string{}
				for k, x := range base {
					env[k] = x
				}
				env[tt.env] = v
				if err := load[fn](func(k string) string { return env[k] }); err != nil {
					t.Errorf("%s=%q passes the template's pattern but the %s refuses it at start: %v", tt.param, v, fn, err)
				}
			}
		}
	}
}

package emulator

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/job"
)

// functionEnv is an environment every function starts with; the tests
// below vary one variable of it.
var functionEnv = map[string]string{
	"TABLE_NAME": "t", "CLAIMS_QUEUE_URL": "http://q", "WEBHOOK_SECRET": "s",
	"RUNNER_POOLS":  `[{"name":"linux","labels":["self-hosted"],"provisioner":{"type":"dispatch","queue_url":"q"}}]`,
	"GITHUB_APP_ID": "7", "GITHUB_APP_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----",
}

// TestParameterPatternsAcceptOnlyWhatTheFunctionsAccept: a value a
// parameter's AllowedPattern accepts must start every function that reads
// it; otherwise the deploy succeeds and each cold start fails. Each sample
// value, good or bad, is tried against both: the pattern may refuse more
// than the code, never less.
func TestParameterPatternsAcceptOnlyWhatTheFunctionsAccept(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	base := functionEnv
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
		{"AllowedOwners", "ALLOWED_OWNERS", []string{"webhook"},
			[]string{"", "my-org", "my-org,other", " my-org , Other.Org ,, ", "my-org, @other", "octo/app", "https://github.com/octo", "-dash", strings.Repeat("a", 101)}},
		{"SweepShards", "SWEEP_SHARDS", []string{"webhook", "claimer", "reclaimer"},
			[]string{"1", "8", "64", "65", "0", "2.5", "08", " 8", "1e1"}},
		{"MaxReplacements", "MAX_REPLACEMENTS", []string{"reclaimer"},
			[]string{"1", "3", "20", "21", "0", "2.5", "03", "-1"}},
		{"LivenessMaxChecks", "LIVENESS_MAX_CHECKS", []string{"reclaimer"},
			[]string{"1", "3", "20", "21", "0", "2.5", "03"}},
		{"RedeliveryMaxAttempts", "REDELIVERY_MAX_ATTEMPTS", []string{"redeliverer"},
			[]string{"1", "3", "20", "21", "0", "2.5", "03"}},
		{"MetricsNamespace", "METRICS_NAMESPACE", []string{"webhook", "claimer", "reclaimer", "janitor", "redeliverer"},
			[]string{"", "ghclaim", "ghclaim-prod", "Team/ghclaim", " ghclaim", "ghclaim ", "bad!name",
				"AWS/Lambda", "AWS/", "AWS", "AWSx/y", "AW/S", "A WS/", strings.Repeat("n", 255), strings.Repeat("n", 256)}},
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
		maxLen := parameterMaxLength(t, p)
		for _, v := range tt.values {
			if !re.MatchString(v) || (maxLen > 0 && len(v) > maxLen) {
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

// parameterMaxLength is a String parameter's MaxLength, 0 when it has none.
func parameterMaxLength(t *testing.T, p map[string]any) int {
	t.Helper()
	switch n := p["MaxLength"].(type) {
	case nil:
		return 0
	case int:
		return n
	default:
		t.Fatalf("MaxLength %v (%T): want a whole number", n, n)
		return 0
	}
}

// TestMetricsNamespacePatternIsTheFunctionsRule: the MetricsNamespace
// pattern spells "not AWS/..." out without lookahead, so it is checked
// against the functions' own rule on every string of up to six characters
// over the letters that matter (the prefix's, a space, another allowed one
// and a refused one), both ways: what the pattern accepts starts every
// function, and every namespace the functions take as written (no spaces
// to trim) deploys.
func TestMetricsNamespacePatternIsTheFunctionsRule(t *testing.T) {
	t.Parallel()
	p, _ := dig(projectTemplate(t), "Parameters", "MetricsNamespace").(map[string]any)
	pat, _ := p["AllowedPattern"].(string)
	re, err := regexp.Compile(pat)
	if err != nil {
		t.Fatalf("pattern %q: %v", pat, err)
	}
	if got := parameterMaxLength(t, p); got != 255 {
		t.Errorf("MaxLength %d, want CloudWatch's 255", got)
	}
	accepts := func(v string) bool {
		_, err := config.LoadWebhook(func(k string) string {
			if k == "METRICS_NAMESPACE" {
				return v
			}
			return functionEnv[k]
		})
		return err == nil
	}
	if !accepts("ghclaim") || accepts("AWS/Lambda") {
		t.Fatal("the webhook's config does not take a plain namespace or refuse AWS/: the base environment is wrong")
	}
	var walk func(s string, n int)
	walk = func(s string, n int) {
		match, ok := re.MatchString(s), accepts(s)
		switch {
		case match && !ok:
			t.Errorf("%q passes the pattern but the functions refuse it", s)
		case !match && ok && s == strings.TrimSpace(s):
			t.Errorf("%q is a namespace the functions take, but the pattern refuses it", s)
		}
		if n == 0 {
			return
		}
		for _, c := range []string{"A", "W", "S", "/", " ", "x", "!", ":"} {
			walk(s+c, n-1)
		}
	}
	walk("", 6)
}

// TestSweepShardsBound: the template allows exactly the shard counts the
// functions accept and the reclaimer visits (1 to job.MaxShards).
func TestSweepShardsBound(t *testing.T) {
	t.Parallel()
	p, _ := dig(projectTemplate(t), "Parameters", "SweepShards").(map[string]any)
	re := regexp.MustCompile(p["AllowedPattern"].(string))
	for n := 0; n <= 2*job.MaxShards; n++ {
		if got, want := re.MatchString(strconv.Itoa(n)), n >= 1 && n <= job.MaxShards; got != want {
			t.Errorf("SweepShards %d deploys: %t, want %t (1 to job.MaxShards %d)", n, got, want, job.MaxShards)
		}
	}
}

// TestNoNumberParameterReachesAFunctionOrARunner: CloudFormation's Number
// takes decimals ("2.5" is within MinValue 1 and MaxValue 20), the
// functions' integers and boot.sh's seconds do not: such a value deploys,
// then every cold start fails (the webhook answering GitHub 5xx, which
// GitHub never retries) or every runner powers off at boot. Values that
// reach an environment are Strings whose pattern says what is taken.
func TestNoNumberParameterReachesAFunctionOrARunner(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	params, _ := tmpl["Parameters"].(map[string]any)
	numbers := map[string]bool{}
	for name, v := range params {
		if p, _ := v.(map[string]any); p["Type"] == "Number" {
			numbers[name] = true
		}
	}
	envs := []any{dig(tmpl, "Globals", "Function", "Environment", "Variables")}
	resources, _ := tmpl["Resources"].(map[string]any)
	for _, v := range resources {
		if r, _ := v.(map[string]any); r["Type"] == "AWS::Serverless::Function" {
			envs = append(envs, dig(r, "Properties", "Environment", "Variables"))
		}
	}
	for _, vars := range envs {
		m, _ := vars.(map[string]any)
		for env, v := range m {
			if ref, _ := dig(v, "Ref").(string); numbers[ref] {
				t.Errorf("%s takes Number parameter %s: a decimal deploys and fails every cold start", env, ref)
			}
		}
	}
	// The runners' user data exports parameters into boot.sh's environment.
	var subs func(v any)
	subs = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			s, ok := x["Fn::Sub"].(string)
			if l, isList := x["Fn::Sub"].([]any); isList && len(l) > 0 {
				s, ok = l[0].(string) // the [text, variables] form
			}
			if ok && strings.Contains(s, "export ") {
				for name := range numbers {
					if strings.Contains(s, "${"+name+"}") {
						t.Errorf("a runner's user data exports Number parameter %s: a decimal deploys and boot.sh powers every runner off", name)
					}
				}
			}
			for _, y := range x {
				subs(y)
			}
		case []any:
			for _, y := range x {
				subs(y)
			}
		}
	}
	subs(resources)
}

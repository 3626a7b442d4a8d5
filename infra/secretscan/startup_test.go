package secretscan_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/infra/chaos"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/wire"
	wireclaimer "github.com/ghclaim/ghclaim/shared/wire/claimer"
	wirejanitor "github.com/ghclaim/ghclaim/shared/wire/janitor"
	wirereclaimer "github.com/ghclaim/ghclaim/shared/wire/reclaimer"
	wireredeliverer "github.com/ghclaim/ghclaim/shared/wire/redeliverer"
	wirehook "github.com/ghclaim/ghclaim/shared/wire/webhook"
)

// hookHex is a webhook secret of the shape GitHub's App manifest flow
// hands out (40 lower-case hex characters): unlike the other planted
// secrets it has no upper-case letter, so shared/redact's shape rule for
// logs lets it through, and only the code's care keeps it out.
const hookHex = "5ec5ca9e0f1b2c3d4e5f60718293a4b5c6d7e8f9"

// startKit is what the start-up and hold paths need from the main test.
type startKit struct {
	env    env // the working environment of every function
	now    func() time.Time
	out    func(name string) *output
	sm     *secretsmanager.Client
	keyPEM string
	// queued delivers a queued job and returns the claimer's event for its message.
	queued func(id int64) events.SQSEvent
	record func(id int64) job.Record
	// refusing is e with fn's AWS requests judged by fn's role in
	// template.yaml, refused as IAM refuses (AccessDeniedException naming
	// the resource as asked for), the refusals expected.
	refusing func(fn string, e wire.Env) wire.Env
}

// with is e with the variables of kv set ("" deletes one).
func (e env) with(kv ...string) env {
	out := env{}
	for k, v := range e {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
			continue
		}
		out[kv[i]] = kv[i+1]
	}
	return out
}

// driveHold runs the claimer while its App key cannot be had, each way it
// can fail at start: no secret behind the ARN, a secret scheduled for
// deletion (unreadable), a secret whose value is not a PEM (the key as a
// Secrets Manager key/value JSON, the key with its newlines escaped and
// in the quotes of the .env line it was copied from; escaped alone, it is
// read as the key it can only be), and
// the key pasted into the ARN's variable. Each must hold the message
// (batch item failure, no lease, no attempt) with a hold decision line.
// It returns the secrets it planted.
func driveHold(t *testing.T, ctx context.Context, k startKit) map[string]string {
	t.Helper()
	mk := func(name, value string) string {
		t.Helper()
		out, err := k.sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
			Name: aws.String("secretscan-" + name + "-" + fmt.Sprint(time.Now().UnixNano())), SecretString: aws.String(value)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ARN)
	}
	asJSON, _ := json.Marshal(map[string]string{"private_key": k.keyPEM})
	escaped := `"` + strings.ReplaceAll(k.keyPEM, "\n", `\n`) + `"`
	deleted := mk("deleted", k.keyPEM)
	if _, err := k.sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(deleted), RecoveryWindowInDays: aws.Int64(7)}); err != nil {
		t.Fatal(err)
	}
	missing := strings.Replace(deleted, "secretscan-deleted", "secretscan-never-written", 1)
	cases := []struct {
		name, arn string
		iam       bool // judged by the role: AWS refuses an id it does not name, quoting it
	}{
		{"no such secret", missing, false},
		{"secret scheduled for deletion", deleted, false},
		{"key as key/value JSON", mk("json", string(asJSON)), false},
		{"key with escaped newlines, in quotes", mk("escaped", escaped), false},
		{"webhook secret in the key's secret", mk("hook", hookHex), false},
		{"key pasted into the ARN variable", k.keyPEM, true},
		{"webhook secret pasted into the ARN variable", hookHex, true},
	}
	ev := k.queued(1050)
	before := k.record(1050)
	for _, c := range cases {
		o := k.out("claimer hold")
		fmt.Fprintf(o, "# %s\n", c.name)
		lines := len(o.Bytes())
		e := wired(k.env.with("GITHUB_APP_PRIVATE_KEY_ARN", c.arn), k.now, o)
		if c.iam {
			e = k.refusing("ClaimerFunction", e)
		}
		h, err := wireclaimer.New(ctx, e)
		if err != nil {
			t.Fatalf("hold, %s: wiring: %v", c.name, err)
		}
		resp, err := h(ctx, ev)
		if err != nil {
			fmt.Fprintf(o, "handler error: %v\n", err)
		}
		b, _ := json.Marshal(resp)
		fmt.Fprintf(o, "answer: %s\n", b)
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[0].MessageId {
			t.Errorf("hold, %s: answer %s, want the message back as a batch item failure", c.name, b)
		}
		var held bool
		for _, l := range strings.Split(string(o.Bytes()[lines:]), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["decision"] == "hold" && m["delay_ms"] == float64(time.Minute.Milliseconds()) {
				held = true
			}
		}
		if !held {
			t.Errorf("hold, %s: no hold decision line with a one-minute delay: the hold path did not run", c.name)
		}
	}
	if after := k.record(1050); after.State != before.State || after.Version != before.Version || after.Attempt != before.Attempt || after.LeaseExpiresAt != 0 {
		t.Errorf("held job: %s v%d attempt %d, want it untouched (%s v%d attempt %d)", after.State, after.Version, after.Attempt, before.State, before.Version, before.Attempt)
	}
	return map[string]string{"webhook secret (hex)": hookHex, "app key, newlines escaped": escaped, "app key as JSON": string(asJSON)}
}

// starter is one function's wiring, its handler dropped.
type starter struct {
	name string
	new  func(context.Context, wire.Env) error
	app  bool // reads the GitHub App's configuration
}

var starters = []starter{
	{"webhook", func(ctx context.Context, e wire.Env) error { _, err := wirehook.New(ctx, e); return err }, false},
	{"claimer", func(ctx context.Context, e wire.Env) error { _, err := wireclaimer.New(ctx, e); return err }, true},
	{"reclaimer", func(ctx context.Context, e wire.Env) error { _, err := wirereclaimer.New(ctx, e); return err }, true},
	{"janitor", func(ctx context.Context, e wire.Env) error { _, err := wirejanitor.New(ctx, e); return err }, true},
	{"redeliverer", func(ctx context.Context, e wire.Env) error { _, err := wireredeliverer.New(ctx, e); return err }, true},
}

// driveStartup starts each function with a bad environment that carries
// the secrets: a required variable missing, and a secret pasted into a
// variable whose bad value the error describes (the webhook secret or the
// App key where the App id, a size or a duration belongs, as a swapped
// deploy parameter or a local .env puts it). Each start must fail with an
// error naming the variable; wire.Process prints that error on stderr as
// "<function>: <error>", so it is written to the function's start-up
// output as Process would. It returns the secrets it planted.
func driveStartup(t *testing.T, ctx context.Context, k startKit) map[string]string {
	t.Helper()
	// The local-run literals are set too, so a start-up error that quoted
	// them would be seen.
	base := k.env.with("WEBHOOK_SECRET", hookHex, "GITHUB_APP_PRIVATE_KEY", k.keyPEM)
	for _, s := range starters {
		cases := []struct{ name, variable, value string }{
			{"missing", "TABLE_NAME", ""},
			{"app key as the metrics namespace", "METRICS_NAMESPACE", k.keyPEM},
			{"webhook secret as the log level", "LOG_LEVEL", hookHex},
			{"webhook secret as an SDK flag", "AWS_USE_FIPS_ENDPOINT", hookHex},
		}
		if s.app {
			cases = append(cases,
				struct{ name, variable, value string }{"webhook secret as the App id", "GITHUB_APP_ID", hookHex},
				struct{ name, variable, value string }{"app key as the App id", "GITHUB_APP_ID", k.keyPEM},
				struct{ name, variable, value string }{"webhook secret as the API URL", "GITHUB_API_URL", hookHex})
		} else {
			cases = append(cases, struct{ name, variable, value string }{"webhook secret as the body cap", "MAX_BODY_BYTES", hookHex},
				struct{ name, variable, value string }{"app key as the allowed owners", "ALLOWED_OWNERS", k.keyPEM})
		}
		if s.name == "claimer" {
			cases = append(cases, struct{ name, variable, value string }{"webhook secret in the retry ladder", "RETRY_LADDER", "30s," + hookHex})
		}
		if s.name != "redeliverer" { // the four that read RUNNER_POOLS_PARAMETER (a leading "/" passes the template)
			cases = append(cases, struct{ name, variable, value string }{"webhook secret as the pools parameter", "RUNNER_POOLS_PARAMETER", "/" + hookHex})
		}
		for _, c := range cases {
			o := k.out(s.name + " start-up")
			err := s.new(ctx, wired(base.with(c.variable, c.value), k.now, o))
			if err == nil {
				t.Errorf("%s, %s: started, want a configuration error", s.name, c.name)
				continue
			}
			fmt.Fprintln(o, s.name+":", err)
			if !strings.Contains(err.Error(), c.variable) {
				t.Errorf("%s, %s: error does not name %s", s.name, c.name, c.variable)
			}
		}
	}
	// The webhook reads its secret per delivery: the secret pasted into
	// WEBHOOK_SECRET_ARN starts, and the first delivery is refused 503.
	o := k.out("webhook start-up")
	h, err := wirehook.New(ctx, k.refusing("WebhookFunction", wired(k.env.with("WEBHOOK_SECRET_ARN", hookHex), k.now, o)))
	if err != nil {
		t.Fatalf("webhook with the secret as its ARN: %v", err)
	}
	resp, err := h.Handle(ctx, chaos.Delivery{GUID: "guid-pasted", Event: "ping", Body: []byte(`{"zen":"x"}`)}.Request([]byte(hookHex)))
	fmt.Fprintf(o, "answer: %d %s (error %v)\n", resp.StatusCode, resp.Body, err)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("webhook with the secret as its ARN: status %d, want 503", resp.StatusCode)
	}
	return map[string]string{"webhook secret (hex)": hookHex}
}

package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/secret"
	hook "github.com/ghclaim/ghclaim/shared/webhook"
	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/webhook"
)

// TestNoSecretAnswerSaysWhy: as wired, on the emulator, a webhook secret
// that holds nothing usable answers 503 with a message that names why, as
// GitHub shows it in the App's delivery log: "run make app" is the fix for
// a secret never set, not for one scheduled for deletion (make app cannot
// write into it) or emptied. The answer never names the ARN or quotes a
// value. The message once said "not set yet: run make app" for all of them.
func TestNoSecretAnswerSaysWhy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := emulator.ForTest(t)
	sm := secretsmanager.NewFromConfig(srv.ConfigForTest(t))
	const value = "an-old-webhook-secret-value-of-40-chars-x"
	tests := []struct {
		name    string
		stored  *string // nil: created with no value
		deleted bool    // then scheduled for deletion
		want    error
	}{
		{name: "created, never set", want: hook.ErrSecretNotSet},
		{name: "scheduled for deletion", stored: aws.String(value), deleted: true, want: hook.ErrSecretDeleted},
		{name: "emptied (spaces)", stored: aws.String(" \n"), want: hook.ErrSecretEmpty},
		{name: "only commas", stored: aws.String(" , "), want: hook.ErrSecretEmpty},
		{name: "the template's placeholder", stored: aws.String(secret.Placeholders[0]), want: hook.ErrSecretNotSet},
	}
	req := fixture(t, "webhook-ping.json")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := "nosecret-" + strconv.Itoa(i) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: &name, SecretString: tt.stored})
			if err != nil {
				t.Fatal(err)
			}
			arn := aws.ToString(out.ARN)
			if tt.deleted {
				if _, err := sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: &arn, RecoveryWindowInDays: aws.Int64(7)}); err != nil {
					t.Fatal(err)
				}
			}
			vars := srv.Env()
			for k, v := range map[string]string{
				"TABLE_NAME": "jobs", "CLAIMS_QUEUE_URL": "http://127.0.0.1:1/000000000000/claims",
				"RUNNER_POOLS":       `[{"name":"linux","labels":["self-hosted","linux"],"scope":"repo","runner_group_id":1,"provisioner":{"type":"dispatch","queue_url":"http://127.0.0.1:1/000000000000/d"}}]`,
				"WEBHOOK_SECRET_ARN": arn,
			} {
				vars[k] = v
			}
			h, err := webhook.New(ctx, wire.Env{
				Getenv: func(k string) string { return vars[k] },
				Out:    io.Discard,
				Now:    func() time.Time { return time.Date(2026, 11, 30, 9, 0, 1, 0, time.UTC) },
			})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h.Handle(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var r hook.Reply
			if err := json.Unmarshal([]byte(resp.Body), &r); err != nil {
				t.Fatalf("body %q: %v", resp.Body, err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || r.Message != tt.want.Error() {
				t.Errorf("got %d %q, want 503 %q", resp.StatusCode, r.Message, tt.want)
			}
			if strings.Contains(resp.Body, arn) || strings.Contains(resp.Body, value) {
				t.Errorf("answer %s names the ARN or quotes the value", resp.Body)
			}
		})
	}
}

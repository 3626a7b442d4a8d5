package secret_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
)

// TestSecretStatesOnMoto: each state Secrets Manager may hold a secret in,
// as the functions (Cache) and ghclaim doctor (Resolve) read it: the same
// value, or the same error saying why there is none, naming the ARN and
// never the value.
func TestSecretStatesOnMoto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := emulator.ForTest(t)
	sm := secretsmanager.NewFromConfig(srv.ConfigForTest(t)) // sets the secrets up
	reader := secretsapi.New(srv.ConfigForTest(t))           // reads them, as the functions do
	const value = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n"
	tests := []struct {
		name    string
		setup   func(t *testing.T, name string) string // returns the ARN
		want    string
		wantErr string
		reason  string // NotSetReason, what a consumer chooses its answer by
	}{
		{name: "SecretString", want: value, setup: func(t *testing.T, name string) string {
			return create(t, sm, &secretsmanager.CreateSecretInput{Name: &name, SecretString: aws.String(value)})
		}},
		{name: "SecretBinary (put with fileb://)", want: value, setup: func(t *testing.T, name string) string {
			return create(t, sm, &secretsmanager.CreateSecretInput{Name: &name, SecretBinary: []byte(value)})
		}},
		{name: "created, never set", wantErr: "has no AWSCURRENT value", reason: secret.ReasonNeverSet, setup: func(t *testing.T, name string) string {
			return create(t, sm, &secretsmanager.CreateSecretInput{Name: &name})
		}},
		// A rotation's next value is AWSPENDING until it is made current;
		// a secret's first value is AWSCURRENT whatever its labels
		// (PutSecretValue), so there is always a current one beside it.
		{name: "an AWSPENDING value beside the current one", want: value, setup: func(t *testing.T, name string) string {
			arn := create(t, sm, &secretsmanager.CreateSecretInput{Name: &name, SecretString: aws.String(value)})
			if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: &arn, SecretString: aws.String("pending"),
				VersionStages: []string{"AWSPENDING"}}); err != nil {
				t.Fatal(err)
			}
			return arn
		}},
		{name: "scheduled for deletion", wantErr: "scheduled for deletion", reason: secret.ReasonDeleted, setup: func(t *testing.T, name string) string {
			arn := create(t, sm, &secretsmanager.CreateSecretInput{Name: &name, SecretString: aws.String(value)})
			if _, err := sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: &arn, RecoveryWindowInDays: aws.Int64(7)}); err != nil {
				t.Fatal(err)
			}
			return arn
		}},
		{name: "spaces only", wantErr: "empty", reason: secret.ReasonEmpty, setup: func(t *testing.T, name string) string {
			return create(t, sm, &secretsmanager.CreateSecretInput{Name: &name, SecretString: aws.String(" \n")})
		}},
		{name: "the template's placeholder", wantErr: "still the template's placeholder", reason: secret.ReasonPlaceholder, setup: func(t *testing.T, name string) string {
			return create(t, sm, &secretsmanager.CreateSecretInput{Name: &name, SecretString: aws.String(secret.Placeholders[0])})
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			arn := tt.setup(t, "states-"+strconv.Itoa(i)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
			resolved, rerr := secret.Resolve(ctx, reader, arn, "")
			cached, cerr := secret.NewCache(reader, arn, "", secret.CacheOptions{}).Get(ctx)
			for _, got := range []struct {
				via string
				v   string
				err error
			}{{"Resolve", resolved, rerr}, {"Cache", cached, cerr}} {
				if tt.wantErr == "" {
					if got.err != nil || got.v != tt.want {
						t.Errorf("%s: got %v, want the value", got.via, got.err)
					}
					continue
				}
				if got.err == nil || !errors.Is(got.err, secret.ErrNotSet) || !strings.Contains(got.err.Error(), tt.wantErr) ||
					!strings.Contains(got.err.Error(), arn) {
					t.Errorf("%s: got %v, want ErrNotSet saying %q and naming %s", got.via, got.err, tt.wantErr, arn)
				}
				var why interface{ NotSetReason() string }
				if !errors.As(got.err, &why) || why.NotSetReason() != tt.reason {
					t.Errorf("%s: got %v, want NotSetReason %q", got.via, got.err, tt.reason)
				}
				if got.err != nil && strings.Contains(got.err.Error(), "MIIBOgIBAAJBAKj34Gkx") {
					t.Errorf("%s: error quotes the value: %v", got.via, got.err)
				}
			}
		})
	}
}

func create(t *testing.T, sm *secretsmanager.Client, in *secretsmanager.CreateSecretInput) string {
	t.Helper()
	out, err := sm.CreateSecret(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.ARN)
}

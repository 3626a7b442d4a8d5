package secret

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
)

// ctxSM answers like Secrets Manager: a caller whose context is already
// over gets the context's error (as the SDK does), anyone else the value.
type ctxSM struct{ value string }

func (s ctxSM) GetSecretValue(ctx context.Context, _ *secretsapi.GetSecretValueInput) (*secretsapi.GetSecretValueOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &secretsapi.GetSecretValueOutput{SecretString: aws.String(s.value)}, nil
}

// TestCallerContextIsNotTheSecrets: the first read of a cold function is
// made under one caller's context (a webhook delivery's budget, a claim's
// work context). When that context has ended, its error is that caller's
// alone: cached for Retry it would be every later caller's answer (a cold
// webhook answering 503 to every delivery for 15 s, which GitHub does not
// retry; a cold claimer failing every claim).
func TestCallerContextIsNotTheSecrets(t *testing.T) {
	t.Parallel()
	c, clk := setupCache(t, nil)
	c.sm = ctxSM{value: "s3cret"}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(gone); err == nil {
		t.Fatal("the cancelled caller got a value")
	}
	clk.advance(1) // a moment later, well inside Retry
	got, err := c.Get(context.Background())
	if err != nil || got != "s3cret" {
		t.Fatalf("a healthy caller after a cancelled one: got %q, %v; want the secret (Secrets Manager is fine, only the first caller's context ended)", got, err)
	}
}

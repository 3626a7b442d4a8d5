// Package secret reads the secrets a function needs: from Secrets Manager by
// ARN in AWS, or from a plain environment variable in local runs. Webhook
// secrets may hold several values separated by
// commas, so a secret can be rotated without downtime (GitHub signs with the
// new one while we still accept the old).
//
// Functions read through a Cache with a TTL (default 5 minutes), not once
// per cold start: a rotation, or the first write by `make app` into a
// stack deployed before the GitHub App existed, reaches warm functions
// without a redeploy, and a function started before its secret exists
// keeps running and says so (ErrNotSet) instead of failing at init in a
// crash loop. A failed read is remembered for a short Retry so a function
// waiting for its secret does not ask Secrets Manager on every request.
//
// Errors name a secret by its ARN; an id that is not an ARN is named only
// through redact.Input, as it may be the secret pasted in the wrong place.
//
// This package must never log, print or wrap a secret value into an error.
package secret

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ghclaim/ghclaim/shared/redact"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
)

// SecretsManager is the part of the Secrets Manager API used here.
type SecretsManager interface {
	GetSecretValue(ctx context.Context, in *secretsapi.GetSecretValueInput) (*secretsapi.GetSecretValueOutput, error)
}

var _ SecretsManager = (*secretsapi.Client)(nil)

// ErrEmpty means the secret exists but holds nothing usable.
var ErrEmpty = errors.New("secret: empty value")

// Resolve returns the secret named by arn, or plain when arn is empty.
// sm may be nil when arn is empty. A secret that holds nothing usable
// (see read) is an error wrapping ErrNotSet, which errors.Is also finds as
// ErrEmpty.
func Resolve(ctx context.Context, sm SecretsManager, arn, plain string) (string, error) {
	if arn == "" {
		if strings.TrimSpace(plain) == "" {
			return "", ErrEmpty
		}
		return plain, nil
	}
	return read(ctx, sm, arn)
}

// read asks Secrets Manager for the AWSCURRENT value of the secret arn
// (never AWSPENDING: a rotation's value is used once it is made current).
// The value is SecretString, or SecretBinary when the secret was put as
// bytes (--secret-binary fileb://app.pem): GetSecretValue answers one or
// the other. What holds nothing usable is an error wrapping ErrNotSet that
// says why, in its text and as its NotSetReason: no AWSCURRENT value (created but never set, or no such
// secret: ResourceNotFoundException), scheduled for deletion
// (InvalidRequestException), empty, or the template's placeholder. AWS's
// own error stays reachable (errors.As); the value is never in an error.
func read(ctx context.Context, sm SecretsManager, arn string) (string, error) {
	if sm == nil {
		return "", fmt.Errorf("secret %s: no Secrets Manager client", shown(arn))
	}
	out, err := sm.GetSecretValue(ctx, &secretsapi.GetSecretValueInput{SecretID: arn})
	switch {
	case secretsapi.IsCode(err, secretsapi.CodeResourceNotFound):
		return "", fmt.Errorf("secret %s: has no AWSCURRENT value (created but never set, or no such secret): %w (%w)", shown(arn), notSetBecause(ReasonNeverSet), scrub(err, arn))
	case secretsapi.IsCode(err, secretsapi.CodeInvalidRequest):
		return "", fmt.Errorf("secret %s: scheduled for deletion (aws secretsmanager restore-secret undoes it): %w (%w)", shown(arn), notSetBecause(ReasonDeleted), scrub(err, arn))
	case err != nil:
		return "", fmt.Errorf("secret %s: %w", shown(arn), scrub(err, arn))
	}
	v := string(out.SecretBinary)
	if out.SecretString != nil {
		v = *out.SecretString
	}
	switch {
	case strings.TrimSpace(v) == "":
		return "", fmt.Errorf("secret %s: empty: %w", shown(arn), notSetBecause(ReasonEmpty))
	case isPlaceholder(v):
		return "", fmt.Errorf("secret %s: still the template's placeholder: %w", shown(arn), notSetBecause(ReasonPlaceholder))
	}
	return v, nil
}

// Split splits a rotation list ("new,old") into its non-empty values.
func Split(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// shown is the secret's id as an error names it: an ARN as it is (the
// operator needs it), any other id through redact.Input, since a variable
// meant for an ARN may hold the secret itself (pasted in the wrong place),
// and a webhook secret of GitHub's shape passes the logs' redaction.
func shown(id string) string {
	if strings.HasPrefix(id, "arn:") {
		return id
	}
	return redact.Input(id)
}

// scrub is err with id, when it is not an ARN, masked in its text: AWS
// quotes the SecretId it was asked for (AccessDeniedException "... on
// resource: <id>"), and a variable meant for an ARN may hold the secret
// itself (see shown). AWS's error stays reachable (errors.As).
func scrub(err error, id string) error {
	if id == "" || strings.HasPrefix(id, "arn:") {
		return err
	}
	return scrubbed{err: err, id: id}
}

type scrubbed struct {
	err error
	id  string
}

func (s scrubbed) Error() string { return strings.ReplaceAll(s.err.Error(), s.id, redact.Mask) }
func (s scrubbed) Unwrap() error { return s.err }

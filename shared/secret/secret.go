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

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/shared/redact"
)

// SecretsManager is the part of the Secrets Manager API used here.
type SecretsManager interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ SecretsManager = (*secretsmanager.Client)(nil)

// ErrEmpty means the secret exists but holds nothing usable.
var ErrEmpty = errors.New("secret: empty value")

// Resolve returns the secret named by arn, or plain when arn is empty.
// sm may be nil when arn is empty.
func Resolve(ctx context.Context, sm SecretsManager, arn, plain string) (string, error) {
	if arn == "" {
		if strings.TrimSpace(plain) == "" {
			return "", ErrEmpty
		}
		return plain, nil
	}
	if sm == nil {
		return "", fmt.Errorf("secret %s: no Secrets Manager client", shown(arn))
	}
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &arn})
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", shown(arn), scrub(err, arn))
	}
	if out.SecretString == nil || strings.TrimSpace(*out.SecretString) == "" {
		return "", fmt.Errorf("secret %s: %w", shown(arn), ErrEmpty)
	}
	return *out.SecretString, nil
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

package webhook

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
)

// ErrSecretNotSet is the answer to a delivery that arrives before the
// webhook secret exists (the stack was deployed, `make app` not run yet):
// 503, which GitHub shows on the App's "Recent Deliveries" page, where
// the delivery can be redelivered once the secret is there.
var ErrSecretNotSet = errors.New("GitHub App webhook secret not set yet: run make app")

// ErrSecretDeleted is the answer while the webhook secret is scheduled for
// deletion: `make app` cannot write into it, restoring it is the fix.
var ErrSecretDeleted = errors.New("GitHub App webhook secret is scheduled for deletion: restore it (aws secretsmanager restore-secret), then redeliver")

// ErrSecretEmpty is the answer while the webhook secret holds no value
// (emptied, or only the commas of a rotation list): the App that sent the
// delivery exists, so its secret is stored again, not a new App made.
var ErrSecretEmpty = errors.New("GitHub App webhook secret holds no value (empty, or only commas): store the App's webhook secret in it, then redeliver")

// Why a secret is not set, as shared/secret reports it (NotSetReason);
// declared here, as the webhook must not import shared/secret.
const (
	reasonDeleted = "deleted"
	reasonEmpty   = "empty"
)

// secrets returns the secrets a delivery is verified with.
func (h *Handler) secrets(ctx context.Context) ([][]byte, error) {
	if h.cfg.CurrentSecrets == nil {
		return h.cfg.Secrets, nil
	}
	s, err := h.cfg.CurrentSecrets(ctx)
	if err == nil && !anyUsable(s) {
		err = ErrSecretEmpty
	}
	return s, err
}

func anyUsable(secrets [][]byte) bool {
	for _, s := range secrets {
		if len(s) > 0 {
			return true
		}
	}
	return false
}

// noSecret answers 503 when the secrets cannot be had. The cause is
// logged (it names a secret's ARN at most, never a value); the client
// sees why setup is unfinished (never set, empty, scheduled for deletion,
// each with its own fix: ErrSecretNotSet, ErrSecretEmpty,
// ErrSecretDeleted), or that the secret store is unavailable, never the
// ARN or the store's error.
func (h *Handler) noSecret(ctx context.Context, d *delivery, err error) events.LambdaFunctionURLResponse {
	h.decided(ctx, d, slog.LevelError, "delivery refused",
		h.attrs(d, slog.String("outcome", "no_secret"), slog.Int("status", http.StatusServiceUnavailable), slog.String("error", err.Error())))
	return reply(http.StatusServiceUnavailable, Reply{Status: StatusError, Message: noSecretMessage(err)})
}

// noSecretMessage is the 503's message for err.
func noSecretMessage(err error) string {
	var ns interface{ NotSet() bool }
	var why interface{ NotSetReason() string }
	switch {
	case errors.Is(err, ErrSecretEmpty):
		return ErrSecretEmpty.Error()
	case errors.Is(err, ErrSecretNotSet):
		return ErrSecretNotSet.Error()
	case !errors.As(err, &ns) || !ns.NotSet():
		return "webhook secret unavailable: redeliver this delivery"
	case !errors.As(err, &why):
		return ErrSecretNotSet.Error()
	}
	switch why.NotSetReason() {
	case reasonDeleted:
		return ErrSecretDeleted.Error()
	case reasonEmpty:
		return ErrSecretEmpty.Error()
	}
	return ErrSecretNotSet.Error() // never set, the template's placeholder
}

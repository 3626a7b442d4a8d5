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

// secrets returns the secrets a delivery is verified with.
func (h *Handler) secrets(ctx context.Context) ([][]byte, error) {
	if h.cfg.CurrentSecrets == nil {
		return h.cfg.Secrets, nil
	}
	s, err := h.cfg.CurrentSecrets(ctx)
	if err == nil && !anyUsable(s) {
		err = ErrSecretNotSet
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
// sees only whether setup is unfinished or the secret store unavailable.
func (h *Handler) noSecret(ctx context.Context, d *delivery, err error) events.LambdaFunctionURLResponse {
	var ns interface{ NotSet() bool }
	msg := "webhook secret unavailable: redeliver this delivery"
	if errors.Is(err, ErrSecretNotSet) || (errors.As(err, &ns) && ns.NotSet()) {
		msg = ErrSecretNotSet.Error()
	}
	h.cfg.Logger.LogAttrs(ctx, slog.LevelError, "delivery refused",
		h.delivered(d, h.attrs(d, slog.String("outcome", "no_secret"), slog.Int("status", http.StatusServiceUnavailable), slog.String("error", err.Error())))...)
	return reply(http.StatusServiceUnavailable, Reply{Status: StatusError, Message: msg})
}

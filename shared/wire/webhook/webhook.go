// Package webhook wires the webhook function: configuration, the webhook
// secret's TTL cache, the job table, the claims queue, the logger and the
// metrics, built once per cold start around shared/webhook's handler.
// functions/webhook's main.go calls New with the process's environment;
// tests call it with theirs, so they drive the handler the function ships.
//
// It must never import what the webhook does not ship (EC2, the GitHub App
// client): see shared/wire's package doc.
package webhook

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/webhook"
	"github.com/ghclaim/ghclaim/shared/wire"
)

// New wires the webhook's handler from env. A configuration error names
// the variable.
func New(ctx context.Context, env wire.Env) (*webhook.Handler, error) {
	if err := env.Check(); err != nil {
		return nil, err
	}
	cfg, awsCfg, err := config.Start(ctx, env.Getenv, config.LoadWebhook)
	if err != nil {
		return nil, err
	}
	if env.HTTPClient == nil {
		// Every attempt bounded, so a stalled one is retried within the
		// delivery's budget instead of using it up (GitHub does not send
		// a delivery answered 5xx again).
		awsCfg.HTTPClient = awsenv.AttemptBound(webhook.AttemptTimeout)
	}
	awsCfg = env.AWS(awsCfg)
	// Read per delivery through a TTL cache: a secret written after this
	// cold start (make app) or rotated is picked up; none yet answers 503.
	secrets := wire.Secret(awsCfg, cfg.SecretARN, cfg.Secret)
	return webhook.New(webhook.Config{
		CurrentSecrets: secrets.Rotation,
		Pools:          cfg.Pools,
		AllowedOwners:  cfg.AllowedOwners,
		MaxBodyBytes:   cfg.MaxBodyBytes,
		MaxAge:         cfg.MaxAge,
		Store:          wire.Store(awsCfg, cfg.Common),
		Queue:          queue.New(sqs.NewFromConfig(awsCfg), cfg.ClaimsQueueURL),
		Now:            env.Now,
		Logger:         env.Logger(cfg.LogLevel),
		// The delivery's decision line carries its metrics; they get a line
		// of their own on Out only when LOG_LEVEL drops that line.
		Metrics: env.Metrics(cfg.MetricsNamespace, "webhook", env.Out),
	})
}

// Command webhook is the webhook Lambda function: it wires configuration,
// AWS clients and shared/webhook's handler together once per cold start.
// Everything it does is in shared/webhook (STYLE.md rule 1).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/store"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "webhook:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, awsCfg, err := config.Start(context.Background(), os.Getenv, config.LoadWebhook)
	if err != nil {
		return err
	}
	var sm secret.SecretsManager
	if cfg.SecretARN != "" {
		sm = secretsmanager.NewFromConfig(awsCfg)
	}
	// Read per delivery through a TTL cache: a secret written after this
	// cold start (make app) or rotated is picked up; none yet answers 503.
	secrets := secret.NewCache(sm, cfg.SecretARN, cfg.Secret, secret.CacheOptions{})
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{
		Shards:       cfg.SweepShards,
		RecordTTL:    cfg.RecordTTL,
		PendingGrace: cfg.PendingGrace,
		QueuedGrace:  cfg.QueuedGrace,
	})
	q := queue.New(sqs.NewFromConfig(awsCfg), cfg.ClaimsQueueURL)
	h, err := webhook.New(webhook.Config{
		CurrentSecrets:  secrets.Rotation,
		Pools:           cfg.Pools,
		AllowedOwners:   cfg.AllowedOwners,
		MaxBodyBytes:    cfg.MaxBodyBytes,
		MaxReplacements: cfg.MaxReplacements,
		MaxAge:          cfg.MaxAge,
		Store:           st,
		Queue:           q,
		Now:             time.Now,
		Logger:          obs.NewLogger(os.Stdout, cfg.LogLevel),
		// No line of its own: the delivery's decision line carries its metrics.
		Metrics: obs.NewMetricsIn(cfg.MetricsNamespace, io.Discard, map[string]string{"function": "webhook"}, time.Now),
	})
	if err != nil {
		return err
	}
	lambda.Start(h.Handle)
	return nil
}

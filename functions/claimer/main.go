// Command claimer is the claimer Lambda function (SQS event source with
// ReportBatchItemFailures): it wires configuration, the GitHub App client,
// AWS clients and shared/claim's handler together once per cold start, so
// warm invocations reuse every client. Everything it does is in
// shared/claim (STYLE.md rule 1).
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "claimer:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, awsCfg, err := config.Start(context.Background(), os.Getenv, config.LoadClaimer)
	if err != nil {
		return err
	}
	policy := backoff.Policy{Ladder: cfg.Ladder, Jitter: backoff.DefaultJitter, MaxAge: cfg.MaxAge}
	if err := policy.Validate(); err != nil {
		return fmt.Errorf("retry policy: %w", err)
	}
	var sm secret.SecretsManager
	if cfg.PrivateKeyARN != "" {
		sm = secretsmanager.NewFromConfig(awsCfg)
	}
	// The key is read when needed, through a TTL cache: a function started
	// before make app wrote it keeps running (and waits) instead of failing.
	key := secret.NewCache(sm, cfg.PrivateKeyARN, cfg.PrivateKey, secret.CacheOptions{})
	log := obs.NewLogger(os.Stdout, cfg.LogLevel)

	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{
		Shards:       cfg.SweepShards,
		RecordTTL:    cfg.RecordTTL,
		PendingGrace: cfg.PendingGrace,
		QueuedGrace:  cfg.QueuedGrace,
	})
	rates := ratelimit.NewTracker(st, ratelimit.DefaultPersistRule(), time.Now)
	gh, err := ghapp.NewKeyed(ghapp.Config{
		AppID:   cfg.AppID,
		BaseURL: cfg.GitHubAPIURL,
		Wrap: func(installationID int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, installationID, rates, time.Now)
		},
	}, key.Bytes)
	if err != nil {
		return err
	}
	sqsClient := sqs.NewFromConfig(awsCfg)
	claims := queue.New(sqsClient, cfg.ClaimsQueueURL)
	provisioners := provision.Registry{
		pool.ProvisionerEC2:      provision.NewEC2(ec2.NewFromConfig(awsCfg), ssm.NewFromConfig(awsCfg), log),
		pool.ProvisionerDispatch: provision.NewDispatch(sqsClient, log),
	}
	c, err := claim.New(claim.Config{
		Pools:       cfg.Pools,
		Lease:       cfg.Lease,
		Store:       st,
		Queue:       claims,
		GitHub:      gh,
		Provisioner: provisioners,
		Policy:      policy,
		Rates:       rates,
		Now:         time.Now,
		Logger:      log,
		Metrics:     obs.NewMetricsIn(cfg.MetricsNamespace, os.Stdout, map[string]string{"function": "claimer"}, time.Now),
	})
	if err != nil {
		return err
	}
	lambda.Start(claim.Hold(c.Handle, gh.Ready, claims, claim.DefaultHoldDelay, log))
	return nil
}

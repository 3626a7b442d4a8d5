// Command redeliverer is the scheduled Lambda function that asks GitHub to
// redeliver the workflow_job webhook deliveries that never reached us (see
// shared/redeliver). It only wires: configuration, clients built once per
// cold start, lambda.Start.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/redeliver"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "redeliverer:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.LoadRedeliverer(os.Getenv)
	if err != nil {
		return err
	}
	awsCfg, err := awsenv.Load(os.Getenv)
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	var sm secret.SecretsManager
	if cfg.PrivateKeyARN != "" {
		sm = secretsmanager.NewFromConfig(awsCfg)
	}
	// The key is read when needed, through a TTL cache, as the claimer and
	// reclaimer read it: deployed before make app, a pass fails (and says
	// so) instead of the function failing at init.
	key := secret.NewCache(sm, cfg.PrivateKeyARN, cfg.PrivateKey, secret.CacheOptions{})
	budget := &redeliver.AppBudget{}
	gh, err := ghapp.NewKeyed(ghapp.Config{
		AppID:   cfg.AppID,
		BaseURL: cfg.GitHubAPIURL,
		WrapApp: func(base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, 0, budget, time.Now)
		},
	}, key.Bytes)
	if err != nil {
		return err
	}
	r, err := redeliver.New(redeliver.Config{
		GitHub:       gh,
		Store:        store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{}),
		Rate:         budget.Reading,
		Window:       cfg.Window,
		MaxAttempts:  cfg.MaxAttempts,
		MinRemaining: cfg.MinRemaining,
		Now:          time.Now,
		Log:          obs.NewLogger(os.Stdout, cfg.LogLevel),
		Metrics:      obs.NewMetricsIn(cfg.MetricsNamespace, os.Stdout, map[string]string{"function": "redeliverer"}, time.Now),
	})
	if err != nil {
		return err
	}
	lambda.Start(r.Handle)
	return nil
}

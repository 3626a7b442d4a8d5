// Command janitor is the scheduled Lambda function that removes runners,
// machines and JIT configs that outlived their job (see shared/janitor).
// It only wires: configuration, clients built once per cold start,
// lambda.Start.
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

	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "janitor:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, awsCfg, err := config.Start(context.Background(), os.Getenv, config.LoadJanitor)
	if err != nil {
		return err
	}
	var sm secret.SecretsManager
	if cfg.PrivateKeyARN != "" {
		sm = secretsmanager.NewFromConfig(awsCfg)
	}
	// The key is read when needed, through a TTL cache, as the claimer and
	// reclaimer read it: deployed before make app, the janitor's passes
	// fail (and say so) instead of the function failing at init.
	key := secret.NewCache(sm, cfg.PrivateKeyARN, cfg.PrivateKey, secret.CacheOptions{})
	log := obs.NewLogger(os.Stdout, cfg.LogLevel)
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{})
	// The janitor reads the shared rate readings and never writes one: the
	// tracker's Persist is not called (its table access is GetItem only).
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
	instances, parameters := ec2.NewFromConfig(awsCfg), ssm.NewFromConfig(awsCfg)
	j, err := janitor.New(janitor.Config{
		Store:  st,
		GitHub: gh,
		Rates:  rates,
		Provisioner: provision.Registry{
			pool.ProvisionerEC2:      provision.NewEC2(instances, parameters, log),
			pool.ProvisionerDispatch: provision.NewDispatch(sqs.NewFromConfig(awsCfg), log),
		},
		Leftovers:    provision.Leftovers{Instances: instances, Parameters: parameters},
		Pools:        cfg.Pools,
		UnknownGrace: cfg.UnknownGrace,
		ConfigGrace:  cfg.ConfigGrace,
		MaxCalls:     cfg.MaxCalls,
		Now:          time.Now,
		Logger:       log,
		Metrics:      obs.NewMetricsIn(cfg.MetricsNamespace, os.Stdout, map[string]string{"function": "janitor"}, time.Now),
	})
	if err != nil {
		return err
	}
	lambda.Start(j.Handle)
	return nil
}

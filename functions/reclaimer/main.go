// Command reclaimer is the scheduled Lambda function that re-enqueues job
// records nobody is moving any more, and removes the runner and machine
// of an attempt it abandons (see shared/reclaim). It only wires:
// configuration, clients built once per cold start, lambda.Start.
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
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "reclaimer:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, awsCfg, err := config.Start(context.Background(), os.Getenv, config.LoadReclaimer)
	if err != nil {
		return err
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
		PendingGrace: cfg.PendingGrace,
		QueuedGrace:  cfg.QueuedGrace,
		RecordTTL:    cfg.RecordTTL,
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
	r, err := reclaim.New(reclaim.Config{
		Store:             st,
		Queue:             queue.New(sqsClient, cfg.ClaimsQueueURL),
		MaxAge:            cfg.MaxAge,
		MaxReplacements:   cfg.MaxReplacements,
		MaxLivenessChecks: cfg.LivenessMaxChecks,
		Budget:            cfg.Budget,
		Now:               time.Now,
		Logger:            log,
		Metrics:           obs.NewMetricsIn(cfg.MetricsNamespace, os.Stdout, map[string]string{"function": "reclaimer"}, time.Now),
		GitHub:            gh,
		Rates:             rates,
		Pools:             cfg.Pools,
		Provisioner: cleanup(provision.Registry{
			pool.ProvisionerEC2:      provision.NewEC2(ec2.NewFromConfig(awsCfg), ssm.NewFromConfig(awsCfg), log),
			pool.ProvisionerDispatch: provision.NewDispatch(sqsClient, log),
		}),
	})
	if err != nil {
		return err
	}
	lambda.Start(r.Handle)
	return nil
}

// cleanup adapts the provisioners to the reclaimer's port.
func cleanup(reg provision.Registry) reclaim.Provisioner {
	return reclaim.ProvisionerFunc(func(ctx context.Context, l reclaim.Leftover) error {
		return reg.Cleanup(ctx, provision.Request{JobID: l.JobID, RunID: l.RunID, Repo: l.Repo, Pool: l.Pool, RunnerName: l.RunnerName, KeepMachines: l.KeepMachines})
	})
}

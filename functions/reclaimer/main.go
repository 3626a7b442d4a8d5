// Command reclaimer is the scheduled Lambda function that re-enqueues job
// records nobody is moving any more (see shared/reclaim). It only wires:
// configuration, clients built once per cold start, lambda.Start.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/store"
)

func main() {
	cfg, err := config.LoadReclaimer(os.Getenv)
	log := obs.NewLogger(os.Stdout, cfg.LogLevel)
	if err != nil {
		log.Error("invalid configuration", slog.Any("err", err))
		os.Exit(1)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Error("load AWS configuration", slog.Any("err", err))
		os.Exit(1)
	}
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{
		Shards:       cfg.SweepShards,
		PendingGrace: cfg.PendingGrace,
		QueuedGrace:  cfg.QueuedGrace,
		RecordTTL:    cfg.RecordTTL,
	})
	q := queue.New(sqs.NewFromConfig(awsCfg), cfg.ClaimsQueueURL)
	r := reclaim.New(st, q, reclaim.Config{
		MaxAge:  cfg.MaxAge,
		Budget:  cfg.Budget,
		Now:     time.Now,
		Logger:  log,
		Metrics: obs.NewMetrics(os.Stdout, map[string]string{"function": "reclaimer"}, time.Now),
	})
	lambda.Start(r.Handle)
}

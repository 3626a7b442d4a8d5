// Package redeliverer wires the redeliverer function (scheduled): the App
// client on the App's own budget (wire/app), the table of its redeliver#
// items, the logger and the metrics, built once per cold start around
// shared/redeliver. functions/redeliverer's main.go calls New with the
// process's environment; tests call it with theirs.
//
// Decision: it reads its configuration before the AWS config and without
// config.Start, as it takes no pools: RUNNER_POOLS_PARAMETER is never read.
// It must never import EC2 or SQS (it ships neither).
package redeliverer

import (
	"context"
	"fmt"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/redeliver"
	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/app"
)

// New wires the redeliverer from env. A configuration error names the
// variable.
func New(_ context.Context, env wire.Env) (*redeliver.Redeliverer, error) {
	if err := env.Check(); err != nil {
		return nil, err
	}
	cfg, err := config.LoadRedeliverer(env.Getenv)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsenv.Load(env.Getenv)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	awsCfg = env.AWS(awsCfg)
	budget := &redeliver.AppBudget{}
	gh, err := app.Own(env, awsCfg, cfg.GitHubApp, budget)
	if err != nil {
		return nil, err
	}
	return redeliver.New(redeliver.Config{
		GitHub:       gh,
		Store:        wire.DefaultStore(awsCfg, cfg.TableName),
		Rate:         budget.Reading,
		Window:       cfg.Window,
		MaxAttempts:  cfg.MaxAttempts,
		MinRemaining: cfg.MinRemaining,
		Now:          env.Now,
		Log:          env.Logger(cfg.LogLevel),
		Metrics:      env.Metrics(cfg.MetricsNamespace, "redeliverer", env.Out),
	})
}

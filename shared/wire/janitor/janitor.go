// Package janitor wires the janitor function (scheduled): the job table
// (records read only; the installations' shared rate readings read and
// written), the GitHub App client and its rate tracker (wire/app), the
// provisioners and the leftover inventories, the logger and the metrics,
// built once per cold start around shared/janitor. functions/janitor's
// main.go calls New with the process's environment; tests call it with
// theirs.
package janitor

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/app"
	"github.com/ghclaim/ghclaim/shared/wire/provisioners"
)

// New wires the janitor from env. A configuration error names the
// variable.
func New(ctx context.Context, env wire.Env) (*janitor.Janitor, error) {
	if err := env.Check(); err != nil {
		return nil, err
	}
	cfg, awsCfg, err := config.Start(ctx, env.Getenv, config.LoadJanitor)
	if err != nil {
		return nil, err
	}
	awsCfg = env.AWS(awsCfg)
	log := env.Logger(cfg.LogLevel)
	st := wire.DefaultStore(awsCfg, cfg.TableName)
	gh, rates, err := app.Tracked(env, awsCfg, cfg.GitHubApp, st)
	if err != nil {
		return nil, err
	}
	reg, leftovers := provisioners.New(awsCfg, env, sqs.NewFromConfig(awsCfg), log, cfg.Stack)
	return janitor.New(janitor.Config{
		Store:        st,
		GitHub:       gh,
		Rates:        rates,
		Provisioner:  reg,
		Leftovers:    leftovers,
		Pools:        cfg.Pools,
		UnknownGrace: cfg.UnknownGrace,
		ConfigGrace:  cfg.ConfigGrace,
		MaxCalls:     cfg.MaxCalls,
		Now:          env.Now,
		Logger:       log,
		Metrics:      env.Metrics(cfg.MetricsNamespace, "janitor", env.Out),
	})
}

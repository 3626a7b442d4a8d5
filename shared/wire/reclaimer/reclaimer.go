// Package reclaimer wires the reclaimer function (scheduled): the job
// table, the claims queue, the GitHub App client and its rate tracker
// (wire/app), the provisioners that remove an abandoned attempt's runner
// and machine, the logger and the metrics, built once per cold start
// around shared/reclaim. functions/reclaimer's main.go calls New with the
// process's environment; tests call it with theirs.
package reclaimer

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/app"
	"github.com/ghclaim/ghclaim/shared/wire/provisioners"
)

// New wires the reclaimer from env. A configuration error names the
// variable.
func New(ctx context.Context, env wire.Env) (*reclaim.Reclaimer, error) {
	if err := env.Check(); err != nil {
		return nil, err
	}
	cfg, awsCfg, err := config.Start(ctx, env.Getenv, config.LoadReclaimer)
	if err != nil {
		return nil, err
	}
	awsCfg = env.AWS(awsCfg)
	log := env.Logger(cfg.LogLevel)
	st := wire.Store(awsCfg, cfg.Common)
	if err := st.ReadSweepFrom(cfg.SweepIndex); err != nil {
		return nil, err // config.LoadReclaimer allows only the names it takes
	}
	gh, rates, err := app.Tracked(env, awsCfg, cfg.GitHubApp, st)
	if err != nil {
		return nil, err
	}
	sqsClient := sqs.NewFromConfig(awsCfg)
	reg, _ := provisioners.New(awsCfg, env, sqsClient, log, cfg.Stack)
	return reclaim.New(reclaim.Config{
		Store:             st,
		Queue:             queue.New(sqsClient, cfg.ClaimsQueueURL),
		MaxAge:            cfg.MaxAge,
		MaxReplacements:   cfg.MaxReplacements,
		MaxLivenessChecks: cfg.LivenessMaxChecks,
		Budget:            cfg.Budget,
		Now:               env.Now,
		Logger:            log,
		Metrics:           env.Metrics(cfg.MetricsNamespace, "reclaimer", env.Out),
		GitHub:            gh,
		Rates:             rates,
		Pools:             cfg.Pools,
		Provisioner:       cleanup(reg),
	})
}

// cleanup adapts the provisioners to the reclaimer's port.
func cleanup(reg provision.Registry) reclaim.Provisioner {
	return reclaim.ProvisionerFunc(func(ctx context.Context, l reclaim.Leftover) error {
		return reg.Cleanup(ctx, provision.Request{JobID: l.JobID, RunID: l.RunID, Repo: l.Repo, Pool: l.Pool, RunnerName: l.RunnerName, KeepMachines: l.KeepMachines})
	})
}

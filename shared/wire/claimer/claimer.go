// Package claimer wires the claimer function (SQS event source with
// ReportBatchItemFailures): configuration, the retry policy, the job
// table, the GitHub App client and its rate tracker (wire/app), the claims
// queue, the provisioners, the logger and the metrics, built once per
// cold start around shared/claim's handler, held while the App key is
// missing (claim.Hold). functions/claimer's main.go calls New with the
// process's environment; tests call it with theirs.
package claimer

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/app"
	"github.com/ghclaim/ghclaim/shared/wire/provisioners"
)

// New wires the claimer's handler from env. A configuration error names
// the variable.
func New(ctx context.Context, env wire.Env) (claim.Handler, error) {
	if err := env.Check(); err != nil {
		return nil, err
	}
	cfg, awsCfg, err := config.Start(ctx, env.Getenv, config.LoadClaimer)
	if err != nil {
		return nil, err
	}
	awsCfg = env.AWS(awsCfg)
	policy := backoff.Policy{Ladder: cfg.Ladder, Jitter: backoff.DefaultJitter, MaxAge: cfg.MaxAge}
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("retry policy: %w", err)
	}
	log := env.Logger(cfg.LogLevel)
	st := wire.Store(awsCfg, cfg.Common)
	gh, rates, err := app.Tracked(env, awsCfg, cfg.GitHubApp, st)
	if err != nil {
		return nil, err
	}
	sqsClient := sqs.NewFromConfig(awsCfg)
	claims := queue.New(sqsClient, cfg.ClaimsQueueURL)
	reg, _ := provisioners.New(awsCfg, env, sqsClient, log, cfg.Stack)
	c, err := claim.New(claim.Config{
		Pools:       cfg.Pools,
		Lease:       cfg.Lease,
		Store:       st,
		Queue:       claims,
		GitHub:      gh,
		Provisioner: reg,
		Policy:      policy,
		Rates:       rates,
		Now:         env.Now,
		Logger:      log,
		Metrics:     env.Metrics(cfg.MetricsNamespace, "claimer", env.Out),
	})
	if err != nil {
		return nil, err
	}
	return claim.Hold(c.Handle, gh.Ready, claims, claim.DefaultHoldDelay, log), nil
}

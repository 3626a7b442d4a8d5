// Package wire is what the five functions' wirings share: the Env a
// function is wired from (its environment, its output, its clock, the
// client options a test substitutes), the TTL secret cache every function
// reads its secret through, the job table, the logger and the metrics.
// Each function's wiring is a package of its own beside this one
// (wire/webhook, wire/claimer, wire/reclaimer, wire/janitor,
// wire/redeliverer), which its main.go calls and its tests use, so a test
// drives the handler the function ships and never a copy of its wiring.
//
// Decisions:
//   - One package per function, not one package with five functions: a
//     Go binary links every package it imports (their init and package
//     variables), so a shared package that built the EC2 provisioner or
//     the GitHub App client would put EC2 and go-github into the webhook's
//     bootstrap. This package imports only what all five use; the App
//     client lives in wire/app (four functions use it), the provisioners
//     are built in the three wirings that use them. infra/contract's
//     TestFunctionsShipOnlyTheirServices pins each bootstrap's AWS
//     services.
//   - An Env is what a test substitutes and nothing more: the AWS endpoint
//     and credentials come through Getenv as on Lambda (AWS_ENDPOINT_URL),
//     so a test wires the real SDK clients against the emulator.
//
// It must never hold logic of the functions (that is in their shared/
// packages) nor log anything itself.
package wire

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
	"github.com/ghclaim/ghclaim/shared/store"
)

// Env is what a function is wired from: main passes os.Getenv, os.Stdout
// and time.Now; a test passes a map, a buffer and its clock.
type Env struct {
	// Getenv reads the function's environment (config and AWS).
	Getenv config.Getenv
	// Out receives the function's log and EMF lines (Lambda ships stdout
	// to CloudWatch Logs).
	Out io.Writer
	// Now is the function's clock.
	Now clock.Func
	// SSM are options of the SSM client the provisioners write, read and
	// delete JIT configs with (a test's strict double); none in main.
	SSM []func(*ssmapi.Options)
	// HTTPClient, when set, sends every AWS request of the wired function
	// (a benchmark's counting transport); nil in main: the SDK's own. The
	// RUNNER_POOLS_PARAMETER read at start-up is not sent through it.
	HTTPClient aws.HTTPClient
}

// AWS is cfg with the function's HTTP client: Env.HTTPClient when a test
// set one, else cfg's (the SDK's own when none), handing the transport
// bodies of its own (awsenv.OwnBodies). Every wiring passes its
// aws.Config through it before building a client.
func (e Env) AWS(cfg aws.Config) aws.Config {
	if e.HTTPClient != nil {
		cfg.HTTPClient = e.HTTPClient
	}
	cfg.HTTPClient = awsenv.OwnBodies(cfg.HTTPClient)
	return cfg
}

// Check reports a field main or a test forgot.
func (e Env) Check() error {
	var errs []error
	if e.Getenv == nil {
		errs = append(errs, errors.New("wire: Env.Getenv is nil"))
	}
	if e.Out == nil {
		errs = append(errs, errors.New("wire: Env.Out is nil"))
	}
	if e.Now == nil {
		errs = append(errs, errors.New("wire: Env.Now is nil"))
	}
	return errors.Join(errs...)
}

// Logger is the function's JSON logger at level, writing to Out.
func (e Env) Logger(level string) *slog.Logger { return obs.NewLogger(e.Out, level) }

// Metrics is the function's EMF metrics in namespace, dimensioned by
// function, writing to out (the function's Out).
func (e Env) Metrics(namespace, function string, out io.Writer) *obs.Metrics {
	return obs.NewMetricsIn(namespace, out, map[string]string{"function": function}, e.Now)
}

// Secret is a secret read when needed through a TTL cache, from Secrets
// Manager when arn is set, else the literal (local runs). Read per use, not
// at start-up: a function started before make app wrote the secret keeps
// running (and waits, or answers 503) instead of failing at init, and a
// rotated secret is picked up.
//
// Each attempt of a read is bounded (SecretAttemptTimeout) unless awsCfg
// brings its own HTTP client (the webhook's is bounded already; a test's
// counts requests): an attempt stalled on a dead keep-alive connection
// after the environment was frozen is cut and retried, instead of holding
// the claimer's whole batch (it reads the App key before each) until
// Lambda times the invocation out.
func Secret(awsCfg aws.Config, arn, literal string) *secret.Cache {
	var sm secret.SecretsManager
	if arn != "" {
		if awsenv.IsDefault(awsCfg.HTTPClient) {
			awsCfg.HTTPClient = awsenv.AttemptBound(SecretAttemptTimeout)
		}
		sm = secretsapi.New(awsCfg)
	}
	return secret.NewCache(sm, arn, literal, secret.CacheOptions{})
}

// SecretAttemptTimeout bounds the wait for Secrets Manager's answer to one
// attempt of a secret's read (it answers in milliseconds).
const SecretAttemptTimeout = 3 * time.Second

// Store is the job table with the sweep and lifetime settings of c, as
// the webhook, the claimer and the reclaimer write it.
func Store(awsCfg aws.Config, c config.Common) *store.Store {
	return store.New(dynamodb.NewFromConfig(awsCfg), c.TableName, store.Options{
		Shards:       c.SweepShards,
		RecordTTL:    c.RecordTTL,
		PendingGrace: c.PendingGrace,
		QueuedGrace:  c.QueuedGrace,
	})
}

// DefaultStore is the table with the store's default options, for the
// functions that start no job record (the janitor reads records and shares
// rate readings, the redeliverer keeps its redeliver# items) and so need none of
// the sweep settings.
func DefaultStore(awsCfg aws.Config, table string) *store.Store {
	return store.New(dynamodb.NewFromConfig(awsCfg), table, store.Options{})
}

package secretscan_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/janitor"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/ratelimit"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/redeliver"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/store"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

// The functions below are functions/*/main.go's run(), line for line,
// with three substitutions a test needs: the environment is a map, "now"
// is the test's clock, and os.Stdout is the function's own buffer. The SSM
// client of the EC2 provisioner is as strict as AWS (provisiontest) and can
// be told to answer with an error that echoes the value (echoSSM). Keep
// them in step with main.go: a wiring that differs is a path not scanned.

type env map[string]string

func (e env) get(k string) string { return e[k] }

// output is one function's stdout (its log and EMF lines), safe for the
// concurrent writers of a claimer batch.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) Bytes() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Clone(o.buf.Bytes())
}

func webhookFunction(e env, now func() time.Time, stdout io.Writer) (*webhook.Handler, error) {
	cfg, awsCfg, err := config.Start(context.Background(), e.get, config.LoadWebhook)
	if err != nil {
		return nil, err
	}
	var sm secret.SecretsManager
	if cfg.SecretARN != "" {
		sm = secretsmanager.NewFromConfig(awsCfg)
	}
	secrets := secret.NewCache(sm, cfg.SecretARN, cfg.Secret, secret.CacheOptions{})
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{
		Shards:       cfg.SweepShards,
		RecordTTL:    cfg.RecordTTL,
		PendingGrace: cfg.PendingGrace,
		QueuedGrace:  cfg.QueuedGrace,
	})
	q := queue.New(sqs.NewFromConfig(awsCfg), cfg.ClaimsQueueURL)
	return webhook.New(webhook.Config{
		CurrentSecrets: secrets.Rotation,
		Pools:          cfg.Pools,
		AllowedOwners:  cfg.AllowedOwners,
		MaxBodyBytes:   cfg.MaxBodyBytes,
		Store:          st,
		Queue:          q,
		Now:            now,
		Logger:         obs.NewLogger(stdout, cfg.LogLevel),
	})
}

func claimerFunction(e env, now func() time.Time, stdout io.Writer, ssmOpts ...func(*ssm.Options)) (claim.Handler, error) {
	cfg, awsCfg, err := config.Start(context.Background(), e.get, config.LoadClaimer)
	if err != nil {
		return nil, err
	}
	policy := backoff.Policy{Ladder: cfg.Ladder, Jitter: backoff.DefaultJitter, MaxAge: cfg.MaxAge}
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("retry policy: %w", err)
	}
	var sm secret.SecretsManager
	if cfg.PrivateKeyARN != "" {
		sm = secretsmanager.NewFromConfig(awsCfg)
	}
	key := secret.NewCache(sm, cfg.PrivateKeyARN, cfg.PrivateKey, secret.CacheOptions{})
	log := obs.NewLogger(stdout, cfg.LogLevel)
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{
		Shards:       cfg.SweepShards,
		RecordTTL:    cfg.RecordTTL,
		PendingGrace: cfg.PendingGrace,
		QueuedGrace:  cfg.QueuedGrace,
	})
	rates := ratelimit.NewTracker(st, ratelimit.DefaultPersistRule(), now)
	gh, err := ghapp.NewKeyed(ghapp.Config{
		AppID:   cfg.AppID,
		BaseURL: cfg.GitHubAPIURL,
		Wrap: func(installationID int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, installationID, rates, now)
		},
	}, key.Bytes)
	if err != nil {
		return nil, err
	}
	sqsClient := sqs.NewFromConfig(awsCfg)
	claims := queue.New(sqsClient, cfg.ClaimsQueueURL)
	provisioners := provision.Registry{
		pool.ProvisionerEC2:      provision.NewEC2(ec2.NewFromConfig(awsCfg), ssm.NewFromConfig(awsCfg, ssmOpts...), log),
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
		Now:         now,
		Logger:      log,
		Metrics:     obs.NewMetricsIn(cfg.MetricsNamespace, stdout, map[string]string{"function": "claimer"}, now),
	})
	if err != nil {
		return nil, err
	}
	return claim.Hold(c.Handle, gh.Ready, claims, claim.DefaultHoldDelay, log), nil
}

func reclaimerFunction(e env, now func() time.Time, stdout io.Writer) (*reclaim.Reclaimer, error) {
	cfg, awsCfg, err := config.Start(context.Background(), e.get, config.LoadReclaimer)
	if err != nil {
		return nil, err
	}
	var sm secret.SecretsManager
	if cfg.PrivateKeyARN != "" {
		sm = secretsmanager.NewFromConfig(awsCfg)
	}
	key := secret.NewCache(sm, cfg.PrivateKeyARN, cfg.PrivateKey, secret.CacheOptions{})
	log := obs.NewLogger(stdout, cfg.LogLevel)
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{
		Shards:       cfg.SweepShards,
		PendingGrace: cfg.PendingGrace,
		QueuedGrace:  cfg.QueuedGrace,
		RecordTTL:    cfg.RecordTTL,
	})
	rates := ratelimit.NewTracker(st, ratelimit.DefaultPersistRule(), now)
	gh, err := ghapp.NewKeyed(ghapp.Config{
		AppID:   cfg.AppID,
		BaseURL: cfg.GitHubAPIURL,
		Wrap: func(installationID int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, installationID, rates, now)
		},
	}, key.Bytes)
	if err != nil {
		return nil, err
	}
	sqsClient := sqs.NewFromConfig(awsCfg)
	reg := provision.Registry{
		pool.ProvisionerEC2:      provision.NewEC2(ec2.NewFromConfig(awsCfg), ssm.NewFromConfig(awsCfg), log),
		pool.ProvisionerDispatch: provision.NewDispatch(sqsClient, log),
	}
	return reclaim.New(reclaim.Config{
		Store:             st,
		Queue:             queue.New(sqsClient, cfg.ClaimsQueueURL),
		MaxAge:            cfg.MaxAge,
		MaxReplacements:   cfg.MaxReplacements,
		MaxLivenessChecks: cfg.LivenessMaxChecks,
		Budget:            cfg.Budget,
		Now:               now,
		Logger:            log,
		Metrics:           obs.NewMetricsIn(cfg.MetricsNamespace, stdout, map[string]string{"function": "reclaimer"}, now),
		GitHub:            gh,
		Rates:             rates,
		Pools:             cfg.Pools,
		Provisioner: reclaim.ProvisionerFunc(func(ctx context.Context, l reclaim.Leftover) error {
			return reg.Cleanup(ctx, provision.Request{JobID: l.JobID, RunID: l.RunID, Repo: l.Repo, Pool: l.Pool, RunnerName: l.RunnerName, KeepMachines: l.KeepMachines})
		}),
	})
}

func janitorFunction(e env, now func() time.Time, stdout io.Writer) (*janitor.Janitor, error) {
	cfg, awsCfg, err := config.Start(context.Background(), e.get, config.LoadJanitor)
	if err != nil {
		return nil, err
	}
	var sm secret.SecretsManager
	if cfg.PrivateKeyARN != "" {
		sm = secretsmanager.NewFromConfig(awsCfg)
	}
	key := secret.NewCache(sm, cfg.PrivateKeyARN, cfg.PrivateKey, secret.CacheOptions{})
	log := obs.NewLogger(stdout, cfg.LogLevel)
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{})
	rates := ratelimit.NewTracker(st, ratelimit.DefaultPersistRule(), now)
	gh, err := ghapp.NewKeyed(ghapp.Config{
		AppID:   cfg.AppID,
		BaseURL: cfg.GitHubAPIURL,
		Wrap: func(installationID int64, base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, installationID, rates, now)
		},
	}, key.Bytes)
	if err != nil {
		return nil, err
	}
	instances, parameters := ec2.NewFromConfig(awsCfg), ssm.NewFromConfig(awsCfg)
	return janitor.New(janitor.Config{
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
		Now:          now,
		Logger:       log,
		Metrics:      obs.NewMetricsIn(cfg.MetricsNamespace, stdout, map[string]string{"function": "janitor"}, now),
	})
}

func redelivererFunction(e env, now func() time.Time, stdout io.Writer) (*redeliver.Redeliverer, error) {
	cfg, awsCfg, err := config.Start(context.Background(), e.get, config.LoadRedeliverer)
	if err != nil {
		return nil, err
	}
	var sm secret.SecretsManager
	if cfg.PrivateKeyARN != "" {
		sm = secretsmanager.NewFromConfig(awsCfg)
	}
	key := secret.NewCache(sm, cfg.PrivateKeyARN, cfg.PrivateKey, secret.CacheOptions{})
	budget := &redeliver.AppBudget{}
	gh, err := ghapp.NewKeyed(ghapp.Config{
		AppID:   cfg.AppID,
		BaseURL: cfg.GitHubAPIURL,
		WrapApp: func(base http.RoundTripper) http.RoundTripper {
			return ratelimit.NewTransport(base, 0, budget, now)
		},
	}, key.Bytes)
	if err != nil {
		return nil, err
	}
	return redeliver.New(redeliver.Config{
		GitHub:       gh,
		Store:        store.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, store.Options{}),
		Rate:         budget.Reading,
		Window:       cfg.Window,
		MaxAttempts:  cfg.MaxAttempts,
		MinRemaining: cfg.MinRemaining,
		Now:          now,
		Log:          obs.NewLogger(stdout, cfg.LogLevel),
		Metrics:      obs.NewMetricsIn(cfg.MetricsNamespace, stdout, map[string]string{"function": "redeliverer"}, now),
	})
}

// echoSSM is an ssm.Options function: while armed, a PutParameter is
// answered with a 400 ValidationException whose message quotes the value,
// the shape of AWS's "1 validation error detected: Value '…' at '…'"
// messages, so the test sees what the functions do with an AWS error that
// carries the JIT config.
type echoSSM struct {
	mu    sync.Mutex
	armed bool
}

func (e *echoSSM) arm(on bool) { e.mu.Lock(); e.armed = on; e.mu.Unlock() }

func (e *echoSSM) option(o *ssm.Options) {
	next := o.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	o.HTTPClient = echoClient{e: e, next: next}
}

type echoClient struct {
	e    *echoSSM
	next ssm.HTTPClient
}

func (c echoClient) Do(req *http.Request) (*http.Response, error) {
	c.e.mu.Lock()
	armed := c.e.armed
	c.e.mu.Unlock()
	if !armed || req.Header.Get("X-Amz-Target") != "AmazonSSM.PutParameter" || req.Body == nil {
		return c.next.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var in struct{ Value string }
	_ = json.Unmarshal(body, &in)
	msg := "1 validation error detected: Value '" + in.Value + "' at 'value' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[^\\x00]*$"
	out, _ := json.Marshal(map[string]string{"__type": "ValidationException", "message": msg})
	return &http.Response{
		Status: "400 Bad Request", StatusCode: http.StatusBadRequest, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/x-amz-json-1.1"}, "X-Amzn-Requestid": {"00000000-0000-4000-8000-secretscan00"}},
		Body:    io.NopCloser(strings.NewReader(string(out))),
		Request: req, ContentLength: int64(len(out)),
	}, nil
}

// strict is the SSM option list of the claimer in this test.
func strict(e *echoSSM) []func(*ssm.Options) {
	return []func(*ssm.Options){provisiontest.StrictSSM, e.option}
}

// sqsEvent turns received messages into the claimer's event.
func sqsEvent(queueARN string, msgs []sqsMessage) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: m.id, ReceiptHandle: m.receipt, Body: m.body,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs", EventSourceARN: queueARN, AWSRegion: "us-east-1",
		})
	}
	return ev
}

type sqsMessage struct{ id, receipt, body string }

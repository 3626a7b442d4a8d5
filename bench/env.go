package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/store"
	"github.com/ghclaim/ghclaim/shared/wire"
)

// Env is one deployed copy of template.yaml's data plane on the emulator,
// with SDK clients that count every request they send.
type Env struct {
	Stack *emulator.Stack
	// AWS is the counted configuration every client of the scenario uses;
	// Raw the same without the Counter (set-up and hygiene calls).
	AWS   aws.Config
	Raw   aws.Config
	Count *Counter
	DB    *dynamodb.Client
	SQS   *sqs.Client
	Store *store.Store
	Queue *queue.Queue
}

// Deploy creates a stack named name from the template at templatePath on
// srv and returns its environment. Close deletes the stack.
func Deploy(ctx context.Context, srv *emulator.Server, templatePath, name string) (*Env, error) {
	cfg, err := srv.Config(ctx)
	if err != nil {
		return nil, err
	}
	st, err := emulator.Deploy(ctx, cfg, templatePath, name, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return NewEnv(cfg, st), nil
}

// NewEnv returns the environment of an already deployed stack; cfg is
// wrapped with a fresh Counter.
func NewEnv(cfg aws.Config, st *emulator.Stack) *Env {
	counted, c := Wrap(cfg)
	e := &Env{Stack: st, Raw: cfg, AWS: counted, Count: c}
	e.DB = dynamodb.NewFromConfig(counted)
	e.SQS = sqs.NewFromConfig(counted)
	e.Store = store.New(e.DB, st.TableName, store.Options{})
	e.Queue = queue.New(e.SQS, st.QueueURL)
	return e
}

// Function is the wire.Env a function of the stack is wired from, as
// Lambda would start it: the emulator's endpoint and the stack's resources
// (Stack.Env: table, claims queue, secrets' ARNs) in its environment, with
// vars on top, every AWS request sent through the Counter, its log and
// EMF lines formatted and discarded, the real clock.
func (e *Env) Function(vars map[string]string) wire.Env {
	all := map[string]string{
		"AWS_REGION": e.Raw.Region, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL": aws.ToString(e.Raw.BaseEndpoint),
	}
	for k, v := range e.Stack.Env() {
		all[k] = v
	}
	for k, v := range vars {
		all[k] = v
	}
	return wire.Env{
		Getenv: func(k string) string { return all[k] }, Out: io.Discard, Now: time.Now,
		HTTPClient: e.Count,
	}
}

// Close deletes the stack.
func (e *Env) Close(ctx context.Context) error { return e.Stack.Delete(ctx) }

// KeepQueueShort purges the claims queue every interval until ctx ends,
// as KeepShort does for any queue.
func (e *Env) KeepQueueShort(ctx context.Context, interval time.Duration) (stop func()) {
	return e.KeepShort(ctx, e.Stack.QueueURL, interval)
}

// KeepShort purges the queue at url every interval until ctx ends,
// through a client the Counter does not see. moto's SendMessage walks
// every message of the queue (its queue attributes are recomputed on each
// send): since the launcher's clock fix about 0.2 µs a message, from
// 10-20 µs, but a queue that only grows still makes every send slower than
// the last, and SQS has no such cost. Only scenarios that never read the
// queue use it.
func (e *Env) KeepShort(ctx context.Context, url string, interval time.Duration) (stop func()) {
	raw := sqs.NewFromConfig(e.Raw)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			_, _ = raw.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url})
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

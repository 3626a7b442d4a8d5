package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/chaos"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/random"
)

// counting is a hand-written DynamoDB and SQS that counts the calls that
// reached it.
type counting struct {
	mu    sync.Mutex
	calls int
}

func (c *counting) hit() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
}

func (c *counting) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func (c *counting) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.hit()
	return &dynamodb.GetItemOutput{}, nil
}

func (c *counting) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.hit()
	return &dynamodb.PutItemOutput{}, nil
}

func (c *counting) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.hit()
	return &dynamodb.UpdateItemOutput{}, nil
}

func (c *counting) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.hit()
	return &dynamodb.QueryOutput{}, nil
}

func (c *counting) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.hit()
	return &dynamodb.BatchGetItemOutput{}, nil
}

func (c *counting) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.hit()
	return &sqs.SendMessageOutput{}, nil
}

func (c *counting) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.hit()
	return &sqs.SendMessageBatchOutput{}, nil
}

func (c *counting) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	c.hit()
	return &sqs.DeleteMessageOutput{}, nil
}

func (c *counting) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	c.hit()
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

func (c *counting) Provision(context.Context, provision.Request) (provision.Result, error) {
	c.hit()
	return provision.Result{InstanceID: "i-0123"}, nil
}

func (c *counting) Cleanup(context.Context, provision.Request) error {
	c.hit()
	return nil
}

func (c *counting) Running(context.Context, provision.Request) (string, error) {
	c.hit()
	return "", nil
}

func (c *counting) LiveMachines(context.Context) ([]pool.Machine, error) {
	c.hit()
	return nil, nil
}

func (c *counting) Configs(context.Context, time.Time) (pool.ConfigList, error) {
	c.hit()
	return pool.ConfigList{}, nil
}

func (c *counting) DeleteConfig(context.Context, string) error {
	c.hit()
	return nil
}

// only is an injector that fails every call with kind k.
func only(k chaos.Kind) *chaos.Injector {
	return chaos.NewInjector(random.New(1), 1, map[chaos.Kind]int{k: 1})
}

// TestFaultClasses pins every injected AWS fault to the error class
// DESIGN.md gives it, through the project's own classifier: a fault of the
// wrong class would test the wrong path.
func TestFaultClasses(t *testing.T) {
	t.Parallel()
	want := map[chaos.Kind]failure.Class{
		chaos.Throttle:    failure.RateLimit,
		chaos.Server:      failure.ServerSide,
		chaos.Network:     failure.Network,
		chaos.AfterEffect: failure.Network,
		chaos.Unknown:     failure.UnknownRetryable,
		chaos.Fatal:       failure.NonRetryable,
	}
	ctx := context.Background()
	for _, k := range chaos.Kinds {
		calls := map[chaos.Target]func(*chaos.Injector, *counting) error{
			chaos.TargetDynamoDB: func(in *chaos.Injector, c *counting) error {
				_, err := (&chaos.DynamoDB{Next: c, In: in}).UpdateItem(ctx, &dynamodb.UpdateItemInput{})
				return err
			},
			chaos.TargetSQS: func(in *chaos.Injector, c *counting) error {
				_, err := (&chaos.SQS{Next: c, In: in}).SendMessage(ctx, &sqs.SendMessageInput{})
				return err
			},
			chaos.TargetProvision: func(in *chaos.Injector, c *counting) error {
				_, err := (&chaos.Provisioner{Next: c, In: in}).Provision(ctx, provision.Request{})
				return err
			},
			"janitor-ec2": func(in *chaos.Injector, c *counting) error {
				_, err := (&chaos.Leftovers{Next: c, In: in}).LiveMachines(ctx)
				return err
			},
			"janitor-ssm": func(in *chaos.Injector, c *counting) error {
				return (&chaos.Leftovers{Next: c, In: in}).DeleteConfig(ctx, "p")
			},
		}
		for target, call := range calls {
			t.Run(string(target)+"/"+string(k), func(t *testing.T) {
				t.Parallel()
				c := &counting{}
				err := call(only(k), c)
				if err == nil {
					t.Fatal("got no error, want an injected fault")
				}
				if got := failure.Classify(err).Class; got != want[k] {
					t.Errorf("class of %v: got %s, want %s", err, got, want[k])
				}
				// Only an after-effect fault lets the call through.
				wantCalls := 0
				if k == chaos.AfterEffect {
					wantCalls = 1
				}
				if c.Calls() != wantCalls {
					t.Errorf("calls that reached the service: got %d, want %d", c.Calls(), wantCalls)
				}
			})
		}
	}
}

// TestGitHubFaultClasses sends every GitHub fault through the real ghapp
// client against the fake and checks the class the claimer will see.
func TestGitHubFaultClasses(t *testing.T) {
	t.Parallel()
	key, err := chaos.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		kind    chaos.Kind
		variant int
		want    failure.Class
		// registered: the JIT call took effect although it failed.
		registered bool
	}{
		{name: "429", kind: chaos.Throttle, variant: 0, want: failure.RateLimit},
		{name: "secondary", kind: chaos.Throttle, variant: 1, want: failure.RateLimit},
		{name: "500", kind: chaos.Server, variant: 0, want: failure.ServerSide},
		{name: "503 unicorn", kind: chaos.Server, variant: 2, want: failure.ServerSide},
		{name: "reset", kind: chaos.Network, want: failure.Network},
		{name: "reset after effect", kind: chaos.AfterEffect, variant: 0, want: failure.Network, registered: true},
		{name: "502 after effect", kind: chaos.AfterEffect, variant: 1, want: failure.ServerSide, registered: true},
		{name: "504", kind: chaos.Unknown, want: failure.ServerSide},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gh := ghfake.New(ghfake.WithAppID(7))
			srv := httptest.NewServer(gh)
			t.Cleanup(srv.Close)
			client, err := ghapp.New(ghapp.Config{AppID: 7, PrivateKey: key, BaseURL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			// A first call gets the installation token, so the fault hits the JIT call.
			gh.SetJob("acme", "app", ghfake.Job{ID: 5, Status: "queued"})
			if _, err := client.JobStatus(ctx, 1, "acme", "app", 5); err != nil {
				t.Fatalf("warm-up: %v", err)
			}
			gh.Fail(ghfake.RouteAny, 1, chaos.GitHubFault(tc.kind, tc.variant))
			_, err = client.GenerateJIT(ctx, 1, ghapp.JITRequest{Scope: ghapp.ScopeRepo, Owner: "acme", Repo: "app", Name: "linux-5", Labels: []string{"self-hosted"}})
			if err == nil {
				t.Fatal("got no error, want the injected fault")
			}
			if got := failure.Classify(err).Class; got != tc.want {
				t.Errorf("class of %v: got %s, want %s", err, got, tc.want)
			}
			if _, ok := gh.RunnerByName("linux-5"); ok != tc.registered {
				t.Errorf("runner registered: got %v, want %v", ok, tc.registered)
			}
		})
	}
}

// TestInjectorRate checks that the rate is honoured and that a rate of
// zero injects nothing.
func TestInjectorRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rate float64
	}{
		{name: "off", rate: 0},
		{name: "20 %", rate: 0.2},
		{name: "always", rate: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := chaos.NewInjector(random.New(3), tc.rate, nil)
			const n = 20000
			for range n {
				in.Draw(chaos.TargetSQS, "claimer")
			}
			c := in.Counts()
			got := float64(c.TotalFaults()) / n
			if math.Abs(got-tc.rate) > 0.01 {
				t.Errorf("fault share: got %.3f, want %.2f ± 0.01", got, tc.rate)
			}
			if c.Calls[chaos.TargetSQS] != n || c.ByCaller["claimer"][chaos.TargetSQS] != n {
				t.Errorf("calls: got %d (claimer %d), want %d", c.Calls[chaos.TargetSQS], c.ByCaller["claimer"][chaos.TargetSQS], n)
			}
			if tc.rate == 1 {
				for _, k := range chaos.Kinds {
					if c.Faults[chaos.TargetSQS][k] == 0 {
						t.Errorf("kind %s never drawn", k)
					}
				}
			}
		})
	}
}

// TestKill checks a kill: the goroutine ends at the chosen call (before or
// after the call reached the service), the invocation's context is
// cancelled, and later calls of the invocation reach nothing.
func TestKill(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		after bool
		// reached is how many of the three calls reach the service.
		reached int
	}{
		{name: "before the second call", after: false, reached: 1},
		{name: "after the second call", after: true, reached: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := chaos.NewInjector(random.New(1), 0, nil)
			c := &counting{}
			db := &chaos.DynamoDB{Next: c, In: in}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			inv := chaos.NewInvocation(in, 2, tc.after, cancel)
			ctx = chaos.WithInvocation(ctx, inv)

			returned := 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range 3 {
					if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{}); err != nil {
						t.Errorf("call %d: %v", returned+1, err)
					}
					returned++
				}
			}()
			<-done
			if returned != 1 {
				t.Errorf("calls that returned to the caller: got %d, want 1", returned)
			}
			if c.Calls() != tc.reached {
				t.Errorf("calls that reached the service: got %d, want %d", c.Calls(), tc.reached)
			}
			if !inv.Killed() || ctx.Err() == nil {
				t.Errorf("killed %v, context error %v: want killed and cancelled", inv.Killed(), ctx.Err())
			}
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{}); !errors.Is(err, context.Canceled) {
				t.Errorf("call after the kill: got %v, want context.Canceled", err)
			}
			if c.Calls() != tc.reached {
				t.Errorf("a call after the kill reached the service")
			}
			if got := in.Counts().Kills; got != 1 {
				t.Errorf("kills: got %d, want 1", got)
			}
		})
	}
}

// batchRecorder is SQS accepting every entry it is sent, remembering them.
type batchRecorder struct {
	counting
	got []string
}

func (b *batchRecorder) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		b.got = append(b.got, aws.ToString(e.Id))
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + aws.ToString(e.Id))})
	}
	return out, nil
}

// TestRefusedEntries: SQS answers a SendMessageBatch 200 and refuses some
// of its entries (Failed, not the sender's fault); the refused ones are
// never sent, the rest are, and the answer names each once.
func TestRefusedEntries(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		in := chaos.NewInjector(random.New(seed), 1, map[chaos.Kind]int{}) // no whole-call fault
		next := &batchRecorder{}
		s := &chaos.SQS{Next: next, In: in}
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i := range 10 {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String("{}")})
		}
		out, err := s.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String("q"), Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Failed) == 0 || len(out.Failed)+len(out.Successful) != 10 || len(next.got) != len(out.Successful) {
			t.Fatalf("seed %d: %d failed, %d successful, %d sent: want some refused, the rest sent and answered", seed, len(out.Failed), len(out.Successful), len(next.got))
		}
		for _, f := range out.Failed {
			if f.SenderFault || slices.Contains(next.got, aws.ToString(f.Id)) {
				t.Errorf("seed %d: entry %s refused (sender fault %t) and sent %t", seed, aws.ToString(f.Id), f.SenderFault, slices.Contains(next.got, aws.ToString(f.Id)))
			}
		}
		if n := in.Counts().Faults[chaos.TargetSQS][chaos.EntryRefused]; n != len(out.Failed) {
			t.Errorf("seed %d: %d entry faults counted, %d refused", seed, n, len(out.Failed))
		}
	}
}

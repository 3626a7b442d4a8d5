// Package rig assembles the whole ghclaim stack on one machine around the real function binaries:
// an AWS emulator (moto_server, or LocalStack / any endpoint named by AWS_ENDPOINT_URL) holding
// template.yaml's table, queues and secrets; the GitHub stand-in (infra/ghfake) playing the
// App's side of GitHub on 127.0.0.1; the three `bootstrap` binaries, each execution environment
// its own AWS Lambda Runtime Interface Emulator (infra/local/rie); the webhook behind a local Function URL; the claimer fed by the SQS event source mapping; the
// reclaimer on a schedule. `make run`, `make local` and the end-to-end test all start it.
//
// Decisions:
//   - The functions' environment comes from template.yaml (Globals + each function, every Ref
//     resolved against the emulated stack and the parameters), so a variable added to the
//     template reaches the local run without anyone touching this package. Local-only settings
//     (endpoint, credentials, short leases and graces) are layered on top by Options.Env.
//   - Tuning for a fast run is configuration only: template parameters (RetryLadder, MaxAge,
//     ReclaimSchedule, …) and environment variables the functions already read. There is no
//     local code path in the functions.
//   - The GitHub App key is generated at start and stored in the stack's GitHubAppPrivateKey
//     secret, exactly where an operator puts the real one, so the claimer resolves it through
//     Secrets Manager as on AWS. The webhook secret is the one the stack generated.
//   - Runners are provisioned by the "dispatch" provisioner into a queue the rig creates: no
//     EC2 on the emulator, yet the JIT config really leaves the claimer.
//   - Building the binaries runs while the emulator starts, to keep `make run` short.
//
// It must never talk to real AWS (the emulator package guarantees static test credentials and
// an explicit endpoint), never listen beyond 127.0.0.1, and never print a secret except the
// local webhook secret, which make local prints on purpose for curl.
package rig

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/iamcheck"
	"github.com/ghclaim/ghclaim/infra/local/bootstrap"
	"github.com/ghclaim/ghclaim/infra/local/eventsource"
	"github.com/ghclaim/ghclaim/infra/local/functionurl"
	"github.com/ghclaim/ghclaim/infra/local/rie"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/store"
)

// AppID is the GitHub App id of local runs.
const AppID = 4242

// DefaultPools are the runner pools of local runs: a repository-scoped pool and an
// organisation-scoped one, both dispatching to the rig's queue.
var DefaultPools = []pool.Pool{
	{Name: "linux-x64", Labels: []string{"self-hosted", "linux", "x64"}, Scope: pool.ScopeRepo},
	{Name: "org-arm64", Labels: []string{"self-hosted", "linux", "arm64", "org"}, Scope: pool.ScopeOrg},
}

// Options configure a Rig. Zero values take the defaults.
type Options struct {
	// Root is the module root (default: found from the working directory).
	Root string
	// BinDir receives the built binaries (default bootstrap.Dir(Root), shared with the tests).
	BinDir string
	// Bootstraps are prebuilt binaries by function name, RIE a prebuilt aws-lambda-rie; nil
	// and "" build them.
	Bootstraps map[string]string
	RIE        string
	// Params override template parameters (RetryLadder, MaxAge, ReclaimSchedule, LogLevel, …).
	Params map[string]string
	// Env adds environment variables: key "*" for every function, or a function name.
	Env map[string]map[string]string
	// Timeouts override the template's function timeouts, by function name.
	Timeouts map[string]time.Duration
	// Pools are the runner pools; a pool without a provisioner dispatches to the rig's queue.
	Pools []pool.Pool
	// Claimers is the number of concurrent claimer environments (default 2).
	Claimers int
	// SweepEvery overrides the ReclaimSchedule parameter's rate.
	SweepEvery time.Duration
	// WebhookAddr and GitHubAddr are the listen addresses (default 127.0.0.1:0).
	WebhookAddr, GitHubAddr string
	// FunctionLogs receives every function's output, each line prefixed with its instance.
	FunctionLogs io.Writer
	// Log receives the rig's own diagnostics (default: discard).
	Log *slog.Logger
}

// Rig is a running local stack.
type Rig struct {
	Root      string
	Emulator  *emulator.Server
	AWS       aws.Config
	Stack     *emulator.Stack
	Functions map[string]Function // as started: template values plus local overrides

	GitHub    *ghfake.Server
	GitHubURL string

	WebhookURL    string
	WebhookSecret string

	DispatchQueueURL string
	Pools            []pool.Pool

	Store *store.Store
	SQS   *sqs.Client

	Webhook   *rie.Environment
	Claimers  []*rie.Environment
	Reclaimer *rie.Environment
	Mapping   *eventsource.SQS
	Schedule  *eventsource.Schedule
	// Redeliverer runs on Redelivery, the RedeliverySchedule parameter's rate.
	Redeliverer *rie.Environment
	Redelivery  *eventsource.Schedule

	// roles judge each function's AWS requests by its role in the
	// template (the emulator enforces no IAM): see Denied.
	roles map[string]*iamcheck.Checker

	log      *slog.Logger
	servers  []*http.Server
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	external bool
	once     sync.Once
}

// Start brings the whole stack up and starts the event sources. Close it when done.
func Start(ctx context.Context, o Options) (_ *Rig, err error) {
	r := &Rig{log: o.Log}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if o.Root == "" {
		if o.Root, err = bootstrap.ModuleRoot(); err != nil {
			return nil, err
		}
	}
	r.Root = o.Root
	if o.BinDir == "" {
		o.BinDir = bootstrap.Dir(o.Root)
	}
	if o.Claimers <= 0 {
		o.Claimers = 2
	}
	if o.Pools == nil {
		o.Pools = DefaultPools
	}
	if o.FunctionLogs == nil {
		o.FunctionLogs = io.Discard
	}
	logs := &SyncWriter{W: o.FunctionLogs}

	// Compile while the emulator starts.
	type built struct {
		paths map[string]string
		rie   string
		err   error
	}
	builds := make(chan built, 1)
	go func() {
		b := built{paths: o.Bootstraps, rie: o.RIE}
		if b.paths == nil {
			b.paths, b.err = bootstrap.Build(ctx, o.Root, o.BinDir)
		}
		if b.rie == "" && b.err == nil {
			b.rie, b.err = bootstrap.BuildRIE(ctx, o.Root, o.BinDir)
		}
		builds <- b
	}()

	r.external = emulatorIsExternal()
	if r.Emulator, err = emulator.Start(ctx); err != nil {
		<-builds
		return nil, err
	}
	if r.AWS, err = r.Emulator.Config(ctx); err != nil {
		<-builds
		return nil, err
	}
	r.SQS = sqs.NewFromConfig(r.AWS)
	stackName := emulator.StackName("local")

	// The dispatch queue stands in for the runner hosts.
	q, err := r.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(stackName + "-dispatch")})
	if err != nil {
		<-builds
		return nil, fmt.Errorf("create the dispatch queue: %w", err)
	}
	r.DispatchQueueURL = aws.ToString(q.QueueUrl)
	qa, err := r.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		<-builds
		return nil, fmt.Errorf("read the dispatch queue's ARN: %w", err)
	}
	dispatchARN := qa.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	for _, p := range o.Pools {
		if p.Provisioner.Type == "" {
			p.Provisioner = pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: r.DispatchQueueURL}
		}
		r.Pools = append(r.Pools, p)
	}
	poolsJSON, err := json.Marshal(r.Pools)
	if err != nil {
		<-builds
		return nil, fmt.Errorf("encode pools: %w", err)
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		<-builds
		return nil, fmt.Errorf("generate the GitHub App key: %w", err)
	}
	r.GitHub = ghfake.New(ghfake.WithAppID(AppID), ghfake.WithPublicKey(&key.PublicKey))
	ghAddr, err := r.serve(orDefault(o.GitHubAddr), r.GitHub)
	if err != nil {
		<-builds
		return nil, fmt.Errorf("serve the GitHub stand-in: %w", err)
	}
	r.GitHubURL = "http://" + ghAddr

	params := map[string]string{
		"GitHubAppId":  strconv.Itoa(AppID),
		"GitHubApiUrl": r.GitHubURL,
		"RunnerPools":  string(poolsJSON),
		// The claimer may send only to the dispatch queues named here.
		"DispatchQueueArns": dispatchARN,
	}
	for k, v := range o.Params {
		params[k] = v
	}
	tmpl := filepath.Join(o.Root, "template.yaml")
	if r.Stack, err = emulator.Deploy(ctx, r.AWS, tmpl, stackName, params); err != nil {
		<-builds
		return nil, err
	}
	sm := secretsmanager.NewFromConfig(r.AWS)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
		SecretId: aws.String(r.Stack.GitHubAppPrivateKeyARN), SecretString: aws.String(string(pemKey)),
	}); err != nil {
		<-builds
		return nil, fmt.Errorf("store the GitHub App key: %w", err)
	}
	sec, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(r.Stack.WebhookSecretARN)})
	if err != nil {
		<-builds
		return nil, fmt.Errorf("read the webhook secret: %w", err)
	}
	r.WebhookSecret = aws.ToString(sec.SecretString)

	if r.Functions, err = Functions(tmpl, params, stackRefs(r.Stack)); err != nil {
		<-builds
		return nil, err
	}
	for name, fn := range r.Functions {
		for k, v := range r.Emulator.Env() {
			fn.Env[k] = v
		}
		for k, v := range o.Env["*"] {
			fn.Env[k] = v
		}
		for k, v := range o.Env[name] {
			fn.Env[k] = v
		}
		if d, ok := o.Timeouts[name]; ok {
			fn.Timeout = d
		}
		// The function reaches the emulator through a proxy that refuses
		// what its role would not allow, as IAM on AWS does.
		if fn.Env[emulator.EndpointEnv], err = r.roleProxy(tmpl, fn.LogicalID, iamcheck.StackValues(r.Stack, params)); err != nil {
			<-builds
			return nil, err
		}
		r.Functions[name] = fn
	}
	shards, _ := strconv.Atoi(r.Functions["reclaimer"].Env["SWEEP_SHARDS"])
	r.Store = store.New(dynamodb.NewFromConfig(r.AWS), r.Stack.TableName, store.Options{Shards: shards})

	b := <-builds
	if b.err != nil {
		return nil, b.err
	}
	host := func(name, instance string) (*rie.Environment, error) {
		fn := r.Functions[name]
		return rie.New(rie.Config{
			Name:      stackName + "-" + fn.LogicalID,
			Bootstrap: b.paths[name],
			RIE:       b.rie,
			Env:       fn.Env,
			Timeout:   fn.Timeout,
			MemoryMB:  fn.MemoryMB,
			Output:    NewPrefixWriter(logs, instance),
		})
	}
	if r.Webhook, err = host("webhook", "webhook"); err != nil {
		return nil, err
	}
	for i := range o.Claimers {
		h, err := host("claimer", "claimer-"+strconv.Itoa(i+1))
		if err != nil {
			return nil, err
		}
		r.Claimers = append(r.Claimers, h)
	}
	if r.Reclaimer, err = host("reclaimer", "reclaimer"); err != nil {
		return nil, err
	}
	if r.Redeliverer, err = host("redeliverer", "redeliverer"); err != nil {
		return nil, err
	}

	front := &functionurl.Handler{Function: r.Webhook, Log: r.log}
	whAddr, err := r.serve(orDefault(o.WebhookAddr), front)
	if err != nil {
		return nil, fmt.Errorf("serve the webhook: %w", err)
	}
	r.WebhookURL = "http://" + whAddr + "/"

	every := o.SweepEvery
	if every <= 0 {
		sched := params["ReclaimSchedule"]
		if sched == "" {
			sched = "rate(1 minute)"
		}
		if every, err = ParseRate(sched); err != nil {
			return nil, err
		}
	}
	r.Mapping = &eventsource.SQS{API: r.SQS, QueueURL: r.Stack.QueueURL, QueueARN: r.Stack.QueueARN, BatchSize: 10, Log: r.log}
	r.Schedule = &eventsource.Schedule{Every: every, RuleARN: "arn:aws:events:us-east-1:123456789012:rule/" + stackName + "-Sweep", Log: r.log}

	redeliverSched := params["RedeliverySchedule"]
	if redeliverSched == "" {
		redeliverSched = "rate(5 minutes)"
	}
	redeliverEvery, err := ParseRate(redeliverSched)
	if err != nil {
		return nil, err
	}
	r.Redelivery = &eventsource.Schedule{Every: redeliverEvery, RuleARN: "arn:aws:events:us-east-1:123456789012:rule/" + stackName + "-Redeliver", Log: r.log}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	claimers := make([]eventsource.Invoker, len(r.Claimers))
	for i, h := range r.Claimers {
		claimers[i] = h
	}
	r.wg.Add(3)
	go func() { defer r.wg.Done(); _ = r.Mapping.Run(runCtx, claimers...) }()
	go func() { defer r.wg.Done(); _ = r.Schedule.Run(runCtx, r.Reclaimer) }()
	go func() { defer r.wg.Done(); _ = r.Redelivery.Run(runCtx, r.Redeliverer) }()
	return r, nil
}

// roleProxy serves an endpoint for function logicalID that forwards to the
// emulator what the function's role allows, and returns its URL.
func (r *Rig) roleProxy(tmpl, logicalID string, v *iamcheck.Values) (string, error) {
	p, err := iamcheck.Load(tmpl, logicalID, v)
	if err != nil {
		return "", err
	}
	target, err := url.Parse(r.Emulator.Endpoint)
	if err != nil {
		return "", fmt.Errorf("emulator endpoint: %w", err)
	}
	c := iamcheck.NewChecker(p)
	if r.roles == nil {
		r.roles = map[string]*iamcheck.Checker{}
	}
	r.roles[logicalID] = c
	addr, err := r.serve("127.0.0.1:0", iamcheck.Proxy(c, target))
	if err != nil {
		return "", fmt.Errorf("serve the %s role proxy: %w", logicalID, err)
	}
	return "http://" + addr, nil
}

// Denied returns the AWS requests the functions made that their roles in
// template.yaml would not allow (refused, as IAM would), sorted.
func (r *Rig) Denied() []string {
	var out []string
	for _, c := range r.roles {
		out = append(out, c.Denied()...)
	}
	slices.Sort(out)
	return out
}

// serve listens on addr (127.0.0.1 only) and serves h until Close.
func (r *Rig) serve(addr string, h http.Handler) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("listen address %s: local runs listen on 127.0.0.1 only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	r.servers = append(r.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), nil
}

// Close stops the event sources, the functions, the servers and the emulator it started. On an
// external emulator (LocalStack) it deletes the stack and the dispatch queue instead.
func (r *Rig) Close() {
	r.once.Do(func() {
		if r.cancel != nil {
			r.cancel()
		}
		r.wg.Wait()
		for _, srv := range r.servers {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = srv.Shutdown(ctx)
			cancel()
		}
		for _, h := range append([]*rie.Environment{r.Webhook, r.Reclaimer, r.Redeliverer}, r.Claimers...) {
			if h != nil {
				h.Close()
			}
		}
		if r.external {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if r.Stack != nil {
				if err := r.Stack.Delete(ctx); err != nil {
					r.log.Warn("delete the local stack", "error", err.Error())
				}
			}
			if r.DispatchQueueURL != "" && r.SQS != nil {
				_, _ = r.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(r.DispatchQueueURL)})
			}
			cancel()
		}
		if r.Emulator != nil {
			r.Emulator.Close()
		}
	})
}

// ClaimerIndex returns which claimer environment holds the claim message of job id right now.
func (r *Rig) ClaimerIndex(jobID int64) (int, bool) {
	return r.Mapping.Holding(func(m events.SQSMessage) bool {
		msg, err := queue.Decode(m.Body)
		return err == nil && msg.JobID == jobID
	})
}

func orDefault(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

func emulatorIsExternal() bool {
	return os.Getenv(emulator.EndpointEnv) != ""
}

// stackRefs is what a Ref in the functions' environment resolves to on the emulated stack: the
// physical ids of its resources, and the pseudo parameter AWS::StackName (the default metrics
// namespace).
func stackRefs(s *emulator.Stack) map[string]string {
	refs := map[string]string{}
	for id, phys := range s.Resources {
		refs[id] = phys
	}
	refs["Table"], refs["ClaimsQueue"] = s.TableName, s.QueueURL
	refs["WebhookSecret"], refs["GitHubAppPrivateKey"] = s.WebhookSecretARN, s.GitHubAppPrivateKeyARN
	refs["AWS::StackName"] = s.Name
	return refs
}

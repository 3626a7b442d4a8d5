package bench

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/local/eventsource"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/wire/claimer"
)

// appID is the GitHub App of the benchmark.
const appID = 4242

// ClaimTimeout is the claimer's function timeout (template.yaml).
const ClaimTimeout = 60 * time.Second

// Claims is one claimer instance as functions/claimer runs it: the
// handler from its own wiring (shared/wire/claimer) with the environment
// Lambda gives it, the GitHub App key in the stack's secret, the GitHub
// stand-in as its API, and every AWS request counted by the Env's Counter,
// fed through the real claims queue by the local SQS event source
// mapping, whose own requests are counted apart (Lambda's poller makes
// them). The pool is a dispatch pool whose queue the Counter counts apart
// (Counter.Apart): its send is the provisioning call, timed per job.
type Claims struct {
	env     *Env
	Webhook *Webhook
	GitHub  *ghfake.Server
	gh      *httptest.Server
	handle  claim.Handler
	mapping *eventsource.SQS
	// Poller counts the event source mapping's requests.
	Poller      *Counter
	DispatchURL string
	Pool        pool.Pool

	mu          sync.Mutex
	sends       []dispatchSend // provisioning calls not yet read
	provisioned map[int64]time.Time
	busy        time.Duration // time spent inside the handler
	invocations int
}

// dispatchSend is one SendMessage to the dispatch queue, as the Counter
// saw it: decoded when read, not while the claimer is timed.
type dispatchSend struct {
	at   time.Time
	body []byte
}

// NewClaims wires a claimer for env. With checkQueued the pool asks GitHub
// whether the job is still queued before claiming it.
func NewClaims(ctx context.Context, env *Env, checkQueued bool, base int64) (*Claims, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	// The App key lives where an operator puts it: the stack's secret.
	if _, err := secretsmanager.NewFromConfig(env.Raw).PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
		SecretId: aws.String(env.Stack.GitHubAppPrivateKeyARN), SecretString: aws.String(string(keyPEM)),
	}); err != nil {
		return nil, fmt.Errorf("bench: store the app key: %w", err)
	}
	// The secondary rate limit lifted: this measures our side of a
	// claim. GitHub lets one installation register 180 runners a minute
	// (900 points, 5 a POST), fewer than one instance claims here.
	fake := ghfake.New(ghfake.WithAppID(appID), ghfake.WithPublicKey(&key.PublicKey), ghfake.WithSecondaryLimit(0))
	gh := httptest.NewServer(fake)

	raw := sqs.NewFromConfig(env.Raw)
	name := fmt.Sprintf("bench-dispatch-%d", base)
	q, err := raw.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		gh.Close()
		return nil, fmt.Errorf("bench: dispatch queue: %w", err)
	}
	p := BenchPool
	p.CheckQueued = checkQueued
	p.Provisioner = pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: aws.ToString(q.QueueUrl)}
	pools, err := json.Marshal([]pool.Pool{p})
	if err != nil {
		gh.Close()
		return nil, fmt.Errorf("bench: pools: %w", err)
	}

	c := &Claims{env: env, GitHub: fake, gh: gh, DispatchURL: aws.ToString(q.QueueUrl), Pool: p, provisioned: map[int64]time.Time{}}
	env.Count.Apart(c.DispatchURL, func(at time.Time, body []byte) {
		c.mu.Lock()
		c.sends = append(c.sends, dispatchSend{at: at, body: body})
		c.mu.Unlock()
	})
	c.handle, err = claimer.New(ctx, env.Function(map[string]string{
		"RUNNER_POOLS": string(pools), "GITHUB_APP_ID": strconv.Itoa(appID), "GITHUB_API_URL": gh.URL,
	}))
	if err != nil {
		gh.Close()
		return nil, err
	}
	pollCfg, poller := Wrap(env.Raw)
	c.Poller = poller
	c.mapping = &eventsource.SQS{
		API: sqs.NewFromConfig(pollCfg), QueueURL: env.Stack.QueueURL, QueueARN: env.Stack.QueueARN,
		BatchSize: 10, Wait: time.Second,
	}
	c.Webhook, err = NewWebhook(ctx, env, []pool.Pool{p}, base)
	if err != nil {
		gh.Close()
		return nil, err
	}
	return c, nil
}

// Close stops the GitHub stand-in.
func (c *Claims) Close() { c.gh.Close() }

// Invoke is one claimer invocation, as Lambda makes it: an SQS event in,
// the batch response out, under the function's deadline.
func (c *Claims) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var ev events.SQSEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ClaimTimeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("bench-%d", time.Now().UnixNano())})
	t0 := time.Now()
	resp, err := c.handle(ctx, ev)
	d := time.Since(t0)
	c.mu.Lock()
	c.busy += d
	c.invocations++
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}

// Queue records the job with the webhook (as GitHub's queued delivery
// would) and, with checkQueued, tells the stand-in the job is queued.
func (c *Claims) Queue(ctx context.Context, id int64) error {
	if c.Pool.CheckQueued {
		c.GitHub.SetJob("octo-org", "octo-repo", ghfake.Job{ID: id, RunID: 10_000_000_000 + id, Status: "queued", Labels: c.Pool.Labels})
	}
	return c.Webhook.Handle(ctx, c.Webhook.Event(id))
}

// Poll runs one turn of the event source mapping with this instance.
func (c *Claims) Poll(ctx context.Context) error { return c.mapping.Poll(ctx, 0, c) }

// Run feeds the instance from the queue until ctx ends.
func (c *Claims) Run(ctx context.Context) { _ = c.mapping.Run(ctx, c) }

// Provisioned returns when each job's provisioning call (its dispatch
// message's send) started: the first, for a job provisioned again.
func (c *Claims) Provisioned() map[int64]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sends {
		id, err := dispatchedJob(s.body)
		if err != nil {
			continue // not a dispatch message: no job to time
		}
		if _, seen := c.provisioned[id]; !seen {
			c.provisioned[id] = s.at
		}
	}
	c.sends = c.sends[:0]
	out := make(map[int64]time.Time, len(c.provisioned))
	for k, v := range c.provisioned {
		out[k] = v
	}
	return out
}

// dispatchedJob is the job of a SendMessage request's body (the SQS JSON
// protocol) carrying a dispatch message.
func dispatchedJob(body []byte) (int64, error) {
	var in struct{ MessageBody string }
	if err := json.Unmarshal(body, &in); err != nil {
		return 0, err
	}
	var m provision.DispatchMessage
	if err := json.Unmarshal([]byte(in.MessageBody), &m); err != nil {
		return 0, err
	}
	if m.JobID == 0 {
		return 0, fmt.Errorf("bench: dispatch message without a job id")
	}
	return m.JobID, nil
}

// Busy is the time spent inside the handler and the invocations so far.
func (c *Claims) Busy() (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy, c.invocations
}

// ClaimResult is the throughput and the calls of claiming jobs.
type ClaimResult struct {
	Jobs        int  `json:"jobs"`
	CheckQueued bool `json:"check_queued"`
	// ClaimsPerS is jobs / time inside the claimer's handler (one
	// instance, batches of 10, the claimer's 4 workers): the instance's
	// capacity. WallPerS includes the mapping's polling.
	ClaimsPerS  float64 `json:"claims_per_s"`
	WallPerS    float64 `json:"wall_per_s"`
	Invocations int     `json:"invocations"`
	// GitHub requests per claimed job, by route, and in total; the token
	// requests (one per installation per hour) are apart.
	GitHubPerJob  map[string]float64 `json:"github_per_job"`
	GitHubTotal   float64            `json:"github_per_job_total"`
	GitHubFloor   int                `json:"github_floor"`
	TokenRequests int                `json:"token_requests"`
	WebhookPerJob map[string]float64 `json:"webhook_calls_per_job"`
	ClaimerPerJob map[string]float64 `json:"claimer_calls_per_job"`
	PollerPerJob  map[string]float64 `json:"poller_calls_per_job"`
	// ClaimerItems are the claimer's DynamoDB requests per job by the item
	// they are on ("job#": the job's record; "rate#": the installation's
	// shared rate reading; "other").
	ClaimerItems map[string]float64 `json:"claimer_dynamodb_by_item_per_job"`
	// RateReads and RateWrites are the claimer instance's requests on the
	// rate item in this run (all Jobs): a cost per instance and refresh,
	// not per job.
	RateReads  int `json:"rate_item_reads"`
	RateWrites int `json:"rate_item_writes"`
	// ProvisionerPerJob are the provisioner's own sends per job (the
	// dispatch queue's, counted apart: Counter.Apart), in no other figure.
	ProvisionerPerJob map[string]float64 `json:"provisioner_calls_per_job"`
	DynamoDBPerJob    float64            `json:"dynamodb_per_job"`
	SQSPerJob         float64            `json:"sqs_per_job"`
	// Units are the DynamoDB units per job, webhook to claimed.
	Units Units `json:"units_per_job"`
	// ClaimerUsage is the claimer's own requests per job (invocations are
	// added by the cost model).
	ClaimerUsage Usage `json:"-"`
	// HandlerMS is the claimer's mean invocation time; WebhookMS the
	// webhook's mean queued delivery.
	HandlerMS float64 `json:"handler_ms_mean"`
	WebhookMS float64 `json:"webhook_ms_mean"`
}

// MeasureClaims queues n jobs through the webhook, then lets one claimer
// instance claim them all through the real queue.
func MeasureClaims(ctx context.Context, c *Claims, n int) (ClaimResult, error) {
	r := ClaimResult{Jobs: n, CheckQueued: c.Pool.CheckQueued, GitHubFloor: 1}
	if c.Pool.CheckQueued {
		r.GitHubFloor = 2
	}
	stop := c.env.KeepShort(ctx, c.DispatchURL, 500*time.Millisecond)
	defer stop()
	before := c.env.Count.Snapshot()
	ids := make([]int64, n)
	t0 := time.Now()
	for i := range ids {
		ids[i] = c.Webhook.NextID()
		if err := c.Queue(ctx, ids[i]); err != nil {
			return r, err
		}
	}
	r.WebhookMS = ms(time.Since(t0) / time.Duration(n))
	afterWebhook := c.env.Count.Snapshot()
	ghBefore := c.GitHub.Stats()
	pollBefore := c.Poller.Snapshot()
	busy0, inv0 := c.Busy()
	start := time.Now()
	deadline := start.Add(3 * time.Minute)
	for {
		got := c.Provisioned()
		done := 0
		for _, id := range ids {
			if _, ok := got[id]; ok {
				done++
			}
		}
		if done == n {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("bench: %d of %d jobs claimed after 3 minutes", done, n)
		}
		if err := c.Poll(ctx); err != nil {
			return r, err
		}
	}
	wall := time.Since(start)
	busy1, inv1 := c.Busy()
	r.Invocations = inv1 - inv0
	busy := busy1 - busy0
	r.ClaimsPerS = round(float64(n)/busy.Seconds(), 1)
	r.WallPerS = round(float64(n)/wall.Seconds(), 1)
	r.HandlerMS = ms(busy / time.Duration(max(1, r.Invocations)))

	wh := afterWebhook.Since(before)
	cl := c.env.Count.Snapshot().Since(afterWebhook)
	po := c.Poller.Snapshot().Since(pollBefore)
	r.WebhookPerJob, r.ClaimerPerJob, r.PollerPerJob = perOp(wh, n), perOp(cl, n), perOp(po, n)
	all := wh
	add(&all, cl)
	add(&all, po)
	r.DynamoDBPerJob = round(float64(all.Service("DynamoDB"))/float64(n), 2)
	r.SQSPerJob = round(float64(all.Service("SQS"))/float64(n), 2)
	r.Units = Units{WRU: round(all.Units.WRU/float64(n), 2), GSIWRU: round(all.Units.GSIWRU/float64(n), 2),
		GSIWrites: round(all.Units.GSIWrites/float64(n), 2), RRU: round(all.Units.RRU/float64(n), 2)}
	r.ClaimerUsage = FromSnapshot(cl).Times(1 / float64(n))
	r.ClaimerItems = byItem(cl, n)
	r.RateReads = cl.Item(RateItem, RateReads...)
	r.RateWrites = cl.Item(RateItem, RateWrites...)
	r.ProvisionerPerJob = map[string]float64{}
	for op, k := range cl.Apart {
		r.ProvisionerPerJob[op] = round(float64(k)/float64(n), 3)
	}

	gh := c.GitHub.Stats()
	r.GitHubPerJob = map[string]float64{}
	for route, k := range gh.Calls {
		if d := k - ghBefore.Calls[route]; d > 0 {
			if route == ghfake.RouteAccessToken {
				r.TokenRequests += d
				continue
			}
			r.GitHubPerJob[route] = round(float64(d)/float64(n), 3)
			r.GitHubTotal += float64(d) / float64(n)
		}
	}
	r.GitHubTotal = round(r.GitHubTotal, 3)
	return r, nil
}

// LatencyResult is the time from a queued delivery to its provisioning call.
type LatencyResult struct {
	Jobs int     `json:"jobs"`
	Gap  float64 `json:"gap_ms"`
	Time Latency `json:"time_to_claim"`
	// Baseline is the fixed delay other runner modules put on every job
	// by default (the scale-up message's 30 s delay).
	BaselineS float64 `json:"baseline_s"`
}

// MeasureTimeToClaim delivers n queued jobs, one every gap, to the webhook
// while the mapping feeds the claimer from the real queue (long polling,
// as Lambda's pollers do), and measures each job from the start of its
// delivery to the claimer's provisioning call.
func MeasureTimeToClaim(ctx context.Context, c *Claims, n int, gap time.Duration) (LatencyResult, error) {
	r := LatencyResult{Jobs: n, Gap: ms(gap), BaselineS: 30}
	stop := c.env.KeepShort(ctx, c.DispatchURL, 500*time.Millisecond)
	defer stop()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(rctx) }()
	defer func() { cancel(); <-done }()

	sent := map[int64]time.Time{}
	for range n {
		id := c.Webhook.NextID()
		sent[id] = time.Now()
		if err := c.Queue(ctx, id); err != nil {
			return r, err
		}
		time.Sleep(gap)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got := c.Provisioned()
		var lat []time.Duration
		for id, t := range sent {
			if p, ok := got[id]; ok {
				lat = append(lat, p.Sub(t))
			}
		}
		if len(lat) == n {
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			r.Time = Summarise(lat)
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("bench: %d of %d jobs claimed a minute after the last delivery", len(lat), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

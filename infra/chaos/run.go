package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/local/eventsource"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/backoff"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/reclaim"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
	"github.com/ghclaim/ghclaim/shared/store"
)

// Config is one accounting run. Zero values take the defaults.
type Config struct {
	// Jobs is the number of workflow jobs our pools serve (N).
	Jobs int
	// FaultRate is the probability that any external call fails (0.2).
	FaultRate float64
	// KillRate is the share of claimer invocations killed at a random
	// call (0.1).
	KillRate float64
	// ForceFirst makes the first occurrence of every injected event
	// certain, whatever the draws, so a small run has each one to recover
	// from (see force.go); an injection switched off stays off.
	ForceFirst bool
	// DuplicateRate is the share of deliveries GitHub sends twice (0.15).
	DuplicateRate float64
	// Seed makes the plan and the fault draws reproducible.
	Seed uint64
	// Claimers is the number of concurrent claimer pollers (8), each one
	// Lambda instance taking batches of BatchSize (5) messages.
	Claimers, BatchSize int
	// Senders bounds concurrent webhook invocations (8).
	Senders int
	// Ramp spreads the jobs' first deliveries (N × 40 ms).
	Ramp time.Duration
	// Settle bounds the wait, after the last delivery, for every job to
	// reach a final state (3 min).
	Settle time.Duration
	// RateLimitWindow is how long one installation's budget is exhausted,
	// a third into the ramp (10 s; negative: never).
	RateLimitWindow time.Duration
	// Compressed time: the ladder (1s,2s,3s), function timeout (15 s:
	// moto under load answers in tens of milliseconds, and an invocation
	// cut short mid-claim only tests the reclaimer more), lease and the
	// queue's visibility timeout (timeout + 5 s), the store's graces (2 s
	// pending, 3 s queued), max age (10 min), reclaimer period (2 s).
	Ladder                             []time.Duration
	Lease, FunctionTimeout, Visibility time.Duration
	PendingGrace, QueuedGrace, MaxAge  time.Duration
	ReclaimEvery                       time.Duration
	// DelayScale compresses claim message delays (see Compress); 1 or 0
	// keeps them.
	DelayScale float64
	// Log receives every handler's JSON log lines (discarded when nil);
	// they are also scanned for secrets.
	Log io.Writer
	// Progress gets a line every few seconds (none when nil).
	Progress io.Writer
	// GitHub builds each claimer process's GitHub client.
	GitHub GitHubFactory

	// Faults at the machine: the share of machines that never boot (0.05)
	// and of runners that die before taking their job (0.05); negative:
	// none. BootDelay (1 s) and RunTime (1 s) are a machine's boot and a
	// job's run, each ±50 %. StartGrace is the pools' runner-start grace
	// (8 s compressed; 10 min in production).
	NeverBootRate, DieRate float64
	BootDelay, RunTime     time.Duration
	StartGrace             time.Duration
	// The webhook endpoint is down for OutageWindow (4 s; negative: never)
	// starting OutageAt (half the ramp).
	OutageWindow, OutageAt time.Duration
	// Schedules (compressed): the redeliverer every RedeliverEvery (3 s;
	// 5 min in production), asking at most RedeliverAttempts (10) per
	// delivery; the janitor every JanitorEvery (5 s; 15 min).
	RedeliverEvery, JanitorEvery time.Duration
	RedeliverAttempts            int
	// ScriptPace scales the scripts' pauses (1: a renamed job's second
	// queued within 2 s, a cancel within 3 s, another runner's take within
	// 6 s, an early job's completion within 1 s); the short test shrinks
	// them with everything else.
	ScriptPace float64
	// The rename scenario (rename.go): RenameAt after the start the linux
	// pool is renamed (same labels) for every function built from then
	// on, and RenameBackAt after the start it is named linux again (zero:
	// never, both). Running instances keep the list they were built with
	// for up to RenameLag (3 s) after each deploy.
	RenameAt, RenameBackAt, RenameLag time.Duration
}

func (c Config) withDefaults() Config {
	if c.Jobs <= 0 {
		c.Jobs = 500
	}
	if c.FaultRate < 0 {
		c.FaultRate = 0
	}
	if c.KillRate == 0 {
		c.KillRate = 0.1
	}
	if c.DuplicateRate == 0 {
		c.DuplicateRate = 0.15
	}
	if c.Claimers <= 0 {
		c.Claimers = 8
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 5
	}
	if c.Senders <= 0 {
		c.Senders = 8
	}
	if c.Ramp <= 0 {
		c.Ramp = time.Duration(c.Jobs) * 40 * time.Millisecond
	}
	if c.Settle <= 0 {
		c.Settle = 3 * time.Minute
	}
	if c.RateLimitWindow == 0 {
		c.RateLimitWindow = 10 * time.Second
	}
	if len(c.Ladder) == 0 {
		c.Ladder = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	}
	if c.FunctionTimeout <= 0 {
		c.FunctionTimeout = 15 * time.Second
	}
	if c.Lease <= 0 {
		c.Lease = c.FunctionTimeout + 5*time.Second
	}
	if c.Visibility <= 0 {
		c.Visibility = c.FunctionTimeout + 5*time.Second
	}
	if c.PendingGrace <= 0 {
		c.PendingGrace = 2 * time.Second
	}
	if c.QueuedGrace <= 0 {
		c.QueuedGrace = 3 * time.Second
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 10 * time.Minute
	}
	if c.ReclaimEvery <= 0 {
		c.ReclaimEvery = 2 * time.Second
	}
	if c.NeverBootRate == 0 {
		c.NeverBootRate = 0.05
	}
	if c.DieRate == 0 {
		c.DieRate = 0.05
	}
	if c.BootDelay <= 0 {
		c.BootDelay = time.Second
	}
	if c.RunTime <= 0 {
		c.RunTime = time.Second
	}
	if c.StartGrace <= 0 {
		c.StartGrace = 8 * time.Second
	}
	if c.OutageWindow == 0 {
		c.OutageWindow = 4 * time.Second
	}
	if c.OutageAt <= 0 {
		c.OutageAt = c.Ramp / 2
	}
	if c.RedeliverEvery <= 0 {
		c.RedeliverEvery = 3 * time.Second
	}
	if c.RedeliverAttempts <= 0 {
		c.RedeliverAttempts = 10
	}
	if c.JanitorEvery <= 0 {
		c.JanitorEvery = 5 * time.Second
	}
	if c.RenameLag <= 0 {
		c.RenameLag = 3 * time.Second
	}
	if c.ScriptPace <= 0 {
		c.ScriptPace = 1
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.GitHub == nil {
		c.GitHub = AppGitHub
	}
	return c
}

// World is where a run happens: an SDK configuration for the emulator and
// the template's stack deployed on it.
type World struct {
	AWS       aws.Config
	TableName string
	QueueURL  string
}

// The functions, as callers in the figures.
const (
	fnWebhook   = "webhook"
	fnClaimer   = "claimer"
	fnReclaimer = "reclaimer"
)

// Stack is the deployment name a run's machines and JIT configs are
// tagged with (GHCLAIM_STACK), and the one its janitor lists.
const Stack = "ghclaim-chaos"

// Secret is the webhook secret of a run.
var Secret = []byte("chaos-webhook-secret")

const appID = 4711

// Pools of a run: EC2 machines for linux jobs, a dispatch queue for gpu jobs.
const (
	PoolEC2      = "linux"
	PoolDispatch = "gpu"
)

// run is one accounting run in progress.
type run struct {
	cfg    Config
	world  World
	inj    *Injector
	logs   *logSink
	log    *slog.Logger
	ddb    *dynamodb.Client
	sqs    *sqs.Client
	ec2    *ec2api.Client
	stores map[string]*store.Store // per function: faults below it
	queues map[string]*queue.Queue // per function: faults below it
	// deploys is RUNNER_POOLS as deployed now, and before (rename.go).
	deploys deploys
	gh      *ghfake.Server
	ghURL   string
	appKey  []byte
	pools   []pool.Pool // the pools at the start (rename.go changes the deployed ones)
	reg     provision.Registry
	plans   []*plan
	// machines are the runner registrations (ids) a machine was
	// provisioned for, and the jobs that got one.
	machines machineSet
	fleet    *fleet
	simCtx   context.Context // the machines' lifetime
	byJob    map[int64]*plan
	down     atomic.Bool // the webhook endpoint is unreachable
	dups     dupSampler

	closers []func()
	sem     chan struct{}
	reqSeq  atomic.Int64
	// late and badAnswers count claimer answers the event source mapping
	// would discard: after the function timeout, or not readable as batch
	// item failures of the batch.
	late, badAnswers atomic.Int64
	force            forced
	seedSeq          atomic.Uint64
	stats            deliveryStats
	throttle         int64 // installation whose budget runs out
}

type deliveryStats struct {
	mu           sync.Mutex
	sent         int
	duplicates   int
	redeliveries int
	rejected     int // 4xx: a bug in the generator or the webhook
	undelivered  int // gave up after maxRedeliveries 5xx answers
	unreached    int // the endpoint was down: left to the redeliverer
	statuses     map[int]int
}

// Run performs one accounting run in world and returns its figures. It
// returns an error only when the run could not be set up.
func Run(ctx context.Context, world World, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	started := time.Now()
	r := &run{cfg: cfg, world: world, logs: newLogSink(cfg.Log), sem: make(chan struct{}, cfg.Senders)}
	r.stats.statuses = map[int]int{}
	r.inj = NewInjector(random.New(cfg.Seed), cfg.FaultRate, nil)
	r.log = obs.NewLogger(r.logs, "info")
	if err := r.setUp(ctx); err != nil {
		return Report{}, err
	}
	defer r.tearDown()
	r.plans = Plan(random.New(cfg.Seed+1), cfg.Jobs)
	r.byJob = map[int64]*plan{}
	for _, p := range r.plans {
		r.byJob[p.Job.ID] = p
	}
	r.fleet = newFleet(cfg.Seed + 2)
	r.force.arm(cfg, r.inj, r.fleet, r.plans, cfg.Ramp/time.Duration(len(r.plans)))

	work, stopWork := context.WithCancel(ctx)
	r.simCtx = work
	var wg sync.WaitGroup
	for i := range cfg.Claimers {
		wg.Add(1)
		go func() { defer wg.Done(); r.poll(work, i) }()
	}
	for i, every := range []time.Duration{cfg.ReclaimEvery, cfg.ReclaimEvery * 17 / 10} {
		wg.Add(1)
		go func() { defer wg.Done(); r.reclaim(work, i, every) }()
	}
	for _, loop := range []func(context.Context){r.redeliverLoop, r.janitorLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); loop(work) }()
	}
	if cfg.OutageWindow > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); r.outage(work) }()
	}
	if cfg.RateLimitWindow > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if wait(work, cfg.Ramp/3) {
				r.gh.SetRateLimit(r.throttle, 5000, 0, time.Now().Add(cfg.RateLimitWindow))
				r.progress("rate limit: installation %d exhausted for %s", r.throttle, cfg.RateLimitWindow)
			}
		}()
	}
	if cfg.RenameAt > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); r.renames(work, started) }()
	}
	progressDone := make(chan struct{})
	go r.report(work, progressDone)

	r.deliverAll(ctx)
	r.progress("all deliveries answered after %s; settling (at most %s)", time.Since(started).Round(time.Second), cfg.Settle)
	r.settle(ctx)
	stopWork()
	wg.Wait()
	r.fleet.wg.Wait()
	r.gh.Drain()
	<-progressDone
	r.dups.sample(context.WithoutCancel(ctx), r)
	r.finalSweep(context.WithoutCancel(ctx))

	rep, err := r.account(context.WithoutCancel(ctx))
	rep.Elapsed = time.Since(started)
	return rep, err
}

func (r *run) setUp(ctx context.Context) error {
	cfg := r.world.AWS
	r.ddb = dynamodb.NewFromConfig(cfg)
	r.sqs = sqs.NewFromConfig(cfg)
	r.ec2 = ec2api.New(cfg)
	opts := store.Options{PendingGrace: r.cfg.PendingGrace, QueuedGrace: r.cfg.QueuedGrace}
	r.stores, r.queues = map[string]*store.Store{}, map[string]*queue.Queue{}
	for _, fn := range []string{fnWebhook, fnClaimer, fnReclaimer, fnJanitor, fnRedeliverer} {
		r.stores[fn] = store.New(&DynamoDB{Caller: fn, Next: r.ddb, In: r.inj}, r.world.TableName, opts)
		r.queues[fn] = queue.New(&SQS{Caller: fn, Next: &Compress{Next: r.sqs, Scale: r.cfg.DelayScale}, In: r.inj}, r.world.QueueURL)
	}

	lt, err := r.launchTemplate(ctx)
	if err != nil {
		return err
	}
	out, err := r.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("chaos-dispatch-%d-%d", r.cfg.Seed, time.Now().UnixNano()))})
	if err != nil {
		return fmt.Errorf("create dispatch queue: %w", err)
	}
	// The runner-start grace is compressed below pool.Validate's minute:
	// these pools are built here, not read from RUNNER_POOLS.
	grace := r.cfg.StartGrace.String()
	r.pools = []pool.Pool{
		{Name: PoolEC2, Labels: []string{"self-hosted", "linux", "x64"}, Scope: pool.ScopeRepo, RunnerGroupID: 1, RunnerStartGrace: grace,
			Provisioner: pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: lt, LaunchTemplateVersion: "$Default"}},
		{Name: PoolDispatch, Labels: []string{"self-hosted", "gpu"}, Scope: pool.ScopeOrg, RunnerGroupID: 1, RunnerStartGrace: grace,
			Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: aws.ToString(out.QueueUrl)}},
	}
	r.reg = provision.Registry{
		// StrictSSM: moto would store a JIT config in any tier; AWS would not.
		pool.ProvisionerEC2:      provision.NewEC2(r.ec2, ssmapi.New(cfg, provisiontest.StrictSSM), r.log).InStack(Stack),
		pool.ProvisionerDispatch: provision.NewDispatch(r.sqs, r.log),
	}

	r.appKey, err = NewAppKey()
	if err != nil {
		return err
	}
	// ghfake redelivers after its 202, as GitHub does; Drain, at the end,
	// waits for the redeliveries still on their way.
	r.gh = ghfake.New(ghfake.WithAppID(appID))
	srv := httptest.NewServer(Middleware(r.gh, r.inj))
	r.ghURL = srv.URL
	r.closers = append(r.closers, srv.Close)
	r.throttle = Installations[1]
	r.gh.SetWebhook(r.endpoint, string(Secret))
	r.githubInstallations()

	return r.deploy(r.pools)
}

func (r *run) tearDown() {
	for _, c := range r.closers {
		c()
	}
}

// stockAMI is an image moto ships (the other moto tests launch it too).
const stockAMI = "ami-03cf127a"

// launchTemplate creates the EC2 launch template of the linux pool.
func (r *run) launchTemplate(ctx context.Context) (string, error) {
	// One of moto's stock AMIs, by id: listing them all costs moto seconds.
	imgs, err := provisiontest.Images(ctx, r.ec2, stockAMI)
	if err != nil || len(imgs) == 0 {
		return "", fmt.Errorf("describe images: %v (no image to launch)", err)
	}
	name := fmt.Sprintf("chaos-%d-%d", r.cfg.Seed, time.Now().UnixNano())
	if _, err := provisiontest.LaunchTemplate(ctx, r.ec2, name, imgs[0], "t4g.micro"); err != nil {
		return "", err
	}
	return name, nil
}

// newClaimer starts a claimer "process": its own GitHub client, rate
// memory, random source and instance id, and the RUNNER_POOLS deployed
// now, whose generation it returns.
func (r *run) newClaimer(worker int) (*claim.Claimer, int, error) {
	gen, pools := r.currentPools()
	c, err := r.claimerWith(worker, pools)
	return c, gen, err
}

func (r *run) claimerWith(worker int, pools []pool.Pool) (*claim.Claimer, error) {
	gh, rates, err := r.cfg.GitHub(r.ghURL, appID, r.appKey, r.stores[fnClaimer])
	if err != nil {
		return nil, err
	}
	n := r.seedSeq.Add(1)
	pol := backoff.Default()
	pol.Ladder, pol.MaxAge = r.cfg.Ladder, r.cfg.MaxAge
	return claim.New(claim.Config{
		Pools: pools, Lease: r.cfg.Lease, SafetyMargin: r.cfg.FunctionTimeout / 3,
		EarlyDelay: time.Second, RetrySoon: time.Second, RateRefresh: time.Second,
		InstanceID:  "claimer-" + strconv.Itoa(worker) + "-" + strconv.FormatUint(n, 10),
		Store:       r.stores[fnClaimer],
		Queue:       r.queues[fnClaimer],
		GitHub:      &GitHub{Next: gh},
		Provisioner: &Provisioner{Caller: fnClaimer, Next: r.reg, In: r.inj, Provisioned: r.provisioned},
		Policy:      pol,
		Rates:       rates,
		Now:         time.Now,
		Rand:        random.New(r.cfg.Seed*1000 + n + 500),
		Logger:      r.log,
		Metrics:     obs.NewMetrics(r.logs, map[string]string{"function": "claimer"}, time.Now),
	})
}

// maxCallsPerClaim bounds where a kill lands: a claim makes about this many
// external calls (read, lease, token, JIT, provision, finish, delete).
const maxCallsPerClaim = 14

// poll is one claimer Lambda instance behind the event source mapping:
// receive a batch, invoke, delete what the invocation did not report as
// failed. A killed invocation deletes nothing and its process is replaced.
func (r *run) poll(ctx context.Context, worker int) {
	c, gen, err := r.newClaimer(worker)
	if err != nil {
		r.log.Error("chaos: claimer", slog.Any("err", err))
		return
	}
	share := float64(worker+1) / float64(r.cfg.Claimers) // this instance's moment in a deploy
	// The records Lambda's mapping builds, as the local stack's does.
	mapping := &eventsource.SQS{QueueARN: "arn:aws:sqs:us-east-1:123456789012:claims", Region: "us-east-1"}
	for ctx.Err() == nil {
		if due, _ := r.stale(gen, share); due {
			// A deploy reached this poller's warm instance: a new one.
			if c, gen, err = r.newClaimer(worker); err != nil {
				r.log.Error("chaos: claimer", slog.Any("err", err))
				return
			}
		}
		out, err := r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(r.world.QueueURL), MaxNumberOfMessages: int32(r.cfg.BatchSize),
			WaitTimeSeconds: 1, VisibilityTimeout: int32(r.cfg.Visibility / time.Second),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil || len(out.Messages) == 0 {
			continue
		}
		ev := mapping.Event(out.Messages)
		killAt, after := 0, false
		if r.inj.Float64() < r.cfg.KillRate {
			killAt, after = 1+r.inj.Intn(maxCallsPerClaim), r.inj.Intn(2) == 0
		}
		if r.force.kill.CompareAndSwap(true, false) {
			killAt, after = 1, false
		}
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.FunctionTimeout)
		inv := NewInvocation(r.inj, killAt, after, cancel)
		ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("req-%d", r.reqSeq.Add(1))})
		ictx = WithInvocation(ictx, inv)
		var resp events.SQSEventResponse
		var herr error
		deadline, _ := ictx.Deadline()
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, herr = c.Handle(ictx, ev)
		}()
		<-done
		cancel()
		if r.settleBatch(ev, resp, herr, inv.Killed(), time.Now().After(deadline)) {
			if c, gen, err = r.newClaimer(worker); err != nil {
				r.log.Error("chaos: claimer", slog.Any("err", err))
				return
			}
		}
	}
}

// settleBatch ends one claimer invocation as the event source mapping does and
// reports whether its execution environment is replaced. A killed
// invocation deletes nothing. Lambda ends an invocation at its timeout
// and discards what it answers later: a late answer deletes nothing
// either, and the environment is replaced. A function error fails the
// whole batch; otherwise the answer decides (deleteHandled). Whatever is
// not deleted comes back after the visibility timeout.
func (r *run) settleBatch(ev events.SQSEvent, resp events.SQSEventResponse, herr error, killed, late bool) bool {
	switch {
	case killed:
		return true
	case late:
		r.late.Add(1)
		r.log.Warn("chaos: claimer answered after its timeout; the whole batch comes back", slog.Int("messages", len(ev.Records)))
		return true
	case herr != nil:
		return false
	}
	r.deleteHandled(ev, resp)
	return false
}

// deleteHandled deletes the batch's messages that are not batch item
// failures, as the event source mapping does, reading the answer by the
// mapping's rules (eventsource.Failures): one it cannot read, or that
// names a message outside the batch, fails the whole batch.
func (r *run) deleteHandled(ev events.SQSEvent, resp events.SQSEventResponse) {
	raw, err := json.Marshal(resp)
	if err != nil {
		r.badAnswers.Add(1)
		return
	}
	failed, err := eventsource.Failures(raw, ev.Records)
	if err != nil {
		r.badAnswers.Add(1)
		r.log.Warn("chaos: the claimer's answer fails the whole batch", slog.Any("err", err))
		return
	}
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for _, m := range ev.Records {
		if !failed[m.MessageId] {
			entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(m.MessageId), ReceiptHandle: aws.String(m.ReceiptHandle)})
		}
	}
	if len(entries) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = r.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(r.world.QueueURL), Entries: entries})
}

// reclaim runs a reclaimer on a compressed schedule. Two of them run at
// different periods, so passes overlap now and then. Its budget is
// compressed, not its reserve: with half a period kept free, a pass whose
// last take-backs met a slow moto sent their messages past its deadline
// (records queued without a message until the next message_lost).
func (r *run) reclaim(ctx context.Context, id int, period time.Duration) {
	gh, rates, err := r.reclaimGitHub()
	if err != nil {
		panic(err) // a wiring mistake of this file
	}
	build := func(pools []pool.Pool) *reclaim.Reclaimer {
		rc, err := r.newReclaimer(id, period, gh, rates, pools)
		if err != nil {
			panic(err) // a wiring mistake of this file: Store and Queue are set
		}
		return rc
	}
	gen, pools := r.currentPools()
	rc := build(pools)
	share := float64(id+1) / 2
	every(ctx, period, passLimit(period), func(pctx context.Context) {
		if due, _ := r.stale(gen, share); due {
			gen, pools = r.currentPools()
			rc = build(pools)
		}
		_, _ = rc.Run(pctx)
	})
}

// newReclaimer is reclaimer id's function with pools as its RUNNER_POOLS.
func (r *run) newReclaimer(id int, period time.Duration, gh reclaim.GitHub, rates reclaim.Rates, pools []pool.Pool) (*reclaim.Reclaimer, error) {
	return reclaim.New(reclaim.Config{
		Store: r.stores[fnReclaimer], Queue: r.queues[fnReclaimer],
		MaxAge: r.cfg.MaxAge, Budget: 4 * period, Now: time.Now, // Reserve: the default 5 s, as deployed
		Rand: random.New(r.cfg.Seed*7 + uint64(id)), Logger: r.log,
		Metrics: obs.NewMetrics(r.logs, map[string]string{"function": "reclaimer"}, time.Now),
		GitHub:  gh, Rates: rates, Pools: pools, Provisioner: cleanup(r.reg),
	})
}

// machineSet records the jobs whose runner registration got a machine: an EC2
// instance started (or found) with the registration's config in SSM, or a
// dispatch message carrying it.
type machineSet struct {
	mu   sync.Mutex
	jobs map[int64]bool
}

// provisioned records that req's job got a machine (a JIT config that
// names no runner registration records nothing).
func (m *machineSet) provisioned(req provision.Request) {
	if agentID(req.JITConfig) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.jobs == nil {
		m.jobs = map[int64]bool{}
	}
	m.jobs[req.JobID] = true
}

// hasJob reports whether job id got a machine.
func (m *machineSet) hasJob(id int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.jobs[id]
}

// settle waits (bounded by Settle) until every planned job's record is
// terminal and no machine is still booting or running a job, reading the
// table directly, fault-free. A claimed record is not the end any more: a
// runner of ours must take the job (or the job end otherwise).
func (r *run) settle(ctx context.Context) {
	deadline := time.Now().Add(r.cfg.Settle)
	// Look as often as half a reclaimer period (a second at most): a job
	// ends no sooner than a pass or a delivery moves it.
	every := min(time.Second, r.cfg.ReclaimEvery/2)
	for time.Now().Before(deadline) {
		// A machine still at work means not settled: no Scan then (a
		// consistent Scan of the table is the harness's costliest read of
		// moto, taken from the functions under test).
		if r.fleet.active.Load() > 0 {
			if !wait(ctx, every) {
				return
			}
			continue
		}
		recs, err := r.scan(ctx)
		if err == nil && r.fleet.active.Load() == 0 {
			open := 0
			for _, p := range r.plans {
				if rec, ok := recs[p.Job.ID]; !ok || !rec.State.Terminal() {
					open++
				}
			}
			if open == 0 {
				return
			}
		}
		if !wait(ctx, every) {
			return
		}
	}
}

// report prints progress every five seconds until ctx ends.
func (r *run) report(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.dups.sample(ctx, r)
		if r.cfg.Progress == nil {
			continue // the states below are for the progress line only
		}
		recs, err := r.scan(ctx)
		if err != nil {
			continue
		}
		states := map[string]int{}
		for _, p := range r.plans {
			if rec, ok := recs[p.Job.ID]; ok {
				states[string(rec.State)]++
			} else {
				states["none"]++
			}
		}
		c := r.inj.Counts()
		r.progress("states %v faults=%d kills=%d machines=%d down=%v", states, c.TotalFaults(), c.Kills, r.fleet.active.Load(), r.down.Load())
	}
}

func (r *run) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "chaos: "+format+"\n", args...)
	}
}

// wait sleeps d as pacing of the workload (not to order anything) and
// reports false when ctx ended first.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

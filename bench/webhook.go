package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/webhook"
	wirewebhook "github.com/ghclaim/ghclaim/shared/wire/webhook"
)

// queuedPayload is a real workflow_job "queued" delivery body (the
// webhook's own fixture), so parsing costs what it costs on GitHub's shape.
//
//go:embed testdata/queued.json
var queuedPayload []byte

// BenchPool is the pool every benchmark job matches.
var BenchPool = pool.Pool{
	Name: "linux-x64", Labels: []string{"self-hosted", "linux", "x64"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
	Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "http://127.0.0.1:1/000000000000/dispatch"},
}

// Webhook drives the webhook handler and its floor against one Env.
type Webhook struct {
	env     *Env
	handler *webhook.Handler
	secret  []byte // the stack's webhook secret, which signs the deliveries
	tmpl    map[string]any
	// ids hands out job ids, unique per Webhook; base keeps two Webhooks
	// on one table apart.
	ids  atomic.Int64
	base int64
	mu   sync.Mutex // guards tmpl
}

// NewWebhook returns the handler functions/webhook runs, from its own
// wiring (shared/wire/webhook) with the environment Lambda gives it (the
// stack's table, claims queue and webhook secret; RUNNER_POOLS = pools)
// and every AWS request counted by env's Counter, with ids starting above
// base. Deliveries are signed with the secret the stack generated.
func NewWebhook(ctx context.Context, env *Env, pools []pool.Pool, base int64) (*Webhook, error) {
	if len(pools) == 0 {
		pools = []pool.Pool{BenchPool}
	}
	poolsJSON, err := json.Marshal(pools)
	if err != nil {
		return nil, fmt.Errorf("bench: pools: %w", err)
	}
	sec, err := secretsmanager.NewFromConfig(env.Raw).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(env.Stack.WebhookSecretARN)})
	if err != nil {
		return nil, fmt.Errorf("bench: read the webhook secret: %w", err)
	}
	h, err := wirewebhook.New(ctx, env.Function(map[string]string{"RUNNER_POOLS": string(poolsJSON)}))
	if err != nil {
		return nil, err
	}
	var tmpl map[string]any
	if err := json.Unmarshal(queuedPayload, &tmpl); err != nil {
		return nil, fmt.Errorf("bench: queued payload: %w", err)
	}
	return &Webhook{env: env, handler: h, secret: []byte(aws.ToString(sec.SecretString)), tmpl: tmpl, base: base}, nil
}

// NextID returns a fresh job id.
func (w *Webhook) NextID() int64 { return w.base + w.ids.Add(1) }

// Event returns a signed queued delivery for job id, as a Function URL
// delivers it, with a delivery GUID of its own.
func (w *Webhook) Event(id int64) events.LambdaFunctionURLRequest {
	return w.EventAction(id, "queued", "")
}

// EventAction is Event for another action of the job's life (in_progress,
// completed), naming the runner that took it.
func (w *Webhook) EventAction(id int64, action, runner string) events.LambdaFunctionURLRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	wj := w.tmpl["workflow_job"].(map[string]any)
	w.tmpl["action"] = action
	wj["status"] = action
	wj["id"] = id
	wj["run_id"] = 10_000_000_000 + id
	wj["runner_name"] = nil
	if runner != "" {
		wj["runner_name"] = runner
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(w.tmpl) // a decoded JSON document always encodes
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return events.LambdaFunctionURLRequest{
		Version: "2.0",
		RawPath: "/",
		Headers: map[string]string{
			"content-type":        "application/json",
			"user-agent":          "GitHub-Hookshot/bench",
			"x-github-delivery":   fmt.Sprintf("bench-%d-%d-%s", w.base, id, action),
			"x-github-event":      "workflow_job",
			"x-hub-signature-256": webhook.SignatureValue(body, w.secret),
		},
		RequestContext: events.LambdaFunctionURLRequestContext{
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodPost, Path: "/"},
		},
		Body: string(body),
	}
}

// Handle runs one delivery through the handler and checks that it was
// accepted (202): a benchmark of a failing path measures nothing.
func (w *Webhook) Handle(ctx context.Context, ev events.LambdaFunctionURLRequest) error {
	resp, err := w.handler.Handle(ctx, ev)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("bench: webhook answered %d: %s", resp.StatusCode, resp.Body)
	}
	return nil
}

// Floor issues one bare SendMessage of job id's claim message, directly
// with the SDK: the whole webhook path of the TypeScript runner module
// (it sends once, with no dedup and no outbox), and the least any webhook
// that hands a job on can do. Issue 11 measures the handler against it.
func (w *Webhook) Floor(ctx context.Context, id int64) error {
	body, _ := json.Marshal(job.Message{JobID: id, Version: 1}) // two numbers always marshal
	if _, err := w.env.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: &w.env.Stack.QueueURL, MessageBody: aws.String(string(body)),
	}); err != nil {
		return fmt.Errorf("floor send: %w", err)
	}
	return nil
}

// Floor2 issues the two bare requests issue 11 allows a queued delivery,
// directly with the SDK: a conditional PutItem of a minimal dedup item (the
// key and its TTL, refused when the key exists), then Floor's SendMessage.
// The handler against it is our own cost over the design's two requests;
// against Floor it is that plus the second request.
func (w *Webhook) Floor2(ctx context.Context, id int64) error {
	if _, err := w.env.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &w.env.Stack.TableName,
		Item: map[string]types.AttributeValue{
			"pk": s("floor2#" + strconv.FormatInt(id, 10)), "expires_at": n(time.Now().Add(72 * time.Hour).Unix()),
		},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}); err != nil {
		return fmt.Errorf("floor put: %w", err)
	}
	return w.Floor(ctx, id)
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// WebhookResult compares the handler with its floor (one bare SendMessage),
// measured interleaved in one run.
type WebhookResult struct {
	Deliveries int `json:"deliveries"`
	// Handler and Floor are the latencies per delivery.
	Handler Latency `json:"handler"`
	Floor   Latency `json:"floor"`
	// RatioP50 and RatioP99 are handler / floor: issue 11 wants the p50 at
	// most 2.0, the TypeScript module's whole path on the same baseline.
	RatioP50 float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
	// Floor2 is the latency of the two bare requests (Floor2), and the
	// ratios handler / Floor2: our own cost over the design's two requests.
	Floor2         Latency `json:"floor2"`
	Floor2RatioP50 float64 `json:"floor2_ratio_p50"`
	Floor2RatioP99 float64 `json:"floor2_ratio_p99"`
	// Floor2OverFloorP50 is Floor2 / Floor at p50: the two bare requests
	// alone against one bare send, the least RatioP50 any handler making
	// those two requests can reach on this machine and emulator.
	Floor2OverFloorP50 float64 `json:"floor2_over_floor_p50"`
	// HandlerOwn is the handler's time outside AWS requests (verify,
	// parse, marshal, log): latency minus the time its requests took.
	HandlerOwn Latency `json:"handler_own"`
	FloorOwn   Latency `json:"floor_own"`
	// Calls per delivery, by operation.
	HandlerCalls map[string]float64 `json:"handler_calls"`
	FloorCalls   map[string]float64 `json:"floor_calls"`
	// OpLatency is the mean time of each AWS operation on the emulator.
	OpLatencyMS map[string]float64 `json:"op_latency_ms"`
	// Allocations per delivery (whole process: handler, SDK, HTTP client).
	HandlerAllocs float64 `json:"handler_allocs"`
	HandlerBytes  float64 `json:"handler_bytes"`
	FloorAllocs   float64 `json:"floor_allocs"`
	FloorBytes    float64 `json:"floor_bytes"`
	AllocRatio    float64 `json:"alloc_ratio"`
	PayloadBytes  int     `json:"payload_bytes"`
}

// ratios sets r's ratios from its latencies.
func (r *WebhookResult) ratios() {
	r.RatioP50 = Ratio(r.Handler.P50, r.Floor.P50)
	r.RatioP99 = Ratio(r.Handler.P99, r.Floor.P99)
	r.Floor2RatioP50 = Ratio(r.Handler.P50, r.Floor2.P50)
	r.Floor2RatioP99 = Ratio(r.Handler.P99, r.Floor2.P99)
	r.Floor2OverFloorP50 = Ratio(r.Floor2.P50, r.Floor.P50)
}

// MeasureWebhook runs warm deliveries of each kind first, then n of each,
// alternating which goes first, and finally measures allocations over
// allocRuns deliveries of each.
func MeasureWebhook(ctx context.Context, w *Webhook, n, warm, allocRuns int) (WebhookResult, error) {
	for range warm {
		if err := w.Handle(ctx, w.Event(w.NextID())); err != nil {
			return WebhookResult{}, err
		}
		if err := w.Floor(ctx, w.NextID()); err != nil {
			return WebhookResult{}, err
		}
		if err := w.Floor2(ctx, w.NextID()); err != nil {
			return WebhookResult{}, err
		}
	}
	var hLat, fLat, f2Lat, hOwn, fOwn []time.Duration
	var hCalls, fCalls Snapshot
	hCalls.Calls, fCalls.Calls = map[string]int{}, map[string]int{}
	c := w.env.Count
	runH := func() error {
		ev := w.Event(w.NextID())
		before := c.Snapshot()
		t0 := time.Now()
		if err := w.Handle(ctx, ev); err != nil {
			return err
		}
		d := time.Since(t0)
		delta := c.Snapshot().Since(before)
		hLat, hOwn = append(hLat, d), append(hOwn, max(0, d-delta.Busy))
		add(&hCalls, delta)
		return nil
	}
	runF := func() error {
		id := w.NextID()
		before := c.Snapshot()
		t0 := time.Now()
		if err := w.Floor(ctx, id); err != nil {
			return err
		}
		d := time.Since(t0)
		delta := c.Snapshot().Since(before)
		fLat, fOwn = append(fLat, d), append(fOwn, max(0, d-delta.Busy))
		add(&fCalls, delta)
		return nil
	}
	runF2 := func() error {
		t0 := time.Now()
		if err := w.Floor2(ctx, w.NextID()); err != nil {
			return err
		}
		f2Lat = append(f2Lat, time.Since(t0))
		return nil
	}
	// Each kind goes first, second and third in turn.
	order := []func() error{runH, runF, runF2}
	for i := range n {
		for k := range order {
			if err := order[(i+k)%len(order)](); err != nil {
				return WebhookResult{}, err
			}
		}
	}
	r := WebhookResult{
		Deliveries: n,
		Handler:    Summarise(hLat), Floor: Summarise(fLat),
		HandlerOwn: Summarise(hOwn), FloorOwn: Summarise(fOwn),
		HandlerCalls: perOp(hCalls, n), FloorCalls: perOp(fCalls, n),
		OpLatencyMS:  map[string]float64{},
		PayloadBytes: len(w.Event(0).Body),
	}
	r.Floor2 = Summarise(f2Lat)
	r.ratios()
	both := hCalls
	add(&both, fCalls)
	for op, k := range both.Calls {
		r.OpLatencyMS[op] = ms(both.OpBusy[op] / time.Duration(k))
	}

	var err error
	r.HandlerAllocs, r.HandlerBytes, err = allocs(allocRuns, func() error { return w.Handle(ctx, w.Event(w.NextID())) })
	if err != nil {
		return r, err
	}
	r.FloorAllocs, r.FloorBytes, err = allocs(allocRuns, func() error { return w.Floor(ctx, w.NextID()) })
	if err != nil {
		return r, err
	}
	r.AllocRatio = Ratio(r.HandlerAllocs, r.FloorAllocs)
	return r, nil
}

func add(into *Snapshot, d Snapshot) {
	if into.Calls == nil {
		into.Calls = map[string]int{}
	}
	if into.OpBusy == nil {
		into.OpBusy = map[string]time.Duration{}
	}
	if into.Items == nil {
		into.Items = map[ItemOp]int{}
	}
	if into.Apart == nil {
		into.Apart = map[string]int{}
	}
	for k, v := range d.Calls {
		into.Calls[k] += v
		into.OpBusy[k] += d.OpBusy[k]
	}
	for k, v := range d.Items {
		into.Items[k] += v
	}
	for k, v := range d.Apart {
		into.Apart[k] += v
	}
	into.Busy += d.Busy
	into.Units.WRU += d.Units.WRU
	into.Units.GSIWrites += d.Units.GSIWrites
	into.Units.GSIWRU += d.Units.GSIWRU
	into.Units.RRU += d.Units.RRU
}

func perOp(s Snapshot, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range s.Calls {
		out[k] = round(float64(v)/float64(n), 3)
	}
	return out
}

// Delivery is what one kind of delivery costs.
type Delivery struct {
	Action string             `json:"action"`
	N      int                `json:"n"`
	Time   Latency            `json:"time"`
	Calls  map[string]float64 `json:"calls"`
	// Items are the DynamoDB requests per delivery by item (see byItem).
	Items map[string]float64 `json:"dynamodb_by_item"`
	Units Units              `json:"units"`
	// Usage is one delivery's SQS requests and DynamoDB units.
	Usage Usage `json:"-"`
}

// MeasureLifecycle sends each of n jobs through the deliveries GitHub makes
// for a job (queued, in_progress, completed) and measures each kind.
func MeasureLifecycle(ctx context.Context, w *Webhook, n int) ([]Delivery, error) {
	actions := []string{"queued", "in_progress", "completed"}
	lat := map[string][]time.Duration{}
	snaps := map[string]*Snapshot{}
	for _, a := range actions {
		snaps[a] = &Snapshot{}
	}
	for range n {
		id := w.NextID()
		for _, a := range actions {
			runner := ""
			if a != "queued" {
				runner = fmt.Sprintf("%s-%d", BenchPool.Name, id)
			}
			ev := w.EventAction(id, a, runner)
			before := w.env.Count.Snapshot()
			t0 := time.Now()
			if err := w.Handle(ctx, ev); err != nil {
				return nil, fmt.Errorf("%s: %w", a, err)
			}
			lat[a] = append(lat[a], time.Since(t0))
			add(snaps[a], w.env.Count.Snapshot().Since(before))
		}
	}
	var out []Delivery
	for _, a := range actions {
		s := *snaps[a]
		k := float64(n)
		out = append(out, Delivery{
			Action: a, N: n, Time: Summarise(lat[a]), Calls: perOp(s, n), Items: byItem(s, n),
			Units: Units{WRU: round(s.Units.WRU/k, 2), GSIWRU: round(s.Units.GSIWRU/k, 2), GSIWrites: round(s.Units.GSIWrites/k, 2), RRU: round(s.Units.RRU/k, 2)},
			Usage: FromSnapshot(s).Times(1 / k),
		})
	}
	return out, nil
}

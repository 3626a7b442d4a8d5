// Command load is `make load`: a bounded load test of the webhook path on
// loopback. It starts an AWS emulator (moto_server on 127.0.0.1, or the one
// AWS_ENDPOINT_URL names), deploys template.yaml's table and queues, puts
// the real webhook handler behind a local Function URL (infra/local/
// functionurl: HTTP → payload-format 2.0 event → handler → HTTP), and sends
// a fixed number of signed workflow_job deliveries with fixed concurrency.
//
// The mix is what GitHub sends for busy repositories: every job queued, a
// share of them delivered twice, and in_progress/completed for some. It
// prints deliveries per second, latency percentiles, errors and memory, and
// checks the end state (one record and one claim message per queued job).
// The last line is key=value pairs; it exits 1 on any error or a wrong end
// state, 2 when it could not be set up.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/chaos"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/local/functionurl"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/store"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

func main() {
	n := flag.Int("n", 2000, "deliveries to send")
	c := flag.Int("c", 16, "concurrent senders")
	dup := flag.Float64("dup", 0.1, "share of jobs whose queued is delivered twice")
	done := flag.Float64("done", 0.2, "share of jobs that also get in_progress")
	limit := flag.Duration("timeout", 5*time.Minute, "bound on the whole run")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	res, err := run(ctx, *n, *c, *dup, *done)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	fmt.Println(res.line())
	if !res.ok() {
		os.Exit(1)
	}
}

// inproc invokes the webhook handler in this process with the JSON a
// Lambda runtime would hand it, and returns the JSON it would send back.
type inproc struct{ h *webhook.Handler }

func (f inproc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	resp, err := f.h.Handle(ctx, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}

type result struct {
	sent, errors, queuedJobs int
	elapsed                  time.Duration
	latencies                []time.Duration
	heapPeak, heapEnd        uint64
	allocPerDelivery         float64
	records, messages        int
	statuses                 map[int]int
}

func (r result) pct(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(p * float64(len(r.latencies)-1))
	return r.latencies[i]
}

func (r result) ok() bool {
	return r.errors == 0 && r.records == r.queuedJobs && r.messages == r.queuedJobs
}

func (r result) line() string {
	return fmt.Sprintf("deliveries=%d concurrency=%d errors=%d per_second=%.1f p50_ms=%.1f p99_ms=%.1f max_ms=%.1f "+
		"heap_peak_mb=%.1f heap_end_mb=%.1f alloc_per_delivery_kb=%.1f jobs=%d records=%d messages=%d statuses=%v elapsed=%s",
		r.sent, concurrency, r.errors, float64(r.sent)/r.elapsed.Seconds(),
		ms(r.pct(0.50)), ms(r.pct(0.99)), ms(r.pct(1)),
		float64(r.heapPeak)/(1<<20), float64(r.heapEnd)/(1<<20), r.allocPerDelivery/1024,
		r.queuedJobs, r.records, r.messages, r.statuses, r.elapsed.Round(time.Millisecond))
}

var concurrency int

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func run(ctx context.Context, n, c int, dupShare, doneShare float64) (result, error) {
	concurrency = c
	srv, err := emulator.Start(ctx)
	if err != nil {
		return result{}, err
	}
	defer srv.Close()
	cfg, err := srv.Config(ctx)
	if err != nil {
		return result{}, err
	}
	path, err := emulator.TemplatePath()
	if err != nil {
		return result{}, err
	}
	stack, err := emulator.Deploy(ctx, cfg, path, emulator.StackName("load"), nil)
	if err != nil {
		return result{}, err
	}
	defer stack.Delete(context.WithoutCancel(ctx))

	ddb := dynamodb.NewFromConfig(cfg)
	sq := sqs.NewFromConfig(cfg)
	pools := []pool.Pool{{Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
		Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "http://127.0.0.1/unused"}}}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	h, err := webhook.New(webhook.Config{Secrets: [][]byte{chaos.Secret}, Pools: pools,
		Store: store.New(ddb, stack.TableName, store.Options{}), Queue: queue.New(sq, stack.QueueURL), Now: time.Now, Logger: log})
	if err != nil {
		return result{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	front := &http.Server{Handler: &functionurl.Handler{Function: inproc{h}, URLID: "load", Region: emulator.Region}, ReadHeaderTimeout: 5 * time.Second}
	go front.Serve(ln)
	defer front.Close()
	url := "http://" + ln.Addr().String() + "/"

	// The deliveries, fixed before the clock starts.
	type delivery struct {
		d   chaos.Delivery
		job int64
	}
	// in_progress deliveries go last, in job order, so each follows its
	// queued by far more than the concurrency: no reordering, and the end
	// state is exact.
	var plan, later []delivery
	queued := map[int64]bool{}
	rnd := random.New(7)
	for id := int64(1); len(plan)+len(later) < n; id++ {
		j := chaos.Job{ID: 8_000_000 + id, RunID: 100 + id, Repo: "acme/app", InstallationID: 1, Labels: []string{"self-hosted", "linux"}, Private: true}
		q := chaos.Delivery{GUID: fmt.Sprintf("q-%d", j.ID), Event: "workflow_job", Body: chaos.Payload(j, "queued", "")}
		plan = append(plan, delivery{q, j.ID})
		queued[j.ID] = true
		if rnd.Float64() < dupShare && len(plan)+len(later) < n {
			plan = append(plan, delivery{q, j.ID})
		}
		if rnd.Float64() < doneShare && len(plan)+len(later) < n {
			later = append(later, delivery{chaos.Delivery{GUID: fmt.Sprintf("p-%d", j.ID), Event: "workflow_job", Body: chaos.Payload(j, "in_progress", "runner-1")}, j.ID})
		}
	}
	plan = append(plan, later...)

	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c}}
	res := result{statuses: map[int]int{}}
	var mu sync.Mutex
	var next atomic.Int64
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // heap sampler
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(plan) || ctx.Err() != nil {
					return
				}
				d := plan[i].d
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(d.Body)))
				for k, v := range d.Headers(chaos.Secret) {
					req.Header.Set(k, v)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				lat := time.Since(t0)
				code := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				res.sent++
				res.latencies = append(res.latencies, lat)
				res.statuses[code]++
				if err != nil || code >= 300 {
					res.errors++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	close(stopSampling)
	<-sampled
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	res.heapPeak, res.heapEnd = peak.Load(), after.HeapInuse
	res.allocPerDelivery = float64(after.TotalAlloc-before.TotalAlloc) / float64(max(res.sent, 1))
	slices.Sort(res.latencies)
	res.queuedJobs = len(queued)

	// End state: one record per queued job, one claim message per job.
	if res.records, err = countRecords(context.WithoutCancel(ctx), ddb, stack.TableName); err != nil {
		return res, err
	}
	if res.messages, err = countMessages(context.WithoutCancel(ctx), sq, stack.QueueURL); err != nil {
		return res, err
	}
	return res, nil
}

func countRecords(ctx context.Context, ddb *dynamodb.Client, table string) (int, error) {
	n := 0
	p := dynamodb.NewScanPaginator(ddb, &dynamodb.ScanInput{TableName: aws.String(table)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, err
		}
		for _, it := range page.Items {
			if pk, ok := it["pk"].(*ddbtypes.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "job#") {
				n++
			}
		}
	}
	return n, nil
}

func countMessages(ctx context.Context, sq *sqs.Client, url string) (int, error) {
	out, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, k := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed} {
		var v int
		if _, err := fmt.Sscan(out.Attributes[string(k)], &v); err != nil {
			return 0, errors.New("queue attribute " + string(k) + " is not a number")
		}
		total += v
	}
	return total, nil
}

package redeliver_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

// TestOutageEveryJobRecordedOnceAndQueuedOnce is issue 12's "Done when" for
// redelivery: the real webhook handler (on the memory store and queue) is
// down for a stretch, so GitHub's deliveries to it fail; one delivery
// reaches it but its answer is lost (the job is recorded, GitHub logs a
// 502); it comes back; the redeliverer runs twice. Every job of the outage
// ends recorded once with exactly one claim message (the claimer takes a
// job once per message version), and the lost answer's redelivery is a 200
// duplicate that sends nothing.
func TestOutageEveryJobRecordedOnceAndQueuedOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	q := mem.NewQueue(f.clock.now)
	h, err := webhook.New(webhook.Config{Secrets: [][]byte{[]byte("s3cret")}, Pools: []pool.Pool{{
		Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
		Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: "http://127.0.0.1:1/000000000000/dispatch"},
	}}, Store: f.store, Queue: q, Now: f.clock.now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var down, loseAnswer atomic.Bool
	f.fake.SetWebhook(func(ctx context.Context, hdr http.Header, body []byte) (int, []byte, error) {
		if down.Load() {
			return 0, nil, errConnRefused
		}
		req := events.LambdaFunctionURLRequest{Version: "2.0", Headers: map[string]string{}, Body: string(body),
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/"}}}
		for k := range hdr {
			req.Headers[strings.ToLower(k)] = hdr.Get(k)
		}
		resp, err := h.Handle(ctx, req)
		if err != nil {
			return 0, nil, err
		}
		if loseAnswer.Load() {
			return http.StatusBadGateway, nil, nil // the handler ran; its answer never reached GitHub
		}
		return resp.StatusCode, []byte(resp.Body), nil
	}, "s3cret")
	deliver := func(id int64, action, runner string) {
		f.fake.Deliver(context.Background(), "workflow_job", "", ghfake.WorkflowJobPayload(ghfake.Delivery{
			Action: action, Repo: "octo/app", JobID: id, RunID: 7, Labels: []string{"self-hosted", "linux"}, RunnerName: runner, Installation: 42, Private: true}))
		f.clock.add(10 * time.Second)
	}

	deliver(1, "queued", "")
	deliver(2, "queued", "")
	down.Store(true) // the outage
	for id := int64(3); id <= 8; id++ {
		deliver(id, "queued", "")
	}
	deliver(2, "in_progress", "linux-2")
	down.Store(false)
	loseAnswer.Store(true)
	deliver(9, "queued", "")
	loseAnswer.Store(false)
	deliver(10, "queued", "")

	failed := 0
	for _, d := range f.fake.Deliveries() {
		if !d.OK() {
			failed++
		}
	}
	if failed != 8 {
		t.Fatalf("failed deliveries before the redeliverer = %d, want 8 (6 queued and 1 in_progress while down, 1 lost answer)", failed)
	}
	for range 2 {
		f.clock.add(5 * time.Minute)
		f.run(t)
		f.fake.Drain() // the redeliveries reach the webhook after GitHub's 202s
	}

	recs := f.store.Records()
	perJob := map[int64]int{}
	for _, s := range q.Sent() {
		perJob[s.Msg.JobID]++
	}
	for id := int64(1); id <= 10; id++ {
		if _, ok := recs[id]; !ok {
			t.Errorf("job %d: no record after the redeliverer ran", id)
		}
		if perJob[id] != 1 {
			t.Errorf("job %d: %d claim messages, want exactly 1", id, perJob[id])
		}
	}
	if len(recs) != 10 || len(perJob) != 10 {
		t.Errorf("records = %d, jobs with messages = %d, want 10 and 10", len(recs), len(perJob))
	}
	if got := recs[2].State; got != "done" {
		t.Errorf("job 2 state = %s, want done (its in_progress was redelivered)", got)
	}
	if n := f.store.Calls("CreateJob"); n != 11 {
		t.Errorf("CreateJob calls = %d, want 11: 10 jobs and the lost answer's duplicate", n)
	}
	for _, d := range f.fake.Deliveries() {
		if d.Redelivery && !d.OK() {
			t.Errorf("redelivery %s failed: %s", d.GUID, d.Status)
		}
	}
}

type connRefused struct{}

func (connRefused) Error() string { return "dial tcp 127.0.0.1:443: connect: connection refused" }

var errConnRefused error = connRefused{}

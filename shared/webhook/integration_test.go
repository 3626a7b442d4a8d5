package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/emulator"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/store"
)

// The integration tests run the handler over the real store and queue, with
// real SDK clients, against the template's table and queue on moto.

// world is one deployed stack with a handler over it.
type world struct {
	h     *Handler
	st    *store.Store
	ddb   *dynamodb.Client
	sqs   *sqs.Client
	stack *emulator.Stack
}

// setupWorld deploys a stack of its own; wrapDDB / wrapSQS may decorate the
// real clients the handler uses (to inject failures); the test's own reads
// go through the undecorated clients.
func setupWorld(t *testing.T, wrapDDB func(store.DynamoDB) store.DynamoDB, wrapSQS func(queue.SQS) queue.SQS) *world {
	t.Helper()
	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	cfg := srv.ConfigForTest(t)
	w := &world{ddb: dynamodb.NewFromConfig(cfg), sqs: sqs.NewFromConfig(cfg), stack: stack}
	var db store.DynamoDB = w.ddb
	if wrapDDB != nil {
		db = wrapDDB(db)
	}
	var sq queue.SQS = w.sqs
	if wrapSQS != nil {
		sq = wrapSQS(sq)
	}
	w.st = store.New(db, stack.TableName, store.Options{})
	h, err := New(Config{Secrets: [][]byte{[]byte(localSecret)}, Pools: testPools}, w.st,
		queue.New(sq, stack.QueueURL), func() time.Time { return testNow }, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	return w
}

func (w *world) deliver(t *testing.T, name, guid string, mod func(map[string]any)) int {
	t.Helper()
	m := payload(t, name)
	if mod != nil {
		mod(m)
	}
	resp, err := w.h.Handle(context.Background(), signedRequest("workflow_job", guid, compact(t, m)))
	if err != nil {
		t.Errorf("Handle: %v", err)
	}
	return resp.StatusCode
}

// messages drains the claims queue and returns the decoded messages.
func (w *world) messages(t *testing.T) []job.Message {
	t.Helper()
	var out []job.Message
	for {
		res, err := w.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &w.stack.QueueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600,
		})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(res.Messages) == 0 {
			return out
		}
		for _, m := range res.Messages {
			msg, err := queue.Decode(aws.ToString(m.Body))
			if err != nil {
				t.Fatalf("message %q: %v", aws.ToString(m.Body), err)
			}
			out = append(out, msg)
		}
	}
}

// jobRecords lists every job record in the table (one table per test).
func (w *world) jobRecords(t *testing.T) []job.Record {
	t.Helper()
	out, err := w.ddb.Scan(context.Background(), &dynamodb.ScanInput{TableName: &w.stack.TableName, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var recs []job.Record
	for _, it := range out.Items {
		pk := it["pk"].(*ddbtypes.AttributeValueMemberS).Value
		if id, ok := cutPrefix(pk, "job#"); ok {
			r, err := w.st.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
	}
	return recs
}

func cutPrefix(pk, prefix string) (int64, bool) {
	if len(pk) <= len(prefix) || pk[:len(prefix)] != prefix {
		return 0, false
	}
	id, err := strconv.ParseInt(pk[len(prefix):], 10, 64)
	return id, err == nil
}

// deliveryKey returns the dedup item of guid, or nil.
func (w *world) deliveryKey(t *testing.T, guid string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := w.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &w.stack.TableName, ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: job.DeliveryKey(guid)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func wantOne(t *testing.T, w *world, state job.State) job.Record {
	t.Helper()
	recs := w.jobRecords(t)
	if len(recs) != 1 {
		t.Fatalf("%d job records, want 1: %+v", len(recs), recs)
	}
	if recs[0].JobID != 29679449 || recs[0].State != state {
		t.Fatalf("record %+v, want job 29679449 in state %s", recs[0], state)
	}
	return recs[0]
}

func TestIntegrationQueuedRecordsAndEnqueuesOnce(t *testing.T) {
	t.Parallel()
	w := setupWorld(t, nil, nil)
	if code := w.deliver(t, "queued", guid, nil); code != http.StatusAccepted {
		t.Fatalf("status %d, want 202", code)
	}
	rec := wantOne(t, w, job.Queued)
	if rec.Version != 1 || rec.Pool != "linux-x64" || rec.Repo != "octo-org/octo-repo" || rec.InstallationID != 42 || rec.RunID != 10416386539 {
		t.Errorf("record %+v: want version 1, pool linux-x64, repo, installation 42, run id", rec)
	}
	if rec.DueAt != job.Millis(testNow) {
		t.Errorf("due_at %d, want now %d", rec.DueAt, job.Millis(testNow))
	}
	msgs := w.messages(t)
	if want := (job.Message{JobID: 29679449, Version: 1}); len(msgs) != 1 || msgs[0] != want {
		t.Fatalf("messages %+v, want exactly [%+v]", msgs, want)
	}
	item := w.deliveryKey(t, guid)
	if item == nil {
		t.Fatal("no dedup key")
	}
	exp := item["expires_at"].(*ddbtypes.AttributeValueMemberN).Value
	if want := strconv.FormatInt(testNow.Add(store.DefaultDedupTTL).Unix(), 10); exp != want {
		t.Errorf("dedup expires_at %s, want %s (now + 7 days)", exp, want)
	}
	// The same delivery again: 200 duplicate, nothing more.
	if code := w.deliver(t, "queued", guid, nil); code != http.StatusOK {
		t.Fatalf("redelivery status %d, want 200", code)
	}
	if msgs := w.messages(t); len(msgs) != 0 {
		t.Fatalf("redelivery sent %+v", msgs)
	}
}

// concurrently delivers the queued event n times and returns the status counts.
func concurrently(t *testing.T, w *world, n int, guidOf func(i int) string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code := w.deliver(t, "queued", guidOf(i), nil)
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return codes
}

func TestIntegrationConcurrentDeliveries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		n      int
		guidOf func(i int) string
	}{
		{name: "same delivery 10 times", n: 10, guidOf: func(int) string { return guid }},
		{name: "one event in 50 deliveries", n: 50, guidOf: func(i int) string { return fmt.Sprintf("guid-%02d", i) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := setupWorld(t, nil, nil)
			codes := concurrently(t, w, tt.n, tt.guidOf)
			if codes[http.StatusAccepted] != 1 || codes[http.StatusOK] != tt.n-1 {
				t.Errorf("answers %v, want one 202 and %d 200s", codes, tt.n-1)
			}
			wantOne(t, w, job.Queued)
			if msgs := w.messages(t); len(msgs) != 1 {
				t.Fatalf("%d messages, want 1: %+v", len(msgs), msgs)
			}
		})
	}
}

func TestIntegrationNewGUIDForRecordedJob(t *testing.T) {
	t.Parallel()
	w := setupWorld(t, nil, nil)
	if code := w.deliver(t, "queued", "first", nil); code != http.StatusAccepted {
		t.Fatalf("first delivery %d, want 202", code)
	}
	if code := w.deliver(t, "queued", "second", nil); code != http.StatusOK {
		t.Fatalf("second GUID %d, want 200 duplicate", code)
	}
	if msgs := w.messages(t); len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	if w.deliveryKey(t, "second") == nil {
		t.Error("the second GUID has no dedup key")
	}
}

// keys lists the pk of every item in the table (one table per test).
func (w *world) keys(t *testing.T) []string {
	t.Helper()
	out, err := w.ddb.Scan(context.Background(), &dynamodb.ScanInput{TableName: &w.stack.TableName, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	for _, it := range out.Items {
		pks = append(pks, it["pk"].(*ddbtypes.AttributeValueMemberS).Value)
	}
	return pks
}

// A job we do not serve writes nothing, so the operator's fix followed by
// GitHub's Redeliver (the same GUID) gets the job claimed.
func TestIntegrationSkipWritesNothingAndRedeliveryIsReDecided(t *testing.T) {
	t.Parallel()
	publicOK := slices.Clone(testPools)
	publicOK[0].AllowPublic = true
	tests := []struct {
		name   string
		mod    func(map[string]any)
		before func(*Config) // the misconfiguration
		fix    func(*Config)
	}{
		{
			name:   "no pool matches",
			before: func(c *Config) { c.Pools = testPools[1:] },
			fix:    func(c *Config) { c.Pools = testPools },
		},
		{
			name:   "owner not allowed",
			before: func(c *Config) { c.AllowedOwners = []string{"other-org"} },
			fix:    func(c *Config) { c.AllowedOwners = []string{"other-org", "octo-org"} },
		},
		{
			name:   "public repository refused",
			mod:    func(m map[string]any) { set(m, "repository.visibility", "public") },
			before: func(c *Config) { c.Pools = testPools },
			fix:    func(c *Config) { c.Pools = publicOK },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := setupWorld(t, nil, nil)
			tt.before(&w.h.cfg)
			for i := range 2 { // a redelivery before the fix is skipped again
				if code := w.deliver(t, "queued", guid, tt.mod); code != http.StatusOK {
					t.Fatalf("skipped delivery %d: status %d, want 200", i, code)
				}
			}
			if keys := w.keys(t); len(keys) != 0 {
				t.Fatalf("a skipped delivery wrote %v, want nothing", keys)
			}
			if msgs := w.messages(t); len(msgs) != 0 {
				t.Fatalf("a skipped delivery sent %+v", msgs)
			}
			tt.fix(&w.h.cfg)
			if code := w.deliver(t, "queued", guid, tt.mod); code != http.StatusAccepted {
				t.Fatalf("redelivery after the fix: status %d, want 202", code)
			}
			if rec := wantOne(t, w, job.Queued); rec.Pool != "linux-x64" {
				t.Errorf("record pool %q, want linux-x64", rec.Pool)
			}
			if msgs := w.messages(t); len(msgs) != 1 || msgs[0].JobID != 29679449 {
				t.Fatalf("messages %+v, want one for job 29679449", msgs)
			}
		})
	}
}

// waiting and events other than workflow_job write nothing either.
func TestIntegrationIgnoredDeliveriesWriteNothing(t *testing.T) {
	t.Parallel()
	w := setupWorld(t, nil, nil)
	if code := w.deliver(t, "waiting", "w", nil); code != http.StatusOK {
		t.Fatalf("waiting: status %d, want 200", code)
	}
	for _, event := range []string{"ping", "push", "workflow_run"} {
		resp, err := w.h.Handle(context.Background(), signedRequest(event, "e-"+event, compact(t, payload(t, "ping"))))
		if err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("%s: %d %v, want 2xx", event, resp.StatusCode, err)
		}
	}
	if keys := w.keys(t); len(keys) != 0 {
		t.Fatalf("ignored deliveries wrote %v, want nothing", keys)
	}
}

func TestIntegrationInProgress(t *testing.T) {
	t.Parallel()
	t.Run("after queued: record done with the runner", func(t *testing.T) {
		t.Parallel()
		w := setupWorld(t, nil, nil)
		w.deliver(t, "queued", "q", nil)
		if code := w.deliver(t, "in_progress", "p", nil); code != http.StatusAccepted {
			t.Fatalf("in_progress %d, want 202", code)
		}
		rec := wantOne(t, w, job.Done)
		if rec.RunnerName != "linux-x64-29679449" || rec.Version != 2 || rec.SweepShard != "" {
			t.Errorf("record %+v: want runner linux-x64-29679449, version 2, off the sweep index", rec)
		}
	})
	t.Run("without installation: applied", func(t *testing.T) {
		t.Parallel()
		w := setupWorld(t, nil, nil)
		w.deliver(t, "queued", "q", nil)
		for _, action := range []string{"in_progress", "completed"} {
			if code := w.deliver(t, action, action, func(m map[string]any) { del(m, "installation") }); code != http.StatusAccepted {
				t.Fatalf("%s without installation: %d, want 202", action, code)
			}
		}
		rec := wantOne(t, w, job.Done)
		if rec.RunnerName != "linux-x64-29679449" || rec.InstallationID != 42 {
			t.Errorf("record %+v: want runner linux-x64-29679449, installation 42 kept from queued", rec)
		}
	})
	t.Run("before queued: created done, a late queued sends nothing", func(t *testing.T) {
		t.Parallel()
		w := setupWorld(t, nil, nil)
		if code := w.deliver(t, "in_progress", "p", nil); code != http.StatusAccepted {
			t.Fatalf("in_progress %d, want 202", code)
		}
		wantOne(t, w, job.Done)
		if code := w.deliver(t, "queued", "q", nil); code != http.StatusOK {
			t.Fatalf("late queued %d, want 200 duplicate", code)
		}
		wantOne(t, w, job.Done)
		if msgs := w.messages(t); len(msgs) != 0 {
			t.Fatalf("late queued sent %+v", msgs)
		}
	})
}

var errInjected = &smithy.GenericAPIError{Code: "InternalServerError", Message: "injected by the test", Fault: smithy.FaultServer}

// failingSQS fails every SendMessage.
type failingSQS struct {
	queue.SQS
	sends atomic.Int32
}

func (f *failingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.sends.Add(1)
	return nil, errInjected
}

// failingDDB fails every PutItem and UpdateItem (reads pass).
type failingDDB struct {
	store.DynamoDB
	writes atomic.Int32
}

func (f *failingDDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.writes.Add(1)
	return nil, errInjected
}

func (f *failingDDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.writes.Add(1)
	return nil, errInjected
}

func TestIntegrationSQSFailingLeavesTheRecordPending(t *testing.T) {
	t.Parallel()
	fs := &failingSQS{}
	w := setupWorld(t, nil, func(real queue.SQS) queue.SQS { fs.SQS = real; return fs })
	if code := w.deliver(t, "queued", guid, nil); code != http.StatusAccepted {
		t.Fatalf("status %d, want 202: the record is durable and GitHub will not retry", code)
	}
	if fs.sends.Load() != 1 {
		t.Fatalf("%d sends tried, want 1", fs.sends.Load())
	}
	rec := wantOne(t, w, job.Pending)
	if rec.SweepShard == "" || rec.SweepAt != job.Millis(testNow.Add(store.DefaultPendingGrace)) {
		t.Errorf("record %+v: want it on the sweep index, stale after the pending grace", rec)
	}
	if w.deliveryKey(t, guid) == nil {
		t.Error("no dedup key")
	}
	if msgs := w.messages(t); len(msgs) != 0 {
		t.Fatalf("messages %+v, want none", msgs)
	}
}

func TestIntegrationDynamoDBFailing(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"queued", "in_progress"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fd := &failingDDB{}
			w := setupWorld(t, func(real store.DynamoDB) store.DynamoDB { fd.DynamoDB = real; return fd }, nil)
			resp, err := w.h.Handle(context.Background(), signedRequest("workflow_job", guid, compact(t, payload(t, name))))
			if err != nil || resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("got %d, %v; want 500 (nothing durable was written)", resp.StatusCode, err)
			}
			var r Reply
			if err := json.Unmarshal([]byte(resp.Body), &r); err != nil || r.Status != StatusError {
				t.Fatalf("body %s, want an error reply", resp.Body)
			}
			if fd.writes.Load() != 1 {
				t.Errorf("%d writes tried, want 1 (no dedup key after a failed record write)", fd.writes.Load())
			}
			if recs := w.jobRecords(t); len(recs) != 0 {
				t.Errorf("job records %+v, want none", recs)
			}
			if w.deliveryKey(t, guid) != nil {
				t.Error("dedup key written: GitHub's redelivery would be dropped")
			}
			if msgs := w.messages(t); len(msgs) != 0 {
				t.Fatalf("messages %+v, want none", msgs)
			}
		})
	}
}

func TestIntegrationExpiredDedupKeyCountsAsAbsent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		expiresAt time.Time
		code      int
		messages  int
	}{
		{name: "expired but not yet deleted", expiresAt: testNow.Add(-time.Second), code: http.StatusAccepted, messages: 1},
		{name: "live", expiresAt: testNow.Add(time.Hour), code: http.StatusOK, messages: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := setupWorld(t, nil, nil)
			_, err := w.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{
				TableName: &w.stack.TableName,
				Item: map[string]ddbtypes.AttributeValue{
					"pk":         &ddbtypes.AttributeValueMemberS{Value: job.DeliveryKey(guid)},
					"event":      &ddbtypes.AttributeValueMemberS{Value: "workflow_job"},
					"expires_at": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(tt.expiresAt.Unix(), 10)},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if code := w.deliver(t, "queued", guid, nil); code != tt.code {
				t.Fatalf("status %d, want %d", code, tt.code)
			}
			if msgs := w.messages(t); len(msgs) != tt.messages {
				t.Fatalf("%d messages, want %d", len(msgs), tt.messages)
			}
			if tt.messages == 1 {
				exp := w.deliveryKey(t, guid)["expires_at"].(*ddbtypes.AttributeValueMemberN).Value
				if want := strconv.FormatInt(testNow.Add(store.DefaultDedupTTL).Unix(), 10); exp != want {
					t.Errorf("dedup key not renewed: expires_at %s, want %s", exp, want)
				}
			}
		})
	}
}

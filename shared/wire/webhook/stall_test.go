package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/webhook"
)

// stallFirst is an AWS endpoint whose first request of target never
// answers (until the test ends) and whose later ones answer with body.
func stallFirst(t *testing.T, target string, answer func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == target && calls.Add(1) == 1 {
			select { // a stalled connection
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		answer(w, r)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv, &calls
}

// TestColdStartRetriesAStalledPoolsRead: the cold start's read of
// RUNNER_POOLS_PARAMETER runs under a bound, each attempt under a bound
// of its own: an SSM request that never answers is cut and sent again,
// and the start succeeds. The SDK's own client waits without limit, so
// the start hung past Lambda's 10 s init limit (an audit).
func TestColdStartRetriesAStalledPoolsRead(t *testing.T) {
	t.Parallel()
	srv, calls := stallFirst(t, "AmazonSSM.GetParameter", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"Parameter":{"Name":"/ghclaim/pools","Type":"String","Version":1,"Value":` +
			`"[{\"name\":\"linux\",\"labels\":[\"self-hosted\",\"linux\"],\"scope\":\"repo\",\"runner_group_id\":1,\"provisioner\":{\"type\":\"dispatch\",\"queue_url\":\"http://127.0.0.1:1/000000000000/d\"}}]"}}`))
	})
	vars := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL": srv.URL, "TABLE_NAME": "jobs", "CLAIMS_QUEUE_URL": "http://127.0.0.1:1/000000000000/claims",
		"RUNNER_POOLS_PARAMETER": "/ghclaim/pools", "WEBHOOK_SECRET": "s",
	}
	done := make(chan error, 1)
	go func() {
		_, err := webhook.New(context.Background(), wire.Env{Getenv: func(k string) string { return vars[k] }, Out: io.Discard, Now: time.Now})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil || calls.Load() < 2 {
			t.Fatalf("cold start: %v after %d GetParameter attempt(s); want the stalled one cut and the next one read", err, calls.Load())
		}
	case <-time.After(30 * time.Second): // a hang, not a measurement
		t.Fatalf("cold start hangs on a stalled GetParameter (%d attempt(s) sent)", calls.Load())
	}
}

// TestStalledPutIsRetriedWithinTheDelivery: a delivery's AWS requests
// are bounded per attempt, so the job record's PutItem that stalls is
// retried within the delivery's 8 s and the delivery is answered 2xx
// (here the claim message's send is refused: the record is the outbox).
// Unbounded, the stall used the whole budget up and GitHub got a 500,
// which it never sends again (an audit).
func TestStalledPutIsRetriedWithinTheDelivery(t *testing.T) {
	t.Parallel()
	req := fixture(t, "webhook-queued.json")
	srv, puts := stallFirst(t, "DynamoDB_20120810.PutItem", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.PutItem" {
			_, _ = w.Write([]byte(`{}`))
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`))
	})
	vars := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL": srv.URL, "TABLE_NAME": "jobs", "CLAIMS_QUEUE_URL": srv.URL + "/000000000000/claims",
		"RUNNER_POOLS":   `[{"name":"linux","labels":["self-hosted","linux","x64"],"scope":"repo","runner_group_id":1,"provisioner":{"type":"dispatch","queue_url":"http://127.0.0.1:1/000000000000/d"}}]`,
		"WEBHOOK_SECRET": "ghclaim-local-secret",
	}
	h, err := webhook.New(context.Background(), wire.Env{
		Getenv: func(k string) string { return vars[k] }, Out: io.Discard,
		Now: func() time.Time { return time.Date(2026, 11, 30, 9, 0, 1, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.Handle(context.Background(), req)
	if err != nil || resp.StatusCode/100 != 2 || puts.Load() < 2 {
		t.Fatalf("delivery answered %d (%v) after %d PutItem attempt(s): want the stalled attempt retried and 2xx; body %s",
			resp.StatusCode, err, puts.Load(), resp.Body)
	}
}

package claimer_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/claimer"
)

// TestStalledKeyReadIsRetried: the claimer reads the App key before each
// batch. The first GetSecretValue attempt stalls (a dead keep-alive
// connection after the environment was frozen) and would never answer:
// the wired client cuts it (wire.SecretAttemptTimeout) and asks again,
// and the batch is held (the key is not set yet) within the invocation.
// With the SDK's default client the attempt was never cut: the batch was
// answered at Lambda's deadline, which fails it whole (a review proved it).
func TestStalledKeyReadIsRetried(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.Header.Get("X-Amz-Target") {
		case "secretsmanager.GetSecretValue":
			if gets.Add(1) == 1 { // stalled until the client gives up
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret value for staging label: AWSCURRENT"}`))
		default: // the hold's ChangeMessageVisibility
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	vars := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL": srv.URL, "TABLE_NAME": "jobs", "CLAIMS_QUEUE_URL": srv.URL + "/000000000000/claims",
		"RUNNER_POOLS":  `[{"name":"linux","labels":["self-hosted","linux"],"provisioner":{"type":"dispatch","queue_url":"http://127.0.0.1:1/000000000000/d"}}]`,
		"GITHUB_APP_ID": "42", "GITHUB_APP_PRIVATE_KEY_ARN": "arn:aws:secretsmanager:us-east-1:000000000000:secret:key",
		"GITHUB_API_URL": "http://127.0.0.1:1",
	}
	h, err := claimer.New(context.Background(), wire.Env{Getenv: func(k string) string { return vars[k] }, Out: io.Discard, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	// The invocation's time: long enough for a cut attempt and a retry,
	// bounding the test if the attempt is never cut.
	ctx, cancel := context.WithTimeout(context.Background(), 4*wire.SecretAttemptTimeout)
	defer cancel()
	resp, err := h(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", ReceiptHandle: "rh1", Body: `{"job_id":1,"version":1}`,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs"}}})
	if err != nil || ctx.Err() != nil || gets.Load() < 2 || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("resp %+v, %v, invocation %v, %d GetSecretValue attempts; want the stalled one cut, a second asked, the batch held in time",
			resp, err, ctx.Err(), gets.Load())
	}
}

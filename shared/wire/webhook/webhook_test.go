package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/emftest"
	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/webhook"
)

// TestDecisionLineCarriesTheMetrics: as wired, a delivery writes one line.
// At info it is its decision line, and that line is the delivery's EMF
// document; at a LOG_LEVEL that drops the decision line (warn, error) it is
// the metrics' own EMF line, so quiet logs keep the counts. The ping
// fixture of events/ is signed with the local secret and needs no AWS call.
// The namespace is a stack's name of a credential's shape (32+ characters
// mixing case and digits), which the logger's masking once turned into
// "[redacted]" on the decision line.
func TestDecisionLineCarriesTheMetrics(t *testing.T) {
	t.Parallel()
	const ns = "ghclaim-Production-Runners-eu-west-1"
	req := fixture(t, "webhook-ping.json")
	tests := []struct {
		level    string
		decision bool // the line is the decision line (it has a delivery_id)
	}{
		{level: "info", decision: true},
		{level: "warn"},
		{level: "error"},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{
				"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
				"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "TABLE_NAME": "jobs", "CLAIMS_QUEUE_URL": "http://127.0.0.1:1/000000000000/claims",
				"RUNNER_POOLS":   `[{"name":"linux","labels":["self-hosted","linux"],"scope":"repo","runner_group_id":1,"provisioner":{"type":"dispatch","queue_url":"http://127.0.0.1:1/000000000000/d"}}]`,
				"WEBHOOK_SECRET": "ghclaim-local-secret", "METRICS_NAMESPACE": ns, "LOG_LEVEL": tt.level,
			}
			var out bytes.Buffer
			h, err := webhook.New(context.Background(), wire.Env{
				Getenv: func(k string) string { return vars[k] },
				Out:    &out,
				Now:    func() time.Time { return time.Date(2026, 11, 30, 9, 0, 1, 0, time.UTC) },
			})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h.Handle(context.Background(), req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("got (%d, %v), want 200", resp.StatusCode, err)
			}
			lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
			if len(lines) != 1 {
				t.Fatalf("got %d lines, want one:\n%s", len(lines), out.String())
			}
			var line struct {
				DeliveryID string `json:"delivery_id"`
			}
			if err := json.Unmarshal(lines[0], &line); err != nil {
				t.Fatalf("line %s: %v", lines[0], err)
			}
			if (line.DeliveryID != "") != tt.decision {
				t.Errorf("got %s, want the decision line: %v", lines[0], tt.decision)
			}
			points := emftest.Parse(t, out.Bytes())
			ps := emftest.Select(points, "Deliveries", map[string]string{"function": "webhook", "event": "ping", "outcome": "ping"})
			if len(points) != 1 || len(ps) != 1 || ps[0].Sum() != 1 || ps[0].Namespace != ns {
				t.Errorf("got %+v, want one point: Deliveries 1 for the ping, in namespace %s", points, ns)
			}
		})
	}
}

// recorder is an aws.HTTPClient that records each request's operation and
// answers it with DynamoDB's ResourceNotFoundException (a 400 the SDK
// does not retry), so no request leaves the test.
type recorder struct {
	mu  sync.Mutex
	ops []string
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.ops = append(r.ops, req.Header.Get("X-Amz-Target"))
	r.mu.Unlock()
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`
	return &http.Response{
		StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}, nil
}

// TestAWSRequestsGoThroughEnvHTTPClient: with Env.HTTPClient set (a
// benchmark's counting transport), the wired handler's AWS requests go
// through it, so a benchmark counts what the function ships; the endpoint
// is a closed port, so a request sent any other way would not be seen.
func TestAWSRequestsGoThroughEnvHTTPClient(t *testing.T) {
	t.Parallel()
	req := fixture(t, "webhook-queued.json")
	vars := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "TABLE_NAME": "jobs", "CLAIMS_QUEUE_URL": "http://127.0.0.1:1/000000000000/claims",
		"RUNNER_POOLS":   `[{"name":"linux","labels":["self-hosted","linux","x64"],"scope":"repo","runner_group_id":1,"provisioner":{"type":"dispatch","queue_url":"http://127.0.0.1:1/000000000000/d"}}]`,
		"WEBHOOK_SECRET": "ghclaim-local-secret",
	}
	rec := &recorder{}
	h, err := webhook.New(context.Background(), wire.Env{
		Getenv:     func(k string) string { return vars[k] },
		Out:        io.Discard,
		Now:        func() time.Time { return time.Date(2026, 11, 30, 9, 0, 1, 0, time.UTC) },
		HTTPClient: rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ops) == 0 || rec.ops[0] != "DynamoDB_20120810.PutItem" {
		t.Errorf("Env.HTTPClient saw %q, want the job record's PutItem first", rec.ops)
	}
}

// fixture reads one of events/'s Function URL requests.
func fixture(t *testing.T, name string) events.LambdaFunctionURLRequest {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(src, &req); err != nil {
		t.Fatal(err)
	}
	return req
}

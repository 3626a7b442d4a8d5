package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/webhook"
)

// TestDecisionLineCarriesTheMetrics: as wired, a delivery writes one line,
// its decision line, and that line is the delivery's EMF document (the
// webhook has no metric line of its own). The ping fixture of events/ is
// signed with the local secret and needs no AWS call.
func TestDecisionLineCarriesTheMetrics(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "events", "webhook-ping.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(src, &req); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "TABLE_NAME": "jobs", "CLAIMS_QUEUE_URL": "http://127.0.0.1:1/000000000000/claims",
		"RUNNER_POOLS":   `[{"name":"linux","labels":["self-hosted","linux"],"scope":"repo","runner_group_id":1,"provisioner":{"type":"dispatch","queue_url":"http://127.0.0.1:1/000000000000/d"}}]`,
		"WEBHOOK_SECRET": "ghclaim-local-secret", "METRICS_NAMESPACE": "wire-test",
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
		t.Fatalf("got %d lines, want the decision line alone:\n%s", len(lines), out.String())
	}
	var line struct {
		DeliveryID string `json:"delivery_id"`
		Function   string `json:"function"`
		Deliveries *float64
		AWS        struct {
			CloudWatchMetrics []struct{ Namespace string }
		} `json:"_aws"`
	}
	if err := json.Unmarshal(lines[0], &line); err != nil {
		t.Fatalf("decision line %s: %v", lines[0], err)
	}
	if line.DeliveryID == "" || line.Function != "webhook" || line.Deliveries == nil || *line.Deliveries != 1 {
		t.Errorf("got %s, want the delivery's decision line with function=webhook and Deliveries=1", lines[0])
	}
	if len(line.AWS.CloudWatchMetrics) != 1 || line.AWS.CloudWatchMetrics[0].Namespace != "wire-test" {
		t.Errorf("got %s, want one EMF directive in namespace wire-test", lines[0])
	}
}

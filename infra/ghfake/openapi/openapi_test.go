package openapi_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake/openapi"
)

func load(t *testing.T) *openapi.Description {
	t.Helper()
	d, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// root is the module root, from this package's folder.
const root = "../../.."

// TestFixturePayloads checks every webhook body the repository ships against
// GitHub's webhook description: the Lambda Function URL events of events/
// (body plain or base64) and the payload fixtures of the tests.
func TestFixturePayloads(t *testing.T) {
	t.Parallel()
	d := load(t)
	events, err := filepath.Glob(filepath.Join(root, "events", "webhook-*.json"))
	if err != nil || len(events) == 0 {
		t.Fatalf("no events/webhook-*.json (err %v)", err)
	}
	for _, path := range events {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			var ev struct {
				Headers         map[string]string `json:"headers"`
				Body            string            `json:"body"`
				IsBase64Encoded bool              `json:"isBase64Encoded"`
			}
			readJSON(t, path, &ev)
			body := []byte(ev.Body)
			if ev.IsBase64Encoded {
				if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
					t.Fatal(err)
				}
			}
			event := ev.Headers["x-github-event"]
			if event == "" {
				t.Fatal("no x-github-event header")
			}
			if err := d.Webhook(event, body); err != nil {
				t.Errorf("GitHub's description refuses %s: %v", path, err)
			}
		})
	}

	payloads, err := filepath.Glob(filepath.Join(root, "shared", "webhook", "testdata", "payloads", "*.json"))
	if err != nil || len(payloads) == 0 {
		t.Fatalf("no shared/webhook/testdata/payloads (err %v)", err)
	}
	payloads = append(payloads, filepath.Join(root, "bench", "testdata", "queued.json"))
	for _, path := range payloads {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(path)))+"/"+filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			event := "workflow_job"
			if strings.HasPrefix(filepath.Base(path), "ping") {
				event = "ping"
			}
			if err := d.Webhook(event, b); err != nil {
				t.Errorf("GitHub's description refuses %s: %v", path, err)
			}
		})
	}
}

// TestDescriptionRefuses shows the check has teeth: a fixture stripped of
// a field GitHub always sends, or given a wrong type, is refused.
func TestDescriptionRefuses(t *testing.T) {
	t.Parallel()
	d := load(t)
	b, err := os.ReadFile(filepath.Join(root, "shared", "webhook", "testdata", "payloads", "queued.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		breakIt func(m map[string]any)
	}{
		{name: "no workflow_job.labels", breakIt: func(m map[string]any) { delete(m["workflow_job"].(map[string]any), "labels") }},
		{name: "no repository", breakIt: func(m map[string]any) { delete(m, "repository") }},
		{name: "job id a string", breakIt: func(m map[string]any) { m["workflow_job"].(map[string]any)["id"] = "29679449" }},
		{name: "unknown status", breakIt: func(m map[string]any) { m["workflow_job"].(map[string]any)["status"] = "done" }},
		{name: "started_at not a date-time", breakIt: func(m map[string]any) { m["workflow_job"].(map[string]any)["started_at"] = "yesterday" }},
		{name: "no sender.avatar_url", breakIt: func(m map[string]any) { delete(m["sender"].(map[string]any), "avatar_url") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			tt.breakIt(m)
			broken, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Webhook("workflow_job", broken); err == nil {
				t.Error("Webhook accepted the broken payload, want an error")
			}
		})
	}
	t.Run("undescribed success status", func(t *testing.T) {
		t.Parallel()
		err := d.Response("GET /orgs/{org}/actions/runners", 201, []byte(`{}`))
		if !errors.Is(err, openapi.ErrUndescribed) {
			t.Errorf("got %v, want ErrUndescribed", err)
		}
	})
	t.Run("body on a no-content answer", func(t *testing.T) {
		t.Parallel()
		if err := d.Response("DELETE /orgs/{org}/actions/runners/{runner_id}", 204, []byte(`{}`)); err == nil {
			t.Error("Response accepted a body on 204, want an error")
		}
	})
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

package chaos

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// Delivery is one webhook delivery as GitHub sends it.
type Delivery struct {
	// GUID is X-GitHub-Delivery; a redelivery repeats it.
	GUID string
	// Event is X-GitHub-Event.
	Event string
	// Body is the raw JSON payload.
	Body []byte
}

// Request is the Lambda Function URL event for d, signed with secret.
func (d Delivery) Request(secret []byte) events.LambdaFunctionURLRequest {
	return events.LambdaFunctionURLRequest{
		Version: "2.0",
		RawPath: "/",
		Headers: d.Headers(secret),
		Body:    string(d.Body),
		RequestContext: events.LambdaFunctionURLRequestContext{
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST", Path: "/", Protocol: "HTTP/1.1", SourceIP: "140.82.115.1", UserAgent: "GitHub-Hookshot/chaos"},
		},
	}
}

// Headers are the headers GitHub sends with d (ghfake.DeliveryHeader, for
// the chaos App), lower-cased as a Function URL passes them.
func (d Delivery) Headers(secret []byte) map[string]string {
	h := ghfake.DeliveryHeader(d.Event, d.GUID, appID, d.Body, string(secret))
	out := make(map[string]string, len(h))
	for k := range h {
		out[strings.ToLower(k)] = h.Get(k)
	}
	return out
}

// Job is one workflow job of a run: what its deliveries say.
type Job struct {
	ID             int64
	RunID          int64
	Repo           string // owner/name
	InstallationID int64
	Labels         []string
	Private        bool
}

// Payload is a workflow_job payload for j with action (queued, waiting,
// in_progress, completed); runner names the runner that took the job
// (empty while queued).
func Payload(j Job, action, runner string) []byte {
	owner, name, _ := strings.Cut(j.Repo, "/")
	status := map[string]string{"queued": "queued", "waiting": "waiting", "in_progress": "in_progress", "completed": "completed"}[action]
	var conclusion, runnerName any
	if action == "completed" {
		conclusion = "success"
		if runner == "" {
			conclusion = "cancelled"
		}
	}
	if runner != "" {
		runnerName = runner
	}
	visibility := "public"
	if j.Private {
		visibility = "private"
	}
	p := map[string]any{
		"action": action,
		"workflow_job": map[string]any{
			"id": j.ID, "run_id": j.RunID, "run_attempt": 1, "name": "build", "workflow_name": "CI",
			"head_branch": "main", "status": status, "conclusion": conclusion, "labels": j.Labels,
			"runner_name": runnerName, "runner_id": nil, "runner_group_id": nil, "steps": []any{},
			"url": fmt.Sprintf("https://api.github.com/repos/%s/actions/jobs/%d", j.Repo, j.ID),
		},
		"repository": map[string]any{
			"id": 186853002, "name": name, "full_name": j.Repo, "private": j.Private, "visibility": visibility,
			"owner": map[string]any{"login": owner, "type": "Organization"},
		},
		"organization": map[string]any{"login": owner},
		"sender":       map[string]any{"login": "octocat", "type": "User"},
		"installation": map[string]any{"id": j.InstallationID},
	}
	b, _ := json.Marshal(p) // maps of plain values always marshal
	return b
}

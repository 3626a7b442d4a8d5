package claim_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/job"
)

// offlineUndeletable is a GitHub where the job's runner name is taken (409)
// by an offline runner whose delete GitHub answers with status and message
// (deleteRefused).
type offlineUndeletable struct {
	deleteRefused
}

func (g *offlineUndeletable) GenerateJIT(ctx context.Context, installationID int64, req ghapp.JITRequest) (ghapp.JIT, error) {
	return ghapp.JIT{}, &github.ErrorResponse{Message: "Already exists - A runner with the name already exists.",
		Response: &http.Response{StatusCode: http.StatusConflict, Header: http.Header{"X-Github-Request-Id": {"1"}},
			Request: &http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/repos/octo/repo/actions/runners/generate-jitconfig"}}}}
}

func (g *offlineUndeletable) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	return ghapp.Runner{ID: 77, Name: name, Status: "offline"}, nil
}

// TestOfflineRunnersRefusedDelete: the claim's 409 finds the offline
// runner that holds the job's name, whose machine is down, and GitHub
// refuses its delete.
//   - A 422 that is no busy runner's (ghapp.IsStillRunning) must not fail
//     the job for good (it may be a busy answer in words not known here,
//     and a retry meets the same name): the job is claimed with that
//     runner, for the liveness check to replace if it never runs.
//   - Any other failure (a 5xx here) is retried: claimed with a runner no
//     machine holds, the job would wait out runner_start_grace for a
//     runner that never connects, where a retry deletes it.
func TestOfflineRunnersRefusedDelete(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		status  int
		message string
		id      int64
		check   func(r job.Record) bool
		want    string
	}{
		{name: "another 422", status: http.StatusUnprocessableEntity, message: "Validation failed, or the endpoint has been spammed.", id: 2701,
			check: func(r job.Record) bool { return r.State == job.Claimed && r.RunnerName != "" },
			want:  "claimed with the runner of its name"},
		{name: "502", status: http.StatusBadGateway, message: "Bad Gateway", id: 2702,
			check: func(r job.Record) bool {
				return r.State == job.Queued && r.Attempt == 1 && r.LastErrorClass == "server_side"
			},
			want: "queued for a retry of the 502"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, setupOpt{})
			gh := &offlineUndeletable{deleteRefused{status: tt.status, message: tt.message}}
			c := h.claimer(t, claimerOpt{instance: "a", seed: 1, github: func(g claim.GitHub) claim.GitHub { gh.GitHub = g; return gh }})
			h.seed(t, tt.id)
			h.invoke(t, c, h.receive(t, 1)...)
			r := h.get(t, tt.id)
			if gh.deletes != 1 {
				t.Fatalf("%d deletes of the offline runner, want 1", gh.deletes)
			}
			if !tt.check(r) {
				t.Fatalf("record %s attempt %d runner %q class %q (%q), want %s", r.State, r.Attempt, r.RunnerName, r.LastErrorClass, r.LastError, tt.want)
			}
		})
	}
}

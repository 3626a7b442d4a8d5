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
// by an offline runner whose delete GitHub refuses with a 422 that is not
// the busy runner's answer (its generic "Validation failed").
type offlineUndeletable struct {
	claim.GitHub
	deletes int
}

func (g *offlineUndeletable) GenerateJIT(ctx context.Context, installationID int64, req ghapp.JITRequest) (ghapp.JIT, error) {
	return ghapp.JIT{}, &github.ErrorResponse{Message: "Already exists - A runner with the name already exists.",
		Response: &http.Response{StatusCode: http.StatusConflict, Header: http.Header{"X-Github-Request-Id": {"1"}},
			Request: &http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/repos/octo/repo/actions/runners/generate-jitconfig"}}}}
}

func (g *offlineUndeletable) FindRunner(ctx context.Context, installationID int64, scope, owner, repo, name string) (ghapp.Runner, error) {
	return ghapp.Runner{ID: 77, Name: name, Status: "offline"}, nil
}

func (g *offlineUndeletable) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, id int64) error {
	g.deletes++
	return &github.ErrorResponse{Message: "Validation failed, or the endpoint has been spammed.",
		Response: &http.Response{StatusCode: http.StatusUnprocessableEntity, Header: http.Header{"X-Github-Request-Id": {"2"}},
			Request: &http.Request{Method: http.MethodDelete, URL: &url.URL{Path: "/repos/octo/repo/actions/runners/77"}}}}
}

// TestUnexpected422OnTheOfflineRunnersDeleteKeepsTheJob: a 422 on deleting
// the offline runner that holds the job's name is no busy runner
// (ghapp.IsStillRunning), yet it must not fail the job for good (it may be
// a busy answer in words not known here, and a retry meets the same name):
// the job is claimed with that runner, for the liveness check to replace
// if it never runs.
func TestUnexpected422OnTheOfflineRunnersDeleteKeepsTheJob(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	gh := &offlineUndeletable{}
	c := h.claimer(t, claimerOpt{instance: "a", seed: 1, github: func(g claim.GitHub) claim.GitHub { gh.GitHub = g; return gh }})
	h.seed(t, 2701)
	h.invoke(t, c, h.receive(t, 1)...)
	r := h.get(t, 2701)
	if gh.deletes != 1 {
		t.Fatalf("%d deletes of the offline runner, want 1", gh.deletes)
	}
	if r.State != job.Claimed || r.RunnerName == "" {
		t.Fatalf("record %s runner %q error %q (%s), want claimed with the runner of its name", r.State, r.RunnerName, r.LastError, r.LastErrorClass)
	}
}

// offlineDeleteFails is offlineUndeletable whose delete GitHub answers 502.
type offlineDeleteFails struct{ offlineUndeletable }

func (g *offlineDeleteFails) DeleteRunner(ctx context.Context, installationID int64, scope, owner, repo string, id int64) error {
	g.deletes++
	return &github.ErrorResponse{Message: "Bad Gateway",
		Response: &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{"X-Github-Request-Id": {"3"}},
			Request: &http.Request{Method: http.MethodDelete, URL: &url.URL{Path: "/repos/octo/repo/actions/runners/77"}}}}
}

// TestFailedDeleteOfTheOfflineRunnerIsRetried: only a 422 on that delete
// claims with the offline runner (a busy answer in other words); any
// other failure (a 5xx here) leaves an offline runner with no machine in
// the way, which a retry deletes: claimed with it, the job would wait out
// runner_start_grace for a runner that never connects.
func TestFailedDeleteOfTheOfflineRunnerIsRetried(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	gh := &offlineDeleteFails{}
	c := h.claimer(t, claimerOpt{instance: "a", seed: 1, github: func(g claim.GitHub) claim.GitHub { gh.GitHub = g; return gh }})
	h.seed(t, 2702)
	h.invoke(t, c, h.receive(t, 1)...)
	r := h.get(t, 2702)
	if gh.deletes != 1 {
		t.Fatalf("%d deletes of the offline runner, want 1", gh.deletes)
	}
	if r.State != job.Queued || r.Attempt != 1 || r.LastErrorClass != "server_side" {
		t.Fatalf("record %s attempt %d class %q (%q), want queued for a retry of the 502", r.State, r.Attempt, r.LastErrorClass, r.LastError)
	}
}

package ghfake_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/ghfake/openapi"
)

// TestAnswersMatchGitHubDescription drives every route ghclaim calls over
// HTTP and checks each answer, status and body, against GitHub's published
// OpenAPI description of that route (infra/ghfake/openapi): a success and
// every error the fake gives, including the ones any route can give (bad
// credentials, rate limits, injected faults), which GitHub sends in its
// generic error shape.
func TestAnswersMatchGitHubDescription(t *testing.T) {
	t.Parallel()
	desc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	const jit = `{"name":"pool-1","runner_group_id":1,"labels":["self-hosted","linux"],"work_folder":"_work"}`
	iat := t0.Add(-30 * time.Second).Unix()
	goodJWT := func(t *testing.T) string {
		return signJWT(t, key(t), map[string]any{"iss": appID, "iat": iat, "exp": iat + 600})
	}
	// register makes runner pool-1 in a scope, optionally busy.
	register := func(org bool, busy bool) func(t *testing.T, f fixture) {
		return func(t *testing.T, f fixture) {
			t.Helper()
			var err error
			if org {
				_, _, err = f.gh.Actions.GenerateOrgJITConfig(context.Background(), "octo", jitReq("pool-1"))
			} else {
				_, _, err = f.gh.Actions.GenerateRepoJITConfig(context.Background(), "octo", "hello", jitReq("pool-1"))
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := f.fake.SetRunner("pool-1", "online", busy); err != nil {
				t.Fatal(err)
			}
		}
	}
	job := func(j ghfake.Job) func(t *testing.T, f fixture) {
		return func(t *testing.T, f fixture) { f.fake.SetJob("octo", "hello", j) }
	}
	// deliveries logs three: delivered, refused with a 503, unreached.
	deliveries := func(t *testing.T, f fixture) {
		body := ghfake.WorkflowJobPayload(ghfake.Delivery{Action: "queued", Repo: "octo/hello", JobID: 9, RunID: 3, Labels: []string{"self-hosted"}, Installation: inst})
		for _, code := range []int{200, 503} {
			f.fake.SetWebhook(func(context.Context, http.Header, []byte) (int, []byte, error) {
				return code, []byte(`{"status":"x"}`), nil
			}, "s3cret")
			f.fake.Deliver(context.Background(), "workflow_job", "", body)
		}
		f.fake.SetWebhook(nil, "s3cret")
		f.fake.Deliver(context.Background(), "workflow_job", "", body)
	}
	tests := []struct {
		name   string
		route  string
		path   string
		body   string
		jwt    func(t *testing.T) string // App JWT instead of an installation token
		token  string                    // overrides the installation token
		prep   func(t *testing.T, f fixture)
		code   bool // path's {code} is a fresh manifest code
		status int
	}{
		{name: "token", route: ghfake.RouteAccessToken, path: "/app/installations/77/access_tokens", jwt: goodJWT, status: 201},
		{name: "token bad JWT", route: ghfake.RouteAccessToken, path: "/app/installations/77/access_tokens",
			jwt: func(*testing.T) string { return "not.a.jwt" }, status: 401},
		{name: "app", route: ghfake.RouteApp, path: "/app", jwt: goodJWT, status: 200},
		{name: "app bad JWT", route: ghfake.RouteApp, path: "/app", jwt: func(*testing.T) string { return "not.a.jwt" }, status: 401},
		{name: "installations", route: ghfake.RouteInstallations, path: "/app/installations", jwt: goodJWT, status: 200,
			prep: func(t *testing.T, f fixture) {
				f.fake.AddInstallation(ghfake.Installation{ID: 77, Account: "octo", Org: true})
				f.fake.AddInstallation(ghfake.Installation{ID: 78, Account: "mona"})
			}},
		{name: "installations one suspended", route: ghfake.RouteInstallations, path: "/app/installations", jwt: goodJWT, status: 200,
			prep: func(t *testing.T, f fixture) {
				f.fake.AddInstallation(ghfake.Installation{ID: 77, Account: "octo", Org: true})
				f.fake.AddInstallation(ghfake.Installation{ID: 78, Account: "mona"})
				f.fake.Suspend(77)
			}},
		{name: "installations bad JWT", route: ghfake.RouteInstallations, path: "/app/installations",
			jwt: func(*testing.T) string { return "not.a.jwt" }, status: 401},
		{name: "installation repositories", route: ghfake.RouteInstallRepos, path: "/installation/repositories", status: 200,
			prep: func(t *testing.T, f fixture) { f.fake.SetInstallation(inst, "octo", true, "hello", "world") }},
		{name: "token unknown installation", route: ghfake.RouteAccessToken, path: "/app/installations/0/access_tokens", jwt: goodJWT, status: 404},
		{name: "token installation removed", route: ghfake.RouteAccessToken, path: "/app/installations/77/access_tokens", jwt: goodJWT, status: 404,
			prep: func(t *testing.T, f fixture) { f.fake.Uninstall(77) }},
		{name: "token installation suspended", route: ghfake.RouteAccessToken, path: "/app/installations/77/access_tokens", jwt: goodJWT, status: 403,
			prep: func(t *testing.T, f fixture) { f.fake.Suspend(77) }},

		{name: "repo jit", route: ghfake.RouteRepoJIT, path: "/repos/octo/hello/actions/runners/generate-jitconfig", body: jit, status: 201},
		{name: "repo jit name taken", route: ghfake.RouteRepoJIT, path: "/repos/octo/hello/actions/runners/generate-jitconfig", body: jit,
			prep: register(false, false), status: 409},
		{name: "repo jit no name", route: ghfake.RouteRepoJIT, path: "/repos/octo/hello/actions/runners/generate-jitconfig",
			body: `{"runner_group_id":1,"labels":["x"]}`, status: 422},
		{name: "repo jit bad JSON", route: ghfake.RouteRepoJIT, path: "/repos/octo/hello/actions/runners/generate-jitconfig",
			body: `{`, status: 400},
		{name: "org jit", route: ghfake.RouteOrgJIT, path: "/orgs/octo/actions/runners/generate-jitconfig", body: jit, status: 201},
		{name: "org jit name taken", route: ghfake.RouteOrgJIT, path: "/orgs/octo/actions/runners/generate-jitconfig", body: jit,
			prep: register(true, false), status: 409},
		{name: "org jit no labels", route: ghfake.RouteOrgJIT, path: "/orgs/octo/actions/runners/generate-jitconfig",
			body: `{"name":"a","runner_group_id":1}`, status: 422},
		{name: "org jit unknown group", route: ghfake.RouteOrgJIT, path: "/orgs/octo/actions/runners/generate-jitconfig",
			body: `{"name":"a","runner_group_id":9,"labels":["x"]}`, status: 422},

		{name: "repo runners", route: ghfake.RouteRepoRunners, path: "/repos/octo/hello/actions/runners?name=pool-1", prep: register(false, true), status: 200},
		{name: "repo runners none", route: ghfake.RouteRepoRunners, path: "/repos/octo/hello/actions/runners", status: 200},
		{name: "org runners", route: ghfake.RouteOrgRunners, path: "/orgs/octo/actions/runners?per_page=1", prep: register(true, false), status: 200},
		{name: "repo runner", route: ghfake.RouteRepoRunner, path: "/repos/octo/hello/actions/runners/1", prep: register(false, false), status: 200},
		{name: "repo runner unknown", route: ghfake.RouteRepoRunner, path: "/repos/octo/hello/actions/runners/1", status: 404},
		{name: "org runner", route: ghfake.RouteOrgRunner, path: "/orgs/octo/actions/runners/1", prep: register(true, true), status: 200},
		{name: "org runner unknown", route: ghfake.RouteOrgRunner, path: "/orgs/octo/actions/runners/1", status: 404},
		{name: "repo delete", route: ghfake.RouteRepoDeleteRunner, path: "/repos/octo/hello/actions/runners/1", prep: register(false, false), status: 204},
		{name: "repo delete busy", route: ghfake.RouteRepoDeleteRunner, path: "/repos/octo/hello/actions/runners/1", prep: register(false, true), status: 422},
		{name: "repo delete unknown", route: ghfake.RouteRepoDeleteRunner, path: "/repos/octo/hello/actions/runners/1", status: 404},
		{name: "org delete", route: ghfake.RouteOrgDeleteRunner, path: "/orgs/octo/actions/runners/1", prep: register(true, false), status: 204},
		{name: "org delete busy", route: ghfake.RouteOrgDeleteRunner, path: "/orgs/octo/actions/runners/1", prep: register(true, true), status: 422},

		{name: "job queued", route: ghfake.RouteJob, path: "/repos/octo/hello/actions/jobs/9",
			prep: job(ghfake.Job{ID: 9, Status: "queued", Labels: []string{"self-hosted"}}), status: 200},
		{name: "job in progress", route: ghfake.RouteJob, path: "/repos/octo/hello/actions/jobs/9",
			prep: job(ghfake.Job{ID: 9, RunID: 3, Name: "build", Status: "in_progress", Labels: []string{"linux"}, RunnerID: 5, RunnerName: "pool-9"}), status: 200},
		{name: "job completed", route: ghfake.RouteJob, path: "/repos/octo/hello/actions/jobs/9",
			prep: job(ghfake.Job{ID: 9, RunID: 3, Status: "completed", Conclusion: "cancelled"}), status: 200},
		{name: "job unknown", route: ghfake.RouteJob, path: "/repos/octo/hello/actions/jobs/9", status: 404},

		{name: "repo", route: ghfake.RouteRepo, path: "/repos/octo/hello", status: 200},
		{name: "repo public of a user", route: ghfake.RouteRepo, path: "/repos/mona/hello", status: 200,
			prep: func(t *testing.T, f fixture) {
				f.fake.SetRepo("mona", "hello", ghfake.Repo{Visibility: "public", User: true})
			}},
		{name: "repo internal", route: ghfake.RouteRepo, path: "/repos/octo/hello", status: 200,
			prep: func(t *testing.T, f fixture) { f.fake.SetRepo("octo", "hello", ghfake.Repo{Visibility: "internal"}) }},
		{name: "repo outside the installation", route: ghfake.RouteRepo, path: "/repos/octo/hello", status: 404,
			prep: func(t *testing.T, f fixture) { f.fake.SetInstallation(inst, "octo", true, "world") }},

		{name: "manifest conversion", route: ghfake.RouteManifestConversion, path: "/app-manifests/{code}/conversions", code: true, status: 201},
		{name: "manifest conversion unknown code", route: ghfake.RouteManifestConversion, path: "/app-manifests/0123abcd/conversions", status: 404},
		{name: "deliveries", route: ghfake.RouteDeliveries, path: "/app/hook/deliveries?per_page=2", jwt: goodJWT, prep: deliveries, status: 200},
		{name: "deliveries last page", route: ghfake.RouteDeliveries, path: "/app/hook/deliveries?per_page=2&cursor=v1_2", jwt: goodJWT, prep: deliveries, status: 200},
		{name: "deliveries none", route: ghfake.RouteDeliveries, path: "/app/hook/deliveries", jwt: goodJWT, status: 200},
		{name: "deliveries bad cursor", route: ghfake.RouteDeliveries, path: "/app/hook/deliveries?cursor=zz", jwt: goodJWT, status: 400},
		{name: "deliveries bad status", route: ghfake.RouteDeliveries, path: "/app/hook/deliveries?status=failed", jwt: goodJWT, status: 422},
		{name: "deliveries installation token", route: ghfake.RouteDeliveries, path: "/app/hook/deliveries", status: 401},
		{name: "deliveries app rate limit", route: ghfake.RouteDeliveries, path: "/app/hook/deliveries", jwt: goodJWT, status: 403,
			prep: func(t *testing.T, f fixture) { f.fake.SetAppRateLimit(5000, 0, t0.Add(time.Hour)) }},
		{name: "delivery", route: ghfake.RouteDelivery, path: "/app/hook/deliveries/1", jwt: goodJWT, prep: deliveries, status: 200},
		{name: "delivery unknown", route: ghfake.RouteDelivery, path: "/app/hook/deliveries/9", jwt: goodJWT, status: 404},
		{name: "redeliver", route: ghfake.RouteRedeliver, path: "/app/hook/deliveries/2/attempts", jwt: goodJWT, prep: deliveries, status: 202},
		{name: "redeliver unknown", route: ghfake.RouteRedeliver, path: "/app/hook/deliveries/9/attempts", jwt: goodJWT, status: 404},

		// Answers any route can give.
		{name: "bad credentials", route: ghfake.RouteRepoRunners, path: "/repos/octo/hello/actions/runners", token: "ghs_nope", status: 401},
		{name: "rate limit", route: ghfake.RouteRepoRunners, path: "/repos/octo/hello/actions/runners", status: 403,
			prep: func(t *testing.T, f fixture) { f.fake.SetRateLimit(inst, 10, 0, t0.Add(time.Hour)) }},
		{name: "secondary rate limit", route: ghfake.RouteRepoJIT, path: "/repos/octo/hello/actions/runners/generate-jitconfig", body: jit, status: 403,
			prep: func(t *testing.T, f fixture) { f.fake.Fail(ghfake.RouteAny, 1, ghfake.SecondaryRateLimit(time.Minute)) }},
		{name: "too many requests", route: ghfake.RouteJob, path: "/repos/octo/hello/actions/jobs/9", status: 429,
			prep: func(t *testing.T, f fixture) { f.fake.Fail(ghfake.RouteAny, 1, ghfake.TooManyRequests(time.Second)) }},
		{name: "server error after effect", route: ghfake.RouteOrgJIT, path: "/orgs/octo/actions/runners/generate-jitconfig", body: jit, status: 502,
			prep: func(t *testing.T, f fixture) { f.fake.Fail(ghfake.RouteAny, 1, ghfake.ServerError(502).AfterEffect()) }},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		if tt.status < 300 {
			covered[tt.route] = true
		}
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			if tt.prep != nil {
				tt.prep(t, f)
			}
			method, _, _ := strings.Cut(tt.route, " ")
			path := tt.path
			if tt.code {
				path = strings.Replace(path, "{code}", manifestCode(t, f.srv.URL, "/settings/apps/new", testManifest), 1)
			}
			req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			auth := "token " + f.fake.IssueToken(inst)
			switch {
			case tt.jwt != nil:
				auth = "Bearer " + tt.jwt(t)
			case tt.token != "":
				auth = "token " + tt.token
			}
			req.Header.Set("Authorization", auth)
			req.Header.Set("Accept", "application/vnd.github+json")
			resp, err := web.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d (body %s)", resp.StatusCode, tt.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); len(bytes.TrimSpace(body)) > 0 && !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if err := desc.Response(tt.route, resp.StatusCode, body); err != nil {
				t.Errorf("GitHub's description refuses the answer: %v\nbody: %s", err, body)
			}
		})
	}
	for _, r := range []string{
		ghfake.RouteAccessToken, ghfake.RouteApp, ghfake.RouteInstallations, ghfake.RouteRepoJIT, ghfake.RouteOrgJIT, ghfake.RouteRepoRunners, ghfake.RouteOrgRunners,
		ghfake.RouteRepoRunner, ghfake.RouteOrgRunner, ghfake.RouteRepoDeleteRunner, ghfake.RouteOrgDeleteRunner, ghfake.RouteJob,
		ghfake.RouteRepo, ghfake.RouteManifestConversion,
		ghfake.RouteDeliveries, ghfake.RouteDelivery, ghfake.RouteRedeliver, ghfake.RouteInstallRepos,
	} {
		if !covered[r] {
			t.Errorf("no success case for %s", r)
		}
		if len(desc.Statuses(r)) == 0 {
			t.Errorf("GitHub's description has no answer for %s", r)
		}
	}
}

// TestWorkflowJobPayloadMatchesGitHubDescription checks the deliveries the
// test kits build against GitHub's webhook description, for every action.
func TestWorkflowJobPayloadMatchesGitHubDescription(t *testing.T) {
	t.Parallel()
	desc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	base := ghfake.Delivery{Repo: "octo-org/octo-repo", Private: true, JobID: 29679449, RunID: 10416386539,
		Labels: []string{"self-hosted", "linux"}, Installation: 42}
	tests := []struct {
		name string
		mod  func(d *ghfake.Delivery)
	}{
		{name: "queued", mod: func(d *ghfake.Delivery) { d.Action = "queued" }},
		{name: "waiting", mod: func(d *ghfake.Delivery) { d.Action = "waiting" }},
		{name: "in_progress", mod: func(d *ghfake.Delivery) { d.Action, d.RunnerName = "in_progress", "pool-1" }},
		{name: "completed", mod: func(d *ghfake.Delivery) { d.Action, d.RunnerName = "completed", "pool-1" }},
		{name: "completed before a runner", mod: func(d *ghfake.Delivery) { d.Action = "completed" }},
		{name: "public, no installation", mod: func(d *ghfake.Delivery) { d.Action, d.Private, d.Installation = "in_progress", false, 0 }},
		{name: "user's repository", mod: func(d *ghfake.Delivery) { d.Action, d.Repo, d.UserOwned = "queued", "octocat/hello", true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := base
			tt.mod(&d)
			body := ghfake.WorkflowJobPayload(d)
			if err := desc.Webhook("workflow_job", body); err != nil {
				t.Errorf("GitHub's description refuses the payload: %v\nbody: %s", err, body)
			}
		})
	}
}

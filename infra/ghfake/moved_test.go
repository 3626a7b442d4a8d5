package ghfake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/ghfake/openapi"
)

// noFollow is a client that hands back a redirect instead of following it.
var noFollow = &http.Client{Transport: web.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// send sends method base+path with an installation token of inst, without
// following a redirect, and returns the answer with its body read.
func send(t *testing.T, f fixture, method, base, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+f.fake.IssueToken(inst))
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// repoID is the id GET /repos/{owner}/{repo} reports.
func repoID(t *testing.T, f fixture, owner, name string) int64 {
	t.Helper()
	r, _, err := f.gh.Repositories.Get(context.Background(), owner, name)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetID() == 0 {
		t.Fatalf("repository %s/%s has no id", owner, name)
	}
	return r.GetID()
}

// TestRenamedRepoRedirects: every repository route named by the old
// owner/name is answered as GitHub answers it: 301 for a GET, 307 for
// another method, to the same path and query under /repositories/{id},
// with GitHub's body naming it and the rate headers of any answer; it
// changes nothing, and counts as a call of its route and a redirect.
func TestRenamedRepoRedirects(t *testing.T) {
	t.Parallel()
	desc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	const jit = `{"name":"pool-1","runner_group_id":1,"labels":["self-hosted","linux"]}`
	tests := []struct {
		name, route, method, rest, body string
		status                          int
		message                         string
	}{
		{name: "repository", route: ghfake.RouteRepo, method: "GET", status: 301, message: "Moved Permanently"},
		{name: "runners", route: ghfake.RouteRepoRunners, method: "GET", rest: "/actions/runners?name=pool-1&per_page=100",
			status: 301, message: "Moved Permanently"},
		{name: "runner", route: ghfake.RouteRepoRunner, method: "GET", rest: "/actions/runners/1", status: 301, message: "Moved Permanently"},
		{name: "job", route: ghfake.RouteJob, method: "GET", rest: "/actions/jobs/9", status: 301, message: "Moved Permanently"},
		{name: "jit", route: ghfake.RouteRepoJIT, method: "POST", rest: "/actions/runners/generate-jitconfig", body: jit,
			status: 307, message: "Temporary Redirect"},
		{name: "delete", route: ghfake.RouteRepoDeleteRunner, method: "DELETE", rest: "/actions/runners/1", status: 307, message: "Temporary Redirect"},
	}
	for _, prefix := range []string{"", "/api/v3"} {
		for _, tt := range tests {
			t.Run(tt.name+prefix, func(t *testing.T) {
				t.Parallel()
				var opts []ghfake.Option
				if prefix != "" {
					opts = append(opts, ghfake.WithPathPrefix(prefix))
				}
				f := setup(t, opts...)
				f.gh = client(t, f.srv.URL+prefix+"/", f.fake.IssueToken(inst))
				if _, _, err := f.gh.Actions.GenerateRepoJITConfig(context.Background(), "octo", "hello", jitReq("pool-1")); err != nil {
					t.Fatal(err)
				}
				f.fake.SetJob("octo", "hello", ghfake.Job{ID: 9, Status: "queued"})
				id := repoID(t, f, "octo", "hello")
				f.fake.RenameRepo("octo", "hello", "octo", "world")
				before := f.fake.Stats()

				resp, body := send(t, f, tt.method, f.srv.URL+prefix, "/repos/octo/hello"+tt.rest, tt.body)
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d, want %d (body %s)", resp.StatusCode, tt.status, body)
				}
				want := fmt.Sprintf("%s%s/repositories/%d%s", f.srv.URL, prefix, id, tt.rest)
				if loc := resp.Header.Get("Location"); loc != want {
					t.Errorf("Location %q, want %q", loc, want)
				}
				var got struct {
					Message          string `json:"message"`
					URL              string `json:"url"`
					DocumentationURL string `json:"documentation_url"`
				}
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("body %s: %v", body, err)
				}
				if got.Message != tt.message || got.URL != want || !strings.Contains(got.DocumentationURL, "follow-redirects") {
					t.Errorf("body %s, want message %q, url %q and the documentation of redirects", body, tt.message, want)
				}
				if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get("X-RateLimit-Remaining") == "" {
					t.Errorf("Content-Type %q, X-RateLimit-Remaining %q: want JSON with the rate headers",
						resp.Header.Get("Content-Type"), resp.Header.Get("X-RateLimit-Remaining"))
				}
				if tt.route == ghfake.RouteRepo {
					if err := desc.Response(tt.route, resp.StatusCode, body); err != nil {
						t.Errorf("GitHub's description refuses the answer: %v", err)
					}
				}
				after := f.fake.Stats()
				if after.Calls[tt.route]-before.Calls[tt.route] != 1 || after.Redirects[tt.route]-before.Redirects[tt.route] != 1 {
					t.Errorf("calls %d → %d, redirects %d → %d of %s: want one more of each",
						before.Calls[tt.route], after.Calls[tt.route], before.Redirects[tt.route], after.Redirects[tt.route], tt.route)
				}
				if rs := f.fake.Runners(); len(rs) != 1 || rs[0].Name != "pool-1" || rs[0].Repo != "world" {
					t.Errorf("runners %+v, want pool-1 alone, moved to octo/world: the redirect changes nothing", rs)
				}
			})
		}
	}
}

// TestRepositoriesByIDIsTheRenamedRepo: /repositories/{id}/… serves the
// repository at its current name, the same runners and jobs as
// /repos/{new owner}/{new name}/…: a runner registered before a transfer
// is found, and deleted, by either; one registered through the id is
// listed under the new name. The id does not change with the name.
func TestRepositoriesByIDIsTheRenamedRepo(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	before, _, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", jitReq("pool-1"))
	if err != nil {
		t.Fatal(err)
	}
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 9, Status: "in_progress", RunnerName: "pool-1", RunnerID: before.GetRunner().GetID()})
	id := repoID(t, f, "octo", "hello")
	f.fake.RenameRepo("octo", "hello", "mona", "world")
	if got := repoID(t, f, "mona", "world"); got != id {
		t.Fatalf("id %d after the transfer, want %d", got, id)
	}
	byID := client(t, f.srv.URL+"/repositories/", f.fake.IssueToken(inst))
	at := func(rest string) string { return fmt.Sprintf("%d%s", id, rest) }
	get := func(gh *github.Client, path string, v any) {
		t.Helper()
		req, err := gh.NewRequest("GET", path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gh.Do(ctx, req, v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var repo github.Repository
	get(byID, at(""), &repo)
	if repo.GetFullName() != "mona/world" || repo.GetID() != id {
		t.Errorf("repository %s id %d, want mona/world id %d", repo.GetFullName(), repo.GetID(), id)
	}
	var r github.Runner
	get(byID, at(fmt.Sprintf("/actions/runners/%d", before.GetRunner().GetID())), &r)
	if r.GetName() != "pool-1" {
		t.Errorf("runner %q by id, want pool-1", r.GetName())
	}
	var j github.WorkflowJob
	get(byID, at("/actions/jobs/9"), &j)
	if j.GetStatus() != "in_progress" || !strings.Contains(j.GetURL(), "/repos/mona/world/") {
		t.Errorf("job %s at %s, want in_progress, described at mona/world", j.GetStatus(), j.GetURL())
	}

	req, err := byID.NewRequest("POST", at("/actions/runners/generate-jitconfig"), jitReq("pool-2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := byID.Do(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	list, _, err := f.gh.Actions.ListRunners(ctx, "mona", "world", nil)
	if err != nil || list.TotalCount != 2 {
		t.Fatalf("runners of mona/world: %+v %v, want pool-1 and pool-2", list, err)
	}
	if _, err := f.gh.Actions.RemoveRunner(ctx, "mona", "world", before.GetRunner().GetID()); err != nil {
		t.Fatal(err)
	}
	req, err = byID.NewRequest("DELETE", at(fmt.Sprintf("/actions/runners/%d", before.GetRunner().GetID())), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = byID.Do(ctx, req, nil)
	errorResponse(t, err, http.StatusNotFound) // deleted through the new name: gone through the id too

	if resp, body := send(t, f, "GET", f.srv.URL, "/repositories/12345/actions/runners", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown id: %d %s, want 404", resp.StatusCode, body)
	}
}

// TestRedirectIsFollowed: a go-github client (net/http follows GitHub's
// redirects) reaches the renamed repository through its old name, a
// POST's body re-sent to the 307's target.
func TestRedirectIsFollowed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.fake.RenameRepo("octo", "hello", "octo", "world")
	cfg, _, err := f.gh.Actions.GenerateRepoJITConfig(ctx, "octo", "hello", jitReq("pool-1"))
	if err != nil {
		t.Fatal(err)
	}
	rs := f.fake.Runners()
	if len(rs) != 1 || rs[0].Repo != "world" || rs[0].Name != "pool-1" || cfg.GetRunner().GetID() != rs[0].ID {
		t.Fatalf("runners %+v, want pool-1 registered at octo/world", rs)
	}
	if _, err := f.gh.Actions.RemoveRunner(ctx, "octo", "hello", rs[0].ID); err != nil {
		t.Fatal(err)
	}
	if rs := f.fake.Runners(); len(rs) != 0 {
		t.Fatalf("runners %+v after the delete, want none", rs)
	}
	st := f.fake.Stats()
	if st.Redirects[ghfake.RouteRepoJIT] != 1 || st.Redirects[ghfake.RouteRepoDeleteRunner] != 1 || st.JITCalls != 2 {
		t.Errorf("redirects %v, JIT calls %d: want one redirect of each, and two JIT calls (the redirect and its target)", st.Redirects, st.JITCalls)
	}
}

// TestRenamedRepoReach: a token reaches the renamed repository as its
// installation does: a repository selected before a rename in its account
// stays selected (a token created before the rename too, as GitHub keeps
// the selection by id), and is reached through its old name; one
// transferred out of the installation's account is 404 through its old
// name too, the new address never told.
func TestRenamedRepoReach(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.fake.SetInstallation(inst, "octo", true, "hello", "other")
	gh := client(t, f.srv.URL+"/", f.fake.IssueToken(inst))
	f.fake.RenameRepo("octo", "hello", "octo", "world")
	for _, name := range []string{"hello", "world"} {
		if _, _, err := gh.Actions.ListRunners(ctx, "octo", name, nil); err != nil {
			t.Errorf("octo/%s with a token created before the rename: %v", name, err)
		}
	}
	f.fake.RenameRepo("octo", "other", "mona", "other")
	resp, body := send(t, f, "GET", f.srv.URL, "/repos/octo/other/actions/runners", "")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" {
		t.Errorf("transferred out of the installation: %d (Location %q) %s, want 404", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}

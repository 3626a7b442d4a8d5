package ghfake_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// installationCall is one installation-token route with a request that
// would succeed given the permission, and the permission GitHub's
// "Permissions required for GitHub Apps" gives it (github/docs
// src/github-apps/data/fpt-2022-11-28/server-to-server-permissions.json).
type installationCall struct {
	route, method, path, body string
	perm, access              string
}

var installationCalls = []installationCall{
	{ghfake.RouteRepoJIT, "POST", "/repos/octo/hello/actions/runners/generate-jitconfig", `{"name":"r1","runner_group_id":1,"labels":["self-hosted"]}`, "administration", "write"},
	{ghfake.RouteRepoRunners, "GET", "/repos/octo/hello/actions/runners", "", "administration", "read"},
	{ghfake.RouteRepoDeleteRunner, "DELETE", "/repos/octo/hello/actions/runners/999", "", "administration", "write"},
	{ghfake.RouteOrgJIT, "POST", "/orgs/octo/actions/runners/generate-jitconfig", `{"name":"o1","runner_group_id":1,"labels":["self-hosted"]}`, "organization_self_hosted_runners", "write"},
	{ghfake.RouteOrgRunners, "GET", "/orgs/octo/actions/runners", "", "organization_self_hosted_runners", "read"},
	{ghfake.RouteOrgDeleteRunner, "DELETE", "/orgs/octo/actions/runners/999", "", "organization_self_hosted_runners", "write"},
	{ghfake.RouteJob, "GET", "/repos/octo/hello/actions/jobs/7", "", "actions", "read"},
	{ghfake.RouteRepo, "GET", "/repos/octo/hello", "", "metadata", "read"},
}

var permLevel = map[string]int{"": 0, "read": 1, "write": 2}

func call(t *testing.T, base, token string, c installationCall) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, bytes.NewBufferString(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestTokenPermissionsAreEnforced: the stand-in refuses what GitHub
// refuses: a call whose permission the token does not carry — as the
// token exchange itself reports it — is a 403 "Resource not accessible by
// integration" with X-Accepted-GitHub-Permissions naming what was needed.
// A stand-in that serves every call whatever the permissions lets a
// manifest without a needed permission pass every test and fail every job
// of that kind in production.
func TestTokenPermissionsAreEnforced(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, RunID: 1, Status: "queued", Labels: []string{"self-hosted"}})
	iat := t0.Add(-30 * time.Second).Unix()
	jwt := signJWT(t, key(t), map[string]any{"iss": "1234", "iat": iat, "exp": iat + 120})
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/app/installations/%d/access_tokens", f.srv.URL, inst), nil)
	req.Header.Set("Authorization", "Bearer "+jwt)
	resp, err := web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		Token       string            `json:"token"`
		Permissions map[string]string `json:"permissions"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("token exchange: %d %v", resp.StatusCode, err)
	}
	for _, c := range installationCalls {
		status, body, h := call(t, f.srv.URL, tok.Token, c)
		granted := permLevel[tok.Permissions[c.perm]] >= permLevel[c.access]
		switch {
		case granted && status == http.StatusForbidden:
			t.Errorf("%s: token carries %s:%s, got 403 %.120s", c.route, c.perm, tok.Permissions[c.perm], body)
		case !granted && (status != http.StatusForbidden || !strings.Contains(body, "Resource not accessible by integration")):
			t.Errorf("%s: token permissions %v lack %s:%s, got %d %.120s, want GitHub's 403", c.route, tok.Permissions, c.perm, c.access, status, body)
		case !granted && h.Get("X-Accepted-GitHub-Permissions") != c.perm+"="+c.access:
			t.Errorf("%s: X-Accepted-GitHub-Permissions %q, want %q", c.route, h.Get("X-Accepted-GitHub-Permissions"), c.perm+"="+c.access)
		}
	}
}

package ghfake_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestUnauthorizedRate: a 401 is nobody's request, so it carries neither
// the installation's nor the App's budget but the unauthenticated one's
// (60 an hour per address), charged, as GitHub has answered "Bad
// credentials". Before, the App's 401 showed the App's budget and the
// installation's none, so no test met a client that took a 401's headers
// for its own budget.
func TestUnauthorizedRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, method, auth string
	}{
		{name: "installation token never issued", path: "/repos/octo/hello/actions/runners", method: http.MethodGet, auth: "token ghs_nope"},
		{name: "App JWT undecodable", path: "/app/hook/deliveries", method: http.MethodGet, auth: "Bearer not.a.jwt"},
		{name: "token exchange with an undecodable JWT", path: "/app/installations/42/access_tokens", method: http.MethodPost, auth: "Bearer not.a.jwt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.fake.SetAppRateLimit(5000, 4000, t0.Add(time.Hour))
			for i := 1; i <= 2; i++ {
				h := do401(t, f, tt.method, tt.path, tt.auth)
				want := map[string]string{
					"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": strconv.Itoa(60 - i), "X-RateLimit-Used": strconv.Itoa(i),
					"X-RateLimit-Reset": strconv.FormatInt(t0.Add(time.Hour).Unix(), 10), "X-RateLimit-Resource": "core",
				}
				for k, v := range want {
					if got := h.Get(k); got != v {
						t.Errorf("401 #%d: %s = %q, want %q (the unauthenticated budget, charged)", i, k, got, v)
					}
				}
			}
			if r := f.fake.RateLimit(inst); r.Remaining != 5000 {
				t.Errorf("installation budget remaining %d, want 5000 (a 401 is not its call)", r.Remaining)
			}
		})
	}

	t.Run("exhausted address", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.fake.SetUnauthenticatedRate(60, 0, t0.Add(10*time.Minute))
		h := do401(t, f, http.MethodGet, "/repos/octo/hello/actions/runners", "token ghs_nope")
		if h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Limit") != "60" {
			t.Errorf("got %s/%s, want 0/60: still a 401, showing the spent budget", h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Limit"))
		}
	})

	t.Run("none, as measured in 2026", func(t *testing.T) {
		t.Parallel()
		f := setup(t, ghfake.WithUnauthenticatedLimit(0))
		h := do401(t, f, http.MethodGet, "/app/hook/deliveries", "Bearer not.a.jwt")
		for _, k := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Used", "X-RateLimit-Reset", "X-RateLimit-Resource"} {
			if v := h.Get(k); v != "" {
				t.Errorf("%s = %q, want none", k, v)
			}
		}
	})
}

// do401 sends one request and returns the headers of its 401.
func do401(t *testing.T, f fixture, method, path, auth string) http.Header {
	t.Helper()
	resp := sendAs(t, f, method, path, auth)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%s %s: status %d, want 401", method, path, resp.StatusCode)
	}
	return resp.Header
}

// sendAs sends one request with the Authorization header auth; the caller
// closes the answer's body.
func sendAs(t *testing.T, f fixture, method, path, auth string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestNoCredentialRequiresAuthentication: a request to a route that takes
// an installation token, sent with no credential at all, is answered 401
// "Requires authentication" linking the operation's documentation, as
// GitHub answers it; "Bad credentials" is for a credential GitHub cannot
// resolve. Before, both got "Bad credentials".
func TestNoCredentialRequiresAuthentication(t *testing.T) {
	t.Parallel()
	routes := []struct{ method, path, doc string }{
		{http.MethodPost, "/repos/octo/hello/actions/runners/generate-jitconfig", "#create-configuration-for-a-just-in-time-runner-for-a-repository"},
		{http.MethodPost, "/orgs/octo/actions/runners/generate-jitconfig", "#create-configuration-for-a-just-in-time-runner-for-an-organization"},
		{http.MethodGet, "/repos/octo/hello/actions/runners", "#list-self-hosted-runners-for-a-repository"},
		{http.MethodGet, "/orgs/octo/actions/runners", "#list-self-hosted-runners-for-an-organization"},
		{http.MethodGet, "/repos/octo/hello/actions/runners/7", "#get-a-self-hosted-runner-for-a-repository"},
		{http.MethodGet, "/orgs/octo/actions/runners/7", "#get-a-self-hosted-runner-for-an-organization"},
		{http.MethodDelete, "/repos/octo/hello/actions/runners/7", "#delete-a-self-hosted-runner-from-a-repository"},
		{http.MethodDelete, "/orgs/octo/actions/runners/7", "#delete-a-self-hosted-runner-from-an-organization"},
		{http.MethodGet, "/repos/octo/hello/actions/jobs/7", "#get-a-job-for-a-workflow-run"},
		{http.MethodGet, "/installation/repositories", "#list-repositories-accessible-to-the-app-installation"},
		{http.MethodGet, "/repos/octo/hello", "#get-a-repository"},
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			msg, doc := apiError(t, rawAPI(t, f, rt.method, rt.path, nil, nil), http.StatusUnauthorized)
			if msg != "Requires authentication" || !strings.HasSuffix(doc, rt.doc) {
				t.Errorf("no credential: %q (%s), want Requires authentication (…%s)", msg, doc, rt.doc)
			}
			msg, _ = apiError(t, sendAs(t, f, rt.method, rt.path, "token ghs_nope"), http.StatusUnauthorized)
			if msg != "Bad credentials" {
				t.Errorf("a token never issued: %q, want Bad credentials", msg)
			}
		})
	}
}

package ghapp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// answering serves route (method and path) with status and body, and
// everything else (the installation token above all) with a ghfake.
func answering(t *testing.T, method, path string, status int, body string) *ghapp.Client {
	t.Helper()
	pemBytes, pub := testKey(t)
	fake := ghfake.New(ghfake.WithAppID(appID), ghfake.WithPublicKey(pub))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == method && r.URL.Path == path {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := ghapp.New(ghapp.Config{AppID: appID, PrivateKey: pemBytes, BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFindRunnerChecksTheName: a server that ignores the ?name= filter and
// lists other runners must not hand the claimer someone else's runner (it
// would reuse it as the job's, or delete it).
func TestFindRunnerChecksTheName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, scope, owner, repo, path string
	}{
		{"repo", ghapp.ScopeRepo, "octo", "hello", "/repos/octo/hello/actions/runners"},
		{"org", ghapp.ScopeOrg, "octo", "", "/orgs/octo/actions/runners"},
	}
	const list = `{"total_count":2,"runners":[` +
		`{"id":7,"name":"linux-99","os":"linux","status":"online","busy":true,"labels":[]},` +
		`{"id":8,"name":"linux-1001-old","os":"linux","status":"offline","busy":false,"labels":[]}]}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := answering(t, http.MethodGet, tt.path, http.StatusOK, list)
			got, err := c.FindRunner(context.Background(), inst, tt.scope, tt.owner, tt.repo, "linux-1001")
			if !errors.Is(err, ghapp.ErrRunnerNotFound) {
				t.Fatalf("FindRunner = %+v, %v; want ErrRunnerNotFound (no runner has that name)", got, err)
			}
		})
	}
}

// TestGenerateJITRefusesAnIncompleteAnswer: a 201 without a runner id or
// without a config is an error, never a JIT the provisioner would boot
// with nothing.
func TestGenerateJITRefusesAnIncompleteAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body string }{
		{"no runner id", `{"runner":{"name":"linux-1001"},"encoded_jit_config":"Y29uZmln"}`},
		{"no config", `{"runner":{"id":23,"name":"linux-1001"}}`},
		{"empty object", `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := answering(t, http.MethodPost, "/repos/octo/hello/actions/runners/generate-jitconfig", http.StatusCreated, tt.body)
			jit, err := c.GenerateJIT(context.Background(), inst, ghapp.JITRequest{
				Scope: ghapp.ScopeRepo, Owner: "octo", Repo: "hello", Name: "linux-1001", Labels: []string{"self-hosted"},
			})
			if err == nil {
				t.Fatalf("GenerateJIT = %+v, nil; want an error for an incomplete answer", jit)
			}
			if !strings.Contains(err.Error(), "without runner id or config") {
				t.Errorf("error %q does not say what was missing", err)
			}
		})
	}
}

// TestSecretStringIsRedacted: String is reached without fmt (string
// concatenation through a Stringer interface, templates), so it redacts too.
func TestSecretStringIsRedacted(t *testing.T) {
	t.Parallel()
	const value = "c2VjcmV0LWppdC1jb25maWc="
	var s fmtStringer = ghapp.NewSecret(value)
	if got := s.String(); strings.Contains(got, value) || got != "[REDACTED]" {
		t.Fatalf("String() = %q, want [REDACTED]", got)
	}
	if got := ghapp.NewSecret(value).GoString(); strings.Contains(got, value) {
		t.Fatalf("GoString() = %q leaks the secret", got)
	}
}

type fmtStringer interface{ String() string }

// TestStillRunningIsOnlyTheBusyRunner: DELETE …/runners/{id} answers 422
// for a busy runner, and also GitHub's generic 422 "Validation failed, or
// the endpoint has been spammed" (its OpenAPI description of the route).
// Only the first means busy: every 422 was, so the janitor left such a
// runner as busy forever, uncounted as an error, and the claimer reused
// an offline runner nothing would run. Both wordings GitHub has been seen
// to give a busy runner count.
func TestStillRunningIsOnlyTheBusyRunner(t *testing.T) {
	t.Parallel()
	const docs = `"documentation_url":"https://docs.github.com/rest/actions/self-hosted-runners#delete-a-self-hosted-runner-from-a-repository","status":"422"`
	tests := []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{name: "busy", status: 422, body: `{"message":"Bad request - Runner \"linux-1001\" is still running a job\"",` + docs + `}`, want: true},
		{name: "busy, later wording", status: 422, body: `{"message":"Bad request - Runner linux-1001 is currently running a job and cannot be deleted.",` + docs + `}`, want: true},
		{name: "validation failed", status: 422, body: `{"message":"Validation Failed",` + docs + `}`},
		{name: "spammed", status: 422, body: `{"message":"Validation failed, or the endpoint has been spammed.","errors":["runner 23"],` + docs + `}`},
		{name: "busy message, other status", status: 409, body: `{"message":"Bad request - Runner \"linux-1001\" is still running a job\"",` + docs + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := answering(t, http.MethodDelete, "/repos/octo/hello/actions/runners/23", tt.status, tt.body)
			err := c.DeleteRunner(context.Background(), inst, ghapp.ScopeRepo, "octo", "hello", 23)
			if err == nil {
				t.Fatalf("DeleteRunner answered %d: no error", tt.status)
			}
			if got := ghapp.IsStillRunning(err); got != tt.want {
				t.Errorf("IsStillRunning(%v) = %t, want %t", err, got, tt.want)
			}
		})
	}
}

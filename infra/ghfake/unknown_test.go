package ghfake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestUnknownRouteIsTheCallersRequest: a path no route serves is answered
// as GitHub answers it, like the fake's other 404s: after the credential
// is resolved, with the caller's budget charged and its rate headers, a
// request id, and GitHub's JSON error. Before, the fake answered it first,
// with no rate headers and nobody charged, so a rate transport that reads
// every answer's headers met, on the fake alone, a 404 without them.
func TestUnknownRouteIsTheCallersRequest(t *testing.T) {
	t.Parallel()
	const path = "/repos/octo/hello/actions/no-such-thing"
	reset := t0.Add(time.Hour)
	tests := []struct {
		name   string
		auth   func(t *testing.T, f fixture) string
		status int
		// limit and remaining are the rate headers of the answer; spent
		// reports the budget the request was charged to, after it.
		limit, remaining int
		spent            func(f fixture) int
	}{
		{
			name: "installation token", auth: func(_ *testing.T, f fixture) string { return "token " + f.fake.IssueToken(inst) },
			status: http.StatusNotFound, limit: 5000, remaining: 4999,
			spent: func(f fixture) int { return f.fake.RateLimit(inst).Remaining },
		},
		{
			name: "App JWT", status: http.StatusNotFound, limit: 5000, remaining: 3999,
			auth: func(t *testing.T, _ fixture) string {
				iat := t0.Add(-30 * time.Second).Unix()
				return "Bearer " + signJWT(t, key(t), map[string]any{"iss": appID, "iat": iat, "exp": iat + 600})
			},
		},
		{
			name: "no credential", auth: func(*testing.T, fixture) string { return "" },
			status: http.StatusNotFound, limit: ghfake.DefaultUnauthenticatedLimit, remaining: ghfake.DefaultUnauthenticatedLimit - 1,
		},
		{
			name: "credential never issued", auth: func(*testing.T, fixture) string { return "token ghs_nope" },
			status: http.StatusUnauthorized, limit: ghfake.DefaultUnauthenticatedLimit, remaining: ghfake.DefaultUnauthenticatedLimit - 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.fake.SetAppRateLimit(5000, 4000, reset)
			resp := sendAs(t, f, http.MethodGet, path, tt.auth(t, f))
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("body %q: %v, want GitHub's JSON error", b, err)
			}
			if tt.status == http.StatusNotFound {
				want := map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"}
				if mustJSON(t, got) != mustJSON(t, want) {
					t.Errorf("body = %s, want %s", b, mustJSON(t, want))
				}
			}
			h := resp.Header
			if h.Get("X-RateLimit-Limit") != strconv.Itoa(tt.limit) || h.Get("X-RateLimit-Remaining") != strconv.Itoa(tt.remaining) ||
				h.Get("X-RateLimit-Used") != strconv.Itoa(tt.limit-tt.remaining) || h.Get("X-RateLimit-Resource") != "core" {
				t.Errorf("rate headers %s/%s used %s (%s), want %d/%d used %d (core)", h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Limit"),
					h.Get("X-RateLimit-Used"), h.Get("X-RateLimit-Resource"), tt.remaining, tt.limit, tt.limit-tt.remaining)
			}
			if h.Get("X-GitHub-Request-Id") == "" {
				t.Error("no X-GitHub-Request-Id, want one as on every answer")
			}
			if tt.spent != nil {
				if got := tt.spent(f); got != tt.remaining {
					t.Errorf("budget remaining %d after the request, want %d (charged)", got, tt.remaining)
				}
			}
		})
	}
}

package ghfake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
)

// TestJWTIsDatedByGitHubsClock: an App JWT issued in the future, already
// expired, or expiring more than ten minutes from GitHub's now is refused,
// whatever its own iat says: a client with a drifting clock meets these.
func TestJWTIsDatedByGitHubsClock(t *testing.T) {
	t.Parallel()
	now := t0.Unix()
	tests := []struct {
		name     string
		iat, exp int64
		message  string
	}{
		{name: "good", iat: now - 60, exp: now + 540},
		{name: "issued in the future", iat: now + 120, exp: now + 300,
			message: "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued."},
		{name: "expired", iat: now - 900, exp: now - 300,
			message: "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires."},
		{name: "expires too far from now", iat: now - 60, exp: now + 660,
			message: "'Expiration time' claim ('exp') is too far in the future"},
		// Within ten minutes of now, but living longer than ten minutes from
		// its iat: GitHub refuses that too (iat now-60 with exp now+600, a
		// common mistake, meets this).
		{name: "lives longer than ten minutes", iat: now - 300, exp: now + 400,
			message: "'Expiration time' claim ('exp') is too far in the future"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			jwt := signJWT(t, key(t), map[string]any{"iss": appID, "iat": tt.iat, "exp": tt.exp})
			_, _, err := client(t, f.srv.URL+"/", jwt).Apps.CreateInstallationToken(context.Background(), inst, nil)
			if tt.message == "" {
				if err != nil {
					t.Fatalf("good JWT refused: %v", err)
				}
				return
			}
			if er := errorResponse(t, err, 401); er.Message != tt.message {
				t.Errorf("message %q, want %q", er.Message, tt.message)
			}
		})
	}
}

// TestTokenExchangeSpendsTheAppBudget: the exchange is billed to the App's
// own budget and refused once that is spent, like the App's other routes.
func TestTokenExchangeSpendsTheAppBudget(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetAppRateLimit(5000, 0, t0.Add(time.Hour))
	iat := t0.Add(-30 * time.Second).Unix()
	jwt := signJWT(t, key(t), map[string]any{"iss": appID, "iat": iat, "exp": iat + 600})
	_, resp, err := client(t, f.srv.URL+"/", jwt).Apps.CreateInstallationToken(context.Background(), inst, nil)
	var rl *github.RateLimitError
	if !errors.As(err, &rl) || !strings.HasPrefix(rl.Message, "API rate limit exceeded for app ID") {
		t.Fatalf("got %v, want go-github's RateLimitError for the App's budget", err)
	}
	if resp == nil || resp.StatusCode != 403 || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("want a 403 with X-RateLimit-Remaining: 0")
	}
}

// TestJITRefusesWhatGitHubRefuses: generate-jitconfig takes 1 to 100
// labels, none empty, and a runner name of at most 64 characters.
func TestJITRefusesWhatGitHubRefuses(t *testing.T) {
	t.Parallel()
	many := make([]string, 101)
	for i := range many {
		many[i] = "l"
	}
	tests := []struct {
		name    string
		req     func() *github.GenerateJITConfigRequest
		message string
	}{
		{name: "64-character name", req: func() *github.GenerateJITConfigRequest { return jitReq(strings.Repeat("n", 64)) }},
		{name: "100 labels", req: func() *github.GenerateJITConfigRequest { r := jitReq("p-1"); r.Labels = many[:100]; return r }},
		{name: "65-character name", req: func() *github.GenerateJITConfigRequest { return jitReq(strings.Repeat("n", 65)) },
			message: `"name" is too long`},
		{name: "101 labels", req: func() *github.GenerateJITConfigRequest { r := jitReq("p-1"); r.Labels = many; return r },
			message: `"labels" has 101 items`},
		{name: "empty label", req: func() *github.GenerateJITConfigRequest {
			r := jitReq("p-1")
			r.Labels = []string{"linux", " "}
			return r
		},
			message: `"labels" contains an empty label`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			_, _, err := f.gh.Actions.GenerateRepoJITConfig(context.Background(), "o", "r", tt.req())
			if tt.message == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if er := errorResponse(t, err, 422); !strings.Contains(er.Message, tt.message) {
				t.Errorf("message %q, want it to contain %q", er.Message, tt.message)
			}
		})
	}
}

// TestTokenIsScopedToItsInstallation: an installation token reaches only
// its installation's account and selected repositories; anywhere else
// GitHub answers 404 Not Found (rate-charged, like any answer).
func TestTokenIsScopedToItsInstallation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const org, user = int64(501), int64(502)
	f.fake.SetInstallation(org, "octo", true, "app")
	f.fake.SetInstallation(user, "alice", false)
	ctx := context.Background()
	octo := client(t, f.srv.URL+"/", f.fake.IssueToken(org))
	alice := client(t, f.srv.URL+"/", f.fake.IssueToken(user))

	if _, _, err := octo.Actions.ListRunners(ctx, "octo", "app", nil); err != nil {
		t.Errorf("a selected repository: %v", err)
	}
	if _, _, err := octo.Actions.ListOrganizationRunners(ctx, "Octo", nil); err != nil {
		t.Errorf("its own organisation (names compare case-insensitively): %v", err)
	}
	if _, _, err := alice.Actions.ListRunners(ctx, "alice", "anything", nil); err != nil {
		t.Errorf("a repository of an installation on every repository: %v", err)
	}
	for name, call := range map[string]func() (*github.Response, error){
		"a repository not selected": func() (*github.Response, error) {
			_, resp, err := octo.Actions.ListRunners(ctx, "octo", "other", nil)
			return resp, err
		},
		"another account's repository": func() (*github.Response, error) {
			_, resp, err := octo.Actions.ListRunners(ctx, "alice", "app", nil)
			return resp, err
		},
		"another organisation": func() (*github.Response, error) {
			_, resp, err := octo.Actions.ListOrganizationRunners(ctx, "other", nil)
			return resp, err
		},
		"a user account's installation on an organisation route": func() (*github.Response, error) {
			_, resp, err := alice.Actions.ListOrganizationRunners(ctx, "alice", nil)
			return resp, err
		},
	} {
		resp, err := call()
		if er := errorResponse(t, err, 404); er.Message != "Not Found" {
			t.Errorf("%s: message %q, want Not Found", name, er.Message)
		}
		if resp == nil || resp.Header.Get("X-RateLimit-Remaining") == "" {
			t.Errorf("%s: no rate headers on the 404", name)
		}
	}
}

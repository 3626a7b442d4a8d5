package ghfake_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestAPIVersionHeader: GitHub serves a request without
// X-GitHub-Api-Version at 2022-11-28, one naming a supported version at
// that version, and refuses any other version 400. Before, the fake
// accepted any header value.
func TestAPIVersionHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, version, selected string
	}{
		{name: "none: the default", version: "", selected: "2022-11-28"},
		{name: "2022-11-28", version: "2022-11-28", selected: "2022-11-28"},
		{name: "2026-03-10", version: "2026-03-10", selected: "2026-03-10"},
		{name: "the old media-type name", version: "v3"},
		{name: "a date that is no version", version: "2022-11-29"},
		{name: "a version with more after it", version: "2022-11-28x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			h := map[string]string{"Authorization": "token " + f.fake.IssueToken(inst)}
			if tt.version != "" {
				h["X-GitHub-Api-Version"] = tt.version
			}
			resp := rawAPI(t, f, http.MethodGet, "/repos/octo/hello/actions/runners", nil, h)
			if tt.selected != "" {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d, want 200", resp.StatusCode)
				}
				if got := resp.Header.Get("X-GitHub-Api-Version-Selected"); got != tt.selected {
					t.Errorf("X-GitHub-Api-Version-Selected %q, want %q", got, tt.selected)
				}
				return
			}
			msg, doc := apiError(t, resp, http.StatusBadRequest)
			want := `The version you specified in the "X-GitHub-API-Version" request header, "` + tt.version + `", is not a supported version.`
			if !strings.HasPrefix(msg, want) || !strings.Contains(msg, `"2022-11-28"`) || !strings.Contains(msg, `"2026-03-10"`) {
				t.Errorf("message %q, want %q and the supported versions", msg, want)
			}
			if doc != "https://docs.github.com/rest" {
				t.Errorf("documentation_url %q", doc)
			}
		})
	}
}

// TestGoGitHubSendsASupportedVersion: the client production uses
// (go-github, which sets the header on every request) passes the check.
func TestGoGitHubSendsASupportedVersion(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, resp, err := f.gh.Actions.ListRunners(context.Background(), "octo", "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("X-GitHub-Api-Version-Selected"); got != "2022-11-28" {
		t.Errorf("X-GitHub-Api-Version-Selected %q, want 2022-11-28", got)
	}
}

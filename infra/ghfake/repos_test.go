package ghfake_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestRepoDescribesVisibilityAndOwner: GET /repos/{owner}/{repo} says what
// the claimer decides a renamed pool's job with: private or public (and
// the visibility beside it, internal repositories being private), and the
// owner's account type.
func TestRepoDescribesVisibilityAndOwner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		prep        func(f fixture)
		owner       string
		wantPrivate bool
		wantVis     string
		wantType    string
	}{
		{name: "never set: private, an organisation's", owner: "octo", wantPrivate: true, wantVis: "private", wantType: "Organization"},
		{name: "public, a user's", owner: "mona", wantVis: "public", wantType: "User",
			prep: func(f fixture) { f.fake.SetRepo("Mona", "Hello", ghfake.Repo{Visibility: "public", User: true}) }},
		{name: "internal is private", owner: "octo", wantPrivate: true, wantVis: "internal", wantType: "Organization",
			prep: func(f fixture) { f.fake.SetRepo("octo", "hello", ghfake.Repo{Visibility: "internal"}) }},
		{name: "never set, on a user's installation", owner: "mona", wantPrivate: true, wantVis: "private", wantType: "User",
			prep: func(f fixture) { f.fake.SetInstallation(inst, "mona", false) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			if tt.prep != nil {
				tt.prep(f)
			}
			r, _, err := f.gh.Repositories.Get(context.Background(), tt.owner, "hello")
			if err != nil {
				t.Fatal(err)
			}
			if r.GetPrivate() != tt.wantPrivate || r.GetVisibility() != tt.wantVis || r.GetOwner().GetType() != tt.wantType {
				t.Fatalf("private %v visibility %q owner type %q, want %v %q %q",
					r.GetPrivate(), r.GetVisibility(), r.GetOwner().GetType(), tt.wantPrivate, tt.wantVis, tt.wantType)
			}
			if r.GetFullName() != tt.owner+"/hello" {
				t.Errorf("full_name %q, want %s/hello", r.GetFullName(), tt.owner)
			}
		})
	}
}

// TestRepoOutsideTheInstallation: a repository the installation does not
// cover is GitHub's 404, as go-github types it.
func TestRepoOutsideTheInstallation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetInstallation(inst, "octo", true, "world")
	_, _, err := f.gh.Repositories.Get(context.Background(), "octo", "hello")
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != http.StatusNotFound || er.Message != "Not Found" || er.DocumentationURL == "" {
		t.Fatalf("got %v, want GitHub's 404 Not Found with its documentation_url", err)
	}
}

package ghfake_test

import (
	"fmt"
	"net/http"
	"testing"
)

// TestRepositorySelectionAgrees: an installation's repository_selection is
// the same in the installation list and in the tokens it is issued, and
// follows what it was given: "selected" with repositories, "all" without.
// Before, the list always said "selected" and every token "all".
func TestRepositorySelectionAgrees(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		repos []string
		want  string
	}{
		{name: "selected repositories", repos: []string{"hello"}, want: "selected"},
		{name: "every repository", want: "all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.fake.SetInstallation(inst, "octo", true, tt.repos...)
			app := appClient(t, f)
			ins, _, err := app.Apps.ListInstallations(t.Context(), nil)
			if err != nil || len(ins) != 1 {
				t.Fatalf("installations %v, %v; want one", ins, err)
			}
			if got := ins[0].GetRepositorySelection(); got != tt.want {
				t.Errorf("installation list: repository_selection %q, want %q", got, tt.want)
			}
			// go-github's InstallationToken does not read the field.
			req, err := app.NewRequest(http.MethodPost, fmt.Sprintf("app/installations/%d/access_tokens", inst), nil)
			if err != nil {
				t.Fatal(err)
			}
			var tok struct {
				Token               string `json:"token"`
				RepositorySelection string `json:"repository_selection"`
			}
			if _, err := app.Do(t.Context(), req, &tok); err != nil || tok.Token == "" {
				t.Fatalf("token %+v, %v", tok, err)
			}
			if tok.RepositorySelection != tt.want {
				t.Errorf("token: repository_selection %q, want %q", tok.RepositorySelection, tt.want)
			}
		})
	}
}

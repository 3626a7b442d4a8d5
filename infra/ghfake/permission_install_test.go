package ghfake_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestInstallationWithoutAPermission: an installation whose owner did not
// grant a permission (an App made by hand without it, new permissions not
// yet accepted) is refused exactly the calls that need it, read is not
// write, and GET /app/installations reports what it has.
func TestInstallationWithoutAPermission(t *testing.T) {
	t.Parallel()
	for _, c := range installationCalls {
		t.Run(c.route, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, RunID: 1, Status: "queued", Labels: []string{"self-hosted"}})
			perms := ghfake.DefaultPermissions()
			if c.access == "write" {
				perms[c.perm] = "read"
			} else {
				delete(perms, c.perm)
			}
			f.fake.AddInstallation(ghfake.Installation{ID: inst, Account: "octo", Org: true, Permissions: perms})
			tok := f.fake.IssueToken(inst)
			for _, other := range installationCalls {
				status, body, _ := call(t, f.srv.URL, tok, other)
				refused := other.perm == c.perm && permLevel[perms[c.perm]] < permLevel[other.access]
				if refused != (status == http.StatusForbidden) {
					t.Errorf("%s with %s:%q: got %d %.120s, want refused=%v", other.route, c.perm, perms[c.perm], status, body, refused)
				}
			}
			ins, _, err := appClient(t, f).Apps.ListInstallations(t.Context(), nil)
			if err != nil || len(ins) != 1 {
				t.Fatalf("installations %v, %v", ins, err)
			}
			b, _ := json.Marshal(ins[0].Permissions)
			var got map[string]string
			_ = json.Unmarshal(b, &got)
			if fmt.Sprint(got) != fmt.Sprint(perms) {
				t.Errorf("listed permissions %v, want %v", got, perms)
			}
		})
	}
}

// appClient is a go-github client authenticated as the App.
func appClient(t *testing.T, f fixture) *github.Client {
	t.Helper()
	iat := t0.Add(-30 * time.Second).Unix()
	return client(t, f.srv.URL+"/", signJWT(t, key(t), map[string]any{"iss": "1234", "iat": iat, "exp": iat + 120}))
}

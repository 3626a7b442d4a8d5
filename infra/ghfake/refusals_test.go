package ghfake_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestExchangeRefusals: the token exchange is refused as GitHub refuses
// it when the App's key was rotated (401), the installation removed (404)
// or suspended (403), with GitHub's messages; the installation's tokens
// stop working, and undoing the cause mints tokens again.
func TestExchangeRefusals(t *testing.T) {
	t.Parallel()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iat := t0.Add(-30 * time.Second).Unix()
	tests := []struct {
		name    string
		refuse  func(f fixture)
		undo    func(t *testing.T, f fixture)
		status  int
		message string
		revoked bool
	}{
		{name: "key rotated", refuse: func(f fixture) { f.fake.SetPublicKey(&other.PublicKey) },
			undo: func(t *testing.T, f fixture) { f.fake.SetPublicKey(&key(t).PublicKey) }, status: 401, message: "A JSON web token could not be decoded"},
		{name: "uninstalled", refuse: func(f fixture) { f.fake.Uninstall(inst) }, status: 404, message: "Not Found", revoked: true},
		{name: "suspended", refuse: func(f fixture) { f.fake.Suspend(inst) },
			undo: func(t *testing.T, f fixture) { f.fake.Unsuspend(inst) }, status: 403, message: "This installation has been suspended", revoked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			app := client(t, f.srv.URL+"/", signJWT(t, key(t), map[string]any{"iss": appID, "iat": iat, "exp": iat + 600}))
			tt.refuse(f)
			_, _, err := app.Apps.CreateInstallationToken(context.Background(), inst, nil)
			if er := errorResponse(t, err, tt.status); er.Message != tt.message {
				t.Errorf("message = %q, want %q", er.Message, tt.message)
			}
			_, _, err = f.gh.Actions.ListRunners(context.Background(), "o", "r", nil)
			if tt.revoked {
				errorResponse(t, err, 401)
			} else if err != nil {
				t.Errorf("a token minted before the key's rotation: %v, want it still valid", err)
			}
			if tt.undo == nil {
				return
			}
			tt.undo(t, f)
			if _, _, err := app.Apps.CreateInstallationToken(context.Background(), inst, nil); err != nil {
				t.Errorf("after the cause was undone: %v, want a token", err)
			}
		})
	}
}

// TestSuspendedInstallationListed: GET /app/installations names a
// suspended installation's suspension as GitHub does (suspended_at and
// suspended_by, null on the others), which is how the App tells it is
// suspended without a refused exchange; Unsuspend clears both.
func TestSuspendedInstallationListed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.AddInstallation(ghfake.Installation{ID: 77, Account: "octo", Org: true})
	f.fake.AddInstallation(ghfake.Installation{ID: 78, Account: "mona"})
	iat := t0.Add(-30 * time.Second).Unix()
	app := client(t, f.srv.URL+"/", signJWT(t, key(t), map[string]any{"iss": appID, "iat": iat, "exp": iat + 600}))
	list := func(t *testing.T) map[int64]*github.Installation {
		t.Helper()
		ins, _, err := app.Apps.ListInstallations(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]*github.Installation{}
		for _, in := range ins {
			out[in.GetID()] = in
		}
		return out
	}
	f.fake.Suspend(77)
	got := list(t)
	if at := got[77].GetSuspendedAt().Time; !at.Equal(t0.Truncate(time.Second)) || got[77].GetSuspendedBy().GetLogin() != "octo-admin" {
		t.Errorf("suspended installation: suspended_at %v by %q, want %v by octo-admin", at, got[77].GetSuspendedBy().GetLogin(), t0.Truncate(time.Second))
	}
	if got[78].SuspendedAt != nil || got[78].SuspendedBy != nil {
		t.Errorf("installation 78 (not suspended): suspended_at %v by %v, want neither", got[78].SuspendedAt, got[78].SuspendedBy)
	}
	f.fake.Unsuspend(77)
	if got = list(t); got[77].SuspendedAt != nil || got[77].SuspendedBy != nil {
		t.Errorf("after Unsuspend: suspended_at %v by %v, want neither", got[77].SuspendedAt, got[77].SuspendedBy)
	}
}

package ghfake_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"
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

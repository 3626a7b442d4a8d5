package ghfake_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestPrimaryLimitAs429: GitHub answers a spent primary budget 403 or
// 429, remaining 0 either way. With WithPrimaryLimitStatus(429) the
// stand-in answers the 429, for the installation's routes and the App's,
// with no Retry-After (the reset says when). Before, it only ever sent the
// 403 go-github types, so no test met the untyped one.
func TestPrimaryLimitAs429(t *testing.T) {
	t.Parallel()
	reset := t0.Add(20 * time.Minute)
	tests := []struct {
		name, path, auth, message string
		spend                     func(f fixture)
	}{
		{name: "installation", path: "/repos/octo/hello/actions/runners", message: "API rate limit exceeded for installation ID 42.",
			spend: func(f fixture) { f.fake.SetRateLimit(inst, 100, 0, reset) }},
		{name: "App", path: "/app/hook/deliveries", message: "API rate limit exceeded for app ID 1234.",
			spend: func(f fixture) { f.fake.SetAppRateLimit(100, 0, reset) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, ghfake.WithPrimaryLimitStatus(http.StatusTooManyRequests))
			tt.spend(f)
			auth := "token " + f.fake.IssueToken(inst)
			if tt.name == "App" {
				iat := t0.Add(-30 * time.Second).Unix()
				auth = "Bearer " + signJWT(t, key(t), map[string]any{"iss": "1234", "iat": iat, "exp": iat + 120})
			}
			resp := sendAs(t, f, http.MethodGet, tt.path, auth)
			defer resp.Body.Close()
			var body struct{ Message, Status string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusTooManyRequests || body.Status != "429" || body.Message != tt.message {
				t.Errorf("got %d %q %q, want 429 %q", resp.StatusCode, body.Status, body.Message, tt.message)
			}
			if rem, ra := resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("Retry-After"); rem != "0" || ra != "" {
				t.Errorf("remaining %q, Retry-After %q; want 0 and none", rem, ra)
			}
		})
	}
}

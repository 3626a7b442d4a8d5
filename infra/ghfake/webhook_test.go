package ghfake_test

import (
	"encoding/json"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/webhook"
)

// TestWorkflowJobPayloadOwner: a repository of a user account arrives with
// owner.type "User" and no organization object, one of an organisation
// with both; the webhook reads the difference (a user's repository has no
// organisation runners). Before, every delivery the kits built was an
// organisation's, so no flow test could send a user's job as GitHub does.
func TestWorkflowJobPayloadOwner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		userOwned bool
	}{
		{name: "organisation", userOwned: false},
		{name: "user", userOwned: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := ghfake.WorkflowJobPayload(ghfake.Delivery{Action: "queued", Repo: "octo/hello", JobID: 9, RunID: 3,
				Labels: []string{"self-hosted"}, Installation: 42, UserOwned: tt.userOwned})
			var p map[string]any
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatal(err)
			}
			if _, hasOrg := p["organization"]; hasOrg == tt.userOwned {
				t.Errorf("organization present = %v, want %v", hasOrg, !tt.userOwned)
			}
			j, err := webhook.Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			if j.UserOwned != tt.userOwned {
				t.Errorf("webhook reads UserOwned = %v, want %v", j.UserOwned, tt.userOwned)
			}
		})
	}
}

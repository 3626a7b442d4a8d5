package scenario_test

import (
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake/openapi"
	"github.com/ghclaim/ghclaim/infra/local/scenario"
)

// TestPayloadMatchesGitHubDescription: what the scenarios deliver is what
// GitHub's webhook description says a workflow_job delivery is.
func TestPayloadMatchesGitHubDescription(t *testing.T) {
	t.Parallel()
	desc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	j := scenario.Job{ID: 7, RunID: 70, Repo: "acme/api", Installation: 1, Labels: []string{"self-hosted", "linux", "x64"}}
	for _, tt := range []struct{ action, runner string }{
		{"queued", ""}, {"waiting", ""}, {"in_progress", "runner-1"}, {"completed", "runner-1"}, {"completed", ""},
	} {
		t.Run(tt.action+"/"+tt.runner, func(t *testing.T) {
			t.Parallel()
			body := scenario.Payload(j, tt.action, tt.runner)
			if err := desc.Webhook("workflow_job", body); err != nil {
				t.Errorf("GitHub's description refuses the payload: %v\nbody: %s", err, body)
			}
		})
	}
}

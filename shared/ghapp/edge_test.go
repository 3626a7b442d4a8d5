package ghapp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
)

// TestEdgePageKeepsTheReading: GitHub's front end answers 503 with its
// HTML "unicorn" page and no rate headers (ghfake). The installation's
// last reading stands (a missing header is no reading, never remaining 0
// or a reset), and the error is a server-side failure whose reason is
// the status, not the page nor anything of the request's credentials.
func TestEdgePageKeepsTheReading(t *testing.T) {
	t.Parallel()
	seen := &readings{}
	f := setup(t, option{cfg: func(c *ghapp.Config) { c.Wrap = seen.wrap(nil) }})
	f.fake.SetJob("octo", "hello", ghfake.Job{ID: 7, Status: "queued"})
	ctx := context.Background()
	if _, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7); err != nil {
		t.Fatal(err)
	}
	f.fake.Fail(ghfake.RouteJob, 1, ghfake.ServerError(http.StatusServiceUnavailable))
	_, err := f.client.JobStatus(ctx, inst, "octo", "hello", 7)
	if err == nil {
		t.Fatal("no error, want the 503")
	}
	if observed := seen.all(); len(observed) != 1 || observed[0].Remaining != 4999 {
		t.Errorf("readings %+v, want only the first call's (4999 left)", observed)
	}
	fl := failure.Classify(err)
	if fl.Class != failure.ServerSide || fl.Status != http.StatusServiceUnavailable {
		t.Errorf("classified %v %d, want server_side 503", fl.Class, fl.Status)
	}
	for _, bad := range []string{"<", "Unicorn", "ghs_", "token"} {
		if strings.Contains(fl.Reason, bad) || strings.Contains(err.Error(), bad) {
			t.Errorf("reason %q / error %q holds %q", fl.Reason, err, bad)
		}
	}
	if !strings.HasSuffix(fl.Reason, "Service Unavailable") {
		t.Errorf("reason %q, want it to end in the status's text", fl.Reason)
	}
}

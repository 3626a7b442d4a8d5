package ghfake_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestAsyncRedeliveryAnswersFirst: with WithAsyncRedelivery, a redelivery
// is answered 202 before the webhook is called, as GitHub answers and
// delivers later; Drain waits for the delivery and its log entry. Before,
// the fake delivered inside the request, so a slow endpoint made the
// redeliverer's POST time out (make chaos).
func TestAsyncRedeliveryAnswersFirst(t *testing.T) {
	t.Parallel()
	f := setup(t, ghfake.WithAsyncRedelivery())
	f.fake.SetWebhook(func(context.Context, http.Header, []byte) (int, []byte, error) { return 503, nil, nil }, "s")
	body := ghfake.WorkflowJobPayload(ghfake.Delivery{Action: "queued", Repo: "octo/hello", JobID: 9, RunID: 3, Labels: []string{"self-hosted"}, Installation: inst})
	first := f.fake.Deliver(context.Background(), "workflow_job", "", body)

	release, reached := make(chan struct{}), make(chan struct{})
	f.fake.SetWebhook(func(context.Context, http.Header, []byte) (int, []byte, error) {
		close(reached)
		<-release
		return 200, nil, nil
	}, "s")
	iat := t0.Add(-30 * time.Second).Unix()
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/app/hook/deliveries/%d/attempts", f.srv.URL, first.ID), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+signJWT(t, key(t), map[string]any{"iss": appID, "iat": iat, "exp": iat + 600}))
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		close(release) // a fake that delivers first waits for the endpoint
		t.Fatalf("redelivery not answered while the endpoint has not answered: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202 while the endpoint has not answered", resp.StatusCode)
	}
	<-reached
	close(release)
	f.fake.Drain()
	if n := f.fake.Redeliveries(first.GUID); n != 1 {
		t.Errorf("redeliveries = %d, want 1", n)
	}
	log := f.fake.Deliveries()
	if len(log) != 2 || log[0].GUID != first.GUID || !log[0].Redelivery || log[0].StatusCode != 200 {
		t.Errorf("log after Drain = %+v, want the redelivery of %s answered 200 on top", log, first.GUID)
	}
}

package ghfake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/ghfake"
)

// TestRedeliveryAnswersFirst: a redelivery is answered 202 with {} (GitHub's
// description: an object) before the webhook is called, as GitHub answers
// and delivers later, and nothing of it is in the log at the answer; Drain
// waits for the delivery and its log entry. The webhook here answers only
// once the test has the 202: a fake that delivers before answering never
// answers (the client's timeout ends the test). Before, that was the
// default (WithAsyncRedelivery was needed to answer first), and a
// redeliverer tested on it could rely on a redelivery being in the log when
// its ask returned, which GitHub never promises.
func TestRedeliveryAnswersFirst(t *testing.T) {
	t.Parallel()
	f := setup(t)
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
	resp, err := (&http.Client{Transport: web.Transport, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		close(release) // a fake that delivers first waits for the endpoint
		t.Fatalf("redelivery not answered while the endpoint has not answered: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted || strings.TrimSpace(string(got)) != "{}" {
		t.Errorf("answer %d %s, want 202 {} while the endpoint has not answered", resp.StatusCode, got)
	}
	if log := f.fake.Deliveries(); len(log) != 1 || log[0].ID != first.ID {
		t.Errorf("log at the 202 = %+v, want only the first delivery (the redelivery is under way)", log)
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

// TestDrainWhileAsked: Drain may run while redeliveries are asked (a
// redeliverer in the background, as in the local rig); it returns once
// none is under way, each logged. A sync.WaitGroup forbids an Add that
// races a Wait; -race and the count of entries check it.
func TestDrainWhileAsked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.fake.SetWebhook(func(context.Context, http.Header, []byte) (int, []byte, error) { return 503, nil, nil }, "s")
	body := ghfake.WorkflowJobPayload(ghfake.Delivery{Action: "queued", Repo: "octo/hello", JobID: 9, RunID: 3, Labels: []string{"self-hosted"}, Installation: inst})
	first := f.fake.Deliver(context.Background(), "workflow_job", "", body)
	iat := t0.Add(-30 * time.Second).Unix()
	jwt := signJWT(t, key(t), map[string]any{"iss": appID, "iat": iat, "exp": iat + 600})
	const asks = 20
	done := make(chan error)
	go func() {
		defer close(done)
		for range asks {
			req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/app/hook/deliveries/%d/attempts", f.srv.URL, first.ID), nil)
			if err != nil {
				done <- err
				return
			}
			req.Header.Set("Authorization", "Bearer "+jwt)
			resp, err := web.Do(req)
			if err != nil {
				done <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				done <- fmt.Errorf("status %d, want 202", resp.StatusCode)
				return
			}
			f.fake.Drain()
		}
	}()
	for range asks {
		f.fake.Drain()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.fake.Drain()
	if log := f.fake.Deliveries(); len(log) != 1+asks {
		t.Errorf("log has %d entries after the last Drain, want %d (the first and its %d redeliveries)", len(log), 1+asks, asks)
	}
}

// TestDeliveriesStatusFilter: the list's `status` filter is GitHub's, by
// status_code (GitHub's description of the parameter: "success" is
// 200-399, "failure" 400-599), so a delivery that got no answer
// (status_code 0, "failed to connect to host") is in neither; the next
// page keeps the filter. A fake that ignored the filter listed every entry,
// and a redeliverer that asked for failures only would have passed its
// tests on it while on GitHub it never saw the deliveries an endpoint down
// leaves.
func TestDeliveriesStatusFilter(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, code := range []int{200, 302, 503, 0, 404} {
		d := ghfake.HookDelivery{GUID: fmt.Sprintf("guid-%d", code), Event: "workflow_job", StatusCode: code}
		if code == 0 {
			d.Status = ghfake.StatusUnreachable
		}
		f.fake.RecordDelivery(d)
	}
	iat := t0.Add(-30 * time.Second).Unix()
	jwt := signJWT(t, key(t), map[string]any{"iss": appID, "iat": iat, "exp": iat + 600})
	list := func(t *testing.T, url string) (int, []int, string) {
		t.Helper()
		status, body, h := call(t, "", jwt, installationCall{method: http.MethodGet, path: url})
		if status != http.StatusOK {
			return status, nil, ""
		}
		var items []struct {
			StatusCode int `json:"status_code"`
		}
		if err := json.Unmarshal([]byte(body), &items); err != nil {
			t.Fatal(err)
		}
		codes := []int{}
		for _, it := range items {
			codes = append(codes, it.StatusCode)
		}
		next := ""
		if m := regexp.MustCompile(`<([^>]+)>; rel="next"`).FindStringSubmatch(h.Get("Link")); m != nil {
			next = m[1]
		}
		return status, codes, next
	}
	tests := []struct {
		name   string
		query  string
		status int
		pages  [][]int
	}{
		{name: "no filter", query: "", status: 200, pages: [][]int{{404, 0, 503, 302, 200}}},
		{name: "success", query: "status=success", status: 200, pages: [][]int{{302, 200}}},
		{name: "failure leaves the unanswered out", query: "status=failure", status: 200, pages: [][]int{{404, 503}}},
		{name: "failure paged", query: "status=failure&per_page=1", status: 200, pages: [][]int{{404}, {503}}},
		{name: "not a member", query: "status=failed", status: 422},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := f.srv.URL + "/app/hook/deliveries?" + tt.query
			var got [][]int
			for url != "" {
				status, codes, next := list(t, url)
				if status != tt.status {
					t.Fatalf("status = %d, want %d", status, tt.status)
				}
				if status != http.StatusOK {
					return
				}
				got = append(got, codes)
				url = next
			}
			if !reflect.DeepEqual(got, tt.pages) {
				t.Errorf("pages of status_code = %v, want %v", got, tt.pages)
			}
		})
	}
}

package webhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// mustFail returns the error of a Parse result.
func mustFail(_ Job, err error) error { return err }

// GitHub adds workflow_job actions without notice ("waiting" came after
// the rest) and counts every non-2xx answer a failed delivery, which the
// redeliverer asks GitHub to send again. An action ghclaim does not know
// is therefore answered 2xx "ignored", writes nothing, and is logged at
// warn with the action named.
func TestHandleUnknownActionIsNotAFailedDelivery(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"requested", "cancelled"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			body := compact(t, set(payload(t, "queued"), "action", action))
			resp, r := f.do(t, signedRequest("workflow_job", guid, body))
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				t.Fatalf("status = %d, want 2xx: GitHub logs anything else as a failed delivery (%s)", resp.StatusCode, resp.Body)
			}
			if r.Status != StatusIgnored || !strings.Contains(r.Message, `unknown action "`+action+`"`) {
				t.Errorf("reply = %+v, want ignored naming the action", r)
			}
			if n := f.requests(); n != 0 {
				t.Errorf("%d requests, want none", n)
			}
			var line map[string]any
			if err := json.Unmarshal(f.logs.Bytes(), &line); err != nil {
				t.Fatalf("log %q is not one JSON line: %v", f.logs, err)
			}
			if line["level"] != "WARN" || line["outcome"] != OutcomeUnknownAction || line["delivery_id"] != guid ||
				!strings.Contains(line["reason"].(string), action) {
				t.Errorf("log line = %v, want a WARN %s line with delivery_id and the action", line, OutcomeUnknownAction)
			}
		})
	}
	// A known action's malformed payload is still refused.
	f := setup(t, nil)
	resp, _ := f.do(t, signedRequest("workflow_job", guid, compact(t, del(payload(t, "queued"), "workflow_job.id"))))
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed queued: status = %d, want 400", resp.StatusCode)
	}
}

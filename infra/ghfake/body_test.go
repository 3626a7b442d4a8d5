package ghfake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// rawAPI sends one request to the fake with body as sent, headers set as
// given; the caller closes the answer's body.
func rawAPI(t *testing.T, f fixture, method, path string, body io.Reader, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := web.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// apiError reads a GitHub error body, checking its status.
func apiError(t *testing.T, resp *http.Response, status int) (message, doc string) {
	t.Helper()
	defer resp.Body.Close()
	var e struct {
		Message          string `json:"message"`
		DocumentationURL string `json:"documentation_url"`
		Status           string `json:"status"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("status %d (%.200s), want %d", resp.StatusCode, b, status)
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %q: %v", b, err)
	}
	return e.Message, e.DocumentationURL
}

// TestJITBodyMustBeOneJSONValue: a body with anything but whitespace after
// its JSON object is not JSON, and GitHub answers 400 "Problems parsing
// JSON"; before, the fake decoded the first value and ignored the rest.
func TestJITBodyMustBeOneJSONValue(t *testing.T) {
	t.Parallel()
	const good = `{"name":"r1","runner_group_id":1,"labels":["self-hosted"]}`
	tests := []struct {
		name, body string
		status     int
	}{
		{name: "one object", body: good, status: http.StatusCreated},
		{name: "one object, trailing whitespace", body: good + " \n", status: http.StatusCreated},
		{name: "trailing garbage", body: good + "garbage", status: http.StatusBadRequest},
		{name: "two objects", body: good + good, status: http.StatusBadRequest},
		{name: "trailing brace", body: good + "}", status: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			resp := rawAPI(t, f, http.MethodPost, "/repos/octo/hello/actions/runners/generate-jitconfig",
				strings.NewReader(tt.body), map[string]string{"Authorization": "token " + f.fake.IssueToken(inst)})
			if tt.status != http.StatusBadRequest {
				resp.Body.Close()
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
				}
				return
			}
			if msg, _ := apiError(t, resp, tt.status); msg != "Problems parsing JSON" {
				t.Errorf("message %q, want Problems parsing JSON", msg)
			}
		})
	}
}

// TestOversizedBodyIsRefusedNotCut: a body over the fake's 1 MiB cap is
// refused with 413, not cut at the cap and parsed. Before, a JIT request
// whose label list ran past the cap was cut there; this one, cut right
// after its object's closing brace, parsed and created a runner.
func TestOversizedBodyIsRefusedNotCut(t *testing.T) {
	t.Parallel()
	f := setup(t)
	obj := `{"name":"r1","runner_group_id":1,"labels":["self-hosted"]}`
	body := obj + strings.Repeat(" ", 1<<20-len(obj)) + `x`
	resp := rawAPI(t, f, http.MethodPost, "/repos/octo/hello/actions/runners/generate-jitconfig",
		strings.NewReader(body), map[string]string{"Authorization": "token " + f.fake.IssueToken(inst)})
	apiError(t, resp, http.StatusRequestEntityTooLarge)
	if n := len(f.fake.Runners()); n != 0 {
		t.Errorf("%d runners created from an oversized body, want 0", n)
	}
}

package webhook

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// TestBodyCapAtTheBoundary: the cap holds for the decoded body to the
// byte, whether the body arrives plain or base64-encoded, and an encoded
// body too large to be under the cap is refused before it is decoded (a
// Function URL accepts 6 MB: decoding first would spend that memory on a
// delivery that is refused anyway).
func TestBodyCapAtTheBoundary(t *testing.T) {
	t.Parallel()
	const max = 64 << 10 // setup's MaxBodyBytes
	// padded is the queued payload padded with trailing spaces (still
	// valid JSON) to exactly n bytes.
	padded := func(t *testing.T, n int) []byte {
		b := compact(t, payload(t, "queued"))
		if len(b) > n {
			t.Fatalf("payload is %d bytes, over %d", len(b), n)
		}
		return append(b, bytes.Repeat([]byte(" "), n-len(b))...)
	}
	tests := []struct {
		name   string
		body   func(t *testing.T) []byte // the decoded body, signed as is
		base64 bool
		raw    string // when set, sent as the (base64-flagged) body instead
		code   int
	}{
		{name: "plain, exactly the cap", body: func(t *testing.T) []byte { return padded(t, max) }, code: http.StatusAccepted},
		{name: "plain, one byte over", body: func(t *testing.T) []byte { return padded(t, max+1) }, code: http.StatusRequestEntityTooLarge},
		{name: "base64, exactly the cap", body: func(t *testing.T) []byte { return padded(t, max) }, base64: true, code: http.StatusAccepted},
		{name: "base64, one byte over", body: func(t *testing.T) []byte { return padded(t, max+1) }, base64: true, code: http.StatusRequestEntityTooLarge},
		{name: "base64, two bytes over", body: func(t *testing.T) []byte { return padded(t, max+2) }, base64: true, code: http.StatusRequestEntityTooLarge},
		{name: "huge body that is not even base64", raw: strings.Repeat("*", 4*max), code: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, nil)
			req := signedRequest("workflow_job", guid, nil)
			if tt.raw != "" {
				req.Body, req.IsBase64Encoded = tt.raw, true
			} else {
				body := tt.body(t)
				req = signedRequest("workflow_job", guid, body)
				if tt.base64 {
					req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
				}
			}
			resp, r := f.do(t, req)
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d (%+v), want %d", resp.StatusCode, r, tt.code)
			}
			if tt.code == http.StatusRequestEntityTooLarge {
				if !strings.Contains(r.Message, "65536-byte cap") {
					t.Errorf("message %q does not name the cap", r.Message)
				}
				if n := f.requests(); n != 0 {
					t.Errorf("%d requests, want none", n)
				}
			}
		})
	}
}

package webhook

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// FuzzVerify: Verify never panics, never accepts a header that is not the
// HMAC of the body under the given secret, and always accepts the right one.
// Seeds: testdata/fuzz/FuzzVerify plus the cases below.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(vectorPayload), vectorHeader, []byte(vectorSecret))
	f.Add([]byte(`{"action":"queued"}`), "sha1=0123", []byte("s"))
	f.Add([]byte{}, "sha256=", []byte{})
	f.Fuzz(func(t *testing.T, body []byte, header string, secret []byte) {
		err := Verify(body, header, [][]byte{secret})
		if err != nil && !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Verify error %v is not an ErrBadSignature", err)
		}
		if err == nil {
			if len(secret) == 0 {
				t.Fatal("accepted with an empty secret")
			}
			got, decErr := hex.DecodeString(strings.TrimPrefix(header, "sha256="))
			if !strings.HasPrefix(header, "sha256=") || decErr != nil || !hmac.Equal(got, Sign(body, secret)) {
				t.Fatalf("accepted header %q that is not the body's HMAC under the secret", header)
			}
			// Any other secret must refuse the same header.
			other := append(bytes.Clone(secret), 'x')
			if Verify(body, header, [][]byte{other}) == nil {
				t.Fatal("accepted without the right secret")
			}
		}
		if len(secret) > 0 {
			if err := Verify(body, SignatureValue(body, secret), [][]byte{secret}); err != nil {
				t.Fatalf("refused the right signature: %v", err)
			}
		}
	})
}

// FuzzParse: Parse never panics, refuses only with a *PayloadError, and
// whatever it accepts satisfies the invariants the handler writes with.
// Seeds: testdata/fuzz/FuzzParse (the documented payload shapes) plus below.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"queued", "waiting", "in_progress", "completed"} {
		f.Add(compact(f, payload(f, name)))
	}
	f.Add([]byte(`{"action":"queued","workflow_job":{"id":1,"run_id":1,"labels":[]},"repository":{"full_name":"a/b"},"installation":{"id":1}}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		j, err := Parse(body)
		if err != nil {
			var pe *PayloadError
			if !errors.As(err, &pe) || !errors.Is(err, ErrBadPayload) {
				t.Fatalf("Parse error %T %v is not a *PayloadError", err, err)
			}
			return
		}
		switch j.Action {
		case ActionQueued, ActionWaiting, ActionInProgress, ActionCompleted:
		default:
			t.Fatalf("accepted action %q", j.Action)
		}
		if j.JobID <= 0 || j.RunID <= 0 || j.InstallationID < 0 {
			t.Fatalf("accepted non-positive ids: %+v", j)
		}
		if j.Action == ActionQueued && j.InstallationID == 0 {
			t.Fatalf("accepted queued without an installation: %+v", j)
		}
		if len(j.Labels) > MaxLabels {
			t.Fatalf("accepted %d labels", len(j.Labels))
		}
		for _, l := range j.Labels {
			if strings.TrimSpace(l) == "" {
				t.Fatalf("accepted an empty label: %q", j.Labels)
			}
		}
		owner, name, ok := strings.Cut(j.Repo, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") || j.Owner() != owner {
			t.Fatalf("accepted repo %q that is not owner/name", j.Repo)
		}
	})
}

package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/mem"
	"github.com/ghclaim/ghclaim/shared/job"
)

// notSetErr is how shared/secret reports a secret that does not exist yet.
type notSetErr struct{}

func (notSetErr) Error() string { return "secret arn:x: secret not set yet" }
func (notSetErr) NotSet() bool  { return true }

// whyNotSetErr is how shared/secret reports why a secret holds nothing.
type whyNotSetErr struct{ reason string }

func (whyNotSetErr) Error() string          { return "secret arn:x: secret not set yet" }
func (whyNotSetErr) NotSet() bool           { return true }
func (e whyNotSetErr) NotSetReason() string { return e.reason }

// TestCurrentSecrets: the handler asks for the secrets on every delivery,
// so one written after start-up (make app) or rotated is used at once, and
// before there is one it answers 503 with a message, writing nothing.
func TestCurrentSecrets(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		secrets [][]byte
		err     error = notSetErr{}
	)
	current := func(context.Context) ([][]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		return secrets, err
	}
	f := setup(t, func(c *Config) { c.Secrets, c.CurrentSecrets = nil, current })
	queued := compact(t, payload(t, "queued"))

	tests := []struct {
		name    string
		secrets [][]byte
		err     error
		code    int
		message string
	}{
		{name: "not set yet", err: notSetErr{}, code: http.StatusServiceUnavailable, message: ErrSecretNotSet.Error()},
		{name: "never set", err: whyNotSetErr{"never_set"}, code: http.StatusServiceUnavailable, message: ErrSecretNotSet.Error()},
		{name: "the template's placeholder", err: whyNotSetErr{"placeholder"}, code: http.StatusServiceUnavailable, message: ErrSecretNotSet.Error()},
		{name: "scheduled for deletion", err: whyNotSetErr{"deleted"}, code: http.StatusServiceUnavailable, message: ErrSecretDeleted.Error()},
		{name: "emptied", err: whyNotSetErr{"empty"}, code: http.StatusServiceUnavailable, message: ErrSecretEmpty.Error()},
		{name: "only commas (an empty list)", code: http.StatusServiceUnavailable, message: ErrSecretEmpty.Error()},
		{name: "secret store down", err: errors.New("ThrottlingException arn:x"), code: http.StatusServiceUnavailable, message: "webhook secret unavailable: redeliver this delivery"},
		{name: "written by make app", secrets: [][]byte{[]byte(localSecret)}, code: http.StatusAccepted},
		{name: "rotated away", secrets: [][]byte{[]byte("another")}, code: http.StatusUnauthorized},
	}
	for i, tt := range tests { // in order: one handler, secrets changing under it
		mu.Lock()
		secrets, err = tt.secrets, tt.err
		mu.Unlock()
		before := f.requests()
		resp, r := f.do(t, signedRequest("workflow_job", "guid-"+string(rune('a'+i)), queued))
		if resp.StatusCode != tt.code {
			t.Fatalf("%s: got %d %+v, want %d", tt.name, resp.StatusCode, r, tt.code)
		}
		if tt.message != "" && r.Message != tt.message {
			t.Errorf("%s: message %q, want %q", tt.name, r.Message, tt.message)
		}
		if n := f.requests() - before; tt.code == http.StatusServiceUnavailable && n != 0 {
			t.Errorf("%s: %d AWS requests, want none", tt.name, n)
		}
		if strings.Contains(resp.Body, "ThrottlingException") || strings.Contains(resp.Body, "arn:") {
			t.Errorf("%s: internal error text reached the client: %s", tt.name, resp.Body)
		}
	}
}

func TestNewAcceptsCurrentSecretsInsteadOfSecrets(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{Pools: testPools, CurrentSecrets: func(context.Context) ([][]byte, error) { return nil, nil },
		Store: mem.NewStore(job.Timing{}), Queue: mem.NewQueue(func() time.Time { return testNow })}); err != nil {
		t.Fatalf("got %v, want a handler that waits for its secret", err)
	}
}

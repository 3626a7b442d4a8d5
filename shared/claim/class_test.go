package claim_test

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/shared/job"
)

func awsErr(op, code, msg string) error {
	return &smithy.OperationError{ServiceID: "EC2", OperationName: op, Err: &smithy.GenericAPIError{Code: code, Message: msg}}
}

// TestErrorClasses runs one failing attempt per row through the handler
// and checks what the record and the re-sent message say: the class, and
// the delay the class demands (or the failed state).
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name  string
		opt   setupOpt
		fault func(h *harness)
		// provision fails the provisioner's first call with this error.
		provision error
		class     string
		// retry: the re-sent message's delay lies in [min, max]; failed when max is 0.
		min, max time.Duration
	}
	ladder0 := [2]time.Duration{24 * time.Second, 36 * time.Second}
	rows := []row{
		{name: "429 without Retry-After", fault: func(h *harness) { h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.TooManyRequests(0)) },
			class: "rate_limit", min: time.Minute, max: 2 * time.Minute},
		{name: "429 with Retry-After", fault: func(h *harness) { h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.TooManyRequests(120*time.Second)) },
			class: "rate_limit", min: 125 * time.Second, max: 145 * time.Second},
		{name: "403 remaining 0", fault: func(h *harness) { h.gh.SetRateLimit(installation, 5000, 0, h.clock.Now().Add(10*time.Minute)) },
			class: "rate_limit", min: 10*time.Minute + 5*time.Second, max: 10*time.Minute + 25*time.Second},
		{name: "403 secondary with Retry-After", fault: func(h *harness) { h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.SecondaryRateLimit(90*time.Second)) },
			class: "rate_limit", min: 95 * time.Second, max: 115 * time.Second},
		{name: "502", fault: func(h *harness) { h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusBadGateway)) },
			class: "server_side", min: ladder0[0], max: ladder0[1]},
		{name: "503", fault: func(h *harness) { h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ServerError(http.StatusServiceUnavailable)) },
			class: "server_side", min: ladder0[0], max: ladder0[1]},
		// The job's repository is outside the installation's selection:
		// its own call is 404.
		{name: "404", fault: func(h *harness) { h.gh.SetInstallation(installation, "octo-org", true, "another-repo") }, class: "non_retryable"},
		// The pool's runner group does not exist: 422 Validation Failed.
		{name: "422", opt: setupOpt{groupID: 99}, class: "non_retryable"},
		// GitHub refuses the App's token exchange itself: the App's
		// credentials, not the job (TestAppRefusedKeepsTheJob). The App's
		// key does not match: 401. A GitHub Enterprise base URL without
		// /api/v3: every call is 404, the exchange first. The installation
		// is suspended: 403.
		{name: "401 on the token exchange", opt: setupOpt{ghOpts: []ghfake.Option{ghfake.WithPublicKey(&otherKey.PublicKey)}},
			class: "unknown_retryable", min: ladder0[0], max: ladder0[1]},
		{name: "404 on the token exchange", opt: setupOpt{ghOpts: []ghfake.Option{ghfake.WithPathPrefix("/api/v3")}},
			class: "unknown_retryable", min: ladder0[0], max: ladder0[1]},
		{name: "403 on the token exchange", fault: func(h *harness) { h.gh.Suspend(installation) },
			class: "unknown_retryable", min: ladder0[0], max: ladder0[1]},
		{name: "connection reset", fault: func(h *harness) { h.gh.Fail(ghfake.RouteRepoJIT, 1, ghfake.ConnectionReset()) },
			class: "network", min: ladder0[0], max: ladder0[1]},
		{name: "timeout", provision: fmt.Errorf("provision job: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}),
			class: "network", min: ladder0[0], max: ladder0[1]},
		{name: "AWS throttling", provision: awsErr("RunInstances", "RequestLimitExceeded", "Request limit exceeded."),
			class: "rate_limit", min: time.Minute, max: 2 * time.Minute},
		{name: "insufficient capacity", provision: awsErr("RunInstances", "InsufficientInstanceCapacity", "We currently do not have sufficient capacity."),
			class: "server_side", min: ladder0[0], max: ladder0[1]},
		{name: "invalid parameter", provision: awsErr("RunInstances", "InvalidParameterValue", "Value for parameter is invalid."),
			class: "non_retryable"},
	}
	for i, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, tc.opt)
			c := h.claimer(t, claimerOpt{})
			if tc.fault != nil {
				tc.fault(h)
			}
			if tc.provision != nil {
				h.spy.set(func(int) error { return tc.provision }, nil)
			}
			id := int64(3000 + i)
			h.seed(t, id)
			sends := len(h.queue.Sent())
			if resp := h.invoke(t, c, h.receive(t, 1)...); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("batch item failures %v, want none", resp.BatchItemFailures)
			}
			r := h.get(t, id)
			t.Logf("record %s, reason %q", r.State, r.LastError)
			if r.LastErrorClass != tc.class {
				t.Fatalf("last_error_class %q (%s), want %q", r.LastErrorClass, r.LastError, tc.class)
			}
			if r.Attempt != 1 {
				t.Errorf("attempt %d, want 1", r.Attempt)
			}
			if tc.max == 0 {
				if r.State != job.Failed || r.LastError == "" {
					t.Fatalf("record %s (%q), want failed with a reason", r.State, r.LastError)
				}
				if n := len(h.queue.Sent()); n != sends {
					t.Fatalf("%d messages sent, want none", n-sends)
				}
				h.receiveNone(t)
				// A registration whose machine could not be provisioned is removed.
				if rs := h.gh.Runners(); len(rs) != 0 {
					t.Fatalf("runners %v left registered, want none", rs)
				}
				return
			}
			if r.State != job.Queued {
				t.Fatalf("record %s (%s), want queued", r.State, r.LastError)
			}
			s := h.lastSend(t)
			delay := s.Delay
			if s.Msg.NotBefore != 0 {
				delay = job.FromMillis(s.Msg.NotBefore).Sub(h.clock.Now())
			}
			if delay < tc.min || delay > tc.max+time.Second {
				t.Fatalf("delay %s, want within [%s, %s]", delay, tc.min, tc.max)
			}
			if s.Msg.Version != r.Version || s.Msg.Attempt != 1 {
				t.Fatalf("sent version %d attempt %d, want %d and 1", s.Msg.Version, s.Msg.Attempt, r.Version)
			}
			if tc.provision != nil {
				// A retryable provisioning failure leaves the registration for
				// the next attempt's 409 path.
				if rs := h.gh.Runners(); len(rs) != 1 {
					t.Fatalf("runners %v, want the one registration kept", rs)
				}
			}
		})
	}
}

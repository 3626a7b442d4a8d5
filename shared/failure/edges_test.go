package failure_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/job"
)

// TestClassifyByTheRuleAlone: cases that only one rule of the classifier
// decides (no status, fault or other header to fall back on), so each rule
// is pinned on its own.
func TestClassifyByTheRuleAlone(t *testing.T) {
	t.Parallel()
	forbidden := func(h http.Header) error {
		return fmt.Errorf("claim job 7: %w", &github.ErrorResponse{
			Response: &http.Response{StatusCode: http.StatusForbidden, Header: h},
		})
	}
	remaining0 := http.Header{}
	remaining0.Set("X-RateLimit-Remaining", "0")
	tests := []struct {
		name string
		err  error
		want want
	}{
		// DESIGN: "403 with X-RateLimit-Remaining: 0" is a rate limit, even
		// when the reset header is missing and the message says nothing.
		{"403 remaining 0 without reset or message", forbidden(remaining0),
			want{class: failure.RateLimit, status: http.StatusForbidden, reason: "github 403"}},
		{"403 without rate headers is permission denied", forbidden(http.Header{}),
			want{class: failure.NonRetryable, status: http.StatusForbidden, reason: "permission denied"}},
		// The AWS codes named in DESIGN classify by their code, with no
		// HTTP status or fault to fall back on.
		{"bare InsufficientInstanceCapacity", api("InsufficientInstanceCapacity", smithy.FaultUnknown),
			want{class: failure.ServerSide, reason: "aws InsufficientInstanceCapacity"}},
		{"bare InternalError", api("InternalError", smithy.FaultUnknown),
			want{class: failure.ServerSide, reason: "aws InternalError"}},
		{"bare UnauthorizedOperation", api("UnauthorizedOperation", smithy.FaultUnknown),
			want{class: failure.NonRetryable, reason: "aws UnauthorizedOperation"}},
		{"bare InvalidParameterValue", api("InvalidParameterValue", smithy.FaultUnknown),
			want{class: failure.NonRetryable, reason: "aws InvalidParameterValue"}},
		// A net.Error that carries no errno (DNS) is still a network error.
		{"dns lookup", fmt.Errorf("claim job 7: %w", &net.DNSError{Err: "no such host", Name: "api.github.com", IsNotFound: true}),
			want{class: failure.Network, reason: "network: dns lookup failed"}},
		{"dns timeout", fmt.Errorf("claim job 7: %w", &net.DNSError{Err: "i/o timeout", Name: "api.github.com", IsTimeout: true}),
			want{class: failure.Network, reason: "network: timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, failure.Classify(tt.err), tt.want)
		})
	}
}

// TestReasonNamesGitHubsRequestID: a refused GitHub call's reason (stored
// as last_error, logged) names the answer's X-GitHub-Request-Id, which
// GitHub Support asks for; a header too long or not printable is left out.
func TestReasonNamesGitHubsRequestID(t *testing.T) {
	t.Parallel()
	answer := func(status int, id, message string) error {
		h := http.Header{}
		h.Set("X-GitHub-Request-Id", id)
		return &github.ErrorResponse{Response: &http.Response{StatusCode: status, Header: h}, Message: message}
	}
	const id = "C0DE:1234:5678:9ABC:DEF0"
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"404", answer(http.StatusNotFound, id, "Not Found"), "github 404 (request " + id + "): Not Found"},
		{"403 permission", answer(http.StatusForbidden, id, "Resource not accessible by integration"),
			"github 403 (request " + id + "): Resource not accessible by integration"},
		{"an id too long", answer(http.StatusNotFound, fmt.Sprintf("%0100d", 7), "Not Found"), "github 404: Not Found"},
		{"an id with a line break", answer(http.StatusNotFound, "C0DE\nforged: line", "Not Found"), "github 404: Not Found"},
	} {
		if got := failure.Classify(tt.err).Reason; got != tt.want {
			t.Errorf("%s: reason %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestHistoryKeepsTheCauseWithARequestID: a history entry keeps a reason's
// end (job.MaxHistoryError bytes), where the cause is; the request id goes
// before GitHub's message, so the entry still names it. With the id at the
// end, entries kept only a piece of the id.
func TestHistoryKeepsTheCauseWithARequestID(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("X-GitHub-Request-Id", "C3A4:1B2F:5D6E7F8:5E9A0B1:6571C3D2") // GitHub's shape
	err := &github.ErrorResponse{Response: &http.Response{StatusCode: http.StatusBadGateway, Header: h}, Message: "Bad Gateway"}
	fl := failure.Classify(err)
	hist := job.AppendHistory(nil, job.Transition{To: job.Queued, Attempt: 1, Class: fl.Class.String(), Error: fl.Reason, Actor: job.ActorClaimer})
	if got := hist[0].Error; !strings.Contains(got, "Bad Gateway") {
		t.Errorf("history entry error %q (reason %q): GitHub's message is not kept", got, fl.Reason)
	}
}

// TestHistoryKeepsTheStatusWithoutAMessage: GitHub's edge answers 502 and
// 504 with an HTML page (no message), and a 429 often has none: the reason
// then ends with the status's text, so a history entry (the reason's last
// bytes) still names the cause; it once ended with the request id.
func TestHistoryKeepsTheStatusWithoutAMessage(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusTooManyRequests} {
		h := http.Header{}
		h.Set("X-GitHub-Request-Id", "C3A4:1B2F:5D6E7F8:5E9A0B1:6571C3D2")
		err := &github.ErrorResponse{Response: &http.Response{StatusCode: status, Header: h}} // HTML body: no message
		fl := failure.Classify(err)
		hist := job.AppendHistory(nil, job.Transition{To: job.Queued, Attempt: 1, Class: fl.Class.String(), Error: fl.Reason, Actor: job.ActorClaimer})
		if got := hist[0].Error; !strings.Contains(got, http.StatusText(status)) {
			t.Errorf("status %d: reason %q, history entry %q: the cause is not kept", status, fl.Reason, got)
		}
	}
}

// TestForbiddenRateLimitWithoutMessageNamesTheCause: a 403 that is a rate
// limit only by its Retry-After (an HTML page of GitHub's edge: no message,
// so go-github gives a plain ErrorResponse) ends its reason with the cause,
// so a history entry (the reason's last bytes) names it; it ended with the
// request id.
func TestForbiddenRateLimitWithoutMessageNamesTheCause(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("X-GitHub-Request-Id", "C3A4:1B2F:5D6E7F8:5E9A0B1:6571C3D2")
	h.Set("Retry-After", "60")
	err := &github.ErrorResponse{Response: &http.Response{StatusCode: http.StatusForbidden, Header: h}} // HTML body: no message
	fl := failure.Classify(err)
	if fl.Class != failure.RateLimit {
		t.Fatalf("class %s, want rate_limit", fl.Class)
	}
	hist := job.AppendHistory(nil, job.Transition{To: job.Queued, Attempt: 1, Class: fl.Class.String(), Error: fl.Reason, Actor: job.ActorClaimer})
	if got := hist[0].Error; !strings.Contains(got, "limit exceeded") {
		t.Errorf("reason %q, history entry %q: a rate limit without GitHub's message does not end with its cause", fl.Reason, got)
	}
}

package awsrpc_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/awsrpc"
	"github.com/ghclaim/ghclaim/shared/failure"
)

// Once an answer has come, every error carries its status, as the SDK's
// do; an answer cut off is retried only when the SDK would retry it (a
// reset, not a short body: the request may have taken effect), and one
// that is not the service's error document is no API error.
func TestAnswersThatCannotBeRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		answer       answer
		readErr      error
		decodeErr    error
		wantRequests int
		wantAPI      bool
		wantClass    failure.Class
	}{
		{name: "a 2xx cut short: not sent again", answer: answer{200, `{"Parameter":`}, readErr: io.ErrUnexpectedEOF,
			wantRequests: 1, wantClass: failure.UnknownRetryable},
		{name: "a 2xx whose connection was reset: sent again, as the SDK does", answer: answer{200, `{"Par`}, readErr: syscall.ECONNRESET,
			wantRequests: 3, wantClass: failure.UnknownRetryable},
		{name: "a 2xx that does not decode", answer: answer{200, `{}`}, decodeErr: errors.New("missing member"),
			wantRequests: 1, wantClass: failure.UnknownRetryable},
		{name: "an error answer cut short: its code unread", answer: answer{400, `ValidationException: 1 validation`}, readErr: io.ErrUnexpectedEOF,
			wantRequests: 1, wantClass: failure.UnknownRetryable},
		{name: "a proxy's 403 page: no API error, refused for good", answer: answer{403, `<html>Forbidden</html>`},
			wantRequests: 1, wantClass: failure.NonRetryable},
		{name: "a proxy's 502 page: retried on its status", answer: answer{502, `<html>Bad Gateway</html>`},
			wantRequests: 3, wantClass: failure.ServerSide},
		{name: "the service's own error", answer: answer{400, `ValidationException: bad value`},
			wantRequests: 1, wantAPI: true, wantClass: failure.NonRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, e := setup(t, tt.answer)
			e.readErr = tt.readErr
			err := c.Call(context.Background(), "Do", nil, nil, func(int, []byte) error { return tt.decodeErr })
			var status interface{ HTTPStatusCode() int }
			var api smithy.APIError
			switch {
			case err == nil:
				t.Fatal("got success, want an error")
			case len(e.reqs) != tt.wantRequests:
				t.Errorf("%d requests, want %d (%v)", len(e.reqs), tt.wantRequests, err)
			case !errors.As(err, &status) || status.HTTPStatusCode() != tt.answer.status:
				t.Errorf("got %v, want the answer's status %d in it", err, tt.answer.status)
			case errors.As(err, &api) != tt.wantAPI:
				t.Errorf("got %v, want an API error: %v", err, tt.wantAPI)
			}
			if got := failure.Classify(err).Class; got != tt.wantClass {
				t.Errorf("class: got %s, want %s (%v)", got, tt.wantClass, err)
			}
		})
	}
}

// An answer that comes as the call's context ends is still the call's
// end, as with the SDK: a refusal stays a refusal, and an answer that
// would be retried is joined by the cancellation of its retry.
func TestAnAnswerAtTheDeadline(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		answer     answer
		wantCode   string
		wantCancel bool
	}{
		{answer: answer{400, "ValidationException: bad value"}, wantCode: "ValidationException"},
		{answer: answer{503, "ServiceUnavailable: busy"}, wantCode: "ServiceUnavailable", wantCancel: true},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		e := &endpoint{script: []answer{tt.answer}, answered: cancel}
		cfg := testConfig(e)
		c := awsrpc.New(plain, cfg, func(o *awsrpc.Options) {
			o.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
		})
		err := c.Call(ctx, "Do", nil, nil, nil)
		if got := errors.Is(err, context.Canceled); got != tt.wantCancel || awsrpc.Code(err) != tt.wantCode || len(e.reqs) != 1 {
			t.Errorf("%d answered as the context ended: got %v after %d requests, want code %q, cancelled %v, 1 request",
				tt.answer.status, err, len(e.reqs), tt.wantCode, tt.wantCancel)
		}
	}
}

// maxAttempts is a retryer whose MaxAttempts is its own.
type maxAttempts struct {
	aws.RetryerV2
	n int
}

func (m maxAttempts) MaxAttempts() int { return m.n }

// A retryer's limits hold as in the SDK: MaxAttempts 0 is no limit, and a
// call its retry quota cuts short ends in both the answer and the quota's
// error.
func TestRetryerLimits(t *testing.T) {
	t.Parallel()
	newClient := func(e *endpoint, r func() aws.Retryer) *awsrpc.Client {
		cfg := testConfig(e)
		cfg.Retryer = r
		return awsrpc.New(plain, cfg, func(o *awsrpc.Options) { o.Sleep = func(context.Context, time.Duration) error { return nil } })
	}

	busy := answer{503, "ServiceUnavailable: busy"}
	e := &endpoint{script: []answer{busy, busy, busy, busy, busy, {200, ""}}}
	c := newClient(e, func() aws.Retryer { return maxAttempts{retry.NewStandard(), 0} })
	if err := c.Call(context.Background(), "Do", nil, nil, nil); err != nil || len(e.reqs) != 6 {
		t.Errorf("MaxAttempts 0: got %v after %d requests, want success after 6", err, len(e.reqs))
	}

	e = &endpoint{script: []answer{busy}}
	c = newClient(e, func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts, o.RetryCost, o.RateLimiter = 5, 5, ratelimit.NewTokenRateLimit(5)
		})
	})
	err := c.Call(context.Background(), "Do", nil, nil, nil)
	var quota ratelimit.QuotaExceededError
	if !errors.As(err, &quota) || awsrpc.Code(err) != "ServiceUnavailable" || awsrpc.Attempts(err) != 2 || len(e.reqs) != 2 ||
		!strings.Contains(err.Error(), "busy") {
		t.Errorf("quota for one retry: got %v after %d requests, want the answer and the quota's error after 2", err, len(e.reqs))
	}
}

// A configured endpoint's own path is where requests go, as with the
// SDK's clients; without one, they go to "/".
func TestEndpointPath(t *testing.T) {
	t.Parallel()
	for base, want := range map[string]string{
		"http://127.0.0.1:4566":         "http://127.0.0.1:4566/",
		"http://127.0.0.1:4566/":        "http://127.0.0.1:4566/",
		"http://127.0.0.1:4566/aws/ssm": "http://127.0.0.1:4566/aws/ssm",
	} {
		e := &endpoint{script: []answer{{200, ""}}}
		cfg := testConfig(e)
		cfg.BaseEndpoint = aws.String(base)
		if err := awsrpc.New(plain, cfg).Call(context.Background(), "Do", nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		if got := e.reqs[0].URL.String(); got != want {
			t.Errorf("endpoint %s: request to %s, want %s", base, got, want)
		}
	}
}

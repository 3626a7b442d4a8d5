package awsrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/awsrpc"
	"github.com/ghclaim/ghclaim/shared/failure"
)

func TestPartition(t *testing.T) {
	t.Parallel()
	for region, want := range map[string]string{
		"us-east-1": "aws", "eu-central-2": "aws", "cn-north-1": "aws-cn", "cn-northwest-1": "aws-cn",
		"us-gov-west-1": "aws-us-gov", "us-iso-east-1": "aws-iso", "us-isob-east-1": "aws-iso-b",
		"eu-isoe-west-1": "aws-iso-e", "us-isof-south-1": "aws-iso-f", "eusc-de-east-1": "aws-eusc",
	} {
		if got := awsrpc.Partition(region); got != want {
			t.Errorf("Partition(%q): got %q, want %q", region, got, want)
		}
	}
}

func TestCode(t *testing.T) {
	t.Parallel()
	api := &smithy.GenericAPIError{Code: "ParameterNotFound", Message: "not found"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "wrapped API error", err: fmt.Errorf("delete: %w", &smithy.OperationError{ServiceID: "SSM", OperationName: "DeleteParameter", Err: api}), want: "ParameterNotFound"},
		{name: "no API error", err: errors.New("connection reset"), want: ""},
		{name: "nil", err: nil, want: ""},
	}
	for _, tt := range tests {
		if got := awsrpc.Code(tt.err); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// answer is one canned HTTP answer of a fake endpoint.
type answer struct {
	status int
	body   string
}

// endpoint is an aws.HTTPClient that records each request and answers
// from a script (the last answer repeats), or fails to send with sendErr.
type endpoint struct {
	mu      sync.Mutex
	script  []answer
	reqs    []*http.Request
	bodies  []string
	delays  []time.Duration
	sendErr error
	header  http.Header // more headers on every answer
	readErr error       // reading each answer's body ends in it, after the body
	// answered runs as each answer is returned (the test's context may
	// end there).
	answered func()
}

func (e *endpoint) Do(r *http.Request) (*http.Response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	e.reqs, e.bodies = append(e.reqs, r), append(e.bodies, string(b))
	if e.sendErr != nil {
		return nil, e.sendErr
	}
	a := e.script[min(len(e.reqs), len(e.script))-1]
	h := http.Header{"X-Amzn-Requestid": {"hdr-request-id"}}
	for k, v := range e.header {
		h[k] = v
	}
	var body io.Reader = strings.NewReader(a.body)
	if e.readErr != nil {
		body = io.MultiReader(body, iotest.ErrReader(e.readErr))
	}
	if e.answered != nil {
		e.answered()
	}
	return &http.Response{
		StatusCode: a.status, Status: http.StatusText(a.status),
		Header: h,
		Body:   io.NopCloser(body), Request: r,
	}, nil
}

// plain is a service whose error answer is "code: message".
var plain = awsrpc.Service{
	ID: "Plain Service", SigningName: "plain", EndpointPrefix: "plain", ContentType: "text/plain",
	Error: func(_ http.Header, body []byte) (string, string, string, error) {
		if strings.HasPrefix(string(body), "<") {
			return "", "", "", errors.New("not plain text")
		}
		code, msg, _ := strings.Cut(string(body), ": ")
		return code, msg, "", nil
	},
}

var signedAt = time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)

// testConfig is a configuration in eu-west-1 with static credentials,
// sending through hc.
func testConfig(hc aws.HTTPClient) aws.Config {
	return aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""), HTTPClient: hc}
}

func setup(t *testing.T, script ...answer) (*awsrpc.Client, *endpoint) {
	t.Helper()
	e := &endpoint{script: script}
	cfg := aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret-key-example", ""),
		HTTPClient:  e,
	}
	c := awsrpc.New(plain, cfg, func(o *awsrpc.Options) {
		o.Now = func() time.Time { return signedAt }
		o.Sleep = func(_ context.Context, d time.Duration) error { e.delays = append(e.delays, d); return nil }
	})
	return c, e
}

func TestCallSignsAndDecodes(t *testing.T) {
	t.Parallel()
	c, e := setup(t, answer{200, "answered"})
	var got string
	err := c.Call(context.Background(), "Echo", http.Header{"X-Amz-Target": {"Plain.Echo"}}, []byte("asked"), func(status int, body []byte) error {
		got = fmt.Sprintf("%d %s", status, body)
		return nil
	})
	if err != nil || got != "200 answered" {
		t.Fatalf("got %q, %v; want the answer decoded", got, err)
	}
	r := e.reqs[0]
	switch {
	case r.URL.String() != "https://plain.eu-west-1.amazonaws.com/" || r.Method != http.MethodPost || e.bodies[0] != "asked":
		t.Errorf("request: %s %s %q", r.Method, r.URL, e.bodies[0])
	case r.Header.Get("Content-Type") != "text/plain" || r.Header.Get("X-Amz-Target") != "Plain.Echo":
		t.Errorf("headers: %v", r.Header)
	case !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261205/eu-west-1/plain/aws4_request"):
		t.Errorf("Authorization: %q", r.Header.Get("Authorization"))
	case r.Header.Get("X-Amz-Date") != "20261205T030000Z":
		t.Errorf("X-Amz-Date: %q, want the injected clock's", r.Header.Get("X-Amz-Date"))
	}

	c, _ = setup(t, answer{200, "not what was expected"})
	err = c.Call(context.Background(), "Echo", nil, nil, func(int, []byte) error { return errors.New("bad document") })
	var de *smithy.DeserializationError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "bad document") {
		t.Errorf("an undecodable answer: got %v, want a DeserializationError", err)
	}
}

func TestErrorsAreTheSDKsChainAndRetryAsTheSDKDoes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		script       []answer
		wantCode     string
		wantMessage  string
		wantStatus   int
		wantRequests int
		wantAttempts int
		wantClass    failure.Class
	}{
		{name: "refused: no retry, failed for good",
			script:   []answer{{400, "ValidationException: bad value"}},
			wantCode: "ValidationException", wantMessage: "bad value", wantStatus: 400, wantRequests: 1, wantClass: failure.NonRetryable},
		{name: "throttled: retried by the retryer, then the ladder's",
			script:   []answer{{400, "ThrottlingException: Rate exceeded"}},
			wantCode: "ThrottlingException", wantMessage: "Rate exceeded", wantStatus: 400, wantRequests: 3, wantAttempts: 3, wantClass: failure.RateLimit},
		{name: "server error without a document",
			script:   []answer{{500, ""}},
			wantCode: "UnknownError", wantMessage: "UnknownError", wantStatus: 500, wantRequests: 3, wantAttempts: 3, wantClass: failure.ServerSide},
		{name: "a retry refused outright: marked as retried",
			script:   []answer{{503, "ServiceUnavailable: busy"}, {400, "ValidationException: bad value"}},
			wantCode: "ValidationException", wantMessage: "bad value", wantStatus: 400, wantRequests: 2, wantAttempts: 2, wantClass: failure.NonRetryable},
		{name: "unavailable, then answered",
			script:       []answer{{503, "ServiceUnavailable: busy"}, {200, ""}},
			wantRequests: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, e := setup(t, tt.script...)
			err := c.Call(context.Background(), "Do", nil, []byte("x"), nil)
			if len(e.reqs) != tt.wantRequests || len(e.delays) != tt.wantRequests-1 {
				t.Errorf("requests: got %d with %d waits, want %d with %d", len(e.reqs), len(e.delays), tt.wantRequests, tt.wantRequests-1)
			}
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("got %v, want success after the retry", err)
				}
				return
			}
			var api smithy.APIError
			var op *smithy.OperationError
			var status interface{ HTTPStatusCode() int }
			var id interface{ ServiceRequestID() string }
			switch {
			case !errors.As(err, &api) || api.ErrorCode() != tt.wantCode || api.ErrorMessage() != tt.wantMessage || awsrpc.Code(err) != tt.wantCode:
				t.Errorf("got %v, want an API error %s: %s", err, tt.wantCode, tt.wantMessage)
			case !errors.As(err, &op) || op.Service() != "Plain Service" || op.Operation() != "Do":
				t.Errorf("got %v, want an operation error of Plain Service Do", err)
			case !errors.As(err, &status) || status.HTTPStatusCode() != tt.wantStatus:
				t.Errorf("got %v, want HTTP status %d", err, tt.wantStatus)
			case !errors.As(err, &id) || id.ServiceRequestID() != "hdr-request-id":
				t.Errorf("got %v, want the header's request ID", err)
			}
			if got := failure.Classify(err).Class; got != tt.wantClass {
				t.Errorf("class: got %s, want %s (%v)", got, tt.wantClass, err)
			}
			if got := awsrpc.Attempts(err); got != tt.wantAttempts {
				t.Errorf("Attempts: got %d, want %d", got, tt.wantAttempts)
			}
		})
	}
}

func TestConnectionErrorsRetryAndCancelStops(t *testing.T) {
	t.Parallel()
	c, e := setup(t)
	e.sendErr = errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer")
	err := c.Call(context.Background(), "Do", nil, nil, nil)
	var max *retry.MaxAttemptsError
	if !errors.As(err, &max) || len(e.reqs) != 3 {
		t.Errorf("got %v after %d requests, want the retryer's MaxAttemptsError after 3", err, len(e.reqs))
	}

	c2, e2 := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	e2.sendErr = errors.New("connection reset by peer")
	cancel()
	err = c2.Call(ctx, "Do", nil, nil, nil)
	var canceled *smithy.CanceledError
	if !errors.As(err, &canceled) || len(e2.reqs) > 1 {
		t.Errorf("got %v after %d requests, want a CanceledError and no retry", err, len(e2.reqs))
	}
}

// An option sees the configuration's HTTP client and may wrap it, as the
// SDK's clients' options do (the tests' strict SSM double wraps moto's).
func TestOptionsWrapTheConfigurationsHTTPClient(t *testing.T) {
	t.Parallel()
	cfgs := &endpoint{script: []answer{{200, ""}}}
	cfg := testConfig(cfgs)
	wrapped := 0
	c := awsrpc.New(plain, cfg, func(o *awsrpc.Options) {
		next := o.HTTPClient
		if next == nil {
			t.Fatal("the option saw no HTTP client, want the configuration's")
		}
		o.HTTPClient = doFunc(func(r *http.Request) (*http.Response, error) { wrapped++; return next.Do(r) })
	})
	if err := c.Call(context.Background(), "Do", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if wrapped != 1 || len(cfgs.reqs) != 1 {
		t.Errorf("got %d requests through the wrapper, %d through the configuration's client; want 1 and 1", wrapped, len(cfgs.reqs))
	}
}

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// A service's own regional rule replaces the standard one; a configured
// endpoint still wins over it, and FIPS or dual-stack with one is still
// refused.
func TestRegionalRule(t *testing.T) {
	t.Parallel()
	own := plain
	own.Regional = func(region string, fips, dual bool) string {
		return fmt.Sprintf("https://own.%s.example?fips=%t&dual=%t", region, fips, dual)
	}
	fipsOn := []any{config.EnvConfig{UseFIPSEndpoint: aws.FIPSEndpointStateEnabled}}
	tests := []struct {
		name    string
		cfg     aws.Config
		want    string
		wantErr string
	}{
		{name: "the service's rule", cfg: aws.Config{Region: "eu-west-1", ConfigSources: fipsOn}, want: "https://own.eu-west-1.example?fips=true&dual=false"},
		{name: "a configured endpoint wins", cfg: aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String("http://127.0.0.1:4566/")}, want: "http://127.0.0.1:4566"},
		{name: "FIPS with a configured endpoint", cfg: aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String("http://127.0.0.1:4566"), ConfigSources: fipsOn}, wantErr: "FIPS"},
		{name: "no region", cfg: aws.Config{}, want: ""},
	}
	for _, tt := range tests {
		got, err := own.Endpoint(tt.cfg)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: got %q, %v; want an error naming %s", tt.name, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	if got, _ := plain.Endpoint(aws.Config{Region: "eu-west-1", ConfigSources: fipsOn}); got != "https://plain-fips.eu-west-1.amazonaws.com" {
		t.Errorf("without a rule of its own: got %q, want the standard FIPS endpoint", got)
	}
}

// The retry settings an operator gives the SDK (AWS_MAX_ATTEMPTS,
// AWS_RETRY_MODE, or their shared-config keys, which config.LoadDefaultConfig
// puts in aws.Config) hold for these clients as for the SDK's.
func TestRetrySettingsOfTheConfiguration(t *testing.T) {
	t.Parallel()
	standard := func() aws.Retryer { return retry.NewStandard() }
	tests := []struct {
		name         string
		maxAttempts  int
		mode         aws.RetryMode
		retryer      func() aws.Retryer
		wantRequests int
	}{
		{name: "the standard retryer's 3 attempts", wantRequests: 3},
		{name: "max attempts 1", maxAttempts: 1, wantRequests: 1},
		{name: "max attempts 5", maxAttempts: 5, wantRequests: 5},
		{name: "adaptive, max attempts 4", mode: aws.RetryModeAdaptive, maxAttempts: 4, wantRequests: 4},
		{name: "the configuration's retryer, max attempts 2 over it", retryer: standard, maxAttempts: 2, wantRequests: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &endpoint{script: []answer{{503, "ServiceUnavailable: busy"}}}
			cfg := testConfig(e)
			cfg.RetryMaxAttempts, cfg.RetryMode, cfg.Retryer = tt.maxAttempts, tt.mode, tt.retryer
			c := awsrpc.New(plain, cfg, func(o *awsrpc.Options) {
				o.Sleep = func(context.Context, time.Duration) error { return nil }
			})
			err := c.Call(context.Background(), "Do", nil, nil, nil)
			if err == nil || len(e.reqs) != tt.wantRequests {
				t.Errorf("got %v after %d requests, want an error after %d", err, len(e.reqs), tt.wantRequests)
			}
		})
	}
}

// A service's X-Amz-Retry-After (milliseconds) sets the wait before the
// next attempt as the SDK's retry loop sets it: no shorter than the
// retryer's backoff, at most 5 s longer, ignored when not a count.
func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	const backoff = 100 * time.Millisecond
	tests := []struct {
		header string
		want   time.Duration
	}{
		{header: "", want: backoff},
		{header: "2500", want: 2500 * time.Millisecond},
		{header: "20", want: backoff},
		{header: "60000", want: backoff + 5*time.Second},
		{header: "soon", want: backoff},
		{header: "-5", want: backoff},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			t.Parallel()
			e := &endpoint{script: []answer{{503, "ServiceUnavailable: busy"}, {200, ""}}}
			if tt.header != "" {
				e.header = http.Header{"X-Amz-Retry-After": {tt.header}}
			}
			cfg := testConfig(e)
			cfg.Retryer = func() aws.Retryer {
				return retry.NewStandard(func(o *retry.StandardOptions) {
					o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return backoff, nil })
				})
			}
			c := awsrpc.New(plain, cfg, func(o *awsrpc.Options) {
				o.Sleep = func(_ context.Context, d time.Duration) error { e.delays = append(e.delays, d); return nil }
			})
			if err := c.Call(context.Background(), "Do", nil, nil, nil); err != nil {
				t.Fatal(err)
			}
			if len(e.delays) != 1 || e.delays[0] != tt.want {
				t.Errorf("waits %v, want [%v]", e.delays, tt.want)
			}
		})
	}
}

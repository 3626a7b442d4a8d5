package failure_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ghapp"
	"github.com/ghclaim/ghclaim/shared/provision"
)

// resetEpoch is a reset far in the future, so go-github's own wall-clock
// checks never treat it as passed.
const resetEpoch = 4102444800 // 2100-01-01T00:00:00Z

var resetAt = time.Unix(resetEpoch, 0)

// GitHub's real error bodies.
const (
	bodyPrimary   = `{"message":"API rate limit exceeded for installation ID 1.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`
	bodySecondary = `{"message":"You have exceeded a secondary rate limit and have been temporarily blocked from content creation. Please retry your request again later. If you reach out to GitHub Support for help, please include the request ID 0000:1111:2222:3333:4444.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`
	bodyForbidden = `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest/actions/self-hosted-runners#create-configuration-for-a-just-in-time-runner-for-a-repository","status":"403"}`
	bodyNotFound  = `{"message":"Not Found","documentation_url":"https://docs.github.com/rest/actions/self-hosted-runners#create-configuration-for-a-just-in-time-runner-for-a-repository","status":"404"}`
	bodyInvalid   = `{"message":"Validation Failed","errors":[{"resource":"Runner","code":"invalid","field":"labels"}],"documentation_url":"https://docs.github.com/rest/actions/self-hosted-runners#create-configuration-for-a-just-in-time-runner-for-a-repository","status":"422"}`
	bodyBadCreds  = `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}`
	bodyConflict  = `{"message":"Already exists - A runner with the name ci-7 already exists.","documentation_url":"https://docs.github.com/rest/actions/self-hosted-runners#create-configuration-for-a-just-in-time-runner-for-a-repository","status":"409"}`
	body503       = `{"message":"Service Unavailable","documentation_url":"https://docs.github.com/rest","status":"503"}`
	body502HTML   = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n"
)

// reply is one canned GitHub answer.
type reply struct {
	status  int
	headers map[string]string
	body    string
}

func rateHeaders(remaining string) map[string]string {
	return map[string]string{
		"X-RateLimit-Limit":     "5000",
		"X-RateLimit-Remaining": remaining,
		"X-RateLimit-Reset":     fmt.Sprint(resetEpoch),
		"X-RateLimit-Used":      "5000",
		"X-RateLimit-Resource":  "core",
	}
}

func with(h map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for hk, hv := range h {
		out[hk] = hv
	}
	return out
}

// setup starts a GitHub stand-in that answers every request with rep and
// returns a real go-github client pointed at it.
func setup(t *testing.T, rep reply) *github.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rep.headers["Content-Type"] == "" {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
		}
		for k, v := range rep.headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.status)
		_, _ = w.Write([]byte(rep.body))
	}))
	t.Cleanup(srv.Close)
	return newClient(t, srv.URL, srv.Client())
}

func newClient(t *testing.T, base string, hc *http.Client) *github.Client {
	t.Helper()
	c, err := github.NewClient(hc).WithEnterpriseURLs(base+"/", base+"/")
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	c.BaseURL.Path = "/" // the stand-in serves the API at its root, like api.github.com
	return c
}

// jit makes the call the claimer makes.
func jit(ctx context.Context, c *github.Client) error {
	_, _, err := c.Actions.GenerateRepoJITConfig(ctx, "octo", "repo", &github.GenerateJITConfigRequest{
		Name: "ci-7", RunnerGroupID: 1, Labels: []string{"self-hosted", "linux"},
	})
	if err == nil {
		return errors.New("want an error, got none")
	}
	return fmt.Errorf("claim job 7: %w", err) // callers wrap; the class must survive it
}

type want struct {
	class      failure.Class
	retryAfter time.Duration
	resetAt    time.Time
	status     int
	reason     string // substring
}

func check(t *testing.T, got failure.Failure, w want) {
	t.Helper()
	if got.Class != w.class {
		t.Errorf("class: got %v, want %v (reason %q)", got.Class, w.class, got.Reason)
	}
	if got.RetryAfter != w.retryAfter {
		t.Errorf("RetryAfter: got %v, want %v", got.RetryAfter, w.retryAfter)
	}
	if !got.ResetAt.Equal(w.resetAt) {
		t.Errorf("ResetAt: got %v, want %v", got.ResetAt, w.resetAt)
	}
	if got.Status != w.status {
		t.Errorf("Status: got %d, want %d", got.Status, w.status)
	}
	if !strings.Contains(got.Reason, w.reason) {
		t.Errorf("Reason: got %q, want it to contain %q", got.Reason, w.reason)
	}
	if got.Class.Retryable() != (w.class != failure.NonRetryable) {
		t.Errorf("Retryable: got %v for %v", got.Class.Retryable(), w.class)
	}
	if got.AppRefused && (!got.TokenExchange || got.Class != failure.UnknownRetryable) {
		t.Errorf("AppRefused on %v (token exchange %v): only a refused token exchange is, and it is retried", got.Class, got.TokenExchange)
	}
}

func TestClassifyGitHub(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply reply
		want  want
	}{
		{
			name:  "primary rate limit 403 remaining 0",
			reply: reply{403, rateHeaders("0"), bodyPrimary},
			want:  want{class: failure.RateLimit, resetAt: resetAt, status: 403, reason: "API rate limit exceeded"},
		},
		{
			name:  "primary rate limit 429 remaining 0",
			reply: reply{429, rateHeaders("0"), bodyPrimary},
			want:  want{class: failure.RateLimit, resetAt: resetAt, status: 429, reason: "github 429"},
		},
		{
			name:  "secondary limit 403 with Retry-After",
			reply: reply{403, with(rateHeaders("4990"), "Retry-After", "60"), bodySecondary},
			want:  want{class: failure.RateLimit, retryAfter: 60 * time.Second, status: 403, reason: "secondary rate limit"},
		},
		{
			// A garbled Retry-After must not wrap into a short wait.
			name:  "secondary limit 403 with a Retry-After that overflows nanoseconds",
			reply: reply{403, with(rateHeaders("4990"), "Retry-After", "18446744074"), bodySecondary},
			want:  want{class: failure.RateLimit, retryAfter: 24 * time.Hour, status: 403, reason: "secondary rate limit"},
		},
		{
			// GitHub: without Retry-After and with budget left, ignore the
			// reset and wait at least a minute (the policy's job).
			name:  "secondary limit 403 without Retry-After",
			reply: reply{403, rateHeaders("4990"), bodySecondary},
			want:  want{class: failure.RateLimit, status: 403, reason: "secondary rate limit"},
		},
		{
			name:  "secondary limit 429 with Retry-After",
			reply: reply{429, with(rateHeaders("4990"), "Retry-After", "30"), bodySecondary},
			want:  want{class: failure.RateLimit, retryAfter: 30 * time.Second, status: 429, reason: "github 429"},
		},
		{
			name:  "429 without any header",
			reply: reply{429, nil, `{"message":"Too Many Requests"}`},
			want:  want{class: failure.RateLimit, status: 429, reason: "Too Many Requests"},
		},
		{
			name:  "403 permission denied",
			reply: reply{403, rateHeaders("4999"), bodyForbidden},
			want:  want{class: failure.NonRetryable, status: 403, reason: "Resource not accessible by integration"},
		},
		{
			name:  "404 not found",
			reply: reply{404, rateHeaders("4999"), bodyNotFound},
			want:  want{class: failure.NonRetryable, status: 404, reason: "github 404: Not Found"},
		},
		{
			name:  "422 validation failed",
			reply: reply{422, rateHeaders("4999"), bodyInvalid},
			want:  want{class: failure.NonRetryable, status: 422, reason: "Validation Failed"},
		},
		{
			name:  "401 bad credentials",
			reply: reply{401, nil, bodyBadCreds},
			want:  want{class: failure.NonRetryable, status: 401, reason: "Bad credentials"},
		},
		{
			name:  "409 already exists stays retryable",
			reply: reply{409, rateHeaders("4999"), bodyConflict},
			want:  want{class: failure.UnknownRetryable, status: 409, reason: "Already exists"},
		},
		{
			name:  "502 html bad gateway",
			reply: reply{502, map[string]string{"Content-Type": "text/html"}, body502HTML},
			want:  want{class: failure.ServerSide, status: 502, reason: "github 502"},
		},
		{
			name:  "503 service unavailable",
			reply: reply{503, nil, body503},
			want:  want{class: failure.ServerSide, status: 503, reason: "Service Unavailable"},
		},
		{
			name:  "500 empty body",
			reply: reply{500, nil, ""},
			want:  want{class: failure.ServerSide, status: 500, reason: "github 500"},
		},
		{
			name:  "202 accepted",
			reply: reply{202, nil, `{}`},
			want:  want{class: failure.ServerSide, status: 202, reason: "202"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t, tt.reply)
			check(t, failure.Classify(jit(context.Background(), c)), tt.want)
		})
	}
}

// go-github remembers an exhausted budget and answers the next call itself,
// with a fake header-less response: the reset must still come through.
func TestClassifyGoGitHubMemory(t *testing.T) {
	t.Parallel()
	t.Run("primary", func(t *testing.T) {
		t.Parallel()
		c := setup(t, reply{403, rateHeaders("0"), bodyPrimary})
		_ = jit(context.Background(), c)
		err := jit(context.Background(), c)
		if !strings.Contains(err.Error(), "not making remote request") {
			t.Fatalf("second call reached the server: %v", err)
		}
		check(t, failure.Classify(err), want{class: failure.RateLimit, resetAt: resetAt, status: 403, reason: "still exceeded"})
	})
	t.Run("secondary", func(t *testing.T) {
		t.Parallel()
		c := setup(t, reply{403, with(rateHeaders("4990"), "Retry-After", "3600"), bodySecondary})
		_ = jit(context.Background(), c)
		err := jit(context.Background(), c)
		if !strings.Contains(err.Error(), "not making remote request") {
			t.Fatalf("second call reached the server: %v", err)
		}
		got := failure.Classify(err)
		// go-github computes the remainder with the wall clock: bound it.
		if got.Class != failure.RateLimit || got.RetryAfter <= 59*time.Minute || got.RetryAfter > time.Hour {
			t.Errorf("got %+v, want rate_limit with RetryAfter in (59m, 60m]", got)
		}
	})
}

func TestClassifyNetwork(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  func(t *testing.T) error
		want want
	}{
		{
			name: "connection reset",
			err: func(t *testing.T) error {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					conn, _, err := w.(http.Hijacker).Hijack()
					if err != nil {
						t.Errorf("hijack: %v", err)
						return
					}
					_ = conn.(*net.TCPConn).SetLinger(0) // close with RST
					_ = conn.Close()
				}))
				t.Cleanup(srv.Close)
				return jit(context.Background(), newClient(t, srv.URL, srv.Client()))
			},
			want: want{class: failure.Network, reason: "network: connection reset"},
		},
		{
			name: "connection closed without response",
			err: func(t *testing.T) error {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					conn, _, err := w.(http.Hijacker).Hijack()
					if err != nil {
						t.Errorf("hijack: %v", err)
						return
					}
					_ = conn.Close()
				}))
				t.Cleanup(srv.Close)
				return jit(context.Background(), newClient(t, srv.URL, srv.Client()))
			},
			want: want{class: failure.Network, reason: "network:"},
		},
		{
			name: "connection refused",
			err: func(t *testing.T) error {
				// A socket file nobody listens on refuses, and no other
				// process can take it as it could a TCP port just closed
				// (then the dial reached that process's listener).
				path := filepath.Join(t.TempDir(), "closed.sock")
				ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				ln.SetUnlinkOnClose(false)
				_ = ln.Close()
				hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "unix", path)
				}}}
				return jit(context.Background(), newClient(t, "http://closed.invalid", hc))
			},
			want: want{class: failure.Network, reason: "network: connection refused"},
		},
		{
			name: "client timeout",
			err: func(t *testing.T) error {
				srv := hanging(t, nil)
				hc := srv.Client()
				hc.Timeout = 50 * time.Millisecond
				return jit(context.Background(), newClient(t, srv.URL, hc))
			},
			want: want{class: failure.Network, reason: "timeout"},
		},
		{
			name: "context deadline",
			err: func(t *testing.T) error {
				srv := hanging(t, nil)
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				t.Cleanup(cancel)
				return jit(ctx, newClient(t, srv.URL, srv.Client()))
			},
			want: want{class: failure.Network, reason: "timeout: context deadline exceeded"},
		},
		{
			name: "context canceled",
			err: func(t *testing.T) error {
				ctx, cancel := context.WithCancel(context.Background())
				srv := hanging(t, cancel)
				return jit(ctx, newClient(t, srv.URL, srv.Client()))
			},
			want: want{class: failure.UnknownRetryable, reason: "context canceled"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, failure.Classify(tt.err(t)), tt.want)
		})
	}
}

// hanging starts a server that never answers: it calls onRequest (when not
// nil) and then waits until the client goes away or the test ends.
func hanging(t *testing.T, onRequest func()) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body so the server watches the connection and cancels
		// r.Context() when the client hangs up.
		_, _ = io.Copy(io.Discard, r.Body)
		if onRequest != nil {
			onRequest()
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs before srv.Close
	return srv
}

// The installation-token exchange (shared/ghapp) fails before the API call:
// it must classify by the token endpoint's status, not as a network error
// (a *url.Error is a net.Error), and say it was the token. GitHub refusing
// the exchange (the App's key, id or installation) is no job's fault: it
// is retried (AppRefused), where the same status on a job's own call fails
// the job (TestClassifyGitHub).
func TestClassifyInstallationToken(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	tests := []struct {
		name    string
		reply   reply
		want    want
		refused bool
	}{
		{"401 bad app key", reply{401, nil, `{"message":"A JSON web token could not be decoded","documentation_url":"https://docs.github.com/rest"}`},
			want{class: failure.UnknownRetryable, status: 401, reason: "github token 401: A JSON web token could not be decoded"}, true},
		{"404 installation gone", reply{404, nil, bodyNotFound}, want{class: failure.UnknownRetryable, status: 404, reason: "github token 404"}, true},
		{"403 installation suspended", reply{403, rateHeaders("4999"),
			`{"message":"This installation has been suspended","documentation_url":"https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app","status":"403"}`},
			want{class: failure.UnknownRetryable, status: 403, reason: "github token 403: This installation has been suspended"}, true},
		{"500", reply{500, nil, ""}, want{class: failure.ServerSide, status: 500, reason: "github token 500"}, false},
		{"403 rate limited", reply{403, rateHeaders("0"), bodyPrimary}, want{class: failure.RateLimit, status: 403, resetAt: resetAt}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/access_tokens") {
					t.Errorf("unexpected request %s %s: the token refresh should have failed first", r.Method, r.URL.Path)
				}
				for k, v := range tt.reply.headers {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.reply.status)
				_, _ = w.Write([]byte(tt.reply.body))
			}))
			t.Cleanup(srv.Close)
			gh, err := ghapp.New(ghapp.Config{AppID: 1, PrivateKey: pemKey, BaseURL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			_, err = gh.GenerateJIT(context.Background(), 42, ghapp.JITRequest{
				Scope: ghapp.ScopeRepo, Owner: "octo", Repo: "repo", Name: "ci-7", Labels: []string{"self-hosted"},
			})
			if err == nil {
				t.Fatal("GenerateJIT: want an error, got none")
			}
			got := failure.Classify(fmt.Errorf("claim job 7: %w", err))
			check(t, got, tt.want)
			if got.AppRefused != tt.refused || !got.TokenExchange {
				t.Errorf("AppRefused %v TokenExchange %v, want %v and true", got.AppRefused, got.TokenExchange, tt.refused)
			}
		})
	}
}

// awsErr builds the error chain the AWS SDK returns: OperationError →
// awshttp.ResponseError (embedding smithyhttp.ResponseError) → API error.
func awsErr(status int, inner error) error {
	return fmt.Errorf("launch runner: %w", &smithy.OperationError{
		ServiceID: "EC2", OperationName: "RunInstances",
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
				Err:      inner,
			},
			RequestID: "req-1",
		},
	})
}

func api(code string, fault smithy.ErrorFault) error {
	return &smithy.GenericAPIError{Code: code, Message: "message for " + code, Fault: fault}
}

func TestClassifyAWS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want want
	}{
		{"RequestLimitExceeded", awsErr(503, api("RequestLimitExceeded", smithy.FaultClient)), want{class: failure.RateLimit, status: 503, reason: "aws RequestLimitExceeded"}},
		{"Throttling", awsErr(400, api("Throttling", smithy.FaultClient)), want{class: failure.RateLimit, status: 400, reason: "aws Throttling"}},
		{"ThrottlingException", awsErr(400, api("ThrottlingException", smithy.FaultClient)), want{class: failure.RateLimit, status: 400, reason: "ThrottlingException"}},
		{"ThrottledException", awsErr(400, api("ThrottledException", smithy.FaultClient)), want{class: failure.RateLimit, status: 400, reason: "ThrottledException"}},
		{"TooManyRequestsException", awsErr(429, api("TooManyRequestsException", smithy.FaultClient)), want{class: failure.RateLimit, status: 429, reason: "TooManyRequestsException"}},
		{"ProvisionedThroughputExceededException", awsErr(400, api("ProvisionedThroughputExceededException", smithy.FaultClient)), want{class: failure.RateLimit, status: 400, reason: "ProvisionedThroughput"}},
		{"RequestThrottled", awsErr(400, api("RequestThrottled", smithy.FaultClient)), want{class: failure.RateLimit, status: 400, reason: "RequestThrottled"}},
		{"InsufficientInstanceCapacity", awsErr(500, api("InsufficientInstanceCapacity", smithy.FaultServer)), want{class: failure.ServerSide, status: 500, reason: "InsufficientInstanceCapacity"}},
		{"InternalError", awsErr(500, api("InternalError", smithy.FaultServer)), want{class: failure.ServerSide, status: 500, reason: "InternalError"}},
		{"InternalFailure", awsErr(500, api("InternalFailure", smithy.FaultServer)), want{class: failure.ServerSide, status: 500, reason: "InternalFailure"}},
		{"ServiceUnavailable", awsErr(503, api("ServiceUnavailable", smithy.FaultServer)), want{class: failure.ServerSide, status: 503, reason: "ServiceUnavailable"}},
		{"Unavailable", awsErr(503, api("Unavailable", smithy.FaultServer)), want{class: failure.ServerSide, status: 503, reason: "Unavailable"}},
		{"InvalidParameterValue", awsErr(400, api("InvalidParameterValue", smithy.FaultClient)), want{class: failure.NonRetryable, status: 400, reason: "InvalidParameterValue"}},
		{"InvalidParameterCombination", awsErr(400, api("InvalidParameterCombination", smithy.FaultClient)), want{class: failure.NonRetryable, status: 400, reason: "InvalidParameterCombination"}},
		{"InvalidParameter", awsErr(400, api("InvalidParameter", smithy.FaultClient)), want{class: failure.NonRetryable, status: 400, reason: "InvalidParameter"}},
		{"UnauthorizedOperation", awsErr(403, api("UnauthorizedOperation", smithy.FaultClient)), want{class: failure.NonRetryable, status: 403, reason: "UnauthorizedOperation"}},
		{"AccessDeniedException", awsErr(400, api("AccessDeniedException", smithy.FaultClient)), want{class: failure.NonRetryable, status: 400, reason: "AccessDeniedException"}},
		{"InvalidLaunchTemplateId.NotFound", awsErr(400, api("InvalidLaunchTemplateId.NotFound", smithy.FaultClient)), want{class: failure.NonRetryable, status: 400, reason: "InvalidLaunchTemplateId.NotFound"}},
		{"ValidationError", awsErr(400, api("ValidationError", smithy.FaultClient)), want{class: failure.NonRetryable, status: 400, reason: "ValidationError"}},
		{"ValidationException", awsErr(400, api("ValidationException", smithy.FaultClient)), want{class: failure.NonRetryable, status: 400, reason: "ValidationException"}},
		{"IdempotentParameterMismatch", awsErr(400, api("IdempotentParameterMismatch", smithy.FaultClient)), want{class: failure.NonRetryable, status: 400, reason: "IdempotentParameterMismatch"}},
		{"InvalidFleetConfig", awsErr(400, api("InvalidFleetConfig", smithy.FaultClient)), want{class: failure.NonRetryable, status: 400, reason: "InvalidFleetConfig"}},
		{"unknown client code retries", awsErr(400, api("SomethingNew", smithy.FaultClient)), want{class: failure.UnknownRetryable, status: 400, reason: "aws SomethingNew"}},
		{"unknown server fault", awsErr(500, api("SomethingBroke", smithy.FaultServer)), want{class: failure.ServerSide, status: 500, reason: "aws SomethingBroke"}},
		{"bare API error", api("RequestLimitExceeded", smithy.FaultUnknown), want{class: failure.RateLimit, reason: "aws RequestLimitExceeded"}},
		{"status only 503", awsErr(503, errors.New("deserialization failed")), want{class: failure.ServerSide, status: 503, reason: "aws http 503"}},
		{"status only 429", awsErr(429, errors.New("deserialization failed")), want{class: failure.RateLimit, status: 429, reason: "aws http 429"}},
		{"status only 403", awsErr(403, errors.New("deserialization failed")), want{class: failure.NonRetryable, status: 403, reason: "aws http 403"}},
		{"status only 400", awsErr(400, errors.New("deserialization failed")), want{class: failure.UnknownRetryable, status: 400, reason: "aws http 400"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, failure.Classify(tt.err), tt.want)
		})
	}
}

func TestClassifyOther(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want want
	}{
		{"nil", nil, want{class: failure.UnknownRetryable, reason: "nil error"}},
		{"bad gateway message", errors.New("upstream: 502 Bad Gateway"), want{class: failure.ServerSide, reason: "bad gateway"}},
		{"gateway timeout message", fmt.Errorf("x: %w", errors.New("Gateway Timeout")), want{class: failure.ServerSide, reason: "gateway timeout"}},
		{"anything else", errors.New("boom"), want{class: failure.UnknownRetryable, reason: "unknown"}},
		{"secondary limit pre-check without response", &github.AbuseRateLimitError{RetryAfter: ptr(90 * time.Second)}, want{class: failure.RateLimit, retryAfter: 90 * time.Second, reason: "secondary"}},
		{"ghapp refused the request", fmt.Errorf("generate jit config: %w", ghapp.ErrInvalidRequest), want{class: failure.NonRetryable, reason: "invalid request"}},
		{"provision refused the request", fmt.Errorf("provision: %w", provision.ErrInvalidRequest), want{class: failure.NonRetryable, reason: "invalid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			check(t, failure.Classify(tt.err), tt.want)
		})
	}
}

func TestReasonIsBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 500)
	got := failure.Classify(awsErr(400, &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: long}))
	if n := len(got.Reason); n > 210 {
		t.Errorf("len(Reason) = %d, want at most about 200 bytes", n)
	}
	if !utf8.ValidString(got.Reason) {
		t.Errorf("Reason %q is not valid UTF-8 after clipping", got.Reason)
	}
	if got.Class != failure.NonRetryable {
		t.Errorf("class: got %v, want non_retryable", got.Class)
	}
}

func ptr[T any](v T) *T { return &v }

func TestClassString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		class failure.Class
		want  string
	}{
		{failure.NonRetryable, "non_retryable"},
		{failure.RateLimit, "rate_limit"},
		{failure.ServerSide, "server_side"},
		{failure.Network, "network"},
		{failure.UnknownRetryable, "unknown_retryable"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			if got := tt.class.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTokenExchangeIsTold: a refusal of the installation token exchange
// (the App's own budget) says so, whatever go-github typed it as, so the
// claimer never records it as the installation's rate limit; the same
// refusal of an API call does not.
func TestTokenExchangeIsTold(t *testing.T) {
	t.Parallel()
	resp := func(path string) *http.Response {
		h := http.Header{}
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", "1900000000")
		return &http.Response{StatusCode: 403, Header: h, Request: &http.Request{Method: "POST", URL: &url.URL{Path: path}}}
	}
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/app/installations/42/access_tokens", true},
		{"/repos/o/r/actions/runners/generate-jitconfig", false},
	} {
		for _, err := range []error{
			&github.RateLimitError{Response: resp(tt.path), Message: "API rate limit exceeded"},
			&github.AbuseRateLimitError{Response: resp(tt.path), Message: "secondary rate limit"},
			&github.ErrorResponse{Response: resp(tt.path), Message: "Resource not accessible"},
		} {
			f := failure.Classify(err)
			if f.TokenExchange != tt.want || (tt.want && !strings.HasPrefix(f.Reason, "github token")) {
				t.Errorf("%T on %s: token exchange %v, reason %q; want %v", err, tt.path, f.TokenExchange, f.Reason, tt.want)
			}
		}
	}
}

// TestGitHubIsTold: a failure says whether GitHub gave it, so that a rate
// limit of GitHub's (which binds every caller of the installation) is never
// confused with an AWS throttle of the same class (which binds one call).
func TestGitHubIsTold(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("Retry-After", "30")
	resp := &http.Response{StatusCode: 429, Header: h, Request: &http.Request{Method: "POST", URL: &url.URL{Path: "/repos/o/r/actions/runners/generate-jitconfig"}}}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"RateLimitError", &github.RateLimitError{Response: resp, Message: "API rate limit exceeded"}, true},
		{"AbuseRateLimitError", &github.AbuseRateLimitError{Response: resp, Message: "secondary rate limit"}, true},
		{"AbuseRateLimitError without a response", &github.AbuseRateLimitError{Message: "secondary rate limit", RetryAfter: ptr(time.Minute)}, true},
		{"ErrorResponse 429", &github.ErrorResponse{Response: resp, Message: "Too Many Requests"}, true},
		{"AcceptedError", &github.AcceptedError{}, true},
		{"AWS TooManyRequestsException", awsErr(429, api("TooManyRequestsException", smithy.FaultClient)), false},
		{"AWS RequestLimitExceeded", awsErr(503, api("RequestLimitExceeded", smithy.FaultClient)), false},
		{"deadline", context.DeadlineExceeded, false},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false},
	} {
		f := failure.Classify(fmt.Errorf("claim job 7: %w", tt.err))
		if f.GitHub != tt.want {
			t.Errorf("%s: GitHub %v (class %v), want %v", tt.name, f.GitHub, f.Class, tt.want)
		}
	}
}

// TestSecondary: only GitHub's rate limits of an API call that name no
// exhausted budget's reset are secondary limits of the installation.
func TestSecondary(t *testing.T) {
	t.Parallel()
	req := func(path string) *http.Request {
		return &http.Request{Method: "POST", URL: &url.URL{Path: path}}
	}
	resp := func(status int, path string, kv ...string) *http.Response {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return &http.Response{StatusCode: status, Header: h, Request: req(path)}
	}
	const jit = "/repos/o/r/actions/runners/generate-jitconfig"
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"403 secondary with Retry-After", &github.AbuseRateLimitError{Response: resp(403, jit, "Retry-After", "60"), Message: "secondary rate limit"}, true},
		{"429 without headers", &github.ErrorResponse{Response: resp(429, jit), Message: "Too Many Requests"}, true},
		{"403 primary at 0", &github.RateLimitError{Response: resp(403, jit, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1900000000"), Message: "API rate limit exceeded", Rate: github.Rate{Limit: 5000, Reset: github.Timestamp{Time: time.Unix(1900000000, 0)}}}, false},
		{"429 on the token exchange", &github.ErrorResponse{Response: resp(429, "/app/installations/42/access_tokens"), Message: "Too Many Requests"}, false},
		{"AWS throttle", awsErr(400, api("Throttling", smithy.FaultClient)), false},
		{"GitHub 502", &github.ErrorResponse{Response: resp(502, jit), Message: "Bad Gateway"}, false},
		// go-github's pre-request check: its memory of an earlier answer,
		// perhaps the App's token exchange, with a stand-in response.
		{"go-github's memory of a secondary limit", &github.AbuseRateLimitError{Response: &http.Response{StatusCode: 403, Header: http.Header{}, Request: req(jit)},
			Message: "API secondary rate limit exceeded until 2026-12-02 09:02:00, not making remote request.", RetryAfter: ptr(2 * time.Minute)}, false},
	} {
		if got := failure.Classify(tt.err).Secondary(); got != tt.want {
			t.Errorf("%s: secondary %v, want %v", tt.name, got, tt.want)
		}
	}
}

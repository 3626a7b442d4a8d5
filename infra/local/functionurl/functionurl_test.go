package functionurl_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/infra/local/functionurl"
)

// function is a hand-written Invoker: it records every event and answers with out or err.
type function struct {
	mu     sync.Mutex
	events []events.LambdaFunctionURLRequest
	out    string
	err    error
}

func (f *function) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	var ev events.LambdaFunctionURLRequest
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.mu.Unlock()
	return []byte(f.out), f.err
}

var now = time.Date(2026, 11, 30, 9, 0, 1, 0, time.UTC)

func setup(t *testing.T, fn *function) *httptest.Server {
	t.Helper()
	h := &functionurl.Handler{
		Function: fn,
		URLID:    "abcdefghij",
		Now:      func() time.Time { return now },
		NewID:    func() string { return "req-1" },
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestRequestBecomesAFunctionURLEvent(t *testing.T) {
	t.Parallel()
	text := func(want string) func(t *testing.T, ev events.LambdaFunctionURLRequest) {
		return func(t *testing.T, ev events.LambdaFunctionURLRequest) {
			if ev.IsBase64Encoded || ev.Body != want {
				t.Errorf("body: got %q (base64 %v), want %q as text", ev.Body, ev.IsBase64Encoded, want)
			}
		}
	}
	encoded := func(want []byte) func(t *testing.T, ev events.LambdaFunctionURLRequest) {
		return func(t *testing.T, ev events.LambdaFunctionURLRequest) {
			got, _ := base64.StdEncoding.DecodeString(ev.Body)
			if !ev.IsBase64Encoded || !bytes.Equal(got, want) {
				t.Errorf("body: got %q (base64 %v), want %q base64-encoded", ev.Body, ev.IsBase64Encoded, want)
			}
		}
	}
	tests := []struct {
		name        string
		contentType string
		body        []byte
		check       func(t *testing.T, ev events.LambdaFunctionURLRequest)
	}{
		{
			name:        "JSON body stays text",
			contentType: "application/json",
			body:        []byte(`{"action":"queued"}`),
			check:       text(`{"action":"queued"}`),
		},
		{
			name:        "JSON with a charset stays text",
			contentType: "Application/JSON; charset=utf-8",
			body:        []byte(`{"action":"queued"}`),
			check:       text(`{"action":"queued"}`),
		},
		{
			name:        "text/* stays text",
			contentType: "text/plain",
			body:        []byte("hello"),
			check:       text("hello"),
		},
		// What a Function URL treats as binary, UTF-8 or not: everything else.
		{
			name:        "a form is base64",
			contentType: "application/x-www-form-urlencoded",
			body:        []byte(`payload=%7B%22action%22%3A%22queued%22%7D`),
			check:       encoded([]byte(`payload=%7B%22action%22%3A%22queued%22%7D`)),
		},
		{
			name:  "a body without Content-Type is base64",
			body:  []byte(`{"action":"queued"}`),
			check: encoded([]byte(`{"action":"queued"}`)),
		},
		{
			name:        "an octet stream is base64",
			contentType: "application/octet-stream",
			body:        []byte{0xff, 0xfe, 0x00, 0x01},
			check:       encoded([]byte{0xff, 0xfe, 0x00, 0x01}),
		},
		{
			name: "headers, query, cookies and request context",
			body: nil,
			check: func(t *testing.T, ev events.LambdaFunctionURLRequest) {
				want := map[string]string{
					"x-github-event":      "workflow_job",
					"x-hub-signature-256": "sha256=abc",
					"x-multi":             "a,b",
				}
				for k, v := range want {
					if ev.Headers[k] != v {
						t.Errorf("header %s: got %q, want %q", k, ev.Headers[k], v)
					}
				}
				if _, ok := ev.Headers["X-GitHub-Event"]; ok {
					t.Errorf("header names must be lower case, got %v", ev.Headers)
				}
				if ev.Version != "2.0" || ev.RawPath != "/hook" || ev.RawQueryString != "a=1&a=2&b=x" {
					t.Errorf("got version %q path %q query %q", ev.Version, ev.RawPath, ev.RawQueryString)
				}
				if ev.QueryStringParameters["a"] != "1,2" || ev.QueryStringParameters["b"] != "x" {
					t.Errorf("query parameters: got %v, want a=1,2 b=x", ev.QueryStringParameters)
				}
				if len(ev.Cookies) != 2 || ev.Cookies[0] != "s=1" || ev.Cookies[1] != "t=2" {
					t.Errorf("cookies: got %v, want [s=1 t=2]", ev.Cookies)
				}
				rc := ev.RequestContext
				if rc.RequestID != "req-1" || rc.DomainName != "abcdefghij.lambda-url.us-east-1.on.aws" ||
					rc.TimeEpoch != now.UnixMilli() || rc.Time != "30/Nov/2026:09:00:01 +0000" ||
					rc.HTTP.Method != http.MethodPost || rc.HTTP.Path != "/hook" || rc.HTTP.SourceIP != "127.0.0.1" {
					t.Errorf("request context: got %+v", rc)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fn := &function{out: `{"statusCode":202}`}
			srv := setup(t, fn)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hook?a=1&a=2&b=x", bytes.NewReader(tt.body))
			req.Header.Set("X-GitHub-Event", "workflow_job")
			req.Header.Set("X-Hub-Signature-256", "sha256=abc")
			req.Header.Add("X-Multi", "a")
			req.Header.Add("X-Multi", "b")
			req.Header.Set("Cookie", "s=1; t=2")
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if len(fn.events) != 1 {
				t.Fatalf("invocations: got %d, want 1", len(fn.events))
			}
			tt.check(t, fn.events[0])
		})
	}
}

func TestFunctionAnswerBecomesTheResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		out        string
		err        error
		wantStatus int
		wantBody   string
		wantHeader map[string]string
	}{
		{
			name:       "response object",
			out:        `{"statusCode":401,"headers":{"Content-Type":"text/plain","X-Reason":"sig"},"body":"bad signature"}`,
			wantStatus: http.StatusUnauthorized,
			wantBody:   "bad signature",
			wantHeader: map[string]string{"Content-Type": "text/plain", "X-Reason": "sig"},
		},
		{
			name:       "base64 body",
			out:        `{"statusCode":200,"isBase64Encoded":true,"body":"` + base64.StdEncoding.EncodeToString([]byte("ok")) + `"}`,
			wantStatus: http.StatusOK,
			wantBody:   "ok",
		},
		{
			name:       "cookies",
			out:        `{"statusCode":204,"cookies":["a=1","b=2"]}`,
			wantStatus: http.StatusNoContent,
			wantHeader: map[string]string{"Set-Cookie": "a=1"},
		},
		{
			name:       "plain JSON without statusCode is a 200 body",
			out:        `{"ok":true}`,
			wantStatus: http.StatusOK,
			wantBody:   `{"ok":true}`,
			wantHeader: map[string]string{"Content-Type": "application/json"},
		},
		{
			name:       "function error is a 502 that hides the error",
			err:        errors.New("dynamodb: table ghclaim-secret-name not found"),
			wantStatus: http.StatusBadGateway,
			wantBody:   `{"Message":"Internal Server Error"}` + "\n",
		},
		{
			name:       "status out of range is a 502",
			out:        `{"statusCode":42}`,
			wantStatus: http.StatusBadGateway,
			wantBody:   `{"Message":"Internal Server Error"}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := setup(t, &function{out: tt.out, err: tt.err})
			resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus || string(body) != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			for k, v := range tt.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s: got %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestOversizedRequestIsRefusedWithoutAnInvocation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		contentType string
		size        int
	}{
		{name: "body over the limit", contentType: "application/json", size: functionurl.MaxRequestBytes + 1},
		// Lambda's limit is on the invocation payload, the event: a binary body of 5 MB is
		// 6.7 MB once base64-encoded in it.
		{name: "binary body whose event is over the limit", contentType: "application/octet-stream", size: 5 * 1024 * 1024},
		{name: "text body whose event is over the limit", contentType: "text/plain", size: functionurl.MaxRequestBytes - 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fn := &function{out: `{"statusCode":200}`}
			srv := setup(t, fn)
			resp, err := srv.Client().Post(srv.URL, tt.contentType, bytes.NewReader(bytes.Repeat([]byte("a"), tt.size)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || len(fn.events) != 0 {
				t.Errorf("got %d with %d invocations, want 413 and none", resp.StatusCode, len(fn.events))
			}
		})
	}
}

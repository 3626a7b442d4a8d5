// Package functionurl puts a function behind a local HTTP endpoint the way a Lambda Function URL
// does: each HTTP request becomes a payload-format 2.0 event (lower-case header names, repeated
// values joined with commas, cookies apart, the body base64-encoded unless its Content-Type is
// text: text/* or application/json; a form, an octet stream or no Content-Type at all is binary),
// and the function's answer becomes the HTTP response (a {"statusCode", "headers", "body",
// "isBase64Encoded", "cookies"} object, or any other JSON as a 200 application/json body).
//
// A function error or timeout is a 502 "Internal Server Error", as on AWS: the client never sees
// the function's error text. A request whose event is larger than Lambda's 6 MB synchronous
// invocation limit gets 413 without an invocation: the limit is on the event, so a binary body
// counts with its base64 growth.
//
// It must never listen beyond 127.0.0.1 (the caller owns the listener) and it adds no
// authentication: the webhook verifies GitHub's signature itself, exactly as behind AuthType NONE.
package functionurl

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/ghclaim/ghclaim/shared/clock"
)

// MaxRequestBytes is Lambda's limit on a synchronous invocation payload: the event, not the body.
const MaxRequestBytes = 6 * 1024 * 1024

// Invoker runs the function synchronously (rie.Environment, or a test double).
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// Handler is the Function URL in front of one function.
type Handler struct {
	// Function is invoked once per request.
	Function Invoker
	// URLID is the Function URL's id (the first label of its domain name).
	URLID string
	// Region goes into the domain name.
	Region string
	// Now stamps requestContext.time/timeEpoch (default time.Now).
	Now clock.Func
	// NewID returns requestContext.requestId values (default: a counter).
	NewID func() string
	// Log receives one line per failed invocation (default: discard).
	Log *slog.Logger

	seq counter
}

// ServeHTTP translates one request to an event, invokes the function and translates back.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	if len(body) > MaxRequestBytes {
		writeMessage(w, http.StatusRequestEntityTooLarge, "Request must be smaller than 6291456 bytes for the InvokeFunction operation")
		return
	}
	ev := h.Event(r, body)
	payload, err := json.Marshal(ev)
	if err != nil {
		writeMessage(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	if len(payload) > MaxRequestBytes {
		writeMessage(w, http.StatusRequestEntityTooLarge, "Request must be smaller than 6291456 bytes for the InvokeFunction operation")
		return
	}
	out, err := h.Function.Invoke(r.Context(), payload)
	if err != nil {
		h.logger().Error("function url: invocation failed", "request_id", ev.RequestContext.RequestID, "error", err.Error())
		writeMessage(w, http.StatusBadGateway, "Internal Server Error")
		return
	}
	if err := writeResponse(w, out); err != nil {
		h.logger().Error("function url: unusable function response", "request_id", ev.RequestContext.RequestID, "error", err.Error())
		writeMessage(w, http.StatusBadGateway, "Internal Server Error")
	}
}

// Event is the Function URL event for r with body.
func (h *Handler) Event(r *http.Request, body []byte) events.LambdaFunctionURLRequest {
	now := time.Now()
	if h.Now != nil {
		now = h.Now()
	}
	id := h.URLID
	if id == "" {
		id = "ghclaimlocal"
	}
	region := h.Region
	if region == "" {
		region = "us-east-1"
	}
	reqID := ""
	if h.NewID != nil {
		reqID = h.NewID()
	} else {
		reqID = fmt.Sprintf("local-%08d", h.seq.next())
	}
	sourceIP := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sourceIP = host
	}

	headers := map[string]string{}
	var cookies []string
	for name, vals := range r.Header {
		k := strings.ToLower(name)
		if k == "cookie" {
			for _, v := range vals {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[k] = strings.Join(vals, ",")
	}
	headers["host"] = r.Host
	if _, ok := headers["x-forwarded-for"]; !ok {
		headers["x-forwarded-for"] = sourceIP
	}
	headers["x-forwarded-proto"] = "http"
	if r.TLS != nil {
		headers["x-forwarded-proto"] = "https"
	}

	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = map[string]string{}
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			query[k] = strings.Join(q[k], ",")
		}
	}

	ev := events.LambdaFunctionURLRequest{
		Version:               "2.0",
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID:    "anonymous",
			RequestID:    reqID,
			APIID:        id,
			DomainName:   id + ".lambda-url." + region + ".on.aws",
			DomainPrefix: id,
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if textual(r.Header.Get("Content-Type")) && utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev
}

// textual reports whether a Function URL passes a body of this Content-Type as text: "If the
// content type of the request is binary, the body is base64-encoded" (urls-invocation), and
// only text/* and application/json count as text (a GitHub App always delivers the latter).
// Invalid UTF-8 under a text type stays base64 here: what AWS does with it is not documented.
func textual(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json"
}

// writeResponse interprets the function's answer as a Function URL does.
func writeResponse(w http.ResponseWriter, out []byte) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(out, &probe); err != nil || probe["statusCode"] == nil {
		// Not a response object: Lambda returns it as a JSON body with 200.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
		return nil
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("decode response object: %w", err)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			return fmt.Errorf("decode base64 body: %w", err)
		}
		body = b
	}
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		return fmt.Errorf("status code %d out of range", resp.StatusCode)
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	if w.Header().Get("Content-Type") == "" && len(body) > 0 {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	return nil
}

func writeMessage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Message": msg})
}

func (h *Handler) logger() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.New(slog.DiscardHandler)
}

// counter numbers request ids when no NewID is given.
type counter struct{ n atomic.Int64 }

func (c *counter) next() int64 { return c.n.Add(1) }

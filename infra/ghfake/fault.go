package ghfake

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FaultKind names what a Fault does.
type FaultKind string

// Fault kinds.
const (
	// KindServerError answers Status (500, 502, 503, …) with GitHub's body
	// for it: JSON for 500/502, the HTML "unicorn" page for 503. An HTML
	// page (the 503's, or a Body starting with '<') carries no
	// X-RateLimit-* headers (writeFault).
	KindServerError FaultKind = "server_error"
	// KindTooManyRequests answers 429, with Retry-After when set.
	KindTooManyRequests FaultKind = "too_many_requests"
	// KindSecondaryRateLimit answers 403 with Retry-After and GitHub's
	// secondary-rate-limit message and documentation URL.
	KindSecondaryRateLimit FaultKind = "secondary_rate_limit"
	// KindSlow waits Delay (bounded by WithMaxDelay) and then answers normally.
	KindSlow FaultKind = "slow"
	// KindConnectionReset hijacks the connection and resets it (TCP RST):
	// the client sees a network error, no response.
	KindConnectionReset FaultKind = "connection_reset"
)

// Fault is one injected misbehaviour. Build it with the constructors.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// Status is the HTTP status of a server_error fault.
	Status int `json:"status,omitempty"`
	// RetryAfter is the Retry-After header in seconds (0: none).
	RetryAfter int `json:"retry_after,omitempty"`
	// DelayMS is how long a slow fault waits, in milliseconds.
	DelayMS int64 `json:"delay_ms,omitempty"`
	// Body replaces the default body of a server_error fault.
	Body string `json:"body,omitempty"`
	// After performs the request's action first and then fails the answer:
	// the state changed, the client cannot know.
	After bool `json:"after,omitempty"`
}

// ServerError is a 5xx answer with GitHub's body for that status.
func ServerError(status int) Fault { return Fault{Kind: KindServerError, Status: status} }

// TooManyRequests is a 429 answer; retryAfter 0 sends no Retry-After.
func TooManyRequests(retryAfter time.Duration) Fault {
	return Fault{Kind: KindTooManyRequests, RetryAfter: int(retryAfter / time.Second)}
}

// SecondaryRateLimit is GitHub's 403 secondary rate limit with Retry-After.
func SecondaryRateLimit(retryAfter time.Duration) Fault {
	return Fault{Kind: KindSecondaryRateLimit, RetryAfter: int(retryAfter / time.Second)}
}

// Slow delays the answer by d.
func Slow(d time.Duration) Fault { return Fault{Kind: KindSlow, DelayMS: d.Milliseconds()} }

// ConnectionReset drops the connection without an answer.
func ConnectionReset() Fault { return Fault{Kind: KindConnectionReset} }

// AfterEffect returns f applied after the action took effect.
func (f Fault) AfterEffect() Fault {
	f.After = true
	return f
}

// Validate reports whether f can be applied.
func (f Fault) Validate() error {
	switch f.Kind {
	case KindServerError:
		if f.Status < 500 || f.Status > 599 {
			return fmt.Errorf("server_error status %d: want 5xx", f.Status)
		}
	case KindTooManyRequests, KindSecondaryRateLimit, KindConnectionReset:
	case KindSlow:
		if f.DelayMS <= 0 {
			return fmt.Errorf("slow delay_ms %d: want > 0", f.DelayMS)
		}
	default:
		return fmt.Errorf("fault kind %q unknown", f.Kind)
	}
	if f.RetryAfter < 0 {
		return fmt.Errorf("retry_after %d: want >= 0", f.RetryAfter)
	}
	return nil
}

// rule is a programmed fault: the next `left` requests to route get it.
type rule struct {
	route string
	left  int
	fault Fault
}

// Fail makes the next n requests to route (a Route* constant, or RouteAny)
// answer with f. Rules are consumed in the order they were added. n < 1
// means forever (until ClearFaults). It panics on an invalid fault, which
// is a bug in the test.
func (s *Server) Fail(route string, n int, f Fault) {
	if err := f.Validate(); err != nil {
		panic("ghfake: " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &rule{route: route, left: n, fault: f})
}

// ClearFaults removes every programmed fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFault consumes the first rule matching route. Callers hold s.mu.
func (s *Server) takeFault(route string) *Fault {
	for i, r := range s.faults {
		if r.route != route && r.route != RouteAny {
			continue
		}
		f := r.fault
		if r.left > 0 {
			r.left--
			if r.left == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
		}
		return &f
	}
	return nil
}

// unicorn is the HTML page GitHub's front end serves when no backend answers.
const unicorn = `<!DOCTYPE html>
<html>
  <head>
    <meta http-equiv="Content-Type" content="text/html; charset=utf-8">
    <title>Unicorn! &middot; GitHub</title>
  </head>
  <body>
    <p><strong>No server is currently available to service your request.</strong></p>
    <p>Sorry about that. Please try refreshing and contact us if the problem persists.</p>
  </body>
</html>
`

// writeFault answers w with f (every kind but slow). h carries the rate
// headers already computed for this request.
func writeFault(w http.ResponseWriter, f Fault, h http.Header) {
	for k, v := range h {
		w.Header()[k] = v
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	switch f.Kind {
	case KindConnectionReset:
		reset(w)
	case KindTooManyRequests:
		writeError(w, http.StatusTooManyRequests, "Too Many Requests", docsSecondaryRateLimit)
	case KindSecondaryRateLimit:
		writeError(w, http.StatusForbidden,
			"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			docsSecondaryRateLimit)
	case KindServerError:
		body, ctype := f.Body, "application/json; charset=utf-8"
		switch {
		case body != "":
			if len(body) > 0 && body[0] == '<' {
				ctype = "text/html; charset=utf-8"
			}
		case f.Status == http.StatusServiceUnavailable:
			body, ctype = unicorn, "text/html; charset=utf-8"
		default:
			body = `{"message":"Server Error"}`
		}
		if strings.HasPrefix(ctype, "text/html") {
			// The unicorn page is GitHub's front end's, served when "no
			// server is currently available to service your request": no
			// API server counted the request, so no budget is shown
			// (GitHub documents the rate headers on the API's answers
			// only: https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#checking-the-status-of-your-rate-limit).
			// A client must keep its last reading through it.
			for k := range w.Header() {
				if strings.HasPrefix(k, "X-Ratelimit-") {
					w.Header().Del(k)
				}
			}
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(body))
	}
}

// reset hijacks the connection and closes it with SO_LINGER 0, which sends
// a TCP RST: the client reads "connection reset by peer" (or EOF).
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// HTTP/2 or a recorder: the closest we can do is abort the handler.
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

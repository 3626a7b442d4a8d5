package emulator

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
)

// LoseFirstAnswer is an HTTP transport for an SDK configuration (its HTTPClient) that forwards
// every request, but loses on the way back the answer to the first call of Action (an operation
// name such as "RunInstances"): a connection reset after the emulator acted, as a busy box's
// sometimes are. The SDK then retries a call that took effect, which is what a test of a
// non-idempotent call's retry needs.
type LoseFirstAnswer struct {
	Next   http.RoundTripper
	Action string

	mu   sync.Mutex
	lost int
}

// RoundTrip forwards req and loses the first answer to Action.
func (l *LoseFirstAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	// The operation is in X-Amz-Target (JSON protocols) or the body (Query protocols).
	isAction := strings.HasSuffix(req.Header.Get("X-Amz-Target"), "."+l.Action)
	if req.Body != nil && !isAction {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(b))
		isAction = bytes.Contains(append(b, '&'), []byte("Action="+l.Action+"&"))
	}
	resp, err := l.Next.RoundTrip(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && isAction && l.lost == 0 {
		l.lost++
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return resp, err
}

// Lost is how many answers were lost: 1 once Action was called.
func (l *LoseFirstAnswer) Lost() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

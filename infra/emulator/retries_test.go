package emulator

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// answers is an HTTP client that gives each request the next of its outcomes: an answer with
// a status, or a lost one (an error, or a body cut partway).
type answers []string

func (a *answers) Do(*http.Request) (*http.Response, error) {
	next := (*a)[0]
	*a = (*a)[1:]
	switch next {
	case "refused":
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case "lost":
		return nil, errors.New("read tcp: connection reset by peer")
	case "cut":
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(io.MultiReader(strings.NewReader(`{"Mess`), failing{}))}, nil
	case "500":
		return &http.Response{StatusCode: http.StatusInternalServerError, Body: io.NopCloser(strings.NewReader(`{"__type":"InternalError"}`))}, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(`{"MessageId":"1"}`))}, nil
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("use of closed network connection") }

// TestARetryExplainsOnlyItsOwnMessage: the SDK sent m again after a lost answer, so a copy of
// m is the retry's; a copy of x beside it is not, and stays.
func TestARetryExplainsOnlyItsOwnMessage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		received []string
		want     int
	}{
		{name: "its own", received: []string{"m", "x", "m"}, want: 2},
		{name: "another's", received: []string{"m", "x", "x"}, want: 3},
		{name: "its own and another's", received: []string{"m", "m", "x", "x"}, want: 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tries := answers{"lost", "200"}
			r := &Retries{Next: &tries}
			for len(tries) > 0 {
				send(t, r, `{"QueueUrl":"q","MessageBody":"m"}`)
			}
			if got, _ := WithoutRetried(r, tt.received, itself, "SendMessage"); len(got) != tt.want {
				t.Errorf("received %q: got %q, want %d message(s)", tt.received, got, tt.want)
			}
		})
	}
}

// send sends body as one SendMessage invocation's try through r, reading the answer whole.
func send(t *testing.T, r *Retries, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://emulator/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	req.Header.Set("Amz-Sdk-Invocation-Id", "one-send")
	resp, err := r.Do(req)
	if err == nil {
		_, _ = io.ReadAll(resp.Body) // as the SDK's deserializer does
		resp.Body.Close()
	}
}

// TestRetriesCountOnlyAfterALostAnswer: a retry explains a copy only when the try before it
// may have acted unseen, its answer lost (no response, or a body cut partway). A retry after
// an answer the SDK read whole (a 500, a throttle) follows a try that did nothing, so a
// copy beside it is production's, and stays for the test to count.
func TestRetriesCountOnlyAfterALostAnswer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		tries []string
		want  int // messages left of a message and its copy
	}{
		{name: "answer lost", tries: []string{"lost", "200"}, want: 1},
		{name: "body cut", tries: []string{"cut", "200"}, want: 1},
		{name: "answered 500", tries: []string{"500", "200"}, want: 2},
		{name: "answered 500 twice", tries: []string{"500", "500", "200"}, want: 2},
		{name: "connection refused", tries: []string{"refused", "200"}, want: 2},
		{name: "no retry", tries: []string{"200"}, want: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tries := answers(tt.tries)
			r := &Retries{Next: &tries}
			for len(tries) > 0 {
				send(t, r, `{"MessageBody":"m"}`)
			}
			if got, _ := WithoutRetried(r, []string{"m", "m"}, itself, "SendMessage"); len(got) != tt.want {
				t.Errorf("tries %v: got %q, want %d message(s)", tt.tries, got, tt.want)
			}
		})
	}
}

// TestRetriesReuseOneConnection: without Next, Retries sends through one SDK client of its own,
// so requests in turn share a connection; a client a request opened a socket each, more load
// on the box whose load cuts answers in the first place.
func TestRetriesReuseOneConnection(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	r := &Retries{}
	for range 3 {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := r.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 1 {
		t.Errorf("3 requests in turn opened %d connection(s), want 1", conns)
	}
}

package emulator

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Retries is an HTTP client for an SDK configuration (its HTTPClient) that counts the SDK's
// retries of each operation that follow a lost answer: a request whose invocation id
// (Amz-Sdk-Invocation-Id) it has seen before, whose previous try got no answer or one cut
// partway. A test that counts what code it does not wire itself sent (the messages of a webhook,
// say) learns from it how many copies the SDK's retries of cut answers can explain. A retry
// after an answer read whole (a 500, a throttle) is not counted: the try before it did
// nothing, so it explains no copy, and counting it would hide a copy production made.
type Retries struct {
	Next aws.HTTPClient // the SDK's own client when nil

	mu      sync.Mutex
	lost    map[string]bool // invocation id → its last try's answer was lost
	retried map[string]int  // operation → retries not yet spent
}

// Do sends req through Next, counting it if it retries a try whose answer was lost.
func (r *Retries) Do(req *http.Request) (*http.Response, error) {
	// JSON protocols name the operation in X-Amz-Target: "AmazonSQS.SendMessage".
	_, op, _ := strings.Cut(req.Header.Get("X-Amz-Target"), ".")
	id := req.Header.Get("Amz-Sdk-Invocation-Id")
	r.mu.Lock()
	if r.lost == nil {
		r.lost, r.retried = map[string]bool{}, map[string]int{}
	}
	if id != "" && r.lost[id] {
		r.retried[op]++
	}
	r.lost[id] = false
	if r.Next == nil {
		r.Next = awshttp.NewBuildableClient() // once: its connections are reused
	}
	next := r.Next
	r.mu.Unlock()
	resp, err := next.Do(req)
	var dial *net.OpError
	if err != nil && !(errors.As(err, &dial) && dial.Op == "dial") { // a refused dial sent nothing
		r.lose(id)
	}
	if err != nil {
		return resp, err
	}
	resp.Body = &answer{ReadCloser: resp.Body, lost: func() { r.lose(id) }}
	return resp, nil
}

// lose marks the last try of invocation id as one whose answer was lost.
func (r *Retries) lose(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost[id] = true
}

// answer is a response body that reports a read cut partway (an error other than EOF).
type answer struct {
	io.ReadCloser
	lost func()
}

func (a *answer) Read(p []byte) (int, error) {
	n, err := a.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		a.lost()
	}
	return n, err
}

// Spend reports whether the SDK retried ops n times, not yet spent, and spends them if so.
func (r *Retries) Spend(n int, ops ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	have := 0
	for _, op := range ops {
		have += r.retried[op]
	}
	if have < n {
		return false
	}
	for _, op := range ops {
		spent := min(n, r.retried[op])
		r.retried[op] -= spent
		n -= spent
	}
	return true
}

// WithoutRetried returns all without its copies (items whose key is an earlier one's) when the
// SDK's retries of ops not yet spent explain that many copies, spending them, and how many it
// dropped; else all, copies and all, for the test to count.
func WithoutRetried[T any, K comparable](r *Retries, all []T, key func(T) K, ops ...string) ([]T, int) {
	seen := map[K]bool{}
	var once []T
	for _, v := range all {
		if k := key(v); !seen[k] {
			seen[k] = true
			once = append(once, v)
		}
	}
	if copies := len(all) - len(once); copies > 0 && r.Spend(copies, ops...) {
		return once, copies
	}
	return all, 0
}

package emulator

import (
	"bytes"
	"encoding/json"
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
//
// A retry explains a copy of the messages it sent again (SQS's MessageBody, or a batch's), no
// other: a copy of another message beside it is production's.
type Retries struct {
	Next aws.HTTPClient // the SDK's own client when nil

	mu     sync.Mutex
	lost   map[string]bool           // invocation id → its last try's answer was lost
	resent map[string]map[string]int // operation → message body → retries not yet spent
}

// Do sends req through Next, counting it if it retries a try whose answer was lost.
func (r *Retries) Do(req *http.Request) (*http.Response, error) {
	// JSON protocols name the operation in X-Amz-Target: "AmazonSQS.SendMessage".
	_, op, _ := strings.Cut(req.Header.Get("X-Amz-Target"), ".")
	id := req.Header.Get("Amz-Sdk-Invocation-Id")
	bodies, err := messageBodies(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.lost == nil {
		r.lost, r.resent = map[string]bool{}, map[string]map[string]int{}
	}
	if id != "" && r.lost[id] {
		if r.resent[op] == nil {
			r.resent[op] = map[string]int{}
		}
		for _, b := range bodies {
			r.resent[op][b]++
		}
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

// messageBodies reads the SQS message bodies req sends (a JSON protocol's MessageBody, or its
// Entries'), and leaves req's body to be sent as it was.
func messageBodies(req *http.Request) ([]string, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	var in struct {
		MessageBody *string
		Entries     []struct{ MessageBody string }
	}
	if json.Unmarshal(b, &in) != nil { // not JSON: no message
		return nil, nil
	}
	var out []string
	if in.MessageBody != nil {
		out = append(out, *in.MessageBody)
	}
	for _, e := range in.Entries {
		out = append(out, e.MessageBody)
	}
	return out, nil
}

// spend reports whether the SDK's retries of ops, not yet spent, sent each body again as many
// times as copies holds, and spends them if so.
func (r *Retries) spend(copies map[string]int, ops ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for b, n := range copies {
		have := 0
		for _, op := range ops {
			have += r.resent[op][b]
		}
		if have < n {
			return false
		}
	}
	for b, n := range copies {
		for _, op := range ops {
			spent := min(n, r.resent[op][b])
			if spent > 0 {
				r.resent[op][b] -= spent
			}
			n -= spent
		}
	}
	return true
}

// WithoutRetried returns all without its copies (items whose message body is an earlier one's)
// when the SDK's retries of ops, not yet spent, sent each of those bodies again as many times,
// spending them, and how many it dropped; else all, copies and all, for the test to count.
func WithoutRetried[T any](r *Retries, all []T, body func(T) string, ops ...string) ([]T, int) {
	seen := map[string]bool{}
	copies := map[string]int{}
	var once []T
	for _, v := range all {
		if b := body(v); seen[b] {
			copies[b]++
		} else {
			seen[b] = true
			once = append(once, v)
		}
	}
	if n := len(all) - len(once); n > 0 && r.spend(copies, ops...) {
		return once, n
	}
	return all, 0
}

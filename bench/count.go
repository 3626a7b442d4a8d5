package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Counter is an aws.HTTPClient decorator that counts every AWS request by
// operation ("DynamoDB.PutItem", "SQS.SendMessage") and the time spent in
// them, from sending the request to closing the response body. Install it
// with Counter.Wrap on an aws.Config before building clients. It is safe for
// concurrent use.
type Counter struct {
	next aws.HTTPClient

	mu     sync.Mutex
	calls  map[string]int
	opBusy map[string]time.Duration
	busy   time.Duration
	units  Units
}

// Units are the DynamoDB on-demand request units the counted requests
// consume, estimated from the requests and answers (see capacity).
type Units struct {
	// WRU: one per write of an item up to 1 KB, conditional failures
	// included (DynamoDB charges them).
	WRU float64 `json:"wru"`
	// GSIWRU: writes the sweep index (keys only: store.SweepProjection)
	// receives.
	GSIWRU float64 `json:"gsi_wru"`
	// GSIWrites: requests that wrote the sweep index at all (an update
	// that moves sweep_at is one write, billed as two units).
	GSIWrites float64 `json:"gsi_writes"`
	// RRU: one per strongly consistent read up to 4 KB, half for an
	// eventually consistent one (every GSI Query); a BatchGetItem counts
	// each key it asks for.
	RRU float64 `json:"rru"`
}

var _ aws.HTTPClient = (*Counter)(nil)

// NewCounter returns a counter over next.
func NewCounter(next aws.HTTPClient) *Counter {
	return &Counter{next: next, calls: map[string]int{}, opBusy: map[string]time.Duration{}}
}

// Wrap returns a copy of cfg whose clients send through a new Counter.
func Wrap(cfg aws.Config) (aws.Config, *Counter) {
	next := cfg.HTTPClient
	if next == nil {
		next = http.DefaultClient
	}
	c := NewCounter(next)
	cfg = cfg.Copy()
	cfg.HTTPClient = c
	return cfg, c
}

// Do sends r and records it.
func (c *Counter) Do(r *http.Request) (*http.Response, error) {
	op := Operation(r)
	var body []byte
	if strings.HasPrefix(op, "DynamoDB.") && r.Body != nil {
		// The body is already signed; reading and restoring it changes
		// nothing on the wire.
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	start := time.Now()
	resp, err := c.next.Do(r)
	if err != nil || resp == nil || resp.Body == nil {
		c.record(op, time.Since(start), Units{})
		return resp, err
	}
	status := resp.StatusCode
	tb := &timedBody{ReadCloser: resp.Body}
	tb.done = func() { c.record(op, time.Since(start), capacity(op, body, status, tb.n)) }
	resp.Body = tb
	return resp, nil
}

func (c *Counter) record(op string, d time.Duration, u Units) {
	c.mu.Lock()
	c.calls[op]++
	c.opBusy[op] += d
	c.busy += d
	c.units.WRU += u.WRU
	c.units.GSIWRU += u.GSIWRU
	if u.GSIWRU > 0 {
		c.units.GSIWrites++
	}
	c.units.RRU += u.RRU
	c.mu.Unlock()
}

// capacity estimates the request units of one DynamoDB request from its
// body, its answer's status and size. ghclaim's items are all under 1 KB,
// so a write is one WRU. The sweep index projects keys only
// (store.SweepProjection), so a successful write to a job record writes
// the index only when it touches sweep_at: a put of an indexed record or a
// removal from the index is one index write, an update that moves sweep_at
// is two (DynamoDB deletes and re-puts the index entry), and any other
// update none (the lease, Extend: state, version, attempt, updated_at). A
// failed conditional write costs its WRU and no index write. This is an
// estimate, said so in the report: moto does not meter capacity.
func capacity(op string, body []byte, status, respBytes int) Units {
	var in struct {
		ConsistentRead   bool
		UpdateExpression string
		Key              map[string]map[string]string
		Item             map[string]json.RawMessage
		RequestItems     json.RawMessage
	}
	_ = json.Unmarshal(body, &in) // an unreadable body counts as a plain request
	ok := status == http.StatusOK
	switch op {
	case "DynamoDB.GetItem":
		if in.ConsistentRead {
			return Units{RRU: 1}
		}
		return Units{RRU: 0.5}
	case "DynamoDB.Query", "DynamoDB.Scan":
		return Units{RRU: 0.5 * math.Max(1, math.Ceil(float64(respBytes)/4096))}
	case "DynamoDB.PutItem":
		u := Units{WRU: 1}
		if _, indexed := in.Item["sweep_shard"]; indexed && ok {
			u.GSIWRU = 1
		}
		return u
	case "DynamoDB.BatchGetItem":
		var req map[string]struct {
			ConsistentRead bool
			Keys           []json.RawMessage
		}
		_ = json.Unmarshal(in.RequestItems, &req)
		var u Units
		for _, r := range req {
			if r.ConsistentRead {
				u.RRU += float64(len(r.Keys))
			} else {
				u.RRU += 0.5 * float64(len(r.Keys))
			}
		}
		return u
	case "DynamoDB.BatchWriteItem":
		var req map[string][]struct {
			PutRequest *struct{ Item map[string]json.RawMessage }
		}
		_ = json.Unmarshal(in.RequestItems, &req)
		var u Units
		for _, reqs := range req {
			for _, r := range reqs {
				u.WRU++
				if r.PutRequest != nil {
					if _, indexed := r.PutRequest.Item["sweep_shard"]; indexed && ok {
						u.GSIWRU++
					}
				}
			}
		}
		return u
	case "DynamoDB.UpdateItem", "DynamoDB.DeleteItem":
		u := Units{WRU: 1}
		if !ok || !strings.HasPrefix(in.Key["pk"]["S"], "job#") {
			return u
		}
		set, remove, _ := strings.Cut(in.UpdateExpression, "REMOVE")
		switch {
		case strings.Contains(remove, "sweep_"):
			u.GSIWRU = 1
		case strings.Contains(set, "sweep_at"):
			u.GSIWRU = 2
		}
		return u
	}
	return Units{}
}

// Snapshot is what a Counter saw up to a moment.
type Snapshot struct {
	Calls map[string]int
	// OpBusy is the time spent per operation; Busy their sum.
	OpBusy map[string]time.Duration
	Busy   time.Duration
	Units  Units
}

// Snapshot copies the counts.
func (c *Counter) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		m[k] = v
	}
	b := make(map[string]time.Duration, len(c.opBusy))
	for k, v := range c.opBusy {
		b[k] = v
	}
	return Snapshot{Calls: m, OpBusy: b, Busy: c.busy, Units: c.units}
}

// Since is the difference s − earlier.
func (s Snapshot) Since(earlier Snapshot) Snapshot {
	d := Snapshot{Calls: map[string]int{}, OpBusy: map[string]time.Duration{}, Busy: s.Busy - earlier.Busy,
		Units: Units{WRU: s.Units.WRU - earlier.Units.WRU, GSIWRU: s.Units.GSIWRU - earlier.Units.GSIWRU,
			GSIWrites: s.Units.GSIWrites - earlier.Units.GSIWrites, RRU: s.Units.RRU - earlier.Units.RRU}}
	for k, v := range s.Calls {
		if n := v - earlier.Calls[k]; n != 0 {
			d.Calls[k] = n
			d.OpBusy[k] = s.OpBusy[k] - earlier.OpBusy[k]
		}
	}
	return d
}

// Total is the number of calls.
func (s Snapshot) Total() int {
	n := 0
	for _, v := range s.Calls {
		n += v
	}
	return n
}

// Service sums the calls of one service ("DynamoDB", "SQS").
func (s Snapshot) Service(name string) int {
	n := 0
	for k, v := range s.Calls {
		if strings.HasPrefix(k, name+".") {
			n += v
		}
	}
	return n
}

// Ops lists the operations seen, sorted.
func (s Snapshot) Ops() []string {
	out := make([]string, 0, len(s.Calls))
	for k := range s.Calls {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Operation names the AWS operation of a request from its X-Amz-Target
// header (the JSON protocols of DynamoDB and SQS): "DynamoDB_20120810.PutItem"
// becomes "DynamoDB.PutItem", "AmazonSQS.SendMessage" becomes
// "SQS.SendMessage". A request without one is named by its query Action, or
// "other".
func Operation(r *http.Request) string {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		svc, op, ok := strings.Cut(t, ".")
		if !ok {
			return t
		}
		switch {
		case strings.HasPrefix(svc, "DynamoDB"):
			svc = "DynamoDB"
		case svc == "AmazonSQS":
			svc = "SQS"
		}
		return svc + "." + op
	}
	if a := r.URL.Query().Get("Action"); a != "" {
		return "other." + a
	}
	return "other"
}

// timedBody reports when the SDK has finished with a response, and its size.
type timedBody struct {
	io.ReadCloser
	n    int
	once sync.Once
	done func()
}

func (b *timedBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n += k
	return k, err
}

func (b *timedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Counter is an aws.HTTPClient decorator that counts every AWS request by
// operation ("DynamoDB.PutItem", "SQS.SendMessage") and the time spent in
// them, from sending the request to closing the response body. Install it
// with Counter.Wrap on an aws.Config before building clients. It is safe for
// concurrent use.
//
// The request units, and the item each DynamoDB request is on, are
// worked out when a Snapshot is taken, not when the request ends: decoding
// a DynamoDB request body is the benchmark's work, and doing it inside the
// request would add it to the time of whatever made DynamoDB requests (the
// webhook) and not to the bare send it is compared with.
type Counter struct {
	next aws.HTTPClient

	mu       sync.Mutex
	calls    map[string]int
	opBusy   map[string]time.Duration
	busy     time.Duration
	units    Units
	items    map[ItemOp]int
	apart    []apartQueue
	apartN   map[string]int
	retries  map[string]int
	unpriced []request
}

// request is a finished request whose units are not yet estimated.
type request struct {
	op        string
	body      []byte
	status, n int
}

// The items of the job table a job's life touches: its own record, and
// the installation's rate reading the claimers share.
const (
	JobItem  = "job#"
	RateItem = "rate#"
)

// RateReads and RateWrites are the operations that read and write an item.
var (
	RateReads  = []string{"DynamoDB.GetItem"}
	RateWrites = []string{"DynamoDB.PutItem", "DynamoDB.UpdateItem", "DynamoDB.DeleteItem"}
)

// ItemOp is a DynamoDB operation on one kind of item, named by its
// partition key's prefix ("job#" for a job's record, "rate#" for an
// installation's shared rate reading); Item is "" for a request on no
// single item (Query, the batch operations).
type ItemOp struct{ Item, Op string }

// apartQueue is a queue whose requests are counted apart (see Apart).
type apartQueue struct {
	match []byte // `"QueueUrl":"<url>"`, as the SDK's JSON protocol writes it
	seen  func(start time.Time, body []byte)
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
	return &Counter{next: next, calls: map[string]int{}, opBusy: map[string]time.Duration{}, items: map[ItemOp]int{}, apartN: map[string]int{}, retries: map[string]int{}}
}

// Apart counts the SQS requests to the queue at url apart from the rest
// (Snapshot.Apart, never in Calls, Service or the units) and hands seen
// each one that succeeded: its start and its body. A dispatch pool's
// queue is one: the provisioner's send is the machine's start, which an
// EC2 pool makes with EC2 and SSM calls instead, not ghclaim's overhead on
// the job, so the job's figures compare with a plain queue's.
func (c *Counter) Apart(url string, seen func(start time.Time, body []byte)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.apart = append(c.apart, apartQueue{match: []byte(`"QueueUrl":"` + url + `"`), seen: seen})
}

// Wrap returns a copy of cfg whose clients send through a new Counter.
func Wrap(cfg aws.Config) (aws.Config, *Counter) {
	next := cfg.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient() // what the SDK uses when cfg has none
	}
	c := NewCounter(next)
	cfg = cfg.Copy()
	cfg.HTTPClient = c
	return cfg, c
}

// Do sends r and records it. An SDK retry of a request (its
// Amz-Sdk-Request header says attempt 2 or later: the emulator answered
// the first with a 5xx or the connection broke) is counted apart
// (Snapshot.Retries), never in the operation counts, items or units: the
// figures count what the code asks for, and a test of them does not fail
// because the loaded emulator failed once.
func (c *Counter) Do(r *http.Request) (*http.Response, error) {
	op := Operation(r)
	if Retry(r) {
		start := time.Now()
		resp, err := c.next.Do(r)
		c.mu.Lock()
		c.retries[op]++
		c.busy += time.Since(start)
		c.mu.Unlock()
		return resp, err
	}
	c.mu.Lock()
	apart := c.apart
	c.mu.Unlock()
	sqsApart := len(apart) > 0 && strings.HasPrefix(op, "SQS.")
	var body []byte
	if (strings.HasPrefix(op, "DynamoDB.") || sqsApart) && r.Body != nil {
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
	if sqsApart {
		for _, q := range apart {
			if bytes.Contains(body, q.match) {
				return c.doApart(r, op, body, q)
			}
		}
		body = nil
	}
	start := time.Now()
	resp, err := c.next.Do(r)
	if err != nil || resp == nil || resp.Body == nil {
		c.record(op, time.Since(start), request{})
		return resp, err
	}
	status := resp.StatusCode
	tb := &timedBody{ReadCloser: resp.Body}
	tb.done = func() { c.record(op, time.Since(start), request{op: op, body: body, status: status, n: tb.n}) }
	resp.Body = tb
	return resp, nil
}

// Retry reports whether r is the SDK's second or later attempt of one
// operation (Amz-Sdk-Request: attempt=N; max=M, N > 1; aws-sdk-go-v2's
// retry middleware sets it on every attempt).
func Retry(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Amz-Sdk-Request"), ";") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			return n != "1" && n != ""
		}
	}
	return false
}

// doApart sends a request to a queue counted apart.
func (c *Counter) doApart(r *http.Request, op string, body []byte, q apartQueue) (*http.Response, error) {
	start := time.Now()
	resp, err := c.next.Do(r)
	c.mu.Lock()
	c.apartN[op]++
	c.mu.Unlock()
	if err == nil && resp.StatusCode == http.StatusOK && q.seen != nil {
		q.seen(start, body)
	}
	return resp, err
}

// record counts a request that took d; r, when it names an operation, is
// priced at the next Snapshot.
func (c *Counter) record(op string, d time.Duration, r request) {
	c.mu.Lock()
	c.calls[op]++
	c.opBusy[op] += d
	c.busy += d
	if r.op != "" {
		c.unpriced = append(c.unpriced, r)
	}
	c.mu.Unlock()
}

// price adds the units of the requests not yet priced; c.mu is held.
func (c *Counter) price() {
	for _, r := range c.unpriced {
		u := capacity(r.op, r.body, r.status, r.n)
		c.units.WRU += u.WRU
		c.units.GSIWRU += u.GSIWRU
		if u.GSIWRU > 0 {
			c.units.GSIWrites++
		}
		c.units.RRU += u.RRU
		if strings.HasPrefix(r.op, "DynamoDB.") {
			c.items[ItemOp{Item: item(r.body), Op: r.op}]++
		}
	}
	c.unpriced = c.unpriced[:0]
}

// item is the partition key prefix of the one item a DynamoDB request is
// on ("job#", "rate#"), from its Key or its Item; "" when it names none.
func item(body []byte) string {
	var in struct {
		Key, Item struct {
			PK struct{ S string } `json:"pk"`
		}
	}
	_ = json.Unmarshal(body, &in)
	pk := in.Key.PK.S
	if pk == "" {
		pk = in.Item.PK.S
	}
	if i := strings.IndexByte(pk, '#'); i >= 0 {
		return pk[:i+1]
	}
	return ""
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
	// Items counts the DynamoDB requests by the item they are on.
	Items map[ItemOp]int
	// Apart counts the requests to queues counted apart (Counter.Apart).
	Apart map[string]int
	// Retries counts the SDK's retries by operation (Counter.Do).
	Retries map[string]int
}

// Snapshot copies the counts.
func (c *Counter) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.price()
	m := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		m[k] = v
	}
	b := make(map[string]time.Duration, len(c.opBusy))
	for k, v := range c.opBusy {
		b[k] = v
	}
	it := make(map[ItemOp]int, len(c.items))
	for k, v := range c.items {
		it[k] = v
	}
	ap := make(map[string]int, len(c.apartN))
	for k, v := range c.apartN {
		ap[k] = v
	}
	rt := make(map[string]int, len(c.retries))
	for k, v := range c.retries {
		rt[k] = v
	}
	return Snapshot{Calls: m, OpBusy: b, Busy: c.busy, Units: c.units, Items: it, Apart: ap, Retries: rt}
}

// Since is the difference s − earlier.
func (s Snapshot) Since(earlier Snapshot) Snapshot {
	d := Snapshot{Calls: map[string]int{}, OpBusy: map[string]time.Duration{}, Items: map[ItemOp]int{}, Apart: map[string]int{}, Retries: map[string]int{}, Busy: s.Busy - earlier.Busy,
		Units: Units{WRU: s.Units.WRU - earlier.Units.WRU, GSIWRU: s.Units.GSIWRU - earlier.Units.GSIWRU,
			GSIWrites: s.Units.GSIWrites - earlier.Units.GSIWrites, RRU: s.Units.RRU - earlier.Units.RRU}}
	for k, v := range s.Calls {
		if n := v - earlier.Calls[k]; n != 0 {
			d.Calls[k] = n
			d.OpBusy[k] = s.OpBusy[k] - earlier.OpBusy[k]
		}
	}
	for k, v := range s.Items {
		if n := v - earlier.Items[k]; n != 0 {
			d.Items[k] = n
		}
	}
	for k, v := range s.Apart {
		if n := v - earlier.Apart[k]; n != 0 {
			d.Apart[k] = n
		}
	}
	for k, v := range s.Retries {
		if n := v - earlier.Retries[k]; n != 0 {
			d.Retries[k] = n
		}
	}
	return d
}

// Item sums the DynamoDB requests on items whose key starts with prefix
// ("job#", "rate#"), of the operations ops (all when none).
func (s Snapshot) Item(prefix string, ops ...string) int {
	n := 0
	for k, v := range s.Items {
		if k.Item == prefix && (len(ops) == 0 || slices.Contains(ops, k.Op)) {
			n += v
		}
	}
	return n
}

// byItem is s's DynamoDB requests per job (n jobs) by item: JobItem,
// RateItem, and "other" for the rest.
func byItem(s Snapshot, n int) map[string]float64 {
	sums := map[string]int{}
	for k, v := range s.Items {
		it := k.Item
		if it != JobItem && it != RateItem {
			it = "other"
		}
		sums[it] += v
	}
	out := map[string]float64{}
	for it, v := range sums {
		out[it] = round(float64(v)/float64(n), 3)
	}
	return out
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

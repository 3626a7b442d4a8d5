package bench

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/store"
)

func TestOperation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, target, url, want string
	}{
		{name: "dynamodb", target: "DynamoDB_20120810.PutItem", url: "http://x/", want: "DynamoDB.PutItem"},
		{name: "sqs json", target: "AmazonSQS.SendMessage", url: "http://x/", want: "SQS.SendMessage"},
		{name: "secrets manager", target: "secretsmanager.GetSecretValue", url: "http://x/", want: "secretsmanager.GetSecretValue"},
		{name: "query protocol", url: "http://x/?Action=DescribeStacks", want: "other.DescribeStacks"},
		{name: "unknown", url: "http://x/", want: "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, _ := http.NewRequest(http.MethodPost, tt.url, nil)
			if tt.target != "" {
				r.Header.Set("X-Amz-Target", tt.target)
			}
			if got := Operation(r); got != tt.want {
				t.Errorf("Operation = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		op     string
		body   string
		status int
		size   int
		want   Units
	}{
		{name: "consistent get", op: "DynamoDB.GetItem", body: `{"ConsistentRead":true}`, status: 200, want: Units{RRU: 1}},
		{name: "eventual get", op: "DynamoDB.GetItem", body: `{}`, status: 200, want: Units{RRU: 0.5}},
		{name: "query of 9 KB", op: "DynamoDB.Query", body: `{}`, status: 200, size: 9000, want: Units{RRU: 1.5}},
		{name: "put of an indexed record", op: "DynamoDB.PutItem", body: `{"Item":{"pk":{"S":"job#1"},"sweep_shard":{"S":"1"}}}`, status: 200, want: Units{WRU: 1, GSIWRU: 1}},
		{name: "put of an item off the index", op: "DynamoDB.PutItem", body: `{"Item":{"pk":{"S":"rate#1"}}}`, status: 200, want: Units{WRU: 1}},
		{name: "failed conditional put", op: "DynamoDB.PutItem", body: `{"Item":{"pk":{"S":"job#1"},"sweep_shard":{"S":"1"}}}`, status: 400, want: Units{WRU: 1}},
		{name: "update moving sweep_at", op: "DynamoDB.UpdateItem", body: `{"Key":{"pk":{"S":"job#1"}},"UpdateExpression":"SET #s = :q, sweep_at = :s"}`, status: 200, want: Units{WRU: 1, GSIWRU: 2}},
		{name: "update leaving the index", op: "DynamoDB.UpdateItem", body: `{"Key":{"pk":{"S":"job#1"}},"UpdateExpression":"SET #s = :d REMOVE sweep_shard, sweep_at"}`, status: 200, want: Units{WRU: 1, GSIWRU: 1}},
		{name: "lease: state, version and lease, sweep_at kept", op: "DynamoDB.UpdateItem", body: `{"Key":{"pk":{"S":"job#1"}},"UpdateExpression":"SET #s = :claiming, version = :nv, lease_owner = :owner, lease_expires_at = :exp, updated_at = :now","ExpressionAttributeNames":{"#s":"state"}}`, status: 200, want: Units{WRU: 1}},
		{name: "consistent batch get of 3 keys", op: "DynamoDB.BatchGetItem", body: `{"RequestItems":{"t":{"ConsistentRead":true,"Keys":[{"pk":{"S":"job#1"}},{"pk":{"S":"job#2"}},{"pk":{"S":"job#3"}}]}}}`, status: 200, want: Units{RRU: 3}},
		{name: "batch write of an indexed record", op: "DynamoDB.BatchWriteItem", body: `{"RequestItems":{"t":[{"PutRequest":{"Item":{"pk":{"S":"job#1"},"sweep_shard":{"S":"1"}}}},{"PutRequest":{"Item":{"pk":{"S":"rate#1"}}}}]}}`, status: 200, want: Units{WRU: 2, GSIWRU: 1}},
		{name: "update of attributes the index does not project", op: "DynamoDB.UpdateItem", body: `{"Key":{"pk":{"S":"job#1"}},"UpdateExpression":"SET attempt = :a, updated_at = :n, runner_name = :r","ExpressionAttributeNames":{"#s":"state"}}`, status: 200, want: Units{WRU: 1}},
		{name: "update of rate state", op: "DynamoDB.UpdateItem", body: `{"Key":{"pk":{"S":"rate#1"}},"UpdateExpression":"SET remaining = :r"}`, status: 200, want: Units{WRU: 1}},
		{name: "sqs", op: "SQS.SendMessage", body: `{}`, status: 200, want: Units{}},
	}
	if store.SweepProjection != types.ProjectionTypeKeysOnly {
		t.Fatalf("capacity counts index writes for a keys-only sweep index, the store's is %s", store.SweepProjection)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := capacity(tt.op, []byte(tt.body), tt.status, tt.size); got != tt.want {
				t.Errorf("capacity = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// answer is an aws.HTTPClient that answers every request 200 with body.
type answer string

func (a answer) Do(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(string(a))), Request: r}, nil
}

// TestCounterPricesAtSnapshot: decoding a request body to estimate its
// units is the benchmark's work, so it happens when a Snapshot is taken,
// never while the request is timed (that would add it to the webhook's
// latency and not to the bare send it is compared with).
func TestCounterPricesAtSnapshot(t *testing.T) {
	t.Parallel()
	c := NewCounter(answer(`{}`))
	r, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(`{"Item":{"pk":{"S":"job#1"},"sweep_shard":{"S":"1"}}}`))
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810.PutItem")
	resp, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	c.mu.Lock()
	during := c.units
	c.mu.Unlock()
	if during != (Units{}) {
		t.Errorf("units %+v priced when the request ended, want them priced at the next Snapshot", during)
	}
	s := c.Snapshot()
	if want := (Units{WRU: 1, GSIWRU: 1, GSIWrites: 1}); s.Units != want || s.Calls["DynamoDB.PutItem"] != 1 {
		t.Errorf("snapshot %d puts, units %+v; want 1 put, %+v", s.Calls["DynamoDB.PutItem"], s.Units, want)
	}
	if again := c.Snapshot(); again.Units != s.Units {
		t.Errorf("second snapshot units %+v, want %+v (each request priced once)", again.Units, s.Units)
	}
}

func TestPrice(t *testing.T) {
	t.Parallel()
	// 1,000 invocations of 100 ms at 256 MB, 3,000 SQS requests, 5,000 WRU, 2,000 RRU.
	u := Invocation(256, 100*time.Millisecond).Plus(Usage{SQSRequests: 3, WRU: 5, RRU: 2}).Times(1000)
	b := ListPrices.Price(u)
	want := Bill{
		LambdaRequests: 1000 * 0.20 / 1e6,
		LambdaDuration: 25 * 0.0000133334,
		SQS:            3000 * 0.40 / 1e6,
		DynamoDB:       5000*0.625/1e6 + 2000*0.125/1e6,
	}
	want.Total = want.LambdaRequests + want.LambdaDuration + want.SQS + want.DynamoDB
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"lambda requests", b.LambdaRequests, want.LambdaRequests},
		{"lambda duration", b.LambdaDuration, want.LambdaDuration},
		{"sqs", b.SQS, want.SQS},
		{"dynamodb", b.DynamoDB, want.DynamoDB},
		{"total", b.Total, want.Total},
	} {
		if d := c.got - c.want; d > 1e-12 || d < -1e-12 {
			t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
		}
	}
	if got := Invocation(256, 1500*time.Microsecond).GBSeconds; got != 0.25*2/1000 {
		t.Errorf("1.5 ms bills %g GB-s, want 2 ms' worth", got)
	}
}

func TestParseInitTrace(t *testing.T) {
	t.Parallel()
	trace := strings.Join([]string{
		"init runtime @0.012 ms, 0.010 ms clock, 0 bytes, 0 allocs",
		"init github.com/aws/aws-sdk-go-v2/service/dynamodb/schemas @1.2 ms, 1.25 ms clock, 123 bytes, 3151 allocs",
		`{"level":"INFO","msg":"not an init line"}`,
	}, "\n")
	total, per := parseInitTrace([]byte(trace))
	if total < 1.2599 || total > 1.2601 {
		t.Errorf("total = %g ms, want 1.26", total)
	}
	if got := per["github.com/aws/aws-sdk-go-v2/service/dynamodb/schemas"]; got.MS != 1.25 || got.Allocs != 3151 {
		t.Errorf("dynamodb schemas = %+v, want 1.25 ms, 3151 allocs", got)
	}
}

func TestSummarise(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := Summarise(d)
	if got.P50 != 50 || got.P99 != 99 || got.Max != 100 || got.N != 100 {
		t.Errorf("Summarise = %+v, want p50 50, p99 99, max 100, n 100", got)
	}
}

// do sends one DynamoDB request with body through c and reads its answer.
func do(t *testing.T, c *Counter, op, body string) {
	t.Helper()
	r, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(body))
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	resp, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// TestCounterTellsItems: a DynamoDB request is counted by the item it is
// on, from its Key or its Item, so the rate item's reads and writes (a
// cost per claimer instance) are told from the job record's (a cost per
// job); a Query names no item.
func TestCounterTellsItems(t *testing.T) {
	t.Parallel()
	c := NewCounter(answer(`{}`))
	do(t, c, "PutItem", `{"TableName":"t","Item":{"pk":{"S":"job#1"},"sweep_shard":{"S":"1"}}}`)
	before := c.Snapshot()
	do(t, c, "GetItem", `{"TableName":"t","Key":{"pk":{"S":"rate#42"}}}`)
	do(t, c, "PutItem", `{"TableName":"t","Item":{"pk":{"S":"rate#42"},"remaining":{"N":"4999"}}}`)
	do(t, c, "UpdateItem", `{"TableName":"t","Key":{"pk":{"S":"job#1"}},"UpdateExpression":"SET #s = :c"}`)
	do(t, c, "UpdateItem", `{"TableName":"t","Key":{"pk":{"S":"job#1"}},"UpdateExpression":"SET #s = :d"}`)
	do(t, c, "Query", `{"TableName":"t","IndexName":"sweep"}`)
	d := c.Snapshot().Since(before)
	tests := []struct {
		name       string
		item       string
		ops        []string
		want       int
		wantPerJob float64 // byItem over 2 jobs
	}{
		{name: "rate item reads", item: RateItem, ops: RateReads, want: 1},
		{name: "rate item writes", item: RateItem, ops: RateWrites, want: 1},
		{name: "rate item", item: RateItem, want: 2, wantPerJob: 1},
		{name: "job record", item: JobItem, want: 2, wantPerJob: 1},
		{name: "no item", item: "", want: 1},
	}
	per := byItem(d, 2)
	for _, tt := range tests {
		if got := d.Item(tt.item, tt.ops...); got != tt.want {
			t.Errorf("%s: %d requests, want %d", tt.name, got, tt.want)
		}
		if tt.wantPerJob > 0 && per[tt.item] != tt.wantPerJob {
			t.Errorf("%s: %g per job, want %g (byItem %v)", tt.name, per[tt.item], tt.wantPerJob, per)
		}
	}
	if per["other"] != 0.5 || d.Service("DynamoDB") != 5 {
		t.Errorf("byItem %v over %d requests, want other 0.5 of 5", per, d.Service("DynamoDB"))
	}
}

// sqsAnswer answers SendMessage as SQS does (the MD5 the SDK checks).
type sqsAnswer struct{}

func (sqsAnswer) Do(r *http.Request) (*http.Response, error) {
	var in struct{ MessageBody string }
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &in)
	sum := md5.Sum([]byte(in.MessageBody))
	out := `{"MessageId":"00000000-0000-4000-8000-000000000001","MD5OfMessageBody":"` + hex.EncodeToString(sum[:]) + `"}`
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader(out)), ContentLength: int64(len(out)), Request: r}, nil
}

// TestCounterCountsAQueueApart: the sends a real SQS client makes to a
// queue counted apart (the dispatch pool's: the provisioner's own) are in
// no job figure (Calls, Service), only in Apart, and each is handed on
// with its body, from which the bench times the job's provisioning call;
// the claims queue's sends are counted as before.
func TestCounterCountsAQueueApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := NewCounter(sqsAnswer{})
	// The other queue's URL starts with the dispatch queue's: only the
	// whole URL is matched.
	const dispatchURL = "http://127.0.0.1:4566/000000000000/bench-dispatch-1"
	const claimsURL = dispatchURL + "0"
	var seen [][]byte
	c.Apart(dispatchURL, func(_ time.Time, body []byte) { seen = append(seen, body) })
	client := sqs.NewFromConfig(aws.Config{Region: "us-east-1", HTTPClient: c, BaseEndpoint: aws.String("http://127.0.0.1:4566"),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	msg, _ := json.Marshal(provision.DispatchMessage{JobID: 77, RunID: 9, Repo: "octo/app", RunnerName: "linux-77", Pool: "linux", JITConfig: "secret"})
	for _, url := range []string{dispatchURL, claimsURL} {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(msg))}); err != nil {
			t.Fatal(err)
		}
	}
	s := c.Snapshot()
	if s.Calls["SQS.SendMessage"] != 1 || s.Service("SQS") != 1 || s.Apart["SQS.SendMessage"] != 1 {
		t.Errorf("calls %v, apart %v; want one send to the claims queue counted, one to the dispatch queue apart", s.Calls, s.Apart)
	}
	if len(seen) != 1 {
		t.Fatalf("handed on %d sends, want the dispatch queue's one", len(seen))
	}
	if id, err := dispatchedJob(seen[0]); err != nil || id != 77 {
		t.Errorf("dispatched job %d, %v; want 77", id, err)
	}
}

// failingOnce answers the first request with a 500 (what a loaded
// emulator sometimes does), then as next.
type failingOnce struct {
	next   aws.HTTPClient
	failed bool
}

func (f *failingOnce) Do(r *http.Request) (*http.Response, error) {
	if !f.failed {
		f.failed = true
		const out = `{"__type":"InternalFailure","message":"emulator hiccup"}`
		return &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
			Body: io.NopCloser(strings.NewReader(out)), ContentLength: int64(len(out)), Request: r}, nil
	}
	return f.next.Do(r)
}

// TestCounterCountsRetriesApart: a request the real SDK client retries
// after a 500 is one SendMessage in the figures, and one retry apart, so
// a test of request counts does not fail because the emulator did once.
func TestCounterCountsRetriesApart(t *testing.T) {
	t.Parallel()
	c := NewCounter(&failingOnce{next: sqsAnswer{}})
	client := sqs.NewFromConfig(aws.Config{Region: "us-east-1", HTTPClient: c, BaseEndpoint: aws.String("http://127.0.0.1:4566"),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String("http://127.0.0.1:4566/000000000000/q"), MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot()
	if s.Calls["SQS.SendMessage"] != 1 || s.Service("SQS") != 1 || s.Retries["SQS.SendMessage"] != 1 {
		t.Errorf("calls %v, retries %v; want one SendMessage and one retry of it", s.Calls, s.Retries)
	}
	if d := s.Since(Snapshot{}); d.Retries["SQS.SendMessage"] != 1 {
		t.Errorf("Since: retries %v, want the one", d.Retries)
	}
}

// TestLifeOfSplitsTheRateItem: the figures of a run in which the job
// record costs its 5 requests (queued put, lease, claimed, in_progress,
// completed) and one claimer instance read the rate item 4 times and wrote
// it 3 times over 200 jobs: per job life, 5.035 DynamoDB requests = 5 on
// the job record + 0.035 on the rate item, and the headline says both,
// the total against the target too.
func TestLifeOfSplitsTheRateItem(t *testing.T) {
	t.Parallel()
	life := []Delivery{
		{Action: "queued", Calls: map[string]float64{"DynamoDB.PutItem": 1, "SQS.SendMessage": 1}, Items: map[string]float64{JobItem: 1}, Units: Units{GSIWrites: 1, GSIWRU: 1}},
		{Action: "in_progress", Calls: map[string]float64{"DynamoDB.UpdateItem": 1}, Items: map[string]float64{JobItem: 1}, Units: Units{GSIWrites: 1, GSIWRU: 1}},
		{Action: "completed", Calls: map[string]float64{"DynamoDB.UpdateItem": 1}, Items: map[string]float64{JobItem: 1}},
	}
	c := ClaimResult{
		Jobs:          200,
		ClaimerPerJob: map[string]float64{"DynamoDB.GetItem": 0.02, "DynamoDB.PutItem": 0.015, "DynamoDB.UpdateItem": 2},
		ClaimerItems:  map[string]float64{JobItem: 2, RateItem: 0.035},
		PollerPerJob:  map[string]float64{"SQS.ReceiveMessage": 0.1, "SQS.DeleteMessageBatch": 0.1},
		RateReads:     4, RateWrites: 3,
		Units: Units{GSIWrites: 2, GSIWRU: 3},
	}
	l, ok := LifeOf(life, c)
	want := JobLife{DynamoDB: 5.035, JobRecord: 5, RateItem: 0.035, RateReads: 4, RateWrites: 3, Jobs: 200, SQS: 1.2, IndexWrites: 3, IndexWRU: 4}
	if !ok || l != want {
		t.Fatalf("LifeOf = %+v, %v; want %+v", l, ok, want)
	}
	if _, ok := LifeOf(nil, c); ok {
		t.Errorf("LifeOf without a lifecycle measure: ok, want none")
	}
	var md strings.Builder
	Report{Lifecycle: life, Claims: []ClaimResult{c}}.Markdown(&md)
	row := ""
	for _, line := range strings.Split(md.String(), "\n") {
		if strings.Contains(line, "per job life") && strings.Contains(line, "DynamoDB") {
			row = line
		}
	}
	for _, part := range []string{"target ≤ 5", "**5.04** in all (over the target)", "job record **5.00** (meets the target)", "rate item **0.04** per job", "read `rate#` 4 times and wrote it 3 times over 200 jobs"} {
		if !strings.Contains(row, part) {
			t.Errorf("headline row %q lacks %q", row, part)
		}
	}
}

// TestReportSaysTheRetries: a run in which the SDK retried says so, with
// the operations, and a run without says nothing of retries.
func TestReportSaysTheRetries(t *testing.T) {
	t.Parallel()
	var with, without strings.Builder
	Report{SDKRetries: map[string]int{"DynamoDB.PutItem": 2, "SQS.SendMessage": 1}}.Markdown(&with)
	Report{}.Markdown(&without)
	if !strings.Contains(with.String(), "DynamoDB.PutItem 2, SQS.SendMessage 1") {
		t.Errorf("report with retries does not list them:\n%s", with.String())
	}
	if strings.Contains(without.String(), "again after an emulator error") {
		t.Error("report without retries mentions them")
	}
}

// TestWebhookRatiosAndTheirFloor: the webhook section's ratios come from
// its latencies, among them the two bare requests against one bare send
// (the least the first ratio can be with the two requests issue 11
// allows), and the headline gives that floor beside the ratio.
func TestWebhookRatiosAndTheirFloor(t *testing.T) {
	t.Parallel()
	r := WebhookResult{
		Handler: Latency{P50: 3.0, P99: 6.4}, Floor: Latency{P50: 1.2, P99: 3.4}, Floor2: Latency{P50: 2.52, P99: 5.85},
	}
	r.ratios()
	if r.RatioP50 != 2.5 || r.RatioP99 != 1.88 || r.Floor2RatioP50 != 1.19 || r.Floor2RatioP99 != 1.09 || r.Floor2OverFloorP50 != 2.1 {
		t.Errorf("ratios %v %v %v %v %v, want 2.5 1.88 1.19 1.09 2.1", r.RatioP50, r.RatioP99, r.Floor2RatioP50, r.Floor2RatioP99, r.Floor2OverFloorP50)
	}
	var md strings.Builder
	Report{Webhook: r}.Markdown(&md)
	if !strings.Contains(md.String(), "| the two bare requests alone / one bare SendMessage, p50 (the least the first ratio can be with the two requests the issue allows, here) | 2.10× |") {
		t.Errorf("headline lacks the two bare requests' ratio to one send:\n%s", md.String())
	}
}

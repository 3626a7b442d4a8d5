package bench

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

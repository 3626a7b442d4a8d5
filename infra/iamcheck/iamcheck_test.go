package iamcheck_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/iamcheck"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

func policy(t *testing.T, fn string) *iamcheck.Policy {
	t.Helper()
	path, err := emulator.TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	p, err := iamcheck.Load(path, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRolesFromTheTemplate: the roles read from template.yaml, as IAM
// would judge a few of the functions' requests.
func TestRolesFromTheTemplate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		fn, action string
		keys       []string
		want       bool
	}{
		{"JanitorFunction", "dynamodb:UpdateItem", []string{"rate#42"}, true},
		{"JanitorFunction", "dynamodb:UpdateItem", []string{"job#42"}, false},
		{"JanitorFunction", "dynamodb:UpdateItem", nil, false},
		{"JanitorFunction", "dynamodb:PutItem", []string{"rate#42"}, false},
		{"JanitorFunction", "dynamodb:GetItem", []string{"job#42"}, true},
		{"RedelivererFunction", "dynamodb:PutItem", []string{"redeliver#1"}, true},
		{"RedelivererFunction", "dynamodb:PutItem", []string{"job#1"}, false},
		{"ClaimerFunction", "sqs:ChangeMessageVisibility", nil, true},
		{"ClaimerFunction", "ec2:TerminateInstances", nil, true},
		{"WebhookFunction", "ec2:TerminateInstances", nil, false},
		{"ReclaimerFunction", "SQS:SendMessage", nil, true}, // actions are case-insensitive
		{"ReclaimerFunction", "dynamodb:DeleteItem", []string{"job#1"}, false},
	} {
		if got := policy(t, tt.fn).Allows(tt.action, "", tt.keys); got != tt.want {
			t.Errorf("%s %s %v: allowed %v, want %v", tt.fn, tt.action, tt.keys, got, tt.want)
		}
	}
	if _, err := iamcheck.Load(mustPath(t), "NoSuchFunction", nil); err == nil {
		t.Error("a function the template lacks loaded")
	}
}

func mustPath(t *testing.T) string {
	t.Helper()
	p, err := emulator.TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ok answers every request 200 with an empty JSON object, counting them.
type ok struct{ n atomic.Int32 }

func (o *ok) Do(r *http.Request) (*http.Response, error) {
	o.n.Add(1)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader("{}")), ContentLength: 2, Request: r}, nil
}

func cfg(hc aws.HTTPClient) aws.Config {
	return aws.Config{Region: "us-east-1", HTTPClient: hc, BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
}

// TestClientRefusesAsAWSDoes: through the real SDK clients, a request the
// role allows goes on, and one it does not is answered with AWS's
// AccessDenied error, never sent, and recorded.
func TestClientRefusesAsAWSDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	next := &ok{}
	c := &iamcheck.Client{Checker: iamcheck.NewChecker(policy(t, "JanitorFunction")), Next: next}
	db := dynamodb.NewFromConfig(cfg(c))
	key := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
	}
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key("rate#42"), UpdateExpression: aws.String("SET #b = :b")}); err != nil {
		t.Fatalf("rate item update: %v, want it allowed", err)
	}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key("rate#42")})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" || !strings.Contains(api.ErrorMessage(), "dynamodb:PutItem") {
		t.Fatalf("put: %v, want AccessDeniedException naming dynamodb:PutItem", err)
	}
	if n := next.n.Load(); n != 1 {
		t.Errorf("%d requests sent on, want the allowed one only", n)
	}
	if d := c.Denied(); len(d) != 1 || d[0] != "JanitorFunction: dynamodb:PutItem (PutItem of rate#42)" {
		t.Errorf("denied %q", d)
	}

	// EC2's query protocol: refused with 403 UnauthorizedOperation.
	ec2 := ec2api.New(cfg(c))
	if _, err := ec2.DescribeLaunchTemplates(ctx, &ec2api.DescribeLaunchTemplatesInput{}); err == nil || !strings.Contains(err.Error(), "UnauthorizedOperation") {
		t.Errorf("janitor DescribeLaunchTemplates: %v, want UnauthorizedOperation", err)
	}
}

// TestBatchesAreAuthorisedAsTheirSingleForms: SendMessageBatch needs
// sqs:SendMessage, as AWS documents.
func TestBatchesAreAuthorisedAsTheirSingleForms(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		fn   string
		want bool
	}{{"ReclaimerFunction", true}, {"JanitorFunction", false}} {
		c := &iamcheck.Client{Checker: iamcheck.NewChecker(policy(t, tt.fn)), Next: &ok{}}
		_, err := sqs.NewFromConfig(cfg(c)).SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{
			QueueUrl: aws.String("http://127.0.0.1:1/000000000000/q"),
			Entries:  []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("1"), MessageBody: aws.String("{}")}},
		})
		if got := len(c.Denied()) == 0; got != tt.want {
			t.Errorf("%s SendMessageBatch: allowed %v (err %v), want %v", tt.fn, got, err, tt.want)
		}
	}
}

// TestProxy: a function binary pointed at the proxy reaches the emulator
// only with what its role allows.
func TestProxy(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(upstream.Close)
	target, _ := url.Parse(upstream.URL)
	chk := iamcheck.NewChecker(policy(t, "WebhookFunction"))
	proxy := httptest.NewServer(iamcheck.Proxy(chk, target))
	t.Cleanup(proxy.Close)
	c := cfg(nil)
	c.BaseEndpoint = aws.String(proxy.URL)
	c.HTTPClient = proxy.Client()
	db := dynamodb.NewFromConfig(c)
	ctx := context.Background()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "job#1"}}
	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key}); err != nil {
		t.Fatalf("webhook GetItem: %v, want it through", err)
	}
	_, err := db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"t": {Keys: []map[string]types.AttributeValue{key}}}})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" {
		t.Fatalf("webhook BatchGetItem: %v, want AccessDeniedException", err)
	}
	if hits.Load() != 1 || len(chk.Denied()) != 1 {
		t.Errorf("upstream saw %d requests, denied %q; want 1 and the batch get", hits.Load(), chk.Denied())
	}
}

// TestKeysOfWholeItems: the partition key of an item with attributes of
// every type (a job record's) is read, so a LeadingKeys condition judges
// it rather than refusing it for want of a key.
func TestKeysOfWholeItems(t *testing.T) {
	t.Parallel()
	c := &iamcheck.Client{Checker: iamcheck.NewChecker(policy(t, "RedelivererFunction")), Next: &ok{}}
	db := dynamodb.NewFromConfig(cfg(c))
	item := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "expires_at": &types.AttributeValueMemberN{Value: "1900000000"},
			"labels": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "linux"}}},
		}
	}
	ctx := context.Background()
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item("redeliver#mark")}); err != nil {
		t.Errorf("redeliverer put of its own item: %v", err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item("job#7")}); err == nil {
		t.Error("redeliverer put of a job record allowed")
	}
	if d := c.Denied(); len(d) != 1 || !strings.Contains(d[0], "job#7") {
		t.Errorf("denied %q, want the job record's put, naming its key", d)
	}
}

// TestResources: with the stack's values, a request is judged on the
// resource it names too, as IAM does.
func TestResources(t *testing.T) {
	t.Parallel()
	const acct = "123456789012"
	base := "http://127.0.0.1:1/" + acct + "/"
	stack := testStack()
	ctx := context.Background()
	client := func(fn string, params map[string]string) (*iamcheck.Client, aws.Config) {
		p, err := iamcheck.Load(mustPath(t), fn, iamcheck.StackValues(stack, params))
		if err != nil {
			t.Fatal(err)
		}
		c := &iamcheck.Client{Checker: iamcheck.NewChecker(p), Next: &ok{}}
		return c, cfg(c)
	}
	allowed := func(c *iamcheck.Client, want bool, what string) {
		t.Helper()
		n := len(c.Denied())
		if want && n != 0 || !want && n == 0 {
			t.Errorf("%s: denied %q, want allowed %v", what, c.Denied(), want)
		}
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "job#1"}}

	for _, tt := range []struct {
		table, index string
		want         bool
	}{{"jobs", "sweep", true}, {"jobs", "", false}, {"other", "sweep", false}} {
		c, ac := client("ReclaimerFunction", nil)
		in := &dynamodb.QueryInput{TableName: aws.String(tt.table), KeyConditionExpression: aws.String("sweep_shard = :s")}
		if tt.index != "" {
			in.IndexName = aws.String(tt.index)
		}
		_, _ = dynamodb.NewFromConfig(ac).Query(ctx, in)
		allowed(c, tt.want, "reclaimer Query of "+tt.table+"/"+tt.index)
	}
	for _, tt := range []struct {
		fn, queue string
		params    map[string]string
		want      bool
	}{
		{"ReclaimerFunction", "claims", nil, true},
		{"ReclaimerFunction", "dlq", nil, false},
		{"ClaimerFunction", "dispatch", nil, false},
		{"ClaimerFunction", "dispatch", map[string]string{"DispatchQueueArns": "arn:aws:sqs:us-east-1:" + acct + ":dispatch"}, true},
	} {
		c, ac := client(tt.fn, tt.params)
		_, _ = sqs.NewFromConfig(ac).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(base + tt.queue), MessageBody: aws.String("{}")})
		allowed(c, tt.want, tt.fn+" SendMessage to "+tt.queue)
	}
	for _, tt := range []struct {
		fn, secret string
		want       bool
	}{{"WebhookFunction", stack.WebhookSecretARN, true}, {"WebhookFunction", stack.GitHubAppPrivateKeyARN, false}, {"ClaimerFunction", stack.GitHubAppPrivateKeyARN, true}} {
		c, ac := client(tt.fn, nil)
		_, _ = secretsmanager.NewFromConfig(ac).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(tt.secret)})
		allowed(c, tt.want, tt.fn+" GetSecretValue of "+tt.secret)
	}
	for _, tt := range []struct {
		name string
		want bool
	}{{"/ghclaim/runners/linux-1", true}, {"/elsewhere/linux-1", false}} {
		c, ac := client("ClaimerFunction", nil)
		_, _ = ssmapi.New(ac).DeleteParameter(ctx, &ssmapi.DeleteParameterInput{Name: tt.name})
		allowed(c, tt.want, "claimer DeleteParameter "+tt.name)
	}
	c, ac := client("WebhookFunction", nil)
	_, _ = dynamodb.NewFromConfig(ac).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("other"), Key: key})
	allowed(c, false, "webhook GetItem of another table")
}

// testStack is a stack of account 123456789012 in us-east-1, named s.
func testStack() *emulator.Stack {
	const acct = "123456789012"
	base := "http://127.0.0.1:1/" + acct + "/"
	return &emulator.Stack{Name: "s", TableName: "jobs", QueueURL: base + "claims", QueueARN: "arn:aws:sqs:us-east-1:" + acct + ":claims",
		DLQURL: base + "dlq", DLQARN: "arn:aws:sqs:us-east-1:" + acct + ":dlq",
		WebhookSecretARN:       "arn:aws:secretsmanager:us-east-1:" + acct + ":secret:hook-AbCdEf",
		GitHubAppPrivateKeyARN: "arn:aws:secretsmanager:us-east-1:" + acct + ":secret:key-GhIjKl"}
}

package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// projectTemplate is template.yaml decoded, the source of the values the emulated stack must have.
func projectTemplate(t *testing.T) map[string]any {
	t.Helper()
	path, err := TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := decodeTemplate(data)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// prop digs a value out of template.yaml, e.g. prop(t, tmpl, "ClaimsQueue", "Properties", "VisibilityTimeout").
func prop(t *testing.T, tmpl map[string]any, path ...string) any {
	t.Helper()
	var v any = tmpl["Resources"]
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("template.yaml: no %v", path)
		}
		v = m[p]
	}
	if v == nil {
		t.Fatalf("template.yaml: no %v", path)
	}
	return v
}

func TestDeployCreatesTheTemplatesTable(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	stack := DeployForTest(t, srv)
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(srv.ConfigForTest(t))

	out, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(stack.TableName)})
	if err != nil {
		t.Fatal(err)
	}
	table := out.Table
	attrType := map[string]ddbtypes.ScalarAttributeType{}
	for _, a := range table.AttributeDefinitions {
		attrType[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	keys := func(ks []ddbtypes.KeySchemaElement) []string {
		var s []string
		for _, k := range ks {
			name := aws.ToString(k.AttributeName)
			s = append(s, fmt.Sprintf("%s %s %s", name, k.KeyType, attrType[name]))
		}
		return s
	}
	if got, want := keys(table.KeySchema), []string{"pk HASH S"}; !slices.Equal(got, want) {
		t.Errorf("key schema: got %v, want %v", got, want)
	}
	if table.BillingModeSummary == nil || table.BillingModeSummary.BillingMode != ddbtypes.BillingModePayPerRequest {
		t.Errorf("billing mode: got %+v, want PAY_PER_REQUEST", table.BillingModeSummary)
	}
	// One index, sweep_keys: the old "sweep" (projection ALL) only while an
	// upgrade keeps it (LegacySweepIndex).
	var sweep *ddbtypes.GlobalSecondaryIndexDescription
	for i, g := range table.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == "sweep_keys" {
			sweep = &table.GlobalSecondaryIndexes[i]
		}
	}
	if sweep == nil || len(table.GlobalSecondaryIndexes) != 1 {
		t.Fatalf("no GSI sweep_keys, or more than it, among %d indexes", len(table.GlobalSecondaryIndexes))
	}
	if got, want := keys(sweep.KeySchema), []string{"sweep_shard HASH S", "sweep_at RANGE N"}; !slices.Equal(got, want) {
		t.Errorf("sweep key schema: got %v, want %v", got, want)
	}
	if p := sweep.Projection; p == nil || p.ProjectionType != ddbtypes.ProjectionTypeKeysOnly || len(p.NonKeyAttributes) != 0 {
		t.Errorf("sweep projection: got %+v, want KEYS_ONLY (the lease write must not touch the index)", sweep.Projection)
	}

	ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(stack.TableName)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != "expires_at" || d.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled {
		t.Errorf("TTL: got %+v, want ENABLED on expires_at", d)
	}
}

func TestDeployCreatesTheTemplatesQueues(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	stack := DeployForTest(t, srv)
	tmpl := projectTemplate(t)
	client := sqs.NewFromConfig(srv.ConfigForTest(t))
	attrs := func(url string) map[string]string {
		out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("GetQueueAttributes %s: %v", url, err)
		}
		return out.Attributes
	}
	claims, dlq := attrs(stack.QueueURL), attrs(stack.DLQURL)

	if claims["QueueArn"] != stack.QueueARN || dlq["QueueArn"] != stack.DLQARN {
		t.Errorf("ARNs: got %s and %s, want %s and %s", claims["QueueArn"], dlq["QueueArn"], stack.QueueARN, stack.DLQARN)
	}
	var redrive struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     any    `json:"maxReceiveCount"` // moto answers a number, AWS a string
	}
	if err := json.Unmarshal([]byte(claims["RedrivePolicy"]), &redrive); err != nil {
		t.Fatalf("RedrivePolicy %q: %v", claims["RedrivePolicy"], err)
	}
	if redrive.DeadLetterTargetArn != stack.DLQARN {
		t.Errorf("redrive target: got %q, want the DLQ %q", redrive.DeadLetterTargetArn, stack.DLQARN)
	}
	wantMax := fmt.Sprint(prop(t, tmpl, "ClaimsQueue", "Properties", "RedrivePolicy", "maxReceiveCount"))
	if got := fmt.Sprint(redrive.MaxReceiveCount); got != wantMax {
		t.Errorf("maxReceiveCount: got %s, want %s (template.yaml)", got, wantMax)
	}

	tests := []struct {
		queue, attr string
		got         map[string]string
	}{
		{"ClaimsQueue", "VisibilityTimeout", claims},
		{"ClaimsQueue", "MessageRetentionPeriod", claims},
		{"ClaimsQueue", "MaximumMessageSize", claims},
		{"DeadLetterQueue", "MessageRetentionPeriod", dlq},
		{"DeadLetterQueue", "MaximumMessageSize", dlq},
	}
	for _, tt := range tests {
		t.Run(tt.queue+"."+tt.attr, func(t *testing.T) {
			want := fmt.Sprint(prop(t, tmpl, tt.queue, "Properties", tt.attr))
			if tt.got[tt.attr] != want {
				t.Errorf("got %q, want %q (template.yaml)", tt.got[tt.attr], want)
			}
		})
	}
}

func TestDeployCreatesTheTemplatesSecrets(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	stack := DeployForTest(t, srv)
	tmpl := projectTemplate(t)
	client := secretsmanager.NewFromConfig(srv.ConfigForTest(t))
	value := func(arn string) string {
		out, err := client.GetSecretValue(context.Background(), &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			t.Fatalf("GetSecretValue %s: %v", arn, err)
		}
		return aws.ToString(out.SecretString)
	}

	length := prop(t, tmpl, "WebhookSecret", "Properties", "GenerateSecretString", "PasswordLength").(int)
	if got := value(stack.WebhookSecretARN); !regexp.MustCompile(`^[A-Za-z0-9]{` + strconv.Itoa(length) + `}$`).MatchString(got) {
		t.Errorf("webhook secret: got %d characters matching %q, want %d letters and digits (GenerateSecretString)", len(got), got[:min(len(got), 3)]+"…", length)
	}
	if got, want := value(stack.GitHubAppPrivateKeyARN), prop(t, tmpl, "GitHubAppPrivateKey", "Properties", "SecretString"); got != want {
		t.Errorf("App key placeholder: got %q, want %q", got, want)
	}
	if a, b := value(stack.WebhookSecretARN), value(DeployForTest(t, srv).WebhookSecretARN); a == b {
		t.Error("two stacks got the same generated webhook secret")
	}
}

func TestDeployedStacksAreIsolatedAndDeleteRemovesThem(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	cfg := srv.ConfigForTest(t)
	path, err := TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := Deploy(ctx, cfg, path, StackName(t.Name()), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := DeployForTest(t, srv)
	if a.TableName == b.TableName || a.QueueURL == b.QueueURL {
		t.Fatalf("two stacks share resources: %s/%s and %s/%s", a.TableName, a.QueueURL, b.TableName, b.QueueURL)
	}

	if err := a.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	// The template retains the table and the dead-letter queue, and the emulator honours that
	// (TestEmulatorKeepsWhatATemplateRetains): an emulated stack must still leave nothing behind.
	if left := leftovers(t, cfg, a.Name); len(left) > 0 {
		t.Errorf("after Delete: got %v of the stack, want none", left)
	}
	var secretGone *smtypes.ResourceNotFoundException
	if _, err := secretsmanager.NewFromConfig(cfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(a.WebhookSecretARN)}); !errors.As(err, &secretGone) {
		t.Errorf("GetSecretValue after Delete: got %v, want ResourceNotFoundException", err)
	}
	if _, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(b.TableName)}); err != nil {
		t.Errorf("deleting one stack touched the other: %v", err)
	}
}

// TestEmulatorKeepsWhatATemplateRetains: DeleteStack keeps a resource whose DeletionPolicy is
// Retain, as CloudFormation does, and deletes the others; Deploy relies on it (emulatable).
func TestEmulatorKeepsWhatATemplateRetains(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	cfg := srv.ConfigForTest(t)
	ctx := context.Background()
	cf := cloudformation.NewFromConfig(cfg)
	name := StackName(t.Name())
	body := `{"Resources": {
		"Kept": {"Type": "AWS::SQS::Queue", "DeletionPolicy": "Retain"},
		"Gone": {"Type": "AWS::SQS::Queue", "DeletionPolicy": "Delete"}}}`
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	if _, err := waitStack(ctx, cf, name, cftypes.StackStatusCreateComplete); err != nil {
		t.Fatal(err)
	}
	res, err := cf.DescribeStackResource(ctx, &cloudformation.DescribeStackResourceInput{StackName: aws.String(name), LogicalResourceId: aws.String("Kept")})
	if err != nil {
		t.Fatal(err)
	}
	kept := aws.ToString(res.StackResourceDetail.PhysicalResourceId)
	t.Cleanup(func() {
		_, _ = sqs.NewFromConfig(cfg).DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(kept)})
	})
	if _, err := cf.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	if _, err := waitStack(ctx, cf, name, cftypes.StackStatusDeleteComplete); err != nil && !isStackGone(err) {
		t.Fatal(err)
	}
	// A queue's physical id is its URL, whose host is not always the endpoint's: compare names.
	if left := leftovers(t, cfg, name); !slices.Equal(left, []string{"queue " + path.Base(kept)}) {
		t.Errorf("after DeleteStack: got %v, want only the retained queue %s", left, kept)
	}
}

// leftovers lists the tables and queues whose names start with stack's name, as emulators and
// CloudFormation name what a stack creates: "table NAME" and "queue NAME", sorted.
func leftovers(t *testing.T, cfg aws.Config, stack string) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	tables := dynamodb.NewListTablesPaginator(dynamodb.NewFromConfig(cfg), &dynamodb.ListTablesInput{})
	for tables.HasMorePages() {
		page, err := tables.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range page.TableNames {
			if strings.HasPrefix(name, stack+"-") {
				left = append(left, "table "+name)
			}
		}
	}
	queues := sqs.NewListQueuesPaginator(sqs.NewFromConfig(cfg), &sqs.ListQueuesInput{QueueNamePrefix: aws.String(stack + "-")})
	for queues.HasMorePages() {
		page, err := queues.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, url := range page.QueueUrls {
			left = append(left, "queue "+path.Base(url))
		}
	}
	slices.Sort(left)
	return left
}

func TestDeployParameters(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	cfg := srv.ConfigForTest(t)
	path, err := TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		params  map[string]string
		wantErr bool
	}{
		{"parameter of a dropped function only is accepted and ignored", map[string]string{"GitHubAppId": "12345"}, false},
		{"unknown parameter is an error", map[string]string{"NoSuchParameter": "x"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stack, err := Deploy(context.Background(), cfg, path, StackName(t.Name()), tt.params)
			if err == nil {
				t.Cleanup(func() { _ = stack.Delete(context.Background()) })
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}

// The template's numbers depend on each other; these are the relations DESIGN.md relies on.
func TestTemplateInvariants(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	num := func(path ...string) int {
		t.Helper()
		n, ok := prop(t, tmpl, path...).(int)
		if !ok {
			t.Fatalf("template.yaml %v: not a literal number", path)
		}
		return n
	}
	tests := []struct {
		name string
		ok   bool
		why  string
	}{
		{
			"claims visibility timeout is at least 6x the claimer timeout",
			num("ClaimsQueue", "Properties", "VisibilityTimeout") >= 6*num("ClaimerFunction", "Properties", "Timeout"),
			"AWS's rule for SQS event sources: a batch in progress must never become visible to a second claimer",
		},
		{
			"DLQ retention exceeds the claims queue's",
			num("DeadLetterQueue", "Properties", "MessageRetentionPeriod") > num("ClaimsQueue", "Properties", "MessageRetentionPeriod"),
			"a message keeps its original enqueue time when dead-lettered, so a shorter DLQ retention would drop it early",
		},
		{
			"webhook answers inside GitHub's 10 s",
			num("WebhookFunction", "Properties", "Timeout") <= 10,
			"GitHub abandons a delivery after 10 s and never retries it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Error(tt.why)
			}
		})
	}
}

// What moto can create of the operations side is created (the log groups); the rest (alarms,
// dashboard) is reported as dropped, not silently lost.
func TestDeployCreatesLogGroupsAndReportsAlarmsDropped(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	stack := DeployForTest(t, srv)
	resources := projectTemplate(t)["Resources"].(map[string]any)
	groups, dropped := 0, 0
	for _, id := range sortedKeys(resources) {
		switch resources[id].(map[string]any)["Type"] {
		case "AWS::Logs::LogGroup":
			groups++
			if stack.Resources[id] == "" {
				t.Errorf("log group %s was not created (created: %v)", id, sortedKeys(stack.Resources))
			}
		case "AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard":
			dropped++
			if !slices.Contains(stack.Dropped, id) {
				t.Errorf("%s is neither created nor reported dropped", id)
			}
		}
	}
	if groups == 0 || dropped == 0 {
		t.Fatalf("template has %d log groups and %d alarms/dashboards: nothing checked", groups, dropped)
	}
}

package emulator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/failure"
)

// expressionTables numbers the tables of TestDynamoDBRefusesAnUnparsableExpression:
// a server outlives one run of it (-count, the shared server).
var expressionTables atomic.Int32

// countingClient counts the HTTP requests an SDK client sends.
type countingClient struct {
	next aws.HTTPClient
	n    atomic.Int32
}

func (c *countingClient) Do(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.Do(r)
}

// TestDynamoDBRefusesAnUnparsableExpression: DynamoDB answers a condition
// or filter it cannot parse with 400 ValidationException "Invalid
// ConditionExpression: Syntax error; ..." (or "Invalid FilterExpression"),
// which the SDK does not retry (a report confirmed against AWS:
// https://github.com/floci-io/floci/issues/1512). moto answered 500, which
// the SDK retries and ghclaim's failure classes would take for a passing
// fault of the service: a typo in an expression would have looked like a
// flaky AWS in every test.
func TestDynamoDBRefusesAnUnparsableExpression(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	cfg := srv.ConfigForTest(t)
	counting := &countingClient{next: cfg.HTTPClient}
	cfg.HTTPClient = counting
	db := dynamodb.NewFromConfig(cfg)
	ctx := context.Background()
	table := aws.String(fmt.Sprintf("expressions-%d-%d", os.Getpid(), expressionTables.Add(1)))
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            table,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}
	names := map[string]string{"#s": "s"}
	values := map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "x"}}
	const bad = "#s ~ :v" // "~" is no token of DynamoDB's expressions
	for _, c := range []struct {
		name, prefix string
		call         func() error
	}{
		{"PutItem", "Invalid ConditionExpression: Syntax error;", func() error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key,
				ConditionExpression: aws.String(bad), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
			return err
		}},
		{"UpdateItem", "Invalid ConditionExpression: Syntax error;", func() error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: key, UpdateExpression: aws.String("SET #s = :v"),
				ConditionExpression: aws.String(bad), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
			return err
		}},
		{"DeleteItem", "Invalid ConditionExpression: Syntax error;", func() error {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: key,
				ConditionExpression: aws.String(bad), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
			return err
		}},
		{"Query", "Invalid FilterExpression: Syntax error;", func() error {
			_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: table, KeyConditionExpression: aws.String("pk = :k"),
				FilterExpression: aws.String(bad), ExpressionAttributeNames: names,
				ExpressionAttributeValues: map[string]types.AttributeValue{":k": key["pk"], ":v": values[":v"]}})
			return err
		}},
		{"Scan", "Invalid FilterExpression: Syntax error;", func() error {
			_, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: table,
				FilterExpression: aws.String(bad), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
			return err
		}},
	} {
		before := counting.n.Load()
		err := c.call()
		var api smithy.APIError
		var resp *awshttp.ResponseError
		if !errors.As(err, &api) || !errors.As(err, &resp) {
			t.Errorf("%s with %q: %v, want an API error", c.name, bad, err)
			continue
		}
		if resp.HTTPStatusCode() != 400 || api.ErrorCode() != "ValidationException" || !strings.HasPrefix(api.ErrorMessage(), c.prefix) {
			t.Errorf("%s with %q: HTTP %d %s %q, want HTTP 400 ValidationException %q...", c.name, bad, resp.HTTPStatusCode(), api.ErrorCode(), api.ErrorMessage(), c.prefix)
		}
		if f := failure.Classify(err); f.Class != failure.NonRetryable {
			t.Errorf("%s with %q: classified %v (%s), want %v", c.name, bad, f.Class, f.Reason, failure.NonRetryable)
		}
		if sent := counting.n.Load() - before; sent != 1 {
			t.Errorf("%s with %q: the SDK sent it %d times, want once (a validation error is not retried)", c.name, bad, sent)
		}
	}
	// A well-formed condition still goes through the same parser.
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key,
		ConditionExpression: aws.String("attribute_not_exists(#s) OR #s <> :v"), ExpressionAttributeNames: names, ExpressionAttributeValues: values}); err != nil {
		t.Fatalf("PutItem with a valid condition: %v", err)
	}
}

package emulator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestConditionalWritesAreAtomic guards the property every race test of
// ghclaim relies on: of many concurrent conditional writes to one item,
// exactly one wins, as on DynamoDB.
func TestConditionalWritesAreAtomic(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	stack := DeployForTest(t, srv)
	db := dynamodb.NewFromConfig(srv.ConfigForTest(t))
	ctx := context.Background()
	for round := range 30 {
		pk := fmt.Sprintf("race#%d", round)
		// Seed the item, then race conditional updates on its version: the
		// shape of every take-back and lease in ghclaim.
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(stack.TableName),
			Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: pk}, "version": &types.AttributeValueMemberN{Value: "1"},
			},
		}); err != nil {
			t.Fatal(err)
		}
		var wins, losses atomic.Int32
		var wg sync.WaitGroup
		for range 24 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName:           aws.String(stack.TableName),
					Key:                 map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
					UpdateExpression:    aws.String("SET version = :two"),
					ConditionExpression: aws.String("version = :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{
						":one": &types.AttributeValueMemberN{Value: "1"}, ":two": &types.AttributeValueMemberN{Value: "2"},
					},
				})
				var ccf *types.ConditionalCheckFailedException
				switch {
				case err == nil:
					wins.Add(1)
				case errors.As(err, &ccf):
					losses.Add(1)
				default:
					t.Errorf("UpdateItem: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || losses.Load() != 23 {
			t.Fatalf("round %d: %d writes won and %d lost; want 1 and 23", round, wins.Load(), losses.Load())
		}
	}
}

package emulator

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
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

// dispatchProbe loads the launcher script without starting a server, then
// asks moto's own dispatcher for backends with the filesystem listing
// refused: a request must find its backend without listing moto's package.
const dispatchProbe = `
import logging, os, runpy, sys
runpy.run_path(sys.argv[1])
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
def refuse(path="."):
    raise AssertionError("moto listed %s to dispatch a request" % path)
os.listdir = refuse
for svc in ("dynamodb", "sqs", "ec2", "ssm"):
    got = app.get_backend_for_host(svc)
    if got != svc:
        raise AssertionError("backend for %s: %r" % (svc, got))
level = logging.getLogger("werkzeug").level
if level < logging.WARNING:
    raise AssertionError("werkzeug logs every request (level %d)" % level)
print("ok")
`

// TestDispatchDoesNotListMotoPerRequest guards the launcher's fix of moto's
// dispatcher: it listed moto's package directory (about 200 stat calls,
// each giving up the GIL) under one global lock for every request, and
// make chaos alone on a quiet box piled its request threads up behind that
// lock until leases and liveness checks starved (lost jobs). The listing is
// taken once; werkzeug's line per request is off.
func TestDispatchDoesNotListMotoPerRequest(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatalf("moto_server is not on PATH: %v", err)
	}
	argv, env, err := atomicLauncher(bin)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], "-c", dispatchProbe, argv[1])
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("probe of %s: %v\n%s", argv[1], err, out)
	}
}

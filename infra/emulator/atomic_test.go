package emulator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestConditionalWritesAreAtomic guards the property every race test of
// ghclaim relies on: of many concurrent conditional writes to one item,
// exactly one wins, as on DynamoDB. Each write is sent once (no SDK
// retry): an answer cut on a busy box (a checksum that does not match) is
// an outcome unknown, and the SDK's retry of a write that took effect
// loses to itself, which counted 0 wins and 24 losses in a fresh make
// test. The item then says whether one did. The seed put and the read
// are idempotent and go through the SDK's retries: CI's make test once
// had the seed's answer cut ("use of closed network connection") with
// no retry to take it again.
func TestConditionalWritesAreAtomic(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	stack := DeployForTest(t, srv)
	db := dynamodb.NewFromConfig(srv.ConfigForTest(t), func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	retrying := dynamodb.NewFromConfig(srv.ConfigForTest(t))
	ctx := context.Background()
	for round := range 30 {
		pk := fmt.Sprintf("race#%d", round)
		// Seed the item, then race conditional updates on its version: the
		// shape of every take-back and lease in ghclaim.
		if _, err := retrying.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(stack.TableName),
			Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: pk}, "version": &types.AttributeValueMemberN{Value: "1"},
			},
		}); err != nil {
			t.Fatal(err)
		}
		var wins, losses, unknown atomic.Int32
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
					unknown.Add(1)
					t.Logf("round %d: UpdateItem's outcome unknown: %v", round, err)
				}
			}()
		}
		wg.Wait()
		if w, u := wins.Load(), unknown.Load(); w > 1 || w+u < 1 || w+losses.Load()+u != 24 || u > 2 {
			t.Fatalf("round %d: %d writes won, %d lost, %d unknown; want 1 won (or an unknown one) and the rest lost", round, w, losses.Load(), u)
		}
		out, err := retrying.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(stack.TableName),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := out.Item["version"].(*types.AttributeValueMemberN); v == nil || v.Value != "2" {
			t.Fatalf("round %d: version %v after the race, want 2 (one write took effect)", round, out.Item["version"])
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
	runProbe(t, dispatchProbe)
}

// sqsProbe loads the launcher script and drives moto's SQS backend from
// threads, with hooks that wait for a second thread inside the same
// operation: with the launcher's lock the other thread never gets in, so each
// hook's barrier times out; without it the two overlap and moto fails as it
// does under load (a receive raising on a dead-letter move, a send lost by a
// delete).
const sqsProbe = `
import runpy, sys, threading
runpy.run_path(sys.argv[1])
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends
b = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
dlq = b.create_queue("probe-dlq")
q = b.create_queue("probe", RedrivePolicy='{"deadLetterTargetArn": "%s", "maxReceiveCount": 1}' % dlq.queue_arn)

def overlap_hook():
    barrier = threading.Barrier(2, timeout=1)
    met = []
    def wait():
        try:
            barrier.wait()
            met.append(True)
        except threading.BrokenBarrierError:
            pass
    return wait, met

def run(*fns):
    errors = []
    def call(fn):
        try:
            fn()
        except Exception as err:
            errors.append(repr(err))
    ts = [threading.Thread(target=call, args=(fn,)) for fn in fns]
    for t in ts: t.start()
    for t in ts: t.join()
    return errors

# 1. Two receives of a message due for the dead-letter queue.
b.send_message("probe", "to-dlq")
if len(b.receive_message("probe", 10, 0, 0)) != 1:
    raise AssertionError("first receive")
wait, met = overlap_hook()
class Policy(dict):
    def __getitem__(self, k):
        wait()
        return dict.__getitem__(self, k)
q.redrive_policy = Policy(q.redrive_policy)
errors = run(lambda: b.receive_message("probe", 10, 0, 30), lambda: b.receive_message("probe", 10, 0, 30))
if errors or met or len(dlq._messages) != 1 or q._messages:
    raise AssertionError("dead-letter move: errors %s, overlapped %s, dlq %d, queue %d" % (errors, bool(met), len(dlq._messages), len(q._messages)))
q.redrive_policy = None
q.dead_letter_queue = None

# 2. A delete and a send at once: the sent message stays.
b.send_message("probe", "old")
old = b.receive_message("probe", 1, 0, 30)[0]  # a copy: hook the queue's own message
wait, met = overlap_hook()
held = q._messages[0]
held.had_receipt_handle = (lambda orig: lambda h: (wait(), orig(h))[1])(held.had_receipt_handle)
add = q.add_message
q.add_message = lambda m: (wait(), add(m))
errors = run(lambda: b.delete_message("probe", old.receipt_handle), lambda: b.send_message("probe", "new"))
q.add_message = add
bodies = [m.body for m in q._messages]
if errors or met or bodies != ["new"]:
    raise AssertionError("delete and send: errors %s, overlapped %s, queue %s" % (errors, bool(met), bodies))

# 3. A long poll does not hold the lock: a send made while it waits reaches it.
b.delete_message("probe", b.receive_message("probe", 10, 0, 30)[0].receipt_handle)
waiting = threading.Event()
wfm = q.wait_for_messages
q.wait_for_messages = lambda t: (waiting.set(), wfm(t))
got = []
t = threading.Thread(target=lambda: got.extend(b.receive_message("probe", 10, 5, 30)))
t.start()
if not waiting.wait(5):
    raise AssertionError("the long poll never waited")
b.send_message("probe", "during-poll")
t.join()
if [m.body for m in got] != ["during-poll"]:
    raise AssertionError("long poll got %s" % [m.body for m in got])
print("ok")
`

// TestSQSQueueChangesAreSerialised guards the launcher's lock on moto's SQS:
// moto changes a queue's messages from every request thread without one, so
// under load two receives both moved a message to the dead-letter queue (the
// second answered 500 and hid its batch) and a delete could drop a message
// sent at the same moment. A long poll still lets sends through.
func TestSQSQueueChangesAreSerialised(t *testing.T) {
	t.Parallel()
	runProbe(t, sqsProbe)
}

// runProbe runs a Python probe with the launcher script as its argument,
// under the interpreter moto_server runs on; the probe prints "ok".
func runProbe(t *testing.T, probe string) {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatalf("moto_server is not on PATH: %v", err)
	}
	argv, env, err := atomicLauncher(bin)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], "-c", probe, argv[1])
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("probe of %s: %v\n%s", argv[1], err, out)
	}
}

// warmProbe runs the launcher's warm-up as a server does before it serves,
// then checks that moto's imported objects (EC2's and CloudFormation's
// models among them) are frozen out of the garbage collector's scans.
const warmProbe = `
import gc, runpy, sys
mod = runpy.run_path(sys.argv[1])
before = len(gc.get_objects())
mod["warm"]()
frozen, scanned = gc.get_freeze_count(), len(gc.get_objects())
if frozen < 50000 or scanned > frozen // 10:
    raise AssertionError("after warm: %d objects frozen, %d left to scan (%d before)" % (frozen, scanned, before))
import moto.ec2.models as ec2
if any(o is ec2.EC2Backend for o in gc.get_objects()):
    raise AssertionError("EC2's backend class is still scanned by every collection")
print("ok")
`

// TestWarmFreezesMotosObjects guards the launcher's warm-up: moto keeps a
// few hundred thousand objects from its imports, and every full garbage
// collection walked them again (pauses of 100-300 ms under load, the
// slowest claims of make bench); warm freezes them after building the
// services' backends.
func TestWarmFreezesMotosObjects(t *testing.T) {
	t.Parallel()
	runProbe(t, warmProbe)
}

// TestSharedFileRemovesStaleVersions: writing a new version of a shared
// file removes the other versions nobody touched for a day, and keeps a
// recent one (another checkout's run may be using it).
func TestSharedFileRemovesStaleVersions(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	stale := filepath.Join(dir, "ghclaim-test-aaaaaaaaaaaa.txt")
	recent := filepath.Join(dir, "ghclaim-test-bbbbbbbbbbbb.txt")
	for _, f := range []string{stale, recent} {
		if err := os.WriteFile(f, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-staleShared - time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	path, err := sharedFile("ghclaim-test-", ".txt", []byte("new version"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "new version" {
		t.Fatalf("new version: %q, %v", b, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the version untouched for a day is still there (%v)", err)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("the recent version was removed: %v", err)
	}
}

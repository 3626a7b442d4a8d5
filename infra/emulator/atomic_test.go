package emulator

import (
	"bytes"
	"context"
	"encoding/json"
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

// dispatchProbe, with the launcher script loaded and no server started, asks
// moto's own dispatcher for backends with the filesystem listing refused: a
// request must find its backend without listing moto's package. The response
// class's method list and the action's snake-case name, which moto's dispatch
// computes for every request, are computed once.
const dispatchProbe = `
import inspect, logging, os
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

from moto.core import responses
from moto.sqs.responses import SQSResponse
first = responses.method_names_from_class(SQSResponse)
if "send_message" not in first:
    raise AssertionError("SQS's response methods: %r" % first)
def refuse_listing(*args, **kwargs):
    raise AssertionError("moto listed a response class's methods again")
inspect.getmembers = refuse_listing
if responses.method_names_from_class(SQSResponse) != first:
    raise AssertionError("a second request found other methods")
name = responses.camelcase_to_underscores
if name("SendMessage") != "send_message":
    raise AssertionError("SendMessage in snake case: %r" % name("SendMessage"))
hits = name.cache_info().hits
name("SendMessage")
if name.cache_info().hits != hits + 1:
    raise AssertionError("an action's snake-case name is computed again per request")
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
	runProbe(t, "dispatch")
}

// sqsProbe, with the launcher script loaded, drives moto's SQS backend from
// threads, with hooks that wait for a second thread inside the same
// operation: with the launcher's lock the other thread never gets in, so each
// hook's barrier times out; without it the two overlap and moto fails as it
// does under load (a receive raising on a dead-letter move, a send lost by a
// delete).
const sqsProbe = `
import threading
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
	runProbe(t, "sqs")
}

// sqsClockProbe fills a queue (300 messages, 10 of them received and one
// delayed), then counts moto's datetime clock reads while it sends one more
// and reads the counts: SendMessage built the queue's whole attribute dict,
// whose counts read that clock for every message, twice or more. The counts
// must still be right.
const sqsClockProbe = `
import moto.core.utils as cu
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends
b = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
q = b.create_queue("probe-clock")
for i in range(300):
    b.send_message("probe-clock", "m%d" % i)
b.send_message("probe-clock", "late", delay_seconds=60)
if len(b.receive_message("probe-clock", 10, 0, 30)) != 10:
    raise AssertionError("receive of 10")
reads = [0]
utcnow = cu.utcnow
def counted():
    reads[0] += 1
    return utcnow()
cu.utcnow = counted
b.send_message("probe-clock", "one more")
attrs = q.attributes
if reads[0] > 10:
    raise AssertionError("one send and the counts read the datetime clock %d times (a queue of %d)" % (reads[0], len(q._messages)))
want = {"ApproximateNumberOfMessages": 291, "ApproximateNumberOfMessagesNotVisible": 10, "ApproximateNumberOfMessagesDelayed": 1}
got = {k: attrs[k] for k in want}
if got != want:
    raise AssertionError("counts %s, want %s" % (got, want))
bodies = [m.body for m in b.receive_message("probe-clock", 10, 0, 30)]
if len(bodies) != 10 or "late" in bodies:
    raise AssertionError("a receive got %s: want 10 visible, not the delayed one" % bodies)
print("ok")
`

// TestSQSCostDoesNotGrowWithTheBacklogsClock guards the launcher's clock on
// moto's SQS: every send read the time through datetime conversions for
// every message in the queue, so a backlog of 2,000 made each send cost
// 25 ms of CPU. The counts it reports stay right.
func TestSQSCostDoesNotGrowWithTheBacklogsClock(t *testing.T) {
	t.Parallel()
	runProbe(t, "sqsclock")
}

// ddbParseProbe sends DynamoDB requests through moto's request handler (its
// WSGI app, in process) and counts how often each expression is parsed: once
// a request, where moto parsed twice. It checks what the requests did too:
// conditions hold or refuse, updates apply their own values, and a request
// refused after the handler parsed leaves nothing stale for the next.
const ddbParseProbe = ddbTable + `
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
def ddb(op, body):
    r = call(op, body)
    return r.status_code, json.loads(r.data or b"{}")
parses = {"condition": 0, "update": 0}
parse, make = ConditionExpressionParser.parse, UpdateExpressionParser.make.__func__
def counted_parse(self):
    parses["condition"] += 1
    return parse(self)
def counted_make(cls, expression):
    parses["update"] += 1
    return make(cls, expression)
ConditionExpressionParser.parse = counted_parse
UpdateExpressionParser.make = classmethod(counted_make)
def once(what, op, body, want_code, want_parses):
    parses.update(condition=0, update=0)
    code, out = ddb(op, body)
    if code != want_code or parses != want_parses:
        raise AssertionError("%s: %d %s, parses %s; want %d, parses %s" % (what, code, out, parses, want_code, want_parses))
    return out
put = {"TableName": "t", "Item": {"pk": {"S": "a"}, "state": {"S": "pending"}, "n": {"N": "1"}}, "ConditionExpression": "attribute_not_exists(pk)"}
once("a put", "PutItem", put, 200, {"condition": 1, "update": 0})
once("the same put again", "PutItem", put, 400, {"condition": 1, "update": 0})
update = "SET #s = :to, n = n + :one"
def upd(to, one, cond_from, extra=None):
    values = {":to": {"S": to}, ":one": {"N": one}, ":from": {"S": cond_from}}
    values.update(extra or {})
    return {"TableName": "t", "Key": {"pk": {"S": "a"}}, "UpdateExpression": update, "ConditionExpression": "#s = :from",
        "ExpressionAttributeNames": {"#s": "state"}, "ExpressionAttributeValues": values, "ReturnValues": "ALL_NEW"}
out = once("an update", "UpdateItem", upd("claimed", "2", "pending"), 200, {"condition": 1, "update": 1})
if out["Attributes"]["state"] != {"S": "claimed"} or out["Attributes"]["n"] != {"N": "3"}:
    raise AssertionError("the update wrote %s" % out["Attributes"])
once("an update whose condition fails", "UpdateItem", upd("done", "5", "pending"), 400, {"condition": 1, "update": 1})
# Refused by the handler after it parsed (a value no expression uses): the backend never runs.
once("an update with an unused value", "UpdateItem", upd("x", "7", "claimed", {":unused": {"S": "u"}}), 400, {"condition": 1, "update": 1})
out = once("the next update", "UpdateItem", upd("done", "10", "claimed"), 200, {"condition": 1, "update": 1})
if out["Attributes"]["state"] != {"S": "done"} or out["Attributes"]["n"] != {"N": "13"}:
    raise AssertionError("after a refused update, the next wrote %s" % out["Attributes"])
print("ok")
`

// TestDynamoDBParsesEachExpressionOnce guards the launcher's hand-over of
// moto's parses: its request handler and its backend each parsed every
// condition and update expression of a request, a tenth of the CPU of the
// tests' writes. Requests still do what they did.
func TestDynamoDBParsesEachExpressionOnce(t *testing.T) {
	t.Parallel()
	runProbe(t, "ddbparse")
}

// ddbTable starts a DynamoDB probe: call(op, body) sends one request to
// moto's app in process, and table "t" (key pk, a string) exists.
const ddbTable = `
import json
from werkzeug.test import Client
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
client = Client(DomainDispatcherApplication(create_backend_app))
auth = "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0"
def call(op, body):
    return client.post("http://localhost/", data=json.dumps(body), headers={
        "Authorization": auth, "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810." + op})
r = call("CreateTable", {"TableName": "t", "BillingMode": "PAY_PER_REQUEST",
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}], "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]})
assert r.status_code == 200, r.data
`

// ddbSerializeProbe writes an item holding every kind of AttributeValue
// (nested maps and lists among them), reads it back, and counts moto's
// searches for a member's value while it serialises the answer: one per
// attribute now, against ten before. The answer must be the very bytes moto's
// own walk gives, and moto's walk must still run where a response transformer
// is in place.
const ddbSerializeProbe = ddbTable + `
import base64
from moto.core.serialize import AttributePicker, BaseJSONSerializer
from moto.dynamodb.responses import DynamoHandler
def ddb(op, body):
    r = call(op, body)
    assert r.status_code == 200, (op, r.status_code, r.data)
    return r.data
blob = base64.b64encode(b"\x00jit\xff").decode()
item = {"pk": {"S": "job#1"}, "n": {"N": "42"}, "b": {"B": blob}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [blob]}, "null": {"NULL": True}, "yes": {"BOOL": True}, "no": {"BOOL": False}, "empty_l": {"L": []}, "empty_m": {"M": {}},
    "m": {"M": {"s": {"S": "x"}, "l": {"L": [{"N": "1"}, {"M": {"deep": {"BOOL": False}}}, {"NULL": True}]}}},
    "l": {"L": [{"S": "y"}, {"SS": ["c"]}, {"M": {"k": {"L": [{"S": "z"}]}}}]}}
ddb("PutItem", {"TableName": "t", "Item": item})
searches = [0]
pick = AttributePicker.__call__
def counted(self, context):
    searches[0] += 1
    return pick(self, context)
AttributePicker.__call__ = counted
def get():
    searches[0] = 0
    data = ddb("GetItem", {"TableName": "t", "Key": {"pk": {"S": "job#1"}}, "ConsistentRead": True})
    return data, searches[0]
fast, fast_searches = get()
if json.loads(fast)["Item"] != item:
    raise AssertionError("the item read back differs: %s" % fast)
BaseJSONSerializer._serialize_type_structure = mod["_serialize_structure"]
walked, walked_searches = get()
BaseJSONSerializer._serialize_type_structure = mod["_serialize_type_structure"]
if fast != walked:
    raise AssertionError("the answer differs from moto's own walk:\n%s\n%s" % (fast, walked))
if fast_searches * 4 > walked_searches:
    raise AssertionError("%d member searches for the answer, %d by moto's own walk: an AttributeValue still costs a search per member" % (fast_searches, walked_searches))
DynamoHandler.RESPONSE_KEY_PATH_TO_TRANSFORMER = {"Item.nothing": lambda v: v}
transformed, transformed_searches = get()
if transformed != walked or transformed_searches != walked_searches:
    raise AssertionError("with a response transformer: %d searches, want moto's walk (%d)" % (transformed_searches, walked_searches))
print("ok")
`

// TestDynamoDBSerialisesAnAttributeValueByItsOneMember guards the launcher's
// serialisation of an AttributeValue: moto searched for each of its ten
// members in every attribute of every item it answered with, two thirds of a
// GetItem's CPU. The answer stays byte for byte what moto's walk gives.
func TestDynamoDBSerialisesAnAttributeValueByItsOneMember(t *testing.T) {
	t.Parallel()
	runProbe(t, "ddbserialize")
}

// ddbTokensProbe sends the same conditional update twice with other values:
// the second request cuts neither expression into tokens again, and each
// applies its own values. Texts that fail to tokenise fail the same way each
// time and are cut again each time; the memory of texts stays bounded.
const ddbTokensProbe = ddbTable + `
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.parsing.tokens import ExpressionTokenizer
cuts = {"condition": 0, "update": 0}
lex_one, make_list = ConditionExpressionParser._lex_one_node, ExpressionTokenizer._make_list
def counted_lex(self, rest):
    cuts["condition"] += 1
    return lex_one(self, rest)
def counted_make(self):
    cuts["update"] += 1
    return make_list(self)
ConditionExpressionParser._lex_one_node = counted_lex
ExpressionTokenizer._make_list = counted_make
def ddb(op, body):
    cuts.update(condition=0, update=0)
    r = call(op, body)
    return r.status_code, json.loads(r.data or b"{}"), dict(cuts)
code, out, _ = ddb("PutItem", {"TableName": "t", "Item": {"pk": {"S": "a"}, "state": {"S": "pending"}, "n": {"N": "1"}}})
assert code == 200, out
def upd(to, one, cond_from, update="SET #s = :to, n = n + :one", condition="#s = :from AND attribute_exists(pk)"):
    return {"TableName": "t", "Key": {"pk": {"S": "a"}}, "UpdateExpression": update, "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#s": "state"}, "ReturnValues": "ALL_NEW",
        "ExpressionAttributeValues": {":to": {"S": to}, ":one": {"N": one}, ":from": {"S": cond_from}}}
code, out, first = ddb("UpdateItem", upd("claimed", "2", "pending"))
if code != 200 or first["condition"] == 0 or first["update"] != 1:
    raise AssertionError("first update: %d %s, cuts %s; want 200 and both expressions cut" % (code, out, first))
code, out, again = ddb("UpdateItem", upd("done", "10", "claimed"))
if code != 200 or again != {"condition": 0, "update": 0}:
    raise AssertionError("the same texts again: %d %s, cuts %s; want 200 and nothing cut" % (code, out, again))
if out["Attributes"]["state"] != {"S": "done"} or out["Attributes"]["n"] != {"N": "13"}:
    raise AssertionError("the second update wrote %s" % out["Attributes"])
code, out, _ = ddb("UpdateItem", upd("x", "1", "claimed"))
if code != 400 or out.get("__type", "").split("#")[-1] != "ConditionalCheckFailedException":
    raise AssertionError("an update whose remembered condition fails: %d %s" % (code, out))
answers = []
for _ in range(2):
    code, out, cut = ddb("UpdateItem", upd("x", "1", "done", update="SET n = n + :one $"))
    if code != 400 or cut["update"] == 0:
        raise AssertionError("an update that does not tokenise: %d %s, cuts %s; want 400, cut each time" % (code, out, cut))
    answers.append(out)
if answers[0] != answers[1]:
    raise AssertionError("an update that does not tokenise failed two ways: %s" % answers)
# A condition that does not tokenise is refused as DynamoDB refuses it
# (400 ValidationException): the same answer each time, cut each time.
answers = []
for _ in range(2):
    code, out, cut = ddb("UpdateItem", upd("x", "1", "done", condition="#s ~ :from"))
    if code != 400 or cut["condition"] == 0:
        raise AssertionError("a condition that does not tokenise: %d %s, cuts %s; want 400, cut each time" % (code, out, cut))
    answers.append(out)
if answers[0] != answers[1]:
    raise AssertionError("a condition that does not tokenise failed two ways: %s" % answers)
# The bound, lowered for the probe (the script's own, 1,024 texts, took a
# second of CPU to reach): runpy handed over a copy of the script's globals,
# and the functions read the originals.
script = mod["_remember"].__globals__
script["_TOKENS_KEPT"] = 16
for i in range(script["_TOKENS_KEPT"] + 10):
    ExpressionTokenizer.make_list("SET a%d = :v" % i)
if not 0 < len(script["_update_tokens"]) <= script["_TOKENS_KEPT"]:
    raise AssertionError("%d texts remembered, at most %d" % (len(script["_update_tokens"]), script["_TOKENS_KEPT"]))
print("ok")
`

// TestDynamoDBTokenisesEachTextOnce guards the launcher's memory of tokens:
// moto cut each condition and update expression into tokens afresh on every
// request, a fifth of an UpdateItem's CPU, for the few texts ghclaim's writes
// repeat. Requests still apply their own values and refuse what they refused.
func TestDynamoDBTokenisesEachTextOnce(t *testing.T) {
	t.Parallel()
	runProbe(t, "ddbtokens")
}

// serveProbe forks a server as the factory does (warm with its app, then
// serve) and sends it the readiness check and one request: the server
// formats no access line (its output goes to /dev/null), imports none of
// what warm imports for every server's first request, builds no app and
// compiles no template.
const serveProbe = `
import builtins, http.client, os, socket, sys, tempfile
import jinja2
import moto.moto_server.werkzeug_app as werkzeug_app
from werkzeug.serving import WSGIRequestHandler
app = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)
mod["warm"](app)
report = tempfile.TemporaryFile()
parent, child = socket.socketpair()
pid = os.fork()
if pid == 0:
    parent.close()
    def seen(line):
        os.write(report.fileno(), (line + "\n").encode())
    def logged(self, code="-", size="-"):
        seen("access %s %s" % (self.command, code))
    WSGIRequestHandler.log_request = logged
    load = builtins.__import__
    def watched(name, *args, **kwargs):
        before = set(sys.modules)
        try:
            return load(name, *args, **kwargs)
        finally:
            for loaded in set(sys.modules) - before:
                seen("import " + loaded)
    builtins.__import__ = watched
    build = app.create_app
    def built(service):
        seen("app " + service)
        return build(service)
    app.create_app = built
    compile_template = jinja2.Environment.compile
    def compiled(self, *args, **kwargs):
        seen("template")
        return compile_template(self, *args, **kwargs)
    jinja2.Environment.compile = compiled
    mod["serve"](child, app)
child.close()
port = int(parent.makefile().readline())
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("GET", "` + readyPath + `")
r = c.getresponse()
body = r.read()
if r.status // 100 != 2:
    raise AssertionError("readiness check ` + readyPath + `: %d %s" % (r.status, body))
c.close()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("POST", "/", body="{}", headers={"Host": "dynamodb.us-east-1.amazonaws.com", "Content-Type": "application/x-amz-json-1.0",
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0"})
r = c.getresponse()
body = r.read()
if r.status != 200:
    raise AssertionError("ListTables: %d %s" % (r.status, body))
parent.shutdown(socket.SHUT_WR)  # a forked server exits when its client half-closes
os.waitpid(pid, 0)
report.seek(0)
lines = report.read().decode().splitlines()
access = [l for l in lines if l.startswith("access ")]
if access:
    raise AssertionError("the forked server formatted access lines for /dev/null: %s" % access)
late = {l.split()[1] for l in lines if l.startswith("import ")} & set(mod["FIRST_REQUEST_IMPORTS"])
if late:
    raise AssertionError("the forked server's first request imported %s, which warm imports once for all" % sorted(late))
built = [l for l in lines if l.startswith("app ") or l == "template"]
if built:
    raise AssertionError("the forked server built what the factory could have: %s" % built)
print("ok")
`

// TestForkedServersSkipWhatNoOneReads guards the savings of the factory's
// forked servers: no access line formatted per request for an output that
// goes to /dev/null; the modules every first request imports, and the app
// of moto's own API that the readiness check asks, made once by the
// factory's warm-up instead of in each server; and a readiness check that
// compiles no dashboard template.
func TestForkedServersSkipWhatNoOneReads(t *testing.T) {
	t.Parallel()
	runProbe(t, "serve")
}

// modelsProbe, after the warm-up, lists botocore's services through a new
// Loader and a new Session (as moto does for each model it loads and each
// service it names) and loads a model the warm-up did not: none of it lists
// botocore's model directory again, and the answers are botocore's.
const modelsProbe = `
import os
import botocore
import botocore.loaders
from botocore.session import Session
data = os.path.abspath(os.path.join(os.path.dirname(botocore.__file__), "data"))
listed = []
real = os.listdir
def counting(path="."):
    if os.path.abspath(path) == data:
        listed.append(path)
    return real(path)
os.listdir = counting
try:
    names = botocore.loaders.create_loader().list_available_services("service-2")
    services = Session().get_available_services()
    model = botocore.loaders.create_loader().load_service_model("s3", "service-2")
finally:
    os.listdir = real
if listed:
    raise AssertionError("botocore listed its model directory %d times after the warm-up" % len(listed))
if "dynamodb" not in names or names != services or model["metadata"]["serviceId"] != "S3":
    raise AssertionError("services %d (dynamodb among them: %s), the session's %d, s3's model %s" % (
        len(names), "dynamodb" in names, len(services), model["metadata"].get("serviceId")))
print("ok")
`

// TestBotocoreListsItsModelsOnce guards the launcher's listing cache: moto
// loads each model through a new botocore Loader, which listed the ~400
// model directories afresh (46 times in the warm-up alone, half of its CPU).
func TestBotocoreListsItsModelsOnce(t *testing.T) {
	t.Parallel()
	runProbe(t, "models")
}

// meeting starts a probe where two threads race: meeting(fn) is fn after a
// meeting point for two callers. A lock that makes one wait for the other
// keeps them apart (the wait times out after a second and fn goes on); met
// says whether two callers were inside at once.
const meeting = `
import threading
barrier = threading.Barrier(2, timeout=1)
met = []
def meeting(fn):
    def meet(*args, **kwargs):
        try:
            barrier.wait()
            met.append(True)
        except threading.BrokenBarrierError:
            pass
        return fn(*args, **kwargs)
    return meet
`

// ddbValidateProbe sends UpdateItems and counts moto's first validation
// pass (the clause count) per request: it runs for an expression, names and
// key attributes it has not seen pass, and not again for the same ones; the
// passes that read the values still apply each update. A combination that
// was refused (two SET clauses, an update of the key) is refused again,
// the same way, its passes run each time.
const ddbValidateProbe = ddbTable + `
from moto.dynamodb.parsing import validators
counts = {"n": 0}
verify = validators.ActionCountValidator.verify_action_counts
def counted(self, node):
    counts["n"] += 1
    return verify(self, node)
validators.ActionCountValidator.verify_action_counts = counted
def update(expr, names, n):
    counts["n"] = 0
    r = call("UpdateItem", {"TableName": "t", "Key": {"pk": {"S": "a"}}, "UpdateExpression": expr, "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {":n": {"N": str(n)}}, "ReturnValues": "ALL_NEW"})
    return r.status_code, json.loads(r.data), counts["n"]
expr = "SET #c = :n, d = :n REMOVE e"
code, out, first = update(expr, {"#c": "c"}, 1)
if code != 200 or first == 0:
    raise AssertionError("first update: %d %s, clause checks %d; want 200 and the checks run" % (code, out, first))
code, out, again = update(expr, {"#c": "c"}, 2)
if code != 200 or again != 0 or out["Attributes"]["c"] != {"N": "2"} or out["Attributes"]["d"] != {"N": "2"}:
    raise AssertionError("same update again: %d %s, clause checks %d; want 200, c and d 2, no checks" % (code, out, again))
code, out, other = update(expr, {"#c": "other"}, 3)
if code != 200 or other == 0 or out["Attributes"]["other"] != {"N": "3"}:
    raise AssertionError("other names: %d %s, clause checks %d; want 200 and the checks run" % (code, out, other))
for expr, names in (("SET #c = :n SET d = :n", {"#c": "c"}), ("SET #k = :n", {"#k": "pk"})):
    answers = []
    for _ in range(2):
        code, out, checks = update(expr, names, 4)
        if code != 400 or checks == 0:
            raise AssertionError("%r: %d %s, clause checks %d; want 400, checked each time" % (expr, code, out, checks))
        answers.append(out)
    if answers[0] != answers[1]:
        raise AssertionError("%r refused two ways: %s" % (expr, answers))
print("ok")
`

// TestDynamoDBValidatesAnUpdatesShapeOnce guards the launcher's memory of
// the update validation passes that read only the expression, its names and
// the table's keys: a combination that passed them skips them after, and
// one that was refused is refused each time.
func TestDynamoDBValidatesAnUpdatesShapeOnce(t *testing.T) {
	t.Parallel()
	runProbe(t, "ddbvalidate")
}

// ssmDefaultsProbe makes two first reads of an AWS public parameter meet
// inside moto's load of them: without the launcher's lock both load, and the
// parameter has each version twice; with it the second read waits for the
// first load and both read the one version.
const ssmDefaultsProbe = meeting + `
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ssm.models import ParameterDict, ssm_backends
b = ssm_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
name = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
load = ParameterDict._load_latest_amis
ParameterDict._load_latest_amis = meeting(load)
got, errors = [], []
def read():
    try:
        got.append(b.get_parameter(name).value)
    except Exception as err:
        errors.append(repr(err))
threads = [threading.Thread(target=read) for _ in range(2)]
for t in threads: t.start()
for t in threads: t.join()
ParameterDict._load_latest_amis = load
versions = [p.version for p in b._parameters[name]]
if met or errors or len(got) != 2 or len(set(got)) != 1 or len(versions) != 1:
    raise AssertionError("two first reads of %s: met inside the load %s, errors %s, read %s, versions %s" % (name, bool(met), errors, got, versions))
print("ok")
`

// TestPublicParametersLoadOnce guards the launcher's lock around moto's
// load of SSM's public parameters (the AMI parameters the template's image
// defaults name): two first reads at once loaded them twice.
func TestPublicParametersLoadOnce(t *testing.T) {
	t.Parallel()
	runProbe(t, "ssmdefaults")
}

// probes are Python programs run against the launcher script, loaded as the
// global mod (its module dictionary) without a server started; each prints
// "ok" or fails. The cold ones run on the script as loaded; the warm ones
// after its warm-up (mod["warm"]), as a server serves.
var probes = map[string]map[string]string{
	"cold": {"dispatch": dispatchProbe, "sqs": sqsProbe, "kms": kmsProbe, "sqsclock": sqsClockProbe, "ddbparse": ddbParseProbe, "ddbserialize": ddbSerializeProbe, "ddbtokens": ddbTokensProbe, "ssmdefaults": ssmDefaultsProbe, "ddbvalidate": ddbValidateProbe},
	"warm": {"warm": warmProbe, "failedstack": failedStackProbe, "serve": serveProbe, "stacks": stacksProbe, "models": modelsProbe},
}

// probeHost loads the launcher script once (moto's imports cost seconds of
// CPU), then runs each cold probe in a child forked from it, so each starts
// from the script as loaded, apart from the others, as a process of its own
// would. It then warms itself up once (seconds of CPU more, which each warm
// probe paid for itself before) and runs each warm probe in a child forked
// from that. The probes arrive as JSON on standard input; the answer is one
// JSON object, each probe's exit code and output.
const probeHost = `
import json, os, runpy, signal, sys, tempfile, traceback
probes = json.load(sys.stdin)
mod = runpy.run_path(sys.argv[1])
children = {}
def fork(name, code):
    out = tempfile.TemporaryFile()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        signal.alarm(60)  # a probe that hangs (a deadlock) ends, and says so by its exit
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            exec(compile(code, "<probe %s>" % name, "exec"), {"mod": mod, "__name__": "__probe__"})
            rc = 0
        except BaseException:
            traceback.print_exc()
            rc = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    children[pid] = (name, out)
for name, code in probes["cold"].items():
    fork(name, code)
mod["warm"]()
for name, code in probes["warm"].items():
    fork(name, code)
results = {}
while children:
    pid, status = os.wait()
    name, out = children.pop(pid)
    out.seek(0)
    results[name] = {"code": os.waitstatus_to_exitcode(status), "out": out.read().decode(errors="replace")}
print(json.dumps(results))
`

type probeResult struct {
	Code int    `json:"code"`
	Out  string `json:"out"`
}

var (
	probesOnce sync.Once
	probesRan  map[string]probeResult
	probesErr  error
)

// runProbe runs every probe the first time one is asked for, under the
// interpreter moto_server runs on, and reports the one named.
func runProbe(t *testing.T, name string) {
	t.Helper()
	probesOnce.Do(func() { probesRan, probesErr = runProbes() })
	if probesErr != nil {
		t.Fatal(probesErr)
	}
	got, ok := probesRan[name]
	if !ok {
		t.Fatalf("probe %s did not run", name)
	}
	if got.Code != 0 || strings.TrimSpace(got.Out) != "ok" {
		t.Fatalf("probe %s of the launcher script: exit %d\n%s", name, got.Code, got.Out)
	}
}

func runProbes() (map[string]probeResult, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server is not on PATH: %v", err)
	}
	argv, env, err := atomicLauncher(bin)
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(probes)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], "-c", probeHost, argv[1])
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("probe host for %s: %v\n%s", argv[1], err, stderr.Bytes())
	}
	var got map[string]probeResult
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, fmt.Errorf("probe host's answer %q: %v\n%s", out, err, stderr.Bytes())
	}
	return got, nil
}

// warmProbe runs after the launcher's warm-up, as a server serves, and
// checks that moto's imported objects (EC2's and CloudFormation's
// models among them) are frozen out of the garbage collector's scans, that
// no service's first request reads a botocore model file, and that a JSON
// template is read as JSON while a YAML one still goes to PyYAML.
const warmProbe = `
import gc
frozen, scanned = gc.get_freeze_count(), len(gc.get_objects())
if frozen < 50000 or scanned > frozen // 10:
    raise AssertionError("after warm: %d objects frozen, %d left to scan" % (frozen, scanned))
import moto.ec2.models as ec2
if any(o is ec2.EC2Backend for o in gc.get_objects()):
    raise AssertionError("EC2's backend class is still scanned by every collection")

import botocore.loaders
from moto.core.utils import get_service_model, service_name_from_moto_package_name
def refuse_read(*args, **kwargs):
    raise AssertionError("a botocore model file was read after warm: %r" % (args[1:],))
for name in ("load_service_model", "load_data", "list_available_services"):
    setattr(botocore.loaders.Loader, name, refuse_read)
for svc in mod["SERVICES"]:
    if get_service_model(svc).service_name != svc:
        raise AssertionError("%s's model: %s" % (svc, get_service_model(svc).service_name))
    service_name_from_moto_package_name(mod["ALT_SERVICE_NAMES"].get(svc, svc))

import yaml
from moto.cloudformation.models import Stack
want = {"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}
class WentToYAML(Exception):
    pass
def refuse_yaml(*args, **kwargs):
    raise WentToYAML("the template went through PyYAML")
load, yaml.load = yaml.load, refuse_yaml
got = Stack.parse_template('{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}')
if got != want:
    raise AssertionError("JSON template read as %r" % got)
try:
    Stack.parse_template("Resources:\n  Q:\n    Type: AWS::SQS::Queue\n")
    raise AssertionError("a YAML template did not go to PyYAML")
except WentToYAML:
    pass
yaml.load = load
got = Stack.parse_template("Resources:\n  Q:\n    Type: AWS::SQS::Queue\n")
if got != want:
    raise AssertionError("YAML template read as %r" % got)
print("ok")
`

// TestWarmFreezesMotosObjects guards the launcher's warm-up: moto keeps a
// few hundred thousand objects from its imports, and every full garbage
// collection walked them again (pauses of 100-300 ms under load, the
// slowest claims of make bench); warm freezes them after building the
// services' backends.
func TestWarmFreezesMotosObjects(t *testing.T) {
	t.Parallel()
	runProbe(t, "warm")
}

// kmsProbe, with the launcher script loaded, creates KMS keys through moto's
// backend: a symmetric key generates no private key, and an asymmetric one
// generates its key at its first use, then signs and verifies with that one
// key (its public key verifies what it signed).
const kmsProbe = `
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from moto.core import DEFAULT_ACCOUNT_ID
from moto.kms.models import kms_backends
b = kms_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
generated = []
real = rsa.generate_private_key
def counted(*args, **kwargs):
    generated.append(kwargs.get("key_size"))
    return real(*args, **kwargs)
rsa.generate_private_key = counted
sym = b.create_key(None, "ENCRYPT_DECRYPT", "SYMMETRIC_DEFAULT", "alarm topic", None)
if generated:
    raise AssertionError("a symmetric key generated private keys %s" % generated)
if b.decrypt(b.encrypt(sym.id, b"secret", {})[0], {})[0] != b"secret":
    raise AssertionError("the symmetric key does not decrypt what it encrypted")
asym = b.create_key(None, "SIGN_VERIFY", "RSA_2048", "signer", None)
if generated:
    raise AssertionError("an asymmetric key generated its private key before its first use")
sig = b.sign(asym.id, b"message", "RSASSA_PKCS1_V1_5_SHA_256")[1]
if generated != [2048]:
    raise AssertionError("first use of an RSA_2048 key generated %s" % generated)
if not b.verify(asym.id, b"message", sig, "RSASSA_PKCS1_V1_5_SHA_256")[1]:
    raise AssertionError("the key does not verify its own signature")
pub = b.get_public_key(asym.id)[1]
from cryptography.hazmat.primitives.serialization import load_der_public_key
load_der_public_key(pub).verify(sig, b"message", padding.PKCS1v15(), hashes.SHA256())
if generated != [2048]:
    raise AssertionError("later uses generated more keys: %s" % generated)
import copy
twin = copy.deepcopy(sym)
if generated != [2048] or twin.private_key._key is not None:
    raise AssertionError("copying a key generated its private key: %s" % generated)
print("ok")
`

// TestKMSKeysGenerateTheirPrivateKeyOnUse guards the launcher's patch of
// moto's KMS: every key generated an RSA-2048 private key when created,
// symmetric ones included (20-200 ms of CPU per deployed stack); a key's
// private key is now generated at its first use.
func TestKMSKeysGenerateTheirPrivateKeyOnUse(t *testing.T) {
	t.Parallel()
	runProbe(t, "kms")
}

// failedStackProbe runs after the launcher's warm-up, as a server serves, and
// creates a stack whose queue moto fails to create: the create raises as before, and the
// stack ends CREATE_FAILED with the exception, and where it was raised, as its
// StackStatusReason, also as DescribeStacks answers it.
const failedStackProbe = `
from moto.core import DEFAULT_ACCOUNT_ID
from moto.cloudformation.models import cloudformation_backends
from moto.sqs.models import Queue
def refuse(*args, **kwargs):
    raise RuntimeError("queue refused")
Queue.create_from_cloudformation_json = classmethod(refuse)
b = cloudformation_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
try:
    b.create_stack("probe", '{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}', {})
    raise AssertionError("the create did not raise")
except RuntimeError:
    pass
stack = b.describe_stacks("probe")[0]
if stack.status != "CREATE_FAILED" or stack.status_reason != "RuntimeError: queue refused (at <probe failedstack>:6 in refuse)":
    raise AssertionError("stack after a failed create: %s, %r" % (stack.status, getattr(stack, "status_reason", None)))
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.test import Client
app = DomainDispatcherApplication(create_backend_app)
r = Client(app).post("/", data="Action=DescribeStacks&Version=2010-05-15&StackName=probe", headers={
    "Host": "cloudformation.us-east-1.amazonaws.com",
    "Content-Type": "application/x-www-form-urlencoded",
    "Authorization": "AWS4-HMAC-SHA256 Credential=test/20261204/us-east-1/cloudformation/aws4_request, SignedHeaders=host, Signature=x"})
body = r.get_data(as_text=True)
for want in ("<StackStatus>CREATE_FAILED</StackStatus>", "<StackStatusReason>RuntimeError: queue refused (at &lt;probe failedstack&gt;:6 in refuse)</StackStatusReason>"):
    if want not in body:
        raise AssertionError("DescribeStacks answered %d without %s:\n%s" % (r.status_code, want, body))
print("ok")
`

// stacksProbe creates two stacks with a role each from two threads at once,
// as a test binary's parallel deploys do, and has each create wait inside
// IAM's walk of the roles for the other: without the stack lock they meet
// there (and a role added during the other's walk raised "dictionary changed
// size during iteration"); with it the second create starts only after the
// first has ended, and both stacks are created.
const stacksProbe = meeting + `
from moto.core import DEFAULT_ACCOUNT_ID
from moto.cloudformation.models import cloudformation_backends
from moto.iam.models import IAMBackend
b = cloudformation_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
get_roles = IAMBackend.get_roles
IAMBackend.get_roles = meeting(get_roles)
role = '{"Resources": {"R": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": ' + \
    '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}}}}}'
errors = []
def create(name):
    try:
        b.create_stack(name, role, {})
    except Exception as err:
        errors.append(repr(err))
threads = [threading.Thread(target=create, args=("probe-%d" % i,)) for i in range(2)]
for t in threads: t.start()
for t in threads: t.join()
IAMBackend.get_roles = get_roles
if met or errors:
    raise AssertionError("two stack creates at once: met inside IAM %s, errors %s" % (bool(met), errors))
statuses = sorted((s.name, s.status) for s in b.describe_stacks(None))
if statuses != [("probe-0", "CREATE_COMPLETE"), ("probe-1", "CREATE_COMPLETE")]:
    raise AssertionError("stacks after the creates: %s" % statuses)
print("ok")
`

// TestStackOperationsTakeTurns guards the launcher's stack lock: moto
// creates a stack's resources on the request's thread, and two parallel
// deploys into one server made one stack fail on a dictionary changed under
// IAM's walk of its roles, where CloudFormation creates both.
func TestStackOperationsTakeTurns(t *testing.T) {
	t.Parallel()
	runProbe(t, "stacks")
}

// TestAFailedStackCreateEndsCreateFailed guards the launcher's patch of
// moto's CloudFormation: a stack whose resource creation raised stayed
// CREATE_IN_PROGRESS for ever, so Deploy waited out its whole bound with no
// cause to show; it now ends CREATE_FAILED with the exception as its reason,
// as CloudFormation ends a failed create.
func TestAFailedStackCreateEndsCreateFailed(t *testing.T) {
	t.Parallel()
	runProbe(t, "failedstack")
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

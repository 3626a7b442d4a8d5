# Starts moto_server with DynamoDB's item operations and SQS's queue changes
# serialised.
#
# moto serves each request on its own thread and checks a ConditionExpression
# in one step and writes in another, without a lock, so two concurrent
# conditional writes to one item can both succeed. Real DynamoDB never allows
# that, and ghclaim's correctness (one record, one message, one lease winner)
# rests on it. One lock around the backend's item operations restores it.
#
# A server warms the services ghclaim uses before it serves (their imports
# and first-request set-up) and then freezes those objects out of the
# garbage collector's reach (warm, below).
#
# With --factory PATH it is a moto_server factory instead (make test starts
# one): it imports moto once, warms the services ghclaim's tests use, then
# forks a fresh, isolated server for each client that asks. A cold
# moto_server costs a second and a half of CPU in imports, and each service's
# first request more (EC2 builds its default VPC, CloudFormation imports its
# resource models); make test runs about twenty test binaries that each start
# one. A forked server is ready at once, yet its state is its own: the parent
# never serves a request, so every child starts as a fresh moto_server would.
#
# The factory's protocol, on the Unix socket PATH: a client connects and reads
# one line, the port of its server on 127.0.0.1 (or "error: ..."). The server
# lives as long as that connection: when the client half-closes it, or dies,
# the server exits. The factory exits when its standard input closes (the
# command that started it went away). Its servers' DynamoDB is atomic too.
import gc
import importlib
import os
import select
import signal
import socket
import sys
import threading
import traceback

from moto.dynamodb.models import DynamoDBBackend

_lock = threading.RLock()


def _locked(fn, lock=_lock):
    def wrapper(*args, **kwargs):
        with lock:
            return fn(*args, **kwargs)

    return wrapper


for _name in (
    "put_item", "update_item", "delete_item", "get_item", "query", "scan",
    "batch_write_item", "batch_get_item", "transact_write_items",
    "transact_get_items", "execute_statement", "execute_transaction",
    "batch_execute_statement",
):
    setattr(DynamoDBBackend, _name, _locked(getattr(DynamoDBBackend, _name)))


# moto applies an UpdateItem's actions to the stored item one by one and
# checks the item's size as it goes: an update that takes the item past the
# limit is refused (ValidationException, "Item size to update has exceeded
# the maximum allowed size") after the actions before it took effect, and
# an update of an absent item leaves the bare key it created. DynamoDB
# refuses such an update whole: the item stays as it was, or absent. The
# item as it was is restored.
import copy

from moto.dynamodb.exceptions import ItemSizeToUpdateTooLarge
from moto.dynamodb.models.dynamo_type import DynamoType

_update_item = DynamoDBBackend.update_item


def _update_item_whole(self, table_name, key, *args, **kwargs):
    with _lock:
        table = self.get_table(table_name)
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = None
        if table.range_key_attr:
            range_value = DynamoType(key[table.range_key_attr])
        before = copy.deepcopy(table.get_item(hash_value, range_value))
        try:
            return _update_item(self, table_name, key, *args, **kwargs)
        except ItemSizeToUpdateTooLarge:
            if before is None:
                table.delete_item(hash_value, range_value)
            elif range_value is not None:
                table.items[hash_value][range_value] = before
            else:
                table.items[hash_value] = before
            raise


DynamoDBBackend.update_item = _update_item_whole


# moto stores a set (SS, NS, BS) with a member twice. DynamoDB refuses the
# write: "One or more parameter values were invalid: Input collection [...]
# contains duplicates" (ValidationException); a stand-in that keeps it
# would let a writer of duplicates pass every test and fail on AWS.
from moto.dynamodb.exceptions import MockValidationException


def _refuse_duplicate_sets(values):
    for value in (values or {}).values():
        for kind, member in value.items():
            if kind in ("SS", "NS", "BS") and len(set(map(str, member))) != len(member):
                raise MockValidationException(
                    "One or more parameter values were invalid: Input "
                    f"collection {member} contains duplicates")
            if kind == "M":
                _refuse_duplicate_sets(member)
            if kind == "L":
                _refuse_duplicate_sets(dict(enumerate(member)))


_put_item = DynamoDBBackend.put_item


def _put_item_sets(self, table_name, item_attrs, *args, **kwargs):
    _refuse_duplicate_sets(item_attrs)
    return _put_item(self, table_name, item_attrs, *args, **kwargs)


DynamoDBBackend.put_item = _put_item_sets


# moto's DynamoDB parsed each ConditionExpression, filter and UpdateExpression
# of a request twice: its request handler parses them to check which
# placeholders they use, then the backend parses them again to apply them
# (a tenth of the CPU of the updates and puts ghclaim's tests make). The
# handler now leaves its parse on the thread, and the backend takes it when
# it is for the same expression with the very same names and values (the
# handler only reads what it parsed; the backend is its one user), and
# parses itself otherwise.
import moto.dynamodb.models as _ddb_models
import moto.dynamodb.models.table as _ddb_table
import moto.dynamodb.responses as _ddb_responses
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.parsing.expressions import UpdateExpressionParser

_parsed = threading.local()

# DynamoDB answers a condition or filter it cannot parse with 400
# ValidationException, "Invalid ConditionExpression: Syntax error; ..."
# ("Invalid FilterExpression: ..." for a query's or a scan's filter).
# moto's parser raised a bare ValueError, which its server answered with a
# 500: an error the SDK retries, and ghclaim's failure classes take for
# the service's passing fault, where AWS says at once that the request is
# wrong. The handler parses every such expression before the backend
# does, so refusing there refuses them all.
_expression = threading.local()


def _filters(method):
    def wrapper(self, *args, **kwargs):
        _expression.kind = "FilterExpression"
        try:
            return method(self, *args, **kwargs)
        finally:
            _expression.kind = None
    return wrapper


class _HandlerConditionParser(ConditionExpressionParser):
    def parse(self):
        try:
            op = super().parse()
        except ValueError as err:
            kind = getattr(_expression, "kind", None) or "ConditionExpression"
            raise MockValidationException("Invalid %s: Syntax error; %s" % (kind, err)) from None
        _parsed.condition = (self.condition_expression,
                             self.expression_attribute_names,
                             self.expression_attribute_values, op)
        return op


class _BackendConditionParser(ConditionExpressionParser):
    def parse(self):
        last = getattr(_parsed, "condition", None)
        _parsed.condition = None
        if (last is not None and last[0] == self.condition_expression
                and last[1] is self.expression_attribute_names
                and last[2] is self.expression_attribute_values):
            return last[3]
        return super().parse()


def _backend_filter(expr, names, values):
    return _BackendConditionParser(expr, names, values).parse()


class _HandlerUpdates:
    @staticmethod
    def make(expression):
        ast = UpdateExpressionParser.make(expression)
        ast.ghclaim_text = expression  # for the validator's passes below
        _parsed.update = (expression, ast)
        return ast


class _BackendUpdates:
    @staticmethod
    def make(expression):
        last = getattr(_parsed, "update", None)
        _parsed.update = None
        if last is not None and last[0] == expression:
            return last[1]
        ast = UpdateExpressionParser.make(expression)
        ast.ghclaim_text = expression
        return ast


# moto validates an UpdateExpression with ten passes over its tree on every
# request. The first three (at most one clause of each kind, no overlapping
# paths, no key attribute updated) read nothing but the expression, its
# attribute names and the table's key attributes, and the first of them is
# quadratic in the tree: together 0.5-0.7 ms of the 4.5 ms of CPU an
# UpdateItem of eight actions took, spent on the same few texts over and
# over (ghclaim's writes send a handful of them). A
# combination that passed them passes them again: it skips them from then
# on. The passes that read the values or the item run every time, and a
# combination that was refused is never remembered.
from moto.dynamodb.parsing import validators as _validators

_STATIC_PASSES = (
    _validators.ActionCountValidator,
    _validators.OverlappingPathsValidator,
    _validators.UpdateHashRangeKeyValidator,
)
_passed_statically = {}
_validator_init = _validators.UpdateExpressionValidator.__init__


def _validator_key(expression, names, table):
    text = getattr(expression, "ghclaim_text", None)
    if text is None:
        return None
    return (text, tuple(sorted((names or {}).items())), tuple(table.table_key_attrs))


def _init_update_validator(self, expression, expression_attribute_names, expression_attribute_values, item, table):
    _validator_init(self, expression, expression_attribute_names, expression_attribute_values, item, table)
    self.ghclaim_key = _validator_key(expression, expression_attribute_names, table)
    if self.ghclaim_key in _passed_statically:
        self.processors = [p for p in self.processors if not isinstance(p, _STATIC_PASSES)]


def _validate_update(self):
    # Each pass of the list in turn, as moto's validate: the static ones
    # are remembered as passed once they all have, whatever comes after.
    n = self.node_to_validate
    static = [p for p in self.processors if isinstance(p, _STATIC_PASSES)]
    for processor in self.processors:
        n = processor.traverse(n)
        if static and processor is static[-1] and self.ghclaim_key is not None:
            _remember(_passed_statically, self.ghclaim_key, lambda: ())
    return n


_validators.UpdateExpressionValidator.__init__ = _init_update_validator
_validators.UpdateExpressionValidator.validate = _validate_update


_ddb_responses.create_condition_expression_parser = _HandlerConditionParser
_ddb_responses.DynamoHandler.query = _filters(_ddb_responses.DynamoHandler.query)
_ddb_responses.DynamoHandler.scan = _filters(_ddb_responses.DynamoHandler.scan)
_ddb_responses.UpdateExpressionParser = _HandlerUpdates
_ddb_models.create_condition_expression_parser = _BackendConditionParser
_ddb_models.get_filter_expression = _backend_filter
_ddb_table.get_filter_expression = _backend_filter
_ddb_models.UpdateExpressionParser = _BackendUpdates


# Before parsing, moto cut every ConditionExpression and UpdateExpression
# into tokens afresh, character by character or through six regular
# expressions looked up again for each token: a fifth of an UpdateItem's
# CPU, spent on the same few texts ghclaim's writes send over and over. A
# text's tokens depend on the text alone, and once made they are only read:
# the condition parser takes its nodes (immutable tuples) off a queue, the
# update parser reads its tokens by position. Each request now gets a fresh
# queue or list of the tokens the text gave the first time. A text that
# fails to tokenise is not remembered: it fails again, the same way.
from collections import deque

from moto.dynamodb.parsing.tokens import ExpressionTokenizer

_TOKENS_KEPT = 1024  # texts; past that the memory starts over
_condition_nodes = {}
_update_tokens = {}
_lex_condition = ConditionExpressionParser._lex_condition_expression
_make_update_tokens = ExpressionTokenizer.make_list.__func__


def _remember(memory, text, make):
    got = memory.get(text)
    if got is None:
        got = tuple(make())
        if len(memory) >= _TOKENS_KEPT:
            memory.clear()
        memory[text] = got
    return got


def _lex_condition_expression(self):
    return deque(_remember(_condition_nodes, self.condition_expression, lambda: _lex_condition(self)))


def _make_list(cls, text):
    if type(text) is not str:
        return _make_update_tokens(cls, text)
    return list(_remember(_update_tokens, text, lambda: _make_update_tokens(cls, text)))


ConditionExpressionParser._lex_condition_expression = _lex_condition_expression
ExpressionTokenizer.make_list = classmethod(_make_list)


# moto serialises a DynamoDB answer by walking the botocore model, and for
# each member of each structure tries every key it could be stored under
# (six alias rules, each also in snake_case). An AttributeValue has ten
# members and holds one, so every attribute of every item an answer carries
# cost ten such searches: two thirds of a GetItem's CPU. An AttributeValue
# stored as moto stores them, a dict with one member's name as its only key,
# is now serialised by that member alone. No alias of another member is a
# member's name, so the searches for the other nine found nothing: the
# answer is the same, byte for byte. Anything else (another shape, a value
# of another form, a response transformer in place) takes moto's own walk.
from moto.core.serialize import BaseJSONSerializer

_serialize_structure = BaseJSONSerializer._serialize_type_structure


def _serialize_type_structure(self, serialized, value, shape, key):
    if (shape.name == "AttributeValue" and type(value) is dict and len(value) == 1
            and not getattr(self._value_picker, "response_transformers", True)):
        (member,) = value
        member_shape = shape.members.get(member)
        if member_shape is not None:
            wrapper = self.MAP_TYPE() if key else serialized
            member_shape.parent = shape
            self._serialize_structure_member(wrapper, value, member_shape, member)
            if key:
                self._default_serialize(serialized, wrapper, shape, key)
            return
    _serialize_structure(self, serialized, value, shape, key)


BaseJSONSerializer._serialize_type_structure = _serialize_type_structure


# moto's SQS changes a queue's message list from every request thread with no
# lock either. Two receives of one message due for the dead-letter queue both
# move it, and the second raises (a 500 after it already marked the rest of
# its batch received, so they stay hidden for their visibility timeout); a
# delete rebuilds the list and assigns it back, so a message another thread
# sends in between is lost, which SQS never does. One lock serialises the
# operations that change a queue. A receive that long-polls takes it for one
# pass at a time and waits for messages without it, so sends go on meanwhile.
import time

from moto.sqs.models import SQSBackend

_sqs_lock = threading.RLock()

for _name in (
    "send_message", "send_message_batch", "delete_message",
    "delete_message_batch", "change_message_visibility",
    "change_message_visibility_batch", "purge_queue", "delete_queue",
):
    setattr(SQSBackend, _name, _locked(getattr(SQSBackend, _name), _sqs_lock))

_receive_pass = SQSBackend.receive_message


def _receive_message(self, queue_name, count, wait_seconds_timeout,
                     visibility_timeout, message_attribute_names=None):
    end = time.time() + wait_seconds_timeout
    while True:
        with _sqs_lock:  # one pass: moto's own receive with no wait
            got = _receive_pass(self, queue_name, count, 0,
                                visibility_timeout, message_attribute_names)
        left = end - time.time()
        if got or left <= 0:
            return got
        self.get_queue(queue_name).wait_for_messages(min(1, left))


SQSBackend.receive_message = _receive_message


# moto's SQS read the clock through four datetime conversions (about 5 µs)
# for every message a request looks at, and every SendMessage looks at them
# all: it builds the queue's whole attribute dict for one flag
# (ContentBasedDeduplication), whose three message counts walk the list
# calling each message's visible and delayed. A send to a queue holding
# 2,000 messages took 25 ms of CPU, and a backlog slowed every send and
# receive on it, which SQS's do not. The clock is now read with time.time()
# (the clock moto's utcnow reads), and a walk over the list reads it once.
import moto.sqs.models as _sqs_models
from moto.core.utils import unix_time_millis as _unix_time_millis


def _unix_time_millis_now(dt=None):
    return _unix_time_millis(dt) if dt is not None else time.time() * 1000.0


_sqs_models.unix_time_millis = _unix_time_millis_now


def _queue_messages(self):
    now = time.time() * 1000.0
    return [m for m in self._messages
            if now > m.visible_at and not now < m.delayed_until]


def _queue_delayed(self):
    now = time.time() * 1000.0
    return sum(1 for m in self._messages if now < m.delayed_until)


def _queue_not_visible(self):
    now = time.time() * 1000.0
    return sum(1 for m in self._messages if not now > m.visible_at)


_sqs_models.Queue.messages = property(_queue_messages)
_sqs_models.Queue.approximate_number_of_messages_delayed = property(
    _queue_delayed)
_sqs_models.Queue.approximate_number_of_messages_not_visible = property(
    _queue_not_visible)


# moto changes the visibility of any message that ever had the receipt
# handle, in flight or not: a message whose visibility timeout has run out
# (it is visible, and the next receive may be another consumer's) is hidden
# again. SQS refuses that: "Message does not exist or is not available for
# visibility timeout change" (InvalidParameterValue, HTTP 400). A claimer
# that outlived its message's visibility would hide, on moto, a message
# another claimer may be handling; on SQS its RetryAfter fails. A message is
# in flight while its visibility has not yet ended (a visibility timeout of
# 0 ends it at once).
from moto.core.utils import unix_time_millis
from moto.sqs.exceptions import InvalidParameterValue

_change_visibility = SQSBackend.change_message_visibility


def _change_visibility_in_flight(self, queue_name, receipt_handle,
                                 visibility_timeout):
    with _sqs_lock:
        queue = self.get_queue(queue_name)
        for message in queue._messages:
            if (message.had_receipt_handle(receipt_handle)
                    and unix_time_millis() >= message.visible_at):
                raise InvalidParameterValue(
                    f"Value {receipt_handle} for parameter ReceiptHandle is "
                    "invalid. Reason: Message does not exist or is not "
                    "available for visibility timeout change.")
        return _change_visibility(self, queue_name, receipt_handle,
                                  visibility_timeout)


SQSBackend.change_message_visibility = _change_visibility_in_flight


# moto deletes a message by any receipt handle it ever had. SQS needs the
# most recent one: "If you receive a message more than once, the
# ReceiptHandle is different each time ... you must provide the most
# recently received ReceiptHandle for the message (otherwise, the request
# succeeds, but the message will not be deleted)" (DeleteMessage). A
# claimer whose message came back and went to another claimer deletes
# nothing on SQS; on moto it took the message from under the other one.
_delete_message = SQSBackend.delete_message


def _delete_latest_receipt(self, queue_name, receipt_handle):
    with _sqs_lock:
        queue = self.get_queue(queue_name)
        for message in queue._messages:
            if (message.had_receipt_handle(receipt_handle)
                    and message.receipt_handle != receipt_handle):
                return  # an older receipt: succeeds, deletes nothing
        return _delete_message(self, queue_name, receipt_handle)


SQSBackend.delete_message = _delete_latest_receipt


# moto ignores the ClientToken of CreateFleet, RunInstances and
# CreateLaunchTemplate: the same token starts another fleet and another
# instance, or fails on the name it took. EC2 answers a repeated token
# with the first answer (no second machine) and the same token with other
# arguments with HTTP 400 IdempotentParameterMismatch. An SDK retry of a
# launch whose answer a busy emulator cut started a second machine for one
# job here, where EC2 would not. The tokens live as long as the server (EC2
# keeps them for a day at least; no test runs that long).
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses.fleets import Fleets
from moto.ec2.responses.instances import InstanceResponse
from moto.ec2.responses.launch_templates import LaunchTemplates

_fleet_lock = threading.Lock()


def _fleet_args(querystring):
    return sorted((k, tuple(v)) for k, v in querystring.items()
                  if k != "ClientToken")


def _once_per_token(create, kind):
    def once(self):
        token = self._get_param("ClientToken")
        if not token:
            return create(self)
        args = _fleet_args(self.querystring)
        with _fleet_lock:
            seen = self.ec2_backend.__dict__.setdefault(
                "_ghclaim_tokens_" + kind, {})
            if token in seen:
                first_args, answer = seen[token]
                if first_args != args:
                    raise EC2ClientError(
                        "IdempotentParameterMismatch",
                        "Arguments on this idempotent request are inconsistent "
                        "with arguments used in previous request(s).")
                return answer
            answer = create(self)
            seen[token] = (args, answer)
            return answer
    return once


Fleets.create_fleet = _once_per_token(Fleets.create_fleet, "fleet")
InstanceResponse.run_instances = _once_per_token(
    InstanceResponse.run_instances, "run")
LaunchTemplates.create_launch_template = _once_per_token(
    LaunchTemplates.create_launch_template, "template")


# moto's DescribeParameters ignores MaxResults: it answers pages of 10
# whatever is asked, and takes 51 or 0. SSM answers pages of up to
# MaxResults and refuses a value outside 1-50 with a ValidationException
# (https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_DescribeParameters.html).
# Without MaxResults the page stays moto's 10.
from moto.core.responses import ActionResult
from moto.ssm.exceptions import ValidationException as SSMValidationException
from moto.ssm.responses import SimpleSystemManagerResponse


def _describe_parameters_paged(self):
    page_size = self._get_param("MaxResults", 10)
    if not 1 <= page_size <= 50:
        bound = ("greater than or equal to 1" if page_size < 1
                 else "less than or equal to 50")
        raise SSMValidationException(
            f"1 validation error detected: Value '{page_size}' at "
            f"'maxResults' failed to satisfy constraint: Member must have "
            f"value {bound}")
    token = str(self._get_param("NextToken") or "0").strip() or "0"
    start = int(token)
    found = self.ssm_backend.describe_parameters(
        self._get_param("Filters"), self._get_param("ParameterFilters"))
    page = found[start:start + page_size]
    response = {"Parameters": [p.describe_response_object(False) for p in page]}
    if start + page_size < len(found):
        response["NextToken"] = str(start + page_size)
    return ActionResult(response)


SimpleSystemManagerResponse.describe_parameters = _describe_parameters_paged


# moto loads AWS's public parameters (/aws/service/ami-amazon-linux-latest/...
# and the like) into a region's parameters on the first read under their
# path, and marks them loaded only afterwards, without a lock: two first
# reads at once both load them, and each such parameter then has every
# version twice. SSM's public parameters are there from the start. One
# lock around the check-and-load makes the second reader wait for the first
# load and find it done.
from moto.ssm.models import ParameterDict

_ssm_defaults_lock = threading.RLock()
ParameterDict._check_loading_status = _locked(
    ParameterDict._check_loading_status, _ssm_defaults_lock)


# moto's dispatcher finds the backend of every request under one global lock,
# and on the way lists moto's package directory (an os.listdir and an isdir
# per service, ~200 stat calls) each time. Every stat releases the GIL; with
# a few dozen request threads waiting, each one takes the GIL back only after
# a switch interval, so under load one request's dispatch held the lock for
# tens of milliseconds, every other request queued behind it, and latency fed
# on itself (make chaos alone on a quiet box: moto at 100 % of a core, half
# of it in this listing, request threads piled up on the lock). The listing
# never changes while the server runs: list it once.
# A moto without this function (renamed or gone) still starts; the launcher's
# test then reports the listing.
from moto import backends as _backends

if hasattr(_backends, "list_of_moto_modules"):
    _modules = tuple(_backends.list_of_moto_modules())
    _backends.list_of_moto_modules = lambda: _modules

# moto's dispatch of every request lists the response class's methods again
# (inspect.getmembers over a few hundred attributes) to see whether the action
# is one of them, and converts the action's name to snake case character by
# character. Neither answer changes while the server runs: each is computed
# once per class or name.
import functools
from moto.core import responses as _responses

for _name in ("method_names_from_class", "camelcase_to_underscores"):
    if hasattr(_responses, _name):
        setattr(_responses, _name,
                functools.lru_cache(maxsize=4096)(getattr(_responses, _name)))

# moto's KMS generates a private key for every key it creates, symmetric ones
# included, though only an asymmetric key signs or verifies: RSA-2048 for a
# symmetric key, 20-200 ms of CPU, and every stack Deploy creates has one (the
# alarm topic's key). The key is generated at its first use instead, the same
# key for every use after.
from moto.kms import models as _kms_models

_kms_lock = threading.Lock()
_generate_private_key = _kms_models.generate_private_key


class _PrivateKeyOnUse:
    def __init__(self, key_spec):
        self._key_spec = key_spec
        self._key = None

    def __getattr__(self, name):
        # Only the key's own methods: a copy or pickle looks up dunders and,
        # before its state is set, this object's fields, which must not
        # generate a key (or wait on the lock this thread holds).
        if name.startswith("__") or name in ("_key", "_key_spec"):
            raise AttributeError(name)
        fields = self.__dict__
        with _kms_lock:
            if fields.get("_key") is None:
                fields["_key"] = _generate_private_key(fields["_key_spec"])
        return getattr(fields["_key"], name)


_kms_models.generate_private_key = _PrivateKeyOnUse

# moto reads a service's botocore model through a new botocore Loader each
# time (moto.core.utils.create_loader), and names services through a new
# botocore Session each time; each new Loader lists the model directories
# afresh to check the service exists: ~400 directories and ~2,800 stat
# calls a listing, 46 listings in warm alone, 1.4 s of its 3 s of CPU, in
# every Python process that starts a moto (the factory, the launcher's
# own servers, the probes). The directories do not change while a process
# runs: a listing is kept per search path and model type, for the process.
import botocore.loaders as _botocore_loaders

_list_services = _botocore_loaders.Loader.list_available_services
_services_listed = {}


def _list_available_services(self, type_name):
    key = (tuple(self.search_paths), type_name)
    listed = _services_listed.get(key)
    if listed is None:
        listed = _services_listed[key] = _list_services(self, type_name)
    return listed


_botocore_loaders.Loader.list_available_services = _list_available_services


# werkzeug logs every request (formatting included) and nobody reads it.
import logging

logging.getLogger("werkzeug").setLevel(logging.WARNING)


from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.utils import (
    get_pagination_model,
    get_service_model,
    service_name_from_moto_package_name,
)
from moto.backends import ALT_SERVICE_NAMES, get_backend
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    create_backend_app,
)
from werkzeug.serving import WSGIRequestHandler, make_server

REGION = "us-east-1"
# What a server's first request imports whatever the service: the request
# authoriser, moto's own API (its recorder among it), and Flask's debug
# helpers (moto's apps run in debug mode, whose form loading imports them).
# Imported by warm, once for all of a factory's servers instead of once in
# each.
FIRST_REQUEST_IMPORTS = (
    "moto.iam.access_control",
    "moto.moto_api._internal.urls",
    "moto.moto_api._internal.recorder.responses",
    "flask.debughelpers",
)

# The services the tests and template.yaml reach, warmed in the parent.
SERVICES = (
    "dynamodb", "sqs", "ec2", "ssm", "secretsmanager", "cloudformation",
    "scheduler", "sts", "iam", "logs", "sns", "kms", "cloudwatch", "lambda",
    "events",
)


# moto's CloudFormation reads every template with PyYAML's pure-Python loader
# and falls back to JSON only when that fails; a JSON template is valid YAML,
# so every template Deploy sends (JSON) went through the slow loader: the
# largest single cost of deploying a stack. JSON is read as JSON first, to the
# same dictionary; anything else goes to moto's loader as before. Patched by
# warm, which imports CloudFormation anyway (its import pulls in most of moto,
# which a probe of this script does without).
import json


class _JSONFirst:
    def __init__(self, yaml):
        self._yaml = yaml

    def __getattr__(self, name):
        return getattr(self._yaml, name)

    def load(self, stream, Loader):
        if isinstance(stream, str) and stream.lstrip().startswith("{"):
            try:
                return json.loads(stream)
            except ValueError:
                pass
        return self._yaml.load(stream, Loader=Loader)


def _json_first_templates():
    import yaml
    from moto.cloudformation import models, responses

    models.yaml = responses.yaml = _JSONFirst(yaml)


def _raised_at(err):
    """Where err was raised, " (at moto/iam/models.py:2164 in create_role)":
    an exception inside moto is the emulator's own failure, and its message
    alone ("dictionary changed size during iteration") does not say where to
    look."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return ""
    where = frames[-1]
    path = where.filename.rpartition("site-packages/")[2]
    return f" (at {path}:{where.lineno} in {where.name})"


# A stack whose resources moto fails to create (an exception in one of them)
# stayed CREATE_IN_PROGRESS for ever: CreateStack answered 500, the SDK's retry
# found the stack it had made, and Deploy waited out its whole bound with no
# cause to show. CloudFormation ends a failed create (CREATE_FAILED, then a
# rollback) with the reason in StackStatusReason: the stack now ends
# CREATE_FAILED with the exception, and where it was raised, as its reason.
# Patched by warm, as above.
def _failed_creates_fail():
    from moto.cloudformation.models import Stack

    create = Stack.create_resources

    def create_resources(self):
        try:
            create(self)
        except Exception as err:
            self.status = "CREATE_FAILED"
            self.status_reason = f"{type(err).__name__}: {err}{_raised_at(err)}"
            self._add_stack_event("CREATE_FAILED",
                                  resource_status_reason=self.status_reason)
            raise

    Stack.create_resources = create_resources


# moto creates a stack's resources on the request's thread, and a test
# binary's parallel tests deploy their stacks into one server at once. One
# stack ended CREATE_FAILED with "RuntimeError: dictionary changed size
# during iteration" where CloudFormation would have created both (it
# happened in make test; the traceback was not kept): most likely IAM's
# create_role walking every role for its name while the other create added
# its own, a walk of shared state that both creates make (probe stacks
# shows two creates meeting there). The
# backend's stack operations, and the reads that walk its stacks, take one
# lock of their own, as DynamoDB's item operations take theirs; a stack's
# resources take the item and queue locks inside it, never the other way
# round. Patched by warm, as above.
_stack_lock = threading.RLock()
STACK_OPERATIONS = (
    "create_stack", "update_stack", "delete_stack", "create_change_set",
    "execute_change_set", "delete_change_set", "describe_change_set",
    "list_change_sets", "describe_stacks", "list_stacks", "get_stack",
    "describe_stack_resource", "describe_stack_resources",
    "list_stack_resources", "describe_stack_events", "list_exports",
    "get_template",
)


def _stacks_one_at_a_time():
    from moto.cloudformation.models import CloudFormationBackend

    for name in STACK_OPERATIONS:
        setattr(CloudFormationBackend, name,
                _locked(getattr(CloudFormationBackend, name), _stack_lock))


def warm(app=None):
    """Imports the services and builds their us-east-1 backends (and, given
    the factory's app, its per-service apps), then freezes what exists.

    moto keeps a few hundred thousand objects from its imports (EC2's and
    CloudFormation's models most), and every full collection of Python's
    garbage collector walked all of them again: pauses of 100-300 ms every
    few seconds under load, which showed as the slowest claims of make
    bench. gc.freeze() moves them out of the collector's reach (they live
    as long as the server anyway); in the factory it also keeps the forked
    servers from writing to the pages they share with it, as Python's gc
    documentation advises before a fork.

    It also loads each service's botocore model (request parsing and
    response serialising), its paginators and the error lookup's service
    names, which moto caches per process but loads at a service's first
    request: without them every forked server read and parsed the same
    model files again. With the JSON templates above, a fresh server's
    first stack deploy went from about 0.4 s of CPU to 0.2 s."""
    _json_first_templates()
    _failed_creates_fail()
    _stacks_one_at_a_time()
    for module in FIRST_REQUEST_IMPORTS:
        importlib.import_module(module)
    if app is not None:  # moto's own API: the readiness check asks it
        app.app_instances["moto_api"] = create_backend_app("moto_api")
    for svc in SERVICES:
        try:
            if app is not None:
                app.app_instances[svc] = create_backend_app(svc)
            backends = get_backend(svc)
            regions = backends[DEFAULT_ACCOUNT_ID]
            _ = regions[REGION] if REGION in regions.regions else regions["global"]
            get_service_model(svc)
            service_name_from_moto_package_name(ALT_SERVICE_NAMES.get(svc, svc))
        except Exception as err:  # a service this moto lacks: served cold
            print(f"moto: {svc} not warmed: {err}", flush=True)
        try:
            get_pagination_model(svc)
        except Exception:  # a service with no paginators
            pass
    gc.collect()
    gc.freeze()


def _no_access_log(self, code="-", size="-"):
    pass


from werkzeug.exceptions import InternalServerError
from werkzeug.wsgi import LimitedStream


class KeepAliveHandler(WSGIRequestHandler):
    """Serves requests one after another on a connection, as AWS's endpoints
    do and the SDK's clients expect.

    werkzeug's handler closes every connection after one answer (it cannot
    tell where a request's body ends, so it drains whatever the client sends
    next): every SDK request then opened a TCP connection of its own and the
    server started a thread for it: half of a small request's CPU on both
    sides (3,000 DynamoDB and SQS requests from four SDK clients). This handler reads each body to its Content-Length (or
    its last chunk), answers with a Content-Length in one write, and keeps
    the connection for the client's next request. It closes a connection
    only when the request asks to (HTTP/1.0, Connection: close), when its
    body is malformed, or after the application failed: never an idle one,
    so a client never sends a request on a connection the server is closing.
    """

    protocol_version = "HTTP/1.1"

    def run_wsgi(self):  # http.server answered an Expect: 100-continue
        self.environ = environ = self.make_environ()
        body = environ["wsgi.input"]
        if not environ.get("wsgi.input_terminated"):  # chunked: its own end
            length = self.headers.get("Content-Length", "0").strip() or "0"
            if not (length.isascii() and length.isdigit()):
                self.close_connection = True
                self.send_error(400, "Content-Length %r is not a length" % length)
                return
            body = environ["wsgi.input"] = LimitedStream(self.rfile, int(length))
        try:
            status, headers, data = self._call(self.server.app, environ)
        except (ConnectionError, socket.timeout):
            self.close_connection = True
            return
        except Exception:
            self.close_connection = True
            self.log_error("Error on request:\n%s", traceback.format_exc())
            status, headers, data = self._call(InternalServerError(), environ)
        if not self.close_connection:
            try:  # what the application left unread, up to the next request
                while body.read(65536):
                    pass
            except Exception:
                self.close_connection = True
        code, _, reason = status.partition(" ")
        code = int(code)
        self.send_response(code, reason)
        sized = False
        for key, value in headers:
            self.send_header(key, value)
            sized = sized or key.lower() == "content-length"
        if not sized and environ["REQUEST_METHOD"] != "HEAD" and code >= 200 and code not in (204, 304):
            self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self._headers_buffer.append(b"\r\n")
        if environ["REQUEST_METHOD"] != "HEAD":
            self._headers_buffer.append(data)
        self.flush_headers()  # headers and body in one write

    @staticmethod
    def _call(app, environ):
        answer, chunks = [], []

        def start_response(status, headers, exc_info=None):
            answer[:] = [status, headers]
            return chunks.append

        result = app(environ, start_response)
        try:
            for chunk in result:
                chunks.append(chunk)
        finally:
            if hasattr(result, "close"):
                result.close()
        return answer[0], answer[1], b"".join(chunks)


def watch(conn):
    try:
        while conn.recv(1024):
            pass
    finally:
        os._exit(0)


def serve(conn, app):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the factory's pipes are not the server's to hold
        os.dup2(null, fd)
    # Its output goes nowhere, so it formats no access line per request (and
    # its first does not import colorama for werkzeug's log handler): about
    # a twentieth of a forked server's CPU.
    WSGIRequestHandler.log_request = _no_access_log
    try:
        srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=KeepAliveHandler)
    except Exception as err:
        conn.sendall(f"error: {err}\n".encode())
        os._exit(1)
    conn.sendall(f"{srv.server_port}\n".encode())
    threading.Thread(target=watch, args=(conn,), daemon=True).start()
    srv.serve_forever()
    os._exit(0)


def factory(path):
    app = DomainDispatcherApplication(create_backend_app)
    warm(app)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(16)
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([ls, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1024):
            return
        if ls in ready:
            conn, _ = ls.accept()
            if os.fork() == 0:
                ls.close()
                serve(conn, app)
            conn.close()


def serve_alone():
    """One server on a port of its own choosing, reported on stdout as the
    factory reports its servers' (a port picked free by the caller could be
    taken by another process before this one bound it, and the caller's
    probe then found that process's server)."""
    app = DomainDispatcherApplication(create_backend_app)
    warm(app)
    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=KeepAliveHandler)
    print(f"port {srv.server_port}", flush=True)
    srv.serve_forever()


# Loaded by a test (runpy, another __name__) it only patches moto.
if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--factory":
        factory(sys.argv[2])
    elif sys.argv[1:] == ["--port-on-stdout"]:
        serve_alone()
    else:
        # moto_server's own command line served through werkzeug's handler,
        # which closes every connection and answers 100-continue twice: no
        # launcher of ours asked for it, so no one gets it by mistake.
        sys.exit("usage: %s --factory PATH | --port-on-stdout (got %s)" % (sys.argv[0], sys.argv[1:]))

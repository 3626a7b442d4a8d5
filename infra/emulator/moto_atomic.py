# Starts moto_server with DynamoDB's item operations serialised.
#
# moto serves each request on its own thread and checks a ConditionExpression
# in one step and writes in another, without a lock, so two concurrent
# conditional writes to one item can both succeed. Real DynamoDB never allows
# that, and ghclaim's correctness (one record, one message, one lease winner)
# rests on it. One lock around the backend's item operations restores it.
import sys
import threading

from moto.dynamodb.models import DynamoDBBackend

_lock = threading.RLock()


def _locked(fn):
    def wrapper(*args, **kwargs):
        with _lock:
            return fn(*args, **kwargs)

    return wrapper


for _name in (
    "put_item", "update_item", "delete_item", "get_item", "query", "scan",
    "batch_write_item", "batch_get_item", "transact_write_items",
    "transact_get_items", "execute_statement", "execute_transaction",
    "batch_execute_statement",
):
    setattr(DynamoDBBackend, _name, _locked(getattr(DynamoDBBackend, _name)))

from moto.server import main  # noqa: E402

main(sys.argv[1:])

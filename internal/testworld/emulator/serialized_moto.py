"""Serve moto (5.x) like `moto_server`, but with DynamoDB and EC2 requests serialized.

Plain moto handles requests on many threads and its DynamoDB backend does not
lock around "check condition, then write", so two concurrent conditional
writes can both succeed. Real DynamoDB never allows that, and the provider's
tests rely on it. Holding one process-wide lock for every DynamoDB request
makes conditional writes (and transactions) atomic. Its EC2 backend is not
thread-safe either: two launches into one subnet at once share a generator
of free addresses and one of them fails with HTTP 500 ("generator already
executing"), which AWS never answers to a valid launch; EC2 requests get a
lock of their own. Other services (SQS, ...) stay concurrent.

It also removes two costs of plain moto that grow with the data and that
real AWS does not charge, without changing what any call does:

- A transaction's rollback backup deep-copies the table once per write in
  the transaction: n copies of the whole table for n writes (10 writes on a
  table of 3,000 items: 450 ms). Here each table is copied once per
  transaction (54 ms); the backup, and so the rollback, is the same.
- ReceiveMessage checks each message it hands out against the queue's
  retention period by building all the queue's attributes, which counts
  every message in the queue three times: O(queue) work per message
  received (about 60 ms per receive of 10 from a queue of 1,000). Here the
  check reads the retention period itself.

And one cost that grows with nothing but is paid on every request: to find
the service a request is for, moto lists its own package directory and
stats every entry in it (about 90 system calls per request; under load,
more time than the call itself). The list cannot change while the server
runs; here it is read once.

Usage: python3 serialized_moto.py [-H HOST] [-p PORT]
"""

import argparse
import os
import signal
import sys
import threading

# moto reads the account id when its modules are imported, so set it first.
os.environ.setdefault("MOTO_ACCOUNT_ID", "000000000000")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("-p", "--port", type=int, default=4566, help="port to bind")
    return parser.parse_args(argv)


def service_of(environ):
    """The AWS service a request is for: DynamoDB's JSON protocol names
    itself in X-Amz-Target, EC2's query protocol only in the SigV4
    credential scope (Credential=AKID/day/region/ec2/aws4_request)."""
    if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
        return "dynamodb"
    _, _, credential = environ.get("HTTP_AUTHORIZATION", "").partition("Credential=")
    parts = credential.split(",")[0].strip().split("/")
    return parts[3] if len(parts) == 5 else ""


class SerializeServices:
    """WSGI middleware: one lock around every request of each service whose
    moto backend is not safe for concurrent requests."""

    def __init__(self, app):
        self.app = app
        self.locks = {"dynamodb": threading.Lock(), "ec2": threading.Lock()}

    def __call__(self, environ, start_response):
        lock = self.locks.get(service_of(environ))
        if lock is None:
            return self.app(environ, start_response)
        with lock:
            # Produce the whole body under the lock: a lazily generated
            # response would otherwise run part of the work unlocked.
            result = self.app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()


def copy_tables_once_per_transaction():
    """Make moto's transaction backup copy each table once (see above)."""
    import copy

    from moto.dynamodb import models

    local = threading.local()

    class CopyEachTableOnce:
        # Stands in for the copy module inside moto.dynamodb.models.
        def __getattr__(self, name):
            return getattr(copy, name)

        def deepcopy(self, obj, memo=None):
            backups = getattr(local, "backups", None)
            if backups is None or not isinstance(obj, models.Table):
                return copy.deepcopy(obj, memo)
            if id(obj) not in backups:
                backups[id(obj)] = copy.deepcopy(obj, memo)
            return backups[id(obj)]

    transact = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self, *args, **kwargs):
        local.backups = {}
        try:
            return transact(self, *args, **kwargs)
        finally:
            local.backups = None

    models.copy = CopyEachTableOnce()
    models.DynamoDBBackend.transact_write_items = transact_write_items


def check_retention_directly():
    """Make moto's retention check read the retention period (see above)."""
    from moto.core.utils import unix_time
    from moto.sqs import models

    def is_message_valid_based_on_retention_period(self, queue_name, message):
        queue = self.get_queue(queue_name)
        return queue.message_retention_period + message.sent_timestamp / 1000 > unix_time()

    models.SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period


def list_modules_once():
    """Make moto read the list of its modules once (see above)."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def _exit(signum, frame):
    # SystemExit unwinds run_simple's serve_forever and closes the socket.
    sys.exit(0)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # moto uses MOTO_PORT to build some URLs (e.g. SQS queue URLs).
    os.environ.setdefault("MOTO_PORT", str(args.port))

    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGINT, _exit)

    # Imported late so MOTO_ACCOUNT_ID/MOTO_PORT are already in place.
    from werkzeug.serving import run_simple
    from moto.server import DomainDispatcherApplication, create_backend_app

    copy_tables_once_per_transaction()
    check_retention_directly()
    list_modules_once()

    app = DomainDispatcherApplication(create_backend_app)
    try:
        run_simple(args.host, args.port, SerializeServices(app), threaded=True)
    except (SystemExit, KeyboardInterrupt):
        pass


if __name__ == "__main__":
    main()

"""A fault-injecting HTTP proxy in front of an OpenSearch-compatible server, for tests.

osmem never fails on its own: it answers every request at once and never drops a connection. The
failures icecdc must survive — 429 and 5xx answers, partial bulk failures, lost connections,
documents refused for good — are injected here, between the client and a real server, so the
library code under test stays unmodified and talks real HTTP.

    with FaultProxy(osmem_clone.url) as proxy:       # or the `fault_proxy` fixture
        proxy.fail_next(2, status=503, path_contains="_bulk")
        client = OpenSearch(hosts=[proxy.url])

Faults are rules, checked in the order they were added. Request-level rules (`fail_next`,
`fail_for`, `drop_connection_after`, `delay_next`) act on whole requests; item-level rules (`fail_items`,
`reject_documents`) act on the items of `_bulk` requests. An item a rule fails is NOT sent
upstream (a real cluster that answers 429 for an item has not applied it); the answer is the
upstream's answer with the failed items spliced back in at their positions and `errors: true`,
which is how OpenSearch reports a partial failure.

osmem has no ingest pipelines either: the proxy stands in for them (`IngestPipelines`). It answers
`/_ingest/pipeline/<id>` itself, and runs the `set` processors of a bulk index action's pipeline
on its document before forwarding it without the `pipeline` parameter, counting the documents
each pipeline processed; an action naming a pipeline it does not know is forwarded as it is, and
osmem refuses it as OpenSearch would.

Bounded and loopback only: the proxy listens on 127.0.0.1, forwards only to a loopback upstream,
refuses bodies over MAX_BODY_BYTES, serves at most MAX_CONNECTIONS connections at once, and keeps
a bounded log of what it saw.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import socket
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit

import pytest

from tests.support.iam import Refusal, Request

MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_CONNECTIONS = 64
LOG_ENTRIES = 10_000
COUNTED_PATHS = 10_000  # distinct paths counted one by one; more are counted together as OTHER_PATHS
OTHER_PATHS = "(other paths)"
UPSTREAM_TIMEOUT = 60.0  # seconds; as long as icecdc's client timeout, so the client gives up first
IDLE_TIMEOUT = 120.0  # seconds a client connection may sit idle before the proxy closes it

# Headers that describe one hop, not the message: never copied from one side to the other.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}

# The error type OpenSearch gives for each status the tests inject, so clients see familiar answers.
ERROR_TYPES = {
    429: "es_rejected_execution_exception",
    500: "internal_server_error",
    502: "bad_gateway",
    503: "unavailable_shards_exception",
    504: "gateway_timeout",
}


@dataclass(frozen=True)
class BulkItem:
    """One action of a `_bulk` request, as a predicate of `reject_documents` sees it."""

    op: str  # index, create, update or delete
    index: str | None
    id: str | None
    version: int | None
    source: dict[str, Any] | None  # the document; None for a delete
    routing: str | None = None


@dataclass(frozen=True)
class Seen:
    """One request in the proxy's log: when it arrived and what the proxy did with it."""

    at: float  # time.monotonic()
    method: str
    path: str  # without the query string
    outcome: str  # forwarded, failed <status>, dropped, dropped after forwarding
    items: int = 0  # bulk items in the request
    items_failed: int = 0  # of those, answered with an injected error
    ids: tuple[str | None, ...] = ()  # the bulk items' ids, in order
    failed_ids: tuple[str | None, ...] = ()  # the ids of the items answered with an injected error


@dataclass
class IngestPipelines:
    """The ingest pipelines the proxy stands in for, and the ids of the documents each processed."""

    defined: dict[str, dict[str, Any]] = field(default_factory=dict)
    processed: dict[str, list[str | None]] = field(default_factory=dict)

    def answer(self, method: str, name: str, body: bytes) -> tuple[int, Any]:
        """`/_ingest/pipeline/<name>`: PUT defines it, GET reads it, DELETE removes it."""
        if method == "PUT":
            self.defined[name] = json.loads(body)
            return 200, {"acknowledged": True}
        if name not in self.defined:
            return 404, {} if method == "GET" else _error_body(404)
        if method == "DELETE":
            del self.defined[name]
            return 200, {"acknowledged": True}
        return 200, {name: self.defined[name]}

    def run(self, body: bytes) -> bytes:
        """The bulk body with every index action of a known pipeline processed, its `pipeline` removed."""
        lines = [line for line in body.split(b"\n") if line.strip()]
        out: list[bytes] = []
        position = 0
        while position < len(lines):
            op, meta = next(iter(json.loads(lines[position]).items()))
            name = meta.get("pipeline")
            if op == "delete":
                out.append(lines[position])
                position += 1
                continue
            document = lines[position + 1]
            if name in self.defined:
                meta = {k: v for k, v in meta.items() if k != "pipeline"}
                document = json.dumps(self._process(name, json.loads(document))).encode()
                self.processed.setdefault(name, []).append(meta.get("_id"))
            out += [json.dumps({op: meta}).encode(), document]
            position += 2
        return b"".join(line + b"\n" for line in out)

    def _process(self, name: str, document: dict[str, Any]) -> dict[str, Any]:
        for processor in self.defined[name].get("processors", []):
            for kind, options in processor.items():
                if kind != "set":
                    raise ValueError(f"the test proxy runs only `set` processors, not {kind!r}")
                document[options["field"]] = options["value"]
        return document


@dataclass
class _Rule:
    kind: str  # fail, drop, delay, fail_items, reject
    path_contains: str | None = None
    method: str | None = None
    skip: int = 0  # matching requests to let through before acting
    remaining: int | None = None  # requests (items, for fail_items) still to act on; None: until cleared
    status: int = 503
    seconds: float = 0.0
    until: float | None = None  # a timed fail rule: when its outage ends (set by the first request it fails)
    forward: bool = True
    predicate: Callable[[BulkItem], bool] | None = None
    error_type: str = ""
    reason: str = ""

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (self.path_contains is None or self.path_contains in path)

    def take(self) -> bool:
        """Whether this rule acts on the current matching request; consumes one skip or one use."""
        if self.kind == "fail" and self.seconds:  # an outage: every matching request until it ends
            now = time.monotonic()
            self.until = self.until or now + self.seconds
            return now < self.until
        if self.skip > 0:
            self.skip -= 1
            return False
        if self.remaining is None:
            return True
        if self.remaining > 0:
            self.remaining -= 1
            return True
        return False


class FaultProxy:
    """An HTTP proxy to one loopback upstream that fails requests as its rules say."""

    def __init__(self, upstream: str) -> None:
        self.upstream_host, self.upstream_port = loopback(upstream)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._rules: list[_Rule] = []
        self._received: Counter[tuple[str, str]] = Counter()
        self._answered: Counter[tuple[str, str]] = Counter()
        self._log: deque[Seen] = deque(maxlen=LOG_ENTRIES)
        self._bulk_items: list[BulkItem] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.pipelines = IngestPipelines()
        # IAM in front of the server (tests/support/iam.py): a request the guard refuses gets 403
        self.guard: Callable[[Request], Refusal | None] | None = None
        # the headers a request goes on with once the proxy changed its body: a signed upstream
        # (the Serverless stand-in) verifies the body's hash, so it is signed anew
        self.resign: Callable[[str, str, dict[str, str], bytes], dict[str, str]] | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Self:
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.close_connections()  # handler threads blocked on idle keep-alive sockets end now
        self._server.server_close()
        assert self._thread is not None
        self._thread.join(timeout=10)
        self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "the proxy is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- rules ------------------------------------------------------------------------------

    def fail_next(self, n: int = 1, status: int = 503, path_contains: str | None = None, method: str | None = None) -> None:
        """Answer the next n matching requests with `status` and an OpenSearch error body; nothing is forwarded."""
        self._add(_Rule("fail", path_contains, method, remaining=n, status=status))

    def fail_for(self, seconds: float, status: int = 503, path_contains: str | None = None) -> None:
        """An outage: from the next matching request on, answer every matching one `status` for `seconds`."""
        self._add(_Rule("fail", path_contains, status=status, seconds=seconds))

    def fail_items(self, n: int, status: int = 429, path_contains: str = "_bulk") -> None:
        """Fail the first n items of the next bulk requests (n in all) with `status`; the rest go through."""
        error_type, reason = ERROR_TYPES.get(status, "injected_fault"), f"injected {status} by the test proxy"
        self._add(_Rule("fail_items", path_contains, remaining=n, status=status, error_type=error_type, reason=reason))

    def drop_connection_after(
        self, n_requests: int, times: int | None = None, path_contains: str | None = None, forward: bool = True
    ) -> None:
        """Let n matching requests through, then close the connection of the next `times` (None: all) unanswered.

        forward=True sends the request upstream before dropping: the server applied it and the
        client cannot know — the hardest case for a writer. forward=False drops it unsent.
        """
        self._add(_Rule("drop", path_contains, skip=n_requests, remaining=times, forward=forward))

    def reject_documents(
        self,
        predicate: Callable[[BulkItem], bool],
        status: int = 400,
        error_type: str = "mapper_parsing_exception",
        reason: str = "failed to parse (rejected by the test proxy)",
    ) -> None:
        """Fail every bulk item the predicate picks, every time it is sent: a document refused for good."""
        self._add(_Rule("reject", "_bulk", predicate=predicate, status=status, error_type=error_type, reason=reason))

    def delay_next(self, n: int, seconds: float, path_contains: str | None = None) -> None:
        """Hold the answer to the next n matching requests for `seconds` after the upstream answered."""
        self._add(_Rule("delay", path_contains, remaining=n, seconds=seconds))

    def clear(self) -> None:
        """Remove every rule: from now on the proxy only forwards."""
        with self._lock:
            self._rules.clear()

    def _add(self, rule: _Rule) -> None:
        with self._lock:
            self._rules.append(rule)

    # -- what the proxy saw -----------------------------------------------------------------

    def count(self, path_contains: str | None = None, method: str | None = None, answered: bool = False) -> int:
        """Requests received (or, answered=True, finished: the answer or the drop under way) whose path contains the text."""
        with self._lock:
            counter = self._answered if answered else self._received
            return sum(
                n
                for (m, p), n in counter.items()
                if (method is None or m == method) and (path_contains is None or path_contains in p)
            )

    @property
    def connections(self) -> int:
        """Client connections accepted so far: a client keeps one alive for requests in turn."""
        return 0 if self._server is None else self._server.accepted

    @property
    def counts(self) -> dict[str, int]:
        """'METHOD /path' → requests received."""
        with self._lock:
            return {f"{m} {p}": n for (m, p), n in self._received.items()}

    def bulk_items(self) -> list[BulkItem]:
        """Every bulk action received, in order, as sent (before any injected failure)."""
        with self._lock:
            return list(self._bulk_items)

    def seen(self, path_contains: str | None = None) -> list[Seen]:
        """The log of finished requests (the last LOG_ENTRIES), oldest first."""
        with self._lock:
            return [s for s in self._log if path_contains is None or path_contains in s.path]

    def wait_for(
        self,
        n: int,
        path_contains: str | None = None,
        answered: bool = False,
        timeout: float = 60.0,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Block until `count(...)` reaches n; False on timeout or when `stop()` turns true (checked every 50 ms)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                counter = self._answered if answered else self._received
                if sum(c for (_, p), c in counter.items() if path_contains is None or path_contains in p) >= n:
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or (stop is not None and stop()):
                    return False
                self._changed.wait(min(left, 0.05))

    # -- used by the handler ----------------------------------------------------------------

    def _received_request(self, method: str, path: str) -> tuple[list[_Rule], list[_Rule]]:
        """Count the request; return (the request-level rules acting on it, the item-level rules to consult)."""
        with self._changed:
            key = (method, path)
            if len(self._received) >= COUNTED_PATHS and key not in self._received:
                key = (method, OTHER_PATHS)
            self._received[key] += 1
            self._changed.notify_all()
            acting: list[_Rule] = []
            for rule in self._rules:
                if rule.kind not in ("fail", "drop", "delay") or not rule.matches(method, path):
                    continue
                if rule.kind != "delay" and any(r.kind != "delay" for r in acting):
                    continue  # one fail or drop per request: the earliest rule's; later ones keep their uses
                if rule.take():
                    acting.append(rule)
            items = [r for r in self._rules if r.kind in ("fail_items", "reject") and r.matches(method, path)]
        return acting, items

    def _failing_rule(self, item_rules: list[_Rule], item: BulkItem) -> _Rule | None:
        """The rule that fails this bulk item, if any (consumes a fail_items use)."""
        for rule in item_rules:
            if rule.kind == "reject":
                assert rule.predicate is not None
                if rule.predicate(item):  # called without the lock: `item_rules` is a snapshot of the rules
                    return rule
            else:
                with self._lock:
                    if rule.remaining:
                        rule.remaining -= 1
                        return rule
        return None

    def _finished(self, seen: Seen) -> None:
        with self._changed:
            key = (seen.method, seen.path if (seen.method, seen.path) in self._received else OTHER_PATHS)
            self._answered[key] += 1
            self._log.append(seen)
            self._changed.notify_all()


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler stuck on a dead client must not keep the test process alive

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], proxy: FaultProxy) -> None:
        self.proxy = proxy
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self.accepted = 0  # client connections accepted: a client keeps one alive for its requests
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # over the bound: refuse rather than queue without limit
            return
        with self._open_lock:
            self._open.add(request)
            self.accepted += 1
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.discard(request)
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed mid-request (the crash test does that) is expected; anything else is a bug here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self._open_lock:
            for sock in list(self._open):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clients pool connections to OpenSearch
    server: _Server
    timeout = IDLE_TIMEOUT
    received = b""  # the body of the request being handled, as the client sent it

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the proxy's own log is `FaultProxy.seen`; stderr noise would bury test output

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_GET

    def _handle(self) -> None:  # noqa: C901 - one branch per fault the proxy injects
        proxy = self.server.proxy
        method, path = self.command, urlsplit(self.path).path
        body = self._read_body()
        if body is None:
            return
        self.received = body  # what the client signed: a body forwarded otherwise is signed anew
        if proxy.guard is not None:
            refusal = proxy.guard(Request.of(method, self.path, dict(self.headers.items()), body))
            if refusal is not None:
                proxy._finished(Seen(time.monotonic(), method, path, "refused by IAM"))
                self._send_json(403, {"Message": f"{refusal}: no identity-based policy allows it"})
                return
        acting, item_rules = proxy._received_request(method, path)
        fail = next((r for r in acting if r.kind == "fail"), None)
        drop = next((r for r in acting if r.kind == "drop"), None)
        delay = sum(r.seconds for r in acting if r.kind == "delay")

        if fail is not None:
            proxy._finished(Seen(time.monotonic(), method, path, f"failed {fail.status}"))
            self._send_json(fail.status, _error_body(fail.status))
            return

        if path.startswith("/_ingest/pipeline/"):
            with proxy._lock:
                status, pipeline_answer = proxy.pipelines.answer(method, path.removeprefix("/_ingest/pipeline/"), body)
            proxy._finished(Seen(time.monotonic(), method, path, "answered"))
            self._send_json(status, pipeline_answer)
            return

        items: list[tuple[BulkItem, list[bytes]]] = []
        failed: dict[int, dict[str, Any]] = {}
        if path.endswith("/_bulk") and method in ("POST", "PUT"):
            with proxy._lock:
                body = proxy.pipelines.run(body) if proxy.pipelines.defined else body
            items, failed, body = self._fail_items(item_rules, body)
            with proxy._lock:
                proxy._bulk_items.extend(item for item, _ in items)

        if drop is not None:
            if drop.forward and not (items and len(failed) == len(items)):
                self._forward(method, body)
            proxy._finished(
                Seen(
                    time.monotonic(),
                    method,
                    path,
                    "dropped after forwarding" if drop.forward else "dropped",
                    *_counts(items, failed),
                )
            )
            self._drop()
            return

        if items and len(failed) == len(items):
            status, headers, answer = (
                200,
                [("Content-Type", "application/json; charset=UTF-8")],
                {"took": 0, "errors": False, "items": []},
            )
        else:
            status, headers, raw = self._forward(method, body)
            if status != 200:
                failed = {}  # the whole request failed upstream: its answer stands as it is
            answer = json.loads(raw) if failed else raw
        if failed:
            answer = _splice(answer, failed, len(items))
        if delay:
            time.sleep(delay)
        # logged before the answer goes out, so a client holding its answer finds it in the log
        proxy._finished(Seen(time.monotonic(), method, path, "forwarded", *_counts(items, failed)))
        if isinstance(answer, bytes):
            self._send(status, headers, answer)
        else:
            self._send_json(status, answer, headers)

    def _fail_items(
        self, item_rules: list[_Rule], body: bytes
    ) -> tuple[list[tuple[BulkItem, list[bytes]]], dict[int, dict[str, Any]], bytes]:
        """(the bulk's items, position → injected error of those the rules fail, the body to forward without them)."""
        try:
            items = _parse_bulk(body)
        except (ValueError, StopIteration, IndexError, AttributeError):
            return [], {}, body  # not a bulk body the proxy understands: forwarded untouched, the server answers
        failed: dict[int, dict[str, Any]] = {}
        for position, (item, _) in enumerate(items):
            rule = self.server.proxy._failing_rule(item_rules, item) if item_rules else None
            if rule is not None:
                failed[position] = _item_error(item, rule.status, rule.error_type, rule.reason)
        if failed:
            body = b"".join(line for position, (_, lines) in enumerate(items) if position not in failed for line in lines)
        return items, failed, body

    def _read_body(self) -> bytes | None:
        """The request body (Content-Length or chunked), or None after refusing one over the bound."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks, size = [], 0
            while True:
                length = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if length == 0:
                    self.rfile.readline()
                    break
                size += length
                if size > MAX_BODY_BYTES:
                    self._send_json(413, _error_body(413))
                    self.close_connection = True
                    return None
                chunks.append(self.rfile.read(length))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._send_json(413, _error_body(413))
            self.close_connection = True
            return None
        return self.rfile.read(length) if length else b""

    def _forward(self, method: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        """The upstream's answer to the request with `body`: signed anew if it is not what the
        client sent (items failed out of it, an ingest pipeline's changes) and `resign` is set."""
        proxy = self.server.proxy
        headers = dict(self.headers.items())
        if proxy.resign is not None and body != self.received:
            headers = proxy.resign(method, self.path, headers, body)
        return exchange(proxy.upstream_host, proxy.upstream_port, method, self.path, headers, body)

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        try:
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client is gone (a test killed it): nobody to answer

    def _send_json(self, status: int, answer: Any, headers: list[tuple[str, str]] | None = None) -> None:
        kept = [(k, v) for k, v in headers or [] if k.lower() != "content-type"]
        self._send(status, [*kept, ("Content-Type", "application/json; charset=UTF-8")], json.dumps(answer).encode())

    def _drop(self) -> None:
        """Close the client's connection without an answer, as a crashed node or a cut network does."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


def loopback(upstream: str) -> tuple[str, int]:
    """(host, port) of an http:// URL on this machine; ValueError for any other."""
    parts = urlsplit(upstream)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
    # Tests must never send traffic off the machine, whatever URL they were handed.
    if not ipaddress.ip_address(socket.gethostbyname(parts.hostname)).is_loopback:
        raise ValueError(f"upstream {upstream!r} is not a loopback address")
    return parts.hostname, parts.port or 80


def exchange(
    host: str, port: int, method: str, target: str, headers: dict[str, str], body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request to a loopback upstream: (status, the answer's end-to-end headers, its body);
    a 502 answer when the upstream cannot be reached."""
    # identity encoding upstream: the proxy must be able to read and rewrite bulk answers
    sent = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP and k.lower() != "accept-encoding"}
    connection = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT)
    try:
        # an empty body goes as the client sent it: with `Content-Length: 0` if it said so (a SigV4
        # signature covers that header: requests sends it on a DELETE without a body)
        said_length = any(k.lower() == "content-length" for k in headers)
        empty = b"" if said_length or method not in ("GET", "HEAD", "DELETE") else None
        connection.request(method, target, body=body or empty, headers=sent)
        response = connection.getresponse()
        raw = response.read()
        kept = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
        if method == "HEAD":
            # a HEAD answer carries the length the GET body would have; keep it, send no body
            kept += [(k, v) for k, v in response.getheaders() if k.lower() == "content-length"]
        return response.status, kept, raw
    except (OSError, http.client.HTTPException):
        # the upstream is down (osmem closed at teardown): answer as a gateway does
        return 502, [("Content-Type", "application/json; charset=UTF-8")], json.dumps(_error_body(502)).encode()
    finally:
        connection.close()


def _parse_bulk(body: bytes, sources: bool = True) -> list[tuple[BulkItem, list[bytes]]]:
    """The actions of a bulk body, each with its original lines (forwarded byte for byte);
    without `sources` the items hold no parsed document (a reader of actions only)."""
    lines = [line + b"\n" for line in body.split(b"\n") if line.strip()]
    items: list[tuple[BulkItem, list[bytes]]] = []
    position = 0
    while position < len(lines):
        op, meta = next(iter(json.loads(lines[position]).items()))
        if op == "delete":
            own, source = lines[position : position + 1], None
        else:
            own = lines[position : position + 2]
            source = json.loads(own[1]) if sources else None
        position += len(own)
        version = meta.get("version")
        items.append(
            (
                BulkItem(
                    op,
                    meta.get("_index"),
                    meta.get("_id"),
                    int(version) if version is not None else None,
                    source,
                    meta.get("routing"),
                ),
                own,
            )
        )
    return items


def _counts(
    items: list[tuple[BulkItem, list[bytes]]], failed: dict[int, Any]
) -> tuple[int, int, tuple[str | None, ...], tuple[str | None, ...]]:
    """What a log entry keeps of a bulk request: item counts and ids."""
    ids = tuple(item.id for item, _ in items)
    return len(items), len(failed), ids, tuple(ids[position] for position in sorted(failed))


def _item_error(item: BulkItem, status: int, error_type: str, reason: str) -> dict[str, Any]:
    """A failed bulk item as OpenSearch reports it."""
    return {item.op: {"_index": item.index, "_id": item.id, "status": status, "error": {"type": error_type, "reason": reason}}}


def _splice(answer: dict[str, Any], failed: dict[int, dict[str, Any]], total: int) -> dict[str, Any]:
    """The upstream bulk answer for the forwarded items, with the failed ones put back at their positions."""
    forwarded = iter(answer.get("items", []))
    items = [failed[position] if position in failed else next(forwarded) for position in range(total)]
    return {**answer, "errors": True, "items": items}


def _error_body(status: int) -> dict[str, Any]:
    error_type = ERROR_TYPES.get(status, "injected_fault")
    reason = f"injected {status} by the test proxy"
    return {
        "error": {"root_cause": [{"type": error_type, "reason": reason}], "type": error_type, "reason": reason},
        "status": status,
    }


@pytest.fixture(name="fault_proxy")
def fault_proxy_fixture(request: pytest.FixtureRequest) -> Iterator[FaultProxy]:
    """A FaultProxy in front of this test's destination; point the code under test at `.url`.

    That is the Serverless stand-in when the test's `pipeline` writes to one (the proxy signs anew
    a bulk body it rewrote), else the test's osmem clone."""
    serverless = "pipeline" in request.fixturenames and request.getfixturevalue("destination") == "serverless"
    if not serverless:
        with FaultProxy(request.getfixturevalue("osmem_clone").url) as proxy:
            yield proxy
        return
    standin = request.getfixturevalue("serverless")
    with FaultProxy(standin.url) as proxy:
        proxy.resign = standin.signed
        yield proxy

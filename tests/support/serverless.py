"""An OpenSearch Serverless stand-in for tests: a SEARCH collection's data plane in front of osmem.

Serverless cannot run here. `ServerlessStandIn` is an HTTP server on 127.0.0.1 that answers as a
collection's endpoint does, with exactly its documented surface, and forwards what it accepts to
osmem (the `serverless` fixture gives one over fresh osmem clones):

    client = serverless.client()           # opensearch-py, AWSV4SignerAuth(..., "aoss")
    serverless.search_delay = 1.5          # seconds before a write is seen by _search and _count
    serverless.counts()                    # requests by operation, refusals included

Sources, AWS's pages as of this writing:

- [signing] "Signing requests for Serverless" (Ingesting data into Amazon OpenSearch Serverless
  collections): every request is signed with SigV4 for the service `aoss`, and carries
  `x-amz-content-sha256`, the SHA-256 of its body. The stand-in verifies the signature with
  botocore against the secret of the access key it names (`keys`, access key → secret: its own,
  and each role's a test adds with `accept`) and answers 403 otherwise, with
  the message AWS's SigV4 front end gives (`{"message": ...}`): no signature, another key, another
  service or region, a missing or wrong body hash, a date over 15 minutes off, a bad signature.
  Then `guard` (an IAM hook, as `FaultProxy.guard`: `aoss:APIAccessAll`), and for a documented
  operation `access` (the data access policy: the route's permission on the index or collection
  it names; `tests.support.iam.DataAccess`), may refuse with the
  collection's own 403 body (`{"status": 403, "request-id": ..., "error": {"reason": "403
  Forbidden", "type": "Forbidden"}}`, as Serverless answers a request its policies deny).
- [operations] "Supported operations and plugins in Amazon OpenSearch Serverless": its table of
  data access permissions and the operations each covers is `ROUTES`, one row per operation,
  with the permission (`Seen.permission`); the rows for aliases and index templates name them
  only, their paths are OpenSearch's own. Read operations take GET or POST alike (clients send
  a search body with POST). Everything else is refused: 404, as Serverless answers an operation
  it lacks (`GET /`, the scroll API, `_refresh`: the threads below), with an OpenSearch error body
  whose type is `unsupported_operation_exception` and whose reason names the operation and
  "not supported in OpenSearch Serverless". That covers `GET /`, `_search/scroll` and a search
  with `scroll`, point in time (`_search/point_in_time`), `_delete_by_query`,
  `_reindex`, `_refresh`, `_flush`, `_forcemerge`, `_cluster/*`, `_nodes/*`, every `_cat/*` but
  `_cat/indices`, `GET /_settings` (only an index's settings are listed), legacy `_template`,
  `PUT /_bulk`, `POST <index>/_doc/<id>` and `HEAD <index>/_doc/<id>`.
- Parameters the page does not list for those operations are refused with 400
  `illegal_argument_exception`, "<names>: not supported in OpenSearch Serverless": `version`,
  `version_type`, `if_seq_no` and
  `if_primary_term` (external versions and optimistic concurrency), a `pit` in a search body, and
  the index settings `number_of_shards`, `number_of_replicas` and `refresh_interval` (Serverless
  sizes and refreshes indexes itself) in an index's creation, a template or `_settings`. The
  `refresh` parameter gets Serverless's own answer: 400 `status_exception`, "<value> refresh
  policy is not supported." (opensearch-project/opensearch-ruby#131).
- In a `_bulk`, an action carrying `version`, `version_type`, `if_seq_no` or `if_primary_term`
  fails alone: a 400 `illegal_argument_exception` item, the others applied, `errors: true`.
  Serverless refuses what a collection type forbids in an action that way (a TIMESERIES
  collection's custom `_id`: "Document ID is not supported in create/index operation request",
  langchain-ai/langchainjs#4346, an item error in a 200 answer).
- Search visibility: Serverless refreshes by itself, about every 10 seconds, and a write is not
  seen by a search until then. The stand-in keeps two osmem clones: `upstream` takes every
  request at once (GET by id and `_mget` are real time, as OpenSearch's are), and `searcher`
  answers `_search`, `_count` and `_msearch`. Each write the upstream applied is replayed on the
  searcher once `search_delay` has passed since it, in order, just before the searcher answers;
  index creation, deletion, mappings, settings, aliases and templates reach both at once. So a
  new document is not found, an updated one is found as it was, and a deleted one still counts,
  until the delay passes: what a refresh interval does. With no delay (the default) searches go
  to the upstream itself.

Threads on what Serverless answers for what it lacks: opensearch-project/opensearch-ruby#131
(`GET /` 404, `refresh=true` 400), fluent/fluent-plugin-opensearch#126 (`GET /` 404),
ankane/searchkick#1714 (`_refresh` 404), opensearch-project/opensearch-api-specification#640 (the
scroll API 404).

Bounded and loopback only, as `FaultProxy`: it reuses that proxy's server and request handling.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import re
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support import faults
from tests.support.iam import REGION, Refusal, Request

SERVICE = "aoss"
ACCESS_KEY = "AKIASERVERLESSSTANDIN"
SECRET_KEY = "serverless-stand-in-secret"
# the writers' environment: what the driver, Spark's workers and a CLI subprocess sign with
CREDENTIALS = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
MAX_SKEW = 15 * 60  # seconds between a request's x-amz-date and the clock that SigV4 accepts
LOG_ENTRIES = 10_000
UNSUPPORTED_SETTINGS = ("number_of_shards", "number_of_replicas", "refresh_interval")
VERSION_PARAMETERS = ("version", "version_type", "if_seq_no", "if_primary_term")
JSON = [("Content-Type", "application/json; charset=UTF-8")]

Answer = tuple[int, list[tuple[str, str]], bytes]  # status, headers, body

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<headers>[^,]+), ?"
    r"Signature=(?P<signature>\w+)"
)
_BAD_SIGNATURE = (
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details."
)


@dataclass(frozen=True)
class Route:
    """One operation of the documented table: its name, data access permission, methods, path."""

    operation: str
    permission: str
    methods: frozenset[str]
    pattern: tuple[str, ...]  # literal segments, `{index}` (not starting with `_`), `{name}`

    def matches(self, method: str, segments: list[str]) -> bool:
        if method not in self.methods or len(segments) != len(self.pattern):
            return False
        return all(_segment_matches(p, s) for p, s in zip(self.pattern, segments, strict=True))


def _segment_matches(pattern: str, segment: str) -> bool:
    if pattern == "{index}":
        return bool(segment) and not segment.startswith("_")
    if pattern == "{name}":
        return bool(segment)
    return pattern == segment


def _routes(operation: str, permission: str, methods: str, *paths: str) -> list[Route]:
    allowed = frozenset(methods.split())
    return [Route(operation, f"aoss:{permission}", allowed, tuple(p.split("/"))) for p in paths]


READ = "GET POST"
# [operations]: the supported operations, by data access permission, in the page's order
ROUTES = (
    *_routes("create index", "CreateIndex", "PUT", "{index}"),
    *_routes("describe index", "DescribeIndex", "GET HEAD", "{index}"),
    *_routes("get mapping", "DescribeIndex", "GET", "{index}/_mapping", "{index}/_mappings"),
    *_routes("get mapping", "DescribeIndex", "GET", "_mapping", "_mappings"),
    *_routes("get settings", "DescribeIndex", "GET", "{index}/_setting", "{index}/_settings"),
    *_routes("get settings", "DescribeIndex", "GET", "{index}/_setting/{name}"),
    *_routes("get settings", "DescribeIndex", "GET", "{index}/_settings/{name}"),
    *_routes("cat indices", "DescribeIndex", "GET", "_cat/indices", "_cat/indices/{index}"),
    *_routes("resolve index", "DescribeIndex", "GET", "_resolve/index/{name}"),
    *_routes("write document", "WriteDocument", "DELETE", "{index}/_doc/{name}"),
    *_routes("bulk", "WriteDocument", "POST", "{index}/_bulk", "_bulk"),
    *_routes("write document", "WriteDocument", "POST PUT", "{index}/_create/{name}"),
    *_routes("write document", "WriteDocument", "POST", "{index}/_doc", "{index}/_update/{name}"),
    *_routes("write document", "WriteDocument", "PUT", "{index}/_doc/{name}"),
    *_routes("analyze", "ReadDocument", READ, "{index}/_analyze"),
    *_routes("get document", "ReadDocument", "GET", "{index}/_doc/{name}"),
    *_routes("get document", "ReadDocument", "GET", "{index}/_source/{name}"),
    *_routes("explain", "ReadDocument", READ, "{index}/_explain/{name}"),
    *_routes("mget", "ReadDocument", READ, "{index}/_mget"),
    *_routes("count", "ReadDocument", READ, "{index}/_count"),
    *_routes("field caps", "ReadDocument", READ, "{index}/_field_caps"),
    *_routes("msearch", "ReadDocument", READ, "{index}/_msearch"),
    *_routes("search", "ReadDocument", READ, "{index}/_search"),
    *_routes("delete index", "DeleteIndex", "DELETE", "{index}"),
    *_routes("put mapping", "UpdateIndex", "PUT", "{index}/_mapping"),
    *_routes("put settings", "UpdateIndex", "PUT", "{index}/_settings"),
    *_routes("update aliases", "CreateCollectionItems", "POST", "_aliases"),
    *_routes("get aliases", "DescribeCollectionItems", "GET", "_aliases", "_alias"),
    *_routes("get aliases", "DescribeCollectionItems", "GET", "_alias/{name}", "{index}/_alias"),
    *_routes("get aliases", "DescribeCollectionItems", "GET", "{index}/_alias/{name}"),
    *_routes("get index template", "DescribeCollectionItems", "GET", "_index_template"),
    *_routes("get index template", "DescribeCollectionItems", "GET", "_index_template/{name}"),
    *_routes("put alias", "UpdateCollectionItems", "PUT", "{index}/_alias/{name}"),
    *_routes("put index template", "UpdateCollectionItems", "PUT POST", "_index_template/{name}"),
    *_routes("delete alias", "DeleteCollectionItems", "DELETE", "{index}/_alias/{name}"),
    *_routes("delete index template", "DeleteCollectionItems", "DELETE", "_index_template/{name}"),
)
SEARCHED = ("search", "count", "msearch")  # answered by the searcher, after the writes due there
READS_ONLY = ("GET", "HEAD")


def route_of(method: str, path: str) -> Route | None:
    """The documented operation a request is, or None: Serverless lacks it."""
    segments = [unquote(part) for part in path.strip("/").split("/")] if path.strip("/") else []
    return next((r for r in ROUTES if r.matches(method, segments)), None)


# -- signatures ---------------------------------------------------------------------------


def signature_refusal(
    request: Request,
    target: str,
    credentials: Credentials | dict[str, str],
    region: str,
    now: float,
) -> str | None:
    """Why SigV4 refuses this request (AWS's message), or None when it is signed as `aoss` with
    `credentials` (or a key of the dict access key → secret), its body hash in
    `x-amz-content-sha256`, within 15 minutes of `now`."""
    found = _AUTHORIZATION.fullmatch(request.headers.get("authorization", "").strip())
    if found is None:
        return "Missing Authentication Token"
    if isinstance(credentials, dict):  # the named key's secret; an unknown key: another's
        secret = credentials.get(found["key"], "")
        credentials = Credentials(found["key"] if secret else "", secret)
    scope = _scope_refusal(found, credentials, region)
    if scope is not None:
        return scope
    claimed = request.headers.get("x-amz-content-sha256")
    if claimed is None:
        return "Missing required header for this request: x-amz-content-sha256"
    if claimed != hashlib.sha256(request.body).hexdigest():
        return "The provided 'x-amz-content-sha256' header does not match what was computed."
    stamp = request.headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return "Authorization header requires existence of a 'X-Amz-Date' header."
    if abs(now - signed_at) > MAX_SKEW:
        return f"Signature expired: {stamp} is now earlier or later than 15 minutes from now."
    token = request.headers.get("x-amz-security-token")
    if credentials.token is not None and token != credentials.token:
        return "The security token included in the request is invalid."
    expected = _signature(request, target, found["headers"].split(";"), credentials, region, stamp)
    if not hmac.compare_digest(expected, found["signature"]):
        return _BAD_SIGNATURE
    return None


def _scope_refusal(found: re.Match[str], credentials: Credentials, region: str) -> str | None:
    """Why the signature's credential scope is refused: another key, service or region."""
    if found["key"] != credentials.access_key:
        return "The security token included in the request is invalid."
    if found["service"] != SERVICE:
        return f"Credential should be scoped to correct service: '{SERVICE}'. "
    if found["region"] != region:
        return f"Credential should be scoped to a valid region, not '{found['region']}'. "
    return None


def _signature(
    request: Request,
    target: str,
    signed: list[str],
    credentials: Credentials,
    region: str,
    stamp: str,
) -> str:
    """The signature botocore computes for the request as received, over its signed headers."""
    parts = urlsplit(target)
    headers = {name: request.headers.get(name, "") for name in signed}
    query = parse_qsl(parts.query, keep_blank_values=True)
    host = request.headers.get("host", "")
    url = f"http://{host}{parts.path}"
    aws = AWSRequest(request.method, url, headers=headers, data=request.body, params=query)
    aws.context["timestamp"] = stamp
    auth = SigV4Auth(credentials, SERVICE, region)
    return str(auth.signature(auth.string_to_sign(aws, auth.canonical_request(aws)), aws))


# -- refusals -----------------------------------------------------------------------------


def error_body(status: int, error_type: str, reason: str) -> dict[str, Any]:
    """An error answer as OpenSearch writes one."""
    cause = {"type": error_type, "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


def unsupported(method: str, path: str) -> dict[str, Any]:
    reason = f"{method} {path} is not supported in OpenSearch Serverless"
    return error_body(404, "unsupported_operation_exception", reason)


def refused_parameters(
    route: Route,
    query: dict[str, list[str]],
    body: bytes,
) -> dict[str, Any] | None:
    """The 400 answer for a documented operation called with what Serverless lacks, or None."""
    if "refresh" in query:
        reason = f"{query['refresh'][0] or 'true'} refresh policy is not supported."
        return error_body(400, "status_exception", reason)
    lacking = [p for p in VERSION_PARAMETERS if p in query]
    if route.operation == "search" and _json(body).get("pit") is not None:
        lacking.append("pit (point in time)")
    lacking += [f"index.{s}" for s in refused_settings(route, _json(body))]
    if not lacking:
        return None
    reason = f"{', '.join(lacking)}: not supported in OpenSearch Serverless"
    return error_body(400, "illegal_argument_exception", reason)


def refused_settings(route: Route, body: dict[str, Any]) -> list[str]:
    """The settings Serverless manages itself that an index creation, a template or a settings
    update sets."""
    if route.operation == "create index":
        settings = body.get("settings", {})
    elif route.operation == "put index template":
        settings = body.get("template", {}).get("settings", {})
    elif route.operation == "put settings":
        settings = body.get("settings", body)
    else:
        return []
    names = {name.removeprefix("index.") for name in _flat(settings)}
    return [s for s in UNSUPPORTED_SETTINGS if s in names]


def _flat(settings: Any, prefix: str = "") -> Iterator[str]:
    """The dotted names of nested settings: {"index": {"refresh_interval": ..}} gives
    index.refresh_interval."""
    if not isinstance(settings, dict):
        yield prefix.rstrip(".")
        return
    for key, value in settings.items():
        yield from _flat(value, f"{prefix}{key}.")


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body) if body.strip() else {}
    except ValueError:
        return {}  # not JSON: the upstream answers it
    return value if isinstance(value, dict) else {}


# A TIMESERIES or VECTORSEARCH collection assigns every document's id itself
ASSIGNED_IDS = "Document ID is not supported in create/index operation request"


def refused_item(meta: dict[str, Any], op: str = "index", collection_type: str = "SEARCH") -> str | None:
    """Why Serverless fails one bulk action on its own (its metadata line), or None."""
    lacking = [p for p in VERSION_PARAMETERS if p in meta]
    if lacking:
        return f"{', '.join(lacking)}: not supported in OpenSearch Serverless"
    if collection_type != "SEARCH" and op in ("index", "create") and "_id" in meta:
        return ASSIGNED_IDS
    return None


# -- the stand-in -------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """One request the stand-in answered."""

    method: str
    path: str
    operation: str  # the route's ("<it> refused" for a 400); "unsupported", "unauthenticated" or
    # "forbidden" for a request refused before it is one
    permission: str  # the data access permission it needs; "" when none
    status: int


@dataclass
class _Write:
    """A write the upstream applied, as bulk lines to replay on the searcher."""

    at: float  # time.monotonic() of the upstream's answer
    index: str  # the concrete index it went to
    seq_no: int  # its place in that index's history on the upstream
    lines: list[bytes]


@dataclass
class _Searcher:
    """The searcher's lag behind the upstream: the writes not yet replayed there."""

    host: str
    port: int
    pending: deque[_Write] = field(default_factory=deque)
    failures: list[str] = field(default_factory=list)  # replays the searcher refused


class ServerlessStandIn:
    """A Serverless SEARCH collection's endpoint in front of two osmem clones (module docstring)."""

    def __init__(
        self,
        upstream: str,
        searcher: str,
        search_delay: float = 0.0,
        credentials: Credentials | None = None,
        region: str = REGION,
    ) -> None:
        self.upstream_host, self.upstream_port = faults.loopback(upstream)
        self._searcher = _Searcher(*faults.loopback(searcher))
        self.search_delay = search_delay
        # SEARCH; TIMESERIES or VECTORSEARCH refuse an index action's own `_id` (`ASSIGNED_IDS`)
        self.collection_type = "SEARCH"
        self.credentials = credentials or Credentials(ACCESS_KEY, SECRET_KEY)
        # the access keys whose signatures it verifies: its own, and each role's (`accept`)
        self.keys = {self.credentials.access_key: self.credentials.secret_key}
        self.region = region
        # IAM in front of the collection (tests/support/iam.py): a refusal answers Serverless's 403
        self.guard: Callable[[Request], Refusal | None] | None = None
        # the data access policy, for a documented operation: (request, its permission) → a refusal
        self.access: Callable[[Request, str], Refusal | None] | None = None
        self._lock = threading.Lock()
        self._replaying = threading.Lock()  # one replay at a time, in order
        self._counts: Counter[str] = Counter()
        self._log: deque[Seen] = deque(maxlen=LOG_ENTRIES)
        self._server: faults._Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        self._server = faults._Server(("127.0.0.1", 0), _Handler, self)
        serve = self._server.serve_forever
        self._thread = threading.Thread(target=serve, name="serverless", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join(timeout=10)
        self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the stand-in first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def upstream_url(self) -> str:
        """The osmem clone that takes every request at once: what really reached the server."""
        return f"http://{self.upstream_host}:{self.upstream_port}"

    def signed(self, method: str, target: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        """`headers` signed anew for `body` with the stand-in's own credentials, as a client signs
        a request (the fault proxy's `resign`, for a bulk body it failed items out of)."""
        signing = {"authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
        kept = {k: v for k, v in headers.items() if k.lower() not in signing | {"content-length"}}
        kept["Content-Length"] = str(len(body))
        kept["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
        host = next(v for k, v in headers.items() if k.lower() == "host")
        request = AWSRequest(method, f"http://{host}{target}", headers=kept, data=body)
        SigV4Auth(self.credentials, SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())

    def accept(self, access_key: str, secret_key: str) -> None:
        """Verify signatures of `access_key` too (a role's own, as Lambda and Glue give it)."""
        with self._lock:
            self.keys[access_key] = secret_key

    def client(self, credentials: Credentials | None = None, service: str = SERVICE) -> Any:
        """opensearch-py as icecdc talks to Serverless: SigV4 for `service` over requests."""
        from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection

        signer = AWSV4SignerAuth(credentials or self.credentials, self.region, service)
        return OpenSearch(
            hosts=[self.url],
            http_auth=signer,
            connection_class=RequestsHttpConnection,
            max_retries=0,
        )

    # -- what the tests read ------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Requests answered, by operation (`Route.operation`, "unsupported", "unauthenticated",
        "forbidden"); refused ones under their operation's name too, as "<operation> refused"."""
        with self._lock:
            return dict(self._counts)

    def refused(self) -> dict[str, int]:
        """What was refused: an operation Serverless lacks, or a parameter it does not take."""
        return {k: n for k, n in self.counts().items() if k == "unsupported" or k.endswith("refused")}

    def count(self, operation: str) -> int:
        with self._lock:
            return self._counts[operation]

    def seen(self) -> list[Seen]:
        """The last LOG_ENTRIES requests answered, oldest first."""
        with self._lock:
            return list(self._log)

    def replay_failures(self) -> list[str]:
        """Writes the searcher refused on replay: a test's bug or the stand-in's, never expected."""
        with self._lock:
            return list(self._searcher.failures)

    # -- used by the handler ------------------------------------------------------------------

    def _answered(self, seen: Seen) -> None:
        with self._lock:
            self._counts[seen.operation] += 1
            self._log.append(seen)

    def _wrote(self, writes: list[_Write]) -> None:
        with self._lock:
            self._searcher.pending.extend(writes)

    def _search_target(self) -> tuple[str, int]:
        """Where a search goes: the searcher, or with no delay the upstream itself (exact)."""
        if self.search_delay <= 0:
            return self.upstream_host, self.upstream_port
        return self._searcher.host, self._searcher.port

    def _catch_up(self) -> None:
        """Replay on the searcher every write `search_delay` old or older, in the order the
        upstream applied them (concurrent requests may record theirs in another)."""
        with self._replaying:
            due: list[_Write] = []
            with self._lock:
                pending, horizon = self._searcher.pending, time.monotonic() - self.search_delay
                while pending and pending[0].at <= horizon:
                    due.append(pending.popleft())
            if not due:
                return
            due.sort(key=lambda write: (write.index, write.seq_no))
            body = b"".join(line for write in due for line in write.lines)
            status, _, raw = self._to_searcher("POST", "/_bulk", body)
            if status != 200 or _json(raw).get("errors"):
                with self._lock:
                    self._searcher.failures.append(f"{status}: {raw[:2000]!r}")

    def _forget_deleted(self) -> None:
        """Drop the pending writes of indexes the upstream no longer has: deleted before the
        searcher saw them."""
        with self._lock:
            indexes = {write.index for write in self._searcher.pending}
        gone = {i for i in indexes if self._to_upstream("HEAD", f"/{i}")[0] == 404}
        with self._lock:
            kept = [w for w in self._searcher.pending if w.index not in gone]
            self._searcher.pending = deque(kept)

    def _to_upstream(self, method: str, target: str, body: bytes = b"") -> Answer:
        return _own(self.upstream_host, self.upstream_port, method, target, body)

    def _to_searcher(self, method: str, target: str, body: bytes = b"") -> Answer:
        return _own(self._searcher.host, self._searcher.port, method, target, body)


def _own(host: str, port: int, method: str, target: str, body: bytes) -> Answer:
    """A request of the stand-in's own to an osmem clone: a replay, a mirrored change, a check."""
    headers = {"Content-Type": "application/json"}
    return faults.exchange(host, port, method, target, headers, body)


class _Handler(faults._Handler):
    server: Any  # faults._Server whose `proxy` is the ServerlessStandIn

    def _handle(self) -> None:
        standin: ServerlessStandIn = self.server.proxy
        method, path = self.command, urlsplit(self.path).path
        body = self._read_body()
        if body is None:
            return
        request = Request.of(method, self.path, dict(self.headers.items()), body)
        now = time.time()
        with standin._lock:
            keys = dict(standin.keys)
        why = signature_refusal(request, self.path, keys, standin.region, now)
        if why is not None:
            self._answer(Seen(method, path, "unauthenticated", "", 403), {"message": why})
            return
        if standin.guard is not None and standin.guard(request) is not None:
            self._answer(Seen(method, path, "forbidden", "aoss:APIAccessAll", 403), _forbidden())
            return
        route = route_of(method, path)
        if route is None or (route.operation == "search" and "scroll" in request.query):
            self._answer(Seen(method, path, "unsupported", "", 404), unsupported(method, path))
            return
        if standin.access is not None and standin.access(request, route.permission) is not None:
            self._answer(Seen(method, path, "forbidden", route.permission, 403), _forbidden())
            return
        refused = refused_parameters(route, dict(request.query), body)
        if refused is not None:
            operation, status = f"{route.operation} refused", refused["status"]
            self._answer(Seen(method, path, operation, route.permission, status), refused)
            return
        status, headers, raw = self._pass(standin, route, request, body)
        standin._answered(Seen(method, path, route.operation, route.permission, status))
        self._send(status, headers or JSON, raw)  # logged first, as FaultProxy does

    def _pass(
        self,
        standin: ServerlessStandIn,
        route: Route,
        request: Request,
        body: bytes,
    ) -> Answer:
        """A documented request's answer: from the searcher if it searches, else the upstream's."""
        if route.operation in SEARCHED:
            standin._catch_up()
            host, port = standin._search_target()
            headers = dict(self.headers.items())
            return faults.exchange(host, port, request.method, self.path, headers, body)
        items, failed = [], {}
        if route.operation == "bulk":
            items, failed, body = _refuse_items(body, standin.collection_type)
        # the whole answer, whatever `filter_path` asks: a write's replay needs its ids and indexes
        target, paths = _without_filter_path(self.path)
        if items and len(failed) == len(items):
            status, headers, raw = 200, JSON, b'{"took": 0, "errors": false, "items": []}'
        else:
            host, port = standin.upstream_host, standin.upstream_port
            sent = dict(self.headers.items())
            status, headers, raw = faults.exchange(host, port, request.method, target, sent, body)
        if status < 300:
            self._follow(standin, route, request, body, raw)  # the answer to what was forwarded
        if failed and status == 200:
            raw = json.dumps(faults._splice(json.loads(raw), failed, len(items))).encode()
        if paths and raw.strip():
            raw = json.dumps(filtered(json.loads(raw), paths) or {}).encode()
        return status, headers, raw

    def _follow(
        self,
        standin: ServerlessStandIn,
        route: Route,
        request: Request,
        body: bytes,
        raw: bytes,
    ) -> None:
        """What the searcher does after the upstream applied a request: replay a write later,
        take any other change (indexes, mappings, aliases, templates) now."""
        if route.operation == "bulk":
            standin._wrote(_bulk_replay(body, _json(raw)))
        elif route.operation == "write document":
            standin._wrote(_document_replay(request, body, _json(raw)))
        elif request.method not in READS_ONLY:
            standin._to_searcher(request.method, self.path, body)
            if route.operation == "delete index":
                standin._forget_deleted()

    def _answer(self, seen: Seen, answer: dict[str, Any]) -> None:
        self.server.proxy._answered(seen)
        self._send_json(seen.status, answer)


def _without_filter_path(target: str) -> tuple[str, list[tuple[str, ...]]]:
    """The target without its `filter_path` parameter, and that parameter's dotted paths."""
    parts = urlsplit(target)
    query = parse_qsl(parts.query, keep_blank_values=True)
    paths = [tuple(p.split(".")) for k, v in query if k == "filter_path" for p in v.split(",") if p]
    kept = urlencode([(k, v) for k, v in query if k != "filter_path"])
    return parts.path + (f"?{kept}" if kept else ""), paths


def filtered(value: Any, paths: list[tuple[str, ...]]) -> Any:
    """OpenSearch's `filter_path`: the parts of an answer one of the dotted paths (`*` a wildcard
    segment) reaches, arrays crossed element by element; None when nothing is left."""
    return _filtered(value, tuple(paths), {})


def _filtered(value: Any, paths: tuple[tuple[str, ...], ...], rests: dict[Any, Any]) -> Any:
    """`filtered`, with the paths left under each key matched once per answer (`rests`): a bulk
    answer's items all ask the same."""
    if isinstance(value, list):
        kept = [k for k in (_filtered(v, paths, rests) for v in value) if k is not None]
        return kept or None
    if not isinstance(value, dict):
        return None
    out: dict[str, Any] = {}
    for key, item in value.items():
        rest = rests.get((paths, key))
        if rest is None:
            rest = rests[paths, key] = tuple(path[1:] for path in paths if fnmatch.fnmatchcase(key, path[0]))
        if () in rest:
            out[key] = item
        elif rest and (kept := _filtered(item, rest, rests)) is not None:
            out[key] = kept
    return out or None


def _forbidden() -> dict[str, Any]:
    """Serverless's answer to a request its policies deny."""
    error = {"reason": "403 Forbidden", "type": "Forbidden"}
    return {"status": 403, "request-id": str(uuid.uuid4()), "error": error}


def _refuse_items(
    body: bytes, collection_type: str = "SEARCH"
) -> tuple[list[tuple[faults.BulkItem, list[bytes]]], dict[int, dict[str, Any]], bytes]:
    """(the bulk's items, position → the item error of those Serverless fails, the body left)."""
    try:
        items = faults._parse_bulk(body, sources=False)
    except (ValueError, StopIteration, IndexError, AttributeError):
        return [], {}, body  # not a bulk body: forwarded untouched, the upstream answers it
    failed: dict[int, dict[str, Any]] = {}
    for position, (item, lines) in enumerate(items):
        reason = refused_item(json.loads(lines[0])[item.op], item.op, collection_type)
        if reason is not None:
            failed[position] = faults._item_error(item, 400, "illegal_argument_exception", reason)
    if failed:
        kept = (lines for p, (_, lines) in enumerate(items) if p not in failed)
        body = b"".join(line for lines in kept for line in lines)
    return items, failed, body


def _bulk_replay(body: bytes, answer: dict[str, Any]) -> list[_Write]:
    """The applied actions of a forwarded bulk, each as (concrete index, bulk lines naming it and
    the id the upstream gave)."""
    items = faults._parse_bulk(body, sources=False)
    results = [next(iter(r.values())) for r in answer.get("items", [])]
    now, writes = time.monotonic(), []
    for (item, lines), result in zip(items, results, strict=False):
        if result.get("status", 500) >= 300:
            continue
        meta = {**json.loads(lines[0])[item.op], "_index": result["_index"], "_id": result["_id"]}
        action = json.dumps({item.op: meta}).encode() + b"\n"
        seq_no = result.get("_seq_no", 0)
        writes.append(_Write(now, result["_index"], seq_no, [action, *lines[1:]]))
    return writes


def _document_replay(request: Request, body: bytes, answer: dict[str, Any]) -> list[_Write]:
    """A single-document write the upstream applied, as one bulk action."""
    segments = request.path.strip("/").split("/")
    op = {"_doc": "index", "_create": "create", "_update": "update"}[segments[1]]
    if request.method == "DELETE":
        op = "delete"
    meta = json.dumps({op: {"_index": answer["_index"], "_id": answer["_id"]}}).encode() + b"\n"
    source = [] if op == "delete" else [json.dumps(json.loads(body)).encode() + b"\n"]
    seq_no = answer.get("_seq_no", 0)
    return [_Write(time.monotonic(), answer["_index"], seq_no, [meta, *source])]


@pytest.fixture(name="serverless")
def serverless_fixture(osmem_server: Any) -> Iterator[ServerlessStandIn]:
    """A ServerlessStandIn over two fresh osmem clones, no search delay until a test sets one."""
    upstream, searcher = osmem_server.clone(), osmem_server.clone()
    try:
        with ServerlessStandIn(upstream.url, searcher.url) as standin:
            yield standin
    finally:
        upstream.close()
        searcher.close()

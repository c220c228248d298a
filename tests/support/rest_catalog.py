"""An Iceberg REST catalog stand-in over real HTTP, backed by a pyiceberg SQL catalog the test owns.

It serves exactly the routes of the Iceberg REST spec that pyiceberg 0.12's `RestCatalog` calls for
namespaces and tables, and refuses the rest with the spec's ErrorModel:

    GET  /v1/config?warehouse=W           -> {"defaults": {}, "overrides": {"prefix": P}, "endpoints"}
    POST /v1/oauth/tokens                 (OAuth2 mode only: client credentials -> a bearer token)
    GET|POST          /v1/P/namespaces                      list, create
    GET|HEAD|DELETE   /v1/P/namespaces/{ns}                 load, exists, drop
    GET|POST          /v1/P/namespaces/{ns}/tables          list, create
    GET|HEAD|POST|DELETE /v1/P/namespaces/{ns}/tables/{t}   load, exists, commit, drop
    POST              /v1/P/tables/rename

The prefix P is the warehouse, URL-encoded (S3 Tables' is its table bucket's ARN). The bodies are
pyiceberg's own models (CreateTableRequest, CommitTableRequest, TableResponse, ...), so what the
client sends is parsed as the client means it. A route outside the surface answers 400, a missing
namespace or table 404, a conflict 409, and `/v1/config` for another warehouse 400.

Auth, chosen when the stand-in is made (`Auth`): SIGV4 requires an AWS SigV4 Authorization header
scoped to the signing name and region given (403 otherwise), then asks the `authorize` hook
(access key, method, raw path) -> None or a refusal message (403), where the IAM harness plugs in;
OAUTH2 issues bearer tokens for one client id and secret, each valid `expires_in` seconds, and
answers 401 without a valid one (pyiceberg then fetches a new token and retries), also once a
token has served `token_uses` requests; NONE checks
nothing. Every request is counted by its route (`counts()`), refused ones too.

    with RestCatalogServer(sql_catalog, warehouse="lake") as server:
        catalog = load_catalog("rest", type="rest", uri=server.url, warehouse="lake")
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, quote, unquote, urlsplit

from pydantic import BaseModel
from pyiceberg.catalog.rest import (
    CreateTableRequest,
    ListNamespaceResponse,
    ListTableResponseEntry,
    ListTablesResponse,
    NamespaceResponse,
    TableResponse,
)
from pyiceberg.catalog.rest.response import ErrorResponse, ErrorResponseMessage, TokenResponse
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table import CommitTableRequest, Table
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

# Refusals: (status, the spec's error type) of each exception the SQL catalog raises.
REFUSALS: dict[type[Exception], tuple[int, str]] = {
    NoSuchNamespaceError: (404, "NoSuchNamespaceException"),
    NoSuchTableError: (404, "NoSuchTableException"),
    NamespaceAlreadyExistsError: (409, "AlreadyExistsException"),
    TableAlreadyExistsError: (409, "AlreadyExistsException"),
    NamespaceNotEmptyError: (409, "NamespaceNotEmptyException"),
    CommitFailedException: (409, "CommitFailedException"),
    ValueError: (400, "BadRequestException"),  # pydantic's validation and json's decode errors
    KeyError: (400, "BadRequestException"),  # a body without a field the route needs
}
NAMESPACE_SEPARATOR = "\x1f"  # pyiceberg's default: the parts of a namespace in one path segment
NO_ROUTE = "(no route)"  # the counter's key for a request outside the surface
SIGV4_SCOPE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")

# The routes under /v1/{prefix}/, as pyiceberg's `Endpoints` spell them: (method, path) -> handler.
PREFIXED_ROUTES: dict[tuple[str, str], str] = {
    ("GET", "namespaces"): "list_namespaces",
    ("POST", "namespaces"): "create_namespace",
    ("GET", "namespaces/{namespace}"): "load_namespace",
    ("HEAD", "namespaces/{namespace}"): "namespace_exists",
    ("DELETE", "namespaces/{namespace}"): "drop_namespace",
    ("GET", "namespaces/{namespace}/tables"): "list_tables",
    ("POST", "namespaces/{namespace}/tables"): "create_table",
    ("GET", "namespaces/{namespace}/tables/{table}"): "load_table",
    ("HEAD", "namespaces/{namespace}/tables/{table}"): "table_exists",
    ("POST", "namespaces/{namespace}/tables/{table}"): "commit_table",
    ("DELETE", "namespaces/{namespace}/tables/{table}"): "drop_table",
    ("POST", "tables/rename"): "rename_table",
}
CONFIG_ROUTE = "GET /v1/config"
TOKEN_ROUTE = "POST /v1/oauth/tokens"

Authorize = Callable[[str, str, str], str | None]  # (access key, method, raw path) -> refusal or None


class Auth(StrEnum):
    """How the stand-in authenticates its callers."""

    NONE = "none"
    SIGV4 = "sigv4"
    OAUTH2 = "oauth2"


class Refused(Exception):
    """A request answered with an error: its status, the spec's error type and a message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


@dataclass(frozen=True)
class Call:
    """One request as a handler sees it: the route's captured segments, query, headers, body."""

    params: dict[str, str]
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-case
    body: bytes

    def namespace(self) -> tuple[str, ...]:
        return tuple(unquote(self.params["namespace"]).split(NAMESPACE_SEPARATOR))

    def table(self) -> tuple[str, ...]:
        return (*self.namespace(), unquote(self.params["table"]))

    def json(self) -> Any:
        return json.loads(self.body or b"{}")

    def flag(self, name: str) -> bool:
        return self.query.get(name, ["false"])[0].lower() == "true"


Answer = tuple[int, BaseModel | dict[str, Any] | None]


@dataclass
class RestCatalogServer:
    """The stand-in on 127.0.0.1 in a thread, answering from `catalog` (see the module's docstring)."""

    catalog: SqlCatalog
    warehouse: str = "lake"
    auth: Auth = Auth.NONE
    signing_name: str = "s3tables"  # SIGV4: the service the credential scope must name
    signing_region: str = "us-east-1"
    authorize: Authorize | None = None  # SIGV4: the IAM harness's verdict
    client_id: str = "icecdc"  # OAUTH2: the one client the token endpoint knows
    client_secret: str = "secret"
    expires_in: int = 3600  # OAUTH2: seconds a token is valid
    token_uses: int | None = None  # OAUTH2: requests a token is good for, then it expires (None: any)
    # credentials vended with every loaded table (the load's `config`), as Lake Formation's are
    vended: dict[str, str] = field(default_factory=dict)
    _tokens: dict[str, float] = field(default_factory=dict)  # token -> when it expires (monotonic)
    _uses: Counter[str] = field(default_factory=Counter)  # token -> requests it authenticated
    _counts: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def prefix(self) -> str:
        """The path prefix `/v1/config` hands out for the warehouse: the warehouse, URL-encoded."""
        return quote(self.warehouse, safe="")

    @property
    def url(self) -> str:
        assert self._server is not None, "the stand-in is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.stand_in = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, name="rest-catalog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join(timeout=10)
        self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def counts(self) -> Counter[str]:
        """Requests so far by route, e.g. `GET /v1/{prefix}/namespaces/{namespace}/tables/{table}`."""
        with self._lock:
            return Counter(self._counts)

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()

    def expire_tokens(self) -> None:
        """OAUTH2: every token issued so far expires now."""
        with self._lock:
            self._tokens = dict.fromkeys(self._tokens, 0.0)

    # -- one request --------------------------------------------------------------------------

    def answer(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        """The status and body for one request (headers' names lower-case)."""
        parts = urlsplit(target)
        route, handler, params = self._route(method, parts.path)
        with self._lock:
            self._counts[route] += 1
        call = Call(params, parse_qs(parts.query), headers, body)
        try:
            if route == NO_ROUTE:
                raise Refused(400, "BadRequestException", f"no route for {method} {parts.path}")
            if route == TOKEN_ROUTE:
                return self._token(call)
            self._authenticate(method, parts.path, headers)
            if route == CONFIG_ROUTE:
                return self._config(call)
            with self._lock:  # one catalog operation at a time, as a database transaction would
                return getattr(self, f"_{handler}")(call)  # type: ignore[no-any-return]
        except Refused as refused:
            return refused.status, _error(refused.status, refused.kind, refused.message)
        except tuple(REFUSALS) as exc:
            status, kind = next(REFUSALS[t] for t in REFUSALS if isinstance(exc, t))
            return status, _error(status, kind, str(exc).splitlines()[0] if str(exc) else kind)

    def _route(self, method: str, raw_path: str) -> tuple[str, str, dict[str, str]]:
        """The route a raw path (its segments still URL-encoded) takes, its handler and segments."""
        if raw_path == "/v1/config" and method == "GET":
            return CONFIG_ROUTE, "config", {}
        if raw_path == "/v1/oauth/tokens" and method == "POST" and self.auth is Auth.OAUTH2:
            return TOKEN_ROUTE, "token", {}
        segments = raw_path.split("/")
        if segments[:2] != ["", "v1"] or len(segments) < 4 or unquote(segments[2]) != self.warehouse:
            return NO_ROUTE, "", {}
        for (route_method, template), handler in PREFIXED_ROUTES.items():
            names = template.split("/")
            if route_method != method or len(names) != len(segments) - 3:
                continue
            pairs = list(zip(names, segments[3:], strict=True))
            if all(n.startswith("{") or n == s for n, s in pairs):
                params = {n[1:-1]: s for n, s in pairs if n.startswith("{")}
                return f"{method} /v1/{{prefix}}/{template}", handler, params
        return NO_ROUTE, "", {}

    def _authenticate(self, method: str, raw_path: str, headers: dict[str, str]) -> None:
        if self.auth is Auth.SIGV4:
            self._check_signature(method, raw_path, headers.get("authorization", ""))
        elif self.auth is Auth.OAUTH2:
            token = headers.get("authorization", "").removeprefix("Bearer ")
            with self._lock:
                expires = self._tokens.get(token)
                self._uses[token] += 1
                if self.token_uses is not None and self._uses[token] > self.token_uses:
                    expires = 0.0 if expires is not None else None
            if expires is None or expires <= time.monotonic():
                what = "an expired token" if expires is not None else "no token this server issued"
                raise Refused(401, "NotAuthorizedException", f"Not authorized: the request carries {what}")

    def _check_signature(self, method: str, raw_path: str, authorization: str) -> None:
        """A SigV4 signature scoped to this endpoint's service and region, and the hook's verdict."""
        scope = SIGV4_SCOPE.match(authorization)
        if scope is None:
            raise Refused(403, "ForbiddenException", "Missing Authentication Token: the request is not SigV4-signed")
        access_key, region, service = scope.groups()
        if service != self.signing_name:
            message = f"Credential should be scoped to correct service: '{self.signing_name}'."
            raise Refused(403, "ForbiddenException", message)
        if region != self.signing_region:
            raise Refused(403, "ForbiddenException", f"Credential should be scoped to a valid region: {region!r}.")
        refusal = self.authorize(access_key, method, raw_path) if self.authorize else None
        if refusal is not None:
            raise Refused(403, "ForbiddenException", refusal)

    def _token(self, call: Call) -> Answer:
        """OAuth2's client credentials grant; its errors in OAuth's own shape (RFC 6749 5.2)."""
        form = {k: v[0] for k, v in parse_qs(call.body.decode()).items()}
        basic = call.headers.get("authorization", "")
        if basic.startswith("Basic "):  # pyiceberg's OAuth2AuthManager sends the client this way
            form["client_id"], _, form["client_secret"] = base64.b64decode(basic[6:]).decode().partition(":")
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type", "error_description": "only client_credentials"}
        if (form.get("client_id"), form.get("client_secret")) != (self.client_id, self.client_secret):
            return 401, {"error": "invalid_client", "error_description": "unknown client id or secret"}
        token = secrets.token_urlsafe(16)
        with self._lock:
            self._tokens[token] = time.monotonic() + self.expires_in
        return 200, TokenResponse(access_token=token, token_type="bearer", expires_in=self.expires_in)

    def _config(self, call: Call) -> Answer:
        asked = call.query.get("warehouse", [None])[0]
        if asked != self.warehouse:
            raise Refused(400, "BadRequestException", f"no such warehouse: {asked!r}")
        endpoints = [f"{m} /v1/{{prefix}}/{path}" for m, path in PREFIXED_ROUTES]
        return 200, {"defaults": {}, "overrides": {"prefix": self.prefix}, "endpoints": endpoints}

    # -- the routes under the prefix, one handler each (PREFIXED_ROUTES) ---------------------

    def _list_namespaces(self, call: Call) -> Answer:
        parent = call.query.get("parent", [""])[0]  # its parts quoted, as in a path
        parent_parts = tuple(unquote(p) for p in parent.split(NAMESPACE_SEPARATOR)) if parent else ()
        return 200, ListNamespaceResponse(namespaces=self.catalog.list_namespaces(parent_parts))

    def _create_namespace(self, call: Call) -> Answer:
        request = NamespaceResponse.model_validate(call.json())
        self.catalog.create_namespace(request.namespace, request.properties)
        return 200, request

    def _load_namespace(self, call: Call) -> Answer:
        properties = self.catalog.load_namespace_properties(call.namespace())
        return 200, NamespaceResponse(namespace=call.namespace(), properties=properties)

    def _namespace_exists(self, call: Call) -> Answer:
        return (204 if self.catalog.namespace_exists(call.namespace()) else 404), None

    def _drop_namespace(self, call: Call) -> Answer:
        self.catalog.drop_namespace(call.namespace())
        return 204, None

    def _list_tables(self, call: Call) -> Answer:
        found = self.catalog.list_tables(call.namespace())
        entries = [ListTableResponseEntry(namespace=t[:-1], name=t[-1]) for t in found]
        return 200, ListTablesResponse(identifiers=entries)

    def _create_table(self, call: Call) -> Answer:
        # pyiceberg's model requires the keys its client leaves out when they are null (optional
        # in the spec): they are null here too
        optional = {"location": None, "partition-spec": None, "write-order": None}
        request = CreateTableRequest.model_validate({**optional, **call.json()})
        if request.stage_create:
            raise Refused(400, "BadRequestException", "stage-create is not served by this stand-in")
        table = self.catalog.create_table(
            (*call.namespace(), request.name),
            schema=request.table_schema,
            location=request.location,
            partition_spec=request.partition_spec or UNPARTITIONED_PARTITION_SPEC,
            sort_order=request.write_order or UNSORTED_SORT_ORDER,
            properties=request.properties,
        )
        return 200, _loaded(table)

    def _load_table(self, call: Call) -> Answer:
        table = self.catalog.load_table(call.table())
        return 200, _loaded(table, self.vended)

    def _table_exists(self, call: Call) -> Answer:
        return (204 if self.catalog.table_exists(call.table()) else 404), None

    def _commit_table(self, call: Call) -> Answer:
        request = CommitTableRequest.model_validate_json(call.body)
        table = self.catalog.load_table(call.table())
        return 200, self.catalog.commit_table(table, request.requirements, request.updates)

    def _drop_table(self, call: Call) -> Answer:
        if call.flag("purgeRequested"):
            self.catalog.purge_table(call.table())
        else:
            self.catalog.drop_table(call.table())
        return 204, None

    def _rename_table(self, call: Call) -> Answer:
        body = call.json()
        source, destination = body["source"], body["destination"]
        self.catalog.rename_table((*source["namespace"], source["name"]), (*destination["namespace"], destination["name"]))
        return 204, None


def _loaded(table: Table, vended: dict[str, str] | None = None) -> TableResponse:
    """The spec's LoadTableResult for a table of the SQL catalog: where its metadata is, and it
    (with `vended`: the properties its FileIO reads the files with)."""
    loaded = {"metadata-location": table.metadata_location, "metadata": table.metadata, "config": vended or {}}
    return TableResponse.model_validate(loaded)


def _error(status: int, kind: str, message: str) -> ErrorResponse:
    """The spec's ErrorModel: {"error": {"message", "type", "code"}}."""
    return ErrorResponse(error=ErrorResponseMessage(message=message, type=kind, code=status))


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, as pyiceberg's requests session expects; every method one way."""

    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection ends after this, so no thread outlives a test long

    def _serve(self) -> None:
        stand_in: RestCatalogServer = self.server.stand_in  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            status, answer = stand_in.answer(self.command, self.path, headers, body)
        # A fault of the stand-in itself: answered as a server's 500, so the client reports it.
        except Exception as exc:  # noqa: BLE001
            status, answer = 500, _error(500, "InternalServerError", f"{type(exc).__name__}: {exc}")
        if isinstance(answer, BaseModel):
            payload = answer.model_dump_json().encode()
        else:
            payload = json.dumps(answer).encode() if answer is not None else b""
        if self.command == "HEAD":
            payload = b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_HEAD = do_DELETE = do_PUT = do_PATCH = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet: the counter is the log."""

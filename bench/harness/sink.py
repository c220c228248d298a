"""The bench sink: an in-memory OpenSearch endpoint with OpenSearch's versioning semantics, never the
bottleneck (osmem replaces a document in time that grows with the index, so it would be).

An index is a dict `_id → (version, source)`. It answers what icecdc's sink, index lifecycle and
verification and the bench's peer call:

- `index` / `delete` with `version_type=external`: a version at or below the stored one (a live
  document's or a tombstone's) is answered 409 `version_conflict_engine_exception`;
  `external_gte`: a version below it. Without a version (internal, the peer's plain writes): the
  stored version + 1. A delete keeps a tombstone with its version (for the server's life); a
  delete of an absent document is 404 `not_found`, and leaves a tombstone too.
- Indexes are auto-created by a write; aliases, settings (flat or nested, `index.uuid`), mappings
  (kept, merged by `PUT _mapping`, never applied), `_aliases` actions (`add`, `remove`,
  `remove_index`), `_refresh`, `_count`, and match_all searches with scroll, slices and `version`.
- A bulk answer is cut to `filter_path` when the request gives one (icecdc asks for each item's
  status and error), as OpenSearch cuts it.

Sources are kept as the bytes sent, never parsed: no mapping is applied and no query but match_all
is answered. For throughput figures only; correctness is tested against osmem.

Acknowledging (`--acknowledge`): a bulk request of `index` actions is answered as if every item were
a new document (201), and only counted (an index's `_count` is the writes it acknowledged); nothing
is stored, and anything else in a bulk request is refused (400). Its CPU is about a third of the
storing sink's (1.1 s against 3.6 s for 10^6 of icecdc's documents), whose one lock (and one
interpreter) takes the bulk requests of parallel clients one at a time: where the clients and the
sink share the cores, the storing sink's queue is what idles them (`export_speed`'s in-process
runs, which measure how icecdc uses the cores it has).

    python -m bench.harness.sink [--port 0] [--acknowledge]   prints its URL, serves until killed or its parent exits
"""

from __future__ import annotations

import argparse
import collections
import gc
import itertools
import json
import operator
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

from bench.harness.processes import exit_with, stop

VERSION = "2.19.0"  # the OpenSearch version `GET /` claims (icecdc needs nothing version-specific)
SHARDS = {"total": 1, "successful": 1, "skipped": 0, "failed": 0}

Json = dict[str, Any]


class ApiError(Exception):
    """An answer OpenSearch gives as `{"error": {"type", "reason"}, "status"}`."""

    def __init__(self, status: int, error_type: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.error_type, self.reason = status, error_type, reason

    def body(self) -> Json:
        return {"error": {"type": self.error_type, "reason": self.reason}, "status": self.status}


def _missing(name: str) -> ApiError:
    return ApiError(404, "index_not_found_exception", f"no such index [{name}]")


@dataclass
class Index:
    name: str
    mappings: Json = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)  # flat: "index.number_of_shards" → "1"
    aliases: set[str] = field(default_factory=set)
    docs: dict[str, tuple[int, bytes | None]] = field(default_factory=dict)  # _id → (version, source; None: tombstone)
    live: int = 0

    def __post_init__(self) -> None:
        defaults = {
            "index.number_of_shards": "1",
            "index.number_of_replicas": "1",
            "index.uuid": uuid.uuid4().hex[:22],
            "index.provided_name": self.name,
            "index.creation_date": str(int(time.time() * 1000)),
            "index.version.created": "136408127",
        }
        self.settings = {**defaults, **self.settings}

    def live_documents(self) -> Iterator[tuple[str, int, bytes]]:
        for doc_id, (version, source) in self.docs.items():
            if source is not None:
                yield doc_id, version, source


@dataclass
class Scroll:
    index: dict[str, str]  # _id → concrete index name
    hits: list[tuple[str, str, int, bytes]]  # (index, _id, version, source)
    size: int
    version: bool
    source: bool
    position: int = 0


@dataclass
class Stats:
    bulk_requests: int = 0
    bulk_items: int = 0
    bulk_bytes: int = 0
    bulk_seconds: float = 0.0  # wall time spent inside bulk requests (parsing, applying, answering)


class Store:
    """Every index, alias and open scroll; one lock (bulk requests apply one at a time). An
    acknowledging store answers bulk requests without storing their documents (the module's doc)."""

    def __init__(self, acknowledge: bool = False) -> None:
        self.acknowledge = acknowledge
        self.lock = threading.Lock()
        self.indices: dict[str, Index] = {}
        self.scrolls: dict[str, Scroll] = {}
        self.stats = Stats()
        self._seq = itertools.count(1)

    # ----- names

    def alias_targets(self, alias: str) -> list[str]:
        return sorted(name for name, index in self.indices.items() if alias in index.aliases)

    def resolve(self, expression: str, ignore_unavailable: bool = False) -> list[str]:
        """The concrete indexes of a comma-separated list of names, aliases and wildcards."""
        found: list[str] = []
        for part in expression.split(","):
            if part in ("_all", "*"):
                found += sorted(self.indices)
            elif "*" in part:
                found += sorted(n for n in self.indices if fnmatchcase(n, part))
            elif part in self.indices:
                found.append(part)
            elif targets := self.alias_targets(part):
                found += targets
            elif not ignore_unavailable:
                raise _missing(part)
        return list(dict.fromkeys(found))

    def write_index(self, name: str) -> Index:
        """The index a write to `name` goes to: the index, an alias's only index, or a new index."""
        if name in self.indices:
            return self.indices[name]
        targets = self.alias_targets(name)
        if len(targets) > 1:
            raise ApiError(400, "illegal_argument_exception", f"no write index is defined for alias [{name}]")
        if targets:
            return self.indices[targets[0]]
        return self.create(name, {})  # auto-created, as OpenSearch's action.auto_create_index does

    def create(self, name: str, body: Json) -> Index:
        if name in self.indices:
            raise ApiError(400, "resource_already_exists_exception", f"index [{name}] already exists")
        if self.alias_targets(name):
            raise ApiError(400, "invalid_index_name_exception", f"Invalid index name [{name}], already exists as alias")
        index = Index(name, dict(body.get("mappings") or {}), _flat_settings(body.get("settings") or {}))
        self.indices[name] = index
        for alias in body.get("aliases") or {}:
            index.aliases.add(alias)
        return index

    # ----- bulk

    def bulk(self, body: bytes, default_index: str | None, filter_path: str | None = None) -> bytes:
        if self.acknowledge:
            return self._acknowledged(body, default_index, filter_path)
        started = time.perf_counter()
        actions = _bulk_actions(body)
        # What an item keeps of its outcome: everything, or the keys the filter keeps (icecdc's status
        # and error), picked here rather than cut from a whole answer by `filtered`.
        item_keys = None if filter_path is None else _item_leaves(filter_path)
        with self.lock:
            # Each name's write index looked up once a request (an alias's is a walk of every index).
            written: dict[str, Index] = {}
            outcomes = [self._outcome(op, meta, source, default_index, written) for op, meta, source in actions]
            errors = any(outcome.error is not None for _, outcome in outcomes)
            self.stats.bulk_requests += 1
            self.stats.bulk_items += len(outcomes)
            self.stats.bulk_bytes += len(body)
            if item_keys is not None and filter_path is not None and _answers_whole(filter_path):
                answer = _picked_answer(outcomes, item_keys, errors)
            else:
                whole: Json = {"took": 1, "errors": errors, "items": [{op: outcome.whole()} for op, outcome in outcomes]}
                answer = json.dumps(whole if filter_path is None else filtered(whole, filter_path)).encode()
            self.stats.bulk_seconds += time.perf_counter() - started
        return answer

    def _acknowledged(self, body: bytes, default_index: str | None, filter_path: str | None) -> bytes:
        """Every `index` action answered as a new document's (201, the status alone, as icecdc's
        `filter_path` asks) and counted to its index; nothing stored, anything else refused."""
        started = time.perf_counter()
        leaves = _item_leaves(filter_path) or () if filter_path else ()
        if not (filter_path and _answers_whole(filter_path) and "status" in leaves and set(leaves) <= {"status", "error"}):
            reason = f"an acknowledging sink answers with items' status alone (took,errors,items.*.status): {filter_path!r}"
            raise ApiError(400, "illegal_argument_exception", reason)
        written = _index_actions_by_index(body, default_index)
        with self.lock:
            for name, items in written.items():
                if name is None:
                    raise ApiError(400, "action_request_validation_exception", "Validation Failed: 1: index is missing;")
                self.write_index(name).live += items
            items = sum(written.values())
            self.stats.bulk_requests += 1
            self.stats.bulk_items += items
            self.stats.bulk_bytes += len(body)
            self.stats.bulk_seconds += time.perf_counter() - started
        return _bulk_answer([_STATUS_ITEMS["index", 201]] * items, errors=False)

    def _outcome(
        self, op: str, meta: Json, source: bytes | None, default_index: str | None, written: dict[str, Index]
    ) -> tuple[str, _Outcome]:
        try:
            return op, self._write(op, meta, source, default_index, written)
        except ApiError as exc:
            error = {"type": exc.error_type, "reason": exc.reason}
            return op, _Outcome(meta.get("_index", default_index), meta.get("_id"), exc.status, error=error)

    def _write(self, op: str, meta: Json, source: bytes | None, default_index: str | None, written: dict[str, Index]) -> _Outcome:
        name = meta.get("_index") or default_index
        if name is None:
            raise ApiError(400, "action_request_validation_exception", "Validation Failed: 1: index is missing;")
        index = written.get(name)
        if index is None:
            index = written[name] = self.write_index(name)
        if op == "update":
            raise ApiError(400, "illegal_argument_exception", "the bench sink does not support update actions")
        doc_id = meta.get("_id")
        if doc_id is None:
            if op == "delete":
                raise ApiError(400, "action_request_validation_exception", "Validation Failed: 1: id is missing;")
            doc_id = uuid.uuid4().hex
        doc_id = str(doc_id)
        stored = index.docs.get(doc_id)
        new_version = _new_version(index, doc_id, meta, stored)
        live = stored is not None and stored[1] is not None
        if op == "create" and live:
            raise ApiError(409, "version_conflict_engine_exception", f"[{doc_id}]: version conflict, document already exists")
        if op == "delete":
            index.docs[doc_id] = (new_version, None)
            index.live -= live
            return _Outcome(
                index.name, doc_id, 200 if live else 404, new_version, "deleted" if live else "not_found", next(self._seq)
            )
        if op not in ("index", "create"):
            raise ApiError(400, "illegal_argument_exception", f"Malformed action/metadata line, unknown action [{op}]")
        assert source is not None
        index.docs[doc_id] = (new_version, source)
        index.live += not live
        return _Outcome(index.name, doc_id, 200 if live else 201, new_version, "updated" if live else "created", next(self._seq))

    # ----- search

    def search(self, expression: str, body: Json, params: dict[str, str]) -> bytes:
        query = body.get("query") or {"match_all": {}}
        if set(query) != {"match_all"}:
            raise ApiError(400, "parsing_exception", f"the bench sink answers match_all queries only, not {sorted(query)}")
        size = int(params.get("size", body.get("size", 10)))
        piece = body.get("slice")
        hits = [
            (name, doc_id, version, source)
            for name in self.resolve(expression)
            for doc_id, version, source in self.indices[name].live_documents()
            if piece is None or zlib.crc32(doc_id.encode()) % int(piece["max"]) == int(piece["id"])
        ]
        scroll = Scroll({}, hits, size, _true(params.get("version", body.get("version"))), body.get("_source", True) is not False)
        scroll_id = None
        if "scroll" in params:
            scroll_id = uuid.uuid4().hex
            self.scrolls[scroll_id] = scroll
        else:
            scroll.position = int(params.get("from", body.get("from", 0)))
        return self._page(scroll, scroll_id)

    def scroll(self, scroll_id: str) -> bytes:
        scroll = self.scrolls.get(scroll_id)
        if scroll is None:
            raise ApiError(404, "search_context_missing_exception", f"No search context found for id [{scroll_id}]")
        return self._page(scroll, scroll_id)

    def _page(self, scroll: Scroll, scroll_id: str | None) -> bytes:
        page = scroll.hits[scroll.position : scroll.position + scroll.size]
        scroll.position += len(page)
        hits = b",".join(
            _hit(name, doc_id, version, source, scroll.version, scroll.source) for name, doc_id, version, source in page
        )
        head: Json = {"took": 1, "timed_out": False, "_shards": SHARDS}
        if scroll_id is not None:
            head["_scroll_id"] = scroll_id
        total = json.dumps({"value": len(scroll.hits), "relation": "eq"}).encode()
        return json.dumps(head).encode()[:-1] + b',"hits":{"total":' + total + b',"max_score":1.0,"hits":[' + hits + b"]}}"


class _Outcome(NamedTuple):
    """What one action of a bulk request did; its item of the answer is made only of the keys the
    request asks for (a dict of every key per item was a third of the sink's CPU)."""

    index_name: str | None
    doc_id: str | None
    status: int
    version: int | None = None
    result: str | None = None
    seq_no: int | None = None
    error: Json | None = None

    def whole(self) -> Json:
        if self.error is not None:
            return {"_index": self.index_name, "_id": self.doc_id, "status": self.status, "error": self.error}
        return {
            "_index": self.index_name,
            "_id": self.doc_id,
            "_version": self.version,
            "result": self.result,
            "_shards": {"total": 1, "successful": 1, "failed": 0},
            "_seq_no": self.seq_no,
            "_primary_term": 1,
            "status": self.status,
        }

    def picked(self, keys: tuple[str, ...]) -> Json:
        whole = self.whole()
        return {key: whole[key] for key in keys if key in whole}


def _picked_answer(outcomes: list[tuple[str, _Outcome]], keys: tuple[str, ...], errors: bool) -> bytes:
    """A whole bulk answer of the `keys` of each item, made as bytes: an item that kept its status
    alone (every item of a clean icecdc request) is the same few bytes, encoded once."""
    status_only = set(keys) <= {"status", "error"}
    items = [
        _STATUS_ITEMS[op, outcome.status]
        if status_only and outcome.error is None and "status" in keys
        else json.dumps({op: outcome.picked(keys)}).encode()
        for op, outcome in outcomes
    ]
    return _bulk_answer(items, errors)


def _bulk_answer(items: list[bytes], errors: bool) -> bytes:
    """A bulk answer of items already encoded."""
    return b'{"took": 1, "errors": ' + (b"true" if errors else b"false") + b', "items": [' + b", ".join(items) + b"]}"


_STATUS_ITEMS = {
    (op, status): json.dumps({op: {"status": status}}).encode()
    for op in ("index", "create", "delete")
    for status in (200, 201, 404)
}


# The operations whose action line a source line follows.
_WITH_SOURCE = (b"index", b"create", b"update")


def _bulk_actions(body: bytes) -> list[tuple[str, Json, bytes | None]]:
    """(operation, metadata, source or None) of each action of a bulk body. Every action line is
    parsed in one `json.loads` (a call per line was a third of the sink's CPU, which the tools it
    measures share). When every action is an `index` with its source (icecdc's exports, the peer's
    loads) the lines pair up by slicing, and none is walked in Python (a third of its CPU again)."""
    lines = _lines(body)
    heads = _index_heads(lines)
    if heads is not None:
        parsed = json.loads(b"[" + b",".join(heads) + b"]")
        if all(len(action) == 1 for action in parsed):
            return [("index", action["index"], source) for action, source in zip(parsed, lines[1::2], strict=True)]
    return _any_actions(lines)


def _lines(body: bytes) -> list[bytes]:
    """A bulk body's lines, without the empty one after its last newline."""
    lines = body.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


def _index_heads(lines: list[bytes]) -> list[bytes] | None:
    """The action lines, when every action is an `index` followed by its source; else None."""
    heads = lines[0::2]
    return heads if len(lines) % 2 == 0 and all(map(_INDEX_ACTION, heads)) else None


def _index_actions_by_index(body: bytes, default_index: str | None) -> collections.Counter[str | None]:
    """How many actions of a bulk body go to each index, when all are `index` actions with their
    sources (else 400). The index is read off a compact action line that names it first (icecdc's)
    by a regular expression, counted without a Python step per line (the acknowledging sink's CPU
    is the point of it); other action lines are parsed."""
    heads = _index_heads(_lines(body))
    if heads is not None:
        named = list(map(_NAMED_INDEX_ACTION.match, heads))
        if None not in named:
            return collections.Counter(map(bytes.decode, map(operator.itemgetter(1), named)))
    actions = _bulk_actions(body)
    if any(op != "index" or source is None for op, _, source in actions):
        raise ApiError(400, "illegal_argument_exception", "an acknowledging sink answers index actions only")
    return collections.Counter(meta.get("_index") or default_index for _, meta, _ in actions)


def _any_actions(lines: list[bytes]) -> list[tuple[str, Json, bytes | None]]:
    """`_bulk_actions` of lines that mix operations, or are spaced out: the lines are walked by the
    operation each action line names first (read off a compact line's first key without parsing it)."""
    found: list[tuple[bytes, bytes, bytes | None]] = []
    walked = iter(lines)
    for line in walked:
        if line.startswith(b'{"'):
            op = line[2 : line.find(b'"', 2)]
        else:
            line = line.strip()
            if not line:
                continue
            op = line.split(b'"', 2)[1] if line.count(b'"') >= 2 else b""
        found.append((op, line, next(walked, b"") if op in _WITH_SOURCE else None))
    parsed = json.loads(b"[" + b",".join(line for _, line, _ in found) + b"]") if found else []
    actions = []
    for (op, _, source), action in zip(found, parsed, strict=True):
        named = action.items() if isinstance(action, dict) and len(action) == 1 else ()
        ((name, meta),) = named or (("", action),)
        if name != _OPERATIONS.get(op):
            raise ApiError(400, "illegal_argument_exception", f"Malformed action/metadata line: {action!r}")
        actions.append((name, meta, source))
    return actions


# An operation's name as an action line's first key spells it, and as a str.
_INDEX_ACTION = operator.methodcaller("startswith", b'{"index":')
# A compact `index` action line that names its index first (index names hold no quote or backslash).
_NAMED_INDEX_ACTION = re.compile(rb'\{"index":\{"_index":"([^"\\]*)"')
_OPERATIONS = {op.encode(): op for op in ("index", "create", "update", "delete")}


def _item_leaves(filter_path: str) -> tuple[str, ...] | None:
    """The keys of an item's outcome a filter keeps, when its paths under `items` all end there
    (`items.*.status`); None when it cuts items otherwise (left to `filtered`)."""
    kept = []
    for path in filter_path.split(","):
        parts = path.split(".")
        if parts[0] == "items":
            if len(parts) != 3 or parts[1] != "*" or parts[2] == "*":
                return None
            kept.append(parts[2])
    return tuple(kept)


def _answers_whole(filter_path: str) -> bool:
    """Whether a filter keeps every top-level key of a bulk answer, items aside (`took,errors,items.…`)."""
    return {path.split(".")[0] for path in filter_path.split(",")} == {"took", "errors", "items"}


def filtered(answer: Json, filter_path: str) -> Json:
    """`answer` cut to the comma-separated dotted paths of `filter_path`, as OpenSearch answers a
    request with that parameter: a segment is a key or `*` (any key; a key also named literally at
    that level follows the literal's paths), and objects left empty are dropped. A tree of the
    paths, walked along the answer: a bulk answer of 500 items is cut in about a millisecond."""
    tree = _Paths()
    for path in filter_path.split(","):
        node = tree
        for segment in path.split("."):
            node = node.children.setdefault(segment, _Paths())
        node.ends = True
    kept = _kept(answer, tree)
    return {} if kept is _DROPPED else kept


@dataclass
class _Paths:
    """The paths of a filter from one level of an answer on: those that end here, and the rest by key."""

    ends: bool = False
    children: dict[str, _Paths] = field(default_factory=dict)

    @cached_property
    def leaves(self) -> tuple[str, ...] | None:
        """The keys kept whole at this level, when every path ends at the next (no `*`): an item's outcome."""
        if "*" in self.children or not all(child.ends for child in self.children.values()):
            return None
        return tuple(self.children)


_DROPPED = object()


def _kept(value: Any, tree: _Paths) -> Any:
    if tree.ends:
        return value
    if isinstance(value, list):
        return [kept for element in value if (kept := _kept(element, tree)) is not _DROPPED]
    if not isinstance(value, dict):
        return _DROPPED
    if tree.leaves is not None:
        result = {key: value[key] for key in tree.leaves if key in value}
        return result or _DROPPED
    wildcard = tree.children.get("*")
    if wildcard is None:
        subtrees = ((key, value[key], tree.children[key]) for key in tree.children if key in value)
    else:
        subtrees = ((key, inner, tree.children.get(key, wildcard)) for key, inner in value.items())
    result = {key: kept for key, inner, subtree in subtrees if (kept := _kept(inner, subtree)) is not _DROPPED}
    return result or _DROPPED


def _hit(name: str, doc_id: str, version: int, source: bytes, with_version: bool, with_source: bool) -> bytes:
    meta: Json = {"_index": name, "_id": doc_id, "_score": 1.0}
    if with_version:
        meta["_version"] = version
    text = json.dumps(meta).encode()
    return text[:-1] + b',"_source":' + source + b"}" if with_source else text


def _conflict(index: Index, doc_id: str, stored: int, version: int) -> ApiError:
    return ApiError(
        409,
        "version_conflict_engine_exception",
        f"[{doc_id}]: version conflict, current version [{stored}] is higher or equal to the one provided [{version}]",
    )


def _true(value: Any) -> bool:
    return str(value).lower() == "true"


def _flat_settings(settings: Json, prefix: str = "") -> dict[str, str]:
    """Settings as OpenSearch's flat form, every key under `index.`, values as strings (None stays None: a reset)."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat.update(_flat_settings(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    if prefix:
        return flat
    return {
        (k if k.startswith("index.") else f"index.{k}"): (
            None if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        )
        for k, v in flat.items()
    }


def _nested(flat: dict[str, str]) -> Json:
    nested: Json = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def _merge_properties(current: Json, added: Json) -> None:
    for name, mapping in added.items():
        have = current.get(name)
        if isinstance(have, dict) and "properties" in mapping:
            _merge_properties(have.setdefault("properties", {}), mapping["properties"])
        else:
            current[name] = mapping


class Handler(BaseHTTPRequestHandler):
    """Routes OpenSearch's REST paths to the store; JSON in, JSON out, HTTP/1.1 keep-alive."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server: Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        params = {k: v[-1] for k, v in parse_qs(url.query).items()}
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            status, answer = route(self.server.store, method, parts, params, raw)
        except ApiError as exc:
            status, answer = exc.status, json.dumps(exc.body()).encode()
        except Exception as exc:  # noqa: BLE001 (a bug here must answer, not hang the client)
            status, answer = 500, json.dumps(ApiError(500, "exception", repr(exc)).body()).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(answer)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], acknowledge: bool = False) -> None:
        super().__init__(address, Handler)
        self.store = Store(acknowledge)


def route(store: Store, method: str, parts: list[str], params: dict[str, str], raw: bytes) -> tuple[int, bytes]:
    """(status, body) of one request."""
    if parts and parts[-1] == "_bulk":
        return 200, store.bulk(raw, parts[0] if len(parts) == 2 else None, params.get("filter_path"))
    body = json.loads(raw) if raw.strip() else {}
    with store.lock:
        if parts[:2] == ["_search", "scroll"]:
            if method == "DELETE":
                for scroll_id in _list(body.get("scroll_id") or parts[2:]):
                    store.scrolls.pop(scroll_id, None)
                return 200, json.dumps({"succeeded": True, "num_freed": 1}).encode()
            return 200, store.scroll(body.get("scroll_id") or params["scroll_id"])
        if parts and parts[-1] == "_search":
            return 200, store.search(parts[0] if len(parts) == 2 else "_all", body, params)
        status, answer = _json_route(store, method, parts, params, body)
    return status, json.dumps(answer).encode()


def _list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _json_route(store: Store, method: str, parts: list[str], params: dict[str, str], body: Json) -> tuple[int, Any]:
    if not parts:
        return 200, {
            "name": "bench-sink",
            "cluster_name": "bench-sink",
            "cluster_uuid": "bench-sink",
            "version": {"distribution": "opensearch", "number": VERSION, "lucene_version": "9.12.1"},
            "tagline": "The OpenSearch Project: https://opensearch.org/",
        }
    head, rest = parts[0], parts[1:]
    if head == "_bench" and rest == ["stats"]:
        return 200, {**vars(store.stats), "documents": {n: i.live for n, i in store.indices.items()}}
    if head == "_cluster" and rest[:1] == ["settings"]:
        return 200, {"persistent": {}, "transient": {}}
    if head == "_cluster" and rest[:1] == ["health"]:
        return 200, {"cluster_name": "bench-sink", "status": "green", "number_of_nodes": 1}
    if head == "_aliases" and method in ("POST", "PUT"):
        _update_aliases(store, body.get("actions", []))
        return 200, {"acknowledged": True}
    if head == "_alias":
        return _get_aliases(store, "_all", rest[0] if rest else None)
    if head == "_refresh" or rest == ["_refresh"] or rest == ["_flush"]:
        if rest:
            store.resolve(head, _true(params.get("ignore_unavailable")))
        return 200, {"_shards": SHARDS}
    if head.startswith("_"):
        raise ApiError(400, "illegal_argument_exception", f"the bench sink does not answer {method} /{'/'.join(parts)}")
    return _index_route(store, method, head, rest, params, body)


def _index_route(store: Store, method: str, name: str, rest: list[str], params: dict[str, str], body: Json) -> tuple[int, Any]:
    ignore_unavailable = _true(params.get("ignore_unavailable"))
    if not rest:
        return _index_itself(store, method, name, ignore_unavailable, body)
    what = rest[0]
    if what == "_settings":
        return _index_settings(store, method, name, params, body)
    if what == "_mapping":
        concrete = store.resolve(name, ignore_unavailable)
        if method == "PUT":
            for n in concrete:
                _merge_properties(store.indices[n].mappings.setdefault("properties", {}), body.get("properties", {}))
            return 200, {"acknowledged": True}
        return 200, {n: {"mappings": store.indices[n].mappings} for n in concrete}
    if what in ("_alias", "_aliases"):
        return _index_aliases(store, method, name, rest[1] if len(rest) > 1 else None)
    if what == "_count":
        return 200, {"count": sum(store.indices[n].live for n in store.resolve(name, ignore_unavailable)), "_shards": SHARDS}
    if what == "_doc" and len(rest) == 2 and method in ("GET", "HEAD"):
        got = _got(store.indices[store.resolve(name)[0]], rest[1])
        return (200 if got["found"] else 404), got
    if what == "_mget" and method in ("GET", "POST"):  # a pass's lookup of appended keys (engines/target.py)
        index = store.indices[store.resolve(name)[0]]
        return 200, {"docs": [_got(index, doc_id) for doc_id in body.get("ids", [])]}
    raise ApiError(400, "illegal_argument_exception", f"the bench sink does not answer {method} /{name}/{'/'.join(rest)}")


def _got(index: Index, doc_id: str) -> Json:
    """A document as GET /<index>/_doc/<id> answers it, found or not."""
    found = index.docs.get(doc_id)
    if found is None or found[1] is None:
        return {"_index": index.name, "_id": doc_id, "found": False}
    return {"_index": index.name, "_id": doc_id, "_version": found[0], "found": True, "_source": json.loads(found[1])}


def _index_itself(store: Store, method: str, name: str, ignore_unavailable: bool, body: Json) -> tuple[int, Any]:
    """HEAD, PUT, DELETE and GET of /<index>."""
    if method == "HEAD":
        return (200 if store.resolve(name, ignore_unavailable=True) else 404), {}
    if method == "PUT":
        store.create(name, body)
        return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}
    if method == "DELETE":
        if name not in store.indices and store.alias_targets(name):
            raise ApiError(400, "illegal_argument_exception", f"The provided expression [{name}] matches an alias")
        for concrete in store.resolve(name, ignore_unavailable):
            del store.indices[concrete]
        return 200, {"acknowledged": True}
    return 200, {
        n: {
            "aliases": {a: {} for a in sorted(store.indices[n].aliases)},
            "mappings": store.indices[n].mappings,
            "settings": _nested(store.indices[n].settings),
        }
        for n in store.resolve(name, ignore_unavailable)
    }


def _index_settings(store: Store, method: str, name: str, params: dict[str, str], body: Json) -> tuple[int, Any]:
    """PUT and GET of /<index>/_settings."""
    concrete = store.resolve(name, _true(params.get("ignore_unavailable")))
    if method == "PUT":
        for n in concrete:
            for key, value in _flat_settings(body).items():
                if value is None:
                    store.indices[n].settings.pop(key, None)
                else:
                    store.indices[n].settings[key] = value
        return 200, {"acknowledged": True}
    flat = _true(params.get("flat_settings"))
    return 200, {
        n: {"settings": dict(store.indices[n].settings) if flat else _nested(store.indices[n].settings)} for n in concrete
    }


def _index_aliases(store: Store, method: str, name: str, alias: str | None) -> tuple[int, Any]:
    """/<index>/_alias[/<alias>]: add, remove, read."""
    if method in ("PUT", "POST") and alias is not None:
        _update_aliases(store, [{"add": {"index": name, "alias": alias}}])
        return 200, {"acknowledged": True}
    if method == "DELETE" and alias is not None:
        _update_aliases(store, [{"remove": {"index": name, "alias": alias}}])
        return 200, {"acknowledged": True}
    status, answer = _get_aliases(store, name, alias)
    return (status, {}) if method == "HEAD" else (status, answer)


def _new_version(index: Index, doc_id: str, meta: Json, stored: tuple[int, bytes | None] | None) -> int:
    """The version a write of `meta` gives the document (`stored`: its version and source, if any); a
    conflict with the stored version raises as OpenSearch answers it."""
    version_type = meta.get("version_type", "internal")
    version = meta.get("version")
    if version_type in ("external", "external_gte"):
        if not isinstance(version, int):
            raise ApiError(400, "action_request_validation_exception", "an external versioning type requires a version")
        if stored is not None and (version < stored[0] or (version_type == "external" and version == stored[0])):
            raise _conflict(index, doc_id, stored[0], version)
        return version
    if version_type == "internal" and version is None:
        return stored[0] + 1 if stored is not None else 1
    raise ApiError(400, "action_request_validation_exception", f"version_type [{version_type}] with version is not supported")


def _get_aliases(store: Store, expression: str, alias: str | None) -> tuple[int, Any]:
    names = store.resolve(expression, ignore_unavailable=True)
    found = {
        n: {"aliases": {a: {} for a in sorted(store.indices[n].aliases) if alias is None or fnmatchcase(a, alias)}} for n in names
    }
    if alias is None:
        return 200, found
    found = {n: v for n, v in found.items() if v["aliases"]}
    if not found:
        return 404, {"error": f"alias [{alias}] missing", "status": 404}
    return 200, found


def _update_aliases(store: Store, actions: list[Json]) -> None:
    """Every action, checked first, then applied together (OpenSearch's `_aliases` is atomic)."""
    steps: list[Callable[[], None]] = []
    for action in actions:
        ((kind, spec),) = action.items()
        names = [n for expr in _list(spec.get("indices") or spec.get("index")) for n in store.resolve(expr)]
        if kind == "add":
            alias = spec["alias"]
            if alias in store.indices:
                raise ApiError(
                    400, "invalid_alias_name_exception", f"Invalid alias name [{alias}]: an index exists with the same name"
                )
            steps += [lambda n=n, a=alias: store.indices[n].aliases.add(a) for n in names]
        elif kind == "remove":
            alias = spec["alias"]
            for n in names:
                if alias not in store.indices[n].aliases:
                    raise ApiError(404, "aliases_not_found_exception", f"aliases [{alias}] missing")
            steps += [lambda n=n, a=alias: store.indices[n].aliases.discard(a) for n in names]
        elif kind == "remove_index":
            steps += [lambda n=n: store.indices.pop(n, None) for n in names]
        else:
            raise ApiError(400, "illegal_argument_exception", f"unknown alias action [{kind}]")
    for step in steps:
        step()


# ----- the process, seen from the bench


@dataclass
class SinkServer:
    """The sink running as a subprocess of this process (its CPU and memory its own, no GIL shared with the bench)."""

    process: subprocess.Popen[bytes]
    url: str

    @classmethod
    def start(cls, timeout: float = 30.0, acknowledge: bool = False) -> SinkServer:
        """A storing sink, or an acknowledging one (`acknowledge`; the module's doc)."""
        argv = [sys.executable, "-m", "bench.harness.sink", "--parent-pid", str(os.getpid())]
        process = subprocess.Popen(
            argv + (["--acknowledge"] if acknowledge else []),
            stdout=subprocess.PIPE,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        )
        assert process.stdout is not None
        line = process.stdout.readline().decode().strip()  # the URL, once it listens
        if not line.startswith("http://"):
            process.kill()
            raise RuntimeError(f"bench sink server did not start: {line!r}")
        server = cls(process, line)
        deadline = time.monotonic() + timeout
        while True:
            try:
                server.request("GET", "/")
                return server
            except OSError:
                if time.monotonic() > deadline:
                    server.close()
                    raise
                time.sleep(0.1)

    @property
    def pid(self) -> int:
        return self.process.pid

    def request(self, method: str, path: str) -> Json:
        with urllib.request.urlopen(urllib.request.Request(self.url + path, method=method), timeout=60) as answer:
            result: Json = json.loads(answer.read())
            return result

    def stats(self) -> Json:
        """Bulk requests, items, bytes and seconds spent in them so far; live documents per index."""
        return self.request("GET", "/_bench/stats")

    def close(self) -> None:
        stop(self.process)

    def __enter__(self) -> SinkServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.harness.sink")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent-pid", type=int)
    parser.add_argument("--acknowledge", action="store_true", help="answer bulk index actions without storing them")
    args = parser.parse_args()
    # Full collections walk every stored document (a fifth of the sink's CPU at 10^6 documents, on
    # cores the measured tool shares); the young generations still collect the cycles a request makes.
    gc.set_threshold(700, 10, 1_000_000)
    server = Server((args.host, args.port), args.acknowledge)
    if args.parent_pid:
        threading.Thread(target=exit_with, args=(args.parent_pid,), daemon=True).start()
    host, port = server.server_address[:2]
    print(f"http://{host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""Versioned bulk writes to OpenSearch, in bulk requests of opensearch-py's client.

Every write carries `version_type=external` and the change's sequence number as version, so a
replayed or reordered write never overwrites a newer document: OpenSearch answers it 409, which
counts as done. A delete of an absent document answers 404 and also counts as done (OpenSearch
keeps the version as a tombstone, so an older index of it is still refused for a while).

Requests are bounded by count (`bulk_chunk_size`) and by bytes (`max_chunk_bytes`); a document
whose action alone is larger than `max_chunk_bytes` is never sent.

Only a document's own fault becomes a dead letter (`DocumentFault`, or a single document too large
for a request). Anything else OpenSearch refuses (a block, missing rights, a missing or closed
index, an error type we do not know) fails the batch with a SinkError that says what is wrong: a
systemic refusal must stop the table, not send every one of its documents to the dead letters.

A delete whose routing value is unknown (`Write.routing_lookup`) is sent under every routing value
the index holds its `_id` under: one search over all shards finds them, for a chunk's worth of such
deletes at a time.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import TransportError

from icecdc.config import OpenSearchConfig
from icecdc.deadletters import DeadLetter, LetterTally, letter_sample
from icecdc.destination.client import capabilities_of
from icecdc.destination.scan import make_visible
from icecdc.documents import MAX_ID_BYTES, refused_id
from icecdc.errors import DENIED, DestinationDenied, NothingApplied, SinkError
from icecdc.model import VersionType, Write, ordered_routings
from icecdc.words import counted

if TYPE_CHECKING:
    from icecdc.state import Lease

log = logging.getLogger(__name__)
# A string as the JSON encoder writes it, quotes included (ensure_ascii off, as opensearch-py's
# serializer).
_json_string = json.encoder.encode_basestring

# How many refused documents a SinkError quotes.
ERRORS_QUOTED = 5
# Whole bulk requests answered with these are retried with backoff, like items answered 429 or 5xx.
RETRYABLE_REQUEST_STATUSES = (429, 500, 502, 503, 504)
# Of those, the answers of a cluster that refused a whole request before applying any of it; a
# gateway's 502 or 504 may come after the cluster applied it.
UNAPPLIED_REQUEST_STATUSES = (429, 503)
# A request too large for the cluster (http.max_content_length, a managed domain's payload limit):
# split in halves and sent again; a single document still answered this is too large itself.
TOO_LARGE = 413
FORBIDDEN = 403  # the credentials accepted, a right missing: `DestinationDenied`
# What a bulk answer carries of each item: its status, and its error if any (`classify_item`).
# The whole answer repeats each document's index, id, version, shards and sequence numbers, and
# decoding it took a tenth of the client's CPU on an export.
BULK_ANSWER = "took,errors,items.*.status,items.*.error"
# Hits of one lookup of stored routing values (index.max_result_window's default): a chunk's ids
# have one document each but for copies left on other shards.
LOOKUP_PAGE = 10_000


class DocumentFault(StrEnum):
    """Error types of a bulk item answered 400 that are the document's own fault.

    Writing such a document again can never succeed until the document or the mapping changes, so it
    becomes a dead letter. Every other refusal is the cluster's or the setup's and fails the batch.
    Among them is `strict_dynamic_mapping_exception`: a field of the table's schema the index's
    mapping lacks is the fault of icecdc, an override or a template, never the document's.
    """

    MAPPER_PARSING = "mapper_parsing_exception"  # a value does not fit its field's mapped type
    # the body cannot be indexed as the mapping says (newer versions' name)
    DOCUMENT_PARSING = "document_parsing_exception"
    # a value the field refuses: an immense term, too many fields added
    ILLEGAL_ARGUMENT = "illegal_argument_exception"
    PARSE = "parse_exception"  # the body is not parseable
    JSON_PARSE = "json_parse_exception"  # the body is not valid JSON
    # the body's structure is not what a field expects
    X_CONTENT_PARSE = "x_content_parse_exception"
    # a term of the body is longer than Lucene allows
    MAX_BYTES_LENGTH_EXCEEDED = "max_bytes_length_exceeded_exception"


# The types' strings (an enum member hashes by its name, so a set of members would not find a str).
DOCUMENT_FAULTS = frozenset(fault.value for fault in DocumentFault)
# How a Serverless time-series or vector collection refuses an action with its own `_id`
ASSIGNED_IDS = "Document ID is not supported"


class ItemOutcome(StrEnum):
    """What one bulk item's answer means for icecdc."""

    INDEXED = "indexed"
    DELETED = "deleted"  # also a delete of an absent document
    SUPERSEDED = "superseded"  # the index holds this or a newer version already
    RETRY = "retry"  # overload or a server error: send it again after a backoff
    DEAD_LETTER = "dead letter"  # the document's own fault
    FAIL = "fail"  # not the document's fault: the batch fails, nothing is dead-lettered


def classify_item(op_type: str, outcome: dict[str, Any]) -> ItemOutcome:
    """The meaning of one item of a bulk answer (`{"index": outcome}`), by status and error type."""
    status = outcome.get("status", 0)
    error = outcome.get("error")
    error_type = error.get("type") if isinstance(error, dict) else None
    if error is None and 200 <= status < 300:
        return ItemOutcome.INDEXED if op_type == "index" else ItemOutcome.DELETED
    if isinstance(error, dict) and ASSIGNED_IDS in str(error.get("reason")):
        return ItemOutcome.FAIL  # every document's: the collection assigns the ids
    # result "not_found": the document is absent
    if error is None and op_type == "delete" and status == 404:
        return ItemOutcome.DELETED
    if status == 409:
        return ItemOutcome.SUPERSEDED
    # a read-only index or cluster, also when answered 429
    if error_type == "cluster_block_exception":
        return ItemOutcome.FAIL
    if status == 429 or status >= 500:
        return ItemOutcome.RETRY
    if status == TOO_LARGE or (status == 400 and error_type in DOCUMENT_FAULTS):
        return ItemOutcome.DEAD_LETTER
    return ItemOutcome.FAIL


@dataclass
class SinkStats:
    indexed: int = 0
    deleted: int = 0
    superseded: int = 0  # refused because the index holds this or a newer version already
    retried: int = 0  # items answered 429 or 5xx and sent again
    reached: int = 0  # requests OpenSearch may have applied some of (not refused whole: 429, 503)
    dead_lettered: int = 0  # refused for good, kept in the dead letters
    letters: LetterTally = field(default_factory=LetterTally)  # the dead letters by cause
    # Without versions: until when (`time.time()`) a request left unanswered may still land
    landing_until: float = 0.0

    def add(self, other: SinkStats) -> None:
        for name, value in vars(other).items():
            if isinstance(value, LetterTally):
                self.letters.add(value)
            elif name == "landing_until":
                self.landing_until = max(self.landing_until, value)
            else:
                setattr(self, name, getattr(self, name) + value)

    def wait_for_landing(self) -> None:
        """Return once no request this pass left unanswered can still land (Serverless)."""
        left = self.landing_until - time.time()
        if left > 0:
            log.info("waiting %.0f s until no unanswered write can still land", left)
            time.sleep(left)

    def lettered(self, tally: LetterTally) -> None:
        """Count dead letters written elsewhere (rows that cannot become documents, duplicates)."""
        self.dead_lettered += tally.total
        self.letters.add(tally)


def refusal_cause(status: int, reason: str) -> str:
    """What a refused document's letter is counted under, its `DeadLetter.cause`.

    That is its reason without the document's own details, e.g.
    `400 mapper_parsing_exception, field [amount]`.
    """
    if status == TOO_LARGE:
        return "413 the document is too large for a request"
    error_type = reason.split(":", 1)[0] if ":" in reason else reason
    field_named = re.search(r"field \[([^\]]+)\]", reason)
    return f"{status} {error_type}" + (f", field [{field_named[1]}]" if field_named else "")


def refusal_letter(table: str, snapshot_id: int | None, refusal: Refusal) -> DeadLetter:
    """The dead letter of a document OpenSearch refused for its own fault, with its cause."""
    write, status, reason = refusal
    return DeadLetter(
        table,
        snapshot_id,
        write.version,
        write.doc_id,
        status,
        reason,
        write.document,
        cause=refusal_cause(status, reason),
    )


def delete_older(
    client: OpenSearch,
    config: OpenSearchConfig,
    index: str,
    version: int,
    slice_id: int,
    slices: int,
) -> int:
    """Delete the documents of one scroll slice whose version is below `version`; return how many.

    The deletes carry `version` as external version, so a document rewritten meanwhile by a newer
    change is refused, not deleted.
    """
    query: dict[str, Any] = {"query": {"match_all": {}}, "version": True, "_source": False}
    if slices > 1:
        query["slice"] = {"id": slice_id, "max": slices}
    hits = helpers.scan(client, index=index, query=query, scroll="10m", size=1000)
    older = (
        Write(hit["_id"], version, None, hit.get("_routing"))
        for hit in hits
        if hit["_version"] < version
    )
    return write_documents(client, config, index, older).deleted


class Fence(Protocol):
    """A table's lease, as a write sees it: a `Lease`, or a `LeaseFence` where the lease is not."""

    def admit(self, seconds: float) -> None:
        """Return once the lease is held for `seconds` more; `LeaseLost` when it is not."""


@dataclass(frozen=True)
class BulkMode:
    """How every action of a write is sent: its version type, and its index actions' pipeline."""

    version_type: VersionType = VersionType.EXTERNAL
    pipeline: str | None = None
    # (index, pipeline) of writes that name their index (`Write.index`)
    pipelines: tuple[tuple[str, str], ...] = ()
    # Without versions: no request leaves unless the table's lease outlives it
    fence: Fence | None = None

    def pipeline_of(self, index: str, own_index: bool) -> str | None:
        return dict(self.pipelines).get(index) if own_index else self.pipeline


class ActionLines:
    """Each write's bulk action line as JSON text, the part one index's writes share encoded once.

    A line reads `{"index":{"_index":…,"_id":…,"version":…}}`; to a destination without versions
    (Serverless) `{"index":{"_index":…,"_id":…}}`, its order kept by the table's lease.

    Written here rather than left to the bulk helper's `expand_action` and serializer: those copy a
    dict per write and JSON-encode it, about a third of the client's CPU on an export. `_chunks`
    cuts the lines into requests and `_write_chunk` sends each as one body.
    """

    def __init__(self, index: str, mode: BulkMode, versions: bool = True) -> None:
        self.index = index
        self.mode = mode
        self.versions = versions
        # (op type, index, pipeline) → the line up to the id
        self._prefixes: dict[tuple[str, str, str | None], str] = {}

    def line(self, write: Write) -> str:
        own_index = write.index or self.index
        key: tuple[str, str, str | None]
        if write.document is None:
            key = ("delete", own_index, None)
        else:
            key = ("index", own_index, self.mode.pipeline_of(own_index, write.index is not None))
        prefix = self._prefixes.get(key)
        if prefix is None:
            version_type = self.mode.version_type if self.versions else None
            prefix = self._prefixes[key] = _line_prefix(*key, version_type)
        routing = "" if write.routing is None else ',"routing":' + _json_string(write.routing)
        version = f',"version":{write.version}' if self.versions else ""
        return f"{prefix}{_json_string(write.doc_id)}{version}{routing}}}}}"

    def sent(self, writes: Iterable[Write]) -> list[tuple[str, str | None]]:
        """What a bulk request sends for `writes`: (action line, document) each."""
        return [(self.line(write), write.document) for write in writes]


def _line_prefix(
    op_type: str, index: str, pipeline: str | None, version_type: VersionType | None
) -> str:
    fields = [f'"_index":{_json_string(index)}']
    if version_type is not None:
        fields.append(f'"version_type":{_json_string(version_type)}')
    if pipeline is not None:
        fields.append(f'"pipeline":{_json_string(pipeline)}')
    return f'{{"{op_type}":{{{",".join(fields)},"_id":'


# A refused item: the write, OpenSearch's status for it, and its reason.
Refusal = tuple[Write, int, str]


@dataclass
class _Answer:
    """One bulk request's items that need more than counting."""

    retry: list[Refusal] = field(default_factory=list)  # answered 429 or 5xx
    refused: list[Refusal] = field(default_factory=list)  # the document's own fault
    failed: list[Refusal] = field(default_factory=list)  # not the document's fault
    too_large: str | None = None  # the whole request was answered 413, with this reason


def write_documents(
    client: OpenSearch,
    config: OpenSearchConfig,
    index: str,
    writes: Iterable[Write],
    dead_letter: Callable[[list[Refusal]], None] | None = None,
    mode: BulkMode = BulkMode(),
    written: Callable[[int], None] | None = None,
) -> SinkStats:
    """Write every document in bulk chunks; tell `written` how many each chunk settled.

    Items answered 429 or 5xx are retried with bounded exponential backoff and jitter. Items that
    are the document's own fault, as `classify_item` tells, go to `dead_letter`; without one, they
    fail the batch. Any other refusal fails the batch before anything of its request is
    dead-lettered. A request answered 413 is split in halves. A lone document answered 413 is a dead
    letter, and so is, without being sent, a document whose action alone is over `max_chunk_bytes`.
    A lost connection fails the batch: the transport has retried it already, and the checkpoint must
    not move.

    `mode` gives the version type and the ingest pipelines, as `BulkMode` says. A resync writes with
    `external_gte`, so that its export also rewrites documents of equal version.
    """
    stats = SinkStats()
    writes = _routings_found(client, index, writes, config.bulk_chunk_size)
    lines = ActionLines(index, mode, capabilities_of(client).versions)
    # Requests in line, each answer handled before the next chunk is made. A request kept in flight
    # on a thread while the next chunk is made overlaps only the making (milliseconds for a chunk)
    # with OpenSearch's answer, and the two threads' handing of the GIL back and forth costs CPU: on
    # one core (a Lambda's share up to 1,769 MB) a 10^6-row export took about 10 % longer that way
    # (5 of 6 pairs), on two no difference showed (docs/bench, 2026-11-26). A slow cluster is met
    # by more tasks at once.
    # opensearch-py's `parallel_bulk` sends several at once, unordered, and serializes every action
    # again.
    try:
        for chunk_or_refusal in _chunks(config, lines, writes):
            settled = 1
            if isinstance(chunk_or_refusal, _Chunk):
                chunk = chunk_or_refusal
                sent, settled = chunk.sent, len(chunk.writes)
                _write_with_retries(client, config, lines, chunk.writes, stats, dead_letter, sent)
            else:  # a document too large for any request
                _dead_letter([chunk_or_refusal], "icecdc did not send", index, stats, dead_letter)
            if written is not None:
                written(settled)
    except SinkError as exc:
        if stats.reached or type(exc) is not SinkError:  # a kind of its own stays what it is
            raise
        raise NothingApplied(str(exc)) from None
    return stats


def fenced(writes: Iterable[Write], lease: Lease) -> Iterator[Write]:
    """The writes, stopped by `LeaseLost` once `lease` is lost: another run may write by then.

    `write_documents` takes the next write before it sends a chunk: after it returns, call
    `lease.check()` once more for the last chunk.
    """
    for write in writes:
        lease.check()
        yield write


def _routings_found(
    client: OpenSearch, index: str, writes: Iterable[Write], batch: int
) -> Iterator[Write]:
    """The writes in order, each delete of unknown routing replaced by deletes under known ones.

    A delete of unknown routing is one with `Write.routing_lookup`. It is replaced by a delete under
    each routing value the index holds its document under, but those it excepts; by none when the
    document is absent. The routing values of `batch` writes are looked up at once, before any of
    them is sent. Each index is made visible (`make_visible`) before its first lookup, so that a
    search sees what earlier passes wrote.
    """
    refreshed: set[str] = set()
    pending = iter(writes)
    while group := list(islice(pending, batch)):
        lookups = [w for w in group if w.routing_lookup is not None]
        if not lookups:
            yield from group
            continue
        found: dict[tuple[str, str], set[str | None]] = {}
        for name in sorted({w.index or index for w in lookups}):
            if name not in refreshed:
                make_visible(client, name)
                refreshed.add(name)
            ids = sorted({w.doc_id for w in lookups if (w.index or index) == name})
            for doc_id, routing in _stored_routings(client, name, ids):
                found.setdefault((name, doc_id), set()).add(routing)
        log.debug(
            "looked up the routing of %d deletes by key in %s: %d documents found",
            len(lookups),
            index,
            len(found),
        )
        for write in group:
            if write.routing_lookup is None:
                yield write
                continue
            stale = found.get((write.index or index, write.doc_id), set()) - set(
                write.routing_lookup
            )
            for routing in ordered_routings(stale):
                yield replace(write, routing=routing, routing_lookup=None)


def _stored_routings(
    client: OpenSearch, index: str, ids: list[str]
) -> Iterator[tuple[str, str | None]]:
    """The `_id` and `_routing` of every document of `index` with one of `ids`, on any shard.

    They are read by one search, or a scroll when the index holds more copies of them than one page
    returns. It raises SinkError when OpenSearch refuses it: a delete must not be dropped for want
    of its routing value.
    """
    query: dict[str, Any] = {"query": {"ids": {"values": ids}}, "_source": False}
    try:
        answer = client.search(
            index=index, body={**query, "size": LOOKUP_PAGE, "track_total_hits": True}
        )
        hits = answer["hits"]["hits"]
        if answer["hits"]["total"]["value"] > len(hits):
            hits = list(helpers.scan(client, index=index, query=query, size=LOOKUP_PAGE))
    except TransportError as exc:
        raise SinkError(
            f"OpenSearch refused the lookup of the routing values of {len(ids)} documents "
            "deleted by key in "
            f"index {index!r}: {exc.status_code} {_request_error(exc)}"
        ) from None
    for hit in hits:
        yield hit["_id"], hit.get("_routing")


def _write_with_retries(
    client: OpenSearch,
    config: OpenSearchConfig,
    lines: ActionLines,
    chunk: list[Write],
    stats: SinkStats,
    dead_letter: Callable[[list[Refusal]], None] | None,
    sent: list[tuple[str, str | None]] | None = None,
) -> None:
    """`sent`: the chunk's (action line, document) pairs when `_chunks` made them already."""
    index = lines.index
    for attempt in range(config.max_retries + 1):
        answer = _write_chunk(client, lines, chunk, stats, sent or lines.sent(chunk))
        sent = None  # a retry or a half sends fewer writes: their lines are made again (rare)
        if answer.too_large is not None:
            if len(chunk) > 1:
                half = len(chunk) // 2
                for part in (chunk[:half], chunk[half:]):
                    _write_with_retries(client, config, lines, part, stats, dead_letter)
                return
            answer.refused = [
                (
                    chunk[0],
                    TOO_LARGE,
                    f"the document alone is too large for a request: {answer.too_large}",
                )
            ]
        if any(ASSIGNED_IDS in reason for _, _, reason in answer.failed):
            raise SinkError(
                f"index {index!r} is in a collection that assigns the ids itself (an OpenSearch "
                "Serverless time-series or vector search collection): icecdc writes each row "
                "under its own _id and needs a search collection; nothing was dead-lettered"
            )
        if answer.failed:
            raise SinkError(
                f"OpenSearch refused {counted(len(answer.failed), 'write')} to index {index!r} "
                "for a reason that is not "
                f"the documents' fault (nothing was dead-lettered): {_quote(answer.failed)}"
            )
        if answer.refused:
            _dead_letter(answer.refused, "OpenSearch refused", index, stats, dead_letter)
        if not answer.retry:
            return
        if attempt == config.max_retries:
            status, reason = answer.retry[0][1], answer.retry[0][2]
            # status 0: no answer at all (a refused or lost connection, a timeout)
            kept = "was unreachable" if status == 0 else f"kept answering {status}"
            raise SinkError(
                f"OpenSearch {kept} for {counted(len(answer.retry), 'document')} "
                f"of index {index!r} after {counted(config.max_retries, 'retry', 'retries')}: "
                f"{reason}"
            )
        chunk = [write for write, _, _ in answer.retry]
        stats.retried += len(chunk)
        time.sleep(_backoff(config, attempt))


def _dead_letter(
    refused: list[Refusal],
    who_refused: str,
    index: str,
    stats: SinkStats,
    dead_letter: Callable[[list[Refusal]], None] | None,
) -> None:
    """Hand documents that can never be written to `dead_letter`.

    Without one, fail the batch naming them.
    """
    if dead_letter is None:
        raise SinkError(
            f"{who_refused} {counted(len(refused), 'document')} of index {index!r}: "
            f"{_quote(refused)}"
        )
    dead_letter(refused)
    stats.dead_lettered += len(refused)
    for write, status, reason in refused:
        sample = letter_sample(write.doc_id, reason, write.document)
        stats.letters.count(refusal_cause(status, reason), sample)


def _quote(refusals: list[Refusal]) -> str:
    return "; ".join(
        f"{w.doc_id}: {status} {reason}" for w, status, reason in refusals[:ERRORS_QUOTED]
    )


def _reason(outcome: dict[str, Any], index: str) -> str:
    """An item's error as `type: reason`, with its cause and the index it was written to."""
    error = outcome.get("error")
    if not isinstance(error, dict):
        return str(error)
    cause = error.get("caused_by")
    caused_by = (
        f" (caused by {cause.get('type')}: {cause.get('reason')})"
        if isinstance(cause, dict)
        else ""
    )
    return f"{error.get('type')}: {error.get('reason')}{caused_by} on index {index!r}"


def _write_chunk(
    client: OpenSearch,
    lines: ActionLines,
    chunk: list[Write],
    stats: SinkStats,
    sent: list[tuple[str, str | None]],
) -> _Answer:
    """One bulk request of `chunk`, sent as `sent`; count what succeeded, return what did not."""
    answer = _Answer()
    index = lines.index
    sent_at = _admitted(client, lines.mode)
    try:
        # One `client.bulk` of the joined text, not the bulk helper's `streaming_bulk`: `_chunks`
        # has cut the request by count and bytes already and made every line, and the helper would
        # measure and join each line again (a sixth of an export's client CPU) only to send the
        # same body.
        response = client.bulk(body=_body(sent), filter_path=BULK_ANSWER)
        stats.reached += 1  # answered: OpenSearch may have applied some of it
        results = response["items"]
        if len(results) != len(chunk):
            raise SinkError(
                f"OpenSearch answered {len(results)} items to a bulk request of {len(chunk)} "
                f"to index {index!r}"
            )
        # every item indexed, or deleted (a delete of an absent document too)
        if not response["errors"]:
            deletes = sum(write.document is None for write in chunk)
            stats.indexed += len(chunk) - deletes
            stats.deleted += deletes
            return answer
        for write, result in zip(chunk, results, strict=True):
            ((op_type, outcome),) = result.items()
            kind = classify_item(op_type, outcome)
            if kind == ItemOutcome.INDEXED:
                stats.indexed += 1
            elif kind == ItemOutcome.DELETED:
                stats.deleted += 1
            elif kind == ItemOutcome.SUPERSEDED:
                stats.superseded += 1
            else:
                listed = {
                    ItemOutcome.RETRY: answer.retry,
                    ItemOutcome.DEAD_LETTER: answer.refused,
                }.get(kind, answer.failed)
                listed.append(
                    (write, outcome.get("status", 0), _reason(outcome, write.index or index))
                )
    except TransportError as exc:
        # The whole request failed (after the client's own immediate retries). Overload and lost
        # connections are retried item by item with backoff like a 429 item; anything else fails
        # the batch.
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        _count_failed(stats, status, sent_at + capabilities_of(client).landing_seconds)
        if status == TOO_LARGE:
            answer.too_large = f"{status} {exc.error}"
        elif isinstance(exc, OpenSearchConnectionError) or status in RETRYABLE_REQUEST_STATUSES:
            # One request per chunk: when it fails, no item of it has an answer yet.
            answer.retry = [(write, status, f"bulk request failed: {exc}") for write in chunk]
        else:
            raise _refused_request(exc, status, index) from None
    return answer


def _refused_request(exc: TransportError, status: int, index: str) -> SinkError:
    """The error that fails the batch for a bulk request refused whole: denied (403), or else."""
    if status == FORBIDDEN:
        return DestinationDenied(
            f"OpenSearch denied a bulk request to index {index!r} ({status} "
            f"{_request_error(exc)}): {DENIED}"
        )
    return SinkError(
        f"OpenSearch refused a bulk request to index {index!r}: {status} {_request_error(exc)}"
    )


def _count_failed(stats: SinkStats, status: int, landing: float) -> None:
    """Count a request that failed whole.

    It was reached unless refused unapplied. Unanswered (status 0), it may still land until
    `landing`.
    """
    stats.reached += status not in (*UNAPPLIED_REQUEST_STATUSES, TOO_LARGE)  # or a lost answer
    if status == 0:
        stats.landing_until = max(stats.landing_until, landing)


def _admitted(client: OpenSearch, mode: BulkMode) -> float:
    """When a request may leave (`time.time()`): now, or, fenced, once the lease outlives it."""
    capabilities = capabilities_of(client)
    if mode.fence is not None and not capabilities.versions:
        mode.fence.admit(capabilities.fence_seconds)
    return time.time()


def _body(sent: list[tuple[str, str | None]]) -> str:
    """A bulk request's body: each action line, and its document when it has one.

    Each of them ends in a newline.
    """
    return "".join(
        f"{line}\n" if document is None else f"{line}\n{document}\n" for line, document in sent
    )


def _request_error(exc: TransportError) -> str:
    """A failed request's error as `type: reason`, when its body is OpenSearch's error JSON."""
    error = exc.info.get("error") if isinstance(exc.info, dict) else None
    if isinstance(error, dict):
        return f"{error.get('type')}: {error.get('reason')}"
    return str(exc.error)


@dataclass
class _Chunk:
    """The writes of one bulk request and what is sent for them: (action line, document) each."""

    writes: list[Write] = field(default_factory=list)
    sent: list[tuple[str, str | None]] = field(default_factory=list)
    size: int = 0  # bytes of body


def _chunks(
    config: OpenSearchConfig, lines: ActionLines, writes: Iterable[Write]
) -> Iterator[_Chunk | Refusal]:
    """The writes in order, as bulk requests within `bulk_chunk_size` and `max_chunk_bytes`.

    A request holds at most `bulk_chunk_size` writes and `max_chunk_bytes` bytes of body, counted as
    `_body` joins them: each line and document with its newline.

    A write whose action alone is over `max_chunk_bytes` comes as its refusal, a 413, in no chunk:
    no request within the limit can carry it. So does an index of an `_id` OpenSearch refuses, a
    400, which would fail the whole request. A delete of such an id is dropped: no document has it.
    """
    limit = config.max_chunk_bytes
    chunk = _Chunk()
    for write in writes:
        if refused_id(write.doc_id):
            if write.document is not None:
                refused = f"the `_id` is empty or over OpenSearch's {MAX_ID_BYTES} bytes: not sent"
                yield write, 400, refused
            continue
        line, document = lines.line(write), write.document
        size = _text_bytes(line) + 1 + (0 if document is None else _text_bytes(document) + 1)
        if size > limit:
            yield (
                write,
                TOO_LARGE,
                (
                    f"the document's bulk action is {size} bytes, "
                    f"over opensearch.max_chunk_bytes ({limit}): not sent"
                ),
            )
            continue
        if chunk.writes and chunk.size + size > limit:
            yield chunk
            chunk = _Chunk()
        chunk.writes.append(write)
        chunk.sent.append((line, document))
        chunk.size += size
        if len(chunk.writes) == config.bulk_chunk_size:
            yield chunk
            chunk = _Chunk()
    if chunk.writes:
        yield chunk


def _text_bytes(text: str) -> int:
    """The UTF-8 length of `text`, without encoding it when it is ASCII (most documents are)."""
    return len(text) if text.isascii() else len(text.encode())


def _backoff(config: OpenSearchConfig, attempt: int) -> float:
    """Exponential, capped, with jitter so that many executors do not retry in step."""
    ceiling = min(config.max_backoff_seconds, config.initial_backoff_seconds * 2**attempt)
    return random.uniform(ceiling / 2, ceiling)

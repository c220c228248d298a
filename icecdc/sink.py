"""Versioned bulk writes to OpenSearch, with opensearch-py's bulk helper.

Every write carries `version_type=external` and the change's sequence number as version, so a
replayed or reordered write never overwrites a newer document: OpenSearch answers it 409, which
counts as done. A delete of an absent document answers 404 and also counts as done (OpenSearch
keeps the version as a tombstone, so an older index of it is still refused for a while).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch, RequestsHttpConnection, helpers
from opensearchpy.exceptions import AuthenticationException, AuthorizationException, RequestError, TransportError
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError

from icecdc.changelog import Write
from icecdc.config import OpenSearchConfig
from icecdc.errors import SinkError

log = logging.getLogger(__name__)

# How many refused documents a SinkError quotes.
ERRORS_QUOTED = 5
# Whole bulk requests answered with these are retried with backoff, like items answered 429 or 5xx.
RETRYABLE_REQUEST_STATUSES = (429, 500, 502, 503, 504)


@dataclass
class SinkStats:
    indexed: int = 0
    deleted: int = 0
    superseded: int = 0  # refused because the index holds this or a newer version already
    retried: int = 0  # items answered 429 or 5xx and sent again
    dead_lettered: int = 0  # refused for good, kept in the dead letters

    def add(self, other: SinkStats) -> None:
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)


def open_client(config: OpenSearchConfig) -> OpenSearch:
    options: dict[str, Any] = {
        "hosts": [config.url],
        "verify_certs": config.verify_certs,
        "timeout": 60,
        "max_retries": config.max_retries,
        "retry_on_status": (502, 503, 504),
        "retry_on_timeout": True,
    }
    if config.username is not None:
        options["http_auth"] = (config.username, config.password)
    elif config.aws_region is not None:
        import boto3  # only the SigV4 path needs it
        from opensearchpy import AWSV4SignerAuth

        credentials = boto3.Session().get_credentials()
        options["http_auth"] = AWSV4SignerAuth(credentials, config.aws_region, config.aws_service)
        options["connection_class"] = RequestsHttpConnection
    return OpenSearch(**options)


def check_reachable(client: OpenSearch, url: str) -> None:
    """Fail fast, before anything is written, when OpenSearch cannot be reached or refuses us."""
    try:
        client.info()
    except (AuthenticationException, AuthorizationException) as exc:
        raise SinkError(
            f"OpenSearch at {url} refused the credentials ({exc.status_code}): check opensearch.username/password or the AWS identity"
        ) from None
    except OpenSearchConnectionError as exc:
        raise SinkError(f"OpenSearch at {url} is unreachable: {exc.info if exc.info else exc}") from None
    except TransportError as exc:
        raise SinkError(f"OpenSearch at {url} answered {exc.status_code}: {exc.error}") from None


def ensure_index(client: OpenSearch, index: str) -> None:
    """Create the index when it does not exist, so an empty table still has one."""
    if client.indices.exists(index=index):
        return
    try:
        client.indices.create(index=index)
    except RequestError as exc:
        if exc.error != "resource_already_exists_exception":  # created meanwhile by another writer
            raise


def reset_index(client: OpenSearch, index: str) -> None:
    """Delete and recreate the index with its mappings: the only way to let versions go backwards."""
    mappings: dict[str, Any] = {}
    if client.indices.exists(index=index):
        mappings = client.indices.get_mapping(index=index).get(index, {}).get("mappings", {})
        client.indices.delete(index=index)
    client.indices.create(index=index, body={"mappings": mappings} if mappings else None)


def delete_older(client: OpenSearch, config: OpenSearchConfig, index: str, version: int, slice_id: int, slices: int) -> int:
    """Delete the documents of one scroll slice whose version is below `version`; return how many.

    The deletes carry `version` as external version, so a document rewritten meanwhile by a newer
    change is refused, not deleted.
    """
    query: dict[str, Any] = {"query": {"match_all": {}}, "version": True, "_source": False}
    if slices > 1:
        query["slice"] = {"id": slice_id, "max": slices}
    hits = helpers.scan(client, index=index, query=query, scroll="10m", size=1000)
    older = (Write(hit["_id"], version, None) for hit in hits if hit["_version"] < version)
    return write_documents(client, config, index, older).deleted


def bulk_actions(index: str, writes: Iterable[Write], version_type: str = "external") -> Iterator[dict[str, Any]]:
    for write in writes:
        action: dict[str, Any] = {
            "_index": index,
            "_id": write.doc_id,
            "version": write.version,
            "version_type": version_type,
        }
        if write.document is None:
            action["_op_type"] = "delete"
        else:
            action["_op_type"] = "index"
            action["_source"] = write.document  # already JSON text: the serializer passes strings through
        yield action


# A refused item: the write, OpenSearch's status for it, and its reason.
Refusal = tuple[Write, int, str]


def write_documents(
    client: OpenSearch,
    config: OpenSearchConfig,
    index: str,
    writes: Iterable[Write],
    dead_letter: Callable[[list[Refusal]], None] | None = None,
    version_type: str = "external",
) -> SinkStats:
    """Write every document in bulk chunks.

    Items answered 429 or 5xx are retried with bounded exponential backoff and jitter. Items
    refused for good go to `dead_letter` (without one, they fail the batch). A lost connection
    fails the batch: the transport has retried it already, and the checkpoint must not move.
    A resync writes with `external_gte`, so that its export also rewrites documents of equal version.
    """
    stats = SinkStats()
    for chunk in _chunks(writes, config.bulk_chunk_size):
        for attempt in range(config.max_retries + 1):
            retry, refused = _write_chunk(client, index, chunk, stats, version_type)
            if refused:
                if dead_letter is None:
                    quoted = "; ".join(f"{w.doc_id}: {status} {reason}" for w, status, reason in refused[:ERRORS_QUOTED])
                    raise SinkError(f"OpenSearch refused {len(refused)} documents of index {index!r}: {quoted}")
                dead_letter(refused)
                stats.dead_lettered += len(refused)
            if not retry:
                break
            if attempt == config.max_retries:
                raise SinkError(
                    f"OpenSearch kept answering {retry[0][1]} for {len(retry)} documents of index {index!r} "
                    f"after {config.max_retries} retries: {retry[0][2]}"
                )
            chunk = [write for write, _, _ in retry]
            stats.retried += len(chunk)
            time.sleep(_backoff(config, attempt))
    return stats


def _write_chunk(
    client: OpenSearch, index: str, chunk: list[Write], stats: SinkStats, version_type: str
) -> tuple[list[Refusal], list[Refusal]]:
    """One bulk request; count what succeeded, return (retryable, refused for good)."""
    retry: list[Refusal] = []
    refused: list[Refusal] = []
    try:
        # streaming_bulk answers one result per action, in order, so results pair with the chunk.
        results = helpers.streaming_bulk(
            client,
            bulk_actions(index, chunk, version_type),
            chunk_size=len(chunk),
            max_retries=0,
            raise_on_error=False,
            raise_on_exception=True,
        )
        for write, (ok, result) in zip(chunk, results):
            op_type, outcome = next(iter(result.items()))
            status = outcome.get("status", 0)
            if ok and op_type == "index":
                stats.indexed += 1
            elif ok or (op_type == "delete" and status == 404):
                stats.deleted += 1
            elif status == 409:
                stats.superseded += 1
            elif status == 429 or status >= 500:
                retry.append((write, status, str(outcome.get("error"))))
            else:
                refused.append((write, status, str(outcome.get("error"))))
    except TransportError as exc:
        # The whole request failed (after the client's own immediate retries). Overload and lost
        # connections are retried item by item with backoff like a 429 item; anything else fails the batch.
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        if isinstance(exc, OpenSearchConnectionError) or status in RETRYABLE_REQUEST_STATUSES:
            # One request per chunk: when it fails, no item of it has an answer yet.
            return [(write, status, f"bulk request failed: {exc}") for write in chunk], []
        raise SinkError(f"OpenSearch failed a bulk request to index {index!r}: {exc}") from None
    return retry, refused


def _chunks(writes: Iterable[Write], size: int) -> Iterator[list[Write]]:
    chunk: list[Write] = []
    for write in writes:
        chunk.append(write)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _backoff(config: OpenSearchConfig, attempt: int) -> float:
    """Exponential, capped, with jitter so that many executors do not retry in step."""
    ceiling = min(config.max_backoff_seconds, config.initial_backoff_seconds * 2**attempt)
    return random.uniform(ceiling / 2, ceiling)

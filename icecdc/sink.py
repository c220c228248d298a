"""Versioned bulk writes to OpenSearch, with opensearch-py's bulk helper.

Every write carries `version_type=external` and the change's sequence number as version, so a
replayed or reordered write never overwrites a newer document: OpenSearch answers it 409, which
counts as done. A delete of an absent document answers 404 and also counts as done (OpenSearch
keeps the version as a tombstone, so an older index of it is still refused for a while).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from opensearchpy import OpenSearch, RequestsHttpConnection, helpers
from opensearchpy.exceptions import RequestError

from icecdc.changelog import Write
from icecdc.config import OpenSearchConfig
from icecdc.errors import SinkError

log = logging.getLogger(__name__)

# How many refused documents a SinkError quotes.
ERRORS_QUOTED = 5


@dataclass
class SinkStats:
    indexed: int = 0
    deleted: int = 0
    superseded: int = 0  # refused because the index holds this or a newer version already

    def add(self, other: SinkStats) -> None:
        self.indexed += other.indexed
        self.deleted += other.deleted
        self.superseded += other.superseded


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


def ensure_index(client: OpenSearch, index: str) -> None:
    """Create the index when it does not exist, so an empty table still has one."""
    if client.indices.exists(index=index):
        return
    try:
        client.indices.create(index=index)
    except RequestError as exc:
        if exc.error != "resource_already_exists_exception":  # created meanwhile by another writer
            raise


def bulk_actions(index: str, writes: Iterable[Write]) -> Iterator[dict[str, Any]]:
    for write in writes:
        action: dict[str, Any] = {
            "_index": index,
            "_id": write.doc_id,
            "version": write.version,
            "version_type": "external",
        }
        if write.document is None:
            action["_op_type"] = "delete"
        else:
            action["_op_type"] = "index"
            action["_source"] = write.document  # already JSON text: the serializer passes strings through
        yield action


def write_documents(client: OpenSearch, config: OpenSearchConfig, index: str, writes: Iterable[Write]) -> SinkStats:
    """Write every document; raise SinkError if OpenSearch refused any for a reason other than its version."""
    stats = SinkStats()
    refused: list[str] = []
    results = helpers.streaming_bulk(
        client,
        bulk_actions(index, writes),
        chunk_size=config.bulk_chunk_size,
        max_retries=config.max_retries,  # 429 answers, with exponential backoff
        initial_backoff=1,
        max_backoff=30,
        raise_on_error=False,
        raise_on_exception=False,
    )
    for ok, result in results:
        op_type, outcome = next(iter(result.items()))
        status = outcome.get("status", 0)
        if ok and op_type == "index":
            stats.indexed += 1
        elif ok or (op_type == "delete" and status == 404):
            stats.deleted += 1
        elif status == 409:
            stats.superseded += 1
        else:
            refused.append(f"{outcome.get('_id')}: {status} {outcome.get('error')}")
    if refused:
        quoted = "; ".join(refused[:ERRORS_QUOTED])
        raise SinkError(f"OpenSearch refused {len(refused)} documents of index {index!r}: {quoted}")
    return stats

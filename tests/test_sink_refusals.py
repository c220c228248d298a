"""Only a document's own fault becomes a dead letter.

Everything here talks real HTTP to osmem, which answers blocks, closed indices and mapping
conflicts as OpenSearch does; the test proxy (tests/faults.py) stands in only for what osmem cannot
produce on its own (a 403 from fine-grained access control, a payload limit). A refusal that is
not the document's fault must fail the batch, dead-letter nothing and leave the checkpoint alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from icecdc.config import OpenSearchConfig, parse_config
from icecdc.destination.client import open_client
from icecdc.destination.index import IndexAlias
from icecdc.destination.sink import ItemOutcome, Refusal, classify_item, write_documents
from icecdc.errors import SinkError
from icecdc.model import Write
from tests.support import faults
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline
from tests.support.proxied import converged, dead_letters, proxied_raw, run
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

INDEX = "things"


def sink_config(url: str, **settings: Any) -> OpenSearchConfig:
    return OpenSearchConfig(url=url, initial_backoff_seconds=0.01, max_backoff_seconds=0.05, **settings)


class Letters:
    """A dead-letter callback that keeps what it is handed."""

    def __init__(self) -> None:
        self.refused: list[Refusal] = []

    def __call__(self, refused: list[Refusal]) -> None:
        self.refused += refused

    @property
    def ids(self) -> list[str]:
        return sorted(write.doc_id for write, _, _ in self.refused)


def docs(*ids: int, version: int = 1) -> list[Write]:
    return [Write(str(i), version, f'{{"n":{i}}}') for i in ids]


def ids_in(client: OpenSearch, index: str) -> list[str]:
    client.indices.refresh(index=index)
    return sorted(h["_id"] for h in client.search(index=index, body={"size": 1000})["hits"]["hits"])


# -- before writing: the index must accept writes -------------------------------------------------


@pytest.mark.parametrize("block", ["index.blocks.write", "index.blocks.read_only", "index.blocks.read_only_allow_delete"])
@pytest.mark.domain_only  # index blocks are settings a collection does not document
def test_a_blocked_index_fails_the_sync_before_anything_is_written(
    pipeline: Pipeline, fault_proxy: FaultProxy, tmp_path: Path, block: str
) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    dead = tmp_path / "dead-letters"
    config = parse_config(proxied_raw(pipeline, fault_proxy, dead_letter={"path": str(dead)}))
    run(pipeline, config)
    checkpoint = pipeline.store().get_checkpoint("db.orders")
    pipeline.client.indices.put_settings(index="orders", body={block: True})
    table.append(rows(4, 5))
    bulks = fault_proxy.count("_bulk")

    # the alias `orders` names its generation, which holds the block
    with pytest.raises(SinkError, match=rf"index 'orders' does not accept writes: {block} on index 'orders-1' is set; nothing"):
        run(pipeline, config)
    assert fault_proxy.count("_bulk") == bulks  # refused before the first bulk request
    assert pipeline.store().get_checkpoint("db.orders") == checkpoint
    assert not dead.exists() or dead_letters(dead) == []

    pipeline.client.indices.put_settings(index="orders", body={block: None})  # the operator clears the block
    run(pipeline, config)
    converged(pipeline, config)


@pytest.mark.parametrize("scope", ["persistent", "transient"])
@pytest.mark.parametrize("block", ["cluster.blocks.read_only", "cluster.blocks.read_only_allow_delete"])
def test_a_read_only_cluster_fails_ensure_index_naming_the_block(osmem_clone: Any, scope: str, block: str) -> None:
    client = OpenSearch(hosts=[osmem_clone.url])
    client.indices.create(index="existing")
    client.cluster.put_settings(body={scope: {block: True}})
    for index in ("existing", "absent"):  # the cluster's block is named before creating an index fails on it
        with pytest.raises(SinkError, match=rf"index '{index}' does not accept writes: {block} \({scope}\) is set"):
            IndexAlias(client, index).ensure()
    client.cluster.put_settings(body={scope: {block: None}})
    IndexAlias(client, "absent").ensure()
    assert client.indices.exists(index="absent")


def test_an_unblocked_index_passes_and_is_created_when_absent(osmem_clone: Any) -> None:
    client = OpenSearch(hosts=[osmem_clone.url])
    IndexAlias(client, INDEX).ensure()
    client.indices.put_settings(index=INDEX, body={"index.blocks.write": False})  # present but false: no block
    IndexAlias(client, INDEX).ensure()
    assert client.indices.exists(index=INDEX)


# -- answers without refusals ----------------------------------------------------------------------


def test_requests_answered_without_errors_count_each_write_by_its_kind(osmem_clone: Any) -> None:
    """A bulk answer whose `errors` is false is counted from the writes sent (a delete of an absent
    document is answered 404 without an error); one with errors item by item."""
    client = OpenSearch(hosts=[osmem_clone.url])
    config = sink_config(osmem_clone.url, bulk_chunk_size=3)

    first = write_documents(client, config, INDEX, [*docs(1, 2, 3), Write("9", 1, None), Write("1", 2, None)])
    again = write_documents(client, config, INDEX, [*docs(2, 4), Write("3", 1, None)])

    assert (first.indexed, first.deleted, first.superseded) == (3, 2, 0)
    assert (again.indexed, again.deleted, again.superseded) == (1, 0, 2)
    assert ids_in(client, INDEX) == ["2", "3", "4"]


def test_a_failed_request_stops_the_batch_before_any_later_write_is_read(osmem_clone: Any) -> None:
    """A request refused for a reason that is not the documents' fails the batch there: requests go
    in line, so none of the later writes is read, let alone sent."""
    client = OpenSearch(hosts=[osmem_clone.url])
    client.indices.create(index=INDEX, body={"mappings": {"dynamic": "strict", "properties": {"n": {"type": "long"}}}})
    pulled: list[Write] = []

    def writes() -> Iterator[Write]:
        for write in [*docs(1), Write("2", 1, '{"n":2,"extra":true}'), *docs(*range(3, 9))]:
            pulled.append(write)
            yield write

    with pytest.raises(SinkError, match="strict_dynamic_mapping_exception"):
        write_documents(client, sink_config(osmem_clone.url, bulk_chunk_size=2), INDEX, writes(), Letters())
    assert [write.doc_id for write in pulled] == ["1", "2"]
    assert ids_in(client, INDEX) == ["1"]


# -- the document's own fault: dead letters --------------------------------------------------------


def test_mapping_conflicts_are_dead_lettered_and_the_rest_is_written(osmem_clone: Any) -> None:
    client = OpenSearch(hosts=[osmem_clone.url])
    client.indices.create(
        index=INDEX, body={"mappings": {"dynamic": "strict", "properties": {"n": {"type": "long"}, "s": {"type": "keyword"}}}}
    )
    letters = Letters()
    writes = [*docs(1, 2), Write("3", 1, '{"n":"three"}')]
    stats = write_documents(client, sink_config(osmem_clone.url), INDEX, writes, letters)

    assert (stats.indexed, stats.dead_lettered) == (2, 1)
    assert ids_in(client, INDEX) == ["1", "2"]
    reasons = {write.doc_id: (status, reason) for write, status, reason in letters.refused}
    assert reasons["3"][0] == 400 and reasons["3"][1].startswith("mapper_parsing_exception: failed to parse field [n]")


def test_a_field_the_mapping_lacks_fails_the_batch_and_is_never_dead_lettered(osmem_clone: Any) -> None:
    """Documents carry exactly the schema's columns: a strict mapping refusing one is the mapping's
    fault (icecdc's, an override's, a template's), and dead-lettering would lose the row for good."""
    client = OpenSearch(hosts=[osmem_clone.url])
    client.indices.create(index=INDEX, body={"mappings": {"dynamic": "strict", "properties": {"n": {"type": "long"}}}})
    letters = Letters()
    with pytest.raises(SinkError, match="not the documents' fault.*strict_dynamic_mapping_exception"):
        write_documents(client, sink_config(osmem_clone.url), INDEX, [*docs(1), Write("4", 1, '{"n":4,"extra":true}')], letters)
    assert letters.refused == []


def test_a_request_too_large_is_split_and_only_a_lone_oversized_document_is_dead_lettered(
    fault_proxy: FaultProxy, osmem_clone: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faults, "MAX_BODY_BYTES", 2000)  # the proxy answers 413 above this, like a payload limit
    client = OpenSearch(hosts=[fault_proxy.url], max_retries=0)
    big = Write("big", 1, '{"n":"' + "x" * 3000 + '"}')
    writes = [*docs(*range(1, 11)), big, *docs(*range(11, 21))]
    letters = Letters()
    stats = write_documents(client, sink_config(fault_proxy.url, bulk_chunk_size=21), INDEX, writes, letters)

    assert (stats.indexed, stats.dead_lettered) == (20, 1)
    assert ids_in(OpenSearch(hosts=[osmem_clone.url]), INDEX) == sorted(str(i) for i in range(1, 21))
    ((write, status, reason),) = letters.refused
    assert (write.doc_id, status) == ("big", 413) and "too large" in reason
    forwarded = [seen.items for seen in fault_proxy.seen("_bulk")]  # the proxy logs no request it answered 413
    assert sum(forwarded) == 20 and max(forwarded) <= 11  # the chunk of 21 was split in halves, and again


# -- not the document's fault: the batch fails, nothing is dead-lettered ---------------------------


@pytest.mark.parametrize(
    ("block", "status"),
    [("index.blocks.write", 403), ("index.blocks.read_only", 403), ("index.blocks.read_only_allow_delete", 429)],
)
def test_a_block_set_after_the_check_fails_the_batch_without_dead_letters_or_retries(
    fault_proxy: FaultProxy, block: str, status: int
) -> None:
    config = sink_config(fault_proxy.url)
    client = open_client(config)
    IndexAlias(client, INDEX).ensure()  # passes: the block comes after it
    client.indices.put_settings(index=INDEX, body={block: True})
    letters = Letters()
    bulks = fault_proxy.count("_bulk")

    with pytest.raises(SinkError) as failed:
        write_documents(client, config, INDEX, docs(1, 2, 3), letters)
    message = str(failed.value)
    assert f"refused 3 writes to index {INDEX!r}" in message and "nothing was dead-lettered" in message
    assert f"{status} cluster_block_exception: index [{INDEX}-1] blocked by" in message  # the alias's generation
    assert letters.refused == []
    assert fault_proxy.count("_bulk") == bulks + 1  # a block is not overload: not retried, even when answered 429


def test_a_closed_index_answers_400_and_still_fails_the_batch(osmem_clone: Any) -> None:
    client = OpenSearch(hosts=[osmem_clone.url])
    IndexAlias(client, INDEX).ensure()
    client.indices.close(index=INDEX)
    letters = Letters()
    with pytest.raises(SinkError, match=rf"400 index_closed_exception: closed on index '{INDEX}'"):
        write_documents(client, sink_config(osmem_clone.url), INDEX, docs(1, 2), letters)
    assert letters.refused == []


@pytest.mark.domain_only  # a domain's fine-grained access control refuses with its 403
def test_a_403_from_access_control_fails_the_sync_and_nothing_is_dead_lettered(
    pipeline: Pipeline, fault_proxy: FaultProxy, tmp_path: Path
) -> None:
    """A missing role mapping under fine-grained access control answers every item 403."""
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    dead = tmp_path / "dead-letters"
    config = parse_config(proxied_raw(pipeline, fault_proxy, dead_letter={"path": str(dead)}))
    reason = "no permissions for [indices:data/write/bulk[s]] and User [name=glue-role, backend_roles=[]]"
    fault_proxy.reject_documents(lambda item: True, status=403, error_type="security_exception", reason=reason)

    with pytest.raises(SinkError, match=rf"403 security_exception: {re.escape(reason)} on index 'orders'"):
        run(pipeline, config)
    assert pipeline.store().get_checkpoint("db.orders") is None
    assert not dead.exists() or dead_letters(dead) == []

    fault_proxy.clear()  # the role mapping is fixed: the rerun converges
    run(pipeline, config)
    converged(pipeline, config)


# Item answers as OpenSearch gives them in a bulk response ({"status": ..., "error": {"type": ...,
# "reason": ...}}), also for statuses osmem does not produce. None: an answer without an error.
@pytest.mark.parametrize(
    ("op_type", "status", "error_type", "expected"),
    [
        ("index", 201, None, ItemOutcome.INDEXED),
        ("delete", 200, None, ItemOutcome.DELETED),
        ("delete", 404, None, ItemOutcome.DELETED),  # result "not_found": the document is absent already
        ("index", 409, "version_conflict_engine_exception", ItemOutcome.SUPERSEDED),
        ("index", 429, "es_rejected_execution_exception", ItemOutcome.RETRY),
        ("index", 503, "unavailable_shards_exception", ItemOutcome.RETRY),
        ("index", 400, "mapper_parsing_exception", ItemOutcome.DEAD_LETTER),
        ("index", 400, "document_parsing_exception", ItemOutcome.DEAD_LETTER),
        ("index", 400, "illegal_argument_exception", ItemOutcome.DEAD_LETTER),
        ("index", 413, "illegal_argument_exception", ItemOutcome.DEAD_LETTER),
        ("index", 401, "security_exception", ItemOutcome.FAIL),
        ("index", 403, "security_exception", ItemOutcome.FAIL),
        ("index", 404, "index_not_found_exception", ItemOutcome.FAIL),
        ("delete", 404, "index_not_found_exception", ItemOutcome.FAIL),
        ("index", 400, "index_closed_exception", ItemOutcome.FAIL),
        ("index", 400, "some_new_exception", ItemOutcome.FAIL),  # unknown: never guessed to be the document's fault
        ("index", 429, "cluster_block_exception", ItemOutcome.FAIL),  # flood stage: a block, not overload
        ("index", 403, "cluster_block_exception", ItemOutcome.FAIL),
    ],
)
def test_classify_item(op_type: str, status: int, error_type: str | None, expected: ItemOutcome) -> None:
    outcome: dict[str, Any] = {"_index": INDEX, "_id": "1", "status": status}
    if error_type is None:
        outcome["result"] = "not_found" if status == 404 else "created"
    else:
        outcome["error"] = {"type": error_type, "reason": "as OpenSearch words it"}
    assert classify_item(op_type, outcome) == expected

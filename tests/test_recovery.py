"""Crashes and refused writes: the checkpoint stays, and the next run converges."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo

from icecdc.config import parse_config
from icecdc.deadletters import DeadLetters
from icecdc.destination.sink import SinkStats, write_documents
from icecdc.engines import Engines
from icecdc.errors import ProcessingError, SinkError
from icecdc.model import Checkpoint, PassPoint, WorkItem, Write
from icecdc.planning import plan_table
from icecdc.state import SqliteStateStore
from icecdc.status import table_status
from icecdc.sync import process_table, sync
from icecdc.testing.commits import update
from tests.support.pipeline import Pipeline
from tests.support.probes import Crash, crash_at
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection


class CrashBeforeCheckpoint(SqliteStateStore):
    """The real store, with the process dying where the checkpoint would be written."""

    def complete(
        self, table_name: str, checkpoint: Checkpoint | None, items: Iterable[WorkItem], *args: Any, **kwargs: Any
    ) -> None:
        if checkpoint is not None:
            raise Crash("killed after the writes, before the checkpoint")
        super().complete(table_name, checkpoint, items, *args, **kwargs)


def test_crash_after_the_writes_and_before_the_checkpoint_converges(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    config = pipeline.config({"name": "db.orders"})
    pipeline.sync(config, "db.orders")
    checkpoint = pipeline.store().get_checkpoint("db.orders")

    update(table, EqualTo("id", 2), lambda r: {**r, "status": "paid"})
    table.delete(EqualTo("id", 3))
    crashing = CrashBeforeCheckpoint(pipeline.workdir / "state.db")
    table_config = config.table("db.orders")
    plan_table(table, table_config, crashing, ("id",))
    with pytest.raises(Crash):
        process_table(Engines(config.engine, spark=pipeline.spark), table, table_config, crashing, config.opensearch, ("id",))
    assert pipeline.store().get_checkpoint("db.orders") == checkpoint  # the writes happened, the checkpoint did not move
    assert sorted(pipeline.documents("orders")) == ["1", "2"]

    # more commits land before the rerun; the rerun replays the batch and goes on
    update(table, EqualTo("id", 2), lambda r: {**r, "status": "shipped"})
    table.append(rows(3, status="again"))
    result = pipeline.sync(config, "db.orders")
    assert result.snapshots == 6  # pyiceberg commits an overwrite as a delete snapshot and an append snapshot
    assert pipeline.store().get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id


# A mapping override that the documents' status text cannot satisfy.
STATUS_AS_INTEGER = {"properties": {"status": {"type": "integer"}}}


def test_documents_opensearch_refuses_fail_the_batch_without_advancing(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    # a mapping that the documents' status text cannot satisfy (an index of the user's would be refused)
    config = pipeline.config({"name": "db.orders", "mappings": STATUS_AS_INTEGER})
    with pytest.raises(SinkError, match=r"refused 2 documents of index 'orders'.*mapper_parsing_exception"):
        sync(config, pipeline.spark)
    assert pipeline.store().get_checkpoint("db.orders") is None
    assert len(pipeline.store().pending_items("db.orders")) == 1

    # the operator fixes the mapping and deletes the index made with the wrong one; the rerun converges
    pipeline.client.indices.delete(index="orders-1")
    pipeline.sync(pipeline.config({"name": "db.orders"}), "db.orders")


@pytest.mark.domain_only  # external versions: a collection has none, its order is the lease's
def test_a_replayed_older_write_never_overwrites_a_newer_document(pipeline: Pipeline) -> None:
    config = pipeline.config({"name": "db.orders"})

    def write(writes: list[Write]) -> SinkStats:
        return write_documents(pipeline.client, config.opensearch, "orders", writes)

    assert write([Write("1", 5, '{"v":"new"}'), Write("2", 5, None)]).indexed == 1
    replay = write([Write("1", 4, '{"v":"old"}'), Write("2", 4, '{"v":"resurrected"}'), Write("1", 5, '{"v":"same"}')])
    assert (replay.indexed, replay.superseded) == (0, 3)
    assert pipeline.documents("orders") == {"1": '{"v":"new"}'}


def test_documents_refused_for_good_go_to_dead_letters_and_the_batch_completes(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    raw = pipeline.config_dict([{"name": "db.orders", "mappings": STATUS_AS_INTEGER}])
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    config = parse_config(raw)

    (result,) = sync(config, pipeline.spark, ["db.orders"])
    assert (result.writes.dead_lettered, result.writes.indexed) == (2, 0)
    assert pipeline.store().get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id
    letters = DeadLetters(config.dead_letter).read("db.orders")
    assert sorted(letter["doc_id"] for letter in letters) == ["1", "2"]
    letter = letters[0]
    assert (letter["status"], letter["snapshot_id"], letter["sequence_number"]) == (400, table.current_snapshot().snapshot_id, 1)
    assert "mapper_parsing_exception" in letter["reason"] and '"status":"new"' in letter["document"]
    status = table_status(table, config.table("db.orders"), pipeline.store(), time.time(), DeadLetters(config.dead_letter))
    assert status.dead_letters == 2


def test_null_identifiers_go_to_dead_letters(pipeline: Pipeline) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = pipeline.catalog.create_table("db.loose", schema=schema)
    table.append(pa.table({"id": [1, None, 3], "v": ["a", "b", "c"]}, schema=schema))
    raw = pipeline.config_dict([{"name": "db.loose", "identifier_columns": ["id"]}])
    without_dead_letters = parse_config(raw)
    with pytest.raises(ProcessingError, match=r"'db.loose': identifier column 'id' is null in file .*\.parquet \(snapshot"):
        sync(without_dead_letters, pipeline.spark, ["db.loose"])
    assert pipeline.store().get_checkpoint("db.loose") is None

    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    sync(parse_config(raw), pipeline.spark, ["db.loose"])
    assert sorted(pipeline.documents("loose")) == ["1", "3"]
    (letter,) = DeadLetters(raw["dead_letter"]["path"]).read("db.loose")
    assert letter["doc_id"] is None and letter["document"] == '{"id":null,"v":"b"}'


def test_a_retry_after_a_pass_that_died_writing_two_indexes_collapses_no_run(pipeline: Pipeline) -> None:
    """The model regression's case through the pass that writes several indexes in one read: a
    whole-table overwrite (a delete snapshot, then an append of the same rows) whose delete a
    pass capped at one file wrote to both indexes before it died. The uncapped retry must not
    collapse the two commits into one rewrite (the rows written back would cancel against the
    deletes the dead pass applied, and their documents stay deleted)."""
    table = orders(pipeline, partitioned=False)
    table.append(rows(0, 1, 2, 3))
    indexes = {"name": "db.orders", "indexes": [{"index": "orders-a"}, {"index": "orders-b"}]}
    pipeline.sync(pipeline.config(indexes), "db.orders")
    table.overwrite(rows(0, 1))  # pyiceberg: a delete snapshot, then an append
    capped = parse_config({**pipeline.config_dict([indexes]), "batch": {"max_files": 1}})
    with pytest.raises(Crash):
        sync(capped, pipeline.spark, ["db.orders"], probe=crash_at(PassPoint.WRITTEN))
    assert pipeline.documents("orders-a") == pipeline.documents("orders-b") == {}  # the delete was written
    pipeline.sync(pipeline.config(indexes), "db.orders")  # asserts both indexes equal the table

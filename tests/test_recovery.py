"""Crashes and refused writes: the checkpoint stays, and the next run converges."""

from __future__ import annotations

from typing import Iterable

import pytest
from pyiceberg.expressions import EqualTo

from icecdc.errors import SinkError
from icecdc.changelog import Write
from icecdc.planning import plan_table
from icecdc.processing import process_table, sync
from icecdc.sink import write_documents
from icecdc.state import Checkpoint, SqliteStateStore, WorkItem
from icecdc.writers import update
from tests.conftest import Pipeline
from tests.test_sync import orders, rows


class Crash(Exception):
    pass


class CrashBeforeCheckpoint(SqliteStateStore):
    """The real store, with the process dying where the checkpoint would be written."""

    def complete(self, table: str, checkpoint: Checkpoint | None, items: Iterable[WorkItem]) -> None:
        if checkpoint is not None:
            raise Crash("killed after the writes, before the checkpoint")
        super().complete(table, checkpoint, items)


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
        process_table(pipeline.spark, table, table_config, crashing, config.opensearch, ("id",))
    assert pipeline.store().get_checkpoint("db.orders") == checkpoint  # the writes happened, the checkpoint did not move
    assert sorted(pipeline.documents("orders")) == ["1", "2"]

    # more commits land before the rerun; the rerun replays the batch and goes on
    update(table, EqualTo("id", 2), lambda r: {**r, "status": "shipped"})
    table.append(rows(3, status="again"))
    result = pipeline.sync(config, "db.orders")
    assert result.snapshots == 6  # pyiceberg commits an overwrite as a delete snapshot and an append snapshot
    assert pipeline.store().get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id


def test_documents_opensearch_refuses_fail_the_batch_without_advancing(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    config = pipeline.config({"name": "db.orders"})
    # a mapping that the documents' status text cannot satisfy
    pipeline.client.indices.create(index="orders", body={"mappings": {"properties": {"status": {"type": "integer"}}}})
    with pytest.raises(SinkError, match=r"refused 2 documents of index 'orders'.*mapper_parsing_exception"):
        sync(config, pipeline.spark)
    assert pipeline.store().get_checkpoint("db.orders") is None
    assert len(pipeline.store().pending_items("db.orders")) == 1

    pipeline.client.indices.delete(index="orders")  # the operator fixes the mapping; the rerun converges
    pipeline.sync(config, "db.orders")


def test_a_replayed_older_write_never_overwrites_a_newer_document(pipeline: Pipeline) -> None:
    config = pipeline.config({"name": "db.orders"})
    write = lambda writes: write_documents(pipeline.client, config.opensearch, "orders", writes)  # noqa: E731
    assert write([Write("1", 5, '{"v":"new"}'), Write("2", 5, None)]).indexed == 1
    replay = write([Write("1", 4, '{"v":"old"}'), Write("2", 4, '{"v":"resurrected"}'), Write("1", 5, '{"v":"same"}')])
    assert (replay.indexed, replay.superseded) == (0, 3)
    assert pipeline.documents("orders") == {"1": '{"v":"new"}'}

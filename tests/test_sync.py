"""End to end: real pyiceberg tables, local Spark, osmem over HTTP. After every sync the index
equals the table (Pipeline.sync asserts it)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.expressions import AlwaysTrue, EqualTo, In
from pyiceberg.table import Table

from icecdc.planning import plan_table
from icecdc.reading.driver import file_tasks
from icecdc.reading.tasks import files_read_by
from icecdc.sync import sync
from icecdc.testing.commits import compact, update
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.tables import SCHEMA, orders, rows

# The core of sync, commit kind by commit kind, on both engines.
pytestmark = [pytest.mark.parametrize("engine", ENGINES), pytest.mark.drawn_destination]


@pytest.fixture
def config(pipeline: Pipeline):
    return pipeline.config({"name": "db.orders"})


def test_export_then_inserts(pipeline: Pipeline, config) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    table.append(rows(4, region="eu"))
    exported = pipeline.sync(config, "db.orders")
    assert (exported.writes.indexed, exported.files) == (4, 2)

    table.append(rows(5, 6, region="eu"))
    inserted = pipeline.sync(config, "db.orders")
    assert (inserted.snapshots, inserted.writes.indexed) == (1, 2)


def test_update_of_a_non_key_column_writes_only_the_changed_row(pipeline: Pipeline, config) -> None:
    table = orders(pipeline)
    table.append(rows(*range(1, 11)))
    pipeline.sync(config, "db.orders")

    update(table, EqualTo("id", 3), lambda r: {**r, "status": "paid"})
    result = pipeline.sync(config, "db.orders")
    # the rewrite of the 10-row file carries 9 rows over; only one document is written
    assert result.changes.carryovers == 9
    assert (result.writes.indexed, result.writes.deleted) == (1, 0)
    assert '"status":"paid"' in pipeline.documents("orders")["3"]


def test_update_of_a_partition_column_keeps_the_document(pipeline: Pipeline, config) -> None:
    """opensearch-project/data-prepper#6666: the DELETE (old partition) and INSERT (new partition) meet in one place."""
    table = orders(pipeline)
    table.append(rows(1, 2, region="us"))
    table.append(rows(3, region="eu"))
    pipeline.sync(config, "db.orders")

    update(table, EqualTo("id", 1), lambda r: {**r, "region": "eu"})
    result = pipeline.sync(config, "db.orders")
    assert result.writes.indexed == 1 and result.writes.deleted == 0
    assert '"region":"eu"' in pipeline.documents("orders")["1"]


def test_delete(pipeline: Pipeline, config) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3, 4))
    pipeline.sync(config, "db.orders")

    table.delete(In("id", [2, 4]))
    result = pipeline.sync(config, "db.orders")
    assert (result.writes.deleted, result.writes.indexed, result.changes.carryovers) == (2, 0, 2)
    assert sorted(pipeline.documents("orders")) == ["1", "3"]


@pytest.mark.domain_only  # the document's external version
def test_one_key_changed_in_several_snapshots_of_one_batch(pipeline: Pipeline, config) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    pipeline.sync(config, "db.orders")

    for status in ("paid", "packed", "shipped"):
        update(table, EqualTo("id", 1), lambda r, s=status: {**r, "status": s})
    update(table, EqualTo("id", 1), lambda r: {**r, "region": "eu"})
    result = pipeline.sync(config, "db.orders")
    assert result.writes.indexed == 1  # the net change: one write of the latest image
    assert pipeline.versions("orders")["1"] == table.current_snapshot().sequence_number


def test_delete_then_reinsert(pipeline: Pipeline, config) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    pipeline.sync(config, "db.orders")

    table.delete(EqualTo("id", 1))
    table.append(rows(1, status="back"))
    pipeline.sync(config, "db.orders")  # both in one batch: the re-insert wins

    table.delete(EqualTo("id", 2))
    pipeline.sync(config, "db.orders")
    table.append(rows(2, status="back"))
    pipeline.sync(config, "db.orders")  # in separate batches: the tombstone's version is lower
    assert sorted(pipeline.documents("orders")) == ["1", "2"]


@pytest.mark.domain_only  # each document's external version
def test_a_run_of_copy_on_write_commits_reads_only_the_files_before_and_after_it(pipeline: Pipeline, config) -> None:
    """Consecutive copy-on-write commits collapse into one change: files added and removed within
    the run (a hot file rewritten again, a row inserted then deleted) are never read, and a key's
    DELETE and INSERT still pair across partitions."""
    table = orders(pipeline)
    table.append(rows(1, 2, 3, region="us"))
    table.append(rows(4, 5, region="eu"))
    pipeline.sync(config, "db.orders")
    before = live_files(table)

    update(table, EqualTo("id", 1), lambda r: {**r, "region": "eu"})  # moves 1 from us to eu...
    update(table, EqualTo("id", 2), lambda r: {**r, "status": "paid"})  # ...then us is rewritten again
    table.append(rows(6))
    table.delete(EqualTo("id", 6))  # inserted and deleted within the run: never a document
    update(table, EqualTo("id", 5), lambda r: {**r, "status": "paid"})  # the eu file of the first sync
    after = live_files(table)

    plan_table(table, config.table("db.orders"), pipeline.store(), ("id",))
    read = {
        f.file_path
        for task in file_tasks(table, pipeline.store().pending_items("db.orders"), ("id",))
        for f in files_read_by(task)
    }
    assert read == (before - after) | (after - before)

    result = pipeline.sync(config, "db.orders")
    assert (result.writes.indexed, result.writes.deleted) == (3, 0)
    last = table.current_snapshot().sequence_number  # a run's changes carry its last sequence number
    assert pipeline.versions("orders") == {"1": last, "2": last, "3": 2, "4": 2, "5": last}  # 2: the export


def test_a_run_after_a_pass_that_wrote_and_failed_is_applied_commit_by_commit(pipeline: Pipeline, config) -> None:
    """A pass that failed after writing leaves its recorded end past the checkpoint: the next pass
    collapses no run, so a key changed and changed back, and a row inserted then deleted, are each
    written again (a collapsed run would cancel them and keep what the failed pass wrote)."""
    table = orders(pipeline)
    table.append(rows(1, 2, 3, region="us"))
    pipeline.sync(config, "db.orders")
    update(table, EqualTo("id", 2), lambda r: {**r, "status": "paid"})
    update(table, EqualTo("id", 2), lambda r: {**r, "status": "open"})  # changed back: the middle file is gone
    table.append(rows(6))
    table.delete(EqualTo("id", 6))  # inserted and deleted within the run
    pipeline.record_pass_end("db.orders")  # a pass through these commits wrote, then failed

    result = pipeline.sync(config, "db.orders")
    # the latest change of each key wins: 2 at its last version; 6's delete is sent, as the failed
    # pass may have indexed it
    assert (result.writes.indexed, result.writes.deleted) == (1, 1)
    assert sorted(pipeline.documents("orders")) == ["1", "2", "3"]


def test_a_compaction_ends_a_run_of_copy_on_write_commits(pipeline: Pipeline, config) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    pipeline.sync(config, "db.orders")

    update(table, EqualTo("id", 1), lambda r: {**r, "status": "paid"})
    compact(table)  # its files are never read: the updates around it are two runs
    update(table, EqualTo("id", 2), lambda r: {**r, "status": "paid"})
    update(table, EqualTo("id", 1), lambda r: {**r, "region": "eu"})
    result = pipeline.sync(config, "db.orders")
    assert (result.writes.indexed, result.writes.deleted) == (2, 0)


def live_files(table: Table) -> set[str]:
    table.refresh()
    return {task.file.file_path for task in table.scan().plan_files()}


@pytest.mark.domain_only  # no write seen as unchanged external versions
def test_compaction_writes_nothing(pipeline: Pipeline, config) -> None:
    table = orders(pipeline)
    for i in range(5):
        table.append(rows(i * 2, i * 2 + 1, region=("us", "eu")[i % 2]))
    pipeline.sync(config, "db.orders")
    versions = pipeline.versions("orders")

    compact(table)
    assert table.current_snapshot().summary.operation.value == "replace"
    result = pipeline.sync(config, "db.orders")
    assert result.snapshots == 1 and result.files == 0 and result.changes.rows == 0
    assert (result.writes.indexed, result.writes.deleted) == (0, 0)
    assert pipeline.versions("orders") == versions
    assert pipeline.store().get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id

    # later changes read the compacted files
    update(table, EqualTo("id", 4), lambda r: {**r, "status": "late"})
    assert pipeline.sync(config, "db.orders").writes.indexed == 1


def test_unpartitioned_table_with_upserts(pipeline: Pipeline, config) -> None:
    table = orders(pipeline, partitioned=False)
    table.append(rows(1, 2, 3))
    pipeline.sync(config, "db.orders")

    table.upsert(pa.concat_tables([rows(2, status="paid"), rows(7)]), join_cols=["id"])
    table.overwrite(rows(9, 10), overwrite_filter=In("id", [1, 3]))
    result = pipeline.sync(config, "db.orders")
    assert sorted(pipeline.documents("orders"), key=int) == ["2", "7", "9", "10"]
    assert result.writes.deleted == 2


def test_more_than_100_snapshots_in_one_sync(pipeline: Pipeline, config) -> None:
    table = orders(pipeline)
    table.append(rows(0))
    pipeline.sync(config, "db.orders")

    for i in range(1, 61):
        table.append(rows(i, region=("us", "eu", "apac")[i % 3]))
    for i in range(1, 41):
        update(table, EqualTo("id", i), lambda r: {**r, "status": "paid"})
    for i in range(1, 11):
        table.delete(EqualTo("id", i * 5))
    result = pipeline.sync(config, "db.orders")
    assert result.snapshots >= 110
    assert len(pipeline.documents("orders")) == 51


def test_table_that_becomes_empty_and_empty_export(pipeline: Pipeline, config) -> None:
    table = orders(pipeline)
    table.append(rows(1))
    table.delete(AlwaysTrue())
    result = pipeline.sync(config, "db.orders")  # export of a snapshot with no files: an empty index
    assert result.snapshots == 1 and pipeline.client.indices.exists(index="orders")
    table.append(rows(2))
    pipeline.sync(config, "db.orders")


def test_export_false_starts_at_the_current_snapshot(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2))
    config = pipeline.config({"name": "db.orders", "export": False})
    (result,) = sync(config, pipeline.spark, ["db.orders"])
    assert result.writes.indexed == 0
    assert pipeline.store().get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id
    table.append(rows(3))
    (result,) = sync(config, pipeline.spark, ["db.orders"])
    assert sorted(pipeline.documents("orders")) == ["3"]


def test_two_tables_in_one_config(pipeline: Pipeline) -> None:
    orders(pipeline).append(rows(1, 2))
    other = pipeline.catalog.create_table("db.returns", schema=SCHEMA)
    other.append(rows(7))
    config = pipeline.config({"name": "db.orders"}, {"name": "db.returns", "index": "returns-v1"})
    results = sync(config, pipeline.spark)
    assert [r.table for r in results] == ["db.orders", "db.returns"]
    pipeline.assert_index_equals_table(config, "db.orders")
    pipeline.assert_index_equals_table(config, "db.returns")

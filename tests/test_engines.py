"""Each pass runs on one engine, picked from what it reads before anything is written.

The correctness of the in-process engine is tested where the Spark engine's is: the modules that
parametrize `engine` (merge-on-read and the random Spark-written sequences, resyncs, bad rows)
run every test on both. Here: the choice itself, the estimate the planner Lambda makes it from,
and a run without Spark leaving a large pass untouched."""

from __future__ import annotations

import pytest
from pyiceberg.expressions import EqualTo

from icecdc.batching import cap_batch, select_batch
from icecdc.catalog import Lineage, open_catalog
from icecdc.config import EngineConfig, parse_config
from icecdc.engines import Engines
from icecdc.errors import SparkRequired
from icecdc.manifests import ChangedEntries, SnapshotSizes
from icecdc.model import EngineChoice, EngineKind, WorkSize
from icecdc.planning import plan_table
from icecdc.reading.driver import file_tasks
from icecdc.reading.tasks import file_reads, files_read_by
from icecdc.status import work_size
from icecdc.sync import SyncRun, sync, sync_table
from icecdc.testing.commits import update
from tests.support.pipeline import Pipeline
from tests.support.spark_sql import SparkSql
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"
KIB = 1024


@pytest.mark.parametrize(
    ("use", "size", "expected"),
    [
        (EngineChoice.AUTO, WorkSize(3, 100, 10 * KIB), EngineKind.IN_PROCESS),
        (EngineChoice.AUTO, WorkSize(3, 100, 10 * KIB + 1), EngineKind.SPARK),  # above the bytes
        (EngineChoice.AUTO, WorkSize(3, 101, 1), EngineKind.SPARK),  # above the rows
        (EngineChoice.AUTO, WorkSize(4, 1, 1), EngineKind.SPARK),  # above the files
        (EngineChoice.SPARK, WorkSize(1, 1, 1), EngineKind.SPARK),
        (EngineChoice.IN_PROCESS, WorkSize(10**6, 10**9, 10**12), EngineKind.IN_PROCESS),
    ],
)
def test_a_pass_runs_in_process_up_to_all_limits_unless_forced(use: EngineChoice, size: WorkSize, expected: EngineKind) -> None:
    limits = EngineConfig(use=use, in_process_max_files=3, in_process_max_rows=100, in_process_max_bytes=10 * KIB)
    assert Engines(limits, spark_config=None).kind_for(size) == expected


def test_without_spark_a_pass_that_needs_it_raises_before_choosing() -> None:
    engines = Engines(EngineConfig(use=EngineChoice.SPARK), spark_config=None)
    with pytest.raises(SparkRequired, match="'db.orders'"):
        engines.for_pass(NAME, WorkSize(1, 1, 1))
    assert Engines(EngineConfig(), spark_config=None).for_pass(NAME, WorkSize(1, 1, 1)).kind == EngineKind.IN_PROCESS


def passes_size(pipeline: Pipeline) -> WorkSize:
    """What the next pass of the table reads, as the pass itself counts it (planned, capped, its tasks)."""
    config = pipeline.config({"name": NAME})
    table, store, changed = pipeline.catalog.load_table(NAME), pipeline.store(), ChangedEntries()
    plan_table(table, config.table(NAME), store, ("id",), changed)
    batch, _ = select_batch(store.pending_items(NAME), store.get_checkpoint(NAME), Lineage.of(table))
    capped, _ = cap_batch(batch, config.batch, SnapshotSizes(table, changed))
    return WorkSize.of([f for task in file_tasks(table, capped, ("id",), changed) for f in files_read_by(task)])


def test_the_planners_estimate_from_summaries_is_what_the_pass_reads(pipeline: Pipeline) -> None:
    """The planner Lambda decides from snapshot summaries alone (no manifest read); the estimate
    must be the pass's own count, for an export and for a run of changes."""
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    table.append(rows(4, 5, region="eu"))
    store = pipeline.store()
    estimate = work_size(table, NAME, store, ("id",))
    assert estimate == passes_size(pipeline) and estimate.files == 2

    pipeline.sync(pipeline.config({"name": NAME}), NAME)
    table = pipeline.catalog.load_table(NAME)
    update(table, EqualTo("id", 2), lambda r: {**r, "status": "paid"})
    table.delete(EqualTo("id", 5))
    table.append(rows(6))
    estimate = work_size(table, NAME, store, ("id",))
    assert estimate == passes_size(pipeline) and estimate.files >= 4
    assert work_size(table, NAME, store, ("id",)) is None  # items are pending now: the estimate cannot tell


def test_auto_runs_small_passes_in_process_and_large_ones_on_spark(pipeline: Pipeline) -> None:
    table = orders(pipeline)
    table.append(rows(*range(1, 200)))
    raw = pipeline.config_dict([{"name": NAME}])
    config = parse_config({**raw, "engine": {"use": "auto", "in_process_max_files": 1}})
    (export,) = sync(config, pipeline.spark, [NAME])
    assert export.engine == EngineKind.IN_PROCESS  # one file

    update(table, EqualTo("id", 7), lambda r: {**r, "status": "paid"})  # removes one file, adds one: two to read
    (changed,) = sync(config, pipeline.spark, [NAME])
    assert changed.engine == EngineKind.SPARK
    pipeline.assert_index_equals_table(config, NAME)


def test_a_run_without_spark_leaves_a_large_pass_untouched(pipeline: Pipeline) -> None:
    """The planner Lambda's run: a pass above the limits raises `SparkRequired` before the index
    is touched or the checkpoint moves, and the Glue run that follows applies it."""
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    table.append(rows(4, 5))
    raw = pipeline.config_dict([{"name": NAME}])
    config = parse_config({**raw, "engine": {"use": "auto", "in_process_max_files": 1}})
    store, catalog = pipeline.store(), open_catalog(config.catalog)
    without_spark = Engines(config.engine, spark_config=None)
    with pytest.raises(SparkRequired):
        sync_table(config, catalog, config.table(NAME), table, ("id",), store, SyncRun(without_spark, False))
    assert store.get_checkpoint(NAME) is None
    assert not pipeline.client.indices.exists(index="orders")

    (result,) = sync(config, pipeline.spark, [NAME])  # the Glue run
    assert result.engine == EngineKind.SPARK
    pipeline.assert_index_equals_table(config, NAME)


def test_a_merge_on_read_delete_counts_the_data_file_it_reads(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    """A position delete of one row reads the whole data file it applies to. The snapshot's
    summary knows only the small delete file: the pass counts the data file too, so a run without
    Spark (the planner) leaves it to the Glue job instead of reading a large file in-process."""
    spark_sql.sql(
        f"CREATE TABLE {spark_sql.name(NAME)} (id BIGINT NOT NULL, note STRING) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    spark_sql.sql(f"INSERT INTO {spark_sql.name(NAME)} SELECT id, uuid() FROM range(20000)")
    config = pipeline.config({"name": NAME, "identifier_columns": ["id"]})
    pipeline.sync(config, NAME)
    spark_sql.sql(f"DELETE FROM {spark_sql.name(NAME)} WHERE id = 7")

    table, store = pipeline.catalog.load_table(NAME), pipeline.store()
    estimate = work_size(table, NAME, store, ("id",))
    assert estimate is not None and estimate.files == 1  # the delete file
    limited = config.revised(engine={"use": "auto", "in_process_max_bytes": 2 * estimate.bytes})
    before = store.get_checkpoint(NAME)
    without_spark = Engines(limited.engine, spark_config=None)
    with pytest.raises(SparkRequired):
        sync_table(
            limited, open_catalog(config.catalog), limited.table(NAME), table, ("id",), store, SyncRun(without_spark, False)
        )
    assert store.get_checkpoint(NAME) == before

    (result,) = sync(limited, pipeline.spark, [NAME])
    assert result.engine == EngineKind.SPARK
    pipeline.assert_index_equals_table(limited, NAME)


def test_a_rewrite_cut_into_key_ranges_counts_each_read_of_its_files(pipeline: Pipeline) -> None:
    """Each key range reads every file of its rewrite (in-process, a dealt rewrite too): the pass's
    engine is chosen by the reads, not the distinct files, so a pass in the planner Lambda never
    starts more than its limits allow."""
    table = orders(pipeline, partitioned=False)
    for i in range(4):
        table.append(rows(*range(i, 80, 4)))  # each file spans the whole key range
    raw = {**pipeline.config_dict([{"name": NAME}]), "batch": {"max_rewrite_bytes": 1}}
    pipeline.sync(parse_config(raw), NAME)
    update(pipeline.catalog.load_table(NAME), EqualTo("id", 0) | EqualTo("id", 1), lambda r: {**r, "status": "paid"})

    config = parse_config(raw)
    table = pipeline.catalog.load_table(NAME)
    plan_table(table, config.table(NAME), pipeline.store(), ("id",))
    tasks = file_tasks(table, pipeline.store().pending_items(NAME), ("id",), rewrite_budget=1)
    distinct = {f.file_path for task in tasks for f in files_read_by(task)}
    assert len(file_reads(tasks)) > len(distinct)  # every range reads them all
    limited = parse_config({**raw, "engine": {"use": "auto", "in_process_max_files": len(distinct)}})
    assert pipeline.sync(limited, NAME).engine == EngineKind.SPARK

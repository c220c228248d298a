"""Rewrites over the memory budget, end to end, for every kind of identifier and every writer:
the files of one rewrite are read into the table's one Arrow schema, key ranges work for every
type an identifier column may have (and for nested ones), and a key that cannot cut a rewrite into
ranges of about the budget gives way to another identifier column, or to reading file by file."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.expressions import In
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    FixedType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    PrimitiveType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from icecdc.catalog import identifier_columns
from icecdc.config import Config, parse_config
from icecdc.model import WorkItem
from icecdc.planning import plan_table
from icecdc.reading.driver import file_tasks
from icecdc.reading.tasks import DealtRewrite, RewriteTask, Task
from icecdc.testing.commits import update
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.spark_sql import SparkSql
from tests.support.tables import range_tasks

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.keyed"


def _config(pipeline: Pipeline, budget: int) -> Config:
    return parse_config({**pipeline.config_dict([{"name": NAME}]), "batch": {"max_rewrite_bytes": budget}})


def _tasks(pipeline: Pipeline, config: Config, budget: int) -> list[Task]:
    """The tasks the pending items of the table become under `budget` (planning them first)."""
    table = pipeline.catalog.load_table(NAME)
    columns = identifier_columns(table, config.table(NAME))
    plan_table(table, config.table(NAME), pipeline.store(), columns)
    items: list[WorkItem] = pipeline.store().pending_items(NAME)
    return file_tasks(table, items, columns, rewrite_budget=budget)


def _rows_per_range(table: Table, tasks: list[Task]) -> list[int]:
    """How many of the table's current rows each ranged rewrite task keeps (its added side)."""
    return [
        table.scan(row_filter=t.key_range.row_filter()).to_arrow().num_rows
        for t in range_tasks(tasks)
        if isinstance(t, RewriteTask) and t.key_range is not None
    ]


# --- item 1: one Arrow schema whoever wrote the files -------------------------------------------------

PLAIN = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("raw", pa.binary()),
        pa.field("tags", pa.list_(pa.field("element", pa.string()))),
    ]
)
LARGE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.large_string()),
        pa.field("raw", pa.large_binary()),
        pa.field("tags", pa.large_list(pa.field("element", pa.large_string()))),
    ]
)


def _mixed_rows(ids: range, schema: pa.Schema, name: str = "n") -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "name": f"{name}{i}", "raw": bytes([i]), "tags": [str(i)]} for i in ids], schema)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_rewrite_pairing_plain_and_large_arrow_types_is_read_into_one_schema(pipeline: Pipeline) -> None:
    """Files written from `string`/`binary`/`list` data, rewritten from `large_*` data (as polars
    hands them to pyiceberg): the two sides of the rewrite read back as different Arrow types."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "raw", BinaryType(), required=False),
        NestedField(4, "tags", ListType(5, StringType(), element_required=False), required=False),
        identifier_field_ids=[1],
    )
    table = pipeline.catalog.create_table(NAME, schema=schema)
    table.append(_mixed_rows(range(10), PLAIN))
    config = pipeline.config({"name": NAME})
    pipeline.sync(config, NAME)
    # one row changed, the other nine carried over, from data of the large types
    table.overwrite(pa.concat_tables([_mixed_rows(range(1), LARGE, "changed"), _mixed_rows(range(1, 10), LARGE)]))

    result = pipeline.sync(config, NAME)
    assert (result.writes.indexed, result.changes.carryovers) == (1, 9)


@pytest.mark.parametrize("engine", ENGINES)
def test_key_ranges_of_a_table_written_by_spark_read_both_sides_into_one_schema(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    """A range that keeps rows of one side and none of the other: the empty side came back in
    pyiceberg's large types, the other in the file's."""
    spark_sql.sql(f"CREATE TABLE {spark_sql.name(NAME)} (id BIGINT NOT NULL, v STRING) USING iceberg")
    spark_sql.sql(f"INSERT INTO {spark_sql.name(NAME)} SELECT id, CAST(id AS STRING) FROM range(20)")
    spark_sql.sql(f"ALTER TABLE {spark_sql.name(NAME)} SET IDENTIFIER FIELDS id")
    config = _config(pipeline, 1)
    pipeline.sync(config, NAME)
    # copy-on-write: rewrites the file of 0..9 (the data of two Spark tasks) as one of 9 alone
    spark_sql.sql(f"DELETE FROM {spark_sql.name(NAME)} WHERE id < 9")

    assert any(isinstance(t, RewriteTask) and t.key_range is not None for t in range_tasks(_tasks(pipeline, config, 1)))
    result = pipeline.sync(config, NAME)
    assert result.writes.deleted == 9


# --- item 3: every identifier type -------------------------------------------------------------------

# (type, the i-th key of 40, in order)
KEY_TYPES: dict[str, tuple[PrimitiveType, Callable[[int], Any]]] = {
    "int": (IntegerType(), lambda i: i * 7 - 100),
    "long": (LongType(), lambda i: i * 10**12),
    "string": (StringType(), lambda i: f"key-{i:04d}"),
    "uuid": (UUIDType(), lambda i: uuid.UUID(int=i * 2**120 + 5).bytes),
    "fixed": (FixedType(4), lambda i: (i * 1000).to_bytes(4, "big")),
    "binary": (BinaryType(), lambda i: bytes([i, 255 - i])),
    "decimal": (DecimalType(10, 2), lambda i: Decimal(i * 25).scaleb(-2)),
    "date": (DateType(), lambda i: dt.date(2024, 1, 1) + dt.timedelta(days=i)),
    "time": (TimeType(), lambda i: dt.time(i // 4, (i % 4) * 15)),
    "timestamp": (TimestampType(), lambda i: dt.datetime(2024, 1, 1) + dt.timedelta(hours=i)),
    "timestamptz": (TimestamptzType(), lambda i: dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(hours=i)),
}


def _rewritten(
    pipeline: Pipeline, columns: list[NestedField], row: Callable[[int], dict[str, Any]], files: int = 4, **table: Any
) -> list[Task]:
    """A table of `columns` and an int `n` (pyiceberg's scans cannot filter every type), `files`
    files of ten rows (`row(n)`), synced; then one row of every file updated: the tasks of that rewrite."""
    columns = [*columns, NestedField(90, "n", IntegerType(), required=True), NestedField(91, "v", StringType())]
    schema = Schema(*columns, identifier_field_ids=[f.field_id for f in columns if f.required and f.name != "n"])
    created = pipeline.catalog.create_table(NAME, schema=schema, **table)
    arrow = created.schema().as_arrow()
    for part in range(files):  # files of ten rows each, in key order
        created.append(pa.Table.from_pylist([{**row(n), "n": n, "v": "new"} for n in range(part * 10, part * 10 + 10)], arrow))
    pipeline.sync(_config(pipeline, 1), NAME)
    update(created, In("n", [part * 10 for part in range(files)]), lambda r: {**r, "v": "paid"})
    return _tasks(pipeline, _config(pipeline, 1), 1)


def _assert_cut_by(pipeline: Pipeline, tasks: list[Task], column: str) -> None:
    """Every task a range of `column`, none holding over half the rows (the added side counted)."""
    tasks = range_tasks(tasks)
    assert len(tasks) >= 4
    assert all(isinstance(t, RewriteTask) and t.key_range is not None and t.key_range.column == column for t in tasks)
    counts = _rows_per_range(pipeline.catalog.load_table(NAME), tasks)
    assert sum(counts) == 40 and max(counts) <= 20


def _assert_synced(pipeline: Pipeline) -> None:
    result = pipeline.sync(_config(pipeline, 1), NAME)
    assert (result.writes.indexed, result.changes.carryovers) == (4, 36)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("key_type", list(KEY_TYPES))
def test_key_ranges_cut_a_rewrite_for_every_identifier_type(pipeline: Pipeline, key_type: str) -> None:
    iceberg_type, key = KEY_TYPES[key_type]
    tasks = _rewritten(pipeline, [NestedField(1, "k", iceberg_type, required=True)], lambda n: {"k": key(n)})
    if key_type == "uuid":  # pyiceberg's own scans cannot filter a uuid to count the rows
        tasks = range_tasks(tasks)
        assert len(tasks) >= 4 and all(isinstance(t, RewriteTask) and t.key_range is not None for t in tasks)
    else:
        _assert_cut_by(pipeline, tasks, "k")
    _assert_synced(pipeline)


# --- item 6: keys that cannot cut a rewrite ----------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_a_first_identifier_of_one_value_per_partition_gives_way_to_the_next(pipeline: Pipeline) -> None:
    """(tenant, id) on a table partitioned by tenant: within a partition's rewrite every row has
    one tenant, so the ranges cut by id."""
    columns = [NestedField(1, "tenant", StringType(), required=True), NestedField(2, "id", LongType(), required=True)]
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="tenant"))
    tasks = _rewritten(pipeline, columns, lambda n: {"tenant": "acme", "id": n}, partition_spec=spec)
    _assert_cut_by(pipeline, tasks, "id")
    _assert_synced(pipeline)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_boolean_identifier_column_cuts_into_ranges_of_booleans(pipeline: Pipeline) -> None:
    """(tenant, flag, id), one tenant, `flag` false in the first file and true in the second (so its
    ranges overlap no more files than `id`'s, and the earlier key is kept): the ranges cut by the
    boolean `flag`, whose split must come back as a boolean (found by `make fuzz`: the integer 1
    failed every task's bind)."""
    columns = [
        NestedField(1, "tenant", StringType(), required=True),
        NestedField(2, "flag", BooleanType(), required=True),
        NestedField(3, "id", LongType(), required=True),
    ]
    (first, *_) = _rewritten(pipeline, columns, lambda n: {"tenant": "acme", "flag": n >= 10, "id": n}, files=2)
    assert isinstance(first, RewriteTask | DealtRewrite)
    budget = math.ceil(sum(t.data_file.file_size_in_bytes for t in first.removed + first.added) / 2)
    table = pipeline.catalog.load_table(NAME)
    tasks = _tasks(pipeline, _config(pipeline, budget), budget)  # two ranges: a boolean can cut no finer
    assert [t.key_range.upper for t in range_tasks(tasks) if isinstance(t, RewriteTask) and t.key_range] == [True, None]
    assert _rows_per_range(table, tasks) == [10, 10]
    result = pipeline.sync(_config(pipeline, budget), NAME)
    assert (result.writes.indexed, result.changes.carryovers) == (2, 18)


@pytest.mark.parametrize("engine", ENGINES)
def test_keys_whose_bounds_are_truncated_stream_file_by_file(pipeline: Pipeline) -> None:
    """Keys alike in their first 16 characters (all Iceberg keeps of a string bound by default):
    the bounds cannot cut them, so no task holds the whole rewrite; each file streams."""
    columns = [NestedField(1, "k", StringType(), required=True)]
    tasks = _rewritten(pipeline, columns, lambda n: {"k": f"tenant-acme-corporation-{n:04d}"})
    assert max(_rows_per_range(pipeline.catalog.load_table(NAME), tasks), default=0) <= 20  # never the whole rewrite
    _assert_synced(pipeline)


# --- item 7: a nested identifier ---------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_key_ranges_of_a_nested_identifier_filter_the_nested_field(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    """`info.id` identifies the rows; a top-level `id` (another column) must not be what ranges
    filter. Spark's files: pyiceberg keeps no bounds of nested fields."""
    table = spark_sql.name(NAME)
    spark_sql.sql(f"CREATE TABLE {table} (id BIGINT, info STRUCT<id: BIGINT NOT NULL> NOT NULL, v STRING) USING iceberg")
    spark_sql.sql(f"ALTER TABLE {table} SET IDENTIFIER FIELDS info.id")
    for part in range(4):  # a file each
        spark_sql.sql(
            f"INSERT INTO {table} SELECT 1000 - id, named_struct('id', id), 'new' FROM range({part * 10}, {part * 10 + 10}, 1, 1)"
        )
    config = _config(pipeline, 1)
    pipeline.sync(config, NAME)
    spark_sql.sql(f"UPDATE {table} SET v = 'paid' WHERE info.id IN (0, 10, 20, 30)")  # copy-on-write

    _assert_cut_by(pipeline, _tasks(pipeline, config, 1), "info.id")
    _assert_synced(pipeline)

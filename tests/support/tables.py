"""The orders table most end-to-end tests use, and its rows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icecdc.reading.tasks import DealtRewrite, Task
from tests.support.pipeline import Pipeline

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "status", StringType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
    identifier_field_ids=[1],
)
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
        pa.field("status", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
BY_REGION = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))


def rows(*ids: int, region: str = "us", status: str = "new") -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "region": region, "status": status, "amount": i * 1.5} for i in ids], schema=ARROW)


def orders(pipeline: Pipeline, partitioned: bool = True) -> Table:
    return pipeline.catalog.create_table("db.orders", schema=SCHEMA, partition_spec=BY_REGION if partitioned else PartitionSpec())


def range_tasks(tasks: list[Task]) -> list[Task]:
    """The tasks with a dealt rewrite as the range tasks it stands for: how a rewrite was cut is the same."""
    return [r for t in tasks for r in (t.range_tasks() if isinstance(t, DealtRewrite) else [t])]


def manifests_read(table: Table, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The manifests the table's file IO opens from now on, as they are opened (a list, cleared)."""
    read: list[str] = []
    io_class = type(table.io)
    new_input = io_class.new_input

    def counted(io: Any, location: str) -> Any:
        if location.endswith(".avro") and "/snap-" not in location:  # a manifest, not a list
            read.append(location)
        return new_input(io, location)

    monkeypatch.setattr(io_class, "new_input", counted)
    return read

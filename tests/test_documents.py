"""The Iceberg → JSON document mapping through a real export, and the text Arrow writes for it
(tests/unit/test_documents.py has the mapping's cases one by one)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DecimalType,
    DoubleType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from icecdc.documents import converter_for
from icecdc.reading.reader import text_in_arrow
from tests.support.all_types import DOCUMENT, ROW, SCHEMA
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection


def test_every_type_maps_as_documented(pipeline: Pipeline) -> None:
    table = pipeline.catalog.create_table("db.all_types", schema=SCHEMA)
    table.append(pa.Table.from_pylist([ROW], schema=table.schema().as_arrow()))
    config = pipeline.config({"name": "db.all_types", "index": "all-types"})
    pipeline.sync(config, "db.all_types")
    hit = pipeline.client.get(index="all-types", id='["acme","7"]')
    assert hit["_source"] == DOCUMENT
    assert hit["_version"] == table.current_snapshot().sequence_number


def test_columns_are_read_by_field_id(pipeline: Pipeline) -> None:
    """A column renamed after its files were written still reads: files are matched by field ID."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("colour", pa.string())])
    table = pipeline.catalog.create_table("db.paint", schema=schema)
    table.append(pa.table({"id": [1, 2], "colour": ["red", "blue"]}, schema=schema))
    with table.update_schema() as change:
        change.rename_column("colour", "color")
        change.add_column("shade", StringType())
    config = pipeline.config({"name": "db.paint", "identifier_columns": ["id"]})
    pipeline.sync(config, "db.paint")
    assert pipeline.documents("paint")["1"] == '{"color":"red","id":1,"shade":null}'


def test_rewrites_of_nested_columns_take_the_row_path(pipeline: Pipeline) -> None:
    """Arrow cannot group by struct or list columns: such rewrites cancel carryovers after the shuffle."""
    from pyiceberg.expressions import EqualTo

    from icecdc.testing.commits import update

    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "point", StructType(NestedField(3, "x", DoubleType()))),
        NestedField(4, "tags", ListType(5, StringType())),
        identifier_field_ids=[1],
    )
    table = pipeline.catalog.create_table("db.nested", schema=schema)
    table.append(
        pa.Table.from_pylist(
            [{"id": i, "point": {"x": i / 2}, "tags": ["t"]} for i in range(5)], schema=table.schema().as_arrow()
        )
    )
    config = pipeline.config({"name": "db.nested"})
    pipeline.sync(config, "db.nested")
    update(table, EqualTo("id", 3), lambda r: {**r, "tags": ["t", "u"]})
    result = pipeline.sync(config, "db.nested")
    assert (result.writes.indexed, result.changes.carryovers) == (1, 4)


_PRECISE = st.integers(min_value=1, max_value=38).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p)))


@settings(max_examples=60, deadline=None)
@given(
    moments=st.lists(st.one_of(st.none(), st.datetimes(timezones=st.just(dt.UTC))), max_size=30),
    zone=st.sampled_from([None, "UTC", "+00:00", "America/New_York", "Asia/Kolkata"]),
    precision_scale=_PRECISE,
    digits=st.lists(st.one_of(st.none(), st.integers()), max_size=30),
    cut=st.integers(0, 30),
)
def test_arrow_writes_the_text_the_converters_write(
    moments: list[dt.datetime | None], zone: str | None, precision_scale: tuple[int, int], digits: list[int | None], cut: int
) -> None:
    """`text_in_arrow` writes timestamps and decimals in Arrow for speed: its text must be the
    converters' for every value (any zone, the whole year range, decimals down to exponent form),
    in a record batch as in a table of several chunks, so that a document is the same text
    whichever way its row came (carryover removal, equality deletes and verify compare it)."""
    precision, scale = precision_scale
    bound = 10**precision
    # unscaled values of every size the precision allows, small ones often: tiny values Arrow writes in exponent form
    decimals = [
        None if d is None else Decimal(f"{max(1 - bound, min(bound - 1, d))}E-{scale}") for d in digits
    ]  # exact: no context rounding
    decimal_type = DecimalType(precision, scale)
    timestamp_type = TimestampType() if zone is None else TimestamptzType()
    stamps = [None if m is None else (m.replace(tzinfo=None) if zone is None else m) for m in moments]
    columns = {
        "at": pa.array(stamps, pa.timestamp("us", tz=zone)),
        "amount": pa.array(decimals, pa.decimal128(precision, scale)),
    }
    expected = {
        name: [None if v is None else converter_for(kind)(v) for v in column.to_pylist()]
        for (name, column), kind in zip(columns.items(), (timestamp_type, decimal_type), strict=True)
    }
    for name, column in columns.items():
        batch = pa.record_batch([column], names=[name])
        table = pa.Table.from_batches([batch.slice(0, cut), batch.slice(cut)])  # a column of two chunks
        for rows in (batch, table):
            written = text_in_arrow(rows)
            assert written.schema.field(name).type == pa.string()
            assert written.column(name).to_pylist() == expected[name]


def test_arrow_leaves_other_columns_and_units_to_the_converters() -> None:
    rows = pa.table({"n": [1], "ns": pa.array([1], pa.timestamp("ns")), "s": ["x"]})
    assert text_in_arrow(rows).equals(rows)

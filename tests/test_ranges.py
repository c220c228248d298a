"""Key ranges cut a large copy-on-write rewrite into tasks of about equal rows, from the bounds the
manifests keep (icecdc.reading.ranges). Every key falls in exactly one range, nulls included, so a
row and its unchanged copy always meet in one task."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.conversions import to_bytes
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import expression_to_pyarrow
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.types import BooleanType, LongType, NestedField, PrimitiveType, StringType

from icecdc.reading.ranges import RangeKey, key_ranges
from icecdc.reading.tasks import KeyRange

LONG_KEY = NestedField(1, "id", LongType(), required=False)
TEXT_KEY = NestedField(1, "id", StringType(), required=False)
ID = RangeKey("id", LONG_KEY)
TEXT_ID = RangeKey("id", TEXT_KEY)


def data_file(key: NestedField, lower: object, upper: object, rows: int, bounds: bool = True, row_groups: int = 8) -> DataFile:
    assert isinstance(key.field_type, PrimitiveType)
    return DataFile.from_args(
        split_offsets=[4 + i * rows for i in range(row_groups)],
        content=DataFileContent.DATA,
        file_path=f"s3://b/{lower}-{upper}.parquet",
        file_format=FileFormat.PARQUET,
        partition={},
        record_count=rows,
        file_size_in_bytes=rows * 10,
        lower_bounds={key.field_id: to_bytes(key.field_type, lower)} if bounds else {},
        upper_bounds={key.field_id: to_bytes(key.field_type, upper)} if bounds else {},
    )


def cut_ranges(files: list[DataFile], keys: list[RangeKey], parts: int) -> list[KeyRange] | None:
    cut = key_ranges(files, keys, parts)
    return None if cut is None else cut.ranges


def rows_per_range(ranges: list[KeyRange], keys: list[object], key: NestedField) -> list[int]:
    """How many of `keys` each range's row filter keeps, as the reader applies it (pyiceberg → Arrow)."""
    table = pa.table({"id": pa.array(keys, pa.int64() if isinstance(key.field_type, LongType) else pa.string())})
    schema = Schema(key)
    return [table.filter(expression_to_pyarrow(bind(schema, r.row_filter(), case_sensitive=True))).num_rows for r in ranges]


def test_files_sorted_by_key_split_at_about_equal_rows() -> None:
    files = [data_file(LONG_KEY, i * 1000, i * 1000 + 999, 1000) for i in range(8)]
    ranges = cut_ranges(files, [ID], 4)
    assert ranges is not None and len(ranges) == 4
    counts = rows_per_range(ranges, list(range(8000)), LONG_KEY)
    assert sum(counts) == 8000 and max(counts) - min(counts) <= 80  # within 1 % of a quarter each


def test_files_of_random_keys_split_their_common_span() -> None:
    files = [data_file(LONG_KEY, 0, 9999, 2500) for _ in range(4)]  # every file spans the table
    ranges = cut_ranges(files, [ID], 4)
    assert ranges is not None
    counts = rows_per_range(ranges, list(range(0, 10000, 7)), LONG_KEY)
    assert sum(counts) == len(range(0, 10000, 7)) and len(counts) == 4 and max(counts) - min(counts) <= 15


def test_the_overlap_says_how_many_times_over_range_tasks_would_decode_the_rows() -> None:
    """Sorted files: each range reads about its own files. Files that each span the table: each
    range reads every file (the planner then deals the rewrite, `DealtRewrite`)."""
    sorted_files = key_ranges([data_file(LONG_KEY, i * 1000, i * 1000 + 999, 1000) for i in range(8)], [ID], 4)
    spread_files = key_ranges([data_file(LONG_KEY, 0, 9999, 2500) for _ in range(4)], [ID], 4)
    assert sorted_files is not None and spread_files is not None
    assert sorted_files.overlap == 1.0 and spread_files.overlap == 4.0


def test_every_key_and_null_fall_in_exactly_one_range() -> None:
    files = [data_file(LONG_KEY, -50, 10, 30), data_file(LONG_KEY, 5, 400, 900), data_file(LONG_KEY, 390, 1000, 20)]
    ranges = cut_ranges(files, [ID], 5)
    assert ranges is not None and ranges[0].lower is None and ranges[-1].upper is None
    assert sum(rows_per_range(ranges, [None, -(10**12), -50, 0, 7, 399, 1000, 10**12], LONG_KEY)) == 8


def test_string_keys_split_at_file_bounds() -> None:
    files = [data_file(TEXT_KEY, f"{c}a", f"{c}z", 100) for c in "abcd"]
    ranges = cut_ranges(files, [TEXT_ID], 2)
    assert ranges is not None and len(ranges) == 2
    assert rows_per_range(ranges, ["aq", "bq", "cq", "dq", None], TEXT_KEY) in ([3, 2], [2, 3])


def test_no_more_ranges_than_row_groups() -> None:
    """A range decodes the row groups it overlaps whole: cutting finer reads them again for nothing."""
    files = [data_file(LONG_KEY, i * 1000, i * 1000 + 999, 1000, row_groups=1) for i in range(3)]
    ranges = cut_ranges(files, [ID], 50)
    assert ranges is not None and len(ranges) == 3


def test_a_file_without_bounds_gives_no_ranges() -> None:
    unknown = data_file(LONG_KEY, 10, 19, 10, bounds=False)
    assert key_ranges([data_file(LONG_KEY, 0, 9, 10), unknown], [ID], 2) is None


def test_a_key_of_one_value_gives_way_to_the_next_identifier_column() -> None:
    """(tenant, id) where every file holds one tenant: the bounds cannot cut by tenant, they can by id."""
    tenant = NestedField(2, "tenant", StringType(), required=True)
    files = [_two_keys(tenant, "acme", i * 100, i * 100 + 99) for i in range(4)]
    assert key_ranges(files, [RangeKey("tenant", tenant)], 4) is None
    ranges = cut_ranges(files, [RangeKey("tenant", tenant), ID], 4)
    assert ranges is not None and len(ranges) == 4 and {r.column for r in ranges} == {"id"}
    assert rows_per_range(ranges, list(range(400)), LONG_KEY) == [100, 100, 100, 100]


def test_string_bounds_truncated_to_a_shared_prefix_cannot_cut() -> None:
    """Iceberg keeps 16 characters of a string bound: keys alike in those tell nothing apart."""
    files = [data_file(TEXT_KEY, "tenant-acme-corp", "tenant-acme-corq", 100) for _ in range(4)]
    assert key_ranges(files, [TEXT_ID], 4) is None


def _two_keys(tenant: NestedField, name: str, lower: int, upper: int) -> DataFile:
    assert isinstance(tenant.field_type, PrimitiveType)
    one = data_file(LONG_KEY, lower, upper, upper - lower + 1)
    one.lower_bounds[tenant.field_id] = to_bytes(tenant.field_type, name)
    one.upper_bounds[tenant.field_id] = to_bytes(tenant.field_type, name)
    return one


def test_of_keys_that_can_cut_the_one_whose_ranges_overlap_fewest_files_is_used() -> None:
    """A first identifier column of a few values in every file (`region` of (region, id)) could cut
    the rewrite too, but each range would decode every file; `id`, sorted into the files, is used."""
    region = NestedField(2, "region", StringType(), required=False)
    files = []
    for i in range(8):
        one = _two_keys(region, "r0", i * 1000, i * 1000 + 999)
        one.upper_bounds[region.field_id] = to_bytes(StringType(), "r7")  # all 8 regions in every file
        files.append(one)
    assert key_ranges(files, [RangeKey("region", region)], 4) is not None  # region alone could cut them
    ranges = cut_ranges(files, [RangeKey("region", region), ID], 4)
    assert ranges is not None and {r.column for r in ranges} == {"id"}


def test_a_boolean_identifier_column_cuts_into_ranges_of_booleans() -> None:
    """Found by `make fuzz`: a composite key (tenant, flag, k) whose tenant could not cut gave way to
    `flag`, and its split came back as the integer 1, which pyiceberg cannot bind to a boolean
    column (TypeError in every task, every retry)."""
    flag = NestedField(1, "flag", BooleanType(), required=False)
    files = [data_file(flag, False, True, 100) for _ in range(2)]
    ranges = cut_ranges(files, [RangeKey("flag", flag)], 2)
    assert ranges is not None and len(ranges) == 2
    table = pa.table({"flag": pa.array([False, True, None, True], pa.bool_())})
    schema = Schema(flag)
    kept = [table.filter(expression_to_pyarrow(bind(schema, r.row_filter(), case_sensitive=True))).num_rows for r in ranges]
    assert kept == [2, 2]  # false and null below `true`, true at or above it: each row in exactly one range

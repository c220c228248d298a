"""Driver side: cut a large copy-on-write rewrite into key ranges of about equal rows.

The ranges come from the column bounds the manifests keep for every data
file: metadata only, no file is opened.

A range of an identifier column, not a hash: pyiceberg pushes a range down into the Parquet
reader, which skips the row groups outside it, and Arrow has no row hash to filter by. The bounds
give, for each file, where its identifiers lie. Rows are assumed spread evenly between a file's
bounds. That holds for files sorted by the key, whose ranges are disjoint, and for files of
random keys, whose ranges all span the table.

Keys of every identifier type are placed on a line of integers that keeps their order (`_Scale`):
numbers, dates and times as they are stored, decimals unscaled, strings and bytes by the bytes that
follow the prefix every bound shares. Splits are interpolated on that line and turned back into
keys. Where the bounds cannot tell the rows apart, the ranges would not be about equal, and that
column is not used: `key_ranges` tries the next identifier column, and the driver then reads file by
file. That happens with one key value per partition, or string bounds truncated to a shared prefix.
"""

from __future__ import annotations

import bisect
import logging
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DecimalType,
    FixedType,
    NestedField,
    PrimitiveType,
    StringType,
    UUIDType,
)

from icecdc.reading.tasks import KeyRange

log = logging.getLogger(__name__)

# More ranges than this would cost more in reading every file once per range than they save.
MAX_RANGES = 1024
# How far the largest range may exceed an equal share of the rows (by the bounds' estimate) before
# the column is deemed unable to cut the rewrite: a task holds at most this many budgets.
MAX_RANGE_EXCESS = 1.5
# The bytes after the shared prefix that place a string or binary key on the line.
_KEY_BYTES = 8


@dataclass(frozen=True)
class RangeKey:
    """An identifier column ranges may cut by: its full name and its field.

    A nested column's full name is dotted, as in `info.id`.
    """

    column: str
    field: NestedField


@dataclass(frozen=True)
class RangeCut:
    """Key ranges of about equal rows, and how many times over their tasks would decode the rows.

    Each task decodes every file its range overlaps: about once in all for files sorted by the key,
    about once per range for files that each span the whole key range.
    """

    ranges: list[KeyRange]
    overlap: float


def key_ranges(files: Sequence[DataFile], keys: Sequence[RangeKey], parts: int) -> RangeCut | None:
    """`parts` ranges of about equal rows of `files`, covering every value and null.

    The key is the one of `keys` whose ranges overlap the fewest files. There are fewer ranges when
    the files have fewer row groups. None when no key can be cut: a file has no bounds for it, or
    its largest range would hold well over an equal share.
    """
    # A range decodes every row group it overlaps, whole: ranges narrower than the row groups
    # (the manifests' split offsets) would decode the same rows again and hold no less memory.
    row_groups = sum(len(f.split_offsets or ()) or 1 for f in files)
    parts = min(parts, row_groups, MAX_RANGES)
    # Of the keys that can cut them, the one whose ranges overlap the fewest files' rows: each range
    # task decodes every file its range overlaps (a first column of a few values in every file
    # would have every task decode every file).
    best: tuple[list[KeyRange], int] | None = None
    for key in keys:
        found = _ranges_of(files, key, parts)
        if found is None:
            log.debug(
                "the bounds of %r cannot cut %d files into %d ranges", key.column, len(files), parts
            )
        elif best is None or found[1] < best[1]:
            best = found
    if best is None:
        return None
    ranges, decoded = best
    return RangeCut(ranges, decoded / max(sum(f.record_count for f in files), 1))


@dataclass(frozen=True)
class _FileKeys:
    """Where one file's keys lie on the line, and how many rows it has."""

    lower: int
    upper: int
    rows: int

    def rows_below(self, position: int) -> float:
        """The rows estimated below `position`: spread evenly over [lower, upper], a key each."""
        if position <= self.lower:
            return 0.0
        if position > self.upper:
            return float(self.rows)
        return self.rows * (position - self.lower) / (self.upper - self.lower + 1)


def _ranges_of(
    files: Sequence[DataFile], key: RangeKey, parts: int
) -> tuple[list[KeyRange], int] | None:
    """The ranges of `key`, and the rows their tasks decode.

    Each task decodes the rows of the files its range overlaps.
    """
    key_type = key.field.field_type
    if not isinstance(key_type, PrimitiveType):
        return None
    found = [_bounds(f, key.field, key_type) for f in files]
    if any(b is None for b in found):
        return None
    bounds = [b for b in found if b is not None]
    scale = _Scale.of(key_type, [v for b in bounds for v in b])
    keys = [
        _FileKeys(scale.position(lower), scale.position(upper), f.record_count)
        for (lower, upper), f in zip(bounds, files, strict=True)
    ]
    total = sum(k.rows for k in keys)
    if total == 0:
        return None

    def below(position: int) -> float:
        return sum(k.rows_below(position) for k in keys)

    # The estimated rows below a position change slope only at the files' bounds.
    breaks = sorted({p for k in keys for p in (k.lower, k.upper + 1)})
    counts = [below(p) for p in breaks]
    splits: list[tuple[Any, int]] = []  # (key, its position)
    for k in range(1, parts):
        target = total * k / parts
        at = bisect.bisect_left(counts, target)
        if at == 0 or at >= len(breaks):
            continue
        # interpolated between two breaks, where the count grows linearly
        share = (target - counts[at - 1]) / (counts[at] - counts[at - 1])
        value = scale.value_at(breaks[at - 1] + math.ceil(share * (breaks[at] - breaks[at - 1])))
        position = scale.position(value)
        if position > breaks[0] and (not splits or value > splits[-1][0]):
            splits.append((value, position))
    # Judge the ranges by the bounds' estimate: the split keys are rounded,
    # strings cut to what the bounds know.
    edges = [0.0, *(below(p) for _, p in splits), float(total)]
    if (
        max(b - a for a, b in zip(edges, edges[1:], strict=False))
        > total * MAX_RANGE_EXCESS / parts
    ):
        return None
    values: list[Any] = [None, *(v for v, _ in splits), None]
    positions: list[int | None] = [None, *(p for _, p in splits), None]
    decoded = sum(
        k.rows
        for lower, upper in zip(positions, positions[1:], strict=False)
        for k in keys
        if (lower is None or k.upper >= lower) and (upper is None or k.lower < upper)
    )
    return [
        KeyRange(key.column, lower, upper) for lower, upper in zip(values, values[1:], strict=False)
    ], decoded


def _bounds(
    data_file: DataFile, key: NestedField, key_type: PrimitiveType
) -> tuple[Any, Any] | None:
    lower = (data_file.lower_bounds or {}).get(key.field_id)
    upper = (data_file.upper_bounds or {}).get(key.field_id)
    if lower is None or upper is None:
        return None
    return from_bytes(key_type, lower), from_bytes(key_type, upper)


@dataclass(frozen=True)
class _Scale:
    """Where the keys of one type lie on a line of integers that keeps their order, and back.

    Integers, dates, times and timestamps are their stored integer. Booleans are 0 and 1, and a
    key turned back is a bool, as Iceberg binds no integer to a boolean column. Decimals are
    unscaled. Strings, binary, fixed and uuid are the `_KEY_BYTES` bytes after the prefix every
    bound shares, as an unsigned big-endian integer: the order Iceberg and Arrow compare them
    in, as UTF-8 keeps the order of code points.

    A key turned back from the line is cut to `limit` bytes. Bounds truncated there say nothing of
    what follows; Iceberg keeps 16 characters of a string by default.
    """

    kind: type[PrimitiveType] | None = None  # None: integral
    scale: int = 0  # decimals
    prefix: bytes = b""
    limit: int = 0  # bytes a key turned back may have; fixed and uuid: exactly

    @classmethod
    def of(cls, key_type: PrimitiveType, values: list[Any]) -> _Scale:
        if isinstance(key_type, DecimalType):
            return cls(DecimalType, scale=key_type.scale)
        if isinstance(key_type, BooleanType):
            return cls(BooleanType)
        if isinstance(key_type, StringType | BinaryType | FixedType | UUIDType):
            raw = [_as_bytes(v) for v in values]
            prefix = bytes(_common_prefix(min(raw), max(raw)))
            if isinstance(key_type, FixedType):
                limit = len(key_type)
            elif isinstance(key_type, UUIDType):
                limit = 16
            else:
                limit = max(len(r) for r in raw)
            return cls(type(key_type), prefix=prefix, limit=limit)
        return cls()

    def position(self, value: Any) -> int:
        if self.kind in (None, BooleanType):
            return int(value)
        if self.kind is DecimalType:
            return int(Decimal(value).scaleb(self.scale))
        tail = _as_bytes(value)[len(self.prefix) : len(self.prefix) + _KEY_BYTES]
        return int.from_bytes(tail.ljust(_KEY_BYTES, b"\0"), "big")

    def value_at(self, position: int) -> Any:
        """A key at about `position` (at it, or below where keys are cut)."""
        if self.kind is None:
            return position
        if self.kind is BooleanType:
            return position > 0
        if self.kind is DecimalType:
            return Decimal(position).scaleb(-self.scale)
        position = min(max(position, 0), 2 ** (8 * _KEY_BYTES) - 1)
        raw = (self.prefix + position.to_bytes(_KEY_BYTES, "big"))[: self.limit]
        if self.kind in (FixedType, UUIDType):
            return raw.ljust(self.limit, b"\0")
        raw = raw.rstrip(b"\0")
        # a cut through a UTF-8 sequence: what is left of it goes (the key stays below the position)
        return raw.decode("utf-8", errors="ignore") if self.kind is StringType else raw


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    return value.bytes if isinstance(value, uuid.UUID) else bytes(value)


def _common_prefix(a: bytes, b: bytes) -> bytes:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]

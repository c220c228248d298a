"""Driver side: cut a large copy-on-write rewrite into key ranges of about equal rows, from the
column bounds the manifests keep for every data file (metadata only, no file is opened).

A range of the first identifier column, not a hash: pyiceberg pushes a range down into the Parquet
reader (row groups outside it are skipped), and Arrow has no row hash to filter by. The bounds
give, for each file, where its identifiers lie; rows are assumed spread evenly between a file's
bounds, which holds for files sorted by the key (their ranges are disjoint) and for files of
random keys (their ranges all span the table) alike.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.types import NestedField, PrimitiveType

from icecdc.reading.tasks import KeyRange


@dataclass(frozen=True)
class _FileKeys:
    """Where one file's keys lie, and how many rows it has."""

    lower: Any
    upper: Any
    rows: int

    def share_below(self, value: Any) -> float:
        """The share of the file's rows estimated below `value`."""
        if value <= self.lower:
            return 0.0
        if value > self.upper:
            return 1.0
        if isinstance(value, int | float) and self.upper > self.lower:
            return float(value - self.lower) / float(self.upper - self.lower)
        return 0.5  # a string or another type with no distance: half the file


# More ranges than this would cost more in reading every file once per range than they save.
MAX_RANGES = 1024


def key_ranges(files: Sequence[DataFile], key: NestedField, parts: int) -> list[KeyRange] | None:
    """`parts` ranges of `key` covering every value (and null) with about equal rows of `files`;
    fewer when the bounds cannot tell them apart; None when a file has no bounds for the key."""
    if not isinstance(key.field_type, PrimitiveType):
        return None
    # A range decodes every row group it overlaps, whole: ranges narrower than the row groups
    # (the manifests' split offsets) would decode the same rows again and hold no less memory.
    row_groups = sum(len(f.split_offsets or ()) or 1 for f in files)
    parts = min(parts, row_groups, MAX_RANGES)
    found = [_bounds(f, key) for f in files]
    if any(b is None for b in found):
        return None
    bounds = [b for b in found if b is not None]
    # Where the estimated share of rows below a key changes slope: the files' bounds.
    candidates = sorted({v for b in bounds for v in (b.lower, b.upper)})
    total = sum(b.rows for b in bounds) or 1
    below = [sum(b.rows * b.share_below(c) for b in bounds) / total for c in candidates]
    splits: list[Any] = []
    for k in range(1, parts):
        # the key with k/parts of the rows below it: between two bounds, interpolated where keys are numbers
        at = bisect.bisect_left(below, k / parts)
        if at >= len(candidates):
            break
        split = candidates[at]
        if at > 0 and _numeric(split) and below[at] > below[at - 1]:
            lower, share = candidates[at - 1], (k / parts - below[at - 1]) / (below[at] - below[at - 1])
            split = lower + (split - lower) * share
            split = math.ceil(split) if isinstance(candidates[at], int) else split
        if split > candidates[0] and (not splits or split > splits[-1]):
            splits.append(split)
    edges: list[Any] = [None, *splits, None]
    return [KeyRange(key.name, lower, upper) for lower, upper in zip(edges, edges[1:], strict=False)]


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _bounds(data_file: DataFile, key: NestedField) -> _FileKeys | None:
    assert isinstance(key.field_type, PrimitiveType)
    lower = (data_file.lower_bounds or {}).get(key.field_id)
    upper = (data_file.upper_bounds or {}).get(key.field_id)
    if lower is None or upper is None:
        return None
    key_type = key.field_type
    return _FileKeys(from_bytes(key_type, lower), from_bytes(key_type, upper), data_file.record_count)

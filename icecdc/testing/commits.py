"""Commits of the kinds icecdc must follow, made with pyiceberg: for the demo and the tests.

pyiceberg's append, overwrite, delete and upsert write copy-on-write snapshots. Two helpers fill
what pyiceberg 0.12 lacks: `update` (read the matching rows, change them, overwrite them) and
`compact` (rewrite every data file into one per partition in a `replace` snapshot, as Spark's
rewrite_data_files does).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyiceberg.expressions import BooleanExpression
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Summary

from icecdc.compat import OverwriteFiles, data_files_from_arrow


def update(
    table: Table,
    row_filter: str | BooleanExpression,
    change: Callable[[dict[str, Any]], dict[str, Any]],
) -> int:
    """Apply `change` to every row matching `row_filter`; return how many rows changed.

    The table is rewritten copy-on-write.
    """
    rows = table.scan(row_filter=row_filter).to_arrow()
    if rows.num_rows == 0:
        return 0
    changed = pa.Table.from_pylist(
        [change(dict(row)) for row in rows.to_pylist()], schema=rows.schema
    )
    table.overwrite(changed, overwrite_filter=row_filter)
    return int(rows.num_rows)


def compact(table: Table) -> None:
    """Rewrite all data files as fresh ones in one `replace` snapshot: the same rows, new files."""
    rows = table.scan().to_arrow()
    old_files = [task.file for task in table.scan().plan_files()]
    if not old_files:
        return  # nothing to rewrite: Spark's rewrite_data_files commits no snapshot either
    with table.transaction() as transaction:
        rewrite = _ReplaceFiles(operation=Operation.OVERWRITE, transaction=transaction, io=table.io)
        for data_file in old_files:
            rewrite.delete_data_file(data_file)
        # files whose rows are all deleted go without new ones (pyiceberg cannot write none)
        if rows.num_rows:
            for data_file in data_files_from_arrow(
                transaction.table_metadata, rows, table.io, uuid.uuid4()
            ):
                rewrite.append_data_file(data_file)
        rewrite.commit()


class _ReplaceFiles(OverwriteFiles):
    """pyiceberg 0.12 has no rewrite_data_files: its overwrite producer, recorded as `replace`.

    pyiceberg's summary code knows only append, overwrite and delete, so the summary
    is computed as an overwrite's (the same file and row totals) and then labelled
    with the compaction's operation."""

    # Pyiceberg's signature.
    def _summary(self, snapshot_properties: dict[str, str] = {}) -> Summary:  # noqa: B006
        summary = super()._summary(snapshot_properties)
        return Summary(operation=Operation.REPLACE, **summary.additional_properties)

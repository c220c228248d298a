"""Driver side of reading: work items become tasks, from their snapshots' manifests alone.

Consecutive copy-on-write commits collapse into one change. A snapshot's whole-file removals and
additions in one partition pair up into rewrites.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import replace
from typing import TypeGuard

from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot

from icecdc.catalog import sequence_number, snapshots_by_id
from icecdc.config import BatchConfig
from icecdc.errors import ProcessingError
from icecdc.manifests import ChangedEntries, SnapshotFiles, equality_deletes_on
from icecdc.model import ChangeType, ItemKind, WorkItem, by_snapshot
from icecdc.reading.ranges import RangeKey, key_ranges
from icecdc.reading.tasks import DealtRewrite, FileTask, KeyDeleteTask, PassTasks, RewriteTask, Task

# What one executor task may load whole to cancel a rewrite's unchanged rows in Arrow: the files one
# partition's rewrite removed and added, compressed as stored (decompressed, several times more).
DEFAULT_REWRITE_BUDGET = BatchConfig().max_rewrite_bytes
# Range tasks that would decode the rewrite this many times over deal it instead (`DealtRewrite`):
# a shuffle of the rewrite's rows costs less than decoding them twice.
DEAL_OVERLAP = 2.0

log = logging.getLogger(__name__)


def pass_tasks(
    table: Table,
    items: Iterable[WorkItem],
    identifier_columns: tuple[str, ...] = (),
    changed: ChangedEntries | None = None,
    rewrite_budget: int = DEFAULT_REWRITE_BUDGET,
    collapse_runs: bool = True,
) -> PassTasks:
    """`file_tasks` of a pass's items, with an export's tasks apart.

    An export is the first snapshot of its batch and joins no run of copy-on-write commits, so its
    tasks are the same either way.
    """
    items = list(items)
    export = file_tasks(
        table,
        [i for i in items if i.kind == ItemKind.EXPORT],
        identifier_columns,
        changed,
        rewrite_budget,
    )
    changes = file_tasks(
        table,
        [i for i in items if i.kind != ItemKind.EXPORT],
        identifier_columns,
        changed,
        rewrite_budget,
        collapse_runs,
    )
    inserts = [t for t in export if isinstance(t, FileTask) and t.change == ChangeType.INSERT]
    if len(inserts) != len(export):
        raise ProcessingError(f"an export's tasks must be inserts of whole files, not {export}")
    return PassTasks(inserts, changes)


def file_tasks(
    table: Table,
    items: Iterable[WorkItem],
    identifier_columns: tuple[str, ...] = (),
    changed: ChangedEntries | None = None,
    rewrite_budget: int = DEFAULT_REWRITE_BUDGET,
    collapse_runs: bool = True,
) -> list[Task]:
    """Resolve the items' paths to tasks through the manifests of their snapshots (metadata only).

    `changed`: the snapshots' entries, when planning in this process has read them already.
    `rewrite_budget`: the bytes of files one rewrite task may hold (see `_pair_rewrites`).
    `collapse_runs`: False when a dead pass may have written some of these changes: then every
    commit is its own change (see `_collapse`)."""
    changed = changed or ChangedEntries()
    tasks: list[Task] = []
    # One snapshot's files serve as "after" for it and "before" for its child: load each once.
    loaded: dict[int | None, SnapshotFiles] = {}

    def files_of(snapshot: Snapshot | None) -> SnapshotFiles:
        key = snapshot.snapshot_id if snapshot is not None else None
        if key not in loaded:
            loaded[key] = SnapshotFiles(table, snapshot, changed)
        return loaded[key]

    # a rewrite too large for one task is cut by ranges of an identifier
    # column: the first whose bounds can
    schema = table.schema()
    keys = [RangeKey(name, schema.find_field(name)) for name in identifier_columns]
    # consecutive copy-on-write commits, collapsed into one change
    run: list[tuple[Snapshot, list[FileTask]]] = []
    by_id = snapshots_by_id(table)
    # oldest snapshot first (a collapsed run ends at its newest)
    for snapshot_id, snapshot_items in by_snapshot(
        sorted(items, key=lambda i: (i.sequence_number, i.group))
    ).items():
        snapshot = by_id.get(snapshot_id)
        name = snapshot_items[0].table
        if snapshot is None:
            raise ProcessingError(f"table {name!r}: snapshot {snapshot_id} no longer exists")
        if snapshot_items[0].kind == ItemKind.EXPORT:
            snapshot_tasks = _export_tasks(snapshot, snapshot_items, files_of(snapshot))
        else:
            parent = (
                by_id.get(snapshot.parent_snapshot_id)
                if snapshot.parent_snapshot_id is not None
                else None
            )
            snapshot_tasks = _change_tasks(
                table,
                snapshot,
                snapshot_items,
                identifier_columns,
                files_of(parent),
                files_of(snapshot),
            )
        if (
            collapse_runs
            and snapshot_items[0].kind != ItemKind.EXPORT
            and _is_copy_on_write(snapshot_tasks, snapshot)
        ):
            run.append((snapshot, snapshot_tasks))
            continue
        tasks += _pair_rewrites(_collapse(run), rewrite_budget, keys) + _pair_rewrites(
            snapshot_tasks, rewrite_budget, keys
        )
        run = []
    return tasks + _pair_rewrites(_collapse(run), rewrite_budget, keys)


def _is_copy_on_write(tasks: list[Task], snapshot: Snapshot) -> TypeGuard[list[FileTask]]:
    """Whether a commit only removed and added whole data files, and added no delete files.

    A compaction (`replace`) is not: its files are never read, so it cannot link a run.
    """
    if snapshot.summary is not None and snapshot.summary.operation == Operation.REPLACE:
        return False
    return all(
        isinstance(t, FileTask)
        and t.deletes_after is None
        and (t.change == ChangeType.DELETE or not t.deletes)
        for t in tasks
    )


def _collapse(run: list[tuple[Snapshot, list[FileTask]]]) -> list[Task]:
    """A run of copy-on-write commits as one change at the run's last sequence number.

    The net change of a run is the rows of the files live before it that it removed, against the
    rows of the files it added that are still live after it. A file added and removed within the
    run is never read: a hot file rewritten by commit after commit, or a row inserted then
    deleted. So 20 commits that rewrite one file read it twice, not 40 times. All changes get
    the last commit's sequence number, so a key's DELETE where it was and INSERT where it is
    always pair, whichever partitions the run touched last. Every version of the run is still
    above the previous pass's and below the next one's.

    This is right only when the index holds the table as of the checkpoint. A pass that died or
    failed after some of its bulk requests were applied wrote images in between: a row of a skipped
    file, a key's middle image, or a delete whose row, written back unchanged, would cancel. The
    model-based test found all three. Its successor finds the end it recorded
    (`StateStore.begin_pass`) and reads commit by commit, collapsing nothing (`collapse_runs`).
    """
    if len(run) <= 1:
        return [t for _, tasks in run for t in tasks]
    last = run[-1][0]
    added = {
        t.data_file.file_path for _, tasks in run for t in tasks if t.change == ChangeType.INSERT
    }
    removed = {
        t.data_file.file_path for _, tasks in run for t in tasks if t.change == ChangeType.DELETE
    }
    transient = added & removed
    return [
        replace(t, sequence_number=sequence_number(last), snapshot_id=last.snapshot_id)
        for _, tasks in run
        for t in tasks
        if t.data_file.file_path not in transient
    ]


def _export_tasks(snapshot: Snapshot, items: list[WorkItem], files: SnapshotFiles) -> list[Task]:
    tasks: list[Task] = []
    files.locate(items)
    for path in sorted({p for item in items for p in item.added_data_files}):
        entry = files.data_entry(path, items[0].table)
        tasks.append(
            FileTask(
                entry.data_file,
                ChangeType.INSERT,
                sequence_number(snapshot),
                snapshot.snapshot_id,
                files.deletes_for(entry),
            )
        )
    return tasks


def _change_tasks(
    table: Table,
    snapshot: Snapshot,
    items: list[WorkItem],
    identifier_columns: tuple[str, ...],
    before: SnapshotFiles,
    after: SnapshotFiles,
) -> list[Task]:
    name = items[0].table
    wanted = {
        p
        for item in items
        for p in item.added_data_files + item.removed_data_files + item.added_delete_files
    }
    seq, snapshot_id = sequence_number(snapshot), snapshot.snapshot_id
    tasks: list[Task] = []
    added_data: set[str] = set()
    row_deletes: list[DataFile] = []
    found: set[str] = set()
    # Not one entry per path: a Puffin file holds the deletion vectors of
    # many data files, an entry each.
    for entry in after.own_entries():
        if entry.data_file.file_path not in wanted:
            continue
        found.add(entry.data_file.file_path)
        content, added = entry.data_file.content, entry.status == ManifestEntryStatus.ADDED
        if content == DataFileContent.DATA and added:
            added_data.add(entry.data_file.file_path)
            tasks.append(
                FileTask(
                    entry.data_file, ChangeType.INSERT, seq, snapshot_id, after.deletes_for(entry)
                )
            )
        elif content == DataFileContent.DATA:
            tasks.append(
                FileTask(
                    entry.data_file, ChangeType.DELETE, seq, snapshot_id, before.deletes_for(entry)
                )
            )
        elif content == DataFileContent.EQUALITY_DELETES and equality_deletes_on(
            table, entry.data_file, identifier_columns
        ):
            tasks.append(KeyDeleteTask(entry.data_file, seq, snapshot_id))
        else:
            # Position deletes and vectors, and equality deletes on other columns
            # (e.g. the identifier plus partition columns, as Flink writes them):
            # resolved against the rows they touch.
            row_deletes.append(entry.data_file)
    if wanted - found:
        raise ProcessingError(
            f"table {name!r}: file {min(wanted - found)} of snapshot {snapshot_id} is not in "
            "its manifests"
        )
    # Rows newly deleted: diff each touched data file's deletes in force before and after.
    for entry in after.data_files_touched_by(row_deletes):
        # an added file's inserts already had these applied
        if entry.data_file.file_path not in added_data:
            tasks.append(
                FileTask(
                    entry.data_file,
                    ChangeType.DELETE,
                    seq,
                    snapshot_id,
                    before.deletes_for(entry),
                    after.deletes_for(entry),
                )
            )
    return tasks


def _pair_rewrites(tasks: list[Task], budget: int, keys: list[RangeKey]) -> list[Task]:
    """Gather a snapshot's whole-file deletes and inserts of one partition into RewriteTasks.

    A rewrite task loads its rows whole, so that unchanged rows cancel in Arrow before Python. One
    larger than `budget`, such as a MERGE that rewrote every file of a big partition or of an
    unpartitioned table, is cut into ceil(size / budget) tasks by ranges of an identifier column of
    `keys` (`ranges.key_ranges`). Each holds about `budget` of it, and they run in parallel. Where
    the files each span many of the ranges, the rewrite is dealt to them instead (`DealtRewrite`).

    Where no identifier's bounds can cut it into ranges of about the budget, or the table has no
    identifier, it stays plain file tasks. Bounds cannot when none are kept, when a partition has
    one key value, or when they are truncated to a shared prefix. Each file then streams through its
    own task, so memory stays bounded whatever the key. The unchanged rows cancel after the shuffle,
    exactly as well (`changelog.remove_carryovers`), at the price of shuffling them.
    """
    if not any(isinstance(t, FileTask) and t.change == ChangeType.DELETE for t in tasks):
        return tasks  # nothing removed whole, as in an export or an append: nothing to pair
    by_partition: dict[tuple[int, str], list[FileTask]] = {}
    others: list[Task] = []
    for task in tasks:
        if isinstance(task, FileTask) and not task.deletes and task.deletes_after is None:
            by_partition.setdefault(
                (task.data_file.spec_id, repr(task.data_file.partition)), []
            ).append(task)
        else:
            others.append(task)
    for group in by_partition.values():
        removed = tuple(t for t in group if t.change == ChangeType.DELETE)
        added = tuple(t for t in group if t.change == ChangeType.INSERT)
        size = sum(t.data_file.file_size_in_bytes for t in group)
        if not (removed and added):
            others += group
        elif size <= budget:
            others.append(RewriteTask(removed, added))
        else:
            cut = key_ranges([t.data_file for t in group], keys, math.ceil(size / budget))
            if cut is None:
                log.info(
                    "a rewrite of %d files (%d bytes) cannot be cut by key: read file by file",
                    len(group),
                    size,
                )
                others += group
            elif cut.overlap >= DEAL_OVERLAP:
                others.append(DealtRewrite(removed, added, tuple(cut.ranges)))
            else:
                others += [RewriteTask(removed, added, r) for r in cut.ranges]
    return others

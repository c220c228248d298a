"""Planning: turn a table's commits since its checkpoint into work items.

This is the planner Lambda's work, and `icecdc sync`'s first step. It reads only Iceberg metadata
(snapshots and manifests), never data files, and writes work items put-if-absent, so planning
twice, or two planners racing, leaves each item once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace

from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot

from icecdc.config import TableConfig
from icecdc.deadletters import DeadLetters
from icecdc.errors import PlanningError
from icecdc.state import CHANGE, EXPORT, RESET, REWRITE, Checkpoint, StateStore, WorkItem

log = logging.getLogger(__name__)

# Files per change item: keeps an item far below DynamoDB's 400 KB item limit.
FILES_PER_ITEM = 200


@dataclass(frozen=True)
class PlanResult:
    table: str
    snapshots: int  # snapshots after the checkpoint (or export base) that were walked
    items: int  # work items of those snapshots
    written: int  # of which this call wrote (the others existed already)


def plan_table(
    table: Table,
    config: TableConfig,
    store: StateStore,
    identifier_columns: tuple[str, ...],
    changed: ChangedEntries | None = None,
) -> PlanResult:
    """Write the work items that bring the index from the table's checkpoint to its current snapshot.

    `changed`: the snapshots' entries, shared with the reading that follows in the same process."""
    current = table.current_snapshot()
    if current is None:
        log.info("%s: no snapshot yet, nothing to plan", config.name)
        return PlanResult(config.name, 0, 0, 0)
    if table.format_version < 2:
        raise PlanningError(
            f"table {config.name!r} is Iceberg format v1, which has no sequence numbers to version documents by; "
            "upgrade it with the table property format-version=2"
        )
    changed = changed or ChangedEntries()
    table_uuid = str(table.metadata.table_uuid)
    checkpoint = store.get_checkpoint(config.name)
    resync, reason = _resync_needed(table, config.name, checkpoint, identifier_columns)

    items: list[WorkItem] = []
    if checkpoint is None or resync:
        replacing = checkpoint.token if checkpoint is not None else ""
        base = store.claim_export(config.name, Checkpoint(table_uuid, current.snapshot_id, current.sequence_number), replacing)
        if resync:
            log.warning("%s: %s; resyncing from snapshot %d (%s)", config.name, reason, base.snapshot_id, resync)
        if config.export or resync:
            items += _export_items(table, config.name, base, resync, replacing)
        else:
            store.complete(config.name, base, [])
    else:
        base = checkpoint

    snapshots = _snapshots_after(table, config.name, base)
    for snapshot in snapshots:
        items += _change_items(table, config.name, snapshot, identifier_columns, changed)
    if resync:
        _retire_other_branches(table, config.name, store, {base.snapshot_id} | {s.snapshot_id for s in snapshots})

    written = sum(store.put_item(item) for item in items)
    log.info("%s: planned %d snapshots into %d work items (%d new)", config.name, len(snapshots), len(items), written)
    return PlanResult(config.name, len(snapshots), len(items), written)


def _snapshots_after(table: Table, name: str, base: Checkpoint) -> list[Snapshot]:
    """The current snapshot's ancestors after `base`, oldest first."""
    by_id = {s.snapshot_id: s for s in table.snapshots()}
    chain: list[Snapshot] = []
    snapshot = table.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != base.snapshot_id:
        chain.append(snapshot)
        parent_id = snapshot.parent_snapshot_id
        snapshot = by_id.get(parent_id) if parent_id is not None else None
    if snapshot is None:
        raise PlanningError(
            f"table {name!r}: checkpoint snapshot {base.snapshot_id} is not an ancestor of the current snapshot "
            "(expired, or the table was rolled back); the changes in between cannot be read"
        )
    chain.reverse()
    return chain


def _resync_needed(
    table: Table, name: str, checkpoint: Checkpoint | None, identifier_columns: tuple[str, ...]
) -> tuple[str, str]:
    """("", "") when the index can follow the table commit by commit; else how to rebuild it and why.

    REWRITE (export, then delete what the export did not write) works while versions only grow;
    RESET (empty the index, then export) where they would go backwards or ids change.
    """
    if checkpoint is None:
        return "", ""
    if checkpoint.table_uuid != str(table.metadata.table_uuid):
        return RESET, f"the table was dropped and created again (UUID {checkpoint.table_uuid} → {table.metadata.table_uuid})"
    if checkpoint.identifier_columns and checkpoint.identifier_columns != identifier_columns:
        return RESET, f"the identifier columns changed ({list(checkpoint.identifier_columns)} → {list(identifier_columns)})"
    try:
        _snapshots_after(table, name, checkpoint)
    except PlanningError:
        current = table.current_snapshot()
        assert current is not None
        if table.snapshot_by_id(checkpoint.snapshot_id) is not None or current.sequence_number <= checkpoint.sequence_number:
            return RESET, f"the table was rolled back: checkpoint snapshot {checkpoint.snapshot_id} is not an ancestor"
        return REWRITE, f"checkpoint snapshot {checkpoint.snapshot_id} was expired: the changes since cannot be read"
    if checkpoint.schema_id >= 0 and checkpoint.schema_id != table.metadata.current_schema_id:
        return REWRITE, f"the schema changed (schema {checkpoint.schema_id} → {table.metadata.current_schema_id})"
    return "", ""


def _retire_other_branches(table: Table, name: str, store: StateStore, valid: set[int]) -> None:
    """Retire pending items of snapshots a resync leaves behind (expired, or on a rolled-back branch).

    Items of commits newer than this planner's view of the table are kept: their sequence numbers
    are above every one it knows.
    """
    stale = [
        i
        for i in store.pending_items(name)
        if i.snapshot_id not in valid and i.sequence_number <= table.metadata.last_sequence_number
    ]
    if stale:
        log.info("%s: retiring %d work items of snapshots left behind", name, len(stale))
        store.complete(name, None, stale)


def _export_items(table: Table, name: str, base: Checkpoint, resync: str = "", replacing: str = "") -> list[WorkItem]:
    """One item per live data file of the export snapshot (one empty item for an empty table).

    Delete files in force are applied when the files are read, so the export equals a table scan.
    """
    snapshot = table.snapshot_by_id(base.snapshot_id)
    if snapshot is None:
        raise PlanningError(f"table {name!r}: export snapshot {base.snapshot_id} no longer exists")
    paths = []
    for manifest in snapshot.manifests(table.io):
        if manifest.content == ManifestContent.DATA:
            paths += [entry.data_file.file_path for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)]
    paths.sort()
    groups = [(path,) for path in paths] or [()]
    return [
        WorkItem(
            name,
            base.table_uuid,
            EXPORT,
            base.snapshot_id,
            base.sequence_number,
            i,
            len(groups),
            added_files=files,
            resync=resync,
            replacing=replacing,
        )
        for i, files in enumerate(groups)
    ]


def _change_items(
    table: Table, name: str, snapshot: Snapshot, identifier_columns: tuple[str, ...], changed: ChangedEntries
) -> list[WorkItem]:
    """Items of the files a snapshot added and removed; one empty item for a compaction."""
    files: list[tuple[str, str]] = []  # (path, what it is: ADDED_DATA, REMOVED_DATA or ADDED_DELETES)
    if snapshot.summary is None or snapshot.summary.operation != Operation.REPLACE:
        for entry in changed.of(table, snapshot):
            data_file, added = entry.data_file, entry.status == ManifestEntryStatus.ADDED
            if data_file.content == DataFileContent.DATA:
                files.append((data_file.file_path, _ADDED_DATA if added else _REMOVED_DATA))
            elif added:  # a delete file; one dropped (replaced by a newer vector, or with its data file) removes no row
                files.append((data_file.file_path, _ADDED_DELETES))
    if not identifier_columns and any(what != _ADDED_DATA for _, what in files):
        raise PlanningError(
            f"table {name!r}: snapshot {snapshot.snapshot_id} removes rows, but the table has no identifier "
            "columns to find their documents by; set tables[].identifier_columns or the schema's identifier fields"
        )
    files = sorted(set(files))  # a Puffin file is listed once however many vectors it holds
    groups = [files[i : i + FILES_PER_ITEM] for i in range(0, len(files), FILES_PER_ITEM)] or [[]]
    return [
        WorkItem(
            name,
            str(table.metadata.table_uuid),
            CHANGE,
            snapshot.snapshot_id,
            snapshot.sequence_number,
            i,
            len(groups),
            added_files=tuple(p for p, what in group if what == _ADDED_DATA),
            deleted_files=tuple(p for p, what in group if what == _REMOVED_DATA),
            delete_files=tuple(p for p, what in group if what == _ADDED_DELETES),
        )
        for i, group in enumerate(groups)
    ]


_ADDED_DATA, _REMOVED_DATA, _ADDED_DELETES = "added data", "removed data", "added deletes"


class ChangedEntries:
    """The manifest entries each snapshot ADDED or DELETED, read from its manifests once.

    Planning lists them as work items and reading resolves the items against them; in one process
    (a local sync) both share an instance and each manifest is read once. Snapshots never change,
    so the entries cannot go stale; they are metadata, a few hundred bytes a file."""

    def __init__(self) -> None:
        self._by_snapshot: dict[int, list[ManifestEntry]] = {}

    def of(self, table: Table, snapshot: Snapshot) -> list[ManifestEntry]:
        if snapshot.snapshot_id not in self._by_snapshot:
            self._by_snapshot[snapshot.snapshot_id] = list(entries_changed_by(table, snapshot))
        return self._by_snapshot[snapshot.snapshot_id]


def entries_changed_by(table: Table, snapshot: Snapshot) -> Iterator[ManifestEntry]:
    """The manifest entries of every data or delete file the snapshot ADDED or DELETED."""
    for manifest in snapshot.manifests(table.io):
        # Only manifests the snapshot wrote can hold its ADDED and DELETED entries.
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            if entry.snapshot_id == snapshot.snapshot_id and entry.status != ManifestEntryStatus.EXISTING:
                yield entry


@dataclass(frozen=True)
class TableStatus:
    table: str
    checkpoint: Checkpoint | None
    current_snapshot_id: int | None
    pending_items: int
    lag_snapshots: int | None  # snapshots after the checkpoint; None before the first sync or when unknowable
    lag_seconds: float  # age of the oldest commit not yet applied; 0 when caught up
    dead_letters: int = 0  # documents kept aside because they can never be written


def table_status(
    table: Table, config: TableConfig, store: StateStore, now: float, dead_letters: DeadLetters | None = None
) -> TableStatus:
    """Where the index stands against the table: checkpoint, pending work, lag and dead letters."""
    status = _lag(table, config, store, now)
    return replace(status, dead_letters=dead_letters.count(config.name)) if dead_letters else status


def _lag(table: Table, config: TableConfig, store: StateStore, now: float) -> TableStatus:
    checkpoint = store.get_checkpoint(config.name)
    current = table.current_snapshot()
    pending = len(store.pending_items(config.name))
    if current is None:
        return TableStatus(config.name, checkpoint, None, pending, 0, 0.0)
    if checkpoint is None:
        return TableStatus(config.name, None, current.snapshot_id, pending, None, now - current.timestamp_ms / 1000)
    try:
        behind = _snapshots_after(table, config.name, checkpoint)
    except PlanningError:
        return TableStatus(config.name, checkpoint, current.snapshot_id, pending, None, 0.0)
    lag_seconds = max(0.0, now - behind[0].timestamp_ms / 1000) if behind else 0.0
    return TableStatus(config.name, checkpoint, current.snapshot_id, pending, len(behind), lag_seconds)

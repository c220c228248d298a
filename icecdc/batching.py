"""Which pending items a pass takes: pure functions over work items.

`select_batch` splits a table's pending items into the batch (the complete snapshots on the current
snapshot's `Lineage`, from the checkpoint on) and the stale items to retire unread; `cap_batch` cuts
the batch to what one pass may read. The sizes of the files come from `BatchSizes`
(`icecdc.manifests.SnapshotSizes` reads them from the manifests, as they are asked for)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from icecdc.catalog import Lineage
from icecdc.config import BatchConfig
from icecdc.model import (
    NO_SNAPSHOT,
    Checkpoint,
    ItemHead,
    ItemKind,
    ItemStatus,
    WorkItem,
    by_snapshot,
)


class BatchSizes(Protocol):
    """The bytes of the files of a batch's snapshots."""

    def has_snapshot(self, snapshot_id: int) -> bool: ...

    def export_bytes(self, item: ItemHead) -> int: ...

    def change_bytes(self, snapshot_id: int) -> int: ...


class ItemSizes(Protocol):
    """The bytes of the files of items and snapshots (`icecdc.manifests.SnapshotSizes`)."""

    def has_snapshot(self, snapshot_id: int) -> bool: ...

    def export_bytes(self, item: WorkItem) -> int: ...

    def change_bytes(self, snapshot_id: int) -> int: ...


class Bodies(Protocol):
    """The files of an item whose head a pass holds (`icecdc.state.ItemBodies`)."""

    def one(self, head: ItemHead) -> WorkItem: ...


@dataclass(frozen=True)
class HeadSizes:
    """`BatchSizes` of heads: an export item's bytes are of its body, fetched when asked for."""

    sizes: ItemSizes
    bodies: Bodies

    def has_snapshot(self, snapshot_id: int) -> bool:
        return self.sizes.has_snapshot(snapshot_id)

    def export_bytes(self, item: ItemHead) -> int:
        return self.sizes.export_bytes(self.bodies.one(item))

    def change_bytes(self, snapshot_id: int) -> int:
        return self.sizes.change_bytes(snapshot_id)


def select_batch(
    items: list[ItemHead], checkpoint: Checkpoint | None, lineage: Lineage
) -> tuple[list[ItemHead], list[ItemHead]]:
    """Split pending items into the batch to apply now and the stale items to retire unread.

    An item is stale when the checkpoint supersedes it: it was applied, or replaced by a resync, by
    a run that crashed before marking it done. It is stale too when it is off the current snapshot's
    lineage, as after a rollback, or before a pending export on it, which brings the index past it.

    The batch is the run of snapshots on the lineage that starts right after the checkpoint, or at a
    pending export, oldest first, each with all its items present. A snapshot a planner is still
    writing, or has not planned yet, ends it. Items of commits newer than this view wait.
    """
    rebuilding = checkpoint is not None and any(
        i.resync and not checkpoint.supersedes(i) and not lineage.abandoned(i) for i in items
    )  # a resync that replaces the checkpoint is pending
    stale = [i for i in items if lineage.abandoned(i) or _superseded(i, checkpoint, rebuilding)]
    retired = {i.key for i in stale}
    by_position: dict[int, list[ItemHead]] = {}
    for item in items:
        position = lineage.position(item.snapshot_id)
        if position is not None and item.key not in retired:
            by_position.setdefault(position, []).append(item)
    exports = [
        p
        for p, snapshot_items in by_position.items()
        if any(i.kind == ItemKind.EXPORT for i in snapshot_items)
    ]
    if exports:
        start = max(exports)
        found, by_position[start] = by_position[start], _one_export(by_position[start])
        kept = {i.key for i in by_position[start]}  # by key: a list would compare each pair
        stale += [i for i in found if i.key not in kept]
    elif checkpoint is not None and (at := lineage.position(checkpoint.snapshot_id)) is not None:
        start = at + 1
    elif checkpoint is not None and checkpoint.snapshot_id == NO_SNAPSHOT:
        # a table created empty: its every snapshot is a change
        # (snapshots_after checks none expired)
        start = 0
    else:
        return [], stale  # the checkpoint is off the lineage: the planner resyncs first
    stale += [
        i
        for position, snapshot_items in by_position.items()
        if position < start
        for i in snapshot_items
    ]
    batch: list[ItemHead] = []
    for position in range(start, len(lineage.snapshot_ids)):
        snapshot_items = sorted(by_position.get(position, []), key=lambda i: i.group)
        if not snapshot_items or len({i.group for i in snapshot_items}) != snapshot_items[0].groups:
            break
        batch += snapshot_items
    return batch, stale


def _one_export(items: list[ItemHead]) -> list[ItemHead]:
    """The items of the one export a batch applies, of the snapshot's `items`.

    That is a resync's, when one replaces a first export of the same snapshot not finished (as
    `repair --rebuild` plans over it): the resync rebuilds from nothing, and reading the first's
    files too would read every row twice. The snapshot's change items, planned before the export
    was, are stale: the export covers them.
    """
    exports = [i for i in items if i.kind == ItemKind.EXPORT]
    resynced = [i for i in exports if i.resync]
    return resynced or exports


def _superseded(item: ItemHead, checkpoint: Checkpoint | None, rebuilding: bool) -> bool:
    """Whether the checkpoint says the item's changes are in the index already.

    Not for a change while a resync that replaces the checkpoint is pending (`rebuilding`). The
    rebuilt index holds the export's snapshot and nothing after it, so every change after the export
    is needed, even one the old checkpoint had applied: its snapshot was rolled back, then made
    current again by a rollback undone or a cherry-pick that fast-forwards. Changes before the
    export are stale by their place on the lineage.
    """
    if checkpoint is None or not checkpoint.supersedes(item):
        return False
    return bool(item.resync) or not rebuilding


def cap_batch(
    batch: list[ItemHead], limits: BatchConfig, sizes: BatchSizes
) -> tuple[list[ItemHead], bool]:
    """The part of the batch one pass applies, and whether it ends inside an export.

    Whole snapshots, oldest first, while their files and bytes fit the caps (at least one). An
    export, always the first snapshot of its batch, is cut item by item (each of at most
    `batch.max_files` files, `planning.export_group_size`): the pass ends inside it, and its
    APPLIED items are kept so the pass that reads its last files can finish it."""
    taken: list[ItemHead] = []
    tally = _Tally(limits)
    for snapshot_id, items in by_snapshot(batch).items():
        if items[0].kind == ItemKind.EXPORT and sizes.has_snapshot(snapshot_id):
            export, inside = _cap_export(items, tally, sizes)
            taken += export
            if inside:
                return taken, True
            continue
        files = sum(i.file_count for i in items)
        size = sizes.change_bytes(snapshot_id) if files else 0
        if taken and not tally.fits(files, size):
            return taken, False
        taken += items
        tally.add(files, size)
    return taken, False


def _cap_export(
    items: list[ItemHead], tally: _Tally, sizes: BatchSizes
) -> tuple[list[ItemHead], bool]:
    """The export's items a pass takes, and whether the pass ends inside the export.

    It takes the export's files not applied yet while they fit, at least one, and its APPLIED items,
    which tell later passes it has begun.
    """
    applied = [i for i in items if i.status == ItemStatus.APPLIED]
    taken: list[ItemHead] = []
    for item in (i for i in items if i.status != ItemStatus.APPLIED):
        files = item.file_count
        # a pass full by its files asks no bytes of the next item: no manifest beyond its own
        if not tally.empty and not tally.fits(files, 0):
            return taken + applied, True
        size = sizes.export_bytes(item)
        if not tally.empty and not tally.fits(files, size):
            return taken + applied, True
        taken.append(item)
        tally.add(files, size)
    return taken + applied, False


@dataclass
class _Tally:
    """What the items a pass has taken so far read, against its caps."""

    limits: BatchConfig
    files: int = 0
    bytes: int = 0

    @property
    def empty(self) -> bool:
        return not (self.files or self.bytes)

    def fits(self, files: int, size: int) -> bool:
        return (
            self.files + files <= self.limits.max_files
            and self.bytes + size <= self.limits.max_bytes
        )

    def add(self, files: int, size: int) -> None:
        self.files += files
        self.bytes += size


def collapses_runs(
    recorded: Checkpoint | None, checkpoint: Checkpoint | None, end: Checkpoint
) -> bool:
    """Whether a pass through `end` may collapse runs of copy-on-write commits as it reads.

    It may unless a pass recorded an end (`recorded`, `StateStore.begin_pass`) of the table's
    UUID past the `checkpoint`: that pass may have written some of the changes.
    """
    if recorded is None or recorded.table_uuid != end.table_uuid:
        return True
    return (
        checkpoint is not None
        and checkpoint.table_uuid == recorded.table_uuid
        and recorded.sequence_number <= checkpoint.sequence_number
    )

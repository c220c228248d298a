"""Planning: turn a table's commits since its checkpoint into work items.

This is the planner Lambda's work, and `icecdc sync`'s first step. It reads only Iceberg metadata
(snapshots and manifests), never data files, and writes work items put-if-absent, so planning
twice, or two planners racing, leaves each item once; a change after the checkpoint whose item is
done (its snapshot rolled back, then current again) is written pending again.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from pyiceberg.manifest import DataFileContent, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot

from icecdc.catalog import Lineage, last_sequence_number, sequence_number
from icecdc.config import BatchConfig, TableIndexConfig
from icecdc.errors import PlanningError
from icecdc.manifests import ChangedEntries, LiveFiles
from icecdc.model import NO_SNAPSHOT, AnyItem, Checkpoint, ItemHead, ItemKind, ResyncKind, WorkItem
from icecdc.protection import keep_unapplied
from icecdc.state import StateStore
from icecdc.verdict import ExportFacts, TableFacts, first_export_verdict, table_verdict
from icecdc.words import counted

log = logging.getLogger(__name__)

# Files per change item: keeps an item far below DynamoDB's 400 KB item limit.
FILES_PER_ITEM = 200
# Files per export item, at most: an export of N files costs about N/100 state writes to plan,
# mark and retire (see `export_group_size`).
EXPORT_FILES_PER_ITEM = 100
# Export items put in one call (DynamoDB batches them 50 a transaction): planning holds this many
# at once.
PUT_CHUNK = 500
# Export claims tried in one plan when the claimed snapshots keep being rolled back.
MAX_EXPORT_CLAIMS = 10


@dataclass(frozen=True)
class PlanResult:
    table: str
    snapshots: int  # snapshots after the checkpoint (or export base) that were walked
    items: int  # work items of those snapshots
    written: int  # of which this call wrote (the others existed already)


def plan_table(
    table: Table,
    config: TableIndexConfig,
    store: StateStore,
    identifier_columns: tuple[str, ...],
    changed: ChangedEntries | None = None,
    resync: tuple[ResyncKind, str] | None = None,
    limits: BatchConfig | None = None,
) -> PlanResult:
    """Write the work items that bring the index from the checkpoint to the current snapshot.

    It also retires pending items of commits that are no longer on the current snapshot's lineage.

    `changed` holds the snapshots' entries, shared with the reading that follows in the same
    process. `resync` is REWRITE or RESET and why, when the processor found that the index needs
    rebuilding. `limits` is what a pass may read, which an export item never exceeds, as
    `export_group_size` makes sure.
    """
    checkpoint = store.get_checkpoint(config.name)
    table = current_view(table, config.name, checkpoint)
    current = table.current_snapshot()
    if current is None:
        log.info("%s: no snapshot yet, nothing to plan", config.name)
        return PlanResult(config.name, 0, 0, 0)
    if table.format_version < 2:
        raise PlanningError(
            f"table {config.name!r} is Iceberg format v1, which has no sequence numbers "
            "to version documents by; "
            "upgrade it with the table property format-version=2"
        )
    changed = changed or ChangedEntries()
    lineage = Lineage.of(table)
    # Retired after the new items are put: a first export planned over an abandoned one must know of
    # it (`_over_abandoned_export`) until its own items are in the store, wherever a run stops.
    # read once: nothing below writes an item before the puts
    pending = store.pending_heads(config.name)
    abandoned = [i for i in pending if lineage.abandoned(i)]
    kind, reason = resync or resync_needed(
        table, config.name, checkpoint, identifier_columns, store.pass_end(config.name)
    )
    resync = (kind, reason) if kind else None

    exports: Iterable[WorkItem] = ()
    if checkpoint is None or resync:
        replacing = checkpoint.token if checkpoint is not None else ""
        base, abandoned_claim = _claim_export(table, config.name, store, lineage, replacing)
        if checkpoint is None and not resync:
            resync = _over_abandoned_export(pending, base, abandoned, abandoned_claim)
            kind, reason = resync or (ResyncKind.NONE, "")
        known = _planned_export(pending, base, kind, replacing)
        if known and len({i.group for i in known}) == known[0].groups:
            pass  # a capped export's later passes: its items are all in the store already
        elif config.export or resync:
            if resync:
                log.warning(
                    "%s: %s; resyncing from snapshot %d (%s)",
                    config.name,
                    reason,
                    base.snapshot_id,
                    kind,
                )
            cut = limits or BatchConfig()
            # a planner that stopped part way: the new items are cut as its were (`_same_cut`)
            earlier = store.bodies(config.name, known)
            exports = _export_items(table, config.name, base, kind, replacing, cut, earlier)
        else:
            store.complete(config.name, base, [])
    else:
        base = checkpoint

    snapshots = snapshots_after(table, config.name, base)
    changes = [
        item
        for snapshot in snapshots
        for item in _change_items(table, config.name, snapshot, identifier_columns, changed)
    ]
    # The changes after the base are pending whatever became of their items before: a DONE one is
    # of a lineage since left (rolled back, then current again: a cherry-pick that fast-forwards, a
    # rollback undone), applied to an index a resync has replaced since, or retired unread.
    planned, written = len(changes), 0
    for chunk in _chunks(exports, PUT_CHUNK):  # an export's items are never all in memory at once
        written += store.put_items(chunk)
        planned += len(chunk)
    written += store.put_items(changes, replace_done=True)
    retire_abandoned(store, config.name, abandoned)
    keep_unapplied(table, config, base.snapshot_id)
    said = _planned(base.snapshot_id, planned - len(changes), len(snapshots), len(changes), written)
    # nothing new: the sync says it once, not after each pass (`sync.run.catch_up`)
    log.log(logging.INFO if planned else logging.DEBUG, "%s: %s", config.name, said)
    return PlanResult(config.name, len(snapshots), planned, written)


def current_view(table: Table, name: str, checkpoint: Checkpoint | None) -> Table:
    """`table`, reloaded from the catalog when its metadata is older than the checkpoint.

    A planner (or a Glue run) may hold metadata loaded before another run advanced the checkpoint;
    its current snapshot then looks like a rollback, which would reset the index for nothing."""
    if checkpoint is None or checkpoint.table_uuid != str(table.metadata.table_uuid):
        return table
    if last_sequence_number(table) >= checkpoint.sequence_number:
        return table
    log.info(
        "%s: loaded metadata is older than the checkpoint (sequence number %d); reloading",
        name,
        checkpoint.sequence_number,
    )
    table = table.refresh()
    if last_sequence_number(table) < checkpoint.sequence_number:
        raise PlanningError(
            f"table {name!r}: the catalog's metadata "
            f"(last sequence number {last_sequence_number(table)}) is "
            f"older than the checkpoint (sequence number {checkpoint.sequence_number}); "
            "nothing planned"
        )
    return table


def _over_abandoned_export(
    pending: list[ItemHead],
    base: Checkpoint,
    abandoned: list[ItemHead],
    abandoned_claim: int | None,
) -> tuple[ResyncKind, str] | None:
    """The resync of a first export, as `verdict.first_export_verdict` decides it from the store."""
    exports = [i for i in pending if i.kind == ItemKind.EXPORT and i.table_uuid == base.table_uuid]
    here = [i for i in exports if i.snapshot_id == base.snapshot_id]
    gone = {i.snapshot_id for i in abandoned if i.kind == ItemKind.EXPORT}
    if abandoned_claim is not None:
        gone.add(abandoned_claim)
    facts = ExportFacts(
        planned=bool(here),
        planned_reset=any(i.resync == ResyncKind.RESET for i in here),
        abandoned=frozenset(gone),
    )
    decided = first_export_verdict(facts)
    return (decided.fate.resync, decided.reason) if decided.fate.resync else None


def _planned(export_snapshot: int, exports: int, snapshots: int, changes: int, written: int) -> str:
    """What a planning planned, in words whose counts the pass's "applying" line repeats.

    An export counts as the one snapshot it exports.
    """
    if not exports and not changes:
        return "nothing new to plan"
    items = counted(exports, "work item")
    parts = [f"an export of snapshot {export_snapshot} ({items})"] if exports else []
    if changes:
        changed = f"{counted(snapshots, 'snapshot')} of changes"
        parts.append(f"{changed} ({counted(changes, 'work item')})")
    return f"planned {' and '.join(parts)}, {written} new"


def retire_abandoned(store: StateStore, name: str, abandoned: list[ItemHead]) -> None:
    """Retire pending items of commits off the current snapshot's lineage, unread.

    Such commits were rolled back, left behind by a moved `main`, or are of the table before it was
    dropped. Applying them would put rows into the index that the table no longer has, or take out
    rows it has.
    """
    if abandoned:
        log.warning(
            "%s: retiring, unread, the work items of snapshots off the current lineage "
            "(%d of them): %s",
            name,
            len(abandoned),
            sorted({i.snapshot_id for i in abandoned}),
        )
        store.complete(name, None, abandoned)


def _claim_export(
    table: Table, name: str, store: StateStore, lineage: Lineage, replacing: str
) -> tuple[Checkpoint, int | None]:
    """The snapshot to export, and the last claimed snapshot it replaces, if any.

    The snapshot to export is the current one, unless a racing planner claimed another first. A
    claimed snapshot that has been rolled back since can never be exported; the next claim is keyed
    after it, so that every planner agrees on the one that replaces it. Claims are keyed by the
    table's UUID too, so a table dropped and created again claims afresh.
    """
    current = table.current_snapshot()
    assert current is not None
    wanted = Checkpoint(
        str(table.metadata.table_uuid), current.snapshot_id, sequence_number(current)
    )
    claim_key, abandoned = replacing, None
    for _ in range(MAX_EXPORT_CLAIMS):
        base = store.claim_export(name, wanted, claim_key)
        if (
            base.sequence_number > lineage.known_sequence_number
            or lineage.position(base.snapshot_id) is not None
        ):
            return base, abandoned
        log.warning(
            "%s: export snapshot %d was rolled back before it was applied; claiming another",
            name,
            base.snapshot_id,
        )
        claim_key, abandoned = f"{claim_key}>{base.snapshot_id}", base.snapshot_id
    raise PlanningError(
        f"table {name!r}: {MAX_EXPORT_CLAIMS} export snapshots in a row were rolled back; try again"
    )


def snapshots_after(table: Table, name: str, base: Checkpoint) -> list[Snapshot]:
    """The current snapshot's ancestors after `base`, oldest first.

    After NO_SNAPSHOT, that is all of them.
    """
    by_id = {s.snapshot_id: s for s in table.snapshots()}
    chain: list[Snapshot] = []
    snapshot = table.current_snapshot()
    first = False  # the walk reached the table's first snapshot (no parent), not an expired one
    while snapshot is not None and snapshot.snapshot_id != base.snapshot_id:
        chain.append(snapshot)
        parent_id = snapshot.parent_snapshot_id
        first = parent_id is None
        snapshot = by_id.get(parent_id) if parent_id is not None else None
    if snapshot is None and not (base.snapshot_id == NO_SNAPSHOT and (first or not chain)):
        raise PlanningError(
            f"table {name!r}: checkpoint snapshot {base.snapshot_id} is not an ancestor "
            "of the current snapshot "
            "(expired, or the table was rolled back); the changes in between cannot be read"
        )
    chain.reverse()
    return chain


def resync_needed(
    table: Table,
    name: str,
    checkpoint: Checkpoint | None,
    identifier_columns: tuple[str, ...],
    pass_end: Checkpoint | None = None,
) -> tuple[ResyncKind, str]:
    """How to rebuild the index and why; (NONE, "") when it can follow the table commit by commit.

    It is `verdict.table_verdict` of the facts `table_facts` reads. `pass_end` is the end of a pass
    the store recorded.
    """
    decided = table_verdict(table_facts(table, name, checkpoint, identifier_columns, pass_end))
    return decided.fate.resync, decided.reason


def table_facts(
    table: Table,
    name: str,
    checkpoint: Checkpoint | None,
    identifier_columns: tuple[str, ...],
    pass_end: Checkpoint | None = None,
) -> TableFacts:
    """What the table's metadata says about following it from `checkpoint`, read once.

    The answer is a `verdict.TableFacts`. The lineage is walked only for a checkpoint of this table.
    """
    uuid, schema_id = str(table.metadata.table_uuid), table.metadata.current_schema_id
    facts = TableFacts(uuid, schema_id, identifier_columns, checkpoint, pass_end)
    if checkpoint is None or checkpoint.table_uuid != uuid:
        return facts
    lineage = Lineage.of(table)
    on_lineage = pass_end is None or lineage.position(pass_end.snapshot_id) is not None
    try:
        snapshots_after(table, name, checkpoint)
        ancestor = True
    except PlanningError:
        ancestor = False
    current = table.current_snapshot()
    return replace(
        facts,
        known_sequence_number=lineage.known_sequence_number,
        pass_end_on_lineage=on_lineage,
        checkpoint_ancestor=ancestor,
        checkpoint_exists=table.snapshot_by_id(checkpoint.snapshot_id) is not None,
        current_sequence_number=sequence_number(current) if current is not None else None,
    )


def export_group_size(limits: BatchConfig, largest: int) -> int:
    """The files of an export item: EXPORT_FILES_PER_ITEM, or fewer where a pass may read fewer.

    A pass reads fewer under `batch.max_files`, or under `batch.max_bytes` counted in the export's
    `largest` file's bytes. So a capped pass, which takes whole items, never reads more than its
    caps because of the grouping.
    """
    return max(1, min(EXPORT_FILES_PER_ITEM, limits.max_files, limits.max_bytes // max(largest, 1)))


def _planned_export(
    pending: list[ItemHead], base: Checkpoint, resync: ResyncKind, replacing: str
) -> list[ItemHead]:
    """The `pending` items of the export of `base`.

    When all are pending, as a capped export's later passes plan again, its manifests are not
    listed nor its items put again, which would cost every pass as much as the first. When some
    are, as a planner stopped part way, the rest are cut as they were.
    """
    return [
        i
        for i in pending
        if i.kind == ItemKind.EXPORT
        and (i.table_uuid, i.snapshot_id, i.replacing)
        == (base.table_uuid, base.snapshot_id, replacing)
        and bool(i.resync) == bool(resync)
    ]


def export_groups(
    paths: Sequence[str], size: int, planned: Sequence[WorkItem] = ()
) -> list[tuple[str, ...]]:
    """The export's files, `paths` in a fixed order, cut into items of `size` files, in order.

    An empty table gets one empty item. Planning again gives the same items, so the same keys. The
    items are of the size the `planned` items of the same export were cut to, if any, as
    `planned_group_size` tells.
    """
    size = planned_group_size(len(paths), size, planned)
    return [tuple(sorted(paths[i : i + size])) for i in range(0, len(paths), size)] or [()]


def planned_group_size(files: int, size: int, planned: Sequence[AnyItem] = ()) -> int:
    """`size`, or the size the `planned` items of the same export were cut to.

    The export has `files` files. A planner that stopped part way may have had another
    `batch.max_files`, and the items must be one cut of the files.
    """
    for item in planned:
        if item.group < item.groups - 1:  # every group but the last is full
            size = item.file_count
            break
        if item.groups > 1:  # the last group holds what the full ones before it leave
            size = (files - item.file_count) // (item.groups - 1)
            break
    return max(size, 1)


def _export_items(
    table: Table,
    name: str,
    base: Checkpoint,
    resync: ResyncKind = ResyncKind.NONE,
    replacing: str = "",
    limits: BatchConfig | None = None,
    planned: list[WorkItem] | None = None,
) -> Iterator[WorkItem]:
    """Items of up to EXPORT_FILES_PER_ITEM live data files of the export snapshot each, streamed.

    Under small `limits` an item holds fewer, as `export_group_size` tells. The items are cut from
    the files in manifest order. The manifests are read once, and no list of every file is ever
    held (`LiveFiles`). `planned` holds the items of it in the store already. An empty table gets
    one empty item.

    Delete files in force are applied when the files are read, so the export equals a table scan.
    Every file is in an item, whatever the index's `where`: the pass prunes them by the shape it
    writes, in `sync.passes._Pass.tasks`, as that shape may have changed since the export was
    planned.
    """
    snapshot = table.snapshot_by_id(base.snapshot_id)
    if snapshot is None:
        raise PlanningError(f"table {name!r}: export snapshot {base.snapshot_id} no longer exists")
    with LiveFiles(table, snapshot) as live:
        size = planned_group_size(
            live.files, export_group_size(limits or BatchConfig(), live.largest), planned or []
        )
        count = max(1, -(-live.files // size))
        paths = live.paths()
        groups: Iterable[tuple[str, ...]] = (
            tuple(sorted(itertools.islice(paths, size))) for _ in range(count)
        )
        # planned by a version that cut sorted paths
        if planned and not _same_cut(live, size, planned):
            groups = export_groups(sorted(live.paths()), size, planned)
        for i, group in enumerate(groups):
            yield WorkItem(
                name,
                base.table_uuid,
                ItemKind.EXPORT,
                base.snapshot_id,
                base.sequence_number,
                i,
                count,
                added_data_files=group,
                resync=resync,
                replacing=replacing,
            )


def _same_cut(live: LiveFiles, size: int, planned: list[WorkItem]) -> bool:
    """Whether the `planned` items of the export are groups of its files cut in manifest order."""
    by_group = {i.group: tuple(sorted(i.added_data_files)) for i in planned}
    paths = live.paths()
    for group in range(max(by_group) + 1):
        files = tuple(sorted(itertools.islice(paths, size)))
        if group in by_group and by_group[group] != files:
            return False
    return True


def _change_items(
    table: Table,
    name: str,
    snapshot: Snapshot,
    identifier_columns: tuple[str, ...],
    changed: ChangedEntries,
) -> list[WorkItem]:
    """Items of the files a snapshot added and removed; one empty item for a compaction."""
    files: list[tuple[str, _Role]] = []
    if snapshot.summary is None or snapshot.summary.operation != Operation.REPLACE:
        for entry in changed.of(table, snapshot):
            data_file, added = entry.data_file, entry.status == ManifestEntryStatus.ADDED
            if data_file.content == DataFileContent.DATA:
                files.append(
                    (data_file.file_path, _Role.ADDED_DATA if added else _Role.REMOVED_DATA)
                )
            # a delete file; one dropped (replaced by a newer vector, or with its data file)
            # removes no row
            elif added:
                files.append((data_file.file_path, _Role.ADDED_DELETES))
    if not identifier_columns and any(what != _Role.ADDED_DATA for _, what in files):
        raise PlanningError(
            f"table {name!r}: snapshot {snapshot.snapshot_id} removes rows, "
            "but the table has no identifier "
            "columns to find their documents by; "
            "set tables[].identifier_columns or the schema's identifier fields"
        )
    files = sorted(set(files))  # a Puffin file is listed once however many vectors it holds
    groups = [files[i : i + FILES_PER_ITEM] for i in range(0, len(files), FILES_PER_ITEM)] or [[]]
    return [
        WorkItem(
            name,
            str(table.metadata.table_uuid),
            ItemKind.CHANGE,
            snapshot.snapshot_id,
            sequence_number(snapshot),
            i,
            len(groups),
            added_data_files=tuple(p for p, what in group if what == _Role.ADDED_DATA),
            removed_data_files=tuple(p for p, what in group if what == _Role.REMOVED_DATA),
            added_delete_files=tuple(p for p, what in group if what == _Role.ADDED_DELETES),
        )
        for i, group in enumerate(groups)
    ]


def _chunks(items: Iterable[WorkItem], size: int) -> Iterator[list[WorkItem]]:
    """`items` in lists of `size`, in order, read as they are needed."""
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


class _Role(StrEnum):
    """What a file listed in a change item is to its snapshot."""

    ADDED_DATA = "added data"
    REMOVED_DATA = "removed data"
    ADDED_DELETES = "added deletes"

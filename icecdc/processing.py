"""Processing: apply a table's pending work items to OpenSearch, one pass at a time.

This is the Glue job's work, the planner Lambda's for small batches, and `icecdc sync`'s second
step. A pass selects and caps the batch, prepares the index, resolves the items to file tasks
(metadata only) and hands them to an engine (`icecdc.engines`: Spark, or in-process for small
passes), which reads the files, brings every change of a key together and writes each key's net
change, versioned. The checkpoint advances only after every write of the pass succeeded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from opensearchpy import OpenSearch
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icecdc.catalog import identifier_columns, load_table, open_catalog
from icecdc.changelog import ChangeStats
from icecdc.config import BatchConfig, Config, OpenSearchConfig, TableConfig
from icecdc.engines import Engines, Target
from icecdc.errors import FilesGone, LeaseLost, ProcessingError
from icecdc.index import IndexAlias, IndexSpec, index_spec, index_uuid
from icecdc.manifests import ChangedEntries, SnapshotFiles
from icecdc.model import Checkpoint, EngineKind, ItemKind, ItemStatus, PassPoint, Probe, ResyncKind, WorkItem, WorkSize
from icecdc.opensearch import check_reachable, open_client
from icecdc.planning import Lineage, current_view, plan_table
from icecdc.protection import keep_unapplied
from icecdc.reading.planner import file_tasks
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import files_read_by
from icecdc.sink import SinkStats
from icecdc.state import Lease, StateStore, open_state_store

log = logging.getLogger(__name__)

# Rounds of plan-then-process in one sync before giving up on catching a table that keeps moving.
MAX_SYNC_ROUNDS = 100


@dataclass
class BatchResult:
    """What one pass over a table's pending items did."""

    table: str
    snapshots: int = 0
    files: int = 0
    changes: ChangeStats = field(default_factory=ChangeStats)
    writes: SinkStats = field(default_factory=SinkStats)
    checkpoint: Checkpoint | None = None
    seconds: float = 0.0
    engine: EngineKind | None = None  # where the last pass ran
    skipped: bool = False  # another run held the table's lease
    unfinished: bool = False  # the run's deadline came before the table was caught up
    partial: bool = False  # the caps ended this pass inside an export; the next pass goes on

    def add(self, other: BatchResult) -> None:
        self.snapshots += other.snapshots
        self.files += other.files
        self.changes.add(other.changes)
        self.writes.add(other.writes)
        self.checkpoint = other.checkpoint or self.checkpoint
        self.engine = other.engine or self.engine
        self.seconds += other.seconds


def select_batch(items: list[WorkItem], checkpoint: Checkpoint | None, lineage: Lineage) -> tuple[list[WorkItem], list[WorkItem]]:
    """Split pending items into (the batch to apply now, stale items to retire unread).

    Stale: superseded by the checkpoint (applied, or replaced by a resync, by a run that crashed
    before marking them done), off the current snapshot's lineage (rolled back), or before a
    pending export on it (the export brings the index past them).
    The batch: the run of snapshots on the lineage that starts right after the checkpoint (or at a
    pending export), oldest first, each with all its items present; a snapshot a planner is still
    writing, or has not planned yet, ends it. Items of commits newer than this view wait.
    """
    stale = [i for i in items if (checkpoint is not None and checkpoint.supersedes(i)) or lineage.abandoned(i)]
    retired = {i.key for i in stale}
    by_position: dict[int, list[WorkItem]] = {}
    for item in items:
        position = lineage.position(item.snapshot_id)
        if position is not None and item.key not in retired:
            by_position.setdefault(position, []).append(item)
    exports = [p for p, snapshot_items in by_position.items() if any(i.kind == ItemKind.EXPORT for i in snapshot_items)]
    if exports:
        start = max(exports)
        # the export snapshot's own change items, planned before the resync was: the export covers them
        stale += [i for i in by_position[start] if i.kind != ItemKind.EXPORT]
        by_position[start] = [i for i in by_position[start] if i.kind == ItemKind.EXPORT]
    elif checkpoint is not None and (at := lineage.position(checkpoint.snapshot_id)) is not None:
        start = at + 1
    else:
        return [], stale  # the checkpoint is off the lineage: the planner resyncs first
    stale += [i for position, snapshot_items in by_position.items() if position < start for i in snapshot_items]
    batch: list[WorkItem] = []
    for position in range(start, len(lineage.snapshot_ids)):
        snapshot_items = sorted(by_position.get(position, []), key=lambda i: i.group)
        if not snapshot_items or len({i.group for i in snapshot_items}) != snapshot_items[0].groups:
            break
        batch += snapshot_items
    return batch, stale


def process_table(
    engines: Engines,
    table: Table,
    config: TableConfig,
    store: StateStore,
    opensearch: OpenSearchConfig,
    identifiers: tuple[str, ...],
    dead_letter: str | None = None,
    changed: ChangedEntries | None = None,
    lease: Lease | None = None,
    limits: BatchConfig | None = None,
    probe: Probe | None = None,
) -> BatchResult:
    """Apply the table's pending complete snapshots in one pass and advance its checkpoint.

    `changed`: the snapshots' manifest entries, when planning in this process has read them.
    `lease`: the table's lease this run holds; the checkpoint advances only while it is held.
    `limits`: how much this pass may read (default: the configuration's defaults).
    `probe`: called at each `PassPoint` (tests crash there)."""
    changed = changed or ChangedEntries()  # one read of each manifest for capping, planning and reading
    checkpoint = store.get_checkpoint(config.name)
    table = current_view(table, config.name, checkpoint)
    client = open_client(opensearch)
    alias = IndexAlias(client, config.index)
    replaced = alias.replaced_since(checkpoint, index_spec(table.schema(), config, str(table.metadata.table_uuid)))
    if replaced:
        log.warning("%s: %s; exporting the table again", config.name, replaced)
        plan_table(table, config, store, identifiers, changed, resync=(ResyncKind.REWRITE, replaced))
    if not any(i.resync for i in store.pending_items(config.name)):  # no rebuild under way: what a swap left behind
        alias.delete_leftovers()
    run = _TableRun(engines, config, store, opensearch, identifiers, dead_letter, changed, lease, limits or BatchConfig(), probe)
    try:
        return _process_batch(run, table)
    except FilesGone as exc:
        # Snapshot expiration deleted files this batch needed after it was planned: the changes in
        # between cannot be read any more, so the index is rebuilt from the current snapshot.
        log.warning("%s: %s; resyncing from the current snapshot", config.name, exc)
        table = table.refresh()
        plan_table(table, config, store, identifiers, changed, resync=(ResyncKind.REWRITE, str(exc)))
        return _process_batch(run, table)


def cap_batch(table: Table, batch: list[WorkItem], limits: BatchConfig, changed: ChangedEntries) -> tuple[list[WorkItem], bool]:
    """The part of the batch one pass applies, and whether it ends inside an export.

    Whole snapshots, oldest first, while their files and bytes fit the caps (at least one). An
    export, always the first snapshot of its batch, is cut file by file: the pass ends inside it,
    and its APPLIED items are kept so the pass that reads its last files can finish it."""
    taken: list[WorkItem] = []
    files = size = 0

    def fits(more_files: int, more_bytes: int) -> bool:
        return files + more_files <= limits.max_files and size + more_bytes <= limits.max_bytes

    for snapshot_id, items in _by_snapshot(batch):
        snapshot = table.snapshot_by_id(snapshot_id)
        if items[0].kind == ItemKind.EXPORT and snapshot is not None:
            live = SnapshotFiles(table, snapshot, changed)
            applied = [i for i in items if i.status == ItemStatus.APPLIED]  # kept: they tell later passes it has begun
            for item in (i for i in items if i.status != ItemStatus.APPLIED):
                item_bytes = sum(live.data_entry(p, item.table).data_file.file_size_in_bytes for p in item.added_data_files)
                if (files or size) and not fits(len(item.added_data_files), item_bytes):
                    return taken + applied, True
                taken.append(item)
                files, size = files + len(item.added_data_files), size + item_bytes
            taken += applied
            continue
        snapshot_files = sum(len(i.added_data_files) + len(i.removed_data_files) + len(i.added_delete_files) for i in items)
        snapshot_bytes = (
            sum(e.data_file.file_size_in_bytes for e in changed.of(table, snapshot)) if snapshot_files and snapshot else 0
        )
        if taken and not fits(snapshot_files, snapshot_bytes):
            return taken, False
        taken += items
        files, size = files + snapshot_files, size + snapshot_bytes
    return taken, False


def _by_snapshot(items: list[WorkItem]) -> list[tuple[int, list[WorkItem]]]:
    """The items grouped by snapshot, in the batch's order."""
    grouped: dict[int, list[WorkItem]] = {}
    for item in items:
        grouped.setdefault(item.snapshot_id, []).append(item)
    return list(grouped.items())


@contextmanager
def _manifests_of(table: str) -> Iterator[None]:
    """Reading the batch's manifests: one deleted meanwhile (its snapshot expired) is `FilesGone`."""
    try:
        yield
    except FileNotFoundError as exc:
        raise FilesGone(f"table {table!r}: a manifest of the batch is gone (expired?): {exc}") from None


@dataclass(frozen=True)
class _TableRun:
    """What a pass over one table works with, but the table's metadata (which a pass may reload)."""

    engines: Engines
    config: TableConfig
    store: StateStore
    opensearch: OpenSearchConfig
    identifiers: tuple[str, ...]
    dead_letter: str | None
    changed: ChangedEntries
    lease: Lease | None
    limits: BatchConfig
    probe: Probe | None = None

    def reached(self, point: PassPoint) -> None:
        if self.probe is not None:
            self.probe(point)


@dataclass(frozen=True)
class _Destination:
    """Where a pass writes: the index (the alias, or a rebuild's generation) and its uuid ("": the
    pass creates it), found before anything is written."""

    index: str
    uuid: str
    rebuild: bool  # a generation swapped in when the pass completes the rebuild
    resumable: frozenset[str] = frozenset()  # a rebuild's: the uuids its earlier passes wrote to


def _find_destination(run: _TableRun, client: OpenSearch, batch: list[WorkItem], spec: IndexSpec) -> _Destination:
    """Where the pass will write, reading only: so that its engine is known before anything is written.

    A reset, and a rewrite the current mapping cannot take (a type change), export into a new
    generation while the alias keeps serving the current one; their later passes (batch caps, a
    rerun after a crash) resume the generation their APPLIED items name."""
    resync = {i.resync for i in batch if i.resync}
    alias = IndexAlias(client, run.config.index)
    if ResyncKind.RESET in resync or (ResyncKind.REWRITE in resync and alias.mapping_changed(spec)):
        resumable = frozenset(_applied_index(i) for i in batch if i.status == ItemStatus.APPLIED and i.applied_to)
        resumed = alias.resumable(spec, set(resumable))
        return _Destination(*(resumed or ("", "")), rebuild=True, resumable=resumable)
    return _Destination(alias.name, alias.uuid() or "", rebuild=False)


def _prepare_destination(client: OpenSearch, alias: str, found: _Destination, spec: IndexSpec) -> _Destination:
    """Check the index accepts writes and bring it up to `spec`; a rebuild's generation is created or resumed."""
    if found.rebuild:
        index = IndexAlias(client, alias).start_rebuild(spec, set(found.resumable))
    else:
        IndexAlias(client, alias).ensure(spec)
        index = alias
    prepared = replace(found, index=index, uuid=index_uuid(client, index) or "")
    if found.uuid and prepared.uuid != found.uuid:  # what the pass planned to skip is not in this index
        raise ProcessingError(f"index {index!r} was deleted or replaced while the pass began; the next pass starts over")
    return prepared


def _applied_mark(index_uuid: str, schema_id: int) -> str:
    """What a capped pass records as where its items' rows are (`WorkItem.applied_to`): the index,
    and the schema they were read with (a schema change before the export ends makes them stale)."""
    return f"{index_uuid}@schema-{schema_id}"


def _applied_index(item: WorkItem) -> str:
    """The uuid of the index an APPLIED item's rows were written to."""
    return item.applied_to.split("@", 1)[0]


def _check_fences(run: _TableRun, client: OpenSearch, destination: _Destination) -> None:
    """Raise unless this run still holds the table's lease and writes to the index it began with."""
    if index_uuid(client, destination.index) != destination.uuid:
        raise ProcessingError(f"table {run.config.name!r}: index {destination.index!r} was deleted or replaced during the pass")
    if run.lease is not None and run.lease.lost:
        raise LeaseLost.of(run.config.name)


def _process_batch(run: _TableRun, table: Table) -> BatchResult:
    started = time.monotonic()
    name = run.config.name
    batch, stale = select_batch(run.store.pending_items(name), run.store.get_checkpoint(name), Lineage.of(table))
    if stale:
        run.store.complete(name, None, stale)
    result = BatchResult(name)
    if not batch:
        return result
    with _manifests_of(name):
        batch, result.partial = cap_batch(table, batch, run.limits, run.changed)
    resync = {i.resync for i in batch if i.resync}
    client = open_client(run.opensearch)
    spec = index_spec(table.schema(), run.config, str(table.metadata.table_uuid))  # the mapping of the documents written
    destination = _find_destination(run, client, batch, spec)
    # Every item but an export's files an earlier pass applied to this very index, read with this
    # very schema: their tasks tell exactly what the pass reads (a delete file's data files
    # included), and so its engine. Rows read with an older schema are written again.
    applied_here = _applied_mark(destination.uuid, table.metadata.current_schema_id) if destination.uuid else None
    unread = [i for i in batch if not (i.status == ItemStatus.APPLIED and i.applied_to == applied_here)]
    with _manifests_of(name):
        tasks = file_tasks(table, unread, run.identifiers, run.changed, run.limits.max_rewrite_bytes)
    # every read counts: each key range of a rewrite reads all of the rewrite's files again
    engine = run.engines.for_pass(name, WorkSize.of([f for task in tasks for f in files_read_by(task)]))
    result.engine = engine.kind
    destination = _prepare_destination(client, run.config.index, destination, spec)
    last = batch[-1]
    result.snapshots = len({i.snapshot_id for i in batch})
    result.files = len(tasks)
    log.info(
        "%s: applying %d snapshots, %d files%s",
        name,
        result.snapshots,
        result.files,
        f" ({', '.join(resync)})" if resync else "",
    )
    target = Target(
        name,
        destination.index,
        run.opensearch,
        run.dead_letter,
        {i.sequence_number: i.snapshot_id for i in batch},
        "external_gte" if resync else "external",
        run.identifiers,
    )
    if tasks:
        reader = TableReader.for_table(table, name, run.identifiers, run.dead_letter)
        result.changes, result.writes = engine.apply(reader, tasks, target)
    run.reached(PassPoint.WRITTEN)
    fence = run.lease.owner if run.lease else None
    if result.partial:  # an export goes on in the next pass; nothing is finished, nothing advances
        _check_fences(run, client, destination)
        run.store.mark_applied(name, unread, _applied_mark(destination.uuid, table.metadata.current_schema_id), fence=fence)
        run.reached(PassPoint.MARKED_APPLIED)
        result.seconds = time.monotonic() - started
        log.info("%s: applied %d of the export's files; the next pass goes on (batch caps)", name, len(unread))
        return result
    if ResyncKind.REWRITE in resync and not destination.rebuild:  # a new generation holds only the export
        export_version = min(i.sequence_number for i in batch if i.resync)
        deleted = engine.delete_older(target, export_version)
        log.info("%s: deleted %d documents older than the resync", name, deleted)
        result.writes.deleted += deleted
    _check_fences(run, client, destination)
    result.checkpoint = Checkpoint(
        last.table_uuid,
        last.snapshot_id,
        last.sequence_number,
        table.metadata.current_schema_id,
        run.identifiers,
        destination.uuid,
    )
    run.store.complete(name, result.checkpoint, batch, replace=bool(resync), fence=fence)
    run.reached(PassPoint.CHECKPOINTED)
    if destination.rebuild:  # after the checkpoint names the new generation: a run stopped before the swap makes it
        IndexAlias(client, run.config.index).finish(destination.index, spec, run.probe)
    keep_unapplied(table, run.config, last.snapshot_id)
    result.seconds = time.monotonic() - started
    log.info(
        "%s: %d rows read, %d carryovers dropped, %d indexed, %d deleted, %d superseded; checkpoint %d (%.1fs)",
        name,
        result.changes.rows,
        result.changes.carryovers,
        result.writes.indexed,
        result.writes.deleted,
        result.writes.superseded,
        last.snapshot_id,
        result.seconds,
    )
    return result


def sync(
    config: Config, spark: Any = None, table_names: Iterable[str] | None = None, probe: Probe | None = None
) -> list[BatchResult]:
    """Plan and process every selected table until it is caught up with its current snapshot.

    `spark`: a SparkSession to run large passes on; without one, the first pass that needs Spark
    starts a session from the configuration, stopped when the sync ends. `probe`: see `process_table`."""
    selected = [config.table(name) for name in table_names] if table_names else list(config.tables)
    catalog = open_catalog(config.catalog)
    # Load every table and check its identifier columns before anything is written.
    loaded = [(t, load_table(catalog, t.name)) for t in selected]
    identifiers = {t.name: identifier_columns(table, t) for t, table in loaded}
    check_reachable(open_client(config.opensearch), config.opensearch.url)
    store = open_state_store(config.state)
    engines = Engines(config.engine, config.spark, spark)
    try:
        return [
            sync_table(config, catalog, table_config, table, identifiers[table_config.name], store, engines, probe=probe)
            for table_config, table in loaded
        ]
    finally:
        store.close()
        engines.close()


def sync_table(
    config: Config,
    catalog: Catalog,
    table_config: TableConfig,
    table: Table,
    identifiers: tuple[str, ...],
    store: StateStore,
    engines: Engines,
    wait: bool = True,
    deadline: float | None = None,
    probe: Probe | None = None,
) -> BatchResult:
    """Plan and process one table, pass after pass, until it is caught up with its current snapshot.

    One run per table at a time: a second run waits for the lease (`wait`), or leaves the table to
    the run that holds it (versioned writes make an overlap harmless anyway). `deadline`
    (time.monotonic()): no pass starts after it, and the result is `unfinished` (the planner
    Lambda's time budget)."""
    total = BatchResult(table_config.name)
    with Lease(store, table_config.name, config.state.lease_seconds, wait) as lease:
        if not lease.held:
            log.warning("%s: another run is syncing this table; leaving it to that run", table_config.name)
            total.skipped = True
        changed = ChangedEntries()  # planning and reading of this table share its manifest reads
        for _ in range(MAX_SYNC_ROUNDS if lease.held else 0):
            if lease.lost:
                raise LeaseLost.of(table_config.name)
            if deadline is not None and time.monotonic() > deadline:
                total.unfinished = True
                break
            plan_table(table, table_config, store, identifiers, changed)
            if probe is not None:
                probe(PassPoint.PLANNED)
            batch = process_table(
                engines,
                table,
                table_config,
                store,
                config.opensearch,
                identifiers,
                config.dead_letter,
                changed,
                lease,
                config.batch,
                probe,
            )
            total.add(batch)
            if batch.snapshots == 0:
                break
            table = load_table(catalog, table_config.name)  # commits made while we worked
    return total

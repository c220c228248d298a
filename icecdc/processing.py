"""Processing: apply a table's pending work items to OpenSearch in one Spark pass.

This is the Glue job's work, and `icecdc sync`'s second step. The driver handles metadata only
(work items, file lists, counters); executors read the files, and after ONE shuffle by document
id (the identifier columns) each key's changes are reduced to one versioned write, sent in bulk
from the executors. The checkpoint advances only after every write of the batch succeeded.
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from opensearchpy import OpenSearch
from py4j.protocol import Py4JJavaError
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icecdc import errors
from icecdc.catalog import identifier_columns, load_table, open_catalog
from icecdc.changelog import ChangeStats, net_write
from icecdc.config import BatchConfig, Config, OpenSearchConfig, SparkConfig, TableConfig
from icecdc.deadletters import DeadLetter, DeadLetters
from icecdc.errors import DuplicateIdentifier, FilesGone, LeaseLost, ProcessingError
from icecdc.index import (
    IndexSpec,
    current_generation,
    finish_generation,
    generations,
    index_spec,
    index_uuid,
    mapping_conflicts,
)
from icecdc.manifests import ChangedEntries, SnapshotFiles
from icecdc.model import Change, ChangeRow, Checkpoint, ItemKind, ItemStatus, ResyncKind, WorkItem
from icecdc.planning import Lineage, current_view, plan_table
from icecdc.protection import keep_unapplied
from icecdc.reading.planner import file_tasks
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import Task, files_read_by
from icecdc.sink import (
    Refusal,
    SinkStats,
    check_reachable,
    delete_older,
    ensure_index,
    open_client,
    start_rebuild,
    write_documents,
)
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
    skipped: bool = False  # another run held the table's lease
    partial: bool = False  # the caps ended this pass inside an export; the next pass goes on

    def add(self, other: BatchResult) -> None:
        self.snapshots += other.snapshots
        self.files += other.files
        self.changes.add(other.changes)
        self.writes.add(other.writes)
        self.checkpoint = other.checkpoint or self.checkpoint
        self.seconds += other.seconds


def spark_session(config: SparkConfig) -> SparkSession:
    """A SparkSession with the configured master and settings (Glue supplies its own master)."""
    # Executors must run the interpreter that has icecdc and its dependencies installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("icecdc")
    if config.master:
        builder = builder.master(config.master)
    for key, value in config.conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


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
    spark: SparkSession,
    table: Table,
    config: TableConfig,
    store: StateStore,
    opensearch: OpenSearchConfig,
    identifiers: tuple[str, ...],
    dead_letter: str | None = None,
    changed: ChangedEntries | None = None,
    lease: Lease | None = None,
    limits: BatchConfig | None = None,
) -> BatchResult:
    """Apply the table's pending complete snapshots in one Spark pass and advance its checkpoint.

    `changed`: the snapshots' manifest entries, when planning in this process has read them.
    `lease`: the table's lease this run holds; the checkpoint advances only while it is held.
    `limits`: how much this pass may read (default: the configuration's defaults)."""
    changed = changed or ChangedEntries()  # one read of each manifest for capping, planning and reading
    checkpoint = store.get_checkpoint(config.name)
    table = current_view(table, config.name, checkpoint)
    client = open_client(opensearch)
    replaced = _index_replaced(client, config.index, checkpoint, index_spec(table.schema(), config))
    if replaced:
        log.warning("%s: %s; exporting the table again", config.name, replaced)
        plan_table(table, config, store, identifiers, changed, resync=(ResyncKind.REWRITE, replaced))
    run = _TableRun(spark, config, store, opensearch, identifiers, dead_letter, changed, lease, limits or BatchConfig())
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


def _index_replaced(client: OpenSearch, index: str, checkpoint: Checkpoint | None, spec: IndexSpec) -> str:
    """Why the checkpoint's documents are no longer in the index ("" when they are).

    A rebuild records its new generation in the checkpoint before it swaps the alias: when a run
    stopped in between, the swap is done now."""
    if checkpoint is None or not checkpoint.index_uuid:
        return ""
    found = index_uuid(client, index)
    if found != checkpoint.index_uuid:
        built = [name for name, uuid in generations(client, index).items() if uuid == checkpoint.index_uuid]
        if built:
            log.warning("index %r: a rebuild stopped before its swap; swapping to generation %r now", index, built[0])
            finish_generation(client, index, built[0], spec)
            found = index_uuid(client, index)
    if found is None:
        return f"index {index!r} was deleted"
    if found != checkpoint.index_uuid:
        return f"index {index!r} was replaced by another index (uuid {checkpoint.index_uuid} → {found})"
    return ""


def _mapping_changed(client: OpenSearch, index: str, spec: IndexSpec) -> bool:
    """Whether the index `index` names maps a field otherwise than `spec` (checked again by every
    pass of a rewrite: the current generation does not change until the swap)."""
    if current_generation(client, index) is None:
        return False
    conflicts = mapping_conflicts(client, index, spec)
    if conflicts:
        log.info("index %r maps %s otherwise than the schema: rebuilding it in a new generation", index, ", ".join(conflicts))
    return bool(conflicts)


@dataclass(frozen=True)
class _TableRun:
    """What a pass over one table works with, but the table's metadata (which a pass may reload)."""

    spark: SparkSession
    config: TableConfig
    store: StateStore
    opensearch: OpenSearchConfig
    identifiers: tuple[str, ...]
    dead_letter: str | None
    changed: ChangedEntries
    lease: Lease | None
    limits: BatchConfig


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
    spec = index_spec(table.schema(), run.config)  # the mapping of the documents this pass writes
    # A reset, and a rewrite the current mapping cannot take (a type change), export into a new
    # generation while the alias keeps serving the current one; their later passes (batch caps, a
    # rerun after a crash) resume the generation their APPLIED items name.
    rebuild = ResyncKind.RESET in resync or (ResyncKind.REWRITE in resync and _mapping_changed(client, run.config.index, spec))
    if rebuild:
        resumable = {i.applied_to for i in batch if i.status == ItemStatus.APPLIED and i.applied_to}
        index = start_rebuild(client, run.config.index, spec, resumable)
    else:
        ensure_index(client, run.config.index, spec)
        index = run.config.index
    written_to = index_uuid(client, index)
    # what an earlier pass applied to this very index is not read again
    unread = [i for i in batch if i.status != ItemStatus.APPLIED or i.applied_to != written_to]
    with _manifests_of(name):
        tasks = file_tasks(table, unread, run.identifiers, run.changed, run.limits.max_rewrite_bytes)
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
    target = _Target(
        name,
        index,
        run.opensearch,
        run.dead_letter,
        {i.sequence_number: i.snapshot_id for i in batch},
        "external_gte" if resync else "external",
        run.identifiers,
    )
    if tasks:
        reader = TableReader.for_table(table, name, run.identifiers, run.dead_letter)
        result.changes, result.writes = _apply(run.spark, reader, tasks, target)
    if result.partial:  # an export goes on in the next pass; nothing is finished, nothing advances
        run.store.mark_applied(name, unread, written_to or "")
        result.seconds = time.monotonic() - started
        log.info("%s: applied %d of the export's files; the next pass goes on (batch caps)", name, len(unread))
        return result
    if ResyncKind.REWRITE in resync and not rebuild:  # a new generation holds only the export
        export_version = min(i.sequence_number for i in batch if i.resync)
        result.writes.deleted += _delete_older(run.spark, target, export_version)
    if index_uuid(client, index) != written_to:
        raise ProcessingError(f"table {name!r}: index {index!r} was deleted or replaced during the pass")
    if run.lease is not None and run.lease.lost:
        raise LeaseLost.of(name)
    result.checkpoint = Checkpoint(
        last.table_uuid,
        last.snapshot_id,
        last.sequence_number,
        table.metadata.current_schema_id,
        run.identifiers,
        written_to or "",
    )
    run.store.complete(name, result.checkpoint, batch, replace=bool(resync), fence=run.lease.owner if run.lease else None)
    if rebuild:  # after the checkpoint names the new generation: a run stopped before the swap makes it
        finish_generation(client, run.config.index, index, spec)
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


@dataclass(frozen=True)
class _Target:
    """Where executors write a table's documents, and their dead letters; small and picklable."""

    table: str
    index: str
    opensearch: OpenSearchConfig
    dead_letter: str | None
    snapshot_ids: dict[int, int]  # sequence number → snapshot id, to name a dead letter's snapshot
    version_type: str  # "external"; "external_gte" while a resync rewrites documents of equal version
    identifier_columns: tuple[str, ...]

    def dead_letters(self, refused: list[Refusal]) -> None:
        assert self.dead_letter is not None
        DeadLetters(self.dead_letter).write(
            DeadLetter(self.table, self.snapshot_ids.get(w.version), w.version, w.doc_id, status, reason, w.document)
            for w, status, reason in refused
        )

    def duplicates(self, found: list[DuplicateIdentifier]) -> None:
        """Keys with several live rows in one snapshot: dead letters, or the error that stops the batch."""
        columns = ", ".join(self.identifier_columns)
        reasons = [(d, f"table {self.table!r}, snapshot {self.snapshot_ids.get(d.sequence_number)}: {d}") for d in found]
        reasons = [(d, f"{reason}; the identifier columns ({columns}) must be unique") for d, reason in reasons]
        if self.dead_letter is None:
            raise ProcessingError(f"{reasons[0][1]} ({len(found)} such identifiers in this part of the batch)")
        DeadLetters(self.dead_letter).write(
            DeadLetter(self.table, self.snapshot_ids.get(d.sequence_number), d.sequence_number, d.doc_id, None, reason, document)
            for d, reason in reasons
            for document in d.documents
        )


def _apply(spark: SparkSession, reader: TableReader, tasks: list[Task], target: _Target) -> tuple[ChangeStats, SinkStats]:
    context = spark.sparkContext
    carried = context.accumulator(0)  # carryover pairs the readers dropped before the shuffle
    unreadable = context.accumulator(0)  # rows the readers sent to the dead letters
    slices = balanced_slices(tasks, max(context.defaultParallelism, 1))
    changes = context.parallelize(slices, len(slices)).mapPartitions(partial(_read_slices, reader, carried, unreadable))
    by_key = changes.groupByKey(numPartitions=max(context.defaultParallelism, 1))  # the one shuffle
    try:
        per_partition = by_key.mapPartitions(partial(_write_partition, target)).collect()
    except Py4JJavaError as exc:
        raise _executor_error(exc) from exc
    change_stats, sink_stats = (
        ChangeStats(rows=2 * carried.value, carryovers=carried.value),
        SinkStats(dead_lettered=unreadable.value),
    )
    for changes_done, writes_done in per_partition:
        change_stats.add(changes_done)
        sink_stats.add(writes_done)
    return change_stats, sink_stats


def balanced_slices(tasks: list[Task], cores: int) -> list[list[Task]]:
    """The tasks in Spark partitions of about equal bytes to read: one per core for a small batch,
    up to four per core as the bytes grow (so a slow slice can be balanced by the others).

    Spark's own `parallelize` splits by count, and one rewrite of a large file can outweigh a
    hundred small ones; every Spark task also costs a fixed ~50 ms in PySpark, more than a small
    slice takes to read. Largest first into the lightest slice (LPT): within 4/3 of the best split.
    """
    sizes = {id(task): max(sum(f.file_size_in_bytes for f in files_read_by(task)), 1) for task in tasks}
    wanted = math.ceil(sum(sizes.values()) / BYTES_PER_SLICE)
    count = min(len(tasks), max(cores, min(4 * cores, wanted)))
    slices: list[list[Task]] = [[] for _ in range(count)]
    loads = [0] * count
    for task in sorted(tasks, key=lambda t: sizes[id(t)], reverse=True):
        lightest = loads.index(min(loads))
        slices[lightest].append(task)
        loads[lightest] += sizes[id(task)]
    return slices


BYTES_PER_SLICE = 32 * 2**20  # compressed Parquet; a slice's rows stream through, so this bounds time, not memory


def _read_slices(reader: TableReader, carried: Any, unreadable: Any, slices: Iterable[list[Task]]) -> Iterator[Change]:
    return reader.read((task for tasks in slices for task in tasks), carried, unreadable)


def _executor_error(exc: Py4JJavaError) -> Exception:
    """The IcecdcError an executor raised, rebuilt from the text Spark carried back; else the Spark error."""
    # Executors' exceptions reach the driver only as the text of a Python traceback inside a Java one.
    found = re.findall(r"^icecdc\.errors\.(\w+): (.*)$", str(exc.java_exception), flags=re.MULTILINE)
    if found:
        name, message = found[-1]
        error_class = getattr(errors, name, None)
        if isinstance(error_class, type) and issubclass(error_class, errors.IcecdcError):
            rebuilt: Exception = error_class(message)
            return rebuilt
    spark_error: Exception = exc
    return spark_error


def _write_partition(
    target: _Target, keyed_changes: Iterable[tuple[str, Iterable[ChangeRow]]]
) -> Iterator[tuple[ChangeStats, SinkStats]]:
    """Executor side: reduce each key to its net write and bulk them; yield this partition's counters."""
    change_stats = ChangeStats()
    duplicates: list[DuplicateIdentifier] = []
    writes = (net_write(doc_id, changes, change_stats, duplicates) for doc_id, changes in keyed_changes)
    sink_stats = write_documents(
        open_client(target.opensearch),
        target.opensearch,
        target.index,
        (w for w in writes if w is not None),
        target.dead_letters if target.dead_letter else None,
        target.version_type,
    )
    if duplicates:
        target.duplicates(duplicates)
        sink_stats.dead_lettered += sum(len(d.documents) for d in duplicates)
    yield change_stats, sink_stats


def _delete_older(spark: SparkSession, target: _Target, version: int) -> int:
    """After a resync's export: delete every document older than it (rows the table no longer has),
    scanning the index in slices on the executors."""
    slices = max(spark.sparkContext.defaultParallelism, 1)
    deleted = (
        spark.sparkContext.parallelize(range(slices), slices)
        .map(lambda i: delete_older(open_client(target.opensearch), target.opensearch, target.index, version, i, slices))
        .sum()
    )
    log.info("%s: deleted %d documents older than the resync", target.table, deleted)
    return int(deleted)


def sync(config: Config, spark: SparkSession, table_names: Iterable[str] | None = None) -> list[BatchResult]:
    """Plan and process every selected table until it is caught up with its current snapshot."""
    selected = [config.table(name) for name in table_names] if table_names else list(config.tables)
    catalog = open_catalog(config.catalog)
    # Load every table and check its identifier columns before anything is written.
    loaded = [(t, load_table(catalog, t.name)) for t in selected]
    identifiers = {t.name: identifier_columns(table, t) for t, table in loaded}
    check_reachable(open_client(config.opensearch), config.opensearch.url)
    store = open_state_store(config.state)
    results = []
    try:
        for table_config, table in loaded:
            total = BatchResult(table_config.name)
            # One processor per table at a time; a second run waits for the lease, or leaves the
            # table to the run that holds it (versioned writes make an overlap harmless anyway).
            with Lease(store, table_config.name, config.state.lease_seconds) as lease:
                if not lease.held:
                    log.warning("%s: another run is syncing this table; leaving it to that run", table_config.name)
                    total.skipped = True
                changed = ChangedEntries()  # planning and reading of this table share its manifest reads
                for _ in range(MAX_SYNC_ROUNDS if lease.held else 0):
                    if lease.lost:
                        raise LeaseLost.of(table_config.name)
                    plan_table(table, table_config, store, identifiers[table_config.name], changed)
                    batch = process_table(
                        spark,
                        table,
                        table_config,
                        store,
                        config.opensearch,
                        identifiers[table_config.name],
                        config.dead_letter,
                        changed,
                        lease,
                        config.batch,
                    )
                    total.add(batch)
                    if batch.snapshots == 0:
                        break
                    table = load_table(catalog, table_config.name)  # commits made while we worked
            results.append(total)
    finally:
        store.close()
    return results

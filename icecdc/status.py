"""What an operator, or the planner, asks of a table: is there work, how much, how far behind.

Answered from the table's metadata, the checkpoint and the index's aliases alone (no manifest
read), in time independent of the table's size: the planner Lambda asks them on every event.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot

from icecdc.config import TableIndexConfig
from icecdc.deadletters import DeadLetters
from icecdc.destination.facts import IndexQuery, Question, read_facts
from icecdc.destination.index import IndexAlias, IndexSpec, Owner
from icecdc.documents import Shape
from icecdc.errors import PlanningError
from icecdc.model import Checkpoint, ItemKind, ItemStatus, ResyncKind, WorkSize
from icecdc.planning import resync_needed, snapshots_after, table_facts
from icecdc.state import StateStore
from icecdc.verdict import IndexFacts, empty_verdict, index_verdict, table_verdict


@dataclass(frozen=True)
class TableStatus:
    table: str
    checkpoint: Checkpoint | None
    current_snapshot_id: int | None
    pending_items: int
    # snapshots after the checkpoint; None before the first sync or when unknowable
    lag_snapshots: int | None
    lag_seconds: float  # age of the oldest commit not yet applied; 0 when caught up
    dead_letters: int = 0  # documents kept aside because they can never be written
    unfinished: str = ""  # what the index needs that no commit asks for (`index_work`); "": nothing
    export_files: int = (
        0  # an export (or rebuild) under way: its files (0: none under way, or not asked)
    )
    export_files_applied: int = 0  # of those, applied by earlier passes of a capped export
    checkpointed_at: float | None = None  # when a sync last moved the checkpoint; None: never


def has_work(
    table: Table,
    config: TableIndexConfig,
    store: StateStore,
    identifier_columns: tuple[str, ...],
    index: IndexAlias | None = None,
) -> bool:
    """Whether a sync of the table into the index `config` names would do anything.

    It answers from the table's metadata, the checkpoint and the index's aliases alone. This is the
    planner Lambda's question, answered in time independent of the table's size: listing an
    export's files and walking a backlog's manifests are the Glue job's work. `index` is the
    table's index; what it needs that no commit asks for, as `index_work` tells, is work too.
    """
    name = config.name
    if store.count_pending(name):
        return True
    checkpoint = store.get_checkpoint(name)
    current = table.current_snapshot()
    found = IndexFacts()
    if index is not None:
        found = _index_facts(index, checkpoint, config.shape, Owner.of(table), current is None)
        if not index_verdict(found, synced=checkpoint is not None).follows:
            return True
    if current is None:  # an empty table: work when its index holds another table's documents
        # or, with no checkpoint, documents none accounts for
        uuid = str(table.metadata.table_uuid)
        return not empty_verdict(uuid, checkpoint, found.unaccounted).follows
    if checkpoint is None or checkpoint.snapshot_id != current.snapshot_id:
        return True
    # a schema change, new ids, a dead pass's commits rolled back: a resync
    facts = table_facts(table, name, checkpoint, identifier_columns, store.pass_end(name))
    return not table_verdict(facts).follows


def index_work(
    index: IndexAlias,
    checkpoint: Checkpoint | None,
    shape: Shape,
    owner: Owner | None = None,
) -> str:
    """What the index needs that no commit asks for, for a pass to do; "" for nothing.

    `verdict.index_verdict` decides it from the facts `read_facts` reads for a STATUS question, in
    its order: an index under its name that is not `owner`'s (a pass refuses it, or takes it
    over), what a run left unfinished in it, and once synced another shape of the table than the
    configured `shape` (an operator changed it, and a pass rebuilds it).
    """
    facts = _index_facts(index, checkpoint, shape, owner)
    return index_verdict(facts, synced=checkpoint is not None).reason


def _index_facts(
    index: IndexAlias,
    checkpoint: Checkpoint | None,
    shape: Shape,
    owner: Owner | None,
    empty: bool = False,
) -> IndexFacts:
    """The index's facts for a STATUS question (`read_facts`); `empty`: no snapshot."""
    spec = IndexSpec(shape=shape.fingerprint)
    query = IndexQuery(Question.STATUS, checkpoint, spec, owner, empty=empty)
    return read_facts(index, query).index


def work_size(
    table: Table, name: str, store: StateStore, identifier_columns: tuple[str, ...]
) -> WorkSize | None:
    """An estimate of what a sync would read when nothing is pending, from snapshot summaries.

    No manifest is read. For an export or a resync it is the current snapshot whole, else what
    every snapshot since the checkpoint added and removed. It is None when it cannot be told, as
    work is pending or a summary lacks the counts; the caller then assumes the work is large.
    """
    current = table.current_snapshot()
    if store.count_pending(name) or current is None:
        return None
    checkpoint = store.get_checkpoint(name)
    kind, _ = resync_needed(table, name, checkpoint, identifier_columns, store.pass_end(name))
    if checkpoint is None or kind != ResyncKind.NONE:
        return _summed([current], _TOTAL)
    return _summed(snapshots_after(table, name, checkpoint), _CHANGED)


@dataclass(frozen=True)
class _SummaryKeys:
    """Snapshot summary keys summed into a WorkSize.

    The keys are Iceberg's spec; pyiceberg and Spark write them.
    """

    files: tuple[str, ...]
    rows: tuple[str, ...]
    bytes: tuple[str, ...]


_TOTAL = _SummaryKeys(
    ("total-data-files", "total-delete-files"), ("total-records",), ("total-files-size",)
)
_CHANGED = _SummaryKeys(
    ("added-data-files", "deleted-data-files", "added-delete-files"),
    ("added-records", "deleted-records", "added-position-deletes", "added-equality-deletes"),
    ("added-files-size", "removed-files-size"),
)


def _summed(snapshots: list[Snapshot], keys: _SummaryKeys) -> WorkSize | None:
    files = rows = size = 0
    for snapshot in snapshots:
        summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        if snapshot.summary is None or snapshot.summary.operation == Operation.REPLACE:
            continue  # a compaction changes no row: icecdc reads none of its files
        if _TOTAL.bytes[0] not in summary:
            return None  # a writer that records no sizes: a zero would be a guess
        # writers leave out counts that are zero
        files += sum(int(summary.get(k, 0)) for k in keys.files)
        rows += sum(int(summary.get(k, 0)) for k in keys.rows)
        size += sum(int(summary.get(k, 0)) for k in keys.bytes)
    return WorkSize(files, rows, size)


@dataclass(frozen=True)
class StatusQuery:
    """What `table_status` is asked beyond the lag.

    `progress` asks how far an export under way is, and when the checkpoint last moved. It reads
    every pending item, so it is for operators, not for the planner's every sweep.
    `identifier_columns` are those a sync would use; given them, a rebuild no commit asks for, as
    `resync_needed` tells, is unfinished too.
    """

    progress: bool = False
    identifier_columns: tuple[str, ...] | None = None


def table_status(
    table: Table,
    config: TableIndexConfig,
    store: StateStore,
    now: float,
    dead_letters: DeadLetters | None = None,
    index: IndexAlias | None = None,
    query: StatusQuery | None = None,
) -> TableStatus:
    """Where the index stands against the table.

    The answer holds the checkpoint, pending work, lag and dead letters. Given the `index`, it
    holds what the index needs that no commit asks for, as `index_work` tells. `query` is what more
    is asked, a `StatusQuery`.
    """
    query = query or StatusQuery()
    progress, identifier_columns = query.progress, query.identifier_columns
    status = _lag(table, config, store, now)
    if progress:
        status = replace(status, checkpointed_at=store.checkpointed_at(config.name))
    if progress and status.pending_items:
        exports = [i for i in store.pending_heads(config.name) if i.kind == ItemKind.EXPORT]
        files = sum(i.file_count for i in exports)
        applied = sum(i.file_count for i in exports if i.status == ItemStatus.APPLIED)
        status = replace(status, export_files=files, export_files_applied=applied)
    if dead_letters:
        status = replace(status, dead_letters=dead_letters.count(config.name))
    if index is not None:
        needs = index_work(index, status.checkpoint, config.shape, Owner.of(table))
        status = replace(status, unfinished=needs)
    if identifier_columns is not None and not status.unfinished:
        reason = _resync_reason(table, config.name, store, identifier_columns)
        status = replace(status, unfinished=reason)
    return status


def _resync_reason(
    table: Table,
    name: str,
    store: StateStore,
    identifier_columns: tuple[str, ...],
) -> str:
    """Why a sync would rebuild the index though no commit asks for it ("": it would not)."""
    checkpoint = store.get_checkpoint(name)
    if checkpoint is None or table.current_snapshot() is None:
        return ""
    kind, reason = resync_needed(table, name, checkpoint, identifier_columns, store.pass_end(name))
    return f"{reason}; the index is to be rebuilt ({kind})" if kind else ""


def _lag(table: Table, config: TableIndexConfig, store: StateStore, now: float) -> TableStatus:
    checkpoint = store.get_checkpoint(config.name)
    current = table.current_snapshot()
    pending = store.count_pending(config.name)
    if current is None:
        return TableStatus(config.name, checkpoint, None, pending, 0, 0.0)
    if checkpoint is None:
        return TableStatus(
            config.name, None, current.snapshot_id, pending, None, now - current.timestamp_ms / 1000
        )
    try:
        behind = snapshots_after(table, config.name, checkpoint)
    except PlanningError:
        return TableStatus(config.name, checkpoint, current.snapshot_id, pending, None, 0.0)
    lag_seconds = max(0.0, now - behind[0].timestamp_ms / 1000) if behind else 0.0
    return TableStatus(
        config.name, checkpoint, current.snapshot_id, pending, len(behind), lag_seconds
    )

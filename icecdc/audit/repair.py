"""Targeted repair of a scope of the index, and the zero-downtime rebuild.

A repair makes a scope of the index equal to the table again without exporting it. The scope is
some partitions, some ids, or the whole table. The rebuild is for what cannot be fixed in place.

A repair runs under the table's lease, so that no sync runs meanwhile. It compares the table's rows
of the scope, as of the checkpoint, with the index's documents of the scope, and writes only what
differs. A row's document is written at the checkpoint's sequence number with `external_gte`: it
overwrites what icecdc wrote, never a later change's document. The documents the table no longer
has are deleted at the same version.

A document whose version is above the checkpoint's was written by something else. A write below
it would be refused, and so would every later change up to that version, so it is reported by id.
`rebuild_index` fixes it: a RESET resync into a new generation, swapped in when complete.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from pyiceberg.table import Table

from icecdc.audit.audit import TableAndIndex
from icecdc.audit.index_side import ColumnField, Hit, IndexSide
from icecdc.audit.report import AuditCost, RepairReport, RepairScope
from icecdc.catalog import identifier_columns, load_table, open_catalog
from icecdc.config import Config, TableIndexConfig
from icecdc.deadletters import DeadLetter, DeadLetters
from icecdc.destination.client import OpenSearch
from icecdc.destination.index import IndexAlias
from icecdc.destination.port import Destination
from icecdc.destination.sink import BulkMode, Refusal, fenced, refusal_letter, write_documents
from icecdc.errors import OperationError
from icecdc.logs import SUMMARY_LOGGER
from icecdc.lookup import TableRows, whole_rows_only
from icecdc.model import Checkpoint, ResyncKind, VersionType, Write
from icecdc.planning import plan_table
from icecdc.state import Lease, StateStore, index_stores, open_state_store
from icecdc.status import index_work
from icecdc.sync import SyncResult, sync

log = logging.getLogger(__name__)
summary_log = logging.getLogger(SUMMARY_LOGGER)


def repair_table(
    opened: TableAndIndex, destination: Destination, scope: RepairScope, lease_seconds: float
) -> RepairReport:
    """Rewrite what differs in the scope, as the module's doc says.

    `destination` is the index's, with the run's dead letters: the client is `opened`'s.

    It raises OperationError, nothing written, when another run holds the lease, work is pending, or
    the index is not as the checkpoint left it.
    """
    table, config, identifiers = opened.table, opened.config, opened.identifiers
    store, client = opened.store, opened.client
    if not scope:
        raise OperationError(
            f"table {config.name!r}: name what to repair "
            "(partitions, ids, or the last audit's findings)"
        )
    started = time.monotonic()
    name, dead_letter = config.name, destination.dead_letter
    assert destination.opensearch is not None  # opened from its section (`Destination.open`)
    with Lease(store, name, lease_seconds) as lease:
        if not lease.held:
            raise OperationError(
                f"table {name!r}: another run holds its lease; repair when it has finished"
            )
        checkpoint = _settled_checkpoint(store, table, config, client)
        rows = TableRows(table, name, identifiers, checkpoint.snapshot_id, dead_letter)
        side = IndexSide(client, config.index)
        report = RepairReport(name, config.index, scope, checkpoint.sequence_number)
        wanted, held = _scope_documents(rows, side, scope)
        report.compared = len(set(wanted) | set(held))
        report.not_found = [i for i in scope.ids if i not in wanted and i not in held]
        writes = _writes(report, wanted, held, checkpoint.sequence_number)
        refused = _Refused(name, checkpoint, destination.dead_letters)
        stats = write_documents(
            client,
            destination.opensearch,
            config.index,
            fenced(writes, lease),
            refused if refused.letters else None,
            BulkMode(VersionType.EXTERNAL_GTE, fence=lease),
        )
        lease.check()
    report.indexed, report.deleted, report.superseded, report.dead_lettered = (
        stats.indexed,
        stats.deleted,
        stats.superseded,
        stats.dead_lettered + len(rows.unreadable),
    )
    _note_what_is_left(report, rows.unreadable, dead_letter)
    report.cost = AuditCost(rows.cost, side.requests, time.monotonic() - started)
    summary_log.info(
        "%s: repair of %s: %d compared, %d indexed, %d deleted, %d foreign",
        name,
        scope.describe(),
        report.compared,
        report.indexed,
        report.deleted,
        len(report.foreign),
    )
    return report


def _note_what_is_left(
    report: RepairReport, unreadable: list[DeadLetter], dead_letter: str | None
) -> None:
    """Say why rows of the scope have no document, and what fixes that.

    It says too why documents another writer holds stay as they are, and what fixes them.
    """
    if unreadable:
        kept = (
            "each has an open dead letter"
            if dead_letter
            else "no dead-letter location is configured"
        )
        report.notes.append(
            f"{len(unreadable)} rows of the scope cannot become documents "
            f"(e.g. {unreadable[0].reason}): not written; {kept}"
        )
    if report.foreign:
        report.notes.append(
            f"{len(report.foreign)} documents carry versions above the checkpoint's "
            f"({report.version}): another writer's; in place they would refuse later changes: "
            "rebuild the index (icecdc repair --rebuild)"
        )
    if report.superseded:
        report.notes.append(
            f"{report.superseded} writes were refused: the index holds a newer version of those "
            "documents, or the tombstone of a newer delete (kept for the index's gc_deletes, "
            "60 s by default): another writer's; repair again once such tombstones are gone, "
            "or rebuild the index (icecdc repair --rebuild)"
        )


def _settled_checkpoint(
    store: StateStore, table: Table, config: TableIndexConfig, client: OpenSearch
) -> Checkpoint:
    """The checkpoint, when the index is exactly as it left it.

    That is: no work pending, nothing unfinished, the configured shape.
    """
    name = config.name
    checkpoint = store.get_checkpoint(name)
    if checkpoint is None:
        raise OperationError(
            f"table {name!r} has never been synced: sync it (the export writes every row)"
        )
    if checkpoint.table_uuid != str(table.metadata.table_uuid):
        raise OperationError(
            f"table {name!r} was dropped and created again since its last sync: sync first"
        )
    pending = store.count_pending(name)
    if pending:
        raise OperationError(
            f"table {name!r} has {pending} work items pending: sync first "
            "(a pass in progress may have written versions above the checkpoint's, "
            "which a repair would take for another writer's)"
        )
    # what a pass must do first (a run's leftovers, another shape), as status reports it
    index_needs = index_work(IndexAlias(client, config.index), checkpoint, config.shape)
    if index_needs:
        raise OperationError(f"table {name!r}: {index_needs}; sync first")
    return checkpoint


def _scope_documents(
    rows: TableRows, side: IndexSide, scope: RepairScope
) -> tuple[dict[str, list[str]], dict[str, Hit]]:
    """The table's documents of the scope and the index's documents of the scope.

    A row whose document the index holds elsewhere, or a document whose row the table has
    elsewhere, is taken in with its counterpart. That happens when a partition column differs.
    """
    side.refresh()  # the scroll of a partition must see every write
    wanted: dict[str, list[str]] = {}
    held: dict[str, Hit] = {}
    if scope.whole_table:
        wanted |= _grouped(rows.documents(rows.data_entries()))
        held |= side.scan({"match_all": {}})
    for partition in scope.partitions:
        values = rows.normalized(partition)
        wanted |= rows.where(values)
        held |= side.where(
            {_queryable(side, rows, column): value for column, value in values.items()}
        )
    if scope.ids:
        wanted |= rows.by_ids(scope.ids)
        held |= side.fetch(scope.ids)
    strays = [doc_id for doc_id in held if doc_id not in wanted]
    if strays and rows.identifier_columns:
        wanted |= rows.by_ids(strays)
    held |= side.fetch([doc_id for doc_id in wanted if doc_id not in held])
    return wanted, held


def _queryable(side: IndexSide, rows: TableRows, column: str) -> ColumnField:
    found = side.column_field(column, rows.schema.find_type(column))
    if found is None:
        raise OperationError(
            f"index {side.index!r} has no field holding column {column!r} exactly "
            "(a keyword, number, boolean or date field): "
            "its documents cannot be found by partition; repair by ids, or rebuild"
        )
    return found


def _grouped(documents: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for doc_id, document in documents:
        grouped.setdefault(doc_id, []).append(document)
    return grouped


def _writes(
    report: RepairReport, wanted: dict[str, list[str]], held: dict[str, Hit], version: int
) -> list[Write]:
    """The writes that make the index's documents of the scope the table's.

    Foreign versions and shared ids are reported, not written.
    """
    writes: list[Write] = []
    for doc_id in sorted(set(wanted) | set(held)):
        documents, hit = wanted.get(doc_id, []), held.get(doc_id)
        if hit is not None and hit.version > version:
            report.foreign[doc_id] = hit.version
        elif len(documents) > 1:
            report.duplicates.append(doc_id)
        elif documents and (hit is None or hit.document != documents[0]):
            writes.append(Write(doc_id, version, documents[0]))
        elif not documents and hit is not None:
            writes.append(Write(doc_id, version, None))
    return writes


class _Refused:
    """Documents OpenSearch refuses for their own fault: dead letters, as a sync keeps them."""

    def __init__(
        self, table_name: str, checkpoint: Checkpoint, letters: DeadLetters | None
    ) -> None:
        self.table, self.checkpoint, self.letters = table_name, checkpoint, letters

    def __call__(self, refused: list[Refusal]) -> None:
        assert self.letters is not None
        self.letters.write(
            refusal_letter(self.table, self.checkpoint.snapshot_id, refusal) for refusal in refused
        )


def repair(
    config: Config, name: str, scope: RepairScope, destination: Destination | None = None
) -> RepairReport:
    """`repair_table` for a configured table.

    Its catalog and state store are opened from `config`; its OpenSearch too, unless the command
    opened its `destination` already.
    """
    table_config = whole_rows_only(config.table(name), "repair")
    table = load_table(open_catalog(config.catalog), name)
    store = open_state_store(config.state)
    try:
        identifiers = identifier_columns(table, table_config)
        if destination is None:
            destination = Destination.open(config.opensearch, config.dead_letter)
        opened = TableAndIndex(table, table_config, identifiers, store, destination.client)
        return repair_table(opened, destination, scope, config.state.lease_seconds)
    finally:
        store.close()


def rebuild_index(
    config: Config,
    name: str,
    reason: str,
    spark: object = None,
    destination: Destination | None = None,
) -> SyncResult:
    """Rebuild the table's index without downtime.

    A RESET resync is planned under the lease, then a sync applies it. The resync is an export of
    the current snapshot into a new generation, which the alias is swapped to when it is complete.
    Every document is written again, and versions start over.
    """
    table_config = config.table(name)
    table = load_table(open_catalog(config.catalog), name)
    store = open_state_store(config.state)
    identifiers = identifier_columns(table, table_config)
    try:
        # every index the table writes
        for index_config, key, scoped in index_stores(table_config, store):
            with Lease(scoped, name, config.state.lease_seconds, state=config.state) as lease:
                if not lease.held:
                    raise OperationError(
                        f"table {key!r}: another run holds its lease; rebuild when it has finished"
                    )
                reset = (ResyncKind.RESET, reason)
                plan_table(
                    table, index_config, scoped, identifiers, resync=reset, limits=config.batch
                )
    finally:
        store.close()
    (result,) = sync(config, spark, [name], destination=destination)
    return result

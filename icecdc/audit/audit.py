"""The drift audit: is the index still equal to its table, at a cost far below `icecdc verify`?

Two checks, against the table as of its checkpoint (what the index must hold; later commits are
the next sync's, not drift):

- **Counts by partition.** The table's side comes from metadata: each live data file's record
  count less the deletes in force, as `icecdc.lookup.TableRows.live_rows` counts them. That is a
  file-scoped delete file's count, or the positions of the others; only data files equality
  deletes apply to are read. The index's side comes from one composite aggregation on the fields
  of the identity partitions' source columns. Partitions of other transforms, such as bucket or
  day, cannot be told apart in the documents: those are compared in total, and the report says
  what was compared.
- **A sample of rows**, compared field by field. Data files are chosen at random, weighted by their
  live rows, until they hold the sample, and read whole with their deletes. Their rows, sampled,
  are fetched from the index by `_mget`, document and version.

Where the index holds more documents than the table rows in a partition, the extra documents are
named by id: the index's ids there (a scroll, ids only) less the table's (that partition's data
files, read whole with their deletes), the partitions listed bounded by `list_limit` rows and
documents (an unpartitioned table's one partition is the whole table: a note says when it is
skipped).

It reports missing, extra and stale documents by partition and id, documents whose version is
above any icecdc wrote (another writer's), ids several live rows hold among the rows it read (the
sample's files: a sync dead-letters them; with their letters open, they are known, not drift),
and what it read.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pyiceberg.manifest import ManifestEntry
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, IcebergType

from icecdc.audit.index_side import ColumnField, IndexSide, partition_query
from icecdc.audit.report import (
    AuditCost,
    AuditReport,
    Drift,
    DriftKind,
    PartitionCount,
    describe_partition,
)
from icecdc.config import TableIndexConfig
from icecdc.deadletters import DeadLetters
from icecdc.destination.client import OpenSearch
from icecdc.documents import converter_for
from icecdc.errors import OperationError, ProcessingError
from icecdc.logs import SUMMARY_LOGGER
from icecdc.lookup import TableRows, field_value
from icecdc.model import Checkpoint
from icecdc.state import StateStore

log = logging.getLogger(__name__)
summary_log = logging.getLogger(SUMMARY_LOGGER)

# Rows compared field by field unless asked otherwise: enough to see drift of a few tenths of a
# percent with high probability, read from a few data files.
DEFAULT_SAMPLE = 3000
# Extra documents named by id; the others are counted in a note.
DEFAULT_MAX_IDS = 1000
# The table's rows and the index's documents listed, at most, to name extra documents: a partition
# beyond what is left is not listed (its files would be read whole and its ids held in memory,
# both growing with it: an unpartitioned table's would be verify's cost), partitions taken
# smallest first.
DEFAULT_LIST_LIMIT = 1_000_000
_EPOCH = dt.date(1970, 1, 1)


@dataclass(frozen=True)
class _Group:
    """A column partitions are counted by: an identity partition's source column and its field."""

    source_id: int
    source_type: IcebergType
    field: ColumnField


@dataclass(frozen=True)
class TableAndIndex:
    """A configured table and its index, opened: what an audit or a repair compares."""

    table: Table
    config: TableIndexConfig
    identifiers: tuple[str, ...]  # the table's identifier columns (`catalog.identifier_columns`)
    store: StateStore
    client: OpenSearch


@dataclass(frozen=True)
class AuditOptions:
    """How much an audit reads and names (`icecdc audit`'s options).

    `sample`: rows compared field by field (0: counts only); `seed`: makes the sample repeatable;
    `max_ids`: extra documents named by id; `list_limit`: rows and documents listed to name them."""

    sample: int = DEFAULT_SAMPLE
    seed: int | None = None
    max_ids: int = DEFAULT_MAX_IDS
    list_limit: int = DEFAULT_LIST_LIMIT


@dataclass(frozen=True)
class _Audit:
    """One audit's parts.

    They are the table's rows as of the checkpoint, the index's side, the columns partitions are
    counted by, and the report the findings go into.
    """

    report: AuditReport
    rows: TableRows
    side: IndexSide
    groups: list[_Group]


@dataclass(frozen=True)
class _Sample:
    """The rows compared field by field: how many, drawn with `rng` from the live data files."""

    entries: list[ManifestEntry]
    live: dict[str, int]  # data file path → its live rows
    size: int
    rng: random.Random


def audit_table(
    opened: TableAndIndex,
    options: AuditOptions = AuditOptions(),
    dead_letters: DeadLetters | None = None,
) -> AuditReport:
    """Compare the table's index with the table as of its checkpoint (see the module's doc)."""
    sample, max_ids, list_limit = options.sample, options.max_ids, options.list_limit
    if sample < 0:
        raise OperationError(f"the sample must be a number of rows, 0 or more, got {sample}")
    if max_ids < 0 or list_limit < 0:
        raise OperationError(
            f"--max-ids and --list-limit must be 0 or more, got {max_ids} and {list_limit}"
        )
    started = time.monotonic()
    table, config, store = opened.table, opened.config, opened.store
    name = config.name
    checkpoint = _checkpoint(store, name)
    if checkpoint.table_uuid != str(table.metadata.table_uuid):
        return _resync_pending(table, config, checkpoint)
    rows = TableRows(table, name, opened.identifiers, snapshot_id=checkpoint.snapshot_id)
    side = IndexSide(opened.client, config.index)
    side.check_exists(name)
    report = AuditReport(
        name,
        config.index,
        checkpoint.snapshot_id,
        checkpoint.sequence_number,
        "",
        audited_at=time.time(),
    )
    pending = store.count_pending(name)
    report.notes += _context(table, checkpoint, pending, dead_letters, name)

    entries = rows.data_entries()
    live = {e.data_file.file_path: rows.live_rows(e) for e in entries}
    groups, report.compared = _grouping(table, entries, side)
    report.grouped_by = tuple(g.field.column for g in groups)
    table_counts: Counter[tuple[Any, ...]] = Counter()
    files: dict[tuple[Any, ...], list[ManifestEntry]] = {}
    for entry in entries:
        key = _partition_key(table, entry, groups)
        table_counts[key] += live[entry.data_file.file_path]
        files.setdefault(key, []).append(entry)
    side.refresh()
    index_counts, report.documents = side.counts([g.field for g in groups])
    report.rows = sum(table_counts.values())
    lettered = _dead_lettered(dead_letters, name, side, groups)
    _compare_counts(report, groups, table_counts, index_counts, lettered.by_partition())
    audit = _Audit(report, rows, side, groups)
    _name_extra(audit, files, table_counts, index_counts, options)

    if sample:
        drawn = _Sample(entries, live, sample, random.Random(options.seed))
        _compare_sample(audit, drawn, checkpoint, pending, lettered)
    if store.get_checkpoint(name) != checkpoint:
        report.notes.append(
            "a sync advanced the checkpoint during the audit: findings may be that sync's writes; "
            "audit again"
        )
    report.cost = AuditCost(rows.cost, side.requests, time.monotonic() - started)
    summary_log.info(
        "%s: audited index %r at snapshot %d: %s; %s",
        name,
        config.index,
        checkpoint.snapshot_id,
        report.summary(),
        report.cost.describe(),
    )
    return report


def _checkpoint(store: StateStore, name: str) -> Checkpoint:
    checkpoint = store.get_checkpoint(name)
    if checkpoint is None:
        raise OperationError(
            f"table {name!r} has never been synced: its index has nothing to compare"
        )
    return checkpoint


def _resync_pending(table: Table, config: TableIndexConfig, checkpoint: Checkpoint) -> AuditReport:
    """The report on a table dropped and created again since its checkpoint.

    There is nothing to compare until the next sync rebuilds its index as a new generation, which is
    the sync's work, not drift.
    """
    why = (
        f"table {config.name!r} was dropped and created again since its last sync "
        f"(UUID {checkpoint.table_uuid} → {table.metadata.table_uuid}): a resync is pending; "
        "the next sync rebuilds its index, then audit again"
    )
    log.warning("%s: not audited: %s", config.name, why)
    report = AuditReport(
        config.name, config.index, checkpoint.snapshot_id, checkpoint.sequence_number, "nothing"
    )
    report.audited_at, report.resync_pending = time.time(), why
    return report


def _context(
    table: Table, checkpoint: Checkpoint, pending: int, dead_letters: DeadLetters | None, name: str
) -> list[str]:
    """What qualifies the findings: work in progress, rows dead-lettered on purpose."""
    notes = []
    if pending:
        notes.append(
            f"{pending} work items are pending: a pass in progress may have written part of them, "
            "and versions above the checkpoint's are not reported as foreign; "
            "sync, then audit again"
        )
    if checkpoint.schema_id >= 0 and checkpoint.schema_id != table.metadata.current_schema_id:
        notes.append(
            "the schema changed since the checkpoint: documents are compared in the new schema; "
            "sync first"
        )
    letters = dead_letters.count(name) if dead_letters is not None else 0
    if letters:
        notes.append(
            f"{letters} dead letters: their rows have no document by design "
            "(icecdc dead-letters list, replay)"
        )
    return notes


@dataclass(frozen=True)
class _Lettered:
    """Rows dead-lettered and not dealt with, with no document: missing from the index by design."""

    # doc id → the partition of each of its letters' rows (an id several live rows share has a
    # letter per row)
    ids: dict[str, list[tuple[Any, ...]]]
    rows: dict[str, tuple[Any, ...]]  # rows with no id (a null identifier): letter key → partition

    def by_partition(self) -> Counter[tuple[Any, ...]]:
        return Counter(p for keys in self.ids.values() for p in keys) + Counter(self.rows.values())


def _dead_lettered(
    dead_letters: DeadLetters | None, name: str, side: IndexSide, groups: list[_Group]
) -> _Lettered:
    """The rows dead-lettered and not dealt with that have no document, with their partitions.

    A row's partition is the one its letter's document names. A row deleted since its letter still
    counts here: replay or mark such letters to keep the counts exact.
    """
    if dead_letters is None:
        return _Lettered({}, {})
    partitions: dict[str, list[tuple[Any, ...]]] = {}
    rows: dict[str, tuple[Any, ...]] = {}
    for stored in dead_letters.letters(name):
        letter = stored.letter
        if letter.document is not None:
            document = json.loads(letter.document)
            key = tuple(g.field.held(field_value(document, g.field.column)) for g in groups)
            if letter.doc_id is not None:
                partitions.setdefault(letter.doc_id, []).append(key)
            else:
                rows[letter.key] = key
    held = side.fetch(partitions) if partitions else {}
    return _Lettered(
        {doc_id: keys for doc_id, keys in partitions.items() if doc_id not in held}, rows
    )


def _grouping(
    table: Table, entries: list[ManifestEntry], side: IndexSide
) -> tuple[list[_Group], str]:
    """The columns partitions are counted by, and what the counts compare, in words.

    The columns are the identity partitions of every partition spec the live files were written
    with, whose index field holds the value exactly.
    """
    schema = table.schema()
    specs = [
        table.specs()[spec_id]
        for spec_id in sorted({e.data_file.spec_id for e in entries} or {table.spec().spec_id})
    ]
    identity = [
        {f.source_id for f in spec.fields if isinstance(f.transform, IdentityTransform)}
        for spec in specs
    ]
    common = set.intersection(*identity) if identity else set()
    groups: list[_Group] = []
    skipped: list[str] = []
    for source_id in sorted(common, key=lambda s: [f.source_id for f in specs[-1].fields].index(s)):
        column, source_type = schema.find_column_name(source_id), schema.find_type(source_id)
        if column is None:
            continue
        column_field = side.column_field(column, source_type)
        if column_field is None:
            skipped.append(column)
        else:
            groups.append(_Group(source_id, source_type, column_field))
    other = sorted(
        {f"{f.transform}({schema.find_column_name(f.source_id)})" for s in specs for f in s.fields}
        - {f"identity({g.field.column})" for g in groups}
    )
    compared = (
        f"partitions by {', '.join(g.field.column for g in groups)}" if groups else "the total"
    )
    if skipped:
        compared += (
            f" (not by {', '.join(skipped)}: the index has no field holding its exact value)"
        )
    if other:
        compared += f"; {', '.join(other)} are not told apart"
    return groups, compared


def _partition_key(table: Table, entry: ManifestEntry, groups: list[_Group]) -> tuple[Any, ...]:
    """The data file's identity partition values, as the index's fields hold them.

    A string longer than a keyword field keeps is counted with no value, as the index counts it.
    """
    data_file = entry.data_file
    positions = {f.source_id: i for i, f in enumerate(table.specs()[data_file.spec_id].fields)}
    return tuple(
        g.field.held(_as_document(g.source_type, data_file.partition[positions[g.source_id]]))
        for g in groups
    )


def _as_document(source_type: IcebergType, value: Any) -> Any:
    """A partition value (as manifests hold it: a date as days since 1970) as documents hold it."""
    if value is None:
        return None
    if isinstance(source_type, DateType) and isinstance(value, int):
        value = _EPOCH + dt.timedelta(days=value)
    return converter_for(source_type)(value)


def _compare_counts(
    report: AuditReport,
    groups: list[_Group],
    table_counts: Counter[tuple[Any, ...]],
    index_counts: dict[tuple[Any, ...], int],
    lettered: Counter[tuple[Any, ...]],
) -> None:
    keys = set(table_counts) | set(index_counts)
    report.partitions = len(keys)
    for key in sorted(keys, key=lambda k: json.dumps(k, default=str)):
        rows, documents = table_counts.get(key, 0), index_counts.get(key, 0)
        if rows == documents:
            continue
        partition = {g.field.column: value for g, value in zip(groups, key, strict=True)}
        report.counts.append(PartitionCount(partition, rows, documents))
        if rows > documents:
            report.drift.append(
                Drift(
                    DriftKind.MISSING,
                    partition,
                    count=rows - documents,
                    dead_lettered=lettered[key],
                )
            )
        else:
            report.drift.append(Drift(DriftKind.EXTRA, partition, count=documents - rows))


def _name_extra(
    audit: _Audit,
    files: dict[tuple[Any, ...], list[ManifestEntry]],
    table_counts: Counter[tuple[Any, ...]],
    index_counts: dict[tuple[Any, ...], int],
    options: AuditOptions,
) -> None:
    """Name by id the documents of the partitions where the index holds more than the table.

    Those are the index's ids there less the table's. The cost is the drifted partitions', never
    the clean ones': only their data files are read, only their documents listed. A document whose
    row the table has in another partition, as its partition column differs, is named too: the
    index has it here and the table does not. The sample may also find it stale.
    """
    report, rows, side, groups = audit.report, audit.rows, audit.side, audit.groups
    max_ids, list_limit = options.max_ids, options.list_limit
    over = [k for k, documents in index_counts.items() if documents > table_counts.get(k, 0)]
    over.sort(key=lambda k: (table_counts.get(k, 0) + index_counts[k], json.dumps(k, default=str)))
    left, named, unnamed = list_limit, 0, 0
    for key in over:
        partition = {g.field.column: value for g, value in zip(groups, key, strict=True)}
        size = table_counts.get(key, 0) + index_counts[key]
        if size > left:
            report.notes.append(
                f"extra documents in {describe_partition(partition)} not named by id: listing its "
                f"{table_counts.get(key, 0)} rows and {index_counts[key]} documents would pass the "
                "bound of "
                f"{list_limit} ({left} left); raise it (--list-limit), or repair the partition"
            )
            continue
        left -= size
        try:
            held = {doc_id for doc_id, _ in rows.documents(files.get(key, []))}
        except ProcessingError as exc:
            # a row that cannot become a document: a sync dead-letters it
            report.notes.append(
                f"extra documents in {describe_partition(partition)} not named by id: {exc}"
            )
            continue
        extra = sorted(
            side.ids(
                partition_query({g.field: value for g, value in zip(groups, key, strict=True)})
            )
            - held
        )
        shown = extra[: max(0, max_ids - named)]
        named += len(shown)
        unnamed += len(extra) - len(shown)
        report.drift.extend(Drift(DriftKind.EXTRA, partition, doc_id) for doc_id in shown)
    if unnamed:
        report.notes.append(
            f"{unnamed} more extra documents not named by id (at most {max_ids} are: --max-ids)"
        )


def _compare_sample(
    audit: _Audit,
    sample: _Sample,
    checkpoint: Checkpoint,
    pending: int,
    lettered: _Lettered,
) -> None:
    """Read whole the files a random sample of rows falls into, fetch their documents, compare.

    An id several of the rows read hold is reported as such, as no document can equal two rows.
    """
    report, rows, side, groups = audit.report, audit.rows, audit.side, audit.groups
    documents: dict[str, str] = {}
    held: Counter[str] = Counter()
    unreadable = len(rows.unreadable)
    for entry in _sample_files(sample.entries, sample.live, sample.size, sample.rng):
        read = list(rows.documents([entry]))
        documents |= dict(read)
        held.update(doc_id for doc_id, _ in read)
    for doc_id in sorted(doc_id for doc_id, n in held.items() if n > 1):
        document = json.loads(documents.pop(doc_id))
        partition = {g.field.column: field_value(document, g.field.column) for g in groups}
        known = int(doc_id in lettered.ids)
        report.drift.append(
            Drift(DriftKind.DUPLICATE, partition, doc_id, held[doc_id], dead_lettered=known)
        )
    no_id = rows.unreadable[unreadable:]  # rows a sync dead-letters: never in the index
    if no_id:
        explained = sum(letter.key in lettered.rows for letter in no_id)
        report.notes.append(
            f"{len(no_id)} rows of the sampled files cannot become documents ({no_id[0].reason}), "
            f"{explained} of them with an open dead letter; the counts say whether the others "
            "are drift"
        )
    chosen = sorted(sample.rng.sample(sorted(documents), min(sample.size, len(documents))))
    report.sampled = len(chosen)
    hits = side.fetch(chosen)
    for doc_id in chosen:
        document = json.loads(documents[doc_id])
        partition = {g.field.column: field_value(document, g.field.column) for g in groups}
        hit = hits.get(doc_id)
        if hit is None:
            report.drift.append(
                Drift(
                    DriftKind.MISSING, partition, doc_id, dead_lettered=int(doc_id in lettered.ids)
                )
            )
        elif hit.version > checkpoint.sequence_number and not pending:
            report.drift.append(
                Drift(DriftKind.FOREIGN_VERSION, partition, doc_id, version=hit.version)
            )
        elif hit.document != documents[doc_id]:
            stored = json.loads(hit.document)
            differing = tuple(
                sorted(k for k in set(document) | set(stored) if document.get(k) != stored.get(k))
            )
            report.drift.append(Drift(DriftKind.STALE, partition, doc_id, fields=differing))


def _sample_files(
    entries: list[ManifestEntry], live: dict[str, int], sample: int, rng: random.Random
) -> list[ManifestEntry]:
    """Data files drawn at random without replacement until they hold `sample` rows.

    Each is as likely as it has live rows, so that a row's chance to be read is the same in every
    file.
    """
    keyed = [
        (rng.random() ** (1 / live[e.data_file.file_path]), e)
        for e in entries
        if live[e.data_file.file_path] > 0
    ]
    keyed.sort(key=lambda k: k[0], reverse=True)
    chosen: list[ManifestEntry] = []
    held = 0
    for _, entry in keyed:
        if held >= sample:
            break
        chosen.append(entry)
        held += live[entry.data_file.file_path]
    return chosen

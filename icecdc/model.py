"""The value types every layer shares: changes, work items, checkpoints, writes to the index.

This module imports nothing of icecdc; every other module may import it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from functools import cached_property
from typing import Any, NamedTuple, TypeVar


class ChangeType(StrEnum):
    """What a change row does to its document. One letter: millions of them cross the shuffle."""

    INSERT = "I"
    DELETE = "D"


# The document of a delete by key (an equality delete): no row image, so it never cancels an insert.
NO_IMAGE = ""
# Starts the document of a delete by key that knows its document's routing value (the routing
# column is one of the key's): no row image either (a document is a JSON object, `{...}`).
ROUTED_KEY = "\x00"


def key_image(routing: str | None) -> str:
    """The document of a delete by key: NO_IMAGE, or the routing value when the key holds it."""
    return NO_IMAGE if routing is None else ROUTED_KEY + routing


def ordered_routings(routings: Iterable[str | None]) -> tuple[str | None, ...]:
    """Routing values in a stable order, None first: a key's writes do not vary between runs."""
    return tuple(sorted(set(routings), key=lambda r: (r is not None, r or "")))


class ChangeRow(NamedTuple):
    """One row's change, as it crosses the shuffle keyed by its document id."""

    sequence_number: int
    change: ChangeType
    document: str  # canonical JSON text of the row; NO_IMAGE for a delete by key


# A change row with its key, as the readers emit it and the shuffle groups it.
Change = tuple[str, ChangeRow]


class ItemKind(StrEnum):
    EXPORT = "export"  # one file of the export snapshot, read as inserts
    CHANGE = "change"  # the files a snapshot added and removed


class ItemStatus(StrEnum):
    PENDING = "pending"
    # an export item whose file is in the index; its snapshot is not finished yet
    APPLIED = "applied"
    DONE = "done"


class ResyncKind(StrEnum):
    """How an export rebuilds an index that already holds documents (WorkItem.resync)."""

    NONE = ""  # the first export: the index is empty
    # write every row (equal versions overwrite), then delete documents older than the export
    REWRITE = "rewrite"
    # empty the index first (versions would go backwards: a rollback, a recreated table, new ids)
    RESET = "reset"


class VersionType(StrEnum):
    """How OpenSearch compares a write's external version with the document's or its tombstone's."""

    EXTERNAL = "external"  # only a higher version: a replayed or reordered write never overwrites
    # also an equal one: a resync rewrites documents of its own version
    EXTERNAL_GTE = "external_gte"


class EngineKind(StrEnum):
    """Where a pass runs: on Spark, or in the calling process on Arrow, with no JVM.

    Spark takes exports, backlogs and wide rewrites; the calling process small batches.
    """

    SPARK = "spark"
    IN_PROCESS = "in_process"


class EngineChoice(StrEnum):
    """The configuration's `engine.use`: one engine always, or each pass's from its size."""

    AUTO = "auto"
    SPARK = EngineKind.SPARK.value
    IN_PROCESS = EngineKind.IN_PROCESS.value


class PassPoint(StrEnum):
    """Points of a pass where a test-only `Probe` may inject a crash, for the model-based test."""

    PLANNED = "planned"  # sync_table wrote the work items, before the pass
    WRITTEN = "written"  # every write of the pass is done, nothing recorded yet
    MARKED_APPLIED = "marked applied"  # a capped export's items are marked APPLIED
    CHECKPOINTED = "checkpointed"  # the checkpoint advanced; a rebuild's alias is not swapped yet
    SWAPPED = "swapped"  # the alias names the new generation; the old one is not deleted yet


# Called at every PassPoint of a pass; tests raise from it to crash there. None in production.
Probe = Callable[[PassPoint], None]


@dataclass(frozen=True)
class Progress:
    """How far a sync of one table is, after a pass.

    It is logged to `icecdc.progress`, for the CLI's bar and the Glue job's
    and the planner's structured lines.
    """

    table: str
    passes: int
    files: int  # files read so far
    rows: int  # change rows read so far
    seconds: float
    export_files: int = 0  # an export under way: its files (0: none)
    export_files_applied: int = 0  # of those, applied so far
    snapshots: int = 0  # applied so far
    snapshots_pending: int = 0  # a backlog of changes: its snapshots still to apply (0: caught up)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def seconds_left(self) -> float | None:
        """Seconds left, from the export's files applied so far, else from the backlog's snapshots.

        None when neither is under way.
        """
        if self.export_files and self.export_files_applied:
            return (
                self.seconds
                * (self.export_files - self.export_files_applied)
                / self.export_files_applied
            )
        if self.snapshots_pending and self.snapshots and not self.export_files:
            return self.seconds * self.snapshots_pending / self.snapshots
        return None

    def line(self) -> str:
        """One structured line: key=value pairs a log search can parse."""
        parts = [
            f"table={self.table}",
            f"passes={self.passes}",
            f"files={self.files}",
            f"rows={self.rows}",
        ]
        parts += [f"rows_per_second={self.rows_per_second:.0f}", f"seconds={self.seconds:.1f}"]
        if self.export_files:
            parts.append(f"export_files={self.export_files_applied}/{self.export_files}")
        elif self.snapshots_pending:
            parts.append(f"snapshots={self.snapshots}/{self.snapshots + self.snapshots_pending}")
        if (left := self.seconds_left) is not None:
            parts.append(f"seconds_left={left:.0f}")
        return "progress " + " ".join(parts)


class PassStage(StrEnum):
    """What a pass is doing while its progress is reported."""

    EXPORT = "export"  # writing the table's rows where they are read
    CHANGES = "changes"  # reading the changes' files (a backlog, a rewrite), before their writes
    WRITES = "writes"  # writing the changes' documents, once they are read (in process)


@dataclass(frozen=True)
class PassProgress:
    """How far one pass is, inside it: tasks and rows done, out of the pass's totals.

    Tasks are files; the rows are those their files hold, by the manifests' record counts. It is
    logged to `icecdc.progress` as the pass goes.
    """

    table: str
    stage: PassStage
    files: int  # tasks done
    files_total: int
    rows: int  # rows of the files of the tasks done
    rows_total: int
    seconds: float  # since the stage began

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def fraction(self) -> float:
        """Done, 0 to 1: by rows, as a task's time goes with its rows, else by tasks."""
        if self.rows_total:
            return min(self.rows / self.rows_total, 1.0)
        return min(self.files / self.files_total, 1.0) if self.files_total else 1.0

    @property
    def seconds_left(self) -> float | None:
        """At the rate so far; None before anything is done."""
        done = self.fraction
        return self.seconds * (1 - done) / done if done > 0 else None

    def line(self) -> str:
        """One structured line: key=value pairs a log search can parse.

        The writes stage counts documents written (in `rows`), not files.
        """
        parts = [f"table={self.table}", f"stage={self.stage}"]
        if self.stage == PassStage.WRITES:
            parts += [
                f"documents={self.rows}/{self.rows_total}",
                f"documents_per_second={self.rows_per_second:.0f}",
            ]
        else:
            parts += [
                f"files={self.files}/{self.files_total}",
                f"rows={self.rows}/{self.rows_total}",
                f"rows_per_second={self.rows_per_second:.0f}",
            ]
        parts.append(f"seconds={self.seconds:.1f}")
        if (left := self.seconds_left) is not None:
            parts.append(f"seconds_left={left:.0f}")
        return "progress " + " ".join(parts)


class StateStoreType(StrEnum):
    SQLITE = "sqlite"
    DYNAMODB = "dynamodb"


@dataclass(frozen=True)
class WorkSize:
    """How much a pass reads: data and delete files, their rows, and their bytes as stored."""

    files: int
    rows: int
    bytes: int

    @classmethod
    def of(cls, files: list[Any]) -> WorkSize:
        """Of pyiceberg DataFiles (data and delete files alike)."""
        return cls(
            len(files), sum(f.record_count for f in files), sum(f.file_size_in_bytes for f in files)
        )

    def __add__(self, other: WorkSize) -> WorkSize:
        return WorkSize(self.files + other.files, self.rows + other.rows, self.bytes + other.bytes)


@dataclass(frozen=True)
class Write:
    """The net write of one document: index `document` (or delete when None) at `version`."""

    doc_id: str
    # the sequence number of the snapshot whose change this is (of a collapsed run: its last)
    version: int
    document: str | None
    routing: str | None = None  # the shard routing value; None: OpenSearch routes by `doc_id`
    # where a write of several indexes goes; None: the index the writes are sent to
    index: str | None = None
    # Set on a delete whose document's routing value is unknown (a delete by key, the
    # routing column outside the key): the sink looks up the routing values the index
    # holds `doc_id` under and deletes it under each but these (the ones the writes
    # before it deal with). None: `routing` holds.
    routing_lookup: tuple[str | None, ...] | None = None


@dataclass(frozen=True)
class WorkItem:
    """A group of files of one snapshot to read and apply.

    An export item lists up to 100 data files of the export snapshot, read as inserts
    (`planning.export_groups`). A change item lists the data files a snapshot added, read as
    inserts, and removed, read as deletes. It also lists the delete files the snapshot added for
    merge-on-read: the rows they newly delete are deletes. A snapshot that changes no rows, such as
    a compaction, still gets one empty item, so that the checkpoint can move past it.
    """

    table: str
    table_uuid: str
    kind: ItemKind
    snapshot_id: int
    sequence_number: int
    group: int  # this item's position among its snapshot's items, from 0
    groups: int  # how many items the snapshot has; a snapshot is applied only when all are present
    added_data_files: tuple[str, ...] = ()
    removed_data_files: tuple[str, ...] = ()
    # position-delete, deletion-vector and equality-delete files
    added_delete_files: tuple[str, ...] = ()
    resync: ResyncKind = ResyncKind.NONE  # export items only
    replacing: str = ""  # a resync's export items: the token of the checkpoint it replaces
    status: ItemStatus = ItemStatus.PENDING
    # APPLIED items: the index their rows were written to, and the schema they were read with
    applied_to: str = ""
    created_at: float = field(default_factory=time.time)

    @cached_property  # a hash of up to 200 paths, asked for at every step of a pass
    def key(self) -> str:
        """The deterministic key of its table, snapshot and files (`put_items` puts if absent)."""
        if self.kind == ItemKind.EXPORT:
            # the sorted paths of the item's files (a one-file item: its path, as when an item
            # held one file); an empty table's export is one item with none
            file_hash = sha256(chr(10).join(sorted(self.added_data_files)))
            if self.resync:
                return f"{self.table}|resync|{self.replacing}|{self.snapshot_id}|{file_hash}"
            return f"{self.table}|export|{self.snapshot_id}|{file_hash}"
        paths = sorted(self.added_data_files + self.removed_data_files + self.added_delete_files)
        return f"{self.table}|{self.snapshot_id}|{sha256(chr(10).join(paths))}"

    @property
    def file_count(self) -> int:
        """How many files the item lists, of every role."""
        return (
            len(self.added_data_files) + len(self.removed_data_files) + len(self.added_delete_files)
        )

    @property
    def head(self) -> ItemHead:
        """The item without its files."""
        return ItemHead(
            self.key,
            self.table,
            self.table_uuid,
            self.kind,
            self.snapshot_id,
            self.sequence_number,
            self.group,
            self.groups,
            self.file_count,
            self.resync,
            self.replacing,
            self.status,
            self.applied_to,
        )

    def to_json(self) -> str:
        # one level: `asdict` would copy every path of the item's tuples on the way
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkItem:
        raw: dict[str, Any] = {
            _RENAMED.get(k, k): tuple(v) if isinstance(v, list) else v
            for k, v in json.loads(text).items()
        }
        return cls(
            **{
                **raw,
                "kind": ItemKind(raw["kind"]),
                "resync": ResyncKind(raw.get("resync", "")),
                "status": ItemStatus(raw.get("status", ItemStatus.PENDING)),
            }
        )


@dataclass(frozen=True)
class ItemHead:
    """A work item without its files: what the decisions over a table's backlog read.

    A table's pending items are read as heads (`StateStore.pending_heads`), a few hundred bytes
    each however many files they list; a pass fetches the files of the items it reads
    (`StateStore.bodies`). It has no file lists, so no decision can take a head for an item that
    lists none: `file_count` says how many it has.
    """

    key: str
    table: str
    table_uuid: str
    kind: ItemKind
    snapshot_id: int
    sequence_number: int
    group: int
    groups: int
    file_count: int
    resync: ResyncKind = ResyncKind.NONE
    replacing: str = ""
    status: ItemStatus = ItemStatus.PENDING
    applied_to: str = ""

    @property
    def head(self) -> ItemHead:
        """Itself, as `WorkItem.head` is, for what takes either."""
        return self

    def in_table(self, table: str) -> ItemHead:
        """The head of this item named for `table`, as `WorkItem.key` would key it there."""
        return replace(self, table=table, key=table + self.key.removeprefix(self.table))


# An item, or its head: what the state stores mark and complete, by key.
AnyItem = WorkItem | ItemHead
_Item = TypeVar("_Item", WorkItem, ItemHead)


def by_snapshot(items: Iterable[_Item]) -> dict[int, list[_Item]]:
    """The items grouped by snapshot, snapshots and items in the order given."""
    grouped: dict[int, list[_Item]] = {}
    for item in items:
        grouped.setdefault(item.snapshot_id, []).append(item)
    return grouped


# Field names of items stored before the rename, so that a store
# written by an earlier version reads.
_RENAMED = {
    "added_files": "added_data_files",
    "deleted_files": "removed_data_files",
    "delete_files": "added_delete_files",
}


# A checkpoint's snapshot id for a table with no snapshot (dropped and created again, empty): its
# index holds no document, and every snapshot the table gets is a change after it.
NO_SNAPSHOT = 0


@dataclass(frozen=True)
class Checkpoint:
    """The last snapshot of a table whose changes are all in the index, and their shape there."""

    table_uuid: str
    snapshot_id: int
    sequence_number: int
    schema_id: int = -1  # the schema the documents were written in; -1: not recorded
    identifier_columns: tuple[str, ...] = ()  # what their ids were made of
    # the OpenSearch index they are in (its settings' index.uuid); "": not recorded
    index_uuid: str = ""

    @property
    def token(self) -> str:
        """Names this checkpoint in the keys of the resync that replaces it.

        Every resync ends on a checkpoint that differs in one of these, so each gets its own keys.
        """
        parts: list[object] = [
            self.table_uuid,
            self.snapshot_id,
            self.schema_id,
            list(self.identifier_columns),
        ]
        # absent from checkpoints written before it was recorded: their tokens stay
        if self.index_uuid:
            parts.append(self.index_uuid)
        return sha256(json.dumps(parts))[:16]

    @property
    def recorded_identifiers(self) -> tuple[str, ...] | None:
        """The identifier columns the documents' ids were made of, or None when not recorded.

        Every pass records them together with the schema. A checkpoint without a schema, -1, is one
        no pass wrote: planning's base of a table not exported, or state older than both fields. Its
        () means unknown. With a schema, () means none: ids come from the rows' positions.
        """
        return self.identifier_columns if self.schema_id >= 0 else None

    def supersedes(self, item: AnyItem) -> bool:
        """True when the item's changes are in the index as of this checkpoint: retire it unread.

        It was applied by a run that crashed before marking it done, or replaced by a resync.
        """
        if item.resync:
            # A resync's export may be of the checkpoint's own snapshot (a schema change); it is
            # done once the checkpoint it replaces is no longer the current one.
            return item.replacing != self.token
        return item.table_uuid == self.table_uuid and item.sequence_number <= self.sequence_number


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()

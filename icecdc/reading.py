"""Reading the files of work items into change rows, Iceberg-aware, copy-on-write and merge-on-read.

The driver turns work items into tasks (metadata only: which file, insert or delete, which
sequence number, which delete files are in force). Executors read each file with pyiceberg's
`ArrowScan`: columns are matched by field ID, projected onto the current schema (a renamed column
reads right, a dropped one is gone, an added one is null), and identity-partition values come from
metadata. Each row becomes a document (see `documents.py`) keyed by its `_id`.

What a snapshot's files mean:
- a data file it added: INSERTs of its rows live at the snapshot (deletes in force applied);
- a data file it removed: DELETEs of its rows live just before (the parent's deletes applied);
- a position-delete file or deletion vector it added: DELETEs of the rows of the referenced data
  files that were live before and are not after — only newly deleted positions count, and a new
  vector that replaces an older one yields just the difference;
- an equality-delete file it added (on the identifier columns): a DELETE per key, no scan.

Consecutive copy-on-write commits of one pass collapse into one change (`_collapse`): files
added and removed within the run are never read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.io.pyarrow import ArrowScan, _read_deletes
from pyiceberg.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.delete_file_index import DeleteFileIndex, _referenced_data_file_path
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot

from icecdc.deadletters import DeadLetter, DeadLetters
from icecdc.documents import DocumentMapper, encode_document
from icecdc.errors import FilesGone, ProcessingError
from icecdc.planning import ChangedEntries
from icecdc.state import EXPORT, WorkItem

INSERT = "I"
DELETE = "D"
# The document of a delete by key (equality deletes): no row image, so it never cancels an insert.
NO_IMAGE = ""

# A change row as it crosses the shuffle: (document id, (sequence number, INSERT/DELETE, document JSON)).
Change = tuple[str, tuple[int, str, str]]


@dataclass(frozen=True)
class FileTask:
    """One data file to read, and what its rows mean."""

    data_file: DataFile
    change: str  # INSERT or DELETE
    sequence_number: int
    snapshot_id: int
    deletes: tuple[DataFile, ...] = ()  # delete files in force: the rows they remove are not read
    deletes_after: tuple[DataFile, ...] | None = None  # a delete diff: read only rows these remove and `deletes` keep


@dataclass(frozen=True)
class KeyDeleteTask:
    """An equality-delete file on the identifier columns: each of its rows deletes one key."""

    delete_file: DataFile
    sequence_number: int
    snapshot_id: int


@dataclass(frozen=True)
class RewriteTask:
    """The files one snapshot removed from and added to one partition, with no deletes in force:
    a copy-on-write rewrite. Read together so that unchanged rows cancel in Arrow, before Python."""

    removed: tuple[FileTask, ...]
    added: tuple[FileTask, ...]


Task = FileTask | KeyDeleteTask | RewriteTask


def files_read_by(task: Task) -> list[DataFile]:
    """Every data and delete file a task reads."""
    if isinstance(task, KeyDeleteTask):
        return [task.delete_file]
    if isinstance(task, RewriteTask):
        return [f for t in task.removed + task.added for f in files_read_by(t)]
    return [task.data_file, *task.deletes, *(task.deletes_after or ())]


def file_tasks(
    table: Table, items: Iterable[WorkItem], identifier_columns: tuple[str, ...] = (), changed: ChangedEntries | None = None
) -> list[Task]:
    """Resolve the items' paths to tasks through the manifests of their snapshots (metadata only).

    `changed`: the snapshots' entries, when planning in this process has read them already."""
    changed = changed or ChangedEntries()
    tasks: list[Task] = []
    # One snapshot's files serve as "after" for it and "before" for its child: load each once.
    loaded: dict[int | None, SnapshotFiles] = {}

    def files_of(snapshot: Snapshot | None) -> SnapshotFiles:
        key = snapshot.snapshot_id if snapshot is not None else None
        if key not in loaded:
            loaded[key] = SnapshotFiles(table, snapshot, changed)
        return loaded[key]

    run: list[tuple[Snapshot, list[FileTask]]] = []  # consecutive copy-on-write commits, collapsed into one change
    for snapshot_id, snapshot_items in _by_snapshot(items).items():
        snapshot = table.snapshot_by_id(snapshot_id)
        name = snapshot_items[0].table
        if snapshot is None:
            raise ProcessingError(f"table {name!r}: snapshot {snapshot_id} no longer exists")
        if snapshot_items[0].kind == EXPORT:
            snapshot_tasks = _export_tasks(snapshot, snapshot_items, files_of(snapshot))
        else:
            parent = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id is not None else None
            snapshot_tasks = _change_tasks(
                table, snapshot, snapshot_items, identifier_columns, files_of(parent), files_of(snapshot)
            )
        if snapshot_items[0].kind != EXPORT and _is_copy_on_write(snapshot_tasks, snapshot):
            run.append((snapshot, snapshot_tasks))
            continue
        tasks += _pair_rewrites(_collapse(run)) + _pair_rewrites(snapshot_tasks)
        run = []
    return tasks + _pair_rewrites(_collapse(run))


def _is_copy_on_write(tasks: list[Task], snapshot: Snapshot) -> TypeGuard[list[FileTask]]:
    """Whether a commit only removed and added whole data files, and added no delete files.

    A compaction (`replace`) is not: its files are never read, so it cannot link a run.
    """
    if snapshot.summary is not None and snapshot.summary.operation == Operation.REPLACE:
        return False
    return all(isinstance(t, FileTask) and t.deletes_after is None and (t.change == DELETE or not t.deletes) for t in tasks)


def _collapse(run: list[tuple[Snapshot, list[FileTask]]]) -> list[Task]:
    """A run of copy-on-write commits as one change at the run's last sequence number.

    The net change of a run is the rows of the files live before it that it removed against the
    rows of the files it added that are still live after it: a file added and removed within the
    run is never read. Hot files rewritten by commit after commit are read twice, not once per
    commit. All changes get the last commit's sequence number, so a key's DELETE (where it was)
    and INSERT (where it is) always pair, whichever partitions the run touched last; every
    version of the run is still above the previous pass's and below the next one's.
    """
    if len(run) <= 1:
        return [t for _, tasks in run for t in tasks]
    last = run[-1][0]
    added = {t.data_file.file_path for _, tasks in run for t in tasks if t.change == INSERT}
    removed = {t.data_file.file_path for _, tasks in run for t in tasks if t.change == DELETE}
    transient = added & removed
    return [
        replace(t, sequence_number=last.sequence_number, snapshot_id=last.snapshot_id)
        for _, tasks in run
        for t in tasks
        if t.data_file.file_path not in transient
    ]


def _by_snapshot(items: Iterable[WorkItem]) -> dict[int, list[WorkItem]]:
    """The items per snapshot, oldest snapshot first (a collapsed run ends at its newest)."""
    grouped: dict[int, list[WorkItem]] = {}
    for item in sorted(items, key=lambda i: (i.sequence_number, i.group)):
        grouped.setdefault(item.snapshot_id, []).append(item)
    return grouped


def _export_tasks(snapshot: Snapshot, items: list[WorkItem], files: SnapshotFiles) -> list[Task]:
    tasks: list[Task] = []
    for path in sorted({p for item in items for p in item.added_files}):
        entry = files.data_entry(path, items[0].table)
        tasks.append(FileTask(entry.data_file, INSERT, snapshot.sequence_number, snapshot.snapshot_id, files.deletes_for(entry)))
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
    wanted = {p for item in items for p in item.added_files + item.deleted_files + item.delete_files}
    seq, snapshot_id = snapshot.sequence_number, snapshot.snapshot_id
    tasks: list[Task] = []
    added_data: set[str] = set()
    row_deletes: list[DataFile] = []
    found: set[str] = set()
    # Not one entry per path: a Puffin file holds the deletion vectors of many data files, an entry each.
    for entry in after.own_entries():
        if entry.data_file.file_path not in wanted:
            continue
        found.add(entry.data_file.file_path)
        content, added = entry.data_file.content, entry.status == ManifestEntryStatus.ADDED
        if content == DataFileContent.DATA and added:
            added_data.add(entry.data_file.file_path)
            tasks.append(FileTask(entry.data_file, INSERT, seq, snapshot_id, after.deletes_for(entry)))
        elif content == DataFileContent.DATA:
            tasks.append(FileTask(entry.data_file, DELETE, seq, snapshot_id, before.deletes_for(entry)))
        elif content == DataFileContent.EQUALITY_DELETES and _on_columns(table, entry.data_file, identifier_columns):
            tasks.append(KeyDeleteTask(entry.data_file, seq, snapshot_id))
        else:
            # Position deletes and vectors, and equality deletes on other columns (e.g. the identifier
            # plus partition columns, as Flink writes them): resolved against the rows they touch.
            row_deletes.append(entry.data_file)
    if wanted - found:
        raise ProcessingError(f"table {name!r}: file {min(wanted - found)} of snapshot {snapshot_id} is not in its manifests")
    # Rows newly deleted: diff each touched data file's deletes in force before and after.
    for entry in after.data_files_touched_by(row_deletes):
        if entry.data_file.file_path not in added_data:  # an added file's inserts already had these applied
            tasks.append(FileTask(entry.data_file, DELETE, seq, snapshot_id, before.deletes_for(entry), after.deletes_for(entry)))
    return tasks


def _pair_rewrites(tasks: list[Task]) -> list[Task]:
    """Gather a snapshot's whole-file deletes and inserts of one partition into RewriteTasks."""
    by_partition: dict[tuple[int, str], list[FileTask]] = {}
    others: list[Task] = []
    for task in tasks:
        if isinstance(task, FileTask) and not task.deletes and task.deletes_after is None:
            by_partition.setdefault((task.data_file.spec_id, repr(task.data_file.partition)), []).append(task)
        else:
            others.append(task)
    for group in by_partition.values():
        removed = tuple(t for t in group if t.change == DELETE)
        added = tuple(t for t in group if t.change == INSERT)
        others += [RewriteTask(removed, added)] if removed and added else list(group)
    return others


class SnapshotFiles:
    """A snapshot's live data files and delete files in force, loaded from its manifests on first use."""

    def __init__(self, table: Table, snapshot: Snapshot | None, changed: ChangedEntries) -> None:
        self._table = table
        self._snapshot = snapshot
        self._changed = changed
        self._data: dict[str, ManifestEntry] | None = None
        self._positions: DeleteFileIndex | None = None
        self._equality: list[ManifestEntry] = []

    def own_entries(self) -> list[ManifestEntry]:
        """The entries this snapshot ADDED or DELETED (only in manifests it wrote)."""
        assert self._snapshot is not None
        return self._changed.of(self._table, self._snapshot)

    def data_entry(self, path: str, table_name: str) -> ManifestEntry:
        entry = self._live_data().get(path)
        if entry is None:
            raise ProcessingError(f"table {table_name!r}: data file {path} is not live in snapshot {self._snapshot_id}")
        return entry

    def deletes_for(self, entry: ManifestEntry) -> tuple[DataFile, ...]:
        """The delete files in force for a data file: position deletes and vectors, and equality
        deletes of a higher sequence number in its partition (or unpartitioned)."""
        self._load_deletes()
        assert self._positions is not None
        data_file, data_seq = entry.data_file, entry.sequence_number or 0
        positions = self._positions.for_data_file(data_seq, data_file, partition_key=data_file.partition)
        equality = [
            e.data_file
            for e in self._equality
            if (e.sequence_number or 0) > data_seq
            and (_is_global(self._table, e.data_file) or _same_partition(e.data_file, data_file))
        ]
        return tuple(sorted(positions, key=lambda f: f.file_path)) + tuple(equality)

    def data_files_touched_by(self, delete_files: list[DataFile]) -> list[ManifestEntry]:
        """Live data files that delete files may remove rows of: the referenced file when the
        delete file names one, else every file of its partition (every file, for a global one)."""
        if not delete_files:
            return []  # no need to read the data manifests
        touched: dict[str, ManifestEntry] = {}
        live = self._live_data()
        for delete_file in delete_files:
            # pyiceberg 0.12 does not expose a deletion vector's referenced_data_file; the path bounds
            # name the file for file-scoped deletes, and a partition-scoped file touches its partition.
            referenced = getattr(delete_file, "referenced_data_file", None) or _referenced_data_file_path(delete_file)
            if referenced is not None:
                if referenced in live:
                    touched[referenced] = live[referenced]
                continue
            for path, entry in live.items():
                if _is_global(self._table, delete_file) or _same_partition(delete_file, entry.data_file):
                    touched[path] = entry
        return [touched[p] for p in sorted(touched)]

    @property
    def _snapshot_id(self) -> int | None:
        return self._snapshot.snapshot_id if self._snapshot else None

    def _entries(self, content: ManifestContent) -> Iterator[ManifestEntry]:
        if self._snapshot is None:
            return
        for manifest in self._snapshot.manifests(self._table.io):
            if manifest.content == content:
                yield from manifest.fetch_manifest_entry(self._table.io, discard_deleted=True)

    def _live_data(self) -> dict[str, ManifestEntry]:
        if self._data is None:
            self._data = {e.data_file.file_path: e for e in self._entries(ManifestContent.DATA)}
        return self._data

    def _load_deletes(self) -> None:
        if self._positions is not None:
            return
        self._positions = DeleteFileIndex()
        for entry in self._entries(ManifestContent.DELETES):
            if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
                self._equality.append(entry)
            else:
                self._positions.add_delete_file(entry, partition_key=entry.data_file.partition)


def _on_columns(table: Table, delete_file: DataFile, columns: tuple[str, ...]) -> bool:
    """Whether an equality-delete file's fields are exactly these columns."""
    schema = table.schema()
    return bool(columns) and set(delete_file.equality_ids or ()) == {schema.find_field(c).field_id for c in columns}


def _is_global(table: Table, delete_file: DataFile) -> bool:
    return table.specs()[delete_file.spec_id].is_unpartitioned()


def _same_partition(a: DataFile, b: DataFile) -> bool:
    return a.spec_id == b.spec_id and a.partition == b.partition


@dataclass(frozen=True)
class TableReader:
    """What an executor needs to read a table's files; small and picklable."""

    table_name: str
    metadata: TableMetadata  # pickled as is: pyiceberg 0.12 cannot write v3 metadata as JSON
    io_properties: dict[str, str]
    identifier_columns: tuple[str, ...]
    dead_letter: str | None = None  # where rows that cannot become documents go; None: they fail the batch

    @classmethod
    def for_table(
        cls, table: Table, name: str, identifier_columns: tuple[str, ...], dead_letter: str | None = None
    ) -> TableReader:
        return cls(name, table.metadata, dict(table.io.properties), identifier_columns, dead_letter)

    def read(self, tasks: Iterable[Task], carried: Any = None, dead_lettered: Any = None) -> Iterator[Change]:
        """Every change the tasks' files carry, keyed by document id.

        `carried` (a Spark accumulator, or None) counts the carryover pairs dropped here, before the shuffle;
        `dead_lettered` (likewise) the rows that could not become documents.
        """
        files = _Files.open(self)
        unreadable: list[DeadLetter] = []
        dropped = 0
        try:
            for task in tasks:
                if isinstance(task, KeyDeleteTask):
                    yield from self._key_deletes(files, task, unreadable)
                elif isinstance(task, RewriteTask):
                    changes, pairs = self._rewrite_changes(files, task, unreadable)
                    dropped += pairs
                    yield from changes
                else:
                    yield from self._file_changes(files, task, unreadable)
        except FileNotFoundError as exc:
            raise FilesGone(f"table {self.table_name!r}: a file of the batch is gone (expired?): {exc}") from None
        if carried is not None:
            carried.add(dropped)
        if unreadable:
            assert self.dead_letter is not None
            DeadLetters(self.dead_letter).write(unreadable)
            if dead_lettered is not None:
                dead_lettered.add(len(unreadable))

    def _file_changes(self, files: _Files, task: FileTask, unreadable: list[DeadLetter]) -> Iterator[Change]:
        removed_before = _RemovedRows.load(files, task.data_file, task.deletes)
        removed_after = _RemovedRows.load(files, task.data_file, task.deletes_after) if task.deletes_after is not None else None
        file_key = hashlib.sha256(task.data_file.file_path.encode()).hexdigest()[:16]
        for position, row in files.rows(task.data_file):
            if removed_before.removes(position, row) or (removed_after is not None and not removed_after.removes(position, row)):
                continue
            if isinstance(row, BadText):
                self._unreadable(task, f"column {row.column!r} is not valid UTF-8", None, unreadable)
                continue
            fields = files.mapper.document(row)
            document = encode_document(fields)
            if self.identifier_columns:
                doc_id = self._document_id(files.mapper, fields, document, task, unreadable)
            else:
                # Insert-only tables: the row's place in its file names it (compactions are never read).
                doc_id = f"{file_key}-{position}"
            if doc_id is not None:
                yield doc_id, (task.sequence_number, task.change, document)

    def _rewrite_changes(self, files: _Files, task: RewriteTask, unreadable: list[DeadLetter]) -> tuple[Iterable[Change], int]:
        """The rows a rewrite changed, and how many unchanged pairs it dropped.

        Rows equal in every column cancel pairwise (a multiset difference by Arrow's group-by), so
        only changed rows reach Python. Types Arrow cannot group by (structs, lists, maps) take the
        row-by-row path, where carryovers cancel after the shuffle instead.
        """
        removed = files.table([t.data_file for t in task.removed])
        added = files.table([t.data_file for t in task.added])
        try:
            removed_rows, added_rows, pairs = _cancel_equal_rows(removed, added)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return (c for t in task.removed + task.added for c in self._file_changes(files, t, unreadable)), 0
        changes = [
            change
            for rows, side in ((removed_rows, task.removed), (added_rows, task.added))
            for change in self._row_changes(files, _python_rows(rows), side, unreadable)
        ]
        return changes, pairs

    def _row_changes(
        self, files: _Files, rows: Iterable[dict[str, Any] | BadText], side: list[FileTask], unreadable: list[DeadLetter]
    ) -> Iterator[Change]:
        """Changes of rows read from the files of one side of a rewrite (which file each came from is not kept)."""
        task, paths = side[0], " or ".join(sorted(t.data_file.file_path for t in side))
        for row in rows:
            if isinstance(row, BadText):
                self._unreadable(task, f"column {row.column!r} is not valid UTF-8", None, unreadable, paths)
                continue
            fields = files.mapper.document(row)
            document = encode_document(fields)
            doc_id = self._document_id(files.mapper, fields, document, task, unreadable, paths)
            if doc_id is not None:
                yield doc_id, (task.sequence_number, task.change, document)

    def _key_deletes(self, files: _Files, task: KeyDeleteTask, unreadable: list[DeadLetter]) -> Iterator[Change]:
        for _, row in files.rows(task.delete_file, files.schema.select(*self.identifier_columns)):
            if isinstance(row, BadText):
                self._unreadable(task, f"column {row.column!r} is not valid UTF-8", None, unreadable)
                continue
            fields = files.mapper.document(row)
            doc_id = self._document_id(files.mapper, fields, encode_document(fields), task, unreadable)
            if doc_id is not None:
                yield doc_id, (task.sequence_number, DELETE, NO_IMAGE)

    def _document_id(
        self,
        mapper: DocumentMapper,
        fields: dict,
        document: str,
        task: FileTask | KeyDeleteTask,
        unreadable: list[DeadLetter],
        paths: str | None = None,
    ) -> str | None:
        """The document's `_id`; None (and a dead letter) when its identifier is null."""
        try:
            return mapper.document_id(fields)
        except ValueError as exc:
            self._unreadable(task, str(exc), document, unreadable, paths)
            return None

    def _unreadable(
        self,
        task: FileTask | KeyDeleteTask,
        problem: str,
        document: str | None,
        unreadable: list[DeadLetter],
        paths: str | None = None,
    ) -> None:
        """A row that cannot become a document: a dead letter naming where it is, or, without a
        dead-letter location, an error that stops the batch."""
        paths = paths or (task.delete_file.file_path if isinstance(task, KeyDeleteTask) else task.data_file.file_path)
        reason = f"{problem} in file {paths} (snapshot {task.snapshot_id})"
        if self.dead_letter is None:
            raise ProcessingError(f"table {self.table_name!r}: {reason}")
        unreadable.append(DeadLetter(self.table_name, task.snapshot_id, task.sequence_number, None, None, reason, document))


@dataclass
class _Files:
    """An executor's handle on the table's files: metadata, FileIO and the document mapper."""

    metadata: TableMetadata
    io: FileIO
    schema: Schema
    mapper: DocumentMapper

    @classmethod
    def open(cls, reader: TableReader) -> _Files:
        metadata = reader.metadata
        schema = metadata.schema()
        return cls(
            metadata,
            load_file_io(reader.io_properties, metadata.location),
            schema,
            DocumentMapper(schema, reader.identifier_columns),
        )

    def table(self, data_files: list[DataFile]) -> pa.Table:
        """Every row of the files, deletes NOT applied, projected onto the current schema by field ID."""
        return ArrowScan(self.metadata, self.io, self.schema, AlwaysTrue()).to_table([FileScanTask(f) for f in data_files])

    def rows(self, data_file: DataFile, schema: Schema | None = None) -> Iterator[tuple[int, dict[str, Any] | BadText]]:
        """(position, row) of every row of the file, deletes NOT applied, projected onto `schema` by field ID."""
        scan = ArrowScan(self.metadata, self.io, schema or self.schema, AlwaysTrue())
        position = 0
        for batch in scan.to_record_batches([FileScanTask(data_file)]):
            for row in _python_rows(batch):
                yield position, row
                position += 1


@dataclass(frozen=True)
class BadText:
    """A row in place of which only this can be said: its `column` holds a string that is not UTF-8."""

    column: str


def _python_rows(data: pa.Table | pa.RecordBatch) -> Iterator[dict[str, Any] | BadText]:
    """The rows as dicts, and a `BadText` for a row with a string that is not valid UTF-8.

    Arrow does not validate the strings it reads from Parquet (Spark writes whatever bytes a
    string holds), and converting them to Python fails for the whole batch; only a batch that
    fails is converted again row by row, to find the rows and the column."""
    try:
        rows = data.to_pylist()
    except UnicodeDecodeError:
        for i in range(data.num_rows):
            row = data.slice(i, 1)
            try:
                yield row.to_pylist()[0]
            except UnicodeDecodeError:
                yield BadText(next(name for name in row.column_names if _undecodable(row.column(name))))
        return
    yield from rows


def _undecodable(column: pa.ChunkedArray | pa.Array) -> bool:
    try:
        column.to_pylist()
    except UnicodeDecodeError:
        return True
    return False


@dataclass
class _RemovedRows:
    """Which rows of one data file a set of delete files removes: by position, or by equal values."""

    positions: set[int] = field(default_factory=set)
    equality: list[tuple[tuple[str, ...], set[tuple[Any, ...]]]] = field(default_factory=list)

    @classmethod
    def load(cls, files: _Files, data_file: DataFile, delete_files: Iterable[DataFile]) -> _RemovedRows:
        removed = cls()
        for delete_file in {d.file_path: d for d in delete_files}.values():  # a Puffin file once, for all its vectors
            if delete_file.content == DataFileContent.EQUALITY_DELETES:
                names = tuple(files.schema.find_column_name(i) for i in delete_file.equality_ids or ())
                values = {
                    tuple(row[n] for n in names)
                    for _, row in files.rows(delete_file, files.schema.select(*names))
                    if not isinstance(row, BadText)  # equal to no row that can become a document
                }
                removed.equality.append((names, values))
            else:
                # pyiceberg reads position-delete files and deletion vectors (Puffin) alike.
                deleted = _read_deletes(files.io, delete_file).get(data_file.file_path)
                if deleted is not None:
                    removed.positions.update(deleted.to_pylist())
        return removed

    def removes(self, position: int, row: dict[str, Any] | BadText) -> bool:
        if position in self.positions:
            return True
        if isinstance(row, BadText):
            return False  # its values cannot be compared; it becomes a dead letter, deleted or not
        return any(tuple(row[n] for n in names) in values for names, values in self.equality)


def _cancel_equal_rows(removed: pa.Table, added: pa.Table) -> tuple[pa.Table, pa.Table, int]:
    """(removed rows, added rows, pairs dropped): rows equal in every column cancel pairwise."""
    columns = removed.column_names
    both = pa.concat_tables(
        [
            removed.append_column("__removed", _ones(removed.num_rows)).append_column("__added", _zeros(removed.num_rows)),
            added.append_column("__removed", _zeros(added.num_rows)).append_column("__added", _ones(added.num_rows)),
        ]
    )
    counts = both.group_by(columns, use_threads=False).aggregate([("__removed", "sum"), ("__added", "sum")])
    excess = pc.subtract(counts["__removed_sum"], counts["__added_sum"]).to_pylist()
    pairs = pc.sum(pc.min_element_wise(counts["__removed_sum"], counts["__added_sum"])).as_py() or 0
    keep_removed = [i for i, n in enumerate(excess) if n > 0 for _ in range(n)]
    keep_added = [i for i, n in enumerate(excess) if n < 0 for _ in range(-n)]
    rows = counts.select(columns)
    return rows.take(pa.array(keep_removed, pa.int64())), rows.take(pa.array(keep_added, pa.int64())), pairs


def _ones(n: int) -> pa.Array:
    return pa.nulls(n, pa.int64()).fill_null(1)


def _zeros(n: int) -> pa.Array:
    return pa.nulls(n, pa.int64()).fill_null(0)

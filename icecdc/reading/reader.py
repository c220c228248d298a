"""Executor side of reading: tasks to files to change rows keyed by document id.

Files are read with pyiceberg's `ArrowScan`: columns are matched by field ID and projected onto the
current schema; identity-partition values come from metadata. Each row the index's shape holds, by
its `where`, becomes a document of the shape's columns (see `documents.py`). A row that leaves the
filter is then a DELETE alone, and one that enters it an INSERT alone. A reader of several indexes
of the table reads each file once, and keys each index's changes `<position><id>` (`index_key`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Container, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression
from pyiceberg.expressions.visitors import bind
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.io.pyarrow import ArrowScan, expression_to_pyarrow, schema_to_pyarrow
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import IcebergType, UUIDType

from icecdc.compat import read_position_deletes
from icecdc.deadletters import DeadLetter, DeadLetters, LetterTally
from icecdc.documents import BadIdentifier, DocumentMapper, Shape, encode_document
from icecdc.errors import FilesGone, ProcessingError, UnreadableFile
from icecdc.model import Change, ChangeRow, ChangeType, key_image
from icecdc.reading.tasks import DealtRewrite, FileTask, KeyDeleteTask, KeyRange, RewriteTask, Task

_Read = TypeVar("_Read")  # what reading a file yields: batches, or its position deletes


class Located(NamedTuple):
    """A row of an export and where it is: its task's number in the pass, its place in the file."""

    task: int
    position: int
    doc_id: str
    sequence_number: int
    document: str
    # the document's routing value (the index's shape's `routing`); None: by `_id`
    routing: str | None


@dataclass(frozen=True)
class TableReader:
    """What an executor needs to read a table's files; small and picklable."""

    table_name: str
    metadata: TableMetadata  # pickled as is: pyiceberg 0.12 cannot write v3 metadata as JSON
    io_properties: dict[str, str]
    identifier_columns: tuple[str, ...]
    # where rows that cannot become documents go; None: they fail the batch
    dead_letter: str | None = None
    shapes: tuple[Shape, ...] = (Shape(),)  # the columns and rows of the table each index holds
    # Rows that cannot become documents neither go to `dead_letter` nor fail:
    # `read` appends their letters to the list given as its `dead_lettered` (the
    # operators' lookups decide what they are).
    collect: bool = False

    @classmethod
    def for_table(
        cls,
        table: Table,
        name: str,
        identifier_columns: tuple[str, ...],
        dead_letter: str | None = None,
        shapes: tuple[Shape, ...] = (Shape(),),
        collect: bool = False,
    ) -> TableReader:
        return cls(
            name,
            table.metadata,
            dict(table.io.properties),
            identifier_columns,
            dead_letter,
            shapes,
            collect,
        )

    def read(
        self, tasks: Iterable[Task], carried: Any = None, dead_lettered: Any = None
    ) -> Iterator[Change]:
        """Every change the tasks' files carry, keyed by document id.

        `carried` (a Spark accumulator, or None) counts the carryover pairs dropped
        here, before the shuffle; `dead_lettered` (likewise, of a `LetterTally`) the
        rows that could not become documents."""
        files = _Files.open(self)
        unreadable: list[DeadLetter] = []
        dropped = 0
        with self._reading(unreadable, dead_lettered):
            for task in tasks:
                if isinstance(task, KeyDeleteTask):
                    yield from self._key_deletes(files, task, unreadable)
                elif isinstance(task, RewriteTask | DealtRewrite):
                    for rewrite in task.range_tasks() if isinstance(task, DealtRewrite) else [task]:
                        changes, pairs = self._rewrite_changes(files, rewrite, unreadable)
                        dropped += pairs
                        yield from changes
                else:
                    yield from self._file_changes(files, task, unreadable)
        if carried is not None:
            carried.add(dropped)

    def located(
        self,
        tasks: Iterable[tuple[int, FileTask]],
        dead_lettered: Any = None,
        positions: Container[int] | None = None,
        letters: bool = True,
    ) -> Iterator[Located]:
        """Every row the numbered tasks' files carry, with where it is: an export's rows.

        Each row is written by the task that reads it. With `positions`, only the rows
        at those positions. An export writes one index: a reader of several indexes
        refuses. `letters` is False when the rows are read again, as an earlier pass
        dead-lettered those that cannot become documents.
        """
        if len(self.shapes) != 1:
            raise ProcessingError(
                f"table {self.table_name!r}: an export reads for one index, not {len(self.shapes)}"
            )
        files = _Files.open(self)
        unreadable: list[DeadLetter] = []
        with self._reading(unreadable if letters else [], dead_lettered):
            for number, task in tasks:
                for position, doc_id, document, routing in self._file_rows(
                    files, task, unreadable, positions
                ):
                    yield Located(number, position, doc_id, task.sequence_number, document, routing)

    def deal(
        self, task: DealtRewrite, file_task: FileTask, dead_lettered: Any = None
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """Each row of one of `task`'s files, read once, with the number of the range it falls in.

        The ranges cover every key and null, so each row is dealt to exactly one range.
        """
        files = _Files.open(self)
        in_range = [files.range_filter(key_range) for key_range in task.ranges]
        with self._reading([], dead_lettered):
            for batch in files.batches([file_task.data_file]):
                for number, held in enumerate(in_range):
                    rows = batch.filter(held)
                    if rows.num_rows:
                        yield number, rows

    def read_range(
        self,
        task: DealtRewrite,
        number: int,
        removed: Iterable[pa.RecordBatch],
        added: Iterable[pa.RecordBatch],
        carried: Any = None,
        dead_lettered: Any = None,
    ) -> Iterator[Change]:
        """The changes of range `number` of `task`, from the rows the files dealt it in `deal`.

        They are read as a `RewriteTask` of that range reads them, without decoding the files again.
        """
        files = _Files.open(self)
        unreadable: list[DeadLetter] = []
        rewrite = RewriteTask(task.removed, task.added, task.ranges[number])
        with self._reading(unreadable, dead_lettered):
            changes, pairs = self._changes_of_rewrite(
                files, rewrite, files.joined(removed), files.joined(added), unreadable
            )
            yield from changes
        if carried is not None:
            carried.add(pairs)

    @contextmanager
    def _reading(self, unreadable: list[DeadLetter], dead_lettered: Any) -> Iterator[None]:
        """Name a file gone as such, and at the end write the rows that could not become documents.

        Those rows go to the dead letters, and are counted by cause in `dead_lettered`: a Spark
        accumulator of a `LetterTally`, or None.
        """
        try:
            yield
        except FileNotFoundError as exc:
            raise FilesGone(
                f"table {self.table_name!r}: a file of the batch is missing: {exc}"
            ) from None
        if unreadable and self.collect:
            dead_lettered.extend(unreadable)
        elif unreadable:
            assert self.dead_letter is not None
            DeadLetters(self.dead_letter).write(unreadable)
            if dead_lettered is not None:
                dead_lettered.add(LetterTally.of(unreadable))

    def _file_changes(
        self, files: _Files, task: FileTask, unreadable: list[DeadLetter]
    ) -> Iterator[Change]:
        for _, doc_id, document, _ in self._file_rows(files, task, unreadable):
            yield doc_id, ChangeRow(task.sequence_number, task.change, document)

    def _file_rows(
        self,
        files: _Files,
        task: FileTask,
        unreadable: list[DeadLetter],
        positions: Container[int] | None = None,
    ) -> Iterator[tuple[int, str, str, str | None]]:
        """Position, key, document and routing value of each of the file's rows the task reads.

        A row comes once for each index that holds it, as its `where` says. The key is the document
        id, or `index_key`'s for several indexes. The routing value is the document's under its
        index's shape (`Shape.routing_of`).
        """
        removed_before = _RemovedRows.load(files, task.data_file, task.deletes)
        removed_after = (
            _RemovedRows.load(files, task.data_file, task.deletes_after)
            if task.deletes_after is not None
            else None
        )
        file_key = hashlib.sha256(task.data_file.file_path.encode()).hexdigest()[:16]
        # most files: no deletes to look up
        every_row = removed_before.removes_nothing and removed_after is None
        for position, row, views in files.held_rows(task.data_file):
            if positions is not None and position not in positions:
                continue
            if not every_row and (
                removed_before.removes(position, row)
                or (removed_after is not None and not removed_after.removes(position, row))
            ):
                continue
            if isinstance(row, BadText):
                self._unreadable(
                    task, f"column {row.column!r} is not valid UTF-8", None, unreadable
                )
                continue
            for view in views:
                fields = view.mapper.document(row)
                document = encode_document(fields)
                if self.identifier_columns:
                    doc_id = self._document_id(
                        view.mapper, view.mapper.key_fields(row, fields), document, task, unreadable
                    )
                else:
                    # Insert-only tables: the row's place in its file names it
                    # (compactions are never read).
                    doc_id = f"{file_key}-{position}"
                if doc_id is not None:
                    yield position, view.key(doc_id), document, view.shape.routing_of(fields)

    def _rewrite_changes(
        self, files: _Files, task: RewriteTask, unreadable: list[DeadLetter]
    ) -> tuple[Iterable[Change], int]:
        """The rows a rewrite changed, and how many unchanged pairs it dropped.

        Rows equal in every column cancel pairwise (a multiset difference by Arrow's group-by), so
        only changed rows reach Python. Types Arrow cannot group by (structs, lists, maps) take the
        row-by-row path, where carryovers cancel after the shuffle instead.
        """
        removed = files.table([t.data_file for t in task.removed], task.key_range)
        added = files.table([t.data_file for t in task.added], task.key_range)
        return self._changes_of_rewrite(files, task, removed, added, unreadable)

    def _changes_of_rewrite(
        self,
        files: _Files,
        task: RewriteTask,
        removed: pa.Table,
        added: pa.Table,
        unreadable: list[DeadLetter],
    ) -> tuple[Iterable[Change], int]:
        """`_rewrite_changes` of the rows read: `removed` and `added` in one Arrow schema."""
        changes: list[Change] = []
        pairs = 0
        for view in files.views:
            try:
                removed_rows, added_rows, cancelled = _cancel_equal_rows(
                    files.narrow(view, removed), files.narrow(view, added)
                )
            except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
                if task.key_range is None:  # read again file by file: rows cancel after the shuffle
                    return (
                        c
                        for t in task.removed + task.added
                        for c in self._file_changes(files, t, unreadable)
                    ), 0
                # only the range's rows, as read: they cancel after the shuffle
                removed_rows, added_rows, cancelled = (
                    files.narrow(view, removed),
                    files.narrow(view, added),
                    0,
                )
            pairs += cancelled
            changes += [
                change
                for rows, side in ((removed_rows, task.removed), (added_rows, task.added))
                for change in self._row_changes(view, _python_rows(rows), side, unreadable)
            ]
        return changes, pairs

    def _row_changes(
        self,
        view: _View,
        rows: Iterable[dict[str, Any] | BadText],
        side: tuple[FileTask, ...],
        unreadable: list[DeadLetter],
    ) -> Iterator[Change]:
        """Changes of the rows read from the files of one side of a rewrite.

        Which file each row came from is not kept.
        """
        task, paths = side[0], " or ".join(sorted(t.data_file.file_path for t in side))
        for row in rows:
            if isinstance(row, BadText):
                self._unreadable(
                    task, f"column {row.column!r} is not valid UTF-8", None, unreadable, paths
                )
                continue
            fields = view.mapper.document(row)
            document = encode_document(fields)
            doc_id = self._document_id(
                view.mapper, view.mapper.key_fields(row, fields), document, task, unreadable, paths
            )
            if doc_id is not None:
                yield view.key(doc_id), ChangeRow(task.sequence_number, task.change, document)

    def _key_deletes(
        self, files: _Files, task: KeyDeleteTask, unreadable: list[DeadLetter]
    ) -> Iterator[Change]:
        for _, row in files.rows(task.delete_file, files.schema.select(*self.identifier_columns)):
            if isinstance(row, BadText):
                self._unreadable(
                    task, f"column {row.column!r} is not valid UTF-8", None, unreadable
                )
                continue
            fields = files.keys.document(row)
            doc_id = self._document_id(
                files.keys, fields, encode_document(fields), task, unreadable
            )
            if doc_id is not None:
                # a routing column among the key's: the delete knows its routing
                for view in files.views:
                    image = key_image(view.shape.routing_of(fields))
                    yield (
                        view.key(doc_id),
                        ChangeRow(task.sequence_number, ChangeType.DELETE, image),
                    )

    def _document_id(
        self,
        mapper: DocumentMapper,
        fields: dict[str, Any],
        document: str,
        task: FileTask | KeyDeleteTask,
        unreadable: list[DeadLetter],
        paths: str | None = None,
    ) -> str | None:
        """The document's `_id`, or None and a dead letter when its identifier cannot be one.

        An identifier that is null, empty or too long cannot. A delete of such a row is dropped
        without a letter: no document has its id.
        """
        try:
            return mapper.document_id(fields)
        except BadIdentifier as exc:
            if isinstance(task, KeyDeleteTask) or task.change == ChangeType.DELETE:
                return None
            self._unreadable(task, str(exc), document, unreadable, paths, exc.cause)
            return None

    def _unreadable(
        self,
        task: FileTask | KeyDeleteTask,
        problem: str,
        document: str | None,
        unreadable: list[DeadLetter],
        paths: str | None = None,
        cause: str | None = None,
    ) -> None:
        """A row that cannot become a document: a dead letter naming where it is, or an error.

        Without a dead-letter location the error stops the batch. `cause` is the problem without the
        row's values, or the problem itself when it has none.
        """
        paths = paths or (
            task.delete_file.file_path
            if isinstance(task, KeyDeleteTask)
            else task.data_file.file_path
        )
        reason = f"{problem} in file {paths} (snapshot {task.snapshot_id})"
        if self.dead_letter is None and not self.collect:
            raise ProcessingError(f"table {self.table_name!r}: {reason}")
        where = (self.table_name, task.snapshot_id, task.sequence_number)
        unreadable.append(DeadLetter(*where, None, None, reason, document, cause=cause or problem))


# Between an index's position and a document id in the keys of a reader of several indexes.
INDEX_SEPARATOR = "\x1f"


def index_key(position: int, doc_id: str) -> str:
    """The key of a change of the index at `position` among several a reader serves."""
    return f"{position}{INDEX_SEPARATOR}{doc_id}"


@dataclass(frozen=True)
class _View:
    """One index's view of the rows read: its documents, what of each row it reads, its filter."""

    position: int  # among the reader's indexes; -1 when it serves one, whose keys are the ids alone
    shape: Shape
    mapper: DocumentMapper
    # the top-level columns of its read schema: what its rewrite rows are compared on
    columns: list[str]
    held: pc.Expression | None  # the shape's `where` as an Arrow filter; None: every row

    def key(self, doc_id: str) -> str:
        return doc_id if self.position < 0 else index_key(self.position, doc_id)


@dataclass
class _Files:
    """An executor's handle on the table's files: metadata, FileIO and each index's view."""

    table_name: str
    metadata: TableMetadata
    io: FileIO
    schema: Schema
    views: list[_View]
    keys: DocumentMapper  # documents of the identifier columns alone: a delete by key's
    read_schema: (
        # what of each row a rewrite reads: one index's documents' and identifier
        # columns; every column for several
        Schema
    )
    arrow_schema: pa.Schema  # the table's one Arrow schema: pyiceberg's of `read_schema`
    # pushed down to the scans of a rewrite: one index's `where`; AlwaysTrue for several
    where: BooleanExpression

    @classmethod
    def open(cls, reader: TableReader) -> _Files:
        metadata = reader.metadata
        schema, ids, shapes = metadata.schema(), reader.identifier_columns, reader.shapes
        one = len(shapes) == 1
        read_schema = shapes[0].read_schema(schema, ids) if one else schema
        views = [
            _View(
                -1 if one else position,
                shape,
                DocumentMapper(schema, ids, shape),
                [f.name for f in shape.read_schema(schema, ids).fields],
                None
                if shape.where is None
                else expression_to_pyarrow(
                    bind(schema, shape.row_filter, case_sensitive=True), schema
                ),
            )
            for position, shape in enumerate(shapes)
        ]
        return cls(
            reader.table_name,
            metadata,
            load_file_io(reader.io_properties, metadata.location),
            schema,
            views,
            DocumentMapper(schema, ids, Shape(ids or None)),
            read_schema,
            schema_to_pyarrow(read_schema, include_field_ids=False),
            shapes[0].row_filter if one else AlwaysTrue(),
        )

    def table(self, data_files: list[DataFile], key_range: KeyRange | None) -> pa.Table:
        """The files' rows in `key_range`, deletes NOT applied, in the table's one Arrow schema.

        Without a key range, all rows. The rows are projected onto `read_schema` by field ID. For
        one index, only the rows it holds: its `where`, pushed down.

        A file comes back in the Arrow types of its writer: Spark's `string`, a polars frame's
        `large_string`, and `binary` and `list` likewise. pyiceberg answers no rows in its own large
        types. So tables of two sides or two files are combined only once cast to one schema.
        """
        pushed = key_range is not None and _pushable(
            self.schema.find_field(key_range.column).field_type
        )
        row_filter: BooleanExpression = (
            key_range.row_filter() if key_range is not None and pushed else AlwaysTrue()
        )
        batches = self.batches(data_files, row_filter)
        if key_range is not None and not pushed:
            batches = (b.filter(_arrow_range(key_range)) for b in batches)
        return self.joined(batches)

    def batches(
        self, data_files: list[DataFile], row_filter: BooleanExpression | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The files' rows in `row_filter` as `table` reads them, a batch at a time.

        The batches are in the table's one Arrow schema.
        """
        where = self.where if row_filter is None else And(row_filter, self.where)
        scan = ArrowScan(self.metadata, self.io, self.read_schema, where)
        for data_file in data_files:
            batches = self.named(data_file, scan.to_record_batches([FileScanTask(data_file)]))
            yield from (b.cast(self.arrow_schema) for b in batches)

    def named(self, data_file: DataFile, read: Iterable[_Read]) -> Iterator[_Read]:
        """What reading `data_file` yields; a failure to read it names the table and the file.

        A file not there is `FilesGone`; one there that cannot be read, `UnreadableFile`.
        """
        kind = "data" if data_file.content == DataFileContent.DATA else "delete"
        try:
            yield from read
        except FileNotFoundError:
            raise FilesGone(
                f"table {self.table_name!r}: {kind} file {data_file.file_path} is missing",
                data_file.file_path,
            ) from None
        except (OSError, pa.ArrowException) as exc:
            detail = "; ".join(line for line in str(exc).splitlines() if line.strip())
            raise UnreadableFile(
                f"table {self.table_name!r}: {kind} file {data_file.file_path} is corrupt or "
                f"unreadable ({detail}); nothing was advanced: if the file is damaged, replace it "
                "or remove it from the table"
            ) from None

    def joined(self, batches: Iterable[pa.RecordBatch]) -> pa.Table:
        return pa.Table.from_batches(list(batches), schema=self.arrow_schema)

    def range_filter(self, key_range: KeyRange) -> pc.Expression:
        """The range as an Arrow filter of the rows `batches` reads.

        That is a scan's own push-down, or a filter on a uuid's bytes.
        """
        if not _pushable(self.schema.find_field(key_range.column).field_type):
            return _arrow_range(key_range)
        return expression_to_pyarrow(
            bind(self.schema, key_range.row_filter(), case_sensitive=True), self.schema
        )

    def narrow(self, view: _View, rows: pa.Table) -> pa.Table:
        """A rewrite's rows as one of several indexes compares them.

        That is the rows it holds, in its columns.
        """
        if len(self.views) == 1:
            return rows  # read so already
        held = rows if view.held is None else rows.filter(view.held)
        return held.select(view.columns)

    def rows(
        self, data_file: DataFile, schema: Schema | None = None
    ) -> Iterator[tuple[int, dict[str, Any] | BadText]]:
        """Position and row of every row of the file, deletes NOT applied, projected by field ID.

        The rows are projected onto `schema`.
        """
        for position, row, _ in self._rows(data_file, schema, held=False):
            yield position, row

    def held_rows(
        self, data_file: DataFile
    ) -> Iterator[tuple[int, dict[str, Any] | BadText, list[_View]]]:
        """Position, row and holding views of every row of the file some index holds.

        Deletes are NOT applied; the rows are projected onto the current schema.
        """
        for position, row, views in self._rows(data_file, None, held=True):
            if views:
                yield position, row, views

    def _rows(
        self, data_file: DataFile, schema: Schema | None, held: bool
    ) -> Iterator[tuple[int, dict[str, Any] | BadText, list[_View]]]:
        scan = ArrowScan(self.metadata, self.io, schema or self.schema, AlwaysTrue())
        position = 0
        every_view = list(self.views) if held else []
        filtered = held and any(v.held is not None for v in self.views)
        for batch in self.named(data_file, scan.to_record_batches([FileScanTask(data_file)])):
            matching = (
                [(v, None if v.held is None else _matching(batch, v.held)) for v in self.views]
                if filtered
                else []
            )
            for i, row in enumerate(_python_rows(batch)):
                # The same list for every row when no view filters rows (most
                # reads): none built per row.
                yield (
                    position,
                    row,
                    [v for v, rows in matching if rows is None or i in rows]
                    if filtered
                    else every_view,
                )
                position += 1


def _matching(batch: pa.RecordBatch, where: pc.Expression) -> set[int]:
    """The positions in `batch` of the rows `where` is true of.

    Null is false, as in a table scan.
    """
    numbered = pa.Table.from_batches([batch]).append_column(
        "__position", pa.array(range(batch.num_rows), pa.int64())
    )
    return set(numbered.filter(where).column("__position").to_pylist())


def _pushable(key_type: IcebergType) -> bool:
    """Whether pyiceberg can push a range of this type down to Arrow.

    A uuid it cannot: pyiceberg hands it to Arrow as an extension type no comparison kernel takes.
    """
    return not isinstance(key_type, UUIDType)


def _arrow_range(key_range: KeyRange) -> pc.Expression:
    """The range as an Arrow filter on a uuid column's 16 bytes, whichever way the file stores them.

    A file stores a uuid as Arrow's uuid extension or as plain fixed bytes. Iceberg's bounds order
    uuids as unsigned bytes, as Arrow does.
    """
    column = pc.field(*key_range.column.split(".")).cast(pa.binary(16))
    in_range = pc.scalar(True)
    if key_range.lower is not None:
        in_range = in_range & (column >= pa.scalar(_uuid_bytes(key_range.lower), pa.binary(16)))
    if key_range.upper is not None:
        in_range = in_range & (column < pa.scalar(_uuid_bytes(key_range.upper), pa.binary(16)))
    return in_range | column.is_null() if key_range.lower is None else in_range


def _uuid_bytes(value: Any) -> bytes:
    return value.bytes if isinstance(value, uuid.UUID) else bytes(value)


@dataclass(frozen=True)
class BadText:
    """A row of which only this can be said: its `column` holds a string that is not UTF-8."""

    column: str


Rows = TypeVar("Rows", pa.Table, pa.RecordBatch)


def text_in_arrow(rows: Rows) -> Rows:
    """The rows with timestamps and decimals as text in the mapping's format, written by Arrow.

    Each top-level column of microsecond timestamps or decimals is replaced by its values' text, as
    `documents.converter_for` writes it, for `DocumentMapper` to pass through. It happens here, not
    in `documents`, which the planner's cold start imports without pyarrow. Timestamps of another
    unit are left to the converters.

    Arrow writes that text several times faster than Python: a timestamp with a time zone becomes a
    datetime with a ZoneInfo, at 2.5 µs a value, before `isoformat`, and a decimal a Decimal before
    `str`. On an export of the bench's table that is a tenth of the CPU. The text is the converters'
    to the character, in every batch alike, as equality deletes compare a delete file's values with
    a data file's; tests/test_documents.py compares them over generated values.
    """
    for number, column_field in enumerate(rows.schema):
        text = _arrow_text(rows.column(number), column_field.type)
        if text is not None:
            rows = rows.set_column(
                number, pa.field(column_field.name, pa.string(), column_field.nullable), text
            )
    return rows


def _arrow_text(column: pa.Array | pa.ChunkedArray, arrow_type: pa.DataType) -> pa.Array | None:
    # a table's (a rewrite's rows): one array, for the masks
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "us":
        if arrow_type.tz is None:
            return pc.strftime(column, format="%Y-%m-%dT%H:%M:%S")  # %S has the microseconds
        # The values are UTC instants whatever the zone: without it, they are formatted as UTC.
        return pc.strftime(column.cast(pa.timestamp("us")), format="%Y-%m-%dT%H:%M:%S+00:00")
    if pa.types.is_decimal(arrow_type):
        text = pc.cast(column, pa.string())
        exponent = pc.fill_null(pc.match_substring(text, "E"), False)
        if pc.any(exponent).as_py():  # Arrow writes tiny values as "1E-7", the mapping "0.0000001"
            positional = [
                format(Decimal(value), "f") for value in text.filter(exponent).to_pylist()
            ]
            text = pc.replace_with_mask(text, exponent, pa.array(positional, pa.string()))
        return text
    return None


def _python_rows(data: pa.Table | pa.RecordBatch) -> Iterator[dict[str, Any] | BadText]:
    """The rows as dicts, and a `BadText` for a row with a string that is not valid UTF-8.

    Arrow does not validate the strings it reads from Parquet (Spark writes whatever bytes a
    string holds), and converting them to Python fails for the whole batch; only a batch that
    fails is converted again row by row, to find the rows and the column. Timestamps and decimals
    come as the text of their documents' fields, written by Arrow (`text_in_arrow`)."""
    data = text_in_arrow(data)
    try:
        rows = data.to_pylist()
    except UnicodeDecodeError:
        for i in range(data.num_rows):
            row = data.slice(i, 1)
            try:
                yield row.to_pylist()[0]
            except UnicodeDecodeError:
                yield BadText(
                    next(name for name in row.column_names if _undecodable(row.column(name)))
                )
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
    """Which rows of one data file a set of delete files removes: by position or by values."""

    positions: set[int] = field(default_factory=set)
    equality: list[tuple[tuple[str, ...], set[tuple[Any, ...]]]] = field(default_factory=list)

    @classmethod
    def load(
        cls, files: _Files, data_file: DataFile, delete_files: Iterable[DataFile]
    ) -> _RemovedRows:
        removed = cls()
        # a Puffin file once, for all its vectors
        for delete_file in {d.file_path: d for d in delete_files}.values():
            if delete_file.content == DataFileContent.EQUALITY_DELETES:
                names = tuple(
                    files.schema.find_column_name(i) or f"field {i}"
                    for i in delete_file.equality_ids or ()
                )
                values = {
                    tuple(row[n] for n in names)
                    for _, row in files.rows(delete_file, files.schema.select(*names))
                    if not isinstance(row, BadText)  # equal to no row that can become a document
                }
                removed.equality.append((names, values))
            else:
                # pyiceberg reads position-delete files and deletion vectors (Puffin) alike.
                reads = (read_position_deletes(files.io, d) for d in [delete_file])
                (positions,) = files.named(delete_file, reads)
                deleted = positions.get(data_file.file_path)
                if deleted is not None:
                    removed.positions.update(deleted.to_pylist())
        return removed

    @property
    def removes_nothing(self) -> bool:
        return not self.positions and not self.equality

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
            removed.append_column("__removed", _ones(removed.num_rows)).append_column(
                "__added", _zeros(removed.num_rows)
            ),
            added.append_column("__removed", _zeros(added.num_rows)).append_column(
                "__added", _ones(added.num_rows)
            ),
        ]
    )
    counts = both.group_by(columns, use_threads=False).aggregate(
        [("__removed", "sum"), ("__added", "sum")]
    )
    excess = pc.subtract(counts["__removed_sum"], counts["__added_sum"]).to_pylist()
    pairs = pc.sum(pc.min_element_wise(counts["__removed_sum"], counts["__added_sum"])).as_py() or 0
    keep_removed = [i for i, n in enumerate(excess) if n > 0 for _ in range(n)]
    keep_added = [i for i, n in enumerate(excess) if n < 0 for _ in range(-n)]
    rows = counts.select(columns)
    return (
        rows.take(pa.array(keep_removed, pa.int64())),
        rows.take(pa.array(keep_added, pa.int64())),
        pairs,
    )


def _ones(n: int) -> pa.Array:
    return pa.nulls(n, pa.int64()).fill_null(1)


def _zeros(n: int) -> pa.Array:
    return pa.nulls(n, pa.int64()).fill_null(0)

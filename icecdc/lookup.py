"""Looking rows up in a table without reading it whole.

A lookup finds whole data files, the rows of some document ids, or the rows whose columns hold some
values. Each row comes as the document icecdc writes for it: `_id` and canonical JSON. Rows are read
at one snapshot with the deletes in force: position deletes, deletion vectors and equality deletes.
That is icecdc's reader, as pyiceberg's scans lack equality deletes.

Data files are chosen from their manifests' column bounds, so a lookup reads only the files that may
hold what it looks for. What it read is counted exactly (`ReadCost`): the audit reports it.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, fields, replace
from typing import Any

from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    In,
    IsNull,
    Or,
    Reference,
)
from pyiceberg.expressions.visitors import bind
from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntry
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import BinaryType, BooleanType, FixedType, IntegerType, LongType

from icecdc.catalog import sequence_number
from icecdc.compat import metrics_evaluator, read_position_deletes, referenced_data_file_path
from icecdc.config import TableConfig, TableIndexConfig
from icecdc.deadletters import DeadLetter, DeadLetters
from icecdc.documents import Shape
from icecdc.errors import OperationError
from icecdc.manifests import ChangedEntries, SnapshotFiles
from icecdc.model import NO_SNAPSHOT, ChangeType
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import FileTask

log = logging.getLogger(__name__)


@dataclass
class ReadCost:
    """What was read of a table: its metadata, and the data and delete files read whole.

    Bytes are counted as stored.
    """

    manifest_lists: int = 0
    manifests: int = 0
    manifest_bytes: int = 0  # manifests and manifest list
    data_files: int = 0
    data_bytes: int = 0
    delete_files: int = 0
    delete_bytes: int = 0

    def add(self, other: ReadCost) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def whole_rows_only(config: TableConfig, command: str) -> TableIndexConfig:
    """The table's one index, or OperationError when it is shaped or the table writes several.

    An index is shaped by columns, where, routing or a pipeline. `command` compares
    the index with whole rows of the table, or writes them, which would find or write
    every document of such an index wrong.
    """
    if not config.whole_rows:
        raise OperationError(
            f"table {config.name!r}: {command} compares the index with whole rows of the "
            "table and does not support "
            "shaped indexes (columns, exclude_columns, where, routing, pipeline) or several "
            "indexes yet; "
            "use icecdc verify, or icecdc repair --rebuild"
        )
    return config.each_index()[0].config


class TableRows:
    """A table's rows at one snapshot (by default its current one), looked up by scope.

    Rows that cannot become documents (a null identifier) are left out and kept in `unreadable`,
    as the letters a sync writes of them; `dead_letter`: where those letters are written (as a sync
    does, one open letter per row and reason), None: nowhere."""

    def __init__(
        self,
        table: Table,
        name: str,
        identifier_columns: tuple[str, ...],
        snapshot_id: int | None = None,
        dead_letter: str | None = None,
        shape: Shape | None = None,
    ) -> None:
        if snapshot_id == NO_SNAPSHOT:  # a checkpoint of a table with no snapshot yet: no rows
            snapshot = None
        else:
            snapshot = (
                table.current_snapshot()
                if snapshot_id is None
                else table.snapshot_by_id(snapshot_id)
            )
        if snapshot_id not in (None, NO_SNAPSHOT) and snapshot is None:
            raise OperationError(
                f"table {name!r}: snapshot {snapshot_id} no longer exists (expired); sync first"
            )
        self.table = table
        self.name = name
        self.identifier_columns = identifier_columns
        self.snapshot_id = snapshot.snapshot_id if snapshot is not None else None
        self.sequence_number = sequence_number(snapshot) if snapshot is not None else 0
        self._manifest_list = snapshot.manifest_list if snapshot is not None else None
        self._files = SnapshotFiles(table, snapshot, ChangedEntries())
        shapes = (shape or Shape(),)  # the columns and rows of the documents it reads
        self._reader = TableReader.for_table(
            table, name, identifier_columns, shapes=shapes, collect=True
        )
        self._dead_letter = dead_letter
        self._read = ReadCost()
        self.unreadable: list[DeadLetter] = []  # the rows read so far that cannot become documents

    @property
    def schema(self) -> Schema:
        return self.table.schema()

    @property
    def cost(self) -> ReadCost:
        """What the lookups so far have read."""
        manifests = self._files.manifests_read()
        if not manifests or self._manifest_list is None:
            return replace(self._read)
        list_bytes = len(self.table.io.new_input(self._manifest_list))
        return replace(
            self._read,
            manifest_lists=1,
            manifests=len(manifests),
            manifest_bytes=list_bytes + sum(m.manifest_length for m in manifests),
        )

    def has_equality_deletes(self) -> bool:
        """Whether the snapshot has equality deletes in force.

        pyiceberg's own scan refuses those.
        """
        return self._files.has_equality_deletes()

    def data_entries(self, row_filter: BooleanExpression | None = None) -> list[ManifestEntry]:
        """The live data files that may hold rows `row_filter` keeps, from their column bounds.

        Without a filter, all of them.
        """
        entries = self._files.live_data_entries()
        if row_filter is None or row_filter == AlwaysTrue():
            return entries
        may_hold = metrics_evaluator(self.schema, row_filter)
        return [e for e in entries if may_hold(e.data_file)]

    def deletes_for(self, entry: ManifestEntry) -> tuple[DataFile, ...]:
        return self._files.deletes_for(entry)

    def live_rows(self, entry: ManifestEntry) -> int:
        """How many of the data file's rows are live.

        From metadata where that is exact: its record count, less the one delete file in force when
        that file names it. A file-scoped position-delete file names it; a deletion vector will once
        pyiceberg reads its referenced data file, which 0.12 drops. Otherwise from the positions of
        its position deletes, or by reading the file when equality deletes apply to it.
        """
        data_file, deletes = entry.data_file, self.deletes_for(entry)
        if not deletes:
            return int(data_file.record_count)
        if any(d.content == DataFileContent.EQUALITY_DELETES for d in deletes):
            return sum(1 for _ in self.documents([entry]))
        if len(deletes) == 1 and _referenced(deletes[0]) == data_file.file_path:
            return int(data_file.record_count - deletes[0].record_count)
        positions: set[int] = set()
        # a Puffin file once, for all its vectors
        for delete_file in {d.file_path: d for d in deletes}.values():
            self._count(delete_file, data=False)
            found = read_position_deletes(self.table.io, delete_file).get(data_file.file_path)
            if found is not None:
                positions.update(p for p in found.to_pylist() if p < data_file.record_count)
        return int(data_file.record_count - len(positions))

    def documents(self, entries: Iterable[ManifestEntry]) -> Iterator[tuple[str, str]]:
        """`_id` and document of every live row of the data files.

        Each file is read whole, with its deletes.
        """
        for entry in entries:
            deletes = self.deletes_for(entry)
            self._count(entry.data_file, data=True)
            for delete_file in {d.file_path: d for d in deletes}.values():
                self._count(delete_file, data=False)
            task = FileTask(
                entry.data_file,
                ChangeType.INSERT,
                self.sequence_number,
                self.snapshot_id or 0,
                deletes=deletes,
            )
            unreadable: list[DeadLetter] = []
            for doc_id, change in self._reader.read([task], dead_lettered=unreadable):
                yield doc_id, change.document
            self.unreadable += unreadable
            if unreadable and self._dead_letter is not None:
                DeadLetters(self._dead_letter).write(unreadable)

    def by_ids(self, ids: Collection[str]) -> dict[str, list[str]]:
        """The documents of the rows whose `_id` is in `ids`.

        An id two live rows share has several.
        """
        if not self.identifier_columns:
            raise OperationError(
                f"table {self.name!r} has no identifier columns: its documents' ids name "
                "file positions, "
                "not rows, and cannot be looked up"
            )
        wanted = set(ids)
        if not wanted:
            return {}
        found: dict[str, list[str]] = {}
        for doc_id, document in self.documents(self.data_entries(self._ids_filter(wanted))):
            if doc_id in wanted:
                found.setdefault(doc_id, []).append(document)
        return found

    def normalized(self, values: dict[str, Any]) -> dict[str, Any]:
        """`values`, column to value, as documents hold them.

        OperationError names a value its column cannot hold. Integers and booleans stay as such; any
        other type becomes text, so `5` for a string column is "5".
        """
        normal: dict[str, Any] = {}
        for column, value in values.items():
            try:
                if value is None:
                    # raises, naming it, for a column the table does not have
                    self.schema.find_field(column)
                    normal[column] = None
                else:
                    normal[column] = _typed(
                        self.schema, column, value if isinstance(value, str) else json.dumps(value)
                    )
            except (ValueError, TypeError) as exc:
                raise OperationError(
                    f"table {self.name!r}: no rows can have {column}={value!r}: {exc}"
                ) from None
        return normal

    def where(self, values: dict[str, Any]) -> dict[str, list[str]]:
        """The documents of the rows whose columns hold `values`.

        `values` maps a column to a value, as in `normalized`; None stands for null.
        """
        values = self.normalized(values)
        row_filter = _all(_equal(c, v) for c, v in values.items())
        found: dict[str, list[str]] = {}
        for doc_id, document in self.documents(self.data_entries(row_filter)):
            fields_ = json.loads(document)
            # The bounds only choose files; a file may hold other rows too
            # (another partition spec's).
            if all(field_value(fields_, column) == value for column, value in values.items()):
                found.setdefault(doc_id, []).append(document)
        return found

    def _count(self, data_file: DataFile, data: bool) -> None:
        if data:
            self._read.data_files += 1
            self._read.data_bytes += int(data_file.file_size_in_bytes)
        else:
            self._read.delete_files += 1
            self._read.delete_bytes += int(data_file.file_size_in_bytes)

    def _ids_filter(self, ids: Collection[str]) -> BooleanExpression:
        """The rows whose identifier columns hold the values the ids name."""
        values = [self._id_values(doc_id) for doc_id in sorted(ids)]
        if len(self.identifier_columns) == 1:
            return In(term=Reference(self.identifier_columns[0]), values={v[0] for v in values})
        return _any(
            _all(_equal(c, v) for c, v in zip(self.identifier_columns, vs, strict=True))
            for vs in values
        )

    def _id_values(self, doc_id: str) -> tuple[Any, ...]:
        """The identifier columns' values an `_id` names.

        The `_id` is as `icecdc.documents.DocumentMapper.document_id` makes it.
        """
        columns = self.identifier_columns
        texts: Any = [doc_id]
        if len(columns) > 1:
            try:
                texts = json.loads(doc_id)
            except ValueError:
                texts = None
            if not (
                isinstance(texts, list)
                and len(texts) == len(columns)
                and all(isinstance(t, str) for t in texts)
            ):
                raise OperationError(
                    f"table {self.name!r}: {doc_id!r} is not a document id of its identifier "
                    f"columns {list(columns)} "
                    "(a JSON array of their texts)"
                )
        values = []
        for column, text in zip(columns, texts, strict=True):
            try:
                values.append(_typed(self.schema, column, text))
            except (ValueError, TypeError) as exc:
                raise OperationError(
                    f"table {self.name!r}: {doc_id!r} is not a document id of column "
                    f"{column!r}: {exc}"
                ) from None
        return tuple(values)


def _typed(schema: Schema, column: str, text: str) -> Any:
    """The value of `column` that documents write as `text`, as a row filter takes it.

    ValueError when there is none. Numbers, booleans and base64 bytes are parsed here.
    pyiceberg reads other types from their text when the filter is bound: dates, times,
    timestamps, uuids, decimals and strings.
    """
    field_type = schema.find_field(column).field_type
    value: Any = text
    if isinstance(field_type, BinaryType | FixedType):  # base64 in documents and ids
        value = base64.b64decode(text, validate=True)
    elif isinstance(field_type, IntegerType | LongType):
        value = int(text)
    elif isinstance(field_type, BooleanType):
        if text not in ("true", "false"):
            raise ValueError(f"{text!r} is not true or false")
        value = text == "true"
    # raises now, naming the value, when its type does not fit
    bind(schema, _equal(column, value), case_sensitive=True)
    return value


def _equal(column: str, value: Any) -> BooleanExpression:
    return (
        IsNull(term=Reference(column))
        if value is None
        else EqualTo(term=Reference(column), value=value)
    )


def _all(expressions: Iterable[BooleanExpression]) -> BooleanExpression:
    terms = list(expressions)
    return (
        AlwaysTrue()
        if not terms
        else terms[0]
        if len(terms) == 1
        else And(terms[0], terms[1], *terms[2:])
    )


def _any(expressions: Iterable[BooleanExpression]) -> BooleanExpression:
    # pyiceberg builds a balanced tree of many terms: a chain of
    # thousands of ids would recurse too deep
    terms = list(expressions)
    return (
        AlwaysFalse()
        if not terms
        else terms[0]
        if len(terms) == 1
        else Or(terms[0], terms[1], *terms[2:])
    )


def field_value(document: dict[str, Any], column: str) -> Any:
    """The value of a (dotted) column in a document; None when absent."""
    value: Any = document
    for part in column.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _referenced(delete_file: DataFile) -> str | None:
    """The one data file a delete file applies to, when it names one.

    A deletion vector names one, and so does a file-scoped position delete.
    """
    return getattr(delete_file, "referenced_data_file", None) or referenced_data_file_path(
        delete_file
    )

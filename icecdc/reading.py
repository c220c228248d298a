"""Reading the files of work items into change rows, Iceberg-aware.

The driver turns work items into `FileTask`s (metadata only: which file, insert or delete, which
sequence number). Executors read each file with pyiceberg's `ArrowScan`: columns are matched by
field ID, projected onto the current schema (a renamed column reads right, a dropped one is gone,
an added one is null), and identity-partition values come from metadata. Each row becomes a
document (see `documents.py`) keyed by its `_id`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Iterator

from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.metadata import TableMetadataUtil

from icecdc.documents import DocumentMapper, encode_document
from icecdc.errors import ProcessingError
from icecdc.state import EXPORT, WorkItem

INSERT = "I"
DELETE = "D"

# A change row as it crosses the shuffle: (document id, (sequence number, INSERT/DELETE, document JSON)).
Change = tuple[str, tuple[int, str, str]]


@dataclass(frozen=True)
class FileTask:
    """One data file to read, and what its rows mean."""

    data_file: DataFile
    change: str  # INSERT or DELETE
    sequence_number: int
    snapshot_id: int


def file_tasks(table: Table, items: Iterable[WorkItem]) -> list[FileTask]:
    """Resolve the items' file paths to data files through the manifests of their snapshots."""
    tasks: list[FileTask] = []
    for snapshot_id, snapshot_items in _by_snapshot(items).items():
        snapshot = table.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise ProcessingError(f"table {snapshot_items[0].table!r}: snapshot {snapshot_id} no longer exists")
        wanted = {p: INSERT for item in snapshot_items for p in item.added_files}
        wanted.update({p: DELETE for item in snapshot_items for p in item.deleted_files})
        exporting = snapshot_items[0].kind == EXPORT
        for manifest in snapshot.manifests(table.io):
            if not exporting and manifest.added_snapshot_id != snapshot_id:
                continue  # a change item's files are in the manifests its snapshot wrote
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                change = wanted.pop(entry.data_file.file_path, None)
                if change is not None:
                    tasks.append(FileTask(entry.data_file, change, snapshot.sequence_number, snapshot_id))
        if wanted:
            missing = next(iter(wanted))
            raise ProcessingError(
                f"table {snapshot_items[0].table!r}: file {missing} of snapshot {snapshot_id} is not in its manifests"
            )
    return tasks


def _by_snapshot(items: Iterable[WorkItem]) -> dict[int, list[WorkItem]]:
    grouped: dict[int, list[WorkItem]] = {}
    for item in items:
        grouped.setdefault(item.snapshot_id, []).append(item)
    return grouped


@dataclass(frozen=True)
class TableReader:
    """What an executor needs to read a table's files; small and picklable."""

    table_name: str
    metadata_json: str
    io_properties: dict[str, str]
    identifier_columns: tuple[str, ...]

    @classmethod
    def for_table(cls, table: Table, name: str, identifier_columns: tuple[str, ...]) -> TableReader:
        return cls(name, table.metadata.model_dump_json(), dict(table.io.properties), identifier_columns)

    def read(self, tasks: Iterable[FileTask]) -> Iterator[Change]:
        """Every row of the tasks' files as a change keyed by document id."""
        metadata = TableMetadataUtil.parse_raw(self.metadata_json)
        io = load_file_io(self.io_properties, metadata.location)
        schema = metadata.schema()
        scan = ArrowScan(metadata, io, schema, AlwaysTrue())
        mapper = DocumentMapper(schema, self.identifier_columns)
        for task in tasks:
            position = 0
            file_key = hashlib.sha256(task.data_file.file_path.encode()).hexdigest()[:16]
            for batch in scan.to_record_batches([FileScanTask(task.data_file)]):
                for row in batch.to_pylist():
                    document = mapper.document(row)
                    if self.identifier_columns:
                        doc_id = self._document_id(mapper, document, task)
                    else:
                        # Insert-only tables: the row's place in its file names it, and survives compaction
                        # because compactions are never read.
                        doc_id = f"{file_key}-{position}"
                    position += 1
                    yield doc_id, (task.sequence_number, task.change, encode_document(document))

    def _document_id(self, mapper: DocumentMapper, document: dict, task: FileTask) -> str:
        try:
            return mapper.document_id(document)
        except ValueError as exc:
            raise ProcessingError(
                f"table {self.table_name!r}: {exc} in file {task.data_file.file_path} (snapshot {task.snapshot_id})"
            ) from None

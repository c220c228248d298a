"""Every pyiceberg private API icecdc uses, in one place, next to the version pin in pyproject.toml.

pyiceberg does not expose these as public API; each one is what no public function offers (why:
next to each). tests/test_compat.py checks that each still exists with the signature used here, so
an upgrade that breaks one fails there, loudly, and not deep inside a Spark task.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pyiceberg.avro.file import AvroFile
from pyiceberg.expressions import BooleanExpression
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    _inherit_from_manifest,
)
from pyiceberg.schema import Schema
from pyiceberg.table.delete_file_index import _referenced_data_file_path
from pyiceberg.table.update.snapshot import _OverwriteFiles

if TYPE_CHECKING:
    import pyarrow as pa

# The pyiceberg release these were checked against (pyproject.toml pins it).
PYICEBERG_VERSION = "0.12.0"


def read_position_deletes(io: FileIO, delete_file: DataFile) -> dict[str, pa.ChunkedArray]:
    """The positions a position-delete file or deletion vector (Puffin) deletes, per data file path.

    Why private: pyiceberg applies deletes only inside a scan; icecdc needs the positions themselves
    to tell rows deleted before a commit from rows deleted by it."""
    # pyarrow: where files are read (executors, an in-process pass)
    from pyiceberg.io.pyarrow import _read_deletes

    return _read_deletes(io, delete_file)


# Entries `manifest_entries` decodes at once with Python's cyclic collector paused (~2.7 KB each).
DECODED_AT_ONCE = 1_000


def manifest_entries(
    io: FileIO, manifest: ManifestFile, discard_deleted: bool = True, inherit: bool = True
) -> Iterator[ManifestEntry]:
    """A manifest's entries, read a few at a time: `ManifestFile.fetch_manifest_entry`, streamed.

    Why private: pyiceberg's public reader returns a list of the whole manifest, so a manifest of
    10^5 files costs ~2.7 KB a file at once (~260 MiB); this one holds the file's bytes and
    DECODED_AT_ONCE entries. The reading is pyiceberg's own, with its schema, types and inheritance
    (snapshot ids and sequence numbers from the manifest), which a caller of paths and sizes alone
    may go without (`inherit`).

    Decoding makes a dozen objects an entry, which hold no reference cycles; Python's cyclic
    collector, run over and over by those allocations, took a third of the time. It is paused while
    a chunk is decoded, never while this generator waits for its caller.
    """
    with AvroFile[ManifestEntry](
        io.new_input(manifest.manifest_path),
        MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        while True:
            with _collector_paused():
                read = list(itertools.islice(reader, DECODED_AT_ONCE))
                chunk = [
                    _inherit_from_manifest(entry, manifest) if inherit else entry
                    for entry in read
                    if not discard_deleted or entry.status != ManifestEntryStatus.DELETED
                ]
            yield from chunk
            if len(read) < DECODED_AT_ONCE:  # pyiceberg's reader must not be asked past its end
                return


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, on again after if it was on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def referenced_data_file_path(delete_file: DataFile) -> str | None:
    """The one data file a file-scoped delete file applies to (from its path bounds), or None.

    Why private: pyiceberg 0.12's DataFile has no `referenced_data_file` yet."""
    return _referenced_data_file_path(delete_file)


def metrics_evaluator(schema: Schema, row_filter: BooleanExpression) -> Callable[[DataFile], bool]:
    """Whether a data file may hold rows `row_filter` keeps, from its column bounds and counts.

    Why private: pyiceberg applies it only inside its scan planning,
    which refuses equality deletes."""
    from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator

    return _InclusiveMetricsEvaluator(
        schema, row_filter, case_sensitive=True, include_empty_files=False
    ).eval


def data_files_from_arrow(table_metadata: Any, df: pa.Table, io: FileIO, write_uuid: Any) -> Any:
    """Write an Arrow table as data files of the table (test and demo commits only).

    Why private: pyiceberg has no public way to write files without committing them."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    return _dataframe_to_data_files(
        table_metadata=table_metadata, df=df, io=io, write_uuid=write_uuid
    )


class OverwriteFiles(_OverwriteFiles):
    """pyiceberg's producer of overwrite snapshots, each manifest judged by an evaluator of its own.

    Why private: the test commits subclass it to record a `replace` (pyiceberg 0.12 has no
    rewrite_data_files). pyiceberg's manifest evaluator keeps the manifest it is judging on itself
    (`_ManifestEvalVisitor.eval`), and an overwrite's threads share one per spec
    (`_deleted_entries`): a manifest judged by another's partition summaries was left out, and the
    commit failed with "Missing required files to delete". Binding one per manifest is cheap.
    """

    def _build_manifest_evaluator(self, spec_id: int) -> Callable[[ManifestFile], bool]:
        build = super()._build_manifest_evaluator
        return lambda manifest: build(spec_id)(manifest)

"""What a snapshot added, removed and holds, read from its manifests once and shared.

Planning lists the files as work items, batching caps a pass by their sizes, and the driver side of
reading resolves them to tasks.
"""

from __future__ import annotations

import json
import tempfile
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from types import TracebackType

from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.table import Table
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.table.snapshots import Snapshot

from icecdc.compat import manifest_entries, referenced_data_file_path
from icecdc.errors import ProcessingError
from icecdc.model import WorkItem


def lists_file(table: Table, path: str) -> bool:
    """Whether the table's current snapshot holds this data or delete file live."""
    snapshot = table.current_snapshot()
    return snapshot is not None and any(
        entry.data_file.file_path == path
        for manifest in snapshot.manifests(table.io)
        for entry in manifest_entries(table.io, manifest, inherit=False)
    )


class SnapshotFiles:
    """A snapshot's live data files and delete files in force.

    They are loaded from its manifests on first use.
    """

    def __init__(self, table: Table, snapshot: Snapshot | None, changed: ChangedEntries) -> None:
        self._table = table
        self._snapshot = snapshot
        self._changed = changed
        self._data: dict[str, ManifestEntry] | None = None
        self._positions: DeleteFileIndex | None = None
        self._equality: list[ManifestEntry] = []
        self._manifests: list[ManifestFile] | None = None  # the manifest list, read once
        self._read: list[ManifestFile] = []
        self._located: dict[str, ManifestEntry] = {}  # export items' files (`locate`)

    def own_entries(self) -> list[ManifestEntry]:
        """The entries this snapshot ADDED or DELETED (only in manifests it wrote)."""
        assert self._snapshot is not None
        return self._changed.of(self._table, self._snapshot)

    def locate(self, items: Sequence[WorkItem]) -> None:
        """Find the live entries of export items' files in the manifests that hold them alone.

        An export's items are cut from the snapshot's live files in manifest order
        (`planning._export_items`), so an item's group and the manifests' file counts tell which
        manifests hold its files: a pass of a capped export reads those, not every manifest of the
        table. Where a count is missing or the files are not there (items cut otherwise, as from
        sorted paths), every manifest is read. `data_entry` then answers from what was found.
        """
        wanted = {p for item in items for p in item.added_data_files} - self._located.keys()
        if not wanted or self._data is not None:
            return
        spans = self._data_spans()
        found: dict[str, ManifestEntry] = {}
        for manifest in _holding(spans, items) if spans else []:
            self._read.append(manifest)
            live = self._changed.live(self._table, manifest)
            found.update((p, live[p]) for p in wanted & live.keys())
        if len(found) < len(wanted):  # not cut in manifest order: look everywhere
            found = {p: e for p in wanted if (e := self._live_data().get(p)) is not None}
        self._located.update(found)

    def data_entry(self, path: str, table_name: str) -> ManifestEntry:
        entry = self._located.get(path)
        if entry is None:
            entry = self._live_data().get(path)
        if entry is None:
            raise ProcessingError(
                f"table {table_name!r}: data file {path} is not live in snapshot "
                f"{self._snapshot_id}"
            )
        return entry

    def deletes_for(self, entry: ManifestEntry) -> tuple[DataFile, ...]:
        """The delete files in force for a data file.

        Those are position deletes and vectors, and equality deletes of a higher sequence number in
        its partition, or unpartitioned.
        """
        self._load_deletes()
        assert self._positions is not None
        data_file, data_seq = entry.data_file, entry.sequence_number or 0
        positions = self._positions.for_data_file(
            data_seq, data_file, partition_key=data_file.partition
        )
        equality = [
            e.data_file
            for e in self._equality
            if (e.sequence_number or 0) > data_seq
            and (_is_global(self._table, e.data_file) or _same_partition(e.data_file, data_file))
        ]
        return tuple(sorted(positions, key=lambda f: f.file_path)) + tuple(equality)

    def has_equality_deletes(self) -> bool:
        """Whether an equality-delete file is in force (pyiceberg's own scan refuses those)."""
        self._load_deletes()
        return bool(self._equality)

    def live_data_entries(self) -> list[ManifestEntry]:
        """The entry of every live data file of the snapshot."""
        return list(self._live_data().values())

    def manifests_read(self) -> list[ManifestFile]:
        """The manifests read so far, each once: what this snapshot's metadata has cost.

        The audit counts it.
        """
        return list(self._read)

    def data_files_touched_by(self, delete_files: list[DataFile]) -> list[ManifestEntry]:
        """Live data files that delete files may remove rows of.

        That is the referenced file when the delete file names one, else every file of its
        partition, or every file for a global one.
        """
        if not delete_files:
            return []  # no need to read the data manifests
        touched: dict[str, ManifestEntry] = {}
        live = self._live_data()
        for delete_file in delete_files:
            # pyiceberg 0.12 does not expose a deletion vector's referenced_data_file;
            # the path bounds name the file for file-scoped deletes, and a
            # partition-scoped file touches its partition.
            referenced = getattr(
                delete_file, "referenced_data_file", None
            ) or referenced_data_file_path(delete_file)
            if referenced is not None:
                if referenced in live:
                    touched[referenced] = live[referenced]
                continue
            for path, entry in live.items():
                if _is_global(self._table, delete_file) or _same_partition(
                    delete_file, entry.data_file
                ):
                    touched[path] = entry
        return [touched[p] for p in sorted(touched)]

    @property
    def _snapshot_id(self) -> int | None:
        return self._snapshot.snapshot_id if self._snapshot else None

    def _manifest_list(self) -> list[ManifestFile]:
        if self._snapshot is None:
            return []
        if self._manifests is None:  # pyiceberg reads the manifest list again on every call
            self._manifests = self._snapshot.manifests(self._table.io)
        return self._manifests

    def _data_spans(self) -> list[tuple[ManifestFile, int, int]] | None:
        """Each data manifest with the positions of its live files in the snapshot's manifest order.

        None when a manifest does not count its files.
        """
        spans: list[tuple[ManifestFile, int, int]] = []
        start = 0
        for manifest in self._manifest_list():
            if manifest.content != ManifestContent.DATA:
                continue
            added, existing = manifest.added_files_count, manifest.existing_files_count
            if added is None or existing is None:
                return None
            spans.append((manifest, start, start + added + existing))
            start += added + existing
        return spans

    def _entries(self, content: ManifestContent) -> Iterator[ManifestEntry]:
        for manifest in self._manifest_list():
            if manifest.content == content:
                self._read.append(manifest)
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


def equality_deletes_on(table: Table, delete_file: DataFile, columns: tuple[str, ...]) -> bool:
    """Whether an equality-delete file's fields are exactly these columns.

    Then each of its rows deletes one key.
    """
    schema = table.schema()
    return bool(columns) and set(delete_file.equality_ids or ()) == {
        schema.find_field(c).field_id for c in columns
    }


def _is_global(table: Table, delete_file: DataFile) -> bool:
    return table.specs()[delete_file.spec_id].is_unpartitioned()


def _same_partition(a: DataFile, b: DataFile) -> bool:
    return a.spec_id == b.spec_id and a.partition == b.partition


def _holding(
    spans: list[tuple[ManifestFile, int, int]], items: Sequence[WorkItem]
) -> list[ManifestFile]:
    """The manifests whose live files are at the positions of the export items' files.

    An item of group g holds the files from g times the size of a full group on, in manifest
    order (`planning.export_groups`); the last group holds what the full ones leave.
    """
    files = spans[-1][2] if spans else 0
    held: dict[str, ManifestFile] = {}
    for item in items:
        count = len(item.added_data_files)
        if item.group < item.groups - 1:
            size = count
        else:
            size = (files - count) // (item.groups - 1) if item.groups > 1 else 0
        first = item.group * size
        for manifest, start, end in spans:
            if start < first + count and first < end:
                held.setdefault(manifest.manifest_path, manifest)
    return list(held.values())


# Live entries of the manifests an export's passes read lately, held for the next lookups
# (`ChangedEntries.live`): at least one manifest, else at most this many entries (~2.7 KB each).
HELD_ENTRIES = 50_000


class ChangedEntries:
    """The manifest entries each snapshot ADDED or DELETED, read from its manifests once.

    Planning lists them as work items and reading resolves the items against them; in one process
    (a local sync) both share an instance and each manifest is read once. Snapshots never change,
    so the entries cannot go stale; they are metadata, a few hundred bytes a file.

    It also holds the live entries of the manifests read last for an export's items (`live`), so
    that a pass caps its batch and makes its tasks from one read of them.
    """

    def __init__(self) -> None:
        self._by_snapshot: dict[int, list[ManifestEntry]] = {}
        self._live: OrderedDict[str, dict[str, ManifestEntry]] = OrderedDict()

    def live(self, table: Table, manifest: ManifestFile) -> dict[str, ManifestEntry]:
        """A manifest's live entries by path, streamed once and held while few (HELD_ENTRIES)."""
        path = manifest.manifest_path
        if path in self._live:
            self._live.move_to_end(path)
            return self._live[path]
        entries = {e.data_file.file_path: e for e in manifest_entries(table.io, manifest)}
        self._live[path] = entries
        while len(self._live) > 1 and sum(map(len, self._live.values())) > HELD_ENTRIES:
            self._live.popitem(last=False)
        return entries

    def of(self, table: Table, snapshot: Snapshot) -> list[ManifestEntry]:
        if snapshot.snapshot_id not in self._by_snapshot:
            self._by_snapshot[snapshot.snapshot_id] = list(entries_changed_by(table, snapshot))
        return self._by_snapshot[snapshot.snapshot_id]


class SnapshotSizes:
    """The bytes of the files a batch's snapshots list, from their manifests, read when first asked.

    This is `icecdc.batching.BatchSizes`: a pass stops asking once its caps are reached.
    """

    def __init__(self, table: Table, changed: ChangedEntries) -> None:
        self._table = table
        self._changed = changed
        self._live: dict[int, SnapshotFiles] = {}
        # pyiceberg's snapshot_by_id walks the list on every call: a backlog's snapshots, by id once
        self._snapshots = {s.snapshot_id: s for s in table.snapshots()}

    def has_snapshot(self, snapshot_id: int) -> bool:
        return snapshot_id in self._snapshots

    def export_bytes(self, item: WorkItem) -> int:
        """The bytes of the data files an export item lists (live in its snapshot)."""
        if item.snapshot_id not in self._live:
            self._live[item.snapshot_id] = SnapshotFiles(
                self._table, self._snapshots.get(item.snapshot_id), self._changed
            )
        live = self._live[item.snapshot_id]
        live.locate([item])
        return sum(
            live.data_entry(p, item.table).data_file.file_size_in_bytes
            for p in item.added_data_files
        )

    def change_bytes(self, snapshot_id: int) -> int:
        """The bytes of the files a snapshot added and removed.

        0 for a snapshot that no longer exists.
        """
        snapshot = self._snapshots.get(snapshot_id)
        return (
            sum(e.data_file.file_size_in_bytes for e in self._changed.of(self._table, snapshot))
            if snapshot
            else 0
        )


# Paths a `LiveFiles` spills in one write: its memory is one such chunk.
SPILL_CHUNK = 1_000


class LiveFiles:
    """A snapshot's live data files listed from its manifests once: count, largest, paths.

    Planning an export needs the count and the largest file's size before it can cut the paths
    into items. The paths wait in a temporary file, in chunks, so the manifests are read once and
    no list of every file is held (10^6 files: ~120 MB of paths on disk, one chunk in memory).
    They come in the order of the manifest list and of each manifest's entries. That order is fixed
    for a snapshot, so every planner lists the same order.
    """

    def __init__(self, table: Table, snapshot: Snapshot) -> None:
        self.files = 0
        self.largest = 0  # bytes
        # held open, closed by `close`; it has no name, so the system frees it with the object
        self._spill = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._list(table, snapshot)
        except BaseException:
            self._spill.close()
            raise

    def paths(self) -> Iterator[str]:
        """Every path, in manifest order; each call reads from the start on its own."""
        offset = 0
        while True:
            self._spill.seek(offset)
            line = self._spill.readline()
            if not line:
                return
            offset += len(line)
            yield from json.loads(line)

    def close(self) -> None:
        self._spill.close()

    def __enter__(self) -> LiveFiles:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _list(self, table: Table, snapshot: Snapshot) -> None:
        chunk: list[str] = []
        for manifest in snapshot.manifests(table.io):
            if manifest.content != ManifestContent.DATA:
                continue
            # never a whole manifest at once; paths and sizes need no inherited sequence numbers
            for entry in manifest_entries(table.io, manifest, inherit=False):
                self.files += 1
                self.largest = max(self.largest, entry.data_file.file_size_in_bytes)
                chunk.append(entry.data_file.file_path)
                if len(chunk) == SPILL_CHUNK:
                    self._write(chunk)
                    chunk = []
        self._write(chunk)

    def _write(self, chunk: list[str]) -> None:
        if chunk:  # JSON escapes any newline a path holds: a chunk is one line
            self._spill.write(json.dumps(chunk).encode() + b"\n")


def entries_changed_by(table: Table, snapshot: Snapshot) -> Iterator[ManifestEntry]:
    """The manifest entries of every data or delete file the snapshot ADDED or DELETED."""
    for manifest in snapshot.manifests(table.io):
        # Only manifests the snapshot wrote can hold its ADDED and DELETED entries.
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        # streamed: a rewritten manifest may list the whole table's files as EXISTING
        for entry in manifest_entries(table.io, manifest, discard_deleted=False):
            if (
                entry.snapshot_id == snapshot.snapshot_id
                and entry.status != ManifestEntryStatus.EXISTING
            ):
                yield entry

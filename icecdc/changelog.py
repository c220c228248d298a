"""From the changes of one key to the one write that brings its document up to date.

After the shuffle every change of a key is in one place. Three small steps, in the spirit of
Iceberg's RemoveCarryoverIterator and ComputeUpdateIterator, run per snapshot and then across:

1. carryover removal: a DELETE and an INSERT of an identical document within one snapshot
   cancel (a copy-on-write rewrite carries untouched rows over into a new file);
2. update merge: what remains of a snapshot is an index of its INSERT (an insert or an update,
   also when a partition column moved the row to another file) or a delete;
3. net change: across snapshots the latest one that changed the key wins.

Documents are compared as their canonical JSON text, exactly: two rows whose documents are equal
write the same document, so dropping the pair can never leave the index wrong.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from icecdc.errors import ProcessingError
from icecdc.reading import INSERT


@dataclass(frozen=True)
class Write:
    """The net write of one document: index `document` (or delete when None) at `version`."""

    doc_id: str
    version: int  # the sequence number of the snapshot whose change this is
    document: str | None


@dataclass
class ChangeStats:
    rows: int = 0
    carryovers: int = 0  # DELETE+INSERT pairs dropped as unchanged

    def add(self, other: ChangeStats) -> None:
        self.rows += other.rows
        self.carryovers += other.carryovers


@dataclass
class SnapshotChanges:
    """A key's documents deleted and inserted by one snapshot, as multisets of document text."""

    deletes: Counter[str]
    inserts: Counter[str]


def net_write(doc_id: str, changes: Iterable[tuple[int, str, str]], stats: ChangeStats) -> Write | None:
    """The write one key needs, or None when its changes cancel out."""
    by_snapshot: dict[int, SnapshotChanges] = {}
    for sequence_number, change, document in changes:
        stats.rows += 1
        snapshot = by_snapshot.setdefault(sequence_number, SnapshotChanges(Counter(), Counter()))
        (snapshot.inserts if change == INSERT else snapshot.deletes)[document] += 1
    latest: Write | None = None
    for sequence_number in sorted(by_snapshot):
        stats.carryovers += remove_carryovers(by_snapshot[sequence_number])
        write = merge_update(doc_id, sequence_number, by_snapshot[sequence_number])
        if write is not None:
            latest = write
    return latest


def remove_carryovers(snapshot: SnapshotChanges) -> int:
    """Cancel identical DELETE/INSERT pairs in place; return how many pairs were dropped."""
    carried = snapshot.deletes & snapshot.inserts  # multiset intersection: min of the counts
    snapshot.deletes -= carried
    snapshot.inserts -= carried
    return sum(carried.values())


def merge_update(doc_id: str, sequence_number: int, snapshot: SnapshotChanges) -> Write | None:
    """One snapshot's remaining changes of a key as one write (None when nothing remains)."""
    inserted = list(snapshot.inserts.elements())
    if len(inserted) > 1:
        raise ProcessingError(
            f"document {doc_id!r}: {len(inserted)} rows with this identifier at sequence number {sequence_number}; "
            "identifier columns must be unique"
        )
    if inserted:
        return Write(doc_id, sequence_number, inserted[0])
    if snapshot.deletes:
        return Write(doc_id, sequence_number, None)
    return None


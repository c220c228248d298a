"""From the changes of one key to the one write that brings its document up to date.

After the shuffle every change of a key is in one place. Three small steps, in the spirit of
Iceberg's RemoveCarryoverIterator and ComputeUpdateIterator, run per snapshot and then across:

1. Carryover removal: a DELETE and an INSERT of an identical document within one snapshot
   cancel. A copy-on-write rewrite carries untouched rows over into a new file.
2. Update merge: what remains of a snapshot is an index of its INSERT or a delete. The INSERT is
   an insert or an update, also when a partition column moved the row to another file.
3. Net change: across snapshots the latest one that changed the key wins.

An INSERT without a DELETE of its key in its snapshot, carryovers aside, is an append. (A run of
copy-on-write commits read as one change may carry a row of the key over beside it: two live rows
in that one snapshot.) While a row of the key is live, an append is a second live row of one
identifier (`DuplicateIdentifier`). Within a pass the key's earlier snapshots tell whether it is
live. Before its first one only the index can tell, so that snapshot's append is handed to the
caller in `appends`, to look the key up there.

Documents are compared as their canonical JSON text, exactly: two rows whose documents are equal
write the same document, so dropping the pair can never leave the index wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from icecdc.errors import DuplicateIdentifier, HeldOutIdentifier
from icecdc.model import NO_IMAGE, ROUTED_KEY, ChangeRow, ChangeType, Write


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


def net_write(
    doc_id: str,
    changes: Iterable[ChangeRow],
    stats: ChangeStats,
    duplicates: list[DuplicateIdentifier] | None = None,
    appends: dict[str, Appended] | None = None,
    shared_rows: int | None = None,
) -> Write | None:
    """The write one key needs, or None when its changes cancel out.

    `duplicates` is where a snapshot with several live rows of this key is reported. That snapshot
    then deletes the document, as an export does, whatever made the rows several: inserts alone,
    an append while a row of the key is live, or an update beside an append. A later snapshot's
    document of the key is reported too (`HeldOutIdentifier`) and not written: the key's rows
    stay letters until a replay. Without `duplicates`, such a snapshot raises
    `DuplicateIdentifier`.

    `appends` is where the key's first snapshot is recorded when it only appends (`Appended`).
    The caller then asks the index whether a row of the key was live before it, and reports the
    rows that share the key then. Without `appends` no append is checked: a filtered or routed
    index sees a row that moves into it as an append, and several indexes read together are not
    checked yet.

    `shared_rows` counts the rows of a key that open letters hold out for sharing it
    (`Target.held_out`), when the key's changes leave it shared. Every row a snapshot then writes
    joins them as a letter, also one a later snapshot's delete of another row would leave unsaid.
    """
    by_snapshot = _by_snapshot(changes, stats)
    latest: Write | None = None
    # the key's live document before the snapshot (None: none, or not known)
    live: str | None = None
    # shared_rows: the key's live rows while they share it (held out, or once a snapshot found
    # several); None: not shared
    first = _first_append(by_snapshot) if appends is not None else None
    if appends is not None and first is not None:
        appends[doc_id] = first  # live before? the index tells
    for sequence_number in sorted(by_snapshot):
        inserts, deletes = by_snapshot[sequence_number]
        appended = _adds_one_row(inserts, deletes)
        try:
            # checked only where the caller checks appends: one unfiltered, unrouted index
            before = live if appended and appends is not None else None
            write = _snapshot_write(doc_id, sequence_number, inserts, deletes, stats, before)
        except DuplicateIdentifier as duplicate:
            if duplicates is None:
                raise
            if first is None or sequence_number != first.sequence_number:
                duplicates.append(duplicate)  # else the caller reports it, as it asks the index
            shared_rows = _rows_after(1 if live is not None or deletes else 0, inserts, deletes)
            # the document is deleted, as an export's duplicate is: the key may have had one
            # (a row live before, an update beside an append) and no row of it may stand for it
            latest, live = Write(doc_id, sequence_number, None), inserts[0]
            continue
        if shared_rows is not None:
            shared_rows = _rows_after(shared_rows, inserts, deletes)
            if shared_rows > 1 and write is not None and write.document is not None:
                # the key's rows are letters: a new row of it joins them, as in a later pass
                assert duplicates is not None
                duplicates.append(HeldOutIdentifier(doc_id, sequence_number, [write.document]))
                write = Write(doc_id, sequence_number, None)
        latest = write or latest
        live = write.document if write is not None else (inserts[0] if inserts else live)
    return latest


class Appended(NamedTuple):
    """A key's first snapshot in a pass, an append: whether a row was live before, the index tells.

    `documents` are the rows appended: several when a run of copy-on-write commits collapsed into
    one change appends copies of a key, which the caller then reports as sharing it, with the row
    the index holds if one was live before. `rows_at_end` counts the key's live rows after the
    pass, had one been live before it.
    """

    sequence_number: int
    documents: tuple[str, ...]
    rows_at_end: int


def _first_append(by_snapshot: dict[int, tuple[list[str], list[str]]]) -> Appended | None:
    """The key's first snapshot when it only appends, counting its rows as if one was live."""
    order = sorted(by_snapshot)
    inserts, deletes = by_snapshot[order[0]]
    if not inserts or deletes:
        return None
    return Appended(order[0], tuple(inserts), _count_rows(1, by_snapshot))


def live_rows(before: int, changes: Iterable[ChangeRow]) -> int:
    """A key's live rows after its changes, `before` rows of it live before them."""
    return _count_rows(before, _by_snapshot(changes, ChangeStats()))


def _by_snapshot(
    changes: Iterable[ChangeRow], stats: ChangeStats
) -> dict[int, tuple[list[str], list[str]]]:
    """A key's changes as each snapshot's inserted and deleted documents, counted in `stats`.

    Plain lists per snapshot: nearly every key has at most one DELETE and one INSERT per snapshot
    (a carryover or an update), which `_simple_write` settles without Counters.
    """
    by_snapshot: dict[int, tuple[list[str], list[str]]] = {}
    rows = 0
    for sequence_number, change, document in changes:
        rows += 1
        snapshot = by_snapshot.get(sequence_number)
        if snapshot is None:
            snapshot = by_snapshot[sequence_number] = ([], [])
        snapshot[0 if change == ChangeType.INSERT else 1].append(document)
    stats.rows += rows
    return by_snapshot


def _count_rows(rows: int, by_snapshot: dict[int, tuple[list[str], list[str]]]) -> int:
    """A key's live rows after its snapshots, `rows` live before them."""
    for sequence_number in sorted(by_snapshot):
        rows = _rows_after(rows, *by_snapshot[sequence_number])
    return rows


def _adds_one_row(inserts: list[str], deletes: list[str]) -> bool:
    """Whether a snapshot's changes of a key, carryovers aside, are one INSERT and no DELETE.

    A run of copy-on-write commits collapsed into one change (`icecdc.reading.driver`) may carry a
    live row of the key over and append another: that is an append too.
    """
    if len(inserts) == 1 and not deletes:
        return True
    if len(inserts) != len(deletes) + 1:
        return False
    net = SnapshotChanges(Counter(deletes), Counter(inserts))
    remove_carryovers(net)
    return not net.deletes


def _rows_after(rows: int, inserts: list[str], deletes: list[str]) -> int:
    """A key's live rows after a snapshot: a delete by key takes every earlier row of the key."""
    if any(d == NO_IMAGE or d.startswith(ROUTED_KEY) for d in deletes):
        return len(inserts)
    return max(rows + len(inserts) - len(deletes), 0)


def _snapshot_write(
    doc_id: str,
    sequence_number: int,
    inserts: list[str],
    deletes: list[str],
    stats: ChangeStats,
    live: str | None,
) -> Write | None:
    """One snapshot's write of a key; `DuplicateIdentifier` when it has several live rows.

    `live` is the document of the key's row live before an append.
    """
    if live is not None:
        raise DuplicateIdentifier(doc_id, sequence_number, [live, _appended(inserts, deletes)])
    if len(inserts) <= 1 and len(deletes) <= 1:
        return _simple_write(doc_id, sequence_number, inserts, deletes, stats)
    general = SnapshotChanges(Counter(deletes), Counter(inserts))
    carried = general.deletes & general.inserts
    stats.carryovers += remove_carryovers(general)
    if carried and general.inserts and not general.deletes:
        # a row carried over, and another appended: two live rows
        raise DuplicateIdentifier(
            doc_id, sequence_number, [*carried.elements(), *general.inserts.elements()]
        )
    return merge_update(doc_id, sequence_number, general)


def _appended(inserts: list[str], deletes: list[str]) -> str:
    """The row an append adds (`_adds_one_row`): the insert no delete carries over."""
    return next(iter(Counter(inserts) - Counter(deletes)))


def _simple_write(
    doc_id: str, sequence_number: int, inserts: list[str], deletes: list[str], stats: ChangeStats
) -> Write | None:
    """remove_carryovers + merge_update for at most one INSERT and one DELETE."""
    if inserts and deletes and inserts[0] == deletes[0]:
        stats.carryovers += 1
        return None
    if inserts:
        return Write(doc_id, sequence_number, inserts[0])
    if deletes:
        return Write(doc_id, sequence_number, None)
    return None


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
        raise DuplicateIdentifier(doc_id, sequence_number, inserted)
    if inserted:
        return Write(doc_id, sequence_number, inserted[0])
    if snapshot.deletes:
        return Write(doc_id, sequence_number, None)
    return None

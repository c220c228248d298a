"""Exports without a shuffle of documents, on either engine.

An export's rows are inserts of one snapshot: a key needs no other change to be written. So each
task writes the documents of the rows it reads, and only a compact key per row moves on: a hash of
its `_id`, and where the row is, by its task's number in the pass and its position in the file. Keys
that hash alike are the candidates for duplicate identifiers. Only their rows are read again, by
where they are, to compare their real ids; a hash collision is then no duplicate.

A real duplicate is handled as the shuffle handles it. Its documents are dead letters
naming the table, the snapshot, the files and the identifier columns, or the error that
stops the batch. Its key's document, which the export had written, is deleted from the
index under each routing value its rows had.

An export cut into passes by the `batch` caps defers this to the pass that finishes it. That pass
reads the compact keys of the files the earlier passes wrote again, writing nothing (`export_keys`),
but for the files whose keys passes in this process kept (`CarriedKeys`, the in-process engine's).
A capped export finds the duplicates an uncapped one finds, once.

An export writes one index, as its shape has it. The reader's documents hold the shape's columns,
and only the rows its `where` holds. Each is written under its routing value, through the index's
ingest pipeline (`Target.shape`, `Target.pipeline`), as the writes of changes are.
"""

from __future__ import annotations

import hashlib
import json
import math
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from icecdc.changelog import ChangeStats
from icecdc.destination.sink import SinkStats, write_documents
from icecdc.engines.target import Target
from icecdc.errors import DuplicateIdentifier, ProcessingError
from icecdc.model import Write, ordered_routings
from icecdc.reading.reader import Located, TableReader
from icecdc.reading.tasks import ExportTasks, FileTask

# The compact key of a row; `key` is the first 8 bytes of the BLAKE2b digest of its `_id`.
KEY_SCHEMA = pa.schema([("key", pa.int64()), ("task", pa.int32()), ("position", pa.int64())])
KEY_BYTES: int = sum(f.type.bit_width for f in KEY_SCHEMA) // 8
# Rows written per call of the sink, their keys then handed on: a task holds this many keys at most.
BLOCK_ROWS = 20_000
# Rows whose compact keys an export's passes in one process keep for the pass that finishes it
# (`CarriedKeys`), ~20 bytes each; the keys of the files beyond are read again.
CARRIED_ROWS = 4_000_000
# Bytes of compact keys one bucket of the key shuffle holds at most (KEY_BYTES a row): a task that
# looks for keys seen twice holds its bucket's keys, so the buckets grow in number with the rows.
KEYS_PER_BUCKET_BYTES = 64 * 2**20


@dataclass
class ExportTally:
    """What export tasks did, added up (a Spark accumulator's value, or the in-process workers')."""

    changes: ChangeStats = field(default_factory=ChangeStats)
    writes: SinkStats = field(default_factory=SinkStats)

    def add(self, other: ExportTally) -> ExportTally:
        self.changes.add(other.changes)
        self.writes.add(other.writes)
        return self


def key_of(doc_id: str) -> int:
    """The `_id`'s compact key: the same on every worker (Python's `hash` is salted per process)."""
    return int.from_bytes(
        hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "little", signed=True
    )


def export_rows(
    reader: TableReader,
    target: Target,
    tasks: Iterable[tuple[int, FileTask]],
    tally: Any,
    dead_lettered: Any = None,
) -> Iterator[pa.RecordBatch]:
    """Write the documents of the numbered tasks' rows, and yield their compact keys.

    The keys (`KEY_SCHEMA`) come a block of rows at a time, so that a task holds one
    block's keys, whatever its files' size.

    `tally` counts rows and writes; `dead_lettered` counts the rows that could not become documents.
    Each is a Spark accumulator or the tally itself: an `ExportTally` and a `LetterTally`.
    """
    if reader.shapes != (target.shape,):  # documents of another shape than the index's
        raise ProcessingError(
            f"table {target.table!r}: an export into {target.index!r} must read with its "
            "shape alone"
        )
    client = target.client()
    rows = reader.located(tasks, dead_lettered)
    while True:
        keys, numbers, positions = array("q"), array("i"), array("q")
        stats = write_documents(
            client,
            target.opensearch,
            target.index,
            _writes(islice(rows, BLOCK_ROWS), keys, numbers, positions),
            target.dead_letters if target.dead_letter else None,
            target.mode,
        )
        if not keys:
            return
        tally.add(ExportTally(ChangeStats(rows=len(keys)), stats))
        yield pa.record_batch([pa.array(a) for a in (keys, numbers, positions)], schema=KEY_SCHEMA)


def export_keys(
    reader: TableReader, tasks: Iterable[tuple[int, FileTask]]
) -> Iterator[pa.RecordBatch]:
    """The compact keys of the numbered tasks' rows, a block at a time; nothing written.

    These are the files an earlier pass of the export wrote (`PassTasks.earlier`). The keys follow
    `KEY_SCHEMA`; no row is dead-lettered.
    """
    rows = reader.located(tasks, letters=False)
    while True:
        keys, numbers, positions = array("q"), array("i"), array("q")
        for _ in _writes(islice(rows, BLOCK_ROWS), keys, numbers, positions):
            pass
        if not keys:
            return
        yield pa.record_batch([pa.array(a) for a in (keys, numbers, positions)], schema=KEY_SCHEMA)


def numbered_after(tasks: ExportTasks) -> list[tuple[int, FileTask]]:
    """The earlier passes' tasks, numbered after the pass's own (`ExportTasks.every`)."""
    return [(len(tasks.written) + number, task) for number, task in enumerate(tasks.earlier or [])]


def _writes(
    block: Iterable[Located], keys: array[int], numbers: array[int], positions: array[int]
) -> Iterator[Write]:
    """The rows' writes; their keys and places appended as they go to the sink."""
    for row in block:
        keys.append(key_of(row.doc_id))
        numbers.append(row.task)
        positions.append(row.position)
        yield Write(row.doc_id, row.sequence_number, row.document, row.routing)


def bucket_count(rows: int, cores: int) -> int:
    """How many buckets the keys of an export of `rows` rows are shuffled in.

    At least one per core, each of at most KEYS_PER_BUCKET_BYTES of keys. A power of
    two, as a key's bucket is its low bits.
    """
    wanted = max(cores, math.ceil(rows * KEY_BYTES / KEYS_PER_BUCKET_BYTES), 1)
    return 1 << (wanted - 1).bit_length()


def by_bucket(keys: pa.RecordBatch, buckets: int) -> Iterator[tuple[int, pa.RecordBatch]]:
    """The keys cut by bucket, as (bucket, keys) for a shuffle of a few Arrow batches a block."""
    bucket = pc.bit_wise_and(keys["key"], buckets - 1)
    for number in range(buckets):
        part = keys.filter(pc.equal(bucket, number))
        if part.num_rows:
            yield number, part


def candidates(keys: pa.Table) -> pa.Table:
    """The rows (task, position) whose keys more than one row has."""
    counts = keys.group_by("key").aggregate([("key", "count")])
    shared = counts.filter(pc.greater(counts["key_count"], 1))["key"]
    return keys.filter(pc.is_in(keys["key"], value_set=shared)).select(["task", "position"])


def candidate_rows(
    reader: TableReader, tasks: Iterable[tuple[int, FileTask, list[int]]]
) -> Iterator[tuple[str, tuple[int, str, str]]]:
    """The candidates' rows read again from their tasks' files, keyed by `_id`.

    Each value is the sequence number, the document and the file.
    """
    for number, task, positions in tasks:
        for row in reader.located([(number, task)], positions=set(positions)):
            yield row.doc_id, (row.sequence_number, row.document, task.data_file.file_path)


def settle_duplicates(
    target: Target, rows_by_id: Iterable[tuple[str, Iterable[tuple[int, str, str]]]]
) -> SinkStats:
    """Delete the document of every `_id` several rows share, then dead-letter their documents.

    The document is deleted under each routing value of its rows, as each was written.
    Without a dead-letter location the error is raised instead. Ids of one row are a
    hash collision and are left as written.
    """
    found = [
        DuplicateIdentifier(
            doc_id,
            rows[0][0],
            [document for _, document, _ in rows],
            tuple(sorted({f for *_, f in rows})),
        )
        for doc_id, grouped in rows_by_id
        if len(rows := sorted(grouped)) > 1
    ]
    if not found:
        return SinkStats()
    deletes = (
        Write(d.doc_id, d.sequence_number, None, routing)
        for d in found
        for routing in ordered_routings(
            target.shape.routing_of(json.loads(document)) for document in d.documents
        )
    )
    stats = write_documents(
        target.client(),
        target.opensearch,
        target.index,
        deletes,
        None,
        replace(target.mode, pipeline=None),
    )
    stats.lettered(target.duplicates(found))
    return stats


# A file's place among the files an export's earlier passes wrote: the export (table, index,
# snapshot) and the file's path. Another index, generation or export snapshot holds other rows.
FileScope = tuple[str, str, int, str]


@dataclass
class CarriedKeys:
    """The compact keys of the files an export's earlier passes in this process wrote.

    The pass that finishes the export takes them (`take`), so that it reads the keys of only the
    files no pass here kept (an earlier run's, or beyond CARRIED_ROWS) again, not of the whole
    export. Each file's keys are its rows' whole, as its task wrote them; a file written again
    (its pass failed after writing) is kept anew, once.
    """

    limit: int = CARRIED_ROWS
    _keys: list[pa.Table] = field(default_factory=list)  # key, file, position
    _files: dict[FileScope, int] = field(default_factory=dict)  # the file numbers in `_keys`
    _numbered: int = 0
    rows: int = 0

    def keep(self, target: Target, written: list[FileTask], keys: list[pa.Table]) -> None:
        """Keep the keys (`KEY_SCHEMA`) of a pass's written tasks, while under the limit."""
        count = sum(k.num_rows for k in keys)
        if not written or self.rows + count > self.limit:
            return
        first, self._numbered = self._numbered, self._numbered + len(written)
        for number, task in enumerate(written):
            self._files[_scope(target, task)] = first + number
        for part in keys:
            files = pc.add(part["task"], pa.scalar(first, pa.int32()))
            self._keys.append(pa.table([part["key"], files, part["position"]], KEPT_SCHEMA))
        self.rows += count

    def held(self, table_name: str, index: str) -> frozenset[tuple[int, str]]:
        """The files (snapshot, path) of the table's index whose keys this holds."""
        return frozenset((s[2], s[3]) for s in self._files if s[:2] == (table_name, index))

    def take(
        self,
        target: Target,
        numbered: list[tuple[int, FileTask]],
        untasked: dict[tuple[int, str], int] | None = None,
    ) -> tuple[pa.Table, list[tuple[int, FileTask]]]:
        """The keys (`KEY_SCHEMA`) of the numbered tasks this holds, and the tasks it does not.

        `untasked` numbers held files (snapshot, path) no task was made for: their keys come too.
        What this held of the target's export is let go.
        """
        number_of = {self._files.get(_scope(target, task)): n for n, task in numbered}
        for (snapshot, path), n in (untasked or {}).items():
            number_of[self._files.get((target.table, target.index, snapshot, path))] = n
        number_of.pop(None, None)
        table = pa.concat_tables(self._keys) if self._keys else KEPT_SCHEMA.empty_table()
        kept = [number_of.get(f) for f in range(self._numbered)]
        task = pc.take(pa.array(kept, pa.int32()), table["file"])
        keys = pa.table([table["key"], task, table["position"]], KEY_SCHEMA).filter(
            pc.is_valid(task)
        )
        rest = [(n, t) for n, t in numbered if _scope(target, t) not in self._files]
        self._release(target)
        return keys, rest

    def _release(self, target: Target) -> None:
        gone = {f for s, f in self._files.items() if s[:2] == (target.table, target.index)}
        if not gone:
            return
        self._files = {s: f for s, f in self._files.items() if f not in gone}
        held = pa.array(sorted(self._files.values()), pa.int32())
        self._keys = [k.filter(pc.is_in(k["file"], value_set=held)) for k in self._keys]
        self.rows = sum(k.num_rows for k in self._keys)


KEPT_SCHEMA = pa.schema([("key", pa.int64()), ("file", pa.int32()), ("position", pa.int64())])


def _scope(target: Target, task: FileTask) -> FileScope:
    return (target.table, target.index, task.snapshot_id, task.data_file.file_path)


def settle_in_one_place(
    reader: TableReader,
    target: Target,
    tasks: ExportTasks,
    keys: list[pa.Table],
    carried: CarriedKeys | None = None,
) -> SinkStats:
    """Settle an export's duplicate identifiers in this process: the in-process engine's shuffle.

    `keys` are the compact keys of the written rows; the earlier passes' are those `carried` holds
    of them, and the others' are read again.
    """
    every = tasks.every
    earlier = numbered_after(tasks)
    # the carried files no task was made for, numbered after every task
    untasked = {scope: len(every) + n for n, scope in enumerate(sorted(tasks.carried))}
    if carried is not None:
        kept, earlier = carried.take(target, earlier, untasked)
        keys = [*keys, kept]
    found = candidates(
        pa.concat_tables(
            [*keys, pa.Table.from_batches(list(export_keys(reader, earlier)), KEY_SCHEMA)]
        )
    )
    positions: dict[int, list[int]] = {}
    for number, position in zip(
        found["task"].to_pylist(), found["position"].to_pylist(), strict=True
    ):
        positions.setdefault(number, []).append(position)
    task_of = dict(enumerate(every)) | _untasked_tasks(tasks, untasked, set(positions))
    rows_by_id: dict[str, list[tuple[int, str, str]]] = {}
    for doc_id, row in candidate_rows(reader, [(n, task_of[n], p) for n, p in positions.items()]):
        rows_by_id.setdefault(doc_id, []).append(row)
    return settle_duplicates(target, rows_by_id.items())


def _untasked_tasks(
    tasks: ExportTasks, untasked: dict[tuple[int, str], int], numbers: set[int]
) -> dict[int, FileTask]:
    """The tasks of the untasked files holding candidates, by their numbers; made only for them."""
    wanted = {scope for scope, n in untasked.items() if n in numbers}
    if not wanted:
        return {}
    if tasks.resolve is None:
        raise ProcessingError("an export's carried files hold candidates, but no task is made")
    made = {(t.snapshot_id, t.data_file.file_path): t for t in tasks.resolve(wanted)}
    if set(made) != wanted:
        raise ProcessingError(f"an export's files are gone: {sorted(wanted - set(made))}")
    return {untasked[scope]: task for scope, task in made.items()}

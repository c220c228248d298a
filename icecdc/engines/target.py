"""What both engines run where the changes of a key meet: net writes, bulk writes, dead letters.

A key's net write goes under its routing value. On Spark this is executor code;
in-process it runs in the calling process.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import islice

from icecdc.changelog import Appended, ChangeStats, live_rows, net_write
from icecdc.config import OpenSearchConfig
from icecdc.deadletters import (
    DeadLetter,
    DeadLetters,
    LetterTally,
    shared_id_cause,
    unique_columns_rule,
)
from icecdc.destination.client import OpenSearch, open_client
from icecdc.destination.port import Destination
from icecdc.destination.sink import (
    BulkMode,
    Fence,
    Refusal,
    SinkStats,
    refusal_letter,
    write_documents,
)
from icecdc.documents import Shape, encode_document
from icecdc.errors import DuplicateIdentifier, HeldOutIdentifier, ProcessingError
from icecdc.model import NO_IMAGE, ROUTED_KEY, ChangeRow, VersionType, Write, ordered_routings
from icecdc.reading.reader import INDEX_SEPARATOR

# Writes per lookup of the keys among them whose first change is an append (`_unless_held`).
APPEND_LOOKUP = 1000


@dataclass(frozen=True)
class HeldOut:
    """What a held-out key's write becomes where the index holds no document of it.

    `write` deletes the key's document; `letters` are the rows the pass wrote of it, each to join
    the key's open letters (`HeldOutIdentifier`).
    """

    write: Write
    letters: list[DuplicateIdentifier]


@dataclass
class AppendChecks:
    """What a pass asks its index about, gathered while it makes each key's write."""

    appends: dict[str, Appended] = field(default_factory=dict)  # keys whose first change appends
    # held-out keys (`Target.held_out`) the pass leaves several live rows of
    shared: dict[str, HeldOut] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """Where a pass writes a table's documents, and their dead letters; small and picklable."""

    table: str
    index: str
    opensearch: OpenSearchConfig
    dead_letter: str | None
    snapshot_ids: dict[int, int]  # sequence number → snapshot id, to name a dead letter's snapshot
    # EXTERNAL_GTE while a pass exports: it rewrites documents of equal version
    version_type: VersionType
    identifier_columns: tuple[str, ...]
    shape: Shape = Shape()  # the index's: its routing column
    pipeline: str | None = None  # the ingest pipeline of its index writes
    # ids whose rows are open dead letters for sharing them, to the rows those name
    # (`DeadLetters.shared_rows`)
    held_out: Mapping[str, int] = field(default_factory=dict)
    # where versions do not order the writes (Serverless): the table's lease, fencing each request
    fence: Fence | None = None
    # whether the destination keeps external versions; without (Serverless), with or without a
    # lease, the order of the writes alone decides
    versions: bool = True
    # the run's destination, in the process that runs the pass; not shipped to another process
    destination: Destination | None = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, object]:
        """What goes to another process (a Spark executor, a worker): all but the destination."""
        return {k: v for k, v in self.__dict__.items() if k != "destination"}

    def client(self) -> OpenSearch:
        """The run's client in its own process; elsewhere one opened from `opensearch`.

        Elsewhere is a Spark executor, or a worker forked from the run, which must not share the
        run's connections. The section comes with its secret resolved by the run
        (`Destination.open`): a client opened there reads no secret.
        """
        destination = self.destination
        if destination is not None and destination.here:
            return destination.client
        return open_client(self.opensearch)

    @property
    def letters(self) -> DeadLetters:
        """The dead-letter sink of the run, or one at `dead_letter` in another process."""
        assert self.dead_letter is not None
        sink = None if self.destination is None else self.destination.dead_letters
        return DeadLetters(self.dead_letter) if sink is None else sink

    @property
    def mode(self) -> BulkMode:
        """How the writes of this target are sent."""
        return BulkMode(self.version_type, self.pipeline, fence=self.fence)

    def writes(
        self,
        doc_id: str,
        changes: Iterable[ChangeRow],
        stats: ChangeStats,
        duplicates: list[DuplicateIdentifier],
        checks: AppendChecks | None = None,
    ) -> Iterator[Write]:
        """The key's net write, and, when routed, deletes under the other routing values it had.

        A routed key's changes may have had other routing values: a delete goes under
        each. When one of its changes is a delete by key without its routing value, the
        sink also sends a delete under every other routing value the index holds the key's
        document under (`Write.routing_lookup`).

        Where the old and the new routing value go to one shard, they name one document. The
        deletes then carry the index's version, and their order decides. With EXTERNAL the
        index comes first, and the delete after it is refused as superseded; a delete first
        would leave a tombstone of that version that refuses the index. With EXTERNAL_GTE an
        equal version passes, so the deletes come first: the index passes their tombstone, and
        they never take the document just indexed. Without versions (`versions` false) nothing
        refuses a delete, so the deletes come first too, whether or not a lease fences the pass.

        `checks` gathers what the index is asked about: the key's first append, and what the
        write of a held-out key that keeps several live rows becomes (`HeldOut`).
        """
        if self.shape.routing is None:
            held_out = None
            if checks is not None and doc_id in self.held_out:
                changes = list(changes)
                held_out = _held_out(doc_id, self.held_out[doc_id], changes)
            appends = None if checks is None else checks.appends
            write = net_write(doc_id, changes, stats, duplicates, appends)
            if write is None:
                return
            if checks is not None and held_out is not None:
                checks.shared[doc_id] = held_out
            yield write
            return
        changes = list(changes)
        write = net_write(doc_id, changes, stats, duplicates)
        if write is None:
            return
        seen = {self._routing(c.document) for c in changes if c.document != NO_IMAGE}
        indexed = (
            []
            if write.document is None
            else [replace(write, routing=self._routing(write.document))]
        )
        written = {w.routing for w in indexed}
        deletes = [
            Write(doc_id, write.version, None, old) for old in ordered_routings(seen - written)
        ]
        # the routing value it was indexed under is unknown
        if any(c.document == NO_IMAGE for c in changes):
            deletes.append(
                Write(doc_id, write.version, None, routing_lookup=ordered_routings(seen | written))
            )
        # without versions (Serverless) the order in the request alone decides: deletes first
        deletes_first = self.version_type == VersionType.EXTERNAL_GTE or not self.versions
        yield from (deletes + indexed) if deletes_first else (indexed + deletes)

    def _routing(self, document: str) -> str | None:
        if document.startswith(ROUTED_KEY):  # a delete by key that knows its routing value
            return document.removeprefix(ROUTED_KEY)
        return self.shape.routing_of(json.loads(document))

    def dead_letters(self, refused: list[Refusal]) -> None:
        self.letters.write(
            refusal_letter(self.table, self.snapshot_ids.get(refusal[0].version), refusal)
            for refusal in refused
        )

    def duplicates(self, found: list[DuplicateIdentifier]) -> LetterTally:
        """Keys with several live rows in one snapshot: dead letters, or an error.

        Dead letters are counted by cause. Without a dead-letter
        location, the error stops the batch.
        """
        cause = shared_id_cause(self.identifier_columns)
        rule, snapshots = unique_columns_rule(self.identifier_columns), self.snapshot_ids
        reasons = [
            (d, f"table {self.table!r}, snapshot {snapshots.get(d.sequence_number)}: {d}; {rule}")
            for d in found
        ]
        if self.dead_letter is None:
            raise ProcessingError(
                f"{reasons[0][1]} ({len(found)} such identifiers in this part of the batch)"
            )
        letters = [
            DeadLetter(
                self.table,
                self.snapshot_ids.get(d.sequence_number),
                d.sequence_number,
                d.doc_id,
                None,
                reason,
                document,
                cause=cause,
            )
            for d, reason in reasons
            for document in d.documents
        ]
        self.letters.write(letters)
        return LetterTally.of(letters)


@dataclass(frozen=True)
class Targets:
    """Several indexes of one table written from one read.

    The reader keys each index's changes by its position here
    (`icecdc.reading.reader.index_key`). Every target shares the table, its OpenSearch, dead
    letters and version type; each has its own index, shape and pipeline.
    """

    each: tuple[Target, ...]

    @property
    def first(self) -> Target:
        return self.each[0]


def write_keyed_changes(
    target: Target | Targets,
    keyed_changes: Iterable[tuple[str, Iterable[ChangeRow]]],
    written: Callable[[int], None] | None = None,
) -> tuple[ChangeStats, SinkStats]:
    """Reduce each key's changes to its net write and bulk the writes; return the counters.

    `written` is told how many writes each bulk request settled, for progress.
    """
    change_stats = ChangeStats()
    duplicates: list[DuplicateIdentifier] = []
    one = target if isinstance(target, Target) else target.first
    client = one.client()  # one for the lookups and the writes
    writes: Iterator[Write]
    if isinstance(target, Target):
        # an unrouted index holds a key's document once: an append of a key it holds is a
        # second live row; a filtered one may see a row move into its filter as an append
        checked = (
            target.identifier_columns
            and target.shape.routing is None
            and target.shape.where is None
        )
        checks = AppendChecks() if checked else None
        one_target = target
        writes = (
            w
            for doc_id, changes in keyed_changes
            for w in one_target.writes(doc_id, changes, change_stats, duplicates, checks)
        )
        if checks is not None:
            writes = _unless_held(client, target, writes, checks, duplicates)
        pipelines: tuple[tuple[str, str], ...] = ()
    else:
        writes = _each_index(target, keyed_changes, change_stats, duplicates)
        pipelines = tuple((t.index, t.pipeline) for t in target.each if t.pipeline is not None)
    if one.dead_letter is None:
        writes = _unless_shared(one, writes, duplicates)
    sink_stats = write_documents(
        client,
        one.opensearch,
        one.index,
        writes,
        one.dead_letters if one.dead_letter else None,
        replace(one.mode, pipelines=pipelines),
        written,
    )
    if duplicates:
        sink_stats.lettered(one.duplicates(duplicates))
    return change_stats, sink_stats


def _unless_shared(
    target: Target, writes: Iterator[Write], duplicates: list[DuplicateIdentifier]
) -> Iterator[Write]:
    """The writes, until a key is found shared by several live rows: then the pass fails.

    Without a dead-letter location such a key fails the pass (`Target.duplicates` raises). It
    raises before the key's write is sent, or any write still unsent: a failed pass must not
    delete the key's document, which tells the next pass that a row of it was live before.
    """
    for write in writes:
        if duplicates:
            target.duplicates(duplicates)
        yield write
    if duplicates:
        target.duplicates(duplicates)


def _each_index(
    targets: Targets,
    keyed_changes: Iterable[tuple[str, Iterable[ChangeRow]]],
    stats: ChangeStats,
    duplicates: list[DuplicateIdentifier],
) -> Iterator[Write]:
    """The writes of every index, each naming its index (one bulk request may carry several)."""
    for key, changes in keyed_changes:
        position, doc_id = key.split(INDEX_SEPARATOR, 1)
        target = targets.each[int(position)]
        for write in target.writes(doc_id, changes, stats, duplicates):
            yield replace(write, index=target.index)


def _unless_held(
    client: OpenSearch,
    target: Target,
    writes: Iterable[Write],
    checks: AppendChecks,
    duplicates: list[DuplicateIdentifier],
) -> Iterator[Write]:
    """The writes, but for a key appended while the index holds its document at a lower version.

    Such a key's first change in the pass is an append (`net_write`'s `appends`). A row
    of it was live before, so the append is a second live row. Both rows are `duplicates`, as
    are several rows one change appends (copies of a key in a collapsed run), held or not.
    Unless the pass left one row of the key (`Appended.rows_at_end`), whose write stands, the
    key's document is deleted at the pass's last version of it; a later snapshot's document
    of it is reported (`HeldOutIdentifier`), not written: the key's rows stay letters until a
    replay. Without a dead-letter location, the error is raised before the block is written.

    A held-out id (`Target.held_out`) the index holds no document of, when the pass leaves
    several rows of it (`AppendChecks.shared`), gets no document either: its rows are dead
    letters for sharing it, and every row the pass wrote of it joins them (`HeldOut`), also one
    a later delete of another row leaves live.

    One `_mget` goes per APPEND_LOOKUP writes that hold an append or a held-out id, and answers
    the versions and the few documents found. A pass of updates and deletes asks nothing, but of
    held-out ids.
    """
    writes, versions = iter(writes), target.versions
    while block := list(islice(writes, APPEND_LOOKUP)):
        appends = checks.appends
        asked = [w.doc_id for w in block if w.doc_id in appends or w.doc_id in checks.shared]
        held = _held(client, target.index, asked) if asked else {}
        found: list[DuplicateIdentifier] = []
        for position, write in enumerate(block):
            appended = appends.pop(write.doc_id, None)
            document = held.get(write.doc_id)
            held_out = checks.shared.pop(write.doc_id, None)
            if document is None and held_out is not None:
                found += held_out.letters
                block[position] = held_out.write
            if appended is None:
                continue
            before = _live_before(document, appended, write, versions)
            rows = ([document[1]] if document is not None and before else []) + list(
                appended.documents
            )
            if len(rows) > 1:
                found.append(DuplicateIdentifier(write.doc_id, appended.sequence_number, rows))
            if not before or write.document is None or appended.rows_at_end <= 1:
                continue  # a delete, or the pass left one row of the key: its write stands
            if write.version != appended.sequence_number:
                found.append(HeldOutIdentifier(write.doc_id, write.version, [write.document]))
            block[position] = Write(write.doc_id, write.version, None)
        if found and target.dead_letter is None:
            # raises before the block is written: the next pass finds them again
            target.duplicates(found)
        duplicates += found
        yield from block


def _live_before(
    held: tuple[int, str] | None, appended: Appended, write: Write, versions: bool
) -> bool:
    """Whether the document the index holds of an appended key is a row live before the append.

    With versions, one at or above the append's is this very change, written by a pass that died.
    Without (Serverless: `_version` counts the writes), a document the pass would write itself,
    its net write or a row appended, is taken for that change; any other is a row live before.
    """
    if held is None:
        return False
    if versions:
        return held[0] < appended.sequence_number
    return held[1] != write.document and held[1] not in appended.documents


def _held_out(doc_id: str, lettered: int, changes: list[ChangeRow]) -> HeldOut | None:
    """What the key's write becomes if it stays held out; None when one row or none is left.

    `lettered` counts the rows its open letters name (`DeadLetters.shared_rows`). The letters
    are the held-out rows alone: the key's other duplicates go where its plain write's do.
    """
    if live_rows(lettered, changes) <= 1:
        return None
    found: list[DuplicateIdentifier] = []
    write = net_write(doc_id, changes, ChangeStats(), found, shared_rows=lettered)
    if write is None:
        return None
    letters: list[DuplicateIdentifier] = [d for d in found if isinstance(d, HeldOutIdentifier)]
    if write.document is not None:  # a snapshot's own copies recounted the rows: fewer than these
        letters.append(HeldOutIdentifier(doc_id, write.version, [write.document]))
    return HeldOut(Write(doc_id, write.version, None), letters)


def _held(client: OpenSearch, index: str, ids: list[str]) -> dict[str, tuple[int, str]]:
    """The documents the index holds of `ids`: id → (version, document text)."""
    docs = client.mget(index=index, body={"ids": ids})["docs"]
    found = [d for d in docs if d.get("found")]
    return {d["_id"]: (int(d["_version"]), encode_document(d["_source"])) for d in found}

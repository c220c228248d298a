"""What becomes of a table's index: one pure decision, from facts read once.

"Must this index be rebuilt, and into which copy?" is asked by planning (which items to write),
by `has_work` and `status` (is there work, and why) and by the pass (what it plans, where it
writes). Each reads the facts it needs (the table's lineage, the checkpoint, the recorded pass
end, the identifier columns, the configured shape and owner) and asks the functions here, so that
they never disagree: each time they did, an index was left behind with `status` reporting it
caught up. The index's facts, and the destination's capabilities, are read in one place and one
order, `icecdc.destination.facts`.

Nothing here reads or writes: the facts are frozen dataclasses, and so is the `Verdict`.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from enum import StrEnum

from icecdc.model import NO_SNAPSHOT, Checkpoint, ResyncKind


class Fate(StrEnum):
    """What becomes of an index."""

    FOLLOW = "follow"  # apply the table's commits one after the other
    REWRITE = "rewrite"  # export into the index, then delete what the export did not write
    RESET = "reset"  # export into a new generation (versions would go backwards, or ids change)
    NEW_GENERATION = "new generation"  # a first export: the index holds documents none accounts for
    UNFINISHED = "unfinished"  # a run left the index unfinished: a swap, a copy, leftovers
    REFUSE = "refuse"  # the name holds an index that is not this table's

    @property
    def resync(self) -> ResyncKind:
        """The kind of export planning writes for this fate (NONE: none, or a first export's)."""
        kinds = {Fate.REWRITE: ResyncKind.REWRITE, Fate.RESET: ResyncKind.RESET}
        return kinds.get(self, ResyncKind.NONE)


class Copy(StrEnum):
    """Which copy of the index a pass writes."""

    ALIAS = "alias"  # the generation the alias names
    RESUME = "resume"  # the generation a rebuild's earlier passes wrote
    NEW = "new"  # a generation the pass creates


@dataclass(frozen=True)
class Verdict:
    """An index's fate, why (the text the CLI and `status` print), and the copy to write."""

    fate: Fate = Fate.FOLLOW
    reason: str = ""
    copy: Copy = Copy.ALIAS

    @property
    def follows(self) -> bool:
        return self.fate == Fate.FOLLOW


FOLLOW = Verdict()


@dataclass(frozen=True)
class TableFacts:
    """What the table's metadata and state say about following it from the checkpoint.

    `known_sequence_number`: the newest sequence number this view of the table knows.
    `pass_end_on_lineage`: the recorded pass end is an ancestor of the current snapshot.
    `checkpoint_ancestor`: the checkpoint is (the changes since can be read).
    `checkpoint_exists`: the checkpoint's snapshot is still in the metadata.
    `current_sequence_number`: the current snapshot's (None: the table has none)."""

    table_uuid: str
    schema_id: int
    identifiers: tuple[str, ...]  # the configured identifier columns
    checkpoint: Checkpoint | None
    pass_end: Checkpoint | None = None
    known_sequence_number: int = 0
    pass_end_on_lineage: bool = True
    checkpoint_ancestor: bool = True
    checkpoint_exists: bool = True
    current_sequence_number: int | None = None


def table_verdict(facts: TableFacts) -> Verdict:
    """FOLLOW when the index can follow the table commit by commit; else how to rebuild it and why.

    REWRITE (export, then delete what the export did not write) works while versions only grow;
    RESET (empty the index, then export) where they would go backwards or ids change, or where a
    pass that wrote and did not finish wrote commits the table has rolled back since: their
    documents carry versions the table's next commits may not reach, and that a REWRITE would
    not delete."""
    checkpoint = facts.checkpoint
    if checkpoint is None:
        return FOLLOW
    if checkpoint.table_uuid != facts.table_uuid:
        uuids = f"UUID {checkpoint.table_uuid} → {facts.table_uuid}"
        return Verdict(Fate.RESET, f"the table was dropped and created again ({uuids})", Copy.NEW)
    recorded = checkpoint.recorded_identifiers
    if recorded is not None and recorded != facts.identifiers:
        before, after = (list(ids) if ids else "none" for ids in (recorded, facts.identifiers))
        why = f"the identifier columns changed ({before} → {after})"
        return Verdict(Fate.RESET, why, Copy.NEW)
    # Before the lineage: a REWRITE for an expired checkpoint would keep what such a pass wrote.
    rolled_back = rolled_back_end(facts)
    if rolled_back is not None:
        why = f"an unfinished pass wrote through snapshot {rolled_back}, rolled back since"
        return Verdict(Fate.RESET, why, Copy.NEW)
    if not facts.checkpoint_ancestor:
        current = facts.current_sequence_number
        assert current is not None
        if facts.checkpoint_exists or current <= checkpoint.sequence_number:
            why = f"the table was rolled back: checkpoint snapshot {checkpoint.snapshot_id}"
            return Verdict(Fate.RESET, f"{why} is not an ancestor", Copy.NEW)
        why = f"checkpoint snapshot {checkpoint.snapshot_id} was expired"
        return Verdict(Fate.REWRITE, f"{why}: the changes since cannot be read")
    if checkpoint.schema_id >= 0 and checkpoint.schema_id != facts.schema_id:
        why = f"the schema changed (schema {checkpoint.schema_id} → {facts.schema_id})"
        return Verdict(Fate.REWRITE, why)
    return FOLLOW


@dataclass(frozen=True)
class ExportFacts:
    """What the store holds of first exports when a first export is planned.

    `planned`: an export of the snapshot to export is pending already, `planned_reset` says it was
    planned as a RESET. `abandoned`: the snapshots of exports abandoned unfinished (rolled back, or
    of the table before it was dropped and created again).
    """

    planned: bool = False
    planned_reset: bool = False
    abandoned: frozenset[int] = frozenset()


def first_export_verdict(facts: ExportFacts) -> Verdict:
    """RESET when a first export follows one abandoned unfinished; else FOLLOW.

    The abandoned export may have written documents this one would not replace: rows the new
    snapshot lacks, or a rolled-back snapshot's rows at a higher version. So this export builds a
    new generation. Once its items are in the store, they say so themselves.
    """
    if facts.planned:  # as it was planned
        if facts.planned_reset:
            return Verdict(Fate.RESET, "an export over an abandoned one goes on", Copy.NEW)
        return FOLLOW
    if not facts.abandoned:
        return FOLLOW
    why = (
        f"an export of snapshot {sorted(facts.abandoned)} was abandoned unfinished "
        "(rolled back, or the table created again)"
    )
    return Verdict(Fate.RESET, why, Copy.NEW)


def files_gone_verdict(why: str, listed_now: bool) -> Verdict | None:
    """REWRITE when files a batch needed are gone; None when the table itself lost one.

    Snapshot expiration deleted files after the batch was planned: the changes in between cannot
    be read any more, so the index is rewritten from the current snapshot. A file the current
    snapshot still lists is lost by the table: no rewrite can read it.
    """
    return None if listed_now else Verdict(Fate.REWRITE, why)


def rolled_back_end(facts: TableFacts) -> int | None:
    """The end a pass recorded when a rollback left it behind; else None.

    That is when the end is past the checkpoint and off the current lineage, though this view of
    the table knows its sequence number. A commit newer than the view is no rollback.
    """
    end, checkpoint = facts.pass_end, facts.checkpoint
    if end is None or checkpoint is None or end.table_uuid != checkpoint.table_uuid:
        return None
    if end.sequence_number <= checkpoint.sequence_number or facts.pass_end_on_lineage:
        return None
    return end.snapshot_id if end.sequence_number <= facts.known_sequence_number else None


EVERY_COLUMN_AND_ROW = "every column and row"  # the shape of an index that records none


def reshaped(name: str, current: str | None, recorded: str, shape: str) -> str:
    """Why the index `name` holds another shape of the table than the configured `shape`.

    `shape` is a `Shape.fingerprint`. The answer is "" when the index holds this shape, or when
    there is no index, as `current` is None. `recorded` is the shape that the marker of the
    generation the alias names records. It is "" for a concrete index named like the alias, made
    by an icecdc before generations or by a stray write. Such an index is taken to hold every
    column and row, so for another shape it is rebuilt into a generation.
    """
    if current is None or recorded == shape:
        return ""
    shapes = f"{recorded or EVERY_COLUMN_AND_ROW} → {shape or EVERY_COLUMN_AND_ROW}"
    return f"index {name!r} holds another shape of the table ({shapes})"


@dataclass(frozen=True)
class IndexFound:
    """The index the alias names against the one the checkpoint records.

    `found` is the uuid of the index the alias names, or None when it names none. `built` holds the
    generations a rebuild built for the checkpoint but did not swap in. `leftovers` holds the
    generations the alias does not name; they are read only when the alias names the checkpoint's
    index.
    """

    found: str | None
    built: tuple[str, ...] = ()
    leftovers: tuple[str, ...] = ()


def unfinished(name: str, recorded: str, index: IndexFound) -> str:
    """Why the index `name` needs a pass though no work item is pending; "" when it does not.

    The reasons are a rebuild's swap not made, the index deleted or replaced so that its uuid is
    not the `recorded` one, and a generation left over.
    """
    if index.built:
        return f"the alias {name!r} was not swapped to the rebuilt generation {index.built[0]!r}"
    if index.found != recorded:
        gone = "was deleted" if index.found is None else "was replaced by another index"
        return f"index {name!r} {gone}"
    if index.leftovers:
        return f"generations {', '.join(index.leftovers)} of index {name!r} are left over"
    return ""


def replaced(name: str, recorded: str, found: str | None) -> str:
    """Why the checkpoint's documents are no longer in the index `name`; "" when they are.

    The checkpoint wrote them into the index of uuid `recorded`; the index's uuid is now `found`.
    """
    if found is None:
        return f"index {name!r} was deleted"
    if found != recorded:
        return f"index {name!r} was replaced by another index (uuid {recorded} → {found})"
    return ""


@dataclass(frozen=True)
class IndexFacts:
    """What `destination.facts.read_facts` found of the index, as reasons ("": not so, or not read).

    `refused`: the name holds what is not this table's (someone else's, another deployment's).
    `unfinished`: what a run left (a swap not made, the index deleted or replaced, leftovers).
    `replaced`: the checkpoint's documents are no longer in the index (deleted, replaced).
    `unaccounted`: with no checkpoint, the index holds documents none accounts for.
    `reshaped`: the index holds another shape of the table than the configured one.
    `rebuilding`: a rebuild's items are pending (it goes on as planned)."""

    refused: str = ""
    unfinished: str = ""
    replaced: str = ""
    unaccounted: str = ""
    reshaped: str = ""
    rebuilding: bool = False


def index_verdict(facts: IndexFacts, synced: bool) -> Verdict:
    """What the index needs that no commit asks for, as `has_work` and `status` report it.

    `synced` says the table has a checkpoint. Before one, only a refusal or a run's leftovers
    count.
    """
    if facts.refused:
        return Verdict(Fate.REFUSE, facts.refused)
    if facts.unfinished:
        return Verdict(Fate.UNFINISHED, facts.unfinished)
    if synced and facts.reshaped:
        return Verdict(Fate.RESET, facts.reshaped, Copy.NEW)
    return FOLLOW


def pass_verdict(facts: IndexFacts, synced: bool) -> Verdict:
    """What a pass makes of its index before it selects its batch.

    It exports the table into a new generation, a RESET, when the checkpoint's documents are gone:
    the index under the name may hold any ids at any versions, such as one this table wrote under
    other identifier columns before it was renamed away and back, which a rewrite would keep. It
    builds a new generation for a first export, when `synced` is False, if the index holds documents
    none accounts for. It builds one for another shape, a RESET, unless a rebuild is under way
    already, as that one builds the configured shape.
    """
    if facts.replaced:
        return Verdict(Fate.RESET, facts.replaced, Copy.NEW)
    if not synced:
        if facts.unaccounted:
            return Verdict(Fate.NEW_GENERATION, facts.unaccounted, Copy.NEW)
        return FOLLOW
    if not facts.rebuilding and facts.reshaped:
        return Verdict(Fate.RESET, facts.reshaped, Copy.NEW)
    return FOLLOW


def tidies(verdict: Verdict, rebuilding: bool) -> bool:
    """Whether the pass deletes the generations the alias does not name.

    It does only when no rebuild is under way and no first export is to build a new one.
    `rebuilding` says a rebuild's items are pending, once the verdict's export is planned.
    """
    return verdict.fate != Fate.NEW_GENERATION and not rebuilding


def empty_verdict(table_uuid: str, checkpoint: Checkpoint | None, rebuild: str) -> Verdict:
    """What becomes of the index of a table with no snapshot: it holds nothing.

    It gets a NEW generation when the index held another table's documents, as the table was
    dropped and created again empty, or when it is to be rebuilt. `rebuild` says why, from
    `pass_verdict`, or from `unaccounted` when there is no checkpoint.
    """
    at = (checkpoint.table_uuid, checkpoint.snapshot_id) if checkpoint is not None else None
    if at in (None, (table_uuid, NO_SNAPSHOT)) and not rebuild:
        return FOLLOW
    return Verdict(Fate.RESET, rebuild or "created again, empty", Copy.NEW)


@dataclass(frozen=True)
class DestinationFacts:
    """What a pass knows of where it writes.

    `resync` holds the kinds of rebuild its items are. `export_anew` says a first export goes into
    a new generation. `takes_rewrite` says whether the index the alias names can take a rewrite,
    which it cannot when a type or the shape changed. `resumable` says whether a generation that a
    rebuild's earlier passes wrote can be resumed. `versions` says whether the destination orders
    writes by version: a rewrite in place deletes what its export did not write by version, so
    without them (Serverless) a rewrite is a new generation and an alias swap.
    """

    resync: AbstractSet[ResyncKind] = frozenset()
    export_anew: bool = False
    takes_rewrite: bool = True
    resumable: bool = False
    versions: bool = True


def needs_generation(facts: DestinationFacts) -> bool:
    """Whether the pass writes a generation the alias does not name yet.

    It does for a reset, for a first export into an index holding documents it did not write, and
    for a rewrite the index cannot take, or a destination without versions cannot.
    """
    rebuild = ResyncKind.RESET in facts.resync or facts.export_anew
    in_place = facts.takes_rewrite and facts.versions
    return rebuild or (ResyncKind.REWRITE in facts.resync and not in_place)


def copy_to_write(facts: DestinationFacts) -> Copy:
    """The copy the pass writes: the alias's, the rebuild's to resume, or a new generation."""
    if not needs_generation(facts):
        return Copy.ALIAS
    return Copy.RESUME if facts.resumable else Copy.NEW

"""Dead-letter replay: write again what was dead-lettered, once its cause is fixed.

A replay never writes the document kept in a letter, which may be stale. It looks the row of each
letter's id up in the table as of the checkpoint's snapshot and writes its document, or deletes
the document when the row is gone.

It writes under the table's lease at the checkpoint's sequence number with `external_gte`, so a
document a later change wrote, with a higher version, is never overwritten; its letter is marked
superseded. The row and its version are the checkpoint's, as a pass would have written them. The
index holds the table as of the checkpoint, which every later pass assumes, also one that
collapses a run of copy-on-write commits X→Y→X into nothing. A row fixed by a later commit is
written by that commit's sync; a replay after it marks the letter. A checkpoint whose snapshot
expired cannot be read: sync first.

Each letter whose write succeeds is marked replayed, so a second replay finds nothing to do. A
letter whose document is refused again stays, with the new reason. A letter without an id, from a
row that never became a document, cannot be looked up: it stays until `DeadLetters.mark_replayed`
marks it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace

from pyiceberg.table import Table

from icecdc.catalog import identifier_columns, load_table, open_catalog
from icecdc.config import Config, TableIndexConfig
from icecdc.deadletters import Selection, StoredLetter, shared_id_cause
from icecdc.destination.client import IDS_PER_REQUEST, OpenSearch, capabilities_of
from icecdc.destination.index import IndexAlias, index_spec, mapping_conflicts
from icecdc.destination.port import Destination
from icecdc.destination.sink import BulkMode, Refusal, fenced, refusal_cause, write_documents
from icecdc.documents import Shape
from icecdc.errors import OperationError
from icecdc.logs import SUMMARY_LOGGER
from icecdc.lookup import TableRows, whole_rows_only
from icecdc.model import Checkpoint, VersionType, Write
from icecdc.state import Lease, StateStore, open_state_store
from icecdc.status import index_work

log = logging.getLogger(__name__)
summary_log = logging.getLogger(SUMMARY_LOGGER)


@dataclass
class ReplayReport:
    """What a replay of one table's letters did."""

    table: str
    version: int  # the version written: the checkpoint's sequence number
    letters: int = 0  # letters taken
    replayed: int = 0  # marked replayed
    indexed: int = 0  # documents written from the rows as of the checkpoint
    deleted: int = 0  # documents deleted: their rows are gone
    still_refused: dict[str, str] = field(default_factory=dict)  # letter id → the new reason
    # letters with no row to look up: mark them once dealt with
    not_replayable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.still_refused and not self.not_replayable


def replay_table(
    config: Config,
    name: str,
    location: str,
    selection: Selection | None = None,
    destination: Destination | None = None,
) -> ReplayReport:
    """Replay the table's letters not replayed yet that `selection` keeps, all by default.

    `destination`: the command's, opened once with the letters at `location`; opened here when not
    given. The module's doc says how.
    """
    table_config = whole_rows_only(config.table(name), "replay")
    if destination is None or destination.dead_letter != location:
        destination = Destination.open(config.opensearch, location)
    dead_letters = destination.dead_letters
    assert dead_letters is not None  # opened with the letters' location
    open_letters = dead_letters.letters(name)
    letters = [s for s in open_letters if selection is None or selection(s)]
    table = load_table(open_catalog(config.catalog), name)
    identifiers = identifier_columns(table, table_config)
    client = destination.client
    store = open_state_store(config.state)
    try:
        with Lease(store, name, config.state.lease_seconds, state=config.state) as lease:
            if not lease.held:
                raise OperationError(
                    f"table {name!r}: another run holds its lease; replay when it has finished"
                )
            alias = IndexAlias(client, table_config.index)
            checkpoint = _settled_checkpoint(store, name, alias, table_config.shape)
            report = ReplayReport(name, checkpoint.sequence_number, len(letters))
            # Without identifier columns an id names a file position, not a row: nothing to look up.
            report.not_replayable = [
                s.letter_id for s in letters if s.letter.doc_id is None or not identifiers
            ]
            by_id = [s for s in letters if s.letter.doc_id is not None and identifiers]
            if not by_id:
                return report
            report.notes += _ensure_configured(client, table, table_config)
            # as of the checkpoint, never the current snapshot: the next pass would not write a
            # change it cancels
            rows = TableRows(table, name, identifiers, checkpoint.snapshot_id, location)
            current = rows.by_ids({s.letter.doc_id for s in by_id if s.letter.doc_id is not None})
            writes, shared = _writes(
                current,
                {s.letter.doc_id for s in by_id if s.letter.doc_id},
                checkpoint.sequence_number,
            )
            # without versions `_version` counts writes, and no pass is unfinished: none is newer
            newer = (
                _newer(
                    client,
                    table_config.index,
                    [w.doc_id for w in writes],
                    checkpoint.sequence_number,
                )
                if capabilities_of(client).versions
                else {}
            )
            writes = [w for w in writes if w.doc_id not in newer]
            refusals: dict[str, Refusal] = {}
            stats = write_documents(
                client,
                destination.opensearch or config.opensearch,
                table_config.index,
                fenced(writes, lease),
                lambda refused: refusals.update({w.doc_id: (w, s, r) for w, s, r in refused}),
                BulkMode(VersionType.EXTERNAL_GTE, fence=lease),
            )
            lease.check()
            report.indexed, report.deleted = stats.indexed, stats.deleted
            if stats.superseded:
                report.notes.append(
                    f"{stats.superseded} writes were refused for a newer version: "
                    "the tombstone of a later delete; "
                    "their letters are marked replayed, as the delete's own sync applies it"
                )
            found = _Found(writes, refusals, shared, newer, shared_id_cause(identifiers))
            updated = _outcomes(report, by_id, found)
            taken = {s.letter_id for s in by_id}
            held = [s for s in open_letters if s.letter_id not in taken]
            dead_letters.update(_merged(report, updated, held))
    finally:
        store.close()
    summary_log.info(
        "%s: replayed %d of %d dead letters (%d indexed, %d deleted, %d refused again)",
        name,
        report.replayed,
        report.letters,
        report.indexed,
        report.deleted,
        len(report.still_refused),
    )
    return report


def _settled_checkpoint(
    store: StateStore, name: str, alias: IndexAlias, shape: Shape
) -> Checkpoint:
    """The checkpoint to replay at.

    It raises OperationError when there is none, or the index is not as it left it or of another
    `shape` than the configured one, or, without versions, while work is pending.
    """
    checkpoint = store.get_checkpoint(name)
    if checkpoint is None:
        raise OperationError(f"table {name!r} has never been synced: nothing to replay into")
    index_needs = index_work(alias, checkpoint, shape)  # a run's leftovers, another shape
    if index_needs:
        raise OperationError(f"table {name!r}: {index_needs}; sync first")
    # An unfinished pass may have written above the checkpoint: versions keep a replay from
    # overwriting that, and where there are none (Serverless) the replay waits for the pass.
    if not capabilities_of(alias.client).versions and store.count_pending(name):
        raise OperationError(
            f"table {name!r}: a pass is unfinished, and a Serverless collection has no versions "
            "to keep its newer documents from the replay; sync first"
        )
    return checkpoint


def _ensure_configured(client: OpenSearch, table: Table, config: TableIndexConfig) -> list[str]:
    """Put the fields a fixed configuration adds into the index's mapping.

    It returns notes on the fields it cannot change.
    """
    spec = index_spec(table.schema(), config, str(table.metadata.table_uuid))
    IndexAlias(client, config.index).ensure(spec)
    conflicts = mapping_conflicts(client, config.index, spec)
    if not conflicts:
        return []
    note = (
        f"the index maps {', '.join(conflicts)} otherwise than the configuration: "
        "a field's mapping cannot change in place; "
        "rebuild the index (icecdc repair --rebuild) to apply it, then replay"
    )
    return [note]


def _writes(
    current: dict[str, list[str]], ids: set[str], version: int
) -> tuple[list[Write], dict[str, int]]:
    """A write per id: its row's document, or a delete when the row is gone.

    Ids two live rows share are not written; they are returned as id → how many rows.
    """
    writes = []
    shared = {}
    for doc_id in sorted(ids):
        documents = current.get(doc_id, [])
        if len(documents) > 1:
            shared[doc_id] = len(documents)
        else:
            writes.append(Write(doc_id, version, documents[0] if documents else None))
    return writes, shared


def _newer(client: OpenSearch, index: str, ids: list[str], version: int) -> dict[str, int]:
    """The ids whose document carries a version above `version`, as id → its version.

    Such a document is a later change's, written by a pass not checkpointed yet; a replay leaves it
    as it is.
    """
    newer: dict[str, int] = {}
    for start in range(0, len(ids), IDS_PER_REQUEST):
        for doc in client.mget(
            index=index, body={"ids": ids[start : start + IDS_PER_REQUEST]}, _source=False
        )["docs"]:
            if doc.get("found") and int(doc["_version"]) > version:
                newer[doc["_id"]] = int(doc["_version"])
    return newer


@dataclass(frozen=True)
class _Found:
    """What a replay found of its letters' rows, and did with them."""

    writes: list[Write]
    refusals: dict[str, Refusal]  # id → its write refused again
    shared: dict[str, int]  # ids live rows share → how many rows
    newer: dict[str, int]  # ids whose document is a later change's → its version
    shared_cause: str  # the cause of a letter of an id rows share


def _outcomes(
    report: ReplayReport, letters: list[StoredLetter], found: _Found
) -> list[StoredLetter]:
    """The letters as the replay leaves them: replayed, or kept with why they failed again."""
    now = time.time()
    written = {w.doc_id: w for w in found.writes}
    updated = []
    for stored in letters:
        letter, doc_id = stored.letter, stored.letter.doc_id
        assert doc_id is not None
        if doc_id in found.refusals:
            write, status, reason = found.refusals[doc_id]
            letter = replace(
                letter,
                status=status,
                reason=reason,
                cause=refusal_cause(status, reason),
                document=write.document,
                attempts=letter.attempts + 1,
            )
            report.still_refused[stored.letter_id] = reason
        elif doc_id in found.shared:
            reason = (
                f"{found.shared[doc_id]} live rows share the identifier {doc_id!r}: "
                "the identifier columns must be unique"
            )
            letter = replace(
                letter,
                status=None,
                reason=reason,
                cause=found.shared_cause,
                attempts=letter.attempts + 1,
            )
            report.still_refused[stored.letter_id] = reason
        elif doc_id in found.newer:
            outcome = (
                "superseded: the index holds a later change's document "
                f"(version {found.newer[doc_id]}), left as it is"
            )
            letter = replace(letter, replayed_at=now, outcome=outcome)
            report.replayed += 1
        else:
            write = written[doc_id]
            gone = write.document is None
            outcome = "deleted: the row is gone" if gone else "indexed the checkpoint's row"
            letter = replace(
                letter, replayed_at=now, outcome=f"{outcome} (version {write.version})"
            )
            report.replayed += 1
        updated.append(replace(stored, letter=letter))
    return updated


def _merged(
    report: ReplayReport, updated: list[StoredLetter], held: list[StoredLetter]
) -> list[StoredLetter]:
    """The updated letters, each still open one of a row and cause held by another merged into it.

    Refused again, two letters of one row can end with one cause, such as a row lettered for its
    shared id by a change and again by an export: the first, or an open letter the replay did not
    take (`held`), stays open; the others are marked replayed, naming it.
    """
    holders = {s.letter.key: s.letter_id for s in held}
    merged = []
    for stored in updated:
        letter = stored.letter
        open_ = letter.replayed_at is None
        holder = holders.setdefault(letter.key, stored.letter_id) if open_ else stored.letter_id
        if holder != stored.letter_id:
            outcome = f"merged into {holder}: the same row and cause"
            letter = replace(letter, replayed_at=time.time(), outcome=outcome)
            report.still_refused.pop(stored.letter_id, None)
            report.replayed += 1
        merged.append(replace(stored, letter=letter))
    return merged

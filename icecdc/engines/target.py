"""What both engines run where the changes of a key meet: net write per key, bulk writes, dead
letters. On Spark this is executor code; in-process it runs in the calling process."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from icecdc.changelog import ChangeStats, net_write
from icecdc.config import OpenSearchConfig
from icecdc.deadletters import DeadLetter, DeadLetters
from icecdc.errors import DuplicateIdentifier, ProcessingError
from icecdc.model import ChangeRow
from icecdc.opensearch import open_client
from icecdc.sink import Refusal, SinkStats, write_documents


@dataclass(frozen=True)
class Target:
    """Where a pass writes a table's documents, and their dead letters; small and picklable."""

    table: str
    index: str
    opensearch: OpenSearchConfig
    dead_letter: str | None
    snapshot_ids: dict[int, int]  # sequence number → snapshot id, to name a dead letter's snapshot
    version_type: str  # "external"; "external_gte" while a resync rewrites documents of equal version
    identifier_columns: tuple[str, ...]

    def dead_letters(self, refused: list[Refusal]) -> None:
        assert self.dead_letter is not None
        DeadLetters(self.dead_letter).write(
            DeadLetter(self.table, self.snapshot_ids.get(w.version), w.version, w.doc_id, status, reason, w.document)
            for w, status, reason in refused
        )

    def duplicates(self, found: list[DuplicateIdentifier]) -> None:
        """Keys with several live rows in one snapshot: dead letters, or the error that stops the batch."""
        columns = ", ".join(self.identifier_columns)
        reasons = [(d, f"table {self.table!r}, snapshot {self.snapshot_ids.get(d.sequence_number)}: {d}") for d in found]
        reasons = [(d, f"{reason}; the identifier columns ({columns}) must be unique") for d, reason in reasons]
        if self.dead_letter is None:
            raise ProcessingError(f"{reasons[0][1]} ({len(found)} such identifiers in this part of the batch)")
        DeadLetters(self.dead_letter).write(
            DeadLetter(self.table, self.snapshot_ids.get(d.sequence_number), d.sequence_number, d.doc_id, None, reason, document)
            for d, reason in reasons
            for document in d.documents
        )


def write_keyed_changes(
    target: Target, keyed_changes: Iterable[tuple[str, Iterable[ChangeRow]]]
) -> tuple[ChangeStats, SinkStats]:
    """Reduce each key's changes to its net write and bulk the writes; return the counters."""
    change_stats = ChangeStats()
    duplicates: list[DuplicateIdentifier] = []
    writes = (net_write(doc_id, changes, change_stats, duplicates) for doc_id, changes in keyed_changes)
    sink_stats = write_documents(
        open_client(target.opensearch),
        target.opensearch,
        target.index,
        (w for w in writes if w is not None),
        target.dead_letters if target.dead_letter else None,
        target.version_type,
    )
    if duplicates:
        target.duplicates(duplicates)
        sink_stats.dead_lettered += sum(len(d.documents) for d in duplicates)
    return change_stats, sink_stats

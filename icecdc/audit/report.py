"""What an audit found and what a repair did: the reports, their JSON, and a repair's scope."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from icecdc.lookup import ReadCost


class DriftKind(StrEnum):
    """How an index differs from its table."""

    MISSING = "missing"  # rows of the table with no document
    EXTRA = "extra"  # documents with no row
    STALE = "stale"  # a document whose fields differ from its row's
    # a version above any icecdc wrote (the checkpoint's): another writer's document
    FOREIGN_VERSION = "foreign version"
    # an id several live rows of the table hold: the identifier columns are not unique
    DUPLICATE = "duplicate identifier"


@dataclass(frozen=True)
class Drift:
    """One finding: a partition whose counts differ, or one document: sampled, or named as extra."""

    kind: DriftKind
    # column → value (as documents hold it); {}: the whole table
    partition: dict[str, Any] | None = None
    doc_id: str | None = None  # a sampled or an extra document; None for a difference of counts
    count: int = 1  # documents: a partition's difference of counts, 1 for a document
    fields: tuple[str, ...] = ()  # STALE: the fields that differ
    version: int | None = None  # FOREIGN_VERSION: the document's version
    # MISSING: of `count`, rows with a dead letter not dealt with (known, not drift); DUPLICATE: 1
    # when a sync dead-lettered the id (its letters are open and the index holds no document of it)
    dead_lettered: int = 0

    @property
    def known(self) -> bool:
        """Whether dead letters account for all of it: their own workflow (replay), not drift."""
        if self.kind == DriftKind.DUPLICATE:
            return self.dead_lettered > 0
        return self.kind == DriftKind.MISSING and self.dead_lettered >= self.count

    def describe(self) -> str:
        where = describe_partition(self.partition or {})
        lettered = f" ({self.dead_lettered} dead-lettered)" if self.dead_lettered else ""
        if self.doc_id is None:
            what = (
                ("row has no document", "rows have no document")
                if self.kind == DriftKind.MISSING
                else ("document has no row", "documents have no row")
            )
            return f"{self.kind}: {self.count} {what[self.count != 1]} in {where}{lettered}"
        detail = {
            DriftKind.MISSING: (
                "no document, dead-lettered" if self.dead_lettered else "no document"
            ),
            DriftKind.STALE: (
                f"{', '.join(self.fields)} differ{'s' if len(self.fields) == 1 else ''}"
            ),
            DriftKind.FOREIGN_VERSION: f"version {self.version}, above any icecdc wrote",
            DriftKind.EXTRA: "no row in this partition" if self.partition else "no row",
            DriftKind.DUPLICATE: f"{self.count} live rows hold it: the identifier is not unique",
        }[self.kind]
        return f"{self.kind}: id {self.doc_id!r} ({where}): {detail}"


@dataclass(frozen=True)
class PartitionCount:
    """A partition whose counts differ: the table's live rows and the index's documents."""

    partition: dict[str, Any]
    rows: int
    documents: int


@dataclass
class AuditCost:
    """What an audit or a repair read: the table's files, the OpenSearch requests, the time.

    The table's files are counted exactly, their bytes as stored.
    """

    table: ReadCost = field(default_factory=ReadCost)
    requests: int = 0
    seconds: float = 0.0

    def describe(self) -> str:
        t = self.table
        return (
            f"{t.manifest_lists} manifest lists and {t.manifests} manifests "
            f"({_size(t.manifest_bytes)}), "
            f"{t.data_files} data files ({_size(t.data_bytes)}) and {t.delete_files} delete files "
            f"({_size(t.delete_bytes)}) read, {self.requests} OpenSearch requests, "
            f"{self.seconds:.1f} s"
        )


@dataclass(frozen=True)
class RepairScope:
    """What a repair rewrites: the rows of some partitions, some ids, or the whole table."""

    # each: column → value (as documents hold it; None: null)
    partitions: tuple[dict[str, Any], ...] = ()
    ids: tuple[str, ...] = ()
    whole_table: bool = False

    def __bool__(self) -> bool:
        return bool(self.partitions or self.ids or self.whole_table)

    def describe(self) -> str:
        if self.whole_table:
            return "the whole table"
        parts = [", ".join(f"{k}={v!r}" for k, v in p.items()) for p in self.partitions]
        if self.ids:
            quoted = ", ".join(repr(i) for i in self.ids[:QUOTED]) + (
                ", ..." if len(self.ids) > QUOTED else ""
            )
            parts.append(f"{len(self.ids)} ids ({quoted})")
        return "; ".join(parts) or "nothing"


# How many ids a description quotes.
QUOTED = 5


@dataclass
class AuditReport:
    """An index compared with its table at the table's checkpoint.

    The comparison is of counts by partition and of a sample of rows.
    """

    table: str
    index: str
    snapshot_id: int  # the checkpoint's: what the index must hold
    sequence_number: int  # the highest version icecdc wrote
    compared: str  # what the counts compare, in words
    grouped_by: tuple[str, ...] = ()  # the columns partitions are counted by; (): the total
    partitions: int = 0  # partitions compared
    rows: int = 0  # the table's live rows
    documents: int = 0  # the index's documents
    sampled: int = 0  # rows compared field by field
    drift: list[Drift] = field(default_factory=list)
    counts: list[PartitionCount] = field(default_factory=list)  # partitions whose counts differ
    notes: list[str] = field(default_factory=list)  # what may explain or qualify the findings
    cost: AuditCost = field(default_factory=AuditCost)
    audited_at: float = 0.0
    # why nothing was compared: the next sync rebuilds the index (not drift)
    resync_pending: str = ""

    @property
    def drifted(self) -> bool:
        """Whether the index differs from its table beyond the rows dead-lettered on purpose."""
        return any(not d.known for d in self.drift)

    def differing(self) -> dict[str, int]:
        """The ids that differ, by kind, each counted once, as a user counts bad documents.

        Those are the ids named, sampled or extra, and of a partition's difference of counts what
        the ids named in it do not account for, as a count and a sample may find the same id. What
        dead letters account for is left out.
        """
        found = [d for d in self.drift if not d.known]
        named = [d for d in found if d.doc_id is not None]
        totals = Counter(str(d.kind) for d in named)
        for counted in (d for d in found if d.doc_id is None):
            same = [d for d in named if d.kind == counted.kind]
            inside = [d for d in same if not counted.partition or d.partition == counted.partition]
            totals[str(counted.kind)] += max(0, counted.count - counted.dead_lettered - len(inside))
        return {kind: n for kind, n in totals.items() if n}

    def summary(self) -> str:
        """`3 ids differ (2 missing, 1 extra)`, or `no drift`."""
        differing = self.differing()
        if not differing:
            return "no drift"
        ordered = sorted(differing.items(), key=lambda kv: (-kv[1], kv[0]))
        kinds = ", ".join(f"{n} {kind}" for kind, n in ordered)
        total = sum(differing.values())
        return f"{total} id{'s' if total != 1 else ''} differ{'' if total != 1 else 's'} ({kinds})"

    def scope(self) -> RepairScope:
        """What a repair of these findings rewrites; not what dead letters account for.

        - The partitions whose counts differ, or the whole table when counts are compared only in
          total.
        - The partitions of sampled rows without a document. Their counts agree only if a document
          with no row offsets it.
        - The sampled documents that differ. The extra documents named are not in it, as their
          partitions are.
        """
        # a repair would only dead-letter those again
        drift = [d for d in self.drift if not d.known]
        counted = [d.partition for d in drift if d.doc_id is None and d.partition is not None]
        if any(not p for p in counted):
            return RepairScope(whole_table=True)
        missing = [
            d.partition
            for d in drift
            if d.kind == DriftKind.MISSING and d.doc_id is not None and d.partition
        ]
        partitions = {json.dumps(p, sort_keys=True): p for p in counted + missing if p}
        # Extra documents are named only in partitions whose counts differ, which are in the scope
        # already: their ids would only make the repair look them up in the table's files again.
        ids = tuple(
            dict.fromkeys(
                d.doc_id for d in drift if d.doc_id is not None and d.kind != DriftKind.EXTRA
            )
        )
        return RepairScope(tuple(partitions.values()), ids)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, indent=2)

    @classmethod
    def from_json(cls, text: str) -> AuditReport:
        raw = json.loads(text)
        cost = raw.pop("cost")
        return cls(
            **{
                **raw,
                "grouped_by": tuple(raw["grouped_by"]),
                "drift": [
                    Drift(**{**d, "kind": DriftKind(d["kind"]), "fields": tuple(d["fields"])})
                    for d in raw["drift"]
                ],
                "counts": [PartitionCount(**c) for c in raw["counts"]],
                "cost": AuditCost(ReadCost(**cost["table"]), cost["requests"], cost["seconds"]),
            }
        )


@dataclass
class RepairReport:
    """What a repair compared and wrote, and what it could not fix in place."""

    table: str
    index: str
    scope: RepairScope
    version: int  # the version it wrote at: the checkpoint's sequence number
    compared: int = 0  # ids of the scope compared (rows and documents)
    indexed: int = 0
    deleted: int = 0
    superseded: int = 0  # refused: a newer version appeared meanwhile (another writer)
    # rows of the scope refused, or that cannot become documents: one open letter each
    dead_lettered: int = 0
    # id → its version, above any icecdc wrote: needs --rebuild
    foreign: dict[str, int] = field(default_factory=dict)
    # ids two live rows share (a sync dead-letters them)
    duplicates: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cost: AuditCost = field(default_factory=AuditCost)
    # ids named: neither in the table nor the index
    not_found: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether the scope now equals the table: nothing left that only a rebuild can fix."""
        return not self.foreign and not self.superseded

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, indent=2)


def describe_partition(partition: dict[str, Any]) -> str:
    """`region='us', day='2024-05-01'`; "the whole table" for none."""
    return ", ".join(f"{k}={v!r}" for k, v in partition.items()) or "the whole table"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} GiB"

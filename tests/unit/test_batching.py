"""icecdc.batching: which pending items a pass takes (`select_batch`) and how much of them one pass
reads (`cap_batch`), one row per case.

A table of four snapshots, 1 to 4, each with its id as its sequence number. Items are named: `c3`
is snapshot 3's change, `c3.0` and `c3.1` the two items of a change in two groups, `e3.0` an item
of an export of snapshot 3, `x9` an item of a table of the same name dropped since."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import pytest

from icecdc.batching import cap_batch, select_batch
from icecdc.catalog import Lineage
from icecdc.config import BatchConfig
from icecdc.model import NO_SNAPSHOT, Checkpoint, ItemKind, ItemStatus, ResyncKind, WorkItem

TABLE, UUID = "db.orders", "uuid-1"
LINEAGE = Lineage((1, 2, 3, 4), 4, UUID)
ROLLED_BACK = Lineage((1, 2, 4), 4, UUID)  # 3 was rolled back; 4 was committed on 2


def checkpoint(snapshot_id: int) -> Checkpoint:
    return Checkpoint(UUID, snapshot_id, snapshot_id, schema_id=0, identifier_columns=("id",))


AT_1, AT_3 = checkpoint(1), checkpoint(3)
EMPTY_TABLE = Checkpoint(UUID, NO_SNAPSHOT, 0)  # a table created empty: every snapshot is a change


def item(
    name: str,
    *,
    files: int = 1,
    resync: ResyncKind = ResyncKind.NONE,
    replacing: str = "",
) -> WorkItem:
    """The item `name` names (see the module's docstring), with `files` files."""
    kind = ItemKind.EXPORT if name[0] == "e" else ItemKind.CHANGE
    snapshot, _, group = name[1:].partition(".")
    groups = 2 if group else 1  # a named group is one of two
    paths = tuple(f"{name}-{n}.parquet" for n in range(files))
    table_uuid = "uuid-0" if name[0] == "x" else UUID
    number = int(snapshot)
    return WorkItem(
        TABLE,
        table_uuid,
        kind,
        number,
        number,
        int(group or 0),
        groups,
        added_data_files=paths,
        resync=resync,
        replacing=replacing,
    )


def items(names: str, at: Checkpoint | None = None) -> list[WorkItem]:
    """`"c2 c3"`: the items named; an export ending in `r` (`e2.0r`) a resync replacing `at`, in `!`
    one that replaced another checkpoint."""
    found = []
    for name in names.split():
        if name.endswith("r"):
            assert at is not None
            found.append(item(name[:-1], resync=ResyncKind.REWRITE, replacing=at.token))
        elif name.endswith("!"):
            found.append(item(name[:-1], resync=ResyncKind.REWRITE, replacing="another"))
        else:
            found.append(item(name))
    return found


def names(found: Iterable[WorkItem]) -> str:
    labels = []
    for i in found:
        prefix = "x" if i.table_uuid != UUID else ("e" if i.kind == ItemKind.EXPORT else "c")
        group = f".{i.group}" if i.groups > 1 else ""
        labels.append(f"{prefix}{i.snapshot_id}{group}")
    return " ".join(labels)


# id: (the lineage, the checkpoint, the pending items, the batch, the stale items)
SELECTIONS: dict[str, tuple[Lineage, Checkpoint | None, str, str, str]] = {
    "the changes after the checkpoint": (LINEAGE, AT_1, "c2 c3", "c2 c3", ""),
    "oldest first, whatever the order found": (LINEAGE, AT_1, "c3 c2", "c2 c3", ""),
    "applied by a run that crashed: retired": (LINEAGE, AT_3, "c2 c3 c4", "c4", "c2 c3"),
    "a snapshot still being planned ends it": (LINEAGE, AT_1, "c2 c3.0 c4", "c2", ""),
    "a snapshot complete in groups": (LINEAGE, AT_1, "c3.1 c3.0 c2", "c2 c3.0 c3.1", ""),
    "a snapshot not planned yet ends it": (LINEAGE, AT_1, "c3 c4", "", ""),
    "a rolled-back commit: retired": (ROLLED_BACK, AT_1, "c2 c3 c4", "c2 c4", "c3"),
    "a commit newer than this view waits": (LINEAGE, AT_1, "c2 c5", "c2", ""),
    "a dropped table's item: retired": (LINEAGE, AT_1, "x2 c2", "c2", "x2"),
    "the checkpoint rolled back: the planner resyncs": (ROLLED_BACK, AT_3, "c4", "", ""),
    "a table created empty": (LINEAGE, EMPTY_TABLE, "c1 c2", "c1 c2", ""),
    "the first export, then changes": (LINEAGE, None, "e3.0 e3.1 c4", "e3.0 e3.1 c4", ""),
    "an export still being planned": (LINEAGE, None, "c4 e3.1", "", ""),
    "a resync retires what it covers": (LINEAGE, AT_1, "c2 c3 e3.0r e3.1r", "e3.0 e3.1", "c2 c3"),
    "a resync to an older snapshot needs the changes the checkpoint had applied": (
        LINEAGE,
        AT_3,
        "e2.0r e2.1r c3 c4",
        "e2.0 e2.1 c3 c4",
        "",
    ),
    "a resync done already: retired": (LINEAGE, AT_3, "e2.0! e2.1! c4", "c4", "e2.0 e2.1"),
}


@pytest.mark.parametrize(
    ("lineage", "at", "pending", "batch", "stale"),
    list(SELECTIONS.values()),
    ids=list(SELECTIONS),
)
def test_select_batch(
    lineage: Lineage,
    at: Checkpoint | None,
    pending: str,
    batch: str,
    stale: str,
) -> None:
    taken, retired = select_batch(items(pending, at), at, lineage)
    assert (names(taken), " ".join(sorted(names(retired).split()))) == (batch, stale)


@dataclass
class Sizes:
    """`icecdc.batching.BatchSizes` of a table whose every file has `file_bytes` bytes, and whose
    snapshots `expired` are gone."""

    file_bytes: int = 10
    expired: set[int] = field(default_factory=set)
    asked: list[int] = field(default_factory=list)  # the snapshots whose change bytes were asked

    def has_snapshot(self, snapshot_id: int) -> bool:
        return snapshot_id not in self.expired

    def export_bytes(self, item: WorkItem) -> int:
        return self.file_bytes * len(item.added_data_files)

    def change_bytes(self, snapshot_id: int) -> int:
        self.asked.append(snapshot_id)
        return 0 if snapshot_id in self.expired else self.file_bytes * FILES.get(snapshot_id, 1)


FILES = {2: 3}  # snapshot 2's change lists three files; every other item one


def batch_of(names_: str) -> list[WorkItem]:
    """As `items`, with `c2` of three files, and an export item ending in `+` APPLIED already."""
    found = []
    for name in names_.split():
        status = ItemStatus.APPLIED if name.endswith("+") else ItemStatus.PENDING
        made = item(name.rstrip("+"), files=FILES.get(int(name[1]), 1) if name[0] == "c" else 1)
        found.append(replace(made, status=status))
    return found


# id: (the batch, its caps in files and in bytes, the snapshots expired, what a pass takes, whether
# it ends inside an export)
CAPS: dict[str, tuple[str, int, int, set[int], str, bool]] = {
    "everything fits": ("c3 c4", 10, 100, set(), "c3 c4", False),
    "whole snapshots while the files fit": ("c3 c4", 1, 100, set(), "c3", False),
    "whole snapshots while the bytes fit": ("c3 c4", 10, 15, set(), "c3", False),
    "at least one snapshot, however large": ("c2 c3", 1, 5, set(), "c2", False),
    "a snapshot's groups together": ("c3.0 c3.1 c4", 1, 100, set(), "c3.0 c3.1", False),
    "an export is cut item by item": ("e3.0 e3.1 c4", 1, 100, set(), "e3.0", True),
    "an export ends, its changes wait": ("e3.0 e3.1 c4", 2, 100, set(), "e3.0 e3.1", False),
    "an export and its changes": ("e3.0 e3.1 c4", 3, 100, set(), "e3.0 e3.1 c4", False),
    "applied export items ride along": ("e3.0+ e3.1 c4", 1, 100, set(), "e3.1 e3.0", False),
    "an expired export's files: whole": ("e3.0 e3.1 c4", 1, 100, {3}, "e3.0 e3.1", False),
}


@pytest.mark.parametrize(
    ("batch", "max_files", "max_bytes", "expired", "taken", "inside"),
    list(CAPS.values()),
    ids=list(CAPS),
)
def test_cap_batch(
    batch: str,
    max_files: int,
    max_bytes: int,
    expired: set[int],
    taken: str,
    inside: bool,
) -> None:
    limits = BatchConfig(max_files=max_files, max_bytes=max_bytes)
    capped, ends_inside = cap_batch(batch_of(batch), limits, Sizes(expired=expired))
    assert (names(capped), ends_inside) == (taken, inside)


def test_a_snapshot_that_changes_no_file_is_not_sized() -> None:
    """A compaction's empty item costs no manifest read, and fits even when the caps are full."""
    empty = replace(item("c4"), added_data_files=())
    sizes = Sizes()
    capped, _ = cap_batch([item("c3"), empty], BatchConfig(max_files=1, max_bytes=10), sizes)
    assert (names(capped), sizes.asked) == ("c3 c4", [3])


def test_a_reset_over_a_first_export_not_finished_is_the_one_export_a_batch_applies() -> None:
    """`repair --rebuild` before any checkpoint plans a reset of the export's snapshot beside the
    first export's items, one of them applied: the batch applies the reset alone (reading both
    would read every row twice) and retires the first export's items."""
    first = [replace(item("e3.0"), status=ItemStatus.APPLIED, applied_to="t-2"), item("e3.1")]
    reset = [item("e3.0", resync=ResyncKind.RESET), item("e3.1", resync=ResyncKind.RESET)]
    taken, retired = select_batch([*first, *reset, item("c4")], None, LINEAGE)
    assert [i.key for i in taken] == [reset[0].key, reset[1].key, item("c4").key]
    assert sorted(i.key for i in retired) == sorted(i.key for i in first)

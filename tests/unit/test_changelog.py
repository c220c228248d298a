"""The per-key steps after the shuffle: carryover removal, update merge, net change."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from icecdc.changelog import Appended, ChangeStats, live_rows, net_write
from icecdc.config import OpenSearchConfig
from icecdc.destination.port import Destination
from icecdc.documents import Shape
from icecdc.engines.target import Target
from icecdc.errors import DuplicateIdentifier, HeldOutIdentifier, ProcessingError
from icecdc.model import NO_IMAGE, ChangeRow, ChangeType, VersionType, Write, key_image
from icecdc.reading.reader import _cancel_equal_rows

OLD, NEW, NEWER = '{"id":1,"s":"old"}', '{"id":1,"s":"new"}', '{"id":1,"s":"newer"}'


def net(*changes: tuple[int, ChangeType, str]) -> tuple[Write | None, ChangeStats]:
    stats = ChangeStats()
    return net_write("1", [ChangeRow(*c) for c in changes], stats), stats


def test_identical_delete_and_insert_in_one_snapshot_is_a_carryover() -> None:
    write, stats = net((5, ChangeType.DELETE, OLD), (5, ChangeType.INSERT, OLD))
    assert write is None
    assert (stats.rows, stats.carryovers) == (2, 1)


def test_identical_rows_in_different_snapshots_are_not_carryovers() -> None:
    write, stats = net((5, ChangeType.DELETE, OLD), (6, ChangeType.INSERT, OLD))
    assert write == Write("1", 6, OLD)
    assert stats.carryovers == 0


def test_delete_and_insert_of_a_key_in_one_snapshot_is_an_update() -> None:
    assert net((5, ChangeType.DELETE, OLD), (5, ChangeType.INSERT, NEW))[0] == Write("1", 5, NEW)


def test_the_latest_snapshot_wins_whatever_the_arrival_order() -> None:
    write, _ = net(
        (7, ChangeType.INSERT, NEWER),
        (6, ChangeType.DELETE, NEW),
        (5, ChangeType.INSERT, NEW),
        (6, ChangeType.INSERT, NEWER),
        (5, ChangeType.DELETE, OLD),
        (7, ChangeType.DELETE, NEWER),
    )
    # 7 is a carryover of NEWER; 6 is the last real change
    assert write == Write("1", 6, NEWER)


def test_a_delete_last_is_a_delete() -> None:
    assert net((5, ChangeType.INSERT, NEW), (6, ChangeType.DELETE, NEW))[0] == Write("1", 6, None)


def test_duplicate_carryovers_cancel_pairwise_only() -> None:
    # two identical rows deleted, one carried over: one delete remains
    write, stats = net((5, ChangeType.DELETE, OLD), (5, ChangeType.DELETE, OLD), (5, ChangeType.INSERT, OLD))
    assert write == Write("1", 5, None) and stats.carryovers == 1


def test_two_live_rows_for_one_key_is_an_error_naming_the_key() -> None:
    with pytest.raises(ProcessingError, match="2 live rows share the identifier '1' at sequence number 5"):
        net((5, ChangeType.INSERT, OLD), (5, ChangeType.INSERT, NEW))


def test_a_snapshot_with_two_live_rows_for_one_key_is_reported_and_the_next_snapshot_still_applies() -> None:
    duplicates: list[DuplicateIdentifier] = []
    changes = [(5, ChangeType.INSERT, OLD), (5, ChangeType.INSERT, NEW)]
    changes += [
        (6, ChangeType.DELETE, OLD),
        (6, ChangeType.DELETE, NEW),
        (6, ChangeType.INSERT, NEWER),
    ]  # the fix
    write = net_write("1", [ChangeRow(*c) for c in changes], ChangeStats(), duplicates)
    assert write == Write("1", 6, NEWER)
    assert [(d.doc_id, d.sequence_number, sorted(d.documents)) for d in duplicates] == [("1", 5, sorted([OLD, NEW]))]


def test_an_update_beside_an_append_of_its_key_deletes_the_document() -> None:
    """A run of copy-on-write commits collapsed into one change: an append of a copy of a key, then
    a MERGE that rewrote the key's row. Two rows are live: the document the index holds of the
    key is deleted, not left as the old row (found by the fuzzer)."""
    duplicates: list[DuplicateIdentifier] = []
    changes = [
        ChangeRow(5, ChangeType.DELETE, OLD),
        ChangeRow(5, ChangeType.INSERT, NEW),
        ChangeRow(5, ChangeType.INSERT, NEWER),
    ]
    assert net_write("1", changes, ChangeStats(), duplicates, {}) == Write("1", 5, None)
    assert [(d.sequence_number, sorted(d.documents)) for d in duplicates] == [(5, sorted([NEW, NEWER]))]


def test_several_appends_of_a_key_in_one_change_are_left_to_the_caller_that_asks_the_index() -> None:
    """Copies of a key appended in a collapsed run: its document is deleted, and the rows are
    reported by the caller, with the row the index holds if one was live before."""
    duplicates: list[DuplicateIdentifier] = []
    appends: dict[str, Appended] = {}
    changes = [ChangeRow(5, ChangeType.INSERT, OLD), ChangeRow(5, ChangeType.INSERT, NEW)]
    assert net_write("1", changes, ChangeStats(), duplicates, appends) == Write("1", 5, None)
    assert duplicates == [] and appends == {"1": Appended(5, (OLD, NEW), 3)}
    assert net_write("1", changes, ChangeStats(), duplicates) == Write("1", 5, None)
    assert [d.documents for d in duplicates] == [[OLD, NEW]]  # no index asked: reported here


def test_an_append_of_a_live_key_is_a_second_live_row_and_deletes_its_document() -> None:
    """An INSERT without a DELETE of its key in its snapshot, while an earlier snapshot left a row
    of the key live: reported, and its document deleted (as an export deletes a duplicate's)."""
    duplicates: list[DuplicateIdentifier] = []
    appends: dict[str, tuple[int, str]] = {}
    changes = [ChangeRow(5, ChangeType.INSERT, OLD), ChangeRow(6, ChangeType.INSERT, NEW)]
    assert net_write("1", changes, ChangeStats(), duplicates, appends) == Write("1", 6, None)
    assert [(d.sequence_number, d.documents) for d in duplicates] == [(6, [OLD, NEW])]
    # the first snapshot's append: whether a row was live before, the index tells; had one been, 3 live now
    assert appends == {"1": Appended(5, (OLD,), 3)}
    with pytest.raises(DuplicateIdentifier, match="2 live rows share the identifier '1' at sequence number 6"):
        net_write("1", changes, ChangeStats(), None, {})
    assert net_write("1", changes, ChangeStats()) == Write("1", 6, NEW)  # appends unchecked: a filtered view
    # a later snapshot that deletes a copy still applies; an append after a delete, or an
    # update, is no duplicate
    changes.append(ChangeRow(7, ChangeType.DELETE, OLD))
    assert net_write("1", changes, ChangeStats(), []) == Write("1", 7, None)
    for fine in (
        [(5, ChangeType.DELETE, OLD), (6, ChangeType.INSERT, NEW)],
        [(5, ChangeType.INSERT, OLD), (6, ChangeType.DELETE, OLD), (7, ChangeType.INSERT, NEW)],
    ):
        found: list[DuplicateIdentifier] = []
        assert net_write("1", [ChangeRow(*c) for c in fine], ChangeStats(), found) == Write("1", fine[-1][0], NEW) and not found
    updated = [
        ChangeRow(5, ChangeType.DELETE, OLD),
        ChangeRow(5, ChangeType.INSERT, NEW),
        ChangeRow(6, ChangeType.DELETE, NEW),
        ChangeRow(6, ChangeType.INSERT, NEWER),
    ]
    assert net_write("1", updated, ChangeStats(), appends := {}) == Write("1", 6, NEWER) and appends == {}


def test_a_row_carried_over_beside_an_appended_copy_is_a_second_live_row() -> None:
    """A run of copy-on-write commits collapsed into one change: one rewrote the file of the key's
    row (a DELETE and an INSERT of it, a carryover), another appended a copy. Two rows live: no
    update of the one into the other."""
    carried = [(5, ChangeType.DELETE, OLD), (5, ChangeType.INSERT, OLD), (5, ChangeType.INSERT, NEW)]
    found: list[DuplicateIdentifier] = []
    assert net_write("1", [ChangeRow(*c) for c in carried], ChangeStats(), found, {}) == Write("1", 5, None)
    assert [(d.sequence_number, sorted(d.documents)) for d in found] == [(5, sorted([OLD, NEW]))]
    # a later snapshot's delete of the carried row leaves the copy, still a letter until a replay
    after = [*carried, (6, ChangeType.DELETE, OLD)]
    found.clear()
    assert net_write("1", [ChangeRow(*c) for c in after], ChangeStats(), found, {}) == Write("1", 6, None)
    assert len(found) == 1
    # an earlier snapshot of the pass left a row live: the carried-over append names the copy
    earlier = [(4, ChangeType.INSERT, NEWER), (5, ChangeType.DELETE, NEWER), (5, ChangeType.INSERT, NEWER)]
    found.clear()
    changes = [ChangeRow(*c) for c in [*earlier, (5, ChangeType.INSERT, NEW)]]
    assert net_write("1", changes, ChangeStats(), found, {}) == Write("1", 5, None)
    assert [d.documents for d in found] == [[NEWER, NEW]]


def test_an_update_of_one_of_two_live_rows_of_a_key_is_held_out_with_them() -> None:
    """Two live rows of a key, then one of them updated in a later snapshot of the pass: two rows
    still live, so the update is a letter beside them and no document is written."""
    found: list[DuplicateIdentifier] = []
    changes = [(5, ChangeType.INSERT, OLD), (6, ChangeType.INSERT, NEW)]
    changes += [(7, ChangeType.DELETE, NEW), (7, ChangeType.INSERT, NEWER)]
    assert net_write("1", [ChangeRow(*c) for c in changes], ChangeStats(), found, {}) == Write("1", 7, None)
    assert [(type(d), d.sequence_number, d.documents) for d in found] == [
        (DuplicateIdentifier, 6, [OLD, NEW]),
        (HeldOutIdentifier, 7, [NEWER]),
    ]
    assert "rows with open dead letters share the identifier '1'" in str(found[1])
    # an equality delete of the key takes both rows: the insert after it is the one live row
    found.clear()
    changes += [(8, ChangeType.DELETE, NO_IMAGE), (9, ChangeType.INSERT, NEW)]
    assert net_write("1", [ChangeRow(*c) for c in changes], ChangeStats(), found, {}) == Write("1", 9, NEW)
    assert len(found) == 2


def test_the_rows_an_append_leaves_had_a_row_been_live_before_it() -> None:
    """`Appended.rows_at_end`: the index holds the key's row; the pass appends a copy, then either
    updates the copy (two rows live) or deletes the row the index holds (one live)."""
    held = '{"id":1,"s":"held"}'
    for later, rows in (
        (
            [(6, ChangeType.DELETE, OLD), (6, ChangeType.INSERT, NEWER)],
            2,
        ),
        ([(6, ChangeType.DELETE, held)], 1),
        ([(6, ChangeType.DELETE, NO_IMAGE), (6, ChangeType.INSERT, NEW)], 1),
    ):
        appends: dict[str, Appended] = {}
        net_write("1", [ChangeRow(*c) for c in [(5, ChangeType.INSERT, OLD), *later]], ChangeStats(), [], appends)
        assert appends == {"1": Appended(5, (OLD,), rows)}, later


def test_the_live_rows_a_held_out_key_is_left_with() -> None:
    """A key whose two rows are letters: deleting one and updating the other leaves one row (its
    write stands); updating one leaves two; an equality delete leaves the rows inserted with it."""
    one_deleted_one_updated = [(5, ChangeType.DELETE, NEW), (6, ChangeType.DELETE, OLD), (6, ChangeType.INSERT, NEWER)]
    assert live_rows(2, [ChangeRow(*c) for c in one_deleted_one_updated]) == 1
    assert live_rows(2, [ChangeRow(6, ChangeType.DELETE, OLD), ChangeRow(6, ChangeType.INSERT, NEWER)]) == 2
    assert live_rows(2, [ChangeRow(6, ChangeType.DELETE, NO_IMAGE), ChangeRow(6, ChangeType.INSERT, NEWER)]) == 1


def test_a_row_appended_to_a_held_out_key_joins_its_letters_though_another_row_is_deleted_after() -> None:
    """Found by `make fuzz` (2026-12-02): a key's two rows are letters; a pass appends a third, then
    deletes one of the first two. Two rows stay live, and the third is a letter beside them, though
    the key's last change is a delete; the key's write is that delete."""
    found: list[DuplicateIdentifier] = []
    changes = [ChangeRow(4, ChangeType.INSERT, NEWER), ChangeRow(5, ChangeType.DELETE, OLD)]
    assert net_write("1", changes, ChangeStats(), found, shared_rows=2) == Write("1", 5, None)
    assert [(type(d), d.sequence_number, d.documents) for d in found] == [(HeldOutIdentifier, 4, [NEWER])]
    # not held out, the key's last change decides alone
    assert net_write("1", changes, ChangeStats(), []) == Write("1", 5, None)


def test_equal_rows_cancel_pairwise_in_arrow() -> None:
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    removed = pa.table({"id": [1, 2, 2, 3, None], "s": ["a", "b", "b", "c", None]}, schema=schema)
    added = pa.table({"id": [1, 2, 3, None, 4], "s": ["a", "b", "C", None, "d"]}, schema=schema)
    gone, new, pairs = _cancel_equal_rows(removed, added)
    assert pairs == 3  # (1,a), one of the two (2,b), and (null,null)
    assert sorted(gone.to_pylist(), key=str) == [{"id": 2, "s": "b"}, {"id": 3, "s": "c"}]
    assert sorted(new.to_pylist(), key=str) == [{"id": 3, "s": "C"}, {"id": 4, "s": "d"}]


def routed_target(version_type: VersionType) -> Target:
    return Target("db.t", "t", OpenSearchConfig(url="http://127.0.0.1:1"), None, {}, version_type, ("id",), Shape(routing="r"))


def test_a_routed_key_that_moved_is_indexed_under_its_new_value_before_the_delete_under_the_old() -> None:
    target = routed_target(VersionType.EXTERNAL)
    moved = [ChangeRow(5, ChangeType.DELETE, '{"id":1,"r":"us"}'), ChangeRow(5, ChangeType.INSERT, '{"id":1,"r":"eu"}')]
    assert list(target.writes("1", moved, ChangeStats(), [])) == [
        Write("1", 5, '{"id":1,"r":"eu"}', "eu"),
        Write("1", 5, None, "us"),
    ]
    gone = [ChangeRow(5, ChangeType.INSERT, '{"id":1,"r":"us"}'), ChangeRow(6, ChangeType.DELETE, '{"id":1,"r":"us"}')]
    assert list(target.writes("1", gone, ChangeStats(), [])) == [Write("1", 6, None, "us")]
    by_key = [ChangeRow(6, ChangeType.DELETE, NO_IMAGE)]  # an equality delete: the routing is unknown
    # the sink deletes it under each routing value the index holds it under
    assert list(target.writes("1", by_key, ChangeStats(), [])) == [Write("1", 6, None, routing_lookup=())]
    by_key_upsert = [*by_key, ChangeRow(6, ChangeType.INSERT, '{"id":1,"r":"eu"}')]
    assert list(target.writes("1", by_key_upsert, ChangeStats(), [])) == [  # ... but the new one
        Write("1", 6, '{"id":1,"r":"eu"}', "eu"),
        Write("1", 6, None, routing_lookup=("eu",)),
    ]
    upsert = [ChangeRow(6, ChangeType.DELETE, key_image("us")), ChangeRow(6, ChangeType.INSERT, '{"id":1,"r":"eu"}')]
    assert list(target.writes("1", upsert, ChangeStats(), [])) == [  # the key held its routing value
        Write("1", 6, '{"id":1,"r":"eu"}', "eu"),
        Write("1", 6, None, "us"),
    ]
    carried = [ChangeRow(5, ChangeType.DELETE, '{"id":1,"r":"us"}'), ChangeRow(5, ChangeType.INSERT, '{"id":1,"r":"us"}')]
    assert list(target.writes("1", carried, ChangeStats(), [])) == []


def test_a_routed_key_that_moved_in_a_pass_that_exports_is_deleted_under_the_old_value_first() -> None:
    """With external_gte (a pass that exports) a delete of the index's own version is not refused:
    after the index, on the shard both values share, it took the document just indexed."""
    target = routed_target(VersionType.EXTERNAL_GTE)
    moved = [ChangeRow(5, ChangeType.DELETE, '{"id":1,"r":"us"}'), ChangeRow(5, ChangeType.INSERT, '{"id":1,"r":"eu"}')]
    assert list(target.writes("1", moved, ChangeStats(), [])) == [
        Write("1", 5, None, "us"),
        Write("1", 5, '{"id":1,"r":"eu"}', "eu"),
    ]
    by_key_upsert = [ChangeRow(6, ChangeType.DELETE, NO_IMAGE), ChangeRow(6, ChangeType.INSERT, '{"id":1,"r":"eu"}')]
    assert list(target.writes("1", by_key_upsert, ChangeStats(), [])) == [
        Write("1", 6, None, routing_lookup=("eu",)),
        Write("1", 6, '{"id":1,"r":"eu"}', "eu"),
    ]


def test_a_routed_key_that_moved_without_versions_is_deleted_under_the_old_value_first() -> None:
    """Without versions (a Serverless collection) nothing refuses the delete, so it goes first,
    with no lease fencing the pass as with one (`process_table` takes an optional lease)."""
    moved = [ChangeRow(5, ChangeType.DELETE, '{"id":1,"r":"us"}'), ChangeRow(5, ChangeType.INSERT, '{"id":1,"r":"eu"}')]
    target = replace(routed_target(VersionType.EXTERNAL), versions=False)
    assert target.fence is None
    assert list(target.writes("1", moved, ChangeStats(), [])) == [
        Write("1", 5, None, "us"),
        Write("1", 5, '{"id":1,"r":"eu"}', "eu"),
    ]


def test_a_target_shipped_to_another_process_leaves_the_runs_destination_behind(tmp_path: Path) -> None:
    """A Spark task or a worker gets the target without the run's client (it opens its own from the
    section, its password resolved: no secret read there); in the run's process the target writes
    through the destination's client and dead-letter sink."""
    section = OpenSearchConfig(url="http://127.0.0.1:1", username="icecdc", password="resolved")
    destination = Destination.open(section, str(tmp_path / "letters"))
    target = replace(
        routed_target(VersionType.EXTERNAL), opensearch=section, dead_letter=str(tmp_path / "letters"), destination=destination
    )
    assert target.client() is destination.client and target.letters is destination.dead_letters
    shipped = pickle.loads(pickle.dumps(target))
    assert shipped.destination is None and shipped == target
    assert shipped.client() is not destination.client
    assert shipped.client().transport.kwargs["http_auth"] == ("icecdc", "resolved")

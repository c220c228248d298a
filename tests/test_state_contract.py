"""The state-store contract: every test runs on each StateStore implementation, the local SQLite
store and the DynamoDB store on moto's server. `make_store` opens one more client of the same
store (planners and processors are separate processes with their own clients)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from icecdc.errors import LeaseLost, StateError
from icecdc.model import Checkpoint, ItemKind, ItemStatus, ResyncKind, WorkItem
from icecdc.state import PendingOnce, ScopedStore, SqliteStateStore, StateStore
from icecdc.state.dynamodb import DynamoDbStateStore
from tests.support.aws import REGION

UUID = "9d6f3c5e-0000-4000-8000-000000000001"


@pytest.fixture(params=["sqlite", "scoped", pytest.param("dynamodb", marks=pytest.mark.aws)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], StateStore]]:
    opened: list[StateStore] = []

    def make() -> StateStore:
        if request.param == "sqlite":
            opened.append(SqliteStateStore(tmp_path / "state.db"))
        elif request.param == "scoped":  # one index's view of db.t among several: the same contract
            opened.append(ScopedStore(SqliteStateStore(tmp_path / "state.db"), "db.t", "db.t#slim"))
        else:
            table, url = request.getfixturevalue("state_table"), request.getfixturevalue("moto_url")
            opened.append(DynamoDbStateStore(table, region=REGION, endpoint_url=url))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: Callable[[], StateStore]) -> StateStore:
    return make_store()


def change_item(snapshot_id: int, sequence_number: int, added: tuple[str, ...] = ("a.parquet",), table: str = "db.t") -> WorkItem:
    return WorkItem(table, UUID, ItemKind.CHANGE, snapshot_id, sequence_number, 0, 1, added_data_files=added)


def test_keys_follow_the_architecture_contract() -> None:
    export = WorkItem("db.t", UUID, ItemKind.EXPORT, 7, 3, 0, 2, added_data_files=("s3://b/f.parquet",))
    assert export.key == "db.t|export|7|" + hashlib.sha256(b"s3://b/f.parquet").hexdigest()
    change = WorkItem("db.t", UUID, ItemKind.CHANGE, 8, 4, 0, 1, added_data_files=("b",), removed_data_files=("a",))
    assert change.key == "db.t|8|" + hashlib.sha256(b"a\nb").hexdigest()


def test_put_item_is_put_if_absent(store: StateStore) -> None:
    item = change_item(1, 1)
    assert store.put_item(item) is True
    assert store.put_item(item) is False
    assert store.pending_items("db.t") == [item]


def test_racing_writers_write_each_item_once(make_store: Callable[[], StateStore]) -> None:
    items = [change_item(i, i, (f"f{i}",)) for i in range(1, 100)]
    wins: list[bool] = []
    planners = [make_store() for _ in range(4)]  # each planner is its own process with its own client

    def plan(store: StateStore) -> None:
        wins.extend(store.put_item(item) for item in items)

    threads = [threading.Thread(target=plan, args=(p,)) for p in planners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(wins) == len(items)
    assert len(planners[0].pending_items("db.t")) == len(items)


def test_pending_items_are_oldest_first_and_per_table(store: StateStore) -> None:
    for seq in (3, 1, 2):
        store.put_item(change_item(100 + seq, seq, (f"f{seq}",)))
    store.put_item(change_item(5, 5, table="db.other"))
    assert [i.sequence_number for i in store.pending_items("db.t")] == [1, 2, 3]
    assert [i.table for i in store.pending_items("db.other")] == ["db.other"]


def test_items_round_trip_every_field(store: StateStore) -> None:
    item = WorkItem("db.t", UUID, ItemKind.CHANGE, 2**62, 9, 1, 3, added_data_files=("x", "y"), removed_data_files=("z",))
    store.put_item(item)
    assert store.pending_items("db.t") == [item]


def test_complete_advances_the_checkpoint_and_retires_items(store: StateStore) -> None:
    assert store.get_checkpoint("db.t") is None
    first, second = change_item(1, 1, ("a",)), change_item(2, 2, ("b",))
    store.put_item(first)
    store.put_item(second)
    store.complete("db.t", Checkpoint(UUID, 1, 1), [first])
    assert store.get_checkpoint("db.t") == Checkpoint(UUID, 1, 1)
    assert store.pending_items("db.t") == [second]
    assert store.put_item(first) is False  # a done item is still known: planning it again is a no-op


def test_a_done_item_put_again_replacing_done_is_pending_again_once(make_store: Callable[[], StateStore]) -> None:
    """The planner's changes after its checkpoint: a snapshot applied, rolled back and current again."""
    store, other = make_store(), make_store()
    item, untouched = change_item(1, 1, ("a",)), change_item(2, 2, ("b",))
    for each in (item, untouched):
        store.put_item(each)
    store.complete("db.t", None, [item, untouched])
    assert store.put_item(item) is False  # without replacing, a done item still stops it
    assert store.put_item(item, replace_done=True) is True
    assert other.put_item(item, replace_done=True) is False  # pending now: a racing planner writes nothing
    assert other.pending_items("db.t") == [item] and other.count_pending("db.t") == 1
    store.complete("db.t", Checkpoint(UUID, 1, 1), [item])
    assert store.pending_items("db.t") == [] and store.put_item(item) is False  # done again, as once


def test_checkpoint_never_moves_backwards(store: StateStore) -> None:
    store.complete("db.t", Checkpoint(UUID, 20, 5), [])
    store.complete("db.t", Checkpoint(UUID, 10, 3), [])
    assert store.get_checkpoint("db.t") == Checkpoint(UUID, 20, 5)


def test_export_claim_is_put_if_absent_per_table_uuid(store: StateStore) -> None:
    assert store.claim_export("db.t", Checkpoint(UUID, 1, 1)) == Checkpoint(UUID, 1, 1)
    assert store.claim_export("db.t", Checkpoint(UUID, 2, 2)) == Checkpoint(UUID, 1, 1)
    other = "9d6f3c5e-0000-4000-8000-000000000002"
    assert store.claim_export("db.t", Checkpoint(other, 5, 1)) == Checkpoint(other, 5, 1)


def test_done_status_is_not_pending(store: StateStore) -> None:
    item = change_item(1, 1)
    store.put_item(item)
    store.complete("db.t", None, [item])
    assert store.pending_items("db.t") == []
    assert store.get_checkpoint("db.t") is None


def test_checkpoint_keeps_schema_and_identifiers(store: StateStore) -> None:
    checkpoint = Checkpoint(UUID, 7, 3, schema_id=2, identifier_columns=("tenant", "id"))
    store.complete("db.t", checkpoint, [])
    assert store.get_checkpoint("db.t") == checkpoint


def test_a_resync_replaces_the_checkpoint_even_backwards(store: StateStore) -> None:
    store.complete("db.t", Checkpoint(UUID, 20, 5), [])
    store.complete("db.t", Checkpoint(UUID, 10, 3), [], replace=True)
    assert store.get_checkpoint("db.t") == Checkpoint(UUID, 10, 3)


def test_each_resync_claims_its_own_export(store: StateStore) -> None:
    first = store.claim_export("db.t", Checkpoint(UUID, 1, 1))
    assert store.claim_export("db.t", Checkpoint(UUID, 9, 5), replacing="cp1") == Checkpoint(UUID, 9, 5)
    assert store.claim_export("db.t", Checkpoint(UUID, 10, 6), replacing="cp1") == Checkpoint(UUID, 9, 5)
    assert store.claim_export("db.t", Checkpoint(UUID, 2, 2)) == first


def test_a_pass_learns_the_furthest_end_a_pass_began_with(make_store: Callable[[], StateStore]) -> None:
    a, b = make_store(), make_store()
    assert a.begin_pass("db.t", Checkpoint(UUID, 3, 3)) is None
    assert b.begin_pass("db.t", Checkpoint(UUID, 2, 2)) == Checkpoint(UUID, 3, 3)  # a shorter one: 3 is kept
    assert b.begin_pass("db.t", Checkpoint(UUID, 9, 9)) == Checkpoint(UUID, 3, 3)
    assert a.begin_pass("db.t", Checkpoint(UUID, 9, 9)) == Checkpoint(UUID, 9, 9)
    assert b.begin_pass("db.other", Checkpoint(UUID, 5, 5)) is None  # per table
    other = "9d6f3c5e-0000-4000-8000-000000000002"  # the table created again: its sequence numbers start over
    assert a.begin_pass("db.t", Checkpoint(other, 1, 1)) is None
    assert b.begin_pass("db.t", Checkpoint(other, 2, 2)) == Checkpoint(other, 1, 1)


def test_a_resync_lowers_the_recorded_pass_end_to_its_checkpoint(store: StateStore) -> None:
    """A resync's index holds nothing past its checkpoint: the end a dead pass recorded is not kept
    (planning would reset again and again), and it comes down in the completion's own write."""
    assert store.pass_end("db.t") is None
    store.complete("db.t", Checkpoint(UUID, 1, 1), [])
    store.begin_pass("db.t", Checkpoint(UUID, 9, 9))
    store.complete("db.t", Checkpoint(UUID, 2, 2), [])  # a plain completion keeps the furthest end
    assert store.pass_end("db.t") == Checkpoint(UUID, 9, 9)
    assert store.acquire_lease("db.t", "run", 60)
    store.complete("db.t", Checkpoint(UUID, 4, 4, 1, ("k",)), [], replace=True, fence="run")  # a reset, fenced
    assert store.pass_end("db.t") == Checkpoint(UUID, 4, 4)
    assert store.begin_pass("db.t", Checkpoint(UUID, 5, 5)) == Checkpoint(UUID, 4, 4)
    store.release_lease("db.t", "run")
    assert store.acquire_lease("db.t", "other", 60)
    with pytest.raises(LeaseLost, match="db.t"):  # a run that lost its lease lowers nothing
        store.complete("db.t", Checkpoint(UUID, 3, 3), [], replace=True, fence="run")
    assert store.pass_end("db.t") == Checkpoint(UUID, 5, 5)


def test_a_pass_that_wrote_nothing_puts_back_the_end_recorded_before_it(store: StateStore) -> None:
    """`unbegin_pass`: the end before, or none; nothing changes once another end was recorded."""
    store.begin_pass("db.t", Checkpoint(UUID, 9, 9))
    store.unbegin_pass("db.t", Checkpoint(UUID, 9, 9), None)
    assert store.pass_end("db.t") is None
    store.begin_pass("db.t", Checkpoint(UUID, 3, 3))
    store.begin_pass("db.t", Checkpoint(UUID, 9, 9))
    store.unbegin_pass("db.t", Checkpoint(UUID, 9, 9), Checkpoint(UUID, 3, 3))
    assert store.pass_end("db.t") == Checkpoint(UUID, 3, 3)
    store.begin_pass("db.t", Checkpoint(UUID, 12, 12))  # another pass recorded since
    store.unbegin_pass("db.t", Checkpoint(UUID, 9, 9), Checkpoint(UUID, 3, 3))
    store.unbegin_pass("db.t", Checkpoint(UUID, 9, 9), None)
    assert store.pass_end("db.t") == Checkpoint(UUID, 12, 12)


def test_the_lease_holder_is_its_owner_until_it_runs_out(store: StateStore) -> None:
    assert store.lease_holder("db.t") is None
    before = time.time()
    assert store.acquire_lease("db.t", "host:1:run", 30)
    holder = store.lease_holder("db.t")
    assert holder is not None and holder[0] == "host:1:run" and before + 29 <= holder[1] <= time.time() + 30
    store.release_lease("db.t", "host:1:run")
    assert store.lease_holder("db.t") is None
    assert store.acquire_lease("db.t", "gone", 0.01)
    time.sleep(0.05)
    assert store.lease_holder("db.t") is None  # run out: no one holds it


def test_leases_exclude_other_owners_until_they_expire(make_store: Callable[[], StateStore]) -> None:
    a, b = make_store(), make_store()
    assert a.acquire_lease("db.t", "run-a", 30)
    assert a.acquire_lease("db.t", "run-a", 30)  # renewal
    assert not b.acquire_lease("db.t", "run-b", 30)
    assert b.acquire_lease("db.other", "run-b", 30)  # per table
    a.release_lease("db.t", "run-a")
    assert b.acquire_lease("db.t", "run-b", 0.2)
    b.release_lease("db.t", "run-a")  # not the owner: no effect
    assert not a.acquire_lease("db.t", "run-a", 30)
    time.sleep(0.3)
    assert a.acquire_lease("db.t", "run-a", 30)  # b's lease expired


def test_a_fenced_checkpoint_advances_only_while_its_owner_holds_the_lease(store: StateStore) -> None:
    assert store.acquire_lease("db.t", "first", 60)
    store.complete("db.t", Checkpoint(UUID, 1, 1), [], fence="first")
    # the first run's lease ran out (a long GC pause, a lost network) and a second run took it
    store.release_lease("db.t", "first")
    assert store.acquire_lease("db.t", "second", 0.2)
    with pytest.raises(LeaseLost, match="db.t"):
        store.complete("db.t", Checkpoint(UUID, 2, 2), [], fence="first")
    assert store.get_checkpoint("db.t") == Checkpoint(UUID, 1, 1)
    time.sleep(0.3)  # and the second run's own lease expired without renewal
    with pytest.raises(LeaseLost):
        store.complete("db.t", Checkpoint(UUID, 2, 2), [], replace=True, fence="second")
    assert store.acquire_lease("db.t", "second", 60)
    store.complete("db.t", Checkpoint(UUID, 2, 2), [], fence="second")
    assert store.get_checkpoint("db.t") == Checkpoint(UUID, 2, 2)


def test_the_checkpoint_keeps_the_index_identity(store: StateStore) -> None:
    checkpoint = Checkpoint(UUID, 1, 1, 0, ("id",), "index-uuid-1")
    store.complete("db.t", checkpoint, [])
    assert store.get_checkpoint("db.t") == checkpoint
    assert checkpoint.token != Checkpoint(UUID, 1, 1, 0, ("id",), "index-uuid-2").token


def test_applied_items_stay_until_completed_and_a_done_item_is_never_applied_again(store: StateStore) -> None:
    first, second = change_item(1, 1, ("a",)), change_item(1, 1, ("b",))
    for item in (first, second):
        store.put_item(item)
    store.mark_applied("db.t", [first], "index-uuid")
    by_status = {i.key: (i.status, i.applied_to) for i in store.pending_items("db.t")}
    assert by_status == {first.key: (ItemStatus.APPLIED, "index-uuid"), second.key: (ItemStatus.PENDING, "")}
    assert store.count_pending("db.t") == 2
    store.complete("db.t", Checkpoint(UUID, 1, 1), [first, second])
    store.mark_applied("db.t", [second], "index-uuid")  # a slow pass marking what another completed
    assert store.pending_items("db.t") == [] and store.count_pending("db.t") == 0


def test_a_fenced_mark_applied_marks_nothing_once_its_owner_lost_the_lease(store: StateStore) -> None:
    item, done = change_item(1, 1, ("a",)), change_item(1, 1, ("b",))
    for each in (item, done):
        store.put_item(each)
    store.complete("db.t", None, [done])
    assert store.acquire_lease("db.t", "first", 60)
    store.mark_applied("db.t", [item, done], "index-uuid", fence="first")  # a completed item is skipped, not resurrected
    assert [(i.key, i.status) for i in store.pending_items("db.t")] == [(item.key, ItemStatus.APPLIED)]
    store.release_lease("db.t", "first")
    assert store.acquire_lease("db.t", "second", 60)
    with pytest.raises(LeaseLost, match="db.t"):
        store.mark_applied("db.t", [item], "another-index", fence="first")
    assert [i.applied_to for i in store.pending_items("db.t")] == ["index-uuid"]


def test_put_items_writes_each_item_put_if_absent_in_batches(make_store: Callable[[], StateStore]) -> None:
    """Batched puts (DynamoDB: 50 items a transaction): an item that exists (pending, or done)
    cancels its transaction there, and the others of that transaction are written all the same."""
    store, other = make_store(), make_store()
    items = [change_item(i, i, (f"f{i}",)) for i in range(1, 131)]
    pending, done = items[10], items[75]  # in the first and the second transaction
    assert store.put_items([pending, done]) == 2
    store.complete("db.t", None, [done])
    assert other.put_items(items) == len(items) - 2
    assert {i.key for i in store.pending_items("db.t")} == {i.key for i in items if i != done}
    assert store.put_items(items) == 0  # planning twice is a no-op
    assert store.put_items(items, replace_done=True) == 1  # the done one is pending again, only it
    assert store.count_pending("db.t") == len(items)


def test_racing_batched_writers_write_each_item_once(make_store: Callable[[], StateStore]) -> None:
    items = [change_item(i, i, (f"f{i}",)) for i in range(1, 161)]
    wins: list[int] = []
    planners = [make_store() for _ in range(3)]

    def plan(store: StateStore, start: int) -> None:  # overlapping, from different places
        wins.append(store.put_items(items[start:] + items[:start]))

    threads = [threading.Thread(target=plan, args=(p, 50 * n)) for n, p in enumerate(planners)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(wins) == len(items)
    assert planners[0].pending_items("db.t") == items


def test_a_batched_mark_applied_skips_only_the_items_completed_meanwhile(store: StateStore) -> None:
    items = [change_item(1, 1, (f"f{i:03d}",)) for i in range(120)]
    store.put_items(items)
    completed = [items[3], items[60], items[119]]
    store.complete("db.t", None, completed)
    assert store.acquire_lease("db.t", "run", 60)
    store.mark_applied("db.t", items, "index-uuid", fence="run")
    left = store.pending_items("db.t")
    assert {i.key for i in left} == {i.key for i in items} - {i.key for i in completed}  # none resurrected
    assert {(i.status, i.applied_to) for i in left} == {(ItemStatus.APPLIED, "index-uuid")}
    store.mark_applied("db.t", items, "index-2")  # unfenced, the same
    assert {i.applied_to for i in store.pending_items("db.t")} == {"index-2"} and store.count_pending("db.t") == 117


def export_item(group: int, groups: int, files: int = 100) -> WorkItem:
    paths = tuple(f"s3://lake/t/data/part-{group:05d}-{n:03d}.parquet" for n in range(files))
    return WorkItem("db.t", UUID, ItemKind.EXPORT, 7, 3, group, groups, added_data_files=paths)


def test_pending_heads_are_the_pending_items_without_their_files(store: StateStore) -> None:
    """A head says what an item is (kind, snapshot, group, status, mark) and how many files it lists,
    read a page at a time; its files are fetched by `bodies`, in the order asked, as the store has
    them: marks included, files as planned, done items left out. More items than a request takes
    (DynamoDB 100 keys, SQLite 500)."""
    items = [export_item(g, 620, files=3) for g in range(620)]
    store.put_items([*items, change_item(9, 9, ("a", "b"))])
    heads = store.pending_heads("db.t")
    assert heads == [i.head for i in store.pending_items("db.t")]
    assert [h.file_count for h in heads] == [3] * 620 + [2] and heads[-1].kind == ItemKind.CHANGE
    store.mark_applied("db.t", heads[:150], "index-uuid")
    store.complete("db.t", None, heads[10:20])
    asked = list(reversed(heads))
    bodies = store.bodies("db.t", asked)
    assert [b.key for b in bodies] == [h.key for h in asked if h not in heads[10:20]]
    by_key = {i.key: i for i in items}
    assert all(b.added_data_files == by_key[b.key].added_data_files for b in bodies[1:])
    marked = {b.key for b in bodies if (b.status, b.applied_to) == (ItemStatus.APPLIED, "index-uuid")}
    assert marked == {h.key for h in heads[:150]} - {h.key for h in heads[10:20]}
    assert store.pending_heads("db.t") == [b.head for b in reversed(bodies)]
    assert store.count_pending("db.t") == 611


def test_marking_and_completing_by_head_keep_the_item_files(store: StateStore) -> None:
    """`mark_applied` and `complete` take heads as they take items: by key. The item keeps its
    files; a done one is never pending again, and a planner's put of it again is a no-op."""
    item = export_item(0, 1, files=2)
    store.put_items([item])
    (head,) = store.pending_heads("db.t")
    store.mark_applied("db.t", [head], "index-uuid")
    (marked,) = store.pending_items("db.t")
    assert marked == dataclasses.replace(item, status=ItemStatus.APPLIED, applied_to="index-uuid")
    store.complete("db.t", None, [head])
    assert store.pending_heads("db.t") == [] and store.bodies("db.t", [head]) == []
    assert store.put_item(item) is False


def read_pages(store: StateStore, limit: int, between: Callable[[], None] = lambda: None) -> list[list[WorkItem]]:
    """Every page of db.t's pending items, `limit` a page, calling `between` after each page."""
    pages, after = [], None
    while True:
        page = store.pending_page("db.t", after, limit)
        assert len(page.items) <= limit
        pages.append(list(page.items))
        between()
        if page.after is None:
            return pages
        after = page.after


def test_pending_items_are_read_a_page_at_a_time_oldest_first(store: StateStore) -> None:
    """Pages in sequence-number order, then key; each item once; a page holds at most its limit."""
    items = [change_item(s, s, (f"f{s}-{n}",)) for s in range(10, 0, -1) for n in range(3)]
    store.put_items([*items, change_item(1, 1, table="db.other")])
    pages = read_pages(store, 7)
    assert [len(page) for page in pages[:4]] == [7, 7, 7, 7] and sum(map(len, pages)) == 30
    read = [i for page in pages for i in page]
    assert read == sorted(items, key=lambda i: (i.sequence_number, i.key)) == store.pending_items("db.t")


def test_paging_skips_items_done_meanwhile_and_never_reads_one_twice(store: StateStore) -> None:
    items = [change_item(s, s, (f"f{s}",)) for s in range(1, 21)]
    store.put_items(items)
    done: list[WorkItem] = []

    def between() -> None:  # a pass completes the oldest left and one far ahead, between two pages
        left = [i for i in items if i not in done]
        finished = [left[0], left[-1]] if len(left) > 1 else left
        store.complete("db.t", None, finished)
        done.extend(finished)

    read = [i.key for page in read_pages(store, 4, between) for i in page]
    assert len(read) == len(set(read))
    assert items[-1].key not in read  # done before its page came
    assert set(read) | {i.key for i in done} == {i.key for i in items}


def test_a_run_reads_pending_items_once_and_follows_its_own_writes(make_store: Callable[[], StateStore]) -> None:
    """`PendingOnce`: one read of the heads, kept in step with what the run writes; another
    planner's items wait for the next read (`forget_pending`), as they would for the next round."""
    store, planner = make_store(), make_store()
    first, second, third = (change_item(s, s, (f"f{s}",)) for s in (1, 2, 3))
    store.put_items([first, second])
    run = PendingOnce(store)
    assert run.pending_heads("db.t") == [first.head, second.head]
    planner.put_items([third])
    assert run.pending_heads("db.t") == [first.head, second.head] and run.count_pending("db.t") == 2
    run.mark_applied("db.t", [second.head], "index-uuid")
    run.complete("db.t", None, [first.head])
    assert run.pending_heads("db.t") == store.pending_heads("db.t")[:1]  # as the store has them
    run.forget_pending()
    assert run.pending_heads("db.t") == store.pending_heads("db.t")
    assert [i.key for i in run.pending_heads("db.t")] == [second.key, third.key]
    fourth = change_item(4, 4, ("f4",))
    assert run.put_items([fourth]) == 1  # a put that wrote: read again
    assert run.pending_heads("db.t") == store.pending_heads("db.t") and len(run.pending_heads("db.t")) == 3


def test_a_run_keeps_its_pending_items_while_its_puts_find_every_item_kept(make_store: Callable[[], StateStore]) -> None:
    """`PendingOnce` across a capped export's rounds: planning puts the same items again each round.
    While they are all kept and none is written, nothing is read again; a put of an item another
    planner put meanwhile (written by neither this put nor kept) reads the items afresh."""
    store, planner = make_store(), make_store()
    first, second, third, fourth = (change_item(s, s, (f"f{s}",)) for s in (1, 2, 3, 4))
    store.put_items([first, second])
    run = PendingOnce(store)
    assert run.pending_heads("db.t") == [first.head, second.head]
    planner.put_items([fourth])  # of a commit this run has not planned yet
    assert run.put_items([first, second], replace_done=True) == 0
    assert run.put_items([]) == 0
    assert run.pending_heads("db.t") == [first.head, second.head]  # kept: no read
    planner.put_items([third])
    assert run.put_items([first, second, third], replace_done=True) == 0  # the planner's, not kept
    assert [i.key for i in run.pending_heads("db.t")] == [i.key for i in (first, second, third, fourth)]


@pytest.mark.parametrize("files", [2, 6000], ids=["kept", "fetched"])
def test_a_run_answers_bodies_as_the_store_has_them_whether_it_kept_them_or_not(
    make_store: Callable[[], StateStore], files: int
) -> None:
    """`PendingOnce.bodies`: a backlog of at most `KEPT_BODY_FILES` files keeps its items' files
    from its read, answered with the marks of the run's own writes; a larger one asks the store.
    Either way the answer is the store's, done items left out."""
    store = make_store()
    items = [export_item(g, 3, files) for g in range(3)]
    store.put_items(items)
    run = PendingOnce(store)
    heads = run.pending_heads("db.t")
    run.mark_applied("db.t", heads[:1], "index-uuid")
    run.complete("db.t", None, heads[2:])
    for asked in (heads[:2], heads, heads[1::-1]):
        assert run.bodies("db.t", asked) == store.bodies("db.t", asked)
    assert [b.applied_to for b in run.bodies("db.t", heads[:2])] == ["index-uuid", ""]


def test_a_run_reads_the_checkpoint_and_pass_end_once_a_round_and_again_after_its_own_writes(
    make_store: Callable[[], StateStore],
) -> None:
    """`PendingOnce`: the checkpoint and the pass end, asked by planning, the claim of the index,
    the selection and the pass, are read once a round (`forget_pending`); the run's own
    `complete` and `begin_pass` read them again, as the store keeps them (never backwards, the
    furthest end), and so does a put that wrote (the pending items are read again, and judged by
    a checkpoint as fresh); `begin_pass` still answers the end another pass recorded."""
    store, other = make_store(), make_store()
    store.complete("db.t", Checkpoint(UUID, 1, 1), [])
    store.begin_pass("db.t", Checkpoint(UUID, 1, 1))
    run = PendingOnce(store)
    assert run.get_checkpoint("db.t") == Checkpoint(UUID, 1, 1) and run.pass_end("db.t") == Checkpoint(UUID, 1, 1)
    other.complete("db.t", Checkpoint(UUID, 2, 2), [])
    other.begin_pass("db.t", Checkpoint(UUID, 3, 3))
    assert run.get_checkpoint("db.t") == Checkpoint(UUID, 1, 1)  # read once a round
    assert run.pass_end("db.t") == Checkpoint(UUID, 1, 1)
    assert run.begin_pass("db.t", Checkpoint(UUID, 2, 2)) == Checkpoint(UUID, 3, 3)  # the store's, afresh
    assert run.pass_end("db.t") == Checkpoint(UUID, 3, 3)
    run.complete("db.t", Checkpoint(UUID, 1, 1), [])  # behind the stored one: the store keeps its own
    assert run.get_checkpoint("db.t") == store.get_checkpoint("db.t") == Checkpoint(UUID, 2, 2)
    other.complete("db.t", Checkpoint(UUID, 5, 5), [])
    run.forget_pending()  # the next round
    assert run.get_checkpoint("db.t") == Checkpoint(UUID, 5, 5)
    run.complete("db.t", Checkpoint(UUID, 4, 4), [], replace=True)  # a resync: its end comes down too
    assert run.get_checkpoint("db.t") == Checkpoint(UUID, 4, 4)
    assert run.pass_end("db.t") == store.pass_end("db.t")
    other.complete("db.t", Checkpoint(UUID, 6, 6), [])
    assert run.put_items([change_item(7, 7)]) == 1  # the pending items read afresh: the checkpoint with them
    assert run.get_checkpoint("db.t") == Checkpoint(UUID, 6, 6)


def test_an_export_item_key_hashes_its_sorted_files() -> None:
    """An export item groups files; a one-file item keeps the key it had when an item held one file."""
    grouped = WorkItem("db.t", UUID, ItemKind.EXPORT, 7, 3, 0, 2, added_data_files=("s3://b/a", "s3://b/b"))
    assert grouped.key == "db.t|export|7|" + hashlib.sha256(b"s3://b/a\ns3://b/b").hexdigest()
    resync = WorkItem(
        "db.t", UUID, ItemKind.EXPORT, 7, 3, 0, 2, added_data_files=("s3://b/b", "s3://b/a"), resync=ResyncKind.RESET
    )
    assert resync.key == "db.t|resync||7|" + hashlib.sha256(b"s3://b/a\ns3://b/b").hexdigest()


def test_a_state_file_sqlite_cannot_use_is_not_left_open(tmp_path: Path) -> None:
    """A store that fails to open closes its connection: a file held open keeps a filesystem from being
    remounted read-only, and a long-lived process (`--watch`) from letting the file go."""
    state = tmp_path / "state.db"
    state.write_bytes(b"not a database" * 600)
    with pytest.raises(StateError, match="is unreadable or corrupt"):
        SqliteStateStore(state)
    held = []
    for fd in os.listdir("/proc/self/fd"):  # Linux's list of this process's open files
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
    assert str(state) not in held

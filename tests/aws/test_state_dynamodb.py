"""DynamoDbStateStore against moto: what the shared contract suite does not see (the layout, TTL,
pagination, racing writers). The contract suite runs on it in tests/test_state_contract.py."""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from icecdc.config import DynamoDbStateConfig
from icecdc.model import Checkpoint, ItemKind, ItemStatus, WorkItem
from icecdc.state import ItemBodies, PendingOnce, open_state_store
from icecdc.state.dynamodb import TTL_ATTRIBUTE, DynamoDbStateStore
from tests.support.aws import REGION, aws_client


@pytest.fixture
def store(state_table: str, moto_url: str) -> DynamoDbStateStore:
    return DynamoDbStateStore(state_table, region=REGION, endpoint_url=moto_url)


def change(snapshot: int, sequence: int, *files: str) -> WorkItem:
    return WorkItem("db.t", "uuid-1", ItemKind.CHANGE, snapshot, sequence, 0, 1, added_data_files=files)


def test_open_state_store_builds_it_from_config(state_table: str, moto_url: str) -> None:
    store = open_state_store(DynamoDbStateConfig(table=state_table, region=REGION, endpoint_url=moto_url))
    assert isinstance(store, DynamoDbStateStore)
    assert store.get_checkpoint("db.t") is None
    store.close()


def test_done_records_carry_a_ttl(store: DynamoDbStateStore, state_table: str, moto_url: str) -> None:
    item = change(1, 1, "s3://b/f1.parquet")
    store.put_item(item)
    store.complete("db.t", Checkpoint("uuid-1", 1, 1), [item])
    records = aws_client("dynamodb", moto_url).scan(TableName=state_table)["Items"]
    done = [r for r in records if r["sk"]["S"].startswith("done|")]
    assert len(done) == 1
    expires = int(done[0][TTL_ATTRIBUTE]["N"])
    assert time.time() + store.done_ttl_seconds - 60 < expires <= time.time() + store.done_ttl_seconds
    # the checkpoint itself never expires
    assert all(TTL_ATTRIBUTE not in r for r in records if r["sk"]["S"] == "checkpoint")


def test_pending_items_page_through_large_queues_in_sequence_order(store: DynamoDbStateStore) -> None:
    # ~2.5 MB of item bodies: more than one 1 MB query page
    big = "s3://bucket/" + "x" * 5000
    items = [change(s, s, *(f"{big}/{s}/{n}" for n in range(5))) for s in range(100, 0, -1)]
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(store.put_item, items))
    assert [i.sequence_number for i in store.pending_items("db.t")] == list(range(1, 101))


def test_racing_export_claims_agree(store: DynamoDbStateStore) -> None:
    claims = [Checkpoint("uuid-1", snapshot, snapshot) for snapshot in range(1, 9)]
    with ThreadPoolExecutor(4) as pool:
        recorded = set(pool.map(lambda c: store.claim_export("db.t", c), claims))
    assert len(recorded) == 1


def test_puts_and_marks_are_batched_fifty_items_a_transaction(store: DynamoDbStateStore) -> None:
    """An export of N files costs ~N/100 items, and their writes ~items/50 requests: never one per file."""
    requests: list[str] = []
    store.client.meta.events.register("before-call.dynamodb", lambda model, **_: requests.append(model.name))
    items = [change(1, 1, f"f{i:03d}") for i in range(120)]
    assert store.put_items(items[:1]) == 1
    requests.clear()
    assert store.put_items(items) == 119  # the first transaction, cancelled by items[0], sent again without it
    assert requests == ["TransactWriteItems"] * 4
    requests.clear()
    assert store.acquire_lease("db.t", "run", 60)
    store.mark_applied("db.t", items, "index-uuid", fence="run")
    assert requests == ["PutItem"] + ["TransactWriteItems"] * 3


def test_heads_are_one_query_page_and_bodies_one_batch_get_per_hundred(store: DynamoDbStateStore) -> None:
    """A pass fetches the files of what it takes by key, 100 keys a `BatchGetItem`, not by paging
    through the backlog; a mark is an Update by key, so marks and completions take heads."""
    requests: list[str] = []
    store.client.meta.events.register("before-call.dynamodb", lambda model, **_: requests.append(model.name))
    store.put_items([change(s, s, f"f{s}.parquet") for s in range(1, 251)])
    requests.clear()
    heads = store.pending_heads("db.t")
    assert requests == ["Query"] and len(heads) == 250
    requests.clear()
    bodies = store.bodies("db.t", heads[:201])
    assert requests == ["BatchGetItem"] * 3
    assert [b.added_data_files for b in bodies] == [(f"f{s}.parquet",) for s in range(1, 202)]
    run = PendingOnce(store)  # a small backlog: a run keeps the files it read with the heads
    requests.clear()
    assert run.pending_heads("db.t") == heads and run.bodies("db.t", heads[:201]) == bodies
    assert requests == ["Query"]
    store.mark_applied("db.t", heads[:60], "index-uuid")
    store.complete("db.t", None, heads[:10])
    assert [(b.status, b.applied_to) for b in store.bodies("db.t", heads[:61])] == [
        *[("applied", "index-uuid")] * 50,
        ("pending", ""),
    ]


def test_records_of_the_earlier_layout_read_as_they_were_written(
    store: DynamoDbStateStore, state_table: str, moto_url: str
) -> None:
    """A pending record an earlier version marked held its mark in its body alone (it rewrote the
    whole record); one with no `applied_to` attribute reads its mark from its body, and marking it
    again sets the attribute."""
    client = aws_client("dynamodb", moto_url)
    item = dataclasses.replace(change(1, 1, "f1.parquet"), status=ItemStatus.APPLIED, applied_to="old-index")
    sk = f"pending|{item.sequence_number:020d}|{item.key}"
    record = {"pk": {"S": "db.t"}, "sk": {"S": sk}, "status": {"S": "applied"}, "sequence_number": {"N": "1"}}
    client.put_item(TableName=state_table, Item={**record, "body": {"S": item.to_json()}})
    assert store.pending_items("db.t") == [item] and store.pending_heads("db.t") == [item.head]
    store.mark_applied("db.t", [item.head], "new-index")
    assert [(b.applied_to, b.added_data_files) for b in store.bodies("db.t", [item.head])] == [("new-index", ("f1.parquet",))]


def test_a_pass_fetches_the_files_the_caps_may_take_once(store: DynamoDbStateStore) -> None:
    """`ItemBodies`: the caps ask for an export's items one by one; the first fetches it and the
    items after it that a pass of `batch.max_files` may take, in one `BatchGetItem`; none is
    fetched twice."""
    paths = [tuple(f"s3://b/t/{g}/{n}.parquet" for n in range(100)) for g in range(30)]
    store.put_items(WorkItem("db.t", "uuid-1", ItemKind.EXPORT, 1, 1, g, 30, paths[g]) for g in range(30))
    heads = sorted(store.pending_heads("db.t"), key=lambda h: h.group)  # as a batch holds them
    requests: list[str] = []
    store.client.meta.events.register("before-call.dynamodb", lambda model, **_: requests.append(model.name))
    bodies = ItemBodies(store, "db.t", heads, files_ahead=1000)
    assert bodies.one(heads[0]).added_data_files == paths[0] and requests == ["BatchGetItem"]
    assert bodies.one(heads[9]).added_data_files == paths[9] and len(requests) == 1
    assert bodies.one(heads[10]).added_data_files == paths[10] and len(requests) == 2
    assert [b.added_data_files for b in bodies.of(heads[:20])] == paths[:20] and len(requests) == 2
    assert [b.added_data_files for b in bodies.of(heads[15:25])] == paths[15:25] and len(requests) == 3

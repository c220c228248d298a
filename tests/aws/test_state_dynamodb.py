"""DynamoDbStateStore against moto: what the shared contract suite does not see (the layout, TTL,
pagination, racing writers). The contract suite runs on it in tests/test_state_contract.py."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from icecdc.config import DynamoDbStateConfig
from icecdc.model import Checkpoint, ItemKind, WorkItem
from icecdc.state import open_state_store
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

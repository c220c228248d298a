"""A run that dies inside `complete` on the DynamoDB store (its writes are not one transaction):
whichever write was the last to land, the next run finishes the batch and the table goes on.

The crash is injected into the store's own boto3 client, after the n-th write request succeeded
(botocore's after-call event), so every prefix of `complete`'s writes is a state a run can leave.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.types import StringType

from icecdc.config import BatchConfig, Config, parse_config
from icecdc.engines import Engines
from icecdc.model import ResyncKind
from icecdc.planning import plan_table
from icecdc.state.dynamodb import DynamoDbStateStore
from icecdc.sync import process_table
from tests.support.aws import REGION
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

NAME = "db.orders"
FILES = 3  # the resync exports one item per file (max_files=1); each retired in a write of its own below
WRITES = 1 + FILES  # the checkpoint, then one transaction per item


class Killed(Exception):
    pass


class KillAfterWrites:
    """Raise after the `survive`-th successful write request of the client: the process dies there."""

    def __init__(self, store: DynamoDbStateStore, survive: int) -> None:
        self.left = survive
        store.client.meta.events.register("after-call.dynamodb.TransactWriteItems", self)

    def __call__(self, **_: Any) -> None:
        self.left -= 1
        if self.left == 0:
            raise Killed


def dynamodb_config(pipeline: Pipeline, state_table: str, moto_url: str) -> Config:
    raw = pipeline.config_dict([{"name": NAME}])
    raw["state"] = {"type": "dynamodb", "table": state_table, "region": REGION, "endpoint_url": moto_url, "lease_seconds": 5}
    return parse_config(raw)


@pytest.mark.parametrize("survive", range(1, WRITES + 1))
def test_a_crash_after_any_write_of_complete_leaves_a_state_the_next_run_finishes(
    pipeline: Pipeline, state_table: str, moto_url: str, survive: int
) -> None:
    table = orders(pipeline)
    for i in range(FILES):
        table.append(rows(i))
    config = dynamodb_config(pipeline, state_table, moto_url)
    pipeline.sync(config, NAME)
    with table.update_schema() as schema:  # documents gain a field: every row is written again
        schema.add_column("note", StringType())

    store = DynamoDbStateStore(state_table, REGION, moto_url, items_per_transaction=1)
    plan_table(table, config.table(NAME), store, ("id",), limits=BatchConfig(max_files=1))
    assert {i.resync for i in store.pending_items(NAME)} == {ResyncKind.REWRITE}
    KillAfterWrites(store, survive)
    with pytest.raises(Killed):
        process_table(Engines(config.engine, spark=pipeline.spark), table, config.table(NAME), store, config.opensearch, ("id",))

    pipeline.sync(config, NAME)  # the next run converges ...
    table.append(rows(10))
    assert pipeline.sync(config, NAME).writes.indexed == 1  # ... and the table goes on commit by commit
    fresh = DynamoDbStateStore(state_table, REGION, moto_url)
    assert fresh.pending_items(NAME) == []
    checkpoint = fresh.get_checkpoint(NAME)
    assert checkpoint is not None and checkpoint.snapshot_id == pipeline.catalog.load_table(NAME).current_snapshot().snapshot_id

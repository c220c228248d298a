"""What a crashed run leaves unfinished in the index is work for the planner's sweep, not only for the
table's next commit: a Glue run killed between the checkpoint and the alias swap leaves the alias on
the old generation, which serves rows the table no longer has until a pass makes the swap."""

from __future__ import annotations

import os
from typing import Any

import pytest
from opensearchpy import OpenSearch

from icecdc.aws.planner import bulk_retry_seconds
from icecdc.config import OpenSearchConfig, load_config
from icecdc.model import PassPoint
from icecdc.sync import sync
from icecdc.verify import diff_index
from tests.support.aws import Lake, rows
from tests.support.planner import SCHEDULE_EVENT, Deployment
from tests.support.probes import Crash, crash_at


@pytest.fixture
def search(osmem_server: Any) -> str:
    return str(osmem_server.clone().url)


def test_the_sweep_makes_the_swap_a_crashed_run_did_not_make(
    lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, search: str
) -> None:
    name = f"{lake.database}.orders"
    lake.create_table(name).append(rows(1, 2, 3))
    lake.create_table(f"{lake.database}.customers").append(rows(7))
    deployment = Deployment(lake, state_table, [name, f"{lake.database}.customers"], monkeypatch, opensearch_url=search)
    deployment.invoke(SCHEDULE_EVENT)  # the exports, applied by the planner
    client = OpenSearch(hosts=[search])
    assert sorted(client.indices.get_alias(name="orders")) == ["orders-1"]

    lake.catalog().drop_table(name)
    lake.create_table(name).append(rows(8, 9))  # dropped and created again: a rebuild into a new generation
    with pytest.raises(Crash):  # a run killed between its checkpoint and the swap
        sync(load_config(os.environ["ICECDC_CONFIG"]), None, [name], probe=crash_at(PassPoint.CHECKPOINTED))
    assert sorted(client.indices.get_alias(name="orders")) == ["orders-1"]

    answer = deployment.invoke(SCHEDULE_EVENT)  # no commit since: only the sweep
    outcome = next(o for o in answer["tables"] if o["table"] == name)
    assert outcome["has_work"] and outcome["job_run_id"] is None and outcome["error"] is None
    assert sorted(client.indices.get_alias(name="orders")) == ["orders-2"]
    diff = diff_index(lake.catalog().load_table(name), ("id",), client, "orders")
    assert not diff, diff.summary()
    assert not next(o for o in deployment.invoke(SCHEDULE_EVENT)["tables"] if o["table"] == name)["has_work"]


def test_the_planner_keeps_the_bulk_retry_budget_on_top_of_a_pass_reserve() -> None:
    # 0.5 + 1 + 2 + 4 + 8 s of backoff between the five retries of one request
    assert bulk_retry_seconds(OpenSearchConfig(url="http://localhost:9200")) == 15.5
    assert (
        bulk_retry_seconds(OpenSearchConfig(url="http://localhost:9200", max_retries=8, max_backoff_seconds=10)) == 45.5
    )  # 0.5 + 1 + 2 + 4 + 8 + 3 x 10

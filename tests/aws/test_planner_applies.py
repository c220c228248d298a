"""The planner applies small batches itself: the whole path, an event → the planner
Lambda's handler → the index, against moto (Glue Data Catalog, S3, DynamoDB, Glue jobs) and osmem,
with a Glue-catalog table. A small commit is searchable without a Glue run; a large one, a table
another run holds, and a Lambda near its timeout start the job and write nothing here."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from opensearchpy import OpenSearch

from icecdc.state.dynamodb import DynamoDbStateStore
from icecdc.verify import diff_index
from tests.support.aws import REGION, Lake, aws_client, rows
from tests.support.planner import Deployment, table_event


def buffered(*events: dict[str, Any]) -> dict[str, Any]:
    """The events as Lambda's SQS event source hands them to the planner (the stack's buffer)."""
    return {"Records": [{"messageId": str(i), "body": json.dumps(e), "eventSource": "aws:sqs"} for i, e in enumerate(events)]}


@dataclass
class LambdaContext:
    remaining_ms: int

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def search(osmem_server: Any) -> str:
    return str(osmem_server.clone().url)


def deployed(lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, url: str, **engine: Any) -> Deployment:
    orders = lake.create_table(f"{lake.database}.orders")
    orders.append(rows(1, 2, 3))
    lake.create_table(f"{lake.database}.customers").append(rows(7))
    tables = [f"{lake.database}.orders", f"{lake.database}.customers"]
    return Deployment(lake, state_table, tables, monkeypatch, opensearch_url=url, engine=engine or None)


def assert_index_equals_table(deployment: Deployment, url: str) -> None:
    table = deployment.lake.catalog().load_table(deployment.orders)
    diff = diff_index(table, ("id",), OpenSearch(hosts=[url]), "orders")
    assert not diff, diff.summary()


def test_small_commits_become_searchable_without_a_glue_run(
    lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, search: str, caplog: pytest.LogCaptureFixture
) -> None:
    deployment = deployed(lake, state_table, monkeypatch, search)
    with caplog.at_level(logging.INFO, logger="icecdc.progress"):
        answer = deployment.invoke(buffered(table_event(deployment.db, "orders")), LambdaContext(300_000))
    assert answer == {"batchItemFailures": []}
    assert_index_equals_table(deployment, search)  # the export of a small table, applied by the planner
    # the planner's log says the pass's progress in the structured lines a Glue run's has
    assert f"progress table={deployment.orders} stage=export files=1/1 rows=3/3 " in caplog.text

    lake.catalog().load_table(deployment.orders).append(rows(4, 5, region="eu"))
    outcome = deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]
    assert (outcome["applied_snapshots"], outcome["job_run_id"], outcome["error"]) == (1, None, None)
    assert_index_equals_table(deployment, search)
    assert deployment.runs(deployment.orders) == []
    assert deployment.pending(deployment.orders) == []
    # the planner publishes the batch's dead letters as a Glue run does, so the stack's alarm sees them
    cloudwatch = aws_client("cloudwatch", lake.moto_url)
    for metric in ("DeadLetters", "RowsApplied", "FilesRead"):  # the dashboard's per-table figures, as a Glue run's
        metrics = cloudwatch.list_metrics(Namespace="icecdc", MetricName=metric)["Metrics"]
        assert {"Name": "Table", "Value": deployment.orders} in [d for m in metrics for d in m["Dimensions"]], metric


def test_a_large_commit_starts_the_job_and_writes_nothing_here(
    lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, search: str
) -> None:
    deployment = deployed(lake, state_table, monkeypatch, search, in_process_max_files=1)
    deployment.invoke(table_event(deployment.db, "orders"))  # the export: one file, applied here
    lake.catalog().load_table(deployment.orders).append(rows(4))
    lake.catalog().load_table(deployment.orders).append(rows(5))  # two files since the checkpoint: above the limit

    outcome = deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]
    assert outcome["job_run_id"] and outcome["applied_snapshots"] == 0
    store = DynamoDbStateStore(deployment.state_table, REGION, lake.moto_url)
    checkpoint = store.get_checkpoint(deployment.orders)
    assert (
        checkpoint is not None
        and checkpoint.snapshot_id != lake.catalog().load_table(deployment.orders).current_snapshot().snapshot_id
    )
    assert deployment.pending(deployment.orders) == []  # the job lists and plans the backlog, not the planner


def test_a_table_another_run_holds_is_left_to_it_and_the_job(
    lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, search: str
) -> None:
    deployment = deployed(lake, state_table, monkeypatch, search)
    store = DynamoDbStateStore(deployment.state_table, REGION, lake.moto_url)
    assert store.acquire_lease(deployment.orders, "a glue run", 60)
    outcome = deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]
    assert outcome["job_run_id"] and outcome["applied_snapshots"] == 0
    assert store.get_checkpoint(deployment.orders) is None


@pytest.mark.parametrize(
    "remaining_ms",
    [
        60_000,  # below the pass reserve (120 s)
        130_000,  # above the reserve, below it plus the bulk writes' retry backoff (15.5 s)
    ],
)
def test_a_planner_near_its_timeout_starts_no_pass(
    lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch, search: str, remaining_ms: int
) -> None:
    deployment = deployed(lake, state_table, monkeypatch, search)
    answer = deployment.invoke(buffered(table_event(deployment.db, "orders")), LambdaContext(remaining_ms))
    assert answer == {"batchItemFailures": []}
    [run] = deployment.runs(deployment.orders)
    assert run["JobRunState"] in ("STARTING", "RUNNING", "SUCCEEDED")
    store = DynamoDbStateStore(deployment.state_table, REGION, lake.moto_url)
    assert store.get_checkpoint(deployment.orders) is None

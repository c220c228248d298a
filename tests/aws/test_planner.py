"""The planner Lambda's handler against moto: a real pyiceberg Glue-catalog table with its files in
moto's S3, the state in moto's DynamoDB, the per-table Glue job in moto's Glue."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from icecdc.model import Checkpoint
from icecdc.state.dynamodb import DynamoDbStateStore
from tests.support.aws import REGION, Lake, aws_client
from tests.support.planner import SCHEDULE_EVENT, Deployment, handler_module, table_event


def test_table_change_plans_the_table_and_starts_its_job(deployment: Deployment, lake: Lake) -> None:
    result = deployment.invoke(table_event(deployment.db, "orders"))
    [outcome] = result["tables"]
    assert outcome["table"] == deployment.orders and outcome["error"] is None
    assert outcome["planned"]["written"] == 2  # the export: one item per data file
    assert outcome["job_run_id"]
    assert [i.kind for i in deployment.pending(deployment.orders)] == ["export", "export"]
    assert deployment.pending(deployment.customers) == []  # another table: untouched

    [run] = deployment.runs(deployment.orders)
    assert run["Arguments"]["--icecdc_table"] == deployment.orders
    assert run["Id"] == outcome["job_run_id"]
    assert deployment.runs(deployment.customers) == []

    # moto's CloudWatch is shared by the session: look at this test's database only
    metrics = [
        m
        for m in aws_client("cloudwatch", lake.moto_url).list_metrics(Namespace="icecdc")["Metrics"]
        if any(d["Value"].startswith(f"{deployment.db}.") for d in m["Dimensions"])
    ]
    assert {m["MetricName"] for m in metrics} >= {"PendingItems", "LagSeconds"}
    assert {d["Value"] for m in metrics for d in m["Dimensions"]} == {deployment.orders}


def test_duplicate_events_give_each_item_once_and_a_running_job_is_normal(deployment: Deployment) -> None:
    first = deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]
    again = deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]
    assert first["planned"]["written"] == 2 and again["planned"]["written"] == 0
    # the first run is still on: ConcurrentRunsExceededException is an outcome, not an error
    assert again["job_running"] and again["job_run_id"] is None and again["error"] is None
    assert len(deployment.pending(deployment.orders)) == 2
    assert len(deployment.runs(deployment.orders)) == 1


def test_concurrent_invocations_plan_once_and_start_one_run(deployment: Deployment) -> None:
    event = table_event(deployment.db, "orders")
    with ThreadPoolExecutor(2) as pool:
        outcomes = [r["tables"][0] for r in pool.map(deployment.invoke, [event, event])]
    assert sum(o["planned"]["written"] for o in outcomes) == 2
    assert sorted(bool(o["job_run_id"]) for o in outcomes) == [False, True]
    assert len(deployment.pending(deployment.orders)) == 2
    assert len(deployment.runs(deployment.orders)) == 1


def test_schedule_plans_every_table(deployment: Deployment) -> None:
    result = deployment.invoke(SCHEDULE_EVENT)
    assert [o["table"] for o in result["tables"]] == [deployment.orders, deployment.customers]
    assert len(deployment.pending(deployment.customers)) == 1
    assert len(deployment.runs(deployment.customers)) == 1


def test_a_caught_up_table_starts_no_job(deployment: Deployment) -> None:
    deployment.invoke(table_event(deployment.db, "orders"))
    store = DynamoDbStateStore(deployment.state_table, REGION, deployment.lake.moto_url)
    items = store.pending_items(deployment.orders)
    last = items[-1]
    store.complete(deployment.orders, Checkpoint(last.table_uuid, last.snapshot_id, last.sequence_number), items)
    outcome = deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]
    assert (outcome["pending"], outcome["job_run_id"], outcome["job_running"]) == (0, None, False)
    assert len(deployment.runs(deployment.orders)) == 1


@pytest.mark.parametrize(
    ("make_event", "reason"),
    [
        (lambda db: {"hello": "world"}, "malformed event: unexpected source None"),
        (lambda db: "not json", "malformed event: expected a JSON object"),
        (lambda db: {**table_event(db, "orders"), "detail": {"databaseName": db}}, "detail lacks databaseName/tableName"),
        (lambda db: table_event(db, "orders", "CreateTable"), "is a 'CreateTable', not an UpdateTable"),
        (lambda db: table_event(db, "invoices"), "invoices is not configured"),
        (lambda db: table_event("other", "orders"), "table other.orders is not configured"),
    ],
)
def test_events_without_work_do_nothing_and_say_why(
    deployment: Deployment, make_event: Callable[[str], Any], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        result = deployment.invoke(make_event(deployment.db))
    assert result["tables"] == [] and reason in result["ignored"]
    assert any(reason in r.getMessage() for r in caplog.records)
    assert deployment.pending(deployment.orders) == [] and deployment.runs(deployment.orders) == []


def test_a_planning_error_fails_the_invocation_after_the_other_tables(deployment: Deployment, lake: Lake) -> None:
    lake.catalog().drop_table(deployment.orders)
    with pytest.raises(handler_module.PlanningFailed, match="orders.*does not exist"):
        deployment.invoke(SCHEDULE_EVENT)
    assert len(deployment.pending(deployment.customers)) == 1  # the healthy table was still planned

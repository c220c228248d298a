"""The planner Lambda's handler against moto: a real pyiceberg Glue-catalog table with its files in
moto's S3, the state in moto's DynamoDB, the per-table Glue job in moto's Glue."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pyiceberg.types import StringType

from icecdc.aws.contract import job_name
from icecdc.model import Checkpoint
from icecdc.state.dynamodb import DynamoDbStateStore
from tests.support.aws import REGION, Lake, aws_client, rows
from tests.support.planner import SCHEDULE_EVENT, STACK, Deployment, handler_module, table_event


def test_table_change_starts_the_tables_job_and_leaves_the_planning_to_it(deployment: Deployment, lake: Lake) -> None:
    result = deployment.invoke(table_event(deployment.db, "orders"))
    [outcome] = result["tables"]
    assert outcome["table"] == deployment.orders and outcome["error"] is None
    assert outcome["has_work"] and outcome["job_run_id"]
    assert deployment.pending(deployment.orders) == []  # the export is listed by the job, not here
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


def test_duplicate_events_start_one_run_and_a_running_job_is_normal(deployment: Deployment) -> None:
    first = deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]
    again = deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]
    assert first["job_run_id"]
    # the first run is still on: ConcurrentRunsExceededException is an outcome, not an error
    assert again["job_running"] and again["job_run_id"] is None and again["error"] is None
    assert len(deployment.runs(deployment.orders)) == 1


def test_concurrent_invocations_start_one_run(deployment: Deployment) -> None:
    event = table_event(deployment.db, "orders")
    with ThreadPoolExecutor(2) as pool:
        outcomes = [r["tables"][0] for r in pool.map(deployment.invoke, [event, event])]
    assert sorted(bool(o["job_run_id"]) for o in outcomes) == [False, True]
    assert len(deployment.runs(deployment.orders)) == 1


def test_schedule_looks_at_every_table(deployment: Deployment) -> None:
    result = deployment.invoke(SCHEDULE_EVENT)
    assert [o["table"] for o in result["tables"]] == [deployment.orders, deployment.customers]
    assert len(deployment.runs(deployment.customers)) == 1


def test_a_caught_up_table_starts_no_job(deployment: Deployment, lake: Lake) -> None:
    table = lake.catalog().load_table(deployment.orders)
    current = table.current_snapshot()
    assert current is not None
    store = DynamoDbStateStore(deployment.state_table, REGION, deployment.lake.moto_url)
    # what the job leaves when it has applied the current snapshot
    applied = Checkpoint(
        str(table.metadata.table_uuid), current.snapshot_id, current.sequence_number, table.metadata.current_schema_id, ("id",)
    )
    store.complete(deployment.orders, applied, [])
    outcome = deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]
    assert (outcome["has_work"], outcome["job_run_id"], outcome["job_running"]) == (False, None, False)
    assert deployment.runs(deployment.orders) == []
    with table.update_schema() as schema:  # a schema change without a commit: the documents must follow
        schema.add_column("note", StringType())
    assert deployment.invoke(table_event(deployment.db, "orders"))["tables"][0]["job_run_id"]


def test_a_table_that_fails_for_any_reason_delays_no_other(deployment: Deployment) -> None:
    deployment.glue.delete_job(JobName=job_name(STACK, deployment.orders))  # e.g. a job the stack has not created yet
    with pytest.raises(handler_module.PlanningFailed, match="orders: EntityNotFoundException"):
        deployment.invoke(SCHEDULE_EVENT)
    assert len(deployment.runs(deployment.customers)) == 1


def test_the_work_of_an_invocation_does_not_grow_with_the_tables_files(
    deployment: Deployment, lake: Lake, caplog: pytest.LogCaptureFixture
) -> None:
    """One invocation reads the table's metadata and its checkpoint: the same number of requests to
    AWS (moto's server logs each) for a table of 2 files as for one of 1,000."""
    lake.catalog().drop_table(deployment.customers)
    wide = lake.create_table(deployment.customers, partitioned_by_id=True)
    wide.append(rows(*range(1000)))  # one file per partition
    assert len(wide.inspect.files()) == 1000

    def requests_of(table: str) -> int:
        with caplog.at_level(logging.INFO, logger="werkzeug"):
            caplog.clear()
            deployment.invoke(table_event(deployment.db, table))
            return sum("HTTP/1.1" in r.getMessage() for r in caplog.records if r.name == "werkzeug")

    small, large = requests_of("orders"), requests_of("customers")
    assert small > 0 and large <= small


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
    assert len(deployment.runs(deployment.customers)) == 1  # the healthy table's job was still started


def test_a_table_configured_in_mixed_case_is_read_by_the_name_glue_stores(
    lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Glue keeps `Shop.orders` as `shop.orders` and announces it so: the planner matches the event
    to the configured entry and reads the table by the stored name (moto's Glue, like a dict, finds
    only that), while the job and the checkpoint keep the configured name."""
    lake.create_table(f"{lake.database}.orders").append(rows(1, 2))
    lake.create_table(f"{lake.database}.customers")
    configured = [f"{lake.database.capitalize()}.orders", f"{lake.database}.customers"]  # the index: orders
    deployment = Deployment(lake, state_table, configured, monkeypatch)
    [outcome] = deployment.invoke(table_event(lake.database, "orders"))["tables"]
    assert outcome["table"] == configured[0] and outcome["error"] is None
    assert outcome["has_work"] and outcome["job_run_id"]
    assert deployment.runs(configured[0])[0]["Id"] == outcome["job_run_id"]

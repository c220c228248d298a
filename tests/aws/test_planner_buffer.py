"""The planner behind its queue, against moto: events go through a real SQS queue (moto's) and
reach the handler as Lambda's SQS event source delivers them, in one batch. A burst of one table's
commits is one planning pass; a table that fails (throttled) skips no other and only its messages
come back; DynamoDB transaction conflicts are tried again with backoff."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

import icecdc.aws.planner
from icecdc.aws.contract import job_name
from icecdc.model import ItemKind, WorkItem
from icecdc.state.dynamodb import DynamoDbStateStore
from tests.support.aws import REGION, Lake, aws_client
from tests.support.planner import SCHEDULE_EVENT, STACK, Deployment, table_event


class Buffer:
    """A queue in moto standing for the stack's buffer: what EventBridge sends, what the event source hands over."""

    def __init__(self, moto_url: str, name: str) -> None:
        self.sqs = aws_client("sqs", moto_url)
        self.url = self.sqs.create_queue(QueueName=name)["QueueUrl"]

    def send(self, *events: Any) -> None:
        for event in events:
            self.sqs.send_message(QueueUrl=self.url, MessageBody=json.dumps(event) if not isinstance(event, str) else event)

    def batch(self) -> dict[str, Any]:
        """Every visible message as one Lambda SQS event (the event source gathers them over its window)."""
        records = []
        while messages := self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10, VisibilityTimeout=0).get(
            "Messages", []
        ):
            for m in messages:
                records.append(
                    {
                        "messageId": m["MessageId"],
                        "receiptHandle": m["ReceiptHandle"],
                        "body": m["Body"],
                        "eventSource": "aws:sqs",
                    }
                )
                self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=m["ReceiptHandle"])
        return {"Records": records}


@pytest.fixture
def buffer(lake: Lake, unique: str) -> Buffer:
    return Buffer(lake.moto_url, f"planner-{unique}")


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables each planning pass was for, in order."""
    planned: list[str] = []
    plan_and_start = icecdc.aws.planner.plan_and_start

    def counting(sweep: Any, name: str, *args: Any) -> Any:
        planned.append(name)
        return plan_and_start(sweep, name, *args)

    monkeypatch.setattr(icecdc.aws.planner, "plan_and_start", counting)
    return planned


@pytest.fixture
def throttled() -> Iterator[Callable[[str], None]]:
    """Make Glue answer ThrottlingException to StartJobRun for one table's job (clients made after the call)."""
    session = boto3.DEFAULT_SESSION or boto3.setup_default_session() or boto3.DEFAULT_SESSION
    assert session is not None
    jobs: set[str] = set()

    def refuse(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if json.loads(params["body"]).get("JobName") not in jobs:
            return None
        error = {
            "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return AWSResponse("https://glue", 400, {}, None), error

    session.events.register("before-call.glue.StartJobRun", refuse, unique_id="throttle-start-job-run")
    yield lambda table: jobs.add(job_name(STACK, table))
    session.events.unregister("before-call.glue.StartJobRun", unique_id="throttle-start-job-run")


def test_a_burst_of_one_tables_commits_is_one_planning_pass(deployment: Deployment, buffer: Buffer, passes: list[str]) -> None:
    buffer.send(*[table_event(deployment.db, "orders")] * 40, table_event(deployment.db, "customers"), SCHEDULE_EVENT)
    buffer.send("not json", table_event(deployment.db, "invoices"))  # nothing to plan: dropped, not retried
    batch = buffer.batch()
    assert len(batch["Records"]) == 44

    result = deployment.invoke(batch)

    assert result == {"batchItemFailures": []}
    assert sorted(passes) == sorted([deployment.orders, deployment.customers])  # the sweep named both again
    assert len(deployment.runs(deployment.orders)) == 1 and len(deployment.runs(deployment.customers)) == 1


def test_a_throttled_table_skips_no_other_and_only_its_messages_come_back(
    deployment: Deployment, buffer: Buffer, passes: list[str], throttled: Callable[[str], None], lake: Lake
) -> None:
    throttled(deployment.orders)
    buffer.send(
        table_event(deployment.db, "orders"), table_event(deployment.db, "customers"), table_event(deployment.db, "orders")
    )
    batch = buffer.batch()
    orders_messages = sorted(r["messageId"] for r in batch["Records"] if '"orders"' in r["body"])

    result = deployment.invoke(batch)

    assert sorted(f["itemIdentifier"] for f in result["batchItemFailures"]) == orders_messages
    # orders failed; customers was still planned (the sweep's threads call in no set order)
    assert sorted(passes) == sorted([deployment.orders, deployment.customers])
    assert deployment.runs(deployment.orders) == [] and len(deployment.runs(deployment.customers)) == 1
    names = {m["MetricName"] for m in aws_client("cloudwatch", lake.moto_url).list_metrics(Namespace="icecdc")["Metrics"]}
    assert "PlanningErrors" in names  # the stack alarms on it: a batch's failures are no Lambda error


def test_a_direct_invocation_still_fails_after_every_table(deployment: Deployment, throttled: Callable[[str], None]) -> None:
    from tests.support.planner import handler_module

    throttled(deployment.customers)
    with pytest.raises(handler_module.PlanningFailed, match="customers: ThrottlingException"):
        deployment.invoke(SCHEDULE_EVENT)
    assert len(deployment.runs(deployment.orders)) == 1


class Conflicts:
    """Answer the first `times` TransactWriteItems of a store's client as cancelled by a conflict with
    another transaction (and optionally a failed condition), as DynamoDB does under contention."""

    def __init__(self, store: DynamoDbStateStore, times: int, reasons: tuple[str, ...] = ("None", "TransactionConflict")) -> None:
        self.left, self.reasons, self.calls = times, reasons, 0
        store.client.meta.events.register("before-call.dynamodb.TransactWriteItems", self)

    def __call__(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        self.calls += 1
        if self.left == 0:
            return None
        self.left -= 1
        cancelled = {
            "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
            "CancellationReasons": [{"Code": code} for code in self.reasons],
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return AWSResponse("https://dynamodb", 400, {}, None), cancelled


@pytest.fixture
def store(state_table: str, moto_url: str, monkeypatch: pytest.MonkeyPatch) -> DynamoDbStateStore:
    monkeypatch.setattr("icecdc.state.dynamodb.CONFLICT_BACKOFF_SECONDS", 0.001)
    return DynamoDbStateStore(state_table, region=REGION, endpoint_url=moto_url)


def item(snapshot: int) -> WorkItem:
    return WorkItem("db.t", "uuid-1", ItemKind.CHANGE, snapshot, snapshot, 0, 1, added_data_files=(f"s3://b/{snapshot}.parquet",))


def test_a_transaction_conflict_is_tried_again(store: DynamoDbStateStore) -> None:
    conflicts = Conflicts(store, times=3)
    assert store.put_item(item(1)) is True
    assert conflicts.calls == 4 and [i.snapshot_id for i in store.pending_items("db.t")] == [1]


def test_conflicts_past_the_retries_fail_and_a_failed_condition_is_an_answer(store: DynamoDbStateStore) -> None:
    store.conflict_retries = 2
    conflicts = Conflicts(store, times=3)
    with pytest.raises(store.client.exceptions.TransactionCanceledException):
        store.put_item(item(2))
    assert conflicts.calls == 3 and store.pending_items("db.t") == []

    answered = Conflicts(store, times=1, reasons=("ConditionalCheckFailed", "TransactionConflict"))
    assert store.put_item(item(3)) is False  # the item exists: not a race to retry
    assert answered.calls == 1

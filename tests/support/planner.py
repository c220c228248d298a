"""The planner Lambda's environment as the stack sets it, with moto behind every client."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from icecdc.aws.contract import job_name
from icecdc.state.dynamodb import DynamoDbStateStore
from tests.support.aws import REGION, Lake, aws_client

STACK = "icecdc-test"
ROOT = Path(__file__).resolve().parents[2]


def load_glue_entry(name: str = "icecdc_job") -> ModuleType:
    """The Glue job's entry, glue_jobs/icecdc_job.py, as a module (it needs awsglue)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "glue_jobs" / "icecdc_job.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("planner_handler", ROOT / "lambdas" / "planner" / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


handler_module = load_handler()


def table_event(database: str, table: str, type_of_change: str = "UpdateTable") -> dict[str, Any]:
    """What EventBridge delivers for an Iceberg commit through the Glue catalog."""
    return {
        "version": "0",
        "id": "3f5d7e42-0000-0000-0000-000000000000",
        "detail-type": "Glue Data Catalog Table State Change",
        "source": "aws.glue",
        "account": "123456789012",
        "time": "2025-01-01T00:00:00Z",
        "region": REGION,
        "resources": [f"arn:aws:glue:{REGION}:123456789012:table/{database}/{table}"],
        "detail": {"databaseName": database, "tableName": table, "typeOfChange": type_of_change, "changedPartitions": []},
    }


SCHEDULE_EVENT = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


class Deployment:
    """The planner's environment as the stack sets it, with moto behind every client."""

    def __init__(
        self,
        lake: Lake,
        state_table: str,
        tables: list[str],
        monkeypatch: pytest.MonkeyPatch,
        opensearch_url: str = "http://127.0.0.1:9",  # by default none: the planner only starts jobs
        engine: dict[str, Any] | None = None,  # the config's `engine:` section
    ) -> None:
        self.lake, self.state_table, self.tables = lake, state_table, tables
        self.db = lake.database
        self.orders, self.customers = tables
        applies = opensearch_url != "http://127.0.0.1:9"
        monkeypatch.setenv("ICECDC_CONFIG", str(lake.config_file(opensearch_url, tables, applies, engine)))
        monkeypatch.setenv("ICECDC_STATE_TABLE", state_table)
        monkeypatch.setenv("ICECDC_STACK_NAME", STACK)
        monkeypatch.setenv("AWS_REGION", REGION)
        self.glue = aws_client("glue", lake.moto_url)
        for table in tables:
            self.glue.create_job(
                Name=job_name(STACK, table),
                Role="arn:aws:iam::123456789012:role/icecdc-job",
                Command={"Name": "glueetl", "ScriptLocation": "s3://assets/icecdc_job.py", "PythonVersion": "3"},
                DefaultArguments={"--icecdc_table": table},
                ExecutionProperty={"MaxConcurrentRuns": 1},
                GlueVersion="5.1",
            )

    def invoke(self, event: Any, context: Any = None) -> dict[str, Any]:
        return handler_module.handler(event, context)

    def pending(self, table: str) -> list:
        store = DynamoDbStateStore(self.state_table, REGION, self.lake.moto_url)
        try:
            return store.pending_items(table)
        finally:
            store.close()

    def runs(self, table: str) -> list[dict[str, Any]]:
        return self.glue.get_job_runs(JobName=job_name(STACK, table))["JobRuns"]

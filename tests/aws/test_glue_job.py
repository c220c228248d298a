"""The Glue entry run locally: its real argument parsing (awsglue's getResolvedOptions), local
Spark, the table in moto's Glue catalog and S3, the state in moto's DynamoDB, osmem as OpenSearch.
After every run the index equals the table."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.expressions import EqualTo

from icecdc.aws.contract import METRIC_NAMESPACE
from icecdc.catalog import identifier_columns
from icecdc.config import OpenSearchConfig, TableConfig
from icecdc.deadletters import DeadLetters
from icecdc.destination.client import open_client
from icecdc.verify import diff_index
from tests.support.aws import REGION, Lake, aws_client, rows
from tests.support.planner import load_glue_entry

ROOT = Path(__file__).resolve().parents[2]
# awsglue 5.1 (the cdk-test group) installs on Python 3.11 only, as Glue 5.1 runs: elsewhere (CI's
# fast tier on 3.13) the Glue entry is not importable and these tests are skipped.
pytest.importorskip("awsglue", reason="awsglue 5.1 requires Python 3.11, as Glue 5.1")


job = load_glue_entry("icecdc_job")


def glue_argv(lake: Lake, name: str, opensearch_url: str, state_table: str, mappings: dict[str, Any] | None = None) -> list[str]:
    """The job's arguments as the stack passes them, with the config uploaded to S3 as the stack does."""
    config_key = "assets/icecdc.yaml"
    config = lake.config_file(opensearch_url, [name], mappings=mappings)
    aws_client("s3", lake.moto_url).put_object(Bucket=lake.bucket, Key=config_key, Body=config.read_bytes())
    return [
        "icecdc_job.py",
        "--JOB_NAME", f"icecdc-{name}",
        "--icecdc_config", f"s3://{lake.bucket}/{config_key}",
        "--icecdc_table", name,
        "--icecdc_state_table", state_table,
        "--icecdc_region", REGION,
        "--icecdc_dead_letter", f"s3://{lake.bucket}/dead-letter/",
    ]  # fmt: skip


def table_metric(lake: Lake, name: str, metric: str, statistic: str = "Sum") -> list[float]:
    """A metric the job published for the table (moto's CloudWatch): [statistic, how many runs published it]."""
    now = datetime.now(UTC)
    points = aws_client("cloudwatch", lake.moto_url).get_metric_statistics(
        Namespace=METRIC_NAMESPACE,
        MetricName=metric,
        Dimensions=[{"Name": "Table", "Value": name}],
        StartTime=now - timedelta(hours=1),
        EndTime=now + timedelta(minutes=5),
        Period=3600 * 2,
        Statistics=[statistic, "SampleCount"],
    )["Datapoints"]
    return [points[0][statistic], points[0]["SampleCount"]] if points else []


def dead_letter_metric(lake: Lake, name: str) -> list[float]:
    """The DeadLetters the job published for the table: [sum, runs]."""
    return table_metric(lake, name, "DeadLetters")


def test_the_glue_entry_keeps_the_index_equal_to_the_table(
    lake: Lake, state_table: str, osmem_server: Any, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    opensearch_url = osmem_server.clone().url
    name = f"{lake.database}.orders"
    table = lake.create_table(name)
    table.append(rows(1, 2, 3))
    table.append(rows(4, 5, region="eu"))

    argv = glue_argv(lake, name, opensearch_url, state_table)
    client = open_client(OpenSearchConfig(url=opensearch_url))

    def assert_index_equals_table() -> None:
        current = lake.catalog().load_table(name)
        diff = diff_index(current, identifier_columns(current, TableConfig(name=name, index="orders")), client, "orders")
        assert not diff, diff.summary()

    with caplog.at_level(logging.INFO, logger="icecdc.progress"):
        [exported] = job.main(argv, spark)
    assert (exported.writes.indexed, exported.files) == (5, 2)
    # the run's log says the pass's progress as it goes, in structured lines (here its start and end)
    assert f"progress table={name} stage=export files=0/2 rows=0/5 " in caplog.text
    assert f"progress table={name} stage=export files=2/2 rows=5/5 " in caplog.text
    assert_index_equals_table()

    table = lake.catalog().load_table(name)
    table.delete(EqualTo("id", 2))
    table.append(rows(6, region="eu"))
    [changed] = job.main(argv, spark)
    assert (changed.snapshots, changed.writes.indexed, changed.writes.deleted) == (2, 1, 1)
    assert_index_equals_table()

    [idle] = job.main(argv, spark)
    assert idle.snapshots == 0
    assert dead_letter_metric(lake, name) == [0, 3]  # every run publishes its count, zero included
    # the dashboard's per-table figures: every run publishes what it read, the idle one zeros
    rows_applied, files_read = table_metric(lake, name, "RowsApplied"), table_metric(lake, name, "FilesRead")
    assert (rows_applied[1], files_read[1]) == (3, 3)
    assert rows_applied[0] == exported.changes.rows + changed.changes.rows and exported.changes.rows == 5
    assert files_read[0] == exported.files + changed.files and exported.files == 2


def test_documents_opensearch_refuses_go_to_dead_letters_in_s3(
    lake: Lake, state_table: str, osmem_server: Any, spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The Glue job's dead-letter location is the stack's S3 prefix: refused documents land there
    (one JSON line each), the batch completes and the checkpoint advances; the job logs and
    publishes (CloudWatch metric DeadLetters, which the stack alarms on) how many."""
    opensearch_url = osmem_server.clone().url
    name = f"{lake.database}.orders"
    table = lake.create_table(name)
    table.append(rows(1, 2))
    table.append(rows(3, region="7"))  # a number in text: an integer field takes it
    # Executors write the dead letters: their Python workers get moto's endpoint as Spark passes
    # any executor environment (spark.executorEnv.*), not from this process's later changes.
    for variable in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"):
        monkeypatch.setitem(spark.sparkContext.environment, variable, os.environ[variable])
    # a mapping override that conflicts with the table: "us" is no integer, refused for good
    region_as_integer = {"properties": {"region": {"type": "integer"}}}

    with caplog.at_level(logging.INFO, logger="icecdc.glue_job"):
        [exported] = job.main(glue_argv(lake, name, opensearch_url, state_table, region_as_integer), spark)
    assert (exported.writes.indexed, exported.writes.dead_lettered) == (1, 2)
    assert any(r.getMessage().startswith(f"{name}: ") and ", 2 dead-lettered in " in r.getMessage() for r in caplog.records)
    assert dead_letter_metric(lake, name) == [2, 1]
    assert exported.checkpoint is not None and exported.checkpoint.snapshot_id == table.current_snapshot().snapshot_id

    dead_letters = DeadLetters(f"s3://{lake.bucket}/dead-letter/")
    assert dead_letters.count(name) == 2
    letters = sorted(dead_letters.read(name), key=lambda letter: letter["doc_id"])
    assert [(letter["doc_id"], letter["status"]) for letter in letters] == [("1", 400), ("2", 400)]
    assert all("mapper_parsing_exception" in letter["reason"] and '"region":"us"' in letter["document"] for letter in letters)
    keys = [
        o["Key"] for o in aws_client("s3", lake.moto_url).list_objects_v2(Bucket=lake.bucket, Prefix="dead-letter/")["Contents"]
    ]
    assert keys and all(k.startswith(f"dead-letter/{name}/") and k.endswith(".jsonl") for k in keys)


def drift_metric(lake: Lake, name: str) -> list[float]:
    """The Drift the scheduled audits published for the table: [maximum, audits]."""
    return table_metric(lake, name, "Drift", "Maximum")


def test_the_scheduled_audit_publishes_drift_and_repairs_when_asked(
    lake: Lake, state_table: str, osmem_server: Any, spark: Any
) -> None:
    """What the stack's Glue trigger starts: the table's job in audit mode (--icecdc_mode), its
    findings kept beside the dead letters, Drift published; audit-and-repair also repairs."""
    opensearch_url = osmem_server.clone().url
    name = f"{lake.database}.orders"
    lake.create_table(name).append(rows(1, 2, 3, 4))
    argv = glue_argv(lake, name, opensearch_url, state_table)
    job.main(argv, spark)
    client = open_client(OpenSearchConfig(url=opensearch_url))
    # drift at icecdc's own version (a restore, a stray writer keeping versions): a document lost, one changed
    client.delete(index="orders", id="2", version=1, version_type="external_gte", refresh=True)
    stale = {"id": 3, "region": "us", "amount": -1.0}
    client.index(index="orders", id="3", body=stale, version=1, version_type="external_gte", refresh=True)

    outcome = job.main([*argv, "--icecdc_mode", "audit"], spark)
    assert (outcome.drift, outcome.repaired) == (3, 0)  # the partition's count, the missing id, the stale one
    assert drift_metric(lake, name) == [3, 1]
    assert aws_client("s3", lake.moto_url).list_objects_v2(Bucket=lake.bucket, Prefix="dead-letter/_audits/")["KeyCount"] == 1

    repaired = job.main([*argv, "--icecdc_mode", "audit-and-repair"], spark)
    assert repaired.drift == 3 and repaired.repaired == 2  # only the two drifted documents are written
    current = lake.catalog().load_table(name)
    diff = diff_index(current, identifier_columns(current, TableConfig(name=name, index="orders")), client, "orders")
    assert not diff, diff.summary()
    assert job.main([*argv, "--icecdc_mode", "audit"], spark).drift == 0

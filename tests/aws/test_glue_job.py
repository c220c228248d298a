"""The Glue entry run locally: its real argument parsing (awsglue's getResolvedOptions), local
Spark, the table in moto's Glue catalog and S3, the state in moto's DynamoDB, osmem as OpenSearch.
After every run the index equals the table."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from pyiceberg.expressions import EqualTo

from icecdc.catalog import identifier_columns
from icecdc.config import OpenSearchConfig, TableConfig
from icecdc.sink import open_client
from icecdc.verify import diff_index
from tests.aws.conftest import REGION, Lake, aws_client, rows

ROOT = Path(__file__).resolve().parents[2]


def load_job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("icecdc_job", ROOT / "glue_jobs" / "icecdc_job.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


job = load_job()


def test_the_glue_entry_keeps_the_index_equal_to_the_table(lake: Lake, state_table: str, osmem_server: Any, spark: Any) -> None:
    opensearch_url = osmem_server.clone().url
    name = f"{lake.database}.orders"
    table = lake.create_table(name)
    table.append(rows(1, 2, 3))
    table.append(rows(4, 5, region="eu"))

    # the config as the stack uploads it, read back from S3 as on Glue
    config_key = "assets/icecdc.yaml"
    aws_client("s3", lake.moto_url).put_object(
        Bucket=lake.bucket, Key=config_key, Body=lake.config_file(opensearch_url, [name]).read_bytes()
    )
    argv = [
        "icecdc_job.py",
        "--JOB_NAME", f"icecdc-{name}",
        "--icecdc_config", f"s3://{lake.bucket}/{config_key}",
        "--icecdc_table", name,
        "--icecdc_state_table", state_table,
        "--icecdc_region", REGION,
        "--icecdc_dead_letter", f"s3://{lake.bucket}/dead-letter/",
    ]  # fmt: skip
    client = open_client(OpenSearchConfig(url=opensearch_url))

    def assert_index_equals_table() -> None:
        current = lake.catalog().load_table(name)
        diff = diff_index(current, identifier_columns(current, TableConfig(name, "orders", None)), client, "orders")
        assert not diff, diff.summary()

    [exported] = job.main(argv, spark)
    assert (exported.writes.indexed, exported.files) == (5, 2)
    assert_index_equals_table()

    table = lake.catalog().load_table(name)
    table.delete(EqualTo("id", 2))
    table.append(rows(6, region="eu"))
    [changed] = job.main(argv, spark)
    assert (changed.snapshots, changed.writes.indexed, changed.writes.deleted) == (2, 1, 1)
    assert_index_equals_table()

    [idle] = job.main(argv, spark)
    assert idle.snapshots == 0

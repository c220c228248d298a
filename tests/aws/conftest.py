"""Fixtures of the AWS tests: one moto server per session (real HTTP on 127.0.0.1), fake
credentials, and per-test resources named uniquely so tests never see each other's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.aws import Lake, aws_client, rows
from tests.support.cdk import ADMIN, synth
from tests.support.planner import Deployment


@pytest.fixture
def lake(moto_url: str, unique: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lake:
    bucket = f"lake-{unique}"
    aws_client("s3", moto_url).create_bucket(Bucket=bucket)
    # The entries' own boto3 clients (DynamoDB, Glue jobs, CloudWatch, S3) find moto through the
    # SDK's standard endpoint variable; the catalog gets it through its properties.
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    return Lake(moto_url, bucket, tmp_path, f"shop_{unique}")


@pytest.fixture
def deployment(lake: Lake, state_table: str, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    orders = lake.create_table(f"{lake.database}.orders")
    orders.append(rows(1, 2, 3))
    orders.append(rows(4, region="eu"))
    lake.create_table(f"{lake.database}.customers").append(rows(7))
    return Deployment(lake, state_table, [f"{lake.database}.orders", f"{lake.database}.customers"], monkeypatch)


# The stack synthesized once per module for an existing domain and for one it creates.
@pytest.fixture(scope="module")
def existing_endpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return synth(
        tmp_path_factory.mktemp("existing"),
        {
            "opensearch_domain_arn": "arn:aws:es:us-east-1:123456789012:domain/search",
            "schedule_minutes": 7,
            "alarm_email": "ops@example.com",
        },
    )


@pytest.fixture(scope="module")
def created_domain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return synth(tmp_path_factory.mktemp("domain"), {"create_domain": True, "domain_admin_arn": ADMIN})

"""Fixtures of the AWS tests: one moto server per session (real HTTP on 127.0.0.1), fake
credentials, and per-test resources named uniquely so tests never see each other's state."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pytest
import requests
import yaml
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """A moto server for the whole session; every boto3 and pyiceberg client of the tests talks to it."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    with pytest.MonkeyPatch.context() as env:
        # Fake credentials, so nothing here can reach a real account, and no config file is read.
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        }.items():
            env.setenv(name, value)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        # Glue job runs stay STARTING (moto finishes them at once by default): a started run is
        # "already running" for the rest of the test, as a real one would be for minutes.
        requests.post(
            f"{url}/moto-api/state-manager/set-transition",
            json={"model_name": "glue::job_run", "transition": {"progression": "manual", "times": 10**9}},
            timeout=10,
        ).raise_for_status()
        try:
            yield url
        finally:
            server.stop()


@pytest.fixture
def unique() -> str:
    """A name part no other test uses."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def state_table_factory(moto_url: str) -> Callable[[], str]:
    """Creates a fresh DynamoDB state table in moto and returns its name."""
    from icecdc.state.dynamodb import create_state_table

    def create() -> str:
        name = f"icecdc-state-{uuid.uuid4().hex[:10]}"
        create_state_table(name, region=REGION, endpoint_url=moto_url)
        return name

    return create


@pytest.fixture
def state_table(state_table_factory: Callable[[], str]) -> str:
    return state_table_factory()


def aws_client(service: str, moto_url: str):
    return boto3.client(service, region_name=REGION, endpoint_url=moto_url)


@dataclass
class Lake:
    """A pyiceberg Glue catalog on moto (Glue Data Catalog + S3) and the icecdc config pointing at it."""

    moto_url: str
    bucket: str
    workdir: Path
    database: str  # one per test: moto's Glue Data Catalog is shared by the session

    @property
    def catalog_properties(self) -> dict[str, str]:
        return {
            "name": "lake",
            "type": "glue",
            "glue.endpoint": self.moto_url,
            "glue.region": REGION,
            "s3.endpoint": self.moto_url,
            "s3.region": REGION,
            "s3.access-key-id": "testing",
            "s3.secret-access-key": "testing",
            "warehouse": f"s3://{self.bucket}/warehouse",
        }

    def catalog(self) -> Catalog:
        properties = dict(self.catalog_properties)
        return load_catalog(properties.pop("name"), **properties)

    def create_table(self, name: str) -> Table:
        schema = Schema(
            NestedField(1, "id", LongType(), required=True),
            NestedField(2, "region", StringType(), required=False),
            NestedField(3, "amount", DoubleType(), required=False),
            identifier_field_ids=[1],
        )
        catalog = self.catalog()
        catalog.create_namespace_if_not_exists(name.split(".")[0])
        return catalog.create_table(name, schema=schema)

    def config_file(self, opensearch_url: str, tables: list[str]) -> Path:
        raw: dict[str, Any] = {
            "catalog": self.catalog_properties,
            # replaced by the stack's table at run time (icecdc.aws.runtime_config)
            "state": {"type": "sqlite", "path": str(self.workdir / "unused.db")},
            "opensearch": {"url": opensearch_url},
            "spark": {"master": "local[2]"},
            "tables": [{"name": t} for t in tables],
            "aws": {"warehouse_buckets": [self.bucket]},
        }
        path = self.workdir / "icecdc.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path


def rows(*ids: int, region: str = "us") -> pa.Table:
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string()), pa.field("amount", pa.float64())]
    )
    return pa.Table.from_pylist([{"id": i, "region": region, "amount": i * 1.5} for i in ids], schema=schema)


@pytest.fixture
def lake(moto_url: str, unique: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lake:
    bucket = f"lake-{unique}"
    aws_client("s3", moto_url).create_bucket(Bucket=bucket)
    # The entries' own boto3 clients (DynamoDB, Glue jobs, CloudWatch, S3) find moto through the
    # SDK's standard endpoint variable; the catalog gets it through its properties.
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    return Lake(moto_url, bucket, tmp_path, f"shop_{unique}")

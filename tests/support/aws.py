"""AWS in the tests: moto's server behind every client, a pyiceberg Glue catalog on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import yaml
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

REGION = "us-east-1"


def aws_client(service: str, moto_url: str):
    return boto3.client(service, region_name=REGION, endpoint_url=moto_url)


# the orders-like tables' schema
ORDERS = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "amount", DoubleType(), required=False),
    identifier_field_ids=[1],
)


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

    def create_table(self, name: str, partitioned_by_id: bool = False) -> Table:
        """The orders-like table; `partitioned_by_id`: identity-partitioned on id (a file per row)."""
        schema = ORDERS
        catalog = self.catalog()
        catalog.create_namespace_if_not_exists(name.split(".")[0])
        spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "id_part")) if partitioned_by_id else PartitionSpec()
        return catalog.create_table(name, schema=schema, partition_spec=spec)

    def config_file(
        self,
        opensearch_url: str,
        tables: list[str],
        planner_applies: bool = True,
        engine: dict[str, Any] | None = None,
        mappings: dict[str, Any] | None = None,
    ) -> Path:
        raw: dict[str, Any] = {
            "catalog": self.catalog_properties,
            # replaced by the stack's table at run time (icecdc.aws.deployed.runtime_config)
            "state": {"type": "sqlite", "path": str(self.workdir / "unused.db")},
            "opensearch": {"url": opensearch_url},
            "spark": {"master": "local[2]"},
            "tables": [{"name": t, **({"mappings": mappings} if mappings else {})} for t in tables],
            "aws": {"warehouse_buckets": [self.bucket], "planner_applies": planner_applies},
            "engine": engine or {},
        }
        path = self.workdir / "icecdc.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path


def rows(*ids: int, region: str = "us") -> pa.Table:
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string()), pa.field("amount", pa.float64())]
    )
    return pa.Table.from_pylist([{"id": i, "region": region, "amount": i * 1.5} for i in ids], schema=schema)

"""The configuration as deployed: the same YAML as for local runs, read from S3 or a path.

It adds what exists only once deployed: the DynamoDB state table and the endpoint of a domain the
stack created. It adds too the catalog properties the stack may set. The Lambda reads files with
fsspec, pyarrow's S3 filesystem left out.
"""

from __future__ import annotations

from typing import Any

import boto3

from icecdc.config import Config, parse_config, parse_yaml
from icecdc.model import StateStoreType


def read_text(uri: str) -> str:
    """A file's text from `s3://bucket/key` or a local path."""
    if uri.startswith("s3://"):
        bucket, _, key = uri[len("s3://") :].partition("/")
        body: bytes = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
        return body.decode()
    with open(uri, encoding="utf-8") as file:
        return file.read()


def runtime_config(
    text: str,
    state_table: str,
    region: str | None = None,
    opensearch_url: str | None = None,
    catalog_properties: dict[str, str] | None = None,
) -> Config:
    """The configuration as deployed: the YAML's, validated, then revised and validated again.

    The revision sets the stack's state table, keeping the file's `lease_seconds` and, from a
    dynamodb state, `done_ttl_days`. It sets no Spark master, as a local one would keep Glue's work
    on the driver. When the stack created the OpenSearch domain or collection, it sets its
    endpoint, signed with SigV4 for the configured service.
    """
    config = parse_config(parse_yaml(text))
    kept = config.state.model_dump(include={"lease_seconds", "done_ttl_days"})
    changes: dict[str, Any] = {
        "state": {**kept, "type": StateStoreType.DYNAMODB, "table": state_table, "region": region},
        "spark": config.spark.revised(master=None),  # Glue provides the cluster
    }
    if opensearch_url:
        signed = {
            "url": opensearch_url,
            "aws_region": region,
            "aws_service": config.opensearch.aws_service,  # es, or aoss for a created collection
            "username": None,
            "password": None,
            "password_secret_arn": None,
        }
        changes["opensearch"] = {**config.opensearch.as_mapping(), **signed}
    if catalog_properties:
        changes["catalog"] = {**config.catalog.as_mapping(), **catalog_properties}
    return config.revised(**changes)

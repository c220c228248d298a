"""The stack for each Iceberg catalog AWS offers (icecdc.aws.catalogs): S3 Tables through its
REST endpoint, Glue's REST endpoint with a federated catalog, and the Glue Data Catalog. Each
synthesizes clean (cdk-nag, cfn-lint) with read-only rights on what is configured, and S3 Tables'
commits, as CloudTrail records them, reach the planner's buffer and name the configured table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from icecdc.aws.catalogs import s3tables_event_table
from icecdc.errors import ConfigError
from tests.support.cdk import lint_findings as findings
from tests.support.cdk import synth

BUCKET = "arn:aws:s3tables:us-east-1:123456789012:bucket/lakehouse"
S3TABLES = {
    "name": "lake",
    "type": "rest",
    "uri": "https://s3tables.us-east-1.amazonaws.com/iceberg",
    "warehouse": BUCKET,
    "rest.sigv4-enabled": "true",
    "rest.signing-name": "s3tables",
    "rest.signing-region": "us-east-1",
}
GLUE_REST = {
    "name": "lake",
    "type": "rest",
    "uri": "https://glue.us-east-1.amazonaws.com/iceberg",
    "warehouse": "123456789012:s3tablescatalog/lakehouse",
    "rest.sigv4-enabled": "true",
    "rest.signing-name": "glue",
    "rest.signing-region": "us-east-1",
}
NAG = Match.string_like_regexp("AwsSolutions-.*")
NO_BUCKETS = {"warehouse_buckets": [], "opensearch_domain_arn": "arn:aws:es:us-east-1:123456789012:domain/search"}

# what CloudTrail delivers to EventBridge for a commit to an S3 Tables table (management events)
S3TABLES_COMMIT = {
    "version": "0",
    "id": "6f1d2c3b-0000-0000-0000-000000000000",
    "detail-type": "AWS API Call via CloudTrail",
    "source": "aws.s3tables",
    "account": "123456789012",
    "time": "2026-12-01T12:00:00Z",
    "region": "us-east-1",
    "resources": [],
    "detail": {
        "eventVersion": "1.09",
        "eventSource": "s3tables.amazonaws.com",
        "eventName": "UpdateTableMetadataLocation",
        "awsRegion": "us-east-1",
        "requestParameters": {
            "tableBucketARN": BUCKET,
            "namespace": "shop",
            "name": "orders",
            "versionToken": "AAAAAAAAAAAAAAAA",
            "metadataLocation": "s3://e1a7-table-s3/metadata/00002-abc.metadata.json",
        },
        "responseElements": None,
        "eventType": "AwsApiCall",
        "managementEvent": True,
        "eventCategory": "Management",
    },
}


def role_statements(template: Any, prefix: str) -> list[dict[str, Any]]:
    policies = template.find_resources("AWS::IAM::Policy")
    return [s for i, p in policies.items() if i.startswith(prefix) for s in p["Properties"]["PolicyDocument"]["Statement"]]


def actions_of(statements: list[dict[str, Any]], service: str) -> set[str]:
    found = set()
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        found |= {a for a in actions if a.startswith(service)}
    return found


@pytest.fixture(scope="module")
def s3tables(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tables = [{"name": "shop.orders"}, {"name": "shop.customers", "protect_checkpoint": True}]
    return synth(tmp_path_factory.mktemp("s3tables"), NO_BUCKETS, tables=tables, catalog=S3TABLES)


def test_s3_tables_reads_the_table_bucket_only_and_writes_for_the_guard(s3tables: Any) -> None:
    template, annotations = s3tables
    assert annotations.find_error("*", NAG) == [] and findings(template) == []
    for role in ("JobRole", "PlannerRole"):
        statements = role_statements(template, role)
        assert actions_of(statements, "s3tables:") == {
            "s3tables:GetTableBucket",
            "s3tables:GetNamespace",
            "s3tables:ListNamespaces",
            "s3tables:ListTables",
            "s3tables:GetTable",
            "s3tables:GetTableMetadataLocation",
            "s3tables:GetTableData",
            # the expiry guard of shop.customers, and only of it
            "s3tables:UpdateTableMetadataLocation",
            "s3tables:PutTableData",
        }
        text = json.dumps([s for s in statements if "s3tables" in json.dumps(s)])
        assert "bucket/lakehouse" in text and '"s3:GetObject"' not in text
        [guard] = [s for s in statements if "s3tables:PutTableData" in s["Action"]]
        assert guard["Condition"]["StringEquals"]["s3tables:tableName"] == ["customers"]
        assert not any("glue:GetTable" in json.dumps(s["Action"]) for s in statements)


def test_s3_tables_commits_recorded_by_cloudtrail_reach_the_buffer(s3tables: Any) -> None:
    template, _ = s3tables
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.s3tables"],
                "detail-type": ["AWS API Call via CloudTrail"],
                "detail": {
                    "eventSource": ["s3tables.amazonaws.com"],
                    "eventName": ["UpdateTableMetadataLocation"],
                    "requestParameters": {"tableBucketARN": [BUCKET]},
                },
            }
        },
    )
    assert s3tables_event_table(S3TABLES_COMMIT, BUCKET) == "shop.orders"
    other = {**S3TABLES_COMMIT, "detail": {**S3TABLES_COMMIT["detail"], "requestParameters": {"tableBucketARN": "x"}}}
    assert s3tables_event_table(other, BUCKET) is None


def test_glue_rest_reads_the_federated_catalog_and_lake_formation(tmp_path: Path) -> None:
    template, annotations = synth(tmp_path, NO_BUCKETS, tables=[{"name": "shop.orders"}], catalog=GLUE_REST)
    assert annotations.find_error("*", NAG) == [] and findings(template) == []
    statements = role_statements(template, "JobRole")
    assert actions_of(statements, "glue:") == {"glue:GetCatalog", "glue:GetDatabase", "glue:GetTable", "glue:GetTables"}
    assert actions_of(statements, "lakeformation:") == {"lakeformation:GetDataAccess"}
    text = json.dumps(statements)
    assert "catalog/s3tablescatalog/lakehouse" in text and "table/s3tablescatalog/lakehouse/shop/orders" in text
    assert "glue:UpdateTable" not in text
    # no rule for commits (whether federated tables announce them is undocumented): the sweep plans
    patterns = [json.dumps(r["Properties"].get("EventPattern")) for r in template.find_resources("AWS::Events::Rule").values()]
    assert not any("Table State Change" in p or "s3tables" in p for p in patterns)


def test_a_glue_catalog_still_needs_its_warehouse_buckets(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="aws.warehouse_buckets must list"):
        synth(tmp_path, {"warehouse_buckets": []})


def test_the_planner_plans_the_table_an_s3_tables_commit_names(tmp_path: Path) -> None:
    """The event as EventBridge delivers it from CloudTrail → the configured table, once; a
    table of another bucket, or not configured, is ignored with its reason."""
    from icecdc.aws.events import event_tables
    from icecdc.config import parse_config

    raw = {
        "catalog": S3TABLES,
        "state": {"type": "sqlite", "path": str(tmp_path / "state.db")},
        "opensearch": {"url": "http://127.0.0.1:9200"},
        "tables": [{"name": "shop.orders"}, {"name": "shop.customers"}],
    }
    config = parse_config(raw)
    assert event_tables(S3TABLES_COMMIT, config).tables == ("shop.orders",)
    unconfigured = json.loads(json.dumps(S3TABLES_COMMIT))
    unconfigured["detail"]["requestParameters"]["name"] = "returns"
    assert event_tables(unconfigured, config).ignored == "table shop.returns is not configured"
    elsewhere = json.loads(json.dumps(S3TABLES_COMMIT))
    elsewhere["detail"]["requestParameters"]["tableBucketARN"] = BUCKET.replace("lakehouse", "other")
    assert event_tables(elsewhere, config).tables == ()


def test_doctor_checks_the_table_bucket_its_tables_and_a_trail(moto_url: str, unique: str, tmp_path: Path) -> None:
    """moto's S3 Tables and CloudTrail: a missing table bucket or table fails naming the fix; no
    trail recording management events is a warning (the sweep alone plans); one that does passes."""
    import boto3

    from icecdc.checklist import Outcome
    from icecdc.config import parse_config
    from icecdc.doctor.catalogs import check_catalog_kind
    from icecdc.doctor.context import Context
    from tests.support.aws import aws_client

    raw = {
        "catalog": S3TABLES,
        "state": {"type": "sqlite", "path": str(tmp_path / "state.db")},
        "opensearch": {"url": "http://127.0.0.1:9200"},
        "tables": [{"name": "shop.orders"}],
        "aws": {"region": "us-east-2"},
    }
    region = "us-east-2"  # moto's trails are the session's: a region no other test uses
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ENDPOINT_URL", moto_url)
        ctx = Context(parse_config(raw), boto3.Session(region_name=region), region)
        bucket_missing, trail = check_catalog_kind(ctx)
        assert bucket_missing.outcome == Outcome.FAILED and "create-table-bucket" in str(bucket_missing.fix)
        tables = boto3.client("s3tables", region_name=region, endpoint_url=moto_url)
        arn = tables.create_table_bucket(name=f"lake{unique}")["arn"]
        tables.create_namespace(tableBucketARN=arn, namespace=["shop"])
        tables.create_table(tableBucketARN=arn, namespace="shop", name="orders", format="ICEBERG")
        raw["catalog"] = {**S3TABLES, "warehouse": arn}
        raw["tables"] = [{"name": "shop.orders"}, {"name": "shop.returns"}]
        ctx = Context(parse_config(raw), boto3.Session(region_name=region), region)
        bucket, orders, returns, check = check_catalog_kind(ctx)
        assert (bucket.outcome, orders.outcome, returns.outcome) == (Outcome.PASSED, Outcome.PASSED, Outcome.FAILED)
        assert check.outcome == Outcome.WARNING and "no trail records management events" in check.detail
        assert check.fix is not None and "create-trail" in (check.fix.command or "")
        s3, trails = aws_client("s3", moto_url), boto3.client("cloudtrail", region_name=region, endpoint_url=moto_url)
        s3.create_bucket(Bucket=f"trail-{unique}")
        trails.create_trail(Name=f"icecdc-{unique}", S3BucketName=f"trail-{unique}")
        trails.put_event_selectors(
            TrailName=f"icecdc-{unique}", EventSelectors=[{"ReadWriteType": "WriteOnly", "IncludeManagementEvents": True}]
        )
        trails.start_logging(Name=f"icecdc-{unique}")
        ctx = Context(parse_config(raw), boto3.Session(region_name=region), region)
        *_, check = check_catalog_kind(ctx)
    assert check.outcome == Outcome.PASSED, check


def test_any_rest_catalog_reads_its_oauth2_secret_and_the_warehouse(tmp_path: Path) -> None:
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:polaris-AbCdEf"
    catalog = {"name": "lake", "type": "rest", "uri": "https://polaris.example.com/api/catalog", "warehouse": "lake"}
    template, annotations = synth(tmp_path, {}, catalog={**catalog, "credential_secret_arn": secret})
    assert annotations.find_error("*", NAG) == [] and findings(template) == []
    statements = role_statements(template, "JobRole")
    [read] = [s for s in statements if s["Action"] == "secretsmanager:GetSecretValue"]
    assert read["Resource"] == secret
    assert actions_of(statements, "glue:") == set() and "lake-bucket/*" in json.dumps(statements)
    for name, refused, reason in [
        ("inline", {**catalog, "credential": "icecdc:s3cret"}, "catalog.credential would be uploaded"),
        ("none", catalog, "OAuth2 client credentials in catalog.credential_secret_arn"),
    ]:
        (tmp_path / name).mkdir()
        with pytest.raises(SystemExit, match=reason):
            synth(tmp_path / name, {}, catalog=refused)


API = "arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/prod"
EXECUTE_API = {
    "name": "lake",
    "type": "rest",
    "uri": "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod/iceberg",
    "warehouse": "lake",
    "rest.sigv4-enabled": "true",
    "rest.signing-name": "execute-api",
    "rest.signing-region": "us-east-1",
}
INVOKE = {"actions": ["execute-api:Invoke"], "resources": [f"{API}/GET/*", f"{API}/HEAD/*"]}


def test_sigv4_for_a_service_the_user_names_grants_what_the_user_lists(tmp_path: Path) -> None:
    """A REST catalog behind API Gateway (signing name execute-api): the roles get the listed
    execute-api:Invoke on the listed routes and the warehouse buckets' files, nothing of Glue,
    S3 Tables or Secrets Manager; cdk-nag and cfn-lint are clean, the wildcards explained."""
    template, annotations = synth(tmp_path, {"catalog_grants": [INVOKE]}, catalog=EXECUTE_API)
    assert annotations.find_error("*", NAG) == [] and findings(template) == []
    for role in ("JobRole", "PlannerRole"):
        statements = role_statements(template, role)
        [invoke] = [s for s in statements if s["Action"] == "execute-api:Invoke"]
        assert invoke["Resource"] == INVOKE["resources"]
        assert actions_of(statements, "execute-api:") == {"execute-api:Invoke"}
        for service in ("glue:Get", "s3tables:", "secretsmanager:", "lakeformation:"):  # the planner starts jobs
            assert actions_of(statements, service) == set(), (role, service)
        assert "lake-bucket/*" in json.dumps(statements)
    patterns = [json.dumps(r["Properties"].get("EventPattern")) for r in template.find_resources("AWS::Events::Rule").values()]
    assert not any("execute-api" in p for p in patterns)  # no events: the sweep plans


@pytest.mark.parametrize(
    ("aws", "catalog", "refusal"),
    [
        ({}, EXECUTE_API, "catalog signs for 'execute-api': .* list it in aws.catalog_grants"),
        (
            {"catalog_grants": [{**INVOKE, "actions": ["s3:GetObject"]}]},
            EXECUTE_API,
            "'s3:GetObject' is not an action of 'execute-api'",
        ),
        ({"catalog_grants": [INVOKE]}, S3TABLES, "aws.catalog_grants is for a REST catalog signed .* remove it"),
        ({"catalog_grants": [{**INVOKE, "actions": ["execute-api:*"]}]}, EXECUTE_API, "no wildcard, got 'execute-api:\\*'"),
        ({"catalog_grants": [{**INVOKE, "resources": ["*"]}]}, EXECUTE_API, "must be ARNs"),
    ],
    ids=["no grants", "another service's action", "grants for s3tables", "a wildcard action", "not an ARN"],
)
def test_sigv4_for_another_service_is_refused_at_synth_without_its_grants(
    tmp_path: Path, aws: dict[str, Any], catalog: dict[str, Any], refusal: str
) -> None:
    with pytest.raises((SystemExit, ConfigError), match=refusal):
        synth(tmp_path, {"warehouse_buckets": ["lake-bucket"], **aws}, catalog=catalog)

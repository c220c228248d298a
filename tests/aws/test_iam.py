"""The bundle as deployed, under its own IAM: each configuration the docs offer is synthesized, its
resources made in moto under the template's names, and the planner handler and the Glue job's
entry run as the template's roles against moto, osmem and real Iceberg tables in moto's S3 behind
the Glue catalog. Every request either role signs (boto3, pyiceberg's Glue and S3 calls, s3fs,
opensearch-py's SigV4) is authorized against that role's statements (tests/support/iam.py); one
they do not allow is refused as AWS refuses it, and fails the test naming role, action and
resource. After every pass the index equals the table.

The (role, action, resource) triples exercised are checked against docs/deploy.md's table of the
roles' rights at the end of this module, and written to .build/iam/exercised.tsv.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opensearchpy import OpenSearch
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo

from icecdc.errors import SystemicDeadLetters
from icecdc.verify import diff_index
from tests.support.aws import ORDERS, REGION, Lake, aws_client, rows
from tests.support.deployed import Catalogued, Deployed, Shape
from tests.support.faults import FaultProxy
from tests.support.iam import Call, Enforcer, exercised_rows, glue_rest_calls, s3tables_calls
from tests.support.planner import SCHEDULE_EVENT, handler_module, load_glue_entry, table_event
from tests.support.rest_catalog import Auth, RestCatalogServer

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("awsglue", reason="awsglue 5.1 requires Python 3.11, as Glue 5.1")

DOMAIN = "arn:aws:es:us-east-1:123456789012:domain/search"
KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SIGNED = {"aws_region": REGION}

EXISTING = Shape("existing domain, SigV4, planner applies", {"opensearch_domain_arn": DOMAIN}, SIGNED, {})
BASIC_AUTH = Shape(
    "existing domain, basic auth from Secrets Manager, the job only",
    {"opensearch_domain_arn": DOMAIN, "planner_applies": False, "password_secret_kms_key_arn": KEY},
    {"username": "icecdc"},  # password_secret_arn: the secret the test creates
    {},
)
CREATED = Shape(
    "a domain the stack creates",
    {"create_domain": True, "domain_admin_arn": "arn:aws:iam::123456789012:role/SearchAdmins"},
    {},
    {},
)
GUARDED = Shape(
    "the expiry guard, warehouse under a customer-managed key",
    {"opensearch_domain_arn": DOMAIN, "warehouse_kms_key_arns": [KEY]},
    SIGNED,
    {"protect_checkpoint": True},
)


job = load_glue_entry("icecdc_job_iam")


@pytest.fixture(scope="module")
def exercised() -> Iterator[set[tuple[str, str, str]]]:
    """What the module's tests exercised, for the docs check at its end."""
    triples: set[tuple[str, str, str]] = set()
    yield triples
    out = ROOT / ".build" / "iam"
    out.mkdir(parents=True, exist_ok=True)
    (out / "exercised.tsv").write_text("\n".join(exercised_rows(triples)) + "\n")


@pytest.fixture
def enforced(iam_enforcer: Enforcer, exercised: set[tuple[str, str, str]]) -> Iterator[Enforcer]:
    yield iam_enforcer
    exercised.update(iam_enforcer.exercised)
    iam_enforcer.exercised.clear()


def deploy(shape: Shape, lake: Lake, search: FaultProxy, enforcer: Enforcer, monkeypatch: pytest.MonkeyPatch) -> Deployed:
    table = lake.create_table(f"{lake.database}.orders")
    table.append(rows(1, 2, 3))
    table.append(rows(4, region="eu"))
    return Deployed(shape, lake, search, enforcer, monkeypatch)


def buffered(*events: dict[str, Any]) -> dict[str, Any]:
    """The events as Lambda's SQS event source hands them to the planner (the stack's buffer)."""
    return {"Records": [{"messageId": str(i), "body": json.dumps(e), "eventSource": "aws:sqs"} for i, e in enumerate(events)]}


def commit_event(deployed: Deployed) -> dict[str, Any]:
    return buffered(table_event(deployed.lake.database, "orders"))


def assert_index_equals_table(deployed: Deployed, search: FaultProxy) -> None:
    deployed.enforcer.assert_no_refusals()
    table = deployed.lake.catalog().load_table(deployed.table)
    diff = diff_index(table, ("id",), OpenSearch(hosts=[search.url]), "orders")
    assert not diff, diff.summary()


def test_an_existing_domain_signed_with_sigv4_under_the_roles(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First export and a commit by the planner, a copy-on-write commit and a dead letter by the
    job, then the scheduled audit with its repair: all under the roles' statements."""
    deployed = deploy(EXISTING, lake, fault_proxy, enforced, monkeypatch)
    assert deployed.planner(commit_event(deployed), handler_module.handler) == {"batchItemFailures": []}
    assert_index_equals_table(deployed, fault_proxy)

    table = lake.catalog().load_table(deployed.table)
    table.delete(EqualTo("id", 2))  # copy-on-write: the file rewritten without the row
    table.append(rows(5, 6, region="eu"))
    fault_proxy.reject_documents(lambda item: item.id == "6")  # a document refused for its own sake
    [result] = deployed.job(job.main)
    assert result.writes.dead_lettered == 1
    fault_proxy.clear()
    letters = aws_client("s3", lake.moto_url).list_objects_v2(Bucket=deployed.dead_letter_bucket, Prefix="dead-letter/")
    assert letters["KeyCount"] >= 1
    table = lake.catalog().load_table(deployed.table)
    table.delete(EqualTo("id", 6))  # the lettered row goes: the index holds what the table holds
    deployed.job(job.main)
    assert_index_equals_table(deployed, fault_proxy)
    # drift (a document lost at icecdc's own version): the scheduled audit finds and repairs it
    client = OpenSearch(hosts=[fault_proxy.url])
    version = client.get(index="orders", id="3")["_version"]
    client.delete(index="orders", id="3", version=version, version_type="external_gte", refresh=True)
    repaired = deployed.job(job.main, "--icecdc_mode", "audit-and-repair")
    assert (repaired.drift, repaired.repaired) >= (1, 1)
    assert_index_equals_table(deployed, fault_proxy)


def test_basic_auth_from_secrets_manager_and_the_job_started_by_the_planner(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = aws_client("secretsmanager", lake.moto_url).create_secret(Name=f"search-{lake.bucket}", SecretString="s3cret")
    shape = Shape(BASIC_AUTH.label, BASIC_AUTH.aws, {**BASIC_AUTH.opensearch, "password_secret_arn": secret["ARN"]}, {})
    deployed = deploy(shape, lake, fault_proxy, enforced, monkeypatch)
    assert deployed.planner(commit_event(deployed), handler_module.handler) == {"batchItemFailures": []}
    runs = aws_client("glue", lake.moto_url).get_job_runs(JobName=f"{deployed.stack}-{deployed.table}")["JobRuns"]
    assert len(runs) == 1  # the planner started the table's job, and applied nothing itself
    [exported] = deployed.job(job.main)
    assert exported.writes.indexed == 4
    assert_index_equals_table(deployed, fault_proxy)


def test_a_domain_the_stack_creates(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployed = deploy(CREATED, lake, fault_proxy, enforced, monkeypatch)
    assert deployed.planner(commit_event(deployed), handler_module.handler) == {"batchItemFailures": []}
    assert_index_equals_table(deployed, fault_proxy)
    table = lake.catalog().load_table(deployed.table)
    table.append(rows(9))
    deployed.job(job.main)
    assert_index_equals_table(deployed, fault_proxy)
    # the table dropped and created again under its name: a reset into a new generation, the
    # alias swapped to it, the old generation deleted
    lake.catalog().drop_table(deployed.table)
    lake.create_table(deployed.table).append(rows(21, 22))
    assert deployed.planner(commit_event(deployed), handler_module.handler) == {"batchItemFailures": []}
    client = OpenSearch(hosts=[fault_proxy.url])
    assert list(client.indices.get_alias(name="orders")) == ["orders-2"]
    assert not client.indices.exists(index="orders-1")
    assert_index_equals_table(deployed, fault_proxy)


def test_a_systemic_failure_fails_the_pass_under_the_roles(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mapping every row contradicts: the pass fails, nothing advances, no letter is kept as the
    rows' own fault, and the roles were refused nothing on the way."""
    lake.create_table(f"{lake.database}.orders").append(rows(*range(100, 160)))
    shape = Shape("a contradicting mapping", EXISTING.aws, SIGNED, {"mappings": {"properties": {"region": {"type": "integer"}}}})
    deployed = Deployed(shape, lake, fault_proxy, enforced, monkeypatch)
    with pytest.raises(SystemicDeadLetters):
        deployed.job(job.main)
    assert deployed.checkpoint() is None
    enforced.assert_no_refusals()


def test_the_expiry_guard_and_files_gone_under_the_roles(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard tags the table's metadata (glue:UpdateTable, metadata files under the warehouse's
    key); a commit's data file expired before the job reads it is found gone (S3 answers 404 only
    to a role that may list the bucket) and the table is read anew."""
    deployed = deploy(GUARDED, lake, fault_proxy, enforced, monkeypatch)
    [exported] = deployed.job(job.main)
    assert exported.writes.indexed == 4
    table = lake.catalog().load_table(deployed.table)
    assert any(name.startswith("icecdc") for name in table.metadata.refs)
    assert_index_equals_table(deployed, fault_proxy)

    table.append(rows(11, 12))
    deployed.planner(commit_event(deployed), handler_module.handler)  # plans the commit, applies it
    expire_a_commit(deployed)
    deployed.job(job.main)  # the commit's file is gone (404, as the role may list): read anew
    assert_index_equals_table(deployed, fault_proxy)


def test_files_gone_for_a_role_that_may_not_list_are_a_refusal_not_an_expiry(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without s3:ListBucket, S3 answers 403 for the missing file: icecdc cannot tell it from a
    right withheld, so the pass fails in one line that says both, and nothing advances."""
    deployed = deploy(EXISTING, lake, fault_proxy, enforced, monkeypatch)
    deployed.job(job.main)
    synced = deployed.checkpoint()
    policy = deployed.roles["job"]
    unlisted = tuple(s for s in policy.statements if s.actions != ("s3:ListBucket",) or "dl-" in s.resources[0])
    enforced.act_as(deployed.access_key("job"), type(policy)(policy.role, unlisted))
    expire_a_commit(deployed)
    with caplog.at_level(logging.ERROR, logger="icecdc.glue_job"):
        assert deployed.job(job.run) == 2
    [line] = [r.getMessage() for r in caplog.records if r.name == "icecdc.glue_job" and r.levelno >= logging.ERROR]
    assert "s3:GetObject on arn:aws:s3:::" in line and "s3:ListBucket" in line and "\n" not in line, line
    assert deployed.checkpoint() == synced
    enforced.refusals.clear()


def expire_a_commit(deployed: Deployed) -> None:
    """The table overwritten, and a file the overwrite removed deleted from S3 before the job
    reads it (for the rows it deleted), as an expiry of the snapshots that held it does."""
    table = deployed.lake.catalog().load_table(deployed.table)
    removed = sorted(data_files(table))[0]
    table.overwrite(rows(1, 3, 4, 5))
    bucket, _, key = removed.removeprefix("s3://").partition("/")
    aws_client("s3", deployed.lake.moto_url).delete_object(Bucket=bucket, Key=key)


def data_files(table: Any) -> set[str]:
    return {task.file.file_path for task in table.scan().plan_files()}


def backing_catalog(lake: Lake, tmp_path: Path, warehouse: str) -> tuple[SqlCatalog, Any]:
    """The catalog behind a REST stand-in (SQLite, files in moto's S3), with the orders table of
    rows 1-3 in the namespace `lake.database`; and the table."""
    backing = SqlCatalog(
        "backing",
        uri=f"sqlite:///{tmp_path / 'tables.db'}",
        warehouse=warehouse,
        **{k: v for k, v in lake.catalog_properties.items() if k.startswith("s3.")},
    )
    backing.create_namespace(lake.database)
    table = backing.create_table(f"{lake.database}.orders", schema=ORDERS)
    table.append(rows(1, 2, 3))
    return backing, table


def test_an_s3_tables_catalog_through_its_rest_endpoint_under_the_roles(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """S3 Tables: the planner and the job read through the REST endpoint's stand-in,
    signed for `s3tables` with the roles' keys; every route and every data file read is authorized
    as the s3tables:* action AWS documents for it, against the grants icecdc.aws.catalogs gives. A
    commit CloudTrail records names the table the planner plans."""
    storage = f"{lake.bucket}--table-s3"  # a table's storage, as S3 Tables names it
    aws_client("s3", lake.moto_url).create_bucket(Bucket=storage)
    backing, table = backing_catalog(lake, tmp_path, f"s3://{storage}")
    namespace = lake.database
    bucket_arn = f"arn:aws:s3tables:{REGION}:123456789012:bucket/{lake.bucket}"
    table_arn = f"{bucket_arn}/table/{table.metadata.table_uuid}"

    def authorize(access_key: str, method: str, raw_path: str) -> str | None:
        calls = s3tables_calls(method, raw_path, bucket_arn, lambda _namespace, _name: table_arn)
        refused = enforced.authorize_calls(access_key, calls)
        return None if refused is None else str(refused)

    endpoint = RestCatalogServer(backing, warehouse=bucket_arn, auth=Auth.SIGV4, authorize=authorize)
    with endpoint:
        properties = {
            "name": "lake",
            "type": "rest",
            "uri": endpoint.url,
            "warehouse": bucket_arn,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": REGION,
            **{k: v for k, v in lake.catalog_properties.items() if k in ("s3.endpoint", "s3.region")},
        }
        catalogued = Catalogued(properties, {storage: (table_arn, namespace, "orders")})
        shape = Shape("S3 Tables", {"opensearch_domain_arn": DOMAIN, "warehouse_buckets": []}, SIGNED, {})
        deployed = Deployed(shape, lake, fault_proxy, enforced, monkeypatch, catalogued)
        commit = buffered(s3tables_commit(bucket_arn, namespace, "orders"))
        assert deployed.planner(commit, handler_module.handler) == {"batchItemFailures": []}
        assert_index_equals_rest_table(deployed, backing, fault_proxy)

        table = backing.load_table(f"{namespace}.orders")
        table.delete(EqualTo("id", 2))
        table.append(rows(4, 5, region="eu"))
        [changed] = deployed.job(job.main)
        assert (changed.writes.indexed, changed.writes.deleted) == (2, 1)
        assert_index_equals_rest_table(deployed, backing, fault_proxy)

        # what a sweep and a no-op job cost the catalog: one config, one load per table
        for run in (lambda: deployed.planner(buffered(SCHEDULE_EVENT), handler_module.handler), lambda: deployed.job(job.main)):
            endpoint.reset_counts()
            run()
            assert sum(endpoint.counts().values()) <= 2, endpoint.counts()


def test_glues_rest_endpoint_with_lake_formation_under_the_roles(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Glue's Iceberg REST endpoint over a federated catalog: signed for `glue`, each route
    authorized as glue:Get* on the catalogs, database and table it names, and the data read with
    the credentials Lake Formation vends (lakeformation:GetDataAccess), never the role's own:
    the role has no right on the data's bucket, so a read with its keys would be refused."""
    backing, _ = backing_catalog(lake, tmp_path, f"s3://{lake.bucket}/federated")
    namespace = lake.database
    federated = f"s3tablescatalog/{lake.bucket}"

    def authorize(access_key: str, method: str, raw_path: str) -> str | None:
        refused = enforced.authorize_calls(access_key, glue_rest_calls(method, raw_path, federated))
        return None if refused is None else str(refused)

    vended = {"s3.access-key-id": "vended-by-lake-formation", "s3.secret-access-key": "vended"}
    warehouse = f"123456789012:{federated}"
    endpoint = RestCatalogServer(backing, warehouse=warehouse, auth=Auth.SIGV4, signing_name="glue", authorize=authorize)
    endpoint.vended = vended
    with endpoint:
        properties = {
            "name": "lake",
            "type": "rest",
            "uri": endpoint.url,
            "warehouse": warehouse,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "glue",
            "rest.signing-region": REGION,
            **{k: v for k, v in lake.catalog_properties.items() if k in ("s3.endpoint", "s3.region")},
        }
        shape = Shape("Glue REST", {"opensearch_domain_arn": DOMAIN, "warehouse_buckets": []}, SIGNED, {})
        deployed = Deployed(shape, lake, fault_proxy, enforced, monkeypatch, Catalogued(properties, {}))
        assert deployed.planner(buffered(SCHEDULE_EVENT), handler_module.handler) == {"batchItemFailures": []}
        assert_index_equals_rest_table(deployed, backing, fault_proxy)
        backing.load_table(f"{namespace}.orders").append(rows(4, region="eu"))
        [changed] = deployed.job(job.main)
        assert changed.writes.indexed == 1
        assert_index_equals_rest_table(deployed, backing, fault_proxy)
    roles_s3 = [t for t in enforced.exercised if t[1].startswith("s3:") and lake.bucket in t[2]]
    assert roles_s3 == [], "the roles read the data with their own keys"


def test_any_rest_catalog_with_oauth2_credentials_from_secrets_manager(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A REST catalog (Polaris, Nessie, ...) with OAuth2: the roles read the client credentials
    from Secrets Manager (never in the file), the stand-in issues tokens, the files are read from
    the warehouse bucket under the roles' S3 rights; the sweep plans (no events)."""
    backing, _ = backing_catalog(lake, tmp_path, f"s3://{lake.bucket}/polaris")
    namespace = lake.database
    secrets = aws_client("secretsmanager", lake.moto_url)
    secret = secrets.create_secret(
        Name=f"catalog-{lake.bucket}", SecretString='{"client_id": "icecdc", "client_secret": "s3cret"}'
    )
    endpoint = RestCatalogServer(backing, warehouse="lake", auth=Auth.OAUTH2, client_secret="s3cret")
    with endpoint:
        properties = {
            "name": "lake",
            "type": "rest",
            "uri": endpoint.url,
            "warehouse": "lake",
            "credential_secret_arn": secret["ARN"],
            **{k: v for k, v in lake.catalog_properties.items() if k in ("s3.endpoint", "s3.region")},
        }
        shape = Shape("OAuth2 REST", {"opensearch_domain_arn": DOMAIN}, SIGNED, {})
        deployed = Deployed(shape, lake, fault_proxy, enforced, monkeypatch, Catalogued(properties, {}))
        assert "s3cret" not in deployed.config_path.read_text()
        assert deployed.planner(buffered(SCHEDULE_EVENT), handler_module.handler) == {"batchItemFailures": []}
        assert_index_equals_rest_table(deployed, backing, fault_proxy)
        backing.load_table(f"{namespace}.orders").append(rows(4, region="eu"))
        endpoint.expire_tokens()  # the job's token is fetched anew
        [changed] = deployed.job(job.main)
        assert changed.writes.indexed == 1
        assert_index_equals_rest_table(deployed, backing, fault_proxy)
    assert ("job", "secretsmanager:GetSecretValue", secret["ARN"]) in enforced.exercised


def test_a_rest_catalog_signed_for_a_service_the_user_names_under_the_roles(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A REST catalog behind API Gateway (signing name execute-api): every route authorized as
    execute-api:Invoke on its method and path, against what aws.catalog_grants lists (reads:
    GET and HEAD), the files read from the warehouse bucket under the roles' S3 rights."""
    backing, _ = backing_catalog(lake, tmp_path, f"s3://{lake.bucket}/behind-api-gateway")
    namespace = lake.database
    api = f"arn:aws:execute-api:{REGION}:123456789012:a1b2c3d4e5/prod"

    def authorize(access_key: str, method: str, raw_path: str) -> str | None:
        refused = enforced.authorize_calls(access_key, [Call("execute-api:Invoke", f"{api}/{method}{raw_path}")])
        return None if refused is None else str(refused)

    endpoint = RestCatalogServer(backing, warehouse="lake", auth=Auth.SIGV4, signing_name="execute-api", authorize=authorize)
    with endpoint:
        properties = {
            "name": "lake",
            "type": "rest",
            "uri": endpoint.url,
            "warehouse": "lake",
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "execute-api",
            "rest.signing-region": REGION,
            **{k: v for k, v in lake.catalog_properties.items() if k in ("s3.endpoint", "s3.region")},
        }
        grants = [{"actions": ["execute-api:Invoke"], "resources": [f"{api}/GET/*", f"{api}/HEAD/*"]}]
        shape = Shape("SigV4 REST", {"opensearch_domain_arn": DOMAIN, "catalog_grants": grants}, SIGNED, {})
        deployed = Deployed(shape, lake, fault_proxy, enforced, monkeypatch, Catalogued(properties, {}))
        assert deployed.planner(buffered(SCHEDULE_EVENT), handler_module.handler) == {"batchItemFailures": []}
        assert_index_equals_rest_table(deployed, backing, fault_proxy)
        backing.load_table(f"{namespace}.orders").append(rows(4, region="eu"))
        [changed] = deployed.job(job.main)
        assert changed.writes.indexed == 1
        assert_index_equals_rest_table(deployed, backing, fault_proxy)
    invoked = {(role, action) for role, action, resource in enforced.exercised if resource.startswith(api)}
    assert invoked == {("job", "execute-api:Invoke"), ("planner", "execute-api:Invoke")}


def s3tables_commit(bucket_arn: str, namespace: str, name: str) -> dict[str, Any]:
    """An S3 Tables commit as EventBridge delivers it from CloudTrail (management events)."""
    parameters = {"tableBucketARN": bucket_arn, "namespace": namespace, "name": name, "versionToken": "x"}
    detail = {"eventSource": "s3tables.amazonaws.com", "eventName": "UpdateTableMetadataLocation"}
    return {
        "source": "aws.s3tables",
        "detail-type": "AWS API Call via CloudTrail",
        "detail": {**detail, "requestParameters": parameters},
    }


def assert_index_equals_rest_table(deployed: Deployed, backing: SqlCatalog, search: FaultProxy) -> None:
    deployed.enforcer.assert_no_refusals()
    table = backing.load_table(deployed.table)
    diff = diff_index(table, ("id",), OpenSearch(hosts=[search.url]), "orders")
    assert not diff, diff.summary()


def test_a_refused_request_is_one_line_naming_the_action_and_resource(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A right the role lacks (here the warehouse bucket left out of the stack) fails the pass in
    one line naming the action and the resource, and nothing advances."""
    deployed = deploy(EXISTING, lake, fault_proxy, enforced, monkeypatch)
    policy = deployed.roles["job"]
    stripped = type(policy)(policy.role, tuple(s for s in policy.statements if not any("lake-" in r for r in s.resources)))
    enforced.act_as(deployed.access_key("job"), stripped)
    with caplog.at_level(logging.ERROR, logger="icecdc.glue_job"):
        assert deployed.job(job.run) == 2
    [line] = [r.getMessage() for r in caplog.records if r.name == "icecdc.glue_job" and r.levelno >= logging.ERROR]
    assert line.startswith(f"AWS refused s3:GetObject on arn:aws:s3:::{lake.bucket}/warehouse/"), line
    assert "\n" not in line and not any(r.exc_info for r in caplog.records if r.name == "icecdc.glue_job")
    assert deployed.checkpoint() is None  # nothing advanced
    enforced.refusals.clear()


def test_a_command_refused_by_iam_is_one_line_and_exit_2(
    lake: Lake, fault_proxy: FaultProxy, enforced: Enforcer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`icecdc dead-letters list` with credentials whose role may not list the letters (the job's
    statements before this round): one line naming the action and the resource, exit 2."""
    from icecdc.cli import main

    deployed = deploy(EXISTING, lake, fault_proxy, enforced, monkeypatch)
    policy = deployed.roles["job"]
    unlisted = tuple(s for s in policy.statements if "s3:ListBucket" not in s.actions)
    enforced.act_as(deployed.access_key("job"), type(policy)(policy.role, unlisted))
    config = yaml.safe_load(deployed.config_path.read_text())
    config["dead_letter"] = {"path": f"s3://{deployed.dead_letter_bucket}/dead-letter/"}
    path = lake.workdir / "operator.yaml"
    path.write_text(yaml.safe_dump(config))
    with deployed.acting_as("job"):
        code = main(["dead-letters", "list", "--config", str(path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err, err
    assert err.startswith("icecdc: error: AWS refused ListObjectsV2: ") and "s3:ListBucket" in err, err
    assert f"arn:aws:s3:::{deployed.dead_letter_bucket}" in err
    enforced.refusals.clear()


def test_the_docs_table_of_the_roles_rights_matches_what_the_harness_exercised(
    exercised: set[tuple[str, str, str]],
) -> None:
    """docs/deploy.md lists each role's actions and what they act on; every (role, action, kind of
    resource) the harness exercised is listed there, and every row listed was exercised."""
    assert exercised, "run with the harness's tests above"
    documented = _documented_rights(ROOT / "docs" / "deploy.md")
    seen = {(role, action, resource_kind(resource)) for role, action, resource in exercised}
    assert seen - documented == set(), "exercised, not in docs/deploy.md"
    assert documented - seen == set(), "in docs/deploy.md, never exercised"


def _documented_rights(path: Path) -> set[tuple[str, str, str]]:
    text = path.read_text()
    section = text.split("### The roles' AWS rights", 1)[1].split("\n#", 1)[0]
    rights = set()
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] in ("planner", "job", "both"):
            roles = ("planner", "job") if cells[0] == "both" else (cells[0],)
            for action in re.split(r",\s*", cells[1]):
                rights.update((role, action.strip("` "), cells[2]) for role in roles)
    return rights


def resource_kind(resource: str) -> str:
    """What docs/deploy.md calls a resource: the kind of thing, not its name."""
    kinds = [
        (r"^arn:aws:dynamodb:.*:table/[^/]+-state$", "the state table"),
        (r"^arn:aws:glue:.*:catalog$", "the Data Catalog"),
        (r"^arn:aws:glue:.*:catalog/", "the federated catalog"),
        (r"^arn:aws:glue:.*:database/", "the tables' databases"),
        (r"^arn:aws:glue:.*:table/", "the configured tables"),
        (r"^arn:aws:glue:.*:job/", "the tables' jobs"),
        (r"^arn:aws:s3:::dl-[^/]+$", "the dead-letter bucket"),
        (r"^arn:aws:s3:::dl-[^/]+/", "dead letters"),
        (r"^arn:aws:s3:::lake-[^/]+$", "the warehouse buckets"),
        (r"^arn:aws:s3:::lake-[^/]+/.*/metadata/", "the tables' metadata files"),
        (r"^arn:aws:s3:::lake-[^/]+/", "the warehouse's objects"),
        (r"^arn:aws:s3:::cdk-[^/]+/", "the job's assets"),
        (r"^arn:aws:kms:.*:key/1234abcd", "the configured keys"),
        (r"^arn:aws:kms:", "the stack's data key"),
        (r"^arn:aws:secretsmanager:.*:secret:catalog-", "the catalog's client credentials"),
        (r"^arn:aws:secretsmanager:", "the password secret"),
        (r"^arn:aws:es:.*:domain/[^/]+/orders(-[0-9*]+)?(/.*)?$", "the configured indexes"),
        (r"^arn:aws:es:.*:domain/[^/]+/?$", "the domain's root"),
        (r"^arn:aws:es:.*:domain/[^/]+/_", "the domain's APIs"),
        (r"^arn:aws:s3tables:.*:bucket/[^/]+$", "the table bucket"),
        (r"^arn:aws:s3tables:.*:bucket/[^/]+/table/", "the bucket's tables"),
        (r"^arn:aws:execute-api:", "the routes aws.catalog_grants lists"),
        (r"^\*$", "*"),
    ]
    return next((kind for pattern, kind in kinds if re.search(pattern, resource)), resource)

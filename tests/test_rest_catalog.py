"""The REST catalog stand-in (tests/support/rest_catalog.py) as pyiceberg's RestCatalog sees it:
a table's life through it, SigV4's signing name and OAuth2's client credentials checked, requests
counted; and `icecdc sync` exporting a table read through it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests
import yaml
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    BadRequestError,
    ForbiddenError,
    NoSuchTableError,
    OAuthError,
    TableAlreadyExistsError,
)
from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.types import StringType

from icecdc.aws.planner import Sweep, plan_and_start_each
from icecdc.config import parse_config
from icecdc.model import EngineKind
from icecdc.state import open_state_store
from icecdc.verify import diff_index
from tests.support.aws import aws_client
from tests.support.cli import icecdc
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline, config_dict
from tests.support.rest_catalog import CONFIG_ROUTE, TOKEN_ROUTE, Auth, RestCatalogServer
from tests.support.spark_sql import run_sql
from tests.support.tables import BY_REGION, SCHEMA, orders, rows

# S3 Tables' warehouse is its table bucket's ARN; the stand-in's prefix is it, URL-encoded.
BUCKET_ARN = "arn:aws:s3tables:us-east-1:123456789012:bucket/lake"
LOAD_ROUTE = "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}"
COMMIT_ROUTE = "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}"
ACCESS_KEY = "AKIDRESTSTANDIN"

Serve = Callable[..., RestCatalogServer]


@pytest.fixture
def sql_catalog(tmp_path: Path) -> SqlCatalog:
    """The catalog behind the stand-in: pyiceberg's SQL catalog, SQLite and a local warehouse."""
    return SqlCatalog("lake", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=(tmp_path / "warehouse").as_uri())


@pytest.fixture
def serve(sql_catalog: SqlCatalog) -> Iterator[Serve]:
    """Starts stand-ins over `sql_catalog` (keyword arguments: RestCatalogServer's); stopped after."""
    started: list[RestCatalogServer] = []

    def start(**options: Any) -> RestCatalogServer:
        started.append(RestCatalogServer(sql_catalog, **{"warehouse": BUCKET_ARN, **options}).start())
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake AWS credentials for pyiceberg's SigV4 signing; no config file is read."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": "fake-secret",
        "AWS_SESSION_TOKEN": "fake-token",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }.items():
        monkeypatch.setenv(name, value)


def rest(server: RestCatalogServer, **properties: str) -> Catalog:
    return load_catalog("rest", type="rest", uri=server.url, warehouse=server.warehouse, **properties)


def sigv4(signing_name: str, region: str = "us-east-1") -> dict[str, str]:
    return {"rest.sigv4-enabled": "true", "rest.signing-name": signing_name, "rest.signing-region": region}


def oauth2(server: RestCatalogServer, secret: str = "secret") -> dict[str, str]:
    return {"credential": f"icecdc:{secret}", "oauth2-server-uri": f"{server.url}/v1/oauth/tokens"}


def a_table_lives_through(catalog: Catalog, sql_catalog: SqlCatalog) -> None:
    """Create a namespace and a table, append, change the schema, drop it and create it again,
    all through `catalog`; the SQL catalog behind it holds each step."""
    catalog.create_namespace("db")
    assert catalog.list_namespaces() == [("db",)] and catalog.namespace_exists("db")
    table = catalog.create_table("db.orders", schema=SCHEMA, partition_spec=BY_REGION)
    table.append(rows(1, 2, 3))
    loaded = catalog.load_table("db.orders")
    assert sorted(loaded.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    assert loaded.metadata_location == sql_catalog.load_table("db.orders").metadata_location
    with loaded.update_schema() as update:
        update.add_column("note", StringType())
    assert "note" in sql_catalog.load_table("db.orders").schema().column_names
    assert catalog.list_tables("db") == [("db", "orders")] and catalog.table_exists("db.orders")
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table("db.orders", schema=SCHEMA)
    catalog.drop_table("db.orders")
    assert not catalog.table_exists("db.orders") and not sql_catalog.table_exists("db.orders")
    with pytest.raises(NoSuchTableError):
        catalog.load_table("db.orders")
    again = catalog.create_table("db.orders", schema=SCHEMA)
    assert again.current_snapshot() is None and again.metadata.table_uuid != table.metadata.table_uuid


def test_a_table_lives_through_the_stand_in_with_no_auth(serve: Serve, sql_catalog: SqlCatalog) -> None:
    server = serve()
    a_table_lives_through(rest(server), sql_catalog)
    renamed = rest(server)
    renamed.rename_table("db.orders", "db.renamed")
    assert sql_catalog.list_tables("db") == [("db", "renamed")]
    renamed.create_namespace(("db", "a/b"))  # a namespace of two parts, one with a slash
    renamed.create_table(("db", "a/b", "t"), schema=SCHEMA)
    assert renamed.list_namespaces("db") == [("db", "a/b")]
    assert renamed.list_tables(("db", "a/b")) == [("db", "a/b", "t")]


@pytest.mark.parametrize("signing_name", ["s3tables", "glue"])
def test_sigv4_for_the_endpoints_signing_name_is_accepted(
    serve: Serve, sql_catalog: SqlCatalog, aws_credentials: None, signing_name: str
) -> None:
    seen: list[tuple[str, str]] = []

    def authorize(access_key: str, method: str, path: str) -> str | None:
        seen.append((access_key, method))
        return None

    server = serve(auth=Auth.SIGV4, signing_name=signing_name, authorize=authorize)
    a_table_lives_through(rest(server, **sigv4(signing_name)), sql_catalog)
    assert {key for key, _ in seen} == {ACCESS_KEY}
    assert len(seen) == sum(server.counts().values())  # every request was signed and asked about


@pytest.mark.parametrize(
    ("properties", "refusal"),
    [
        (sigv4("glue"), "Credential should be scoped to correct service: 's3tables'"),
        (sigv4("s3tables", region="eu-west-1"), "Credential should be scoped to a valid region"),
        ({}, "not SigV4-signed"),
    ],
    ids=["wrong signing name", "wrong region", "unsigned"],
)
def test_sigv4_refuses_another_signing_name_region_or_no_signature(
    serve: Serve, aws_credentials: None, properties: dict[str, str], refusal: str
) -> None:
    server = serve(auth=Auth.SIGV4, signing_name="s3tables")
    with pytest.raises(ForbiddenError, match=refusal):
        rest(server, **properties)
    assert server.counts() == {CONFIG_ROUTE: 1}


def test_sigv4_asks_the_authorize_hook_and_refuses_what_it_refuses(
    serve: Serve, sql_catalog: SqlCatalog, aws_credentials: None
) -> None:
    """The IAM harness's place: (access key, method, raw path) -> a refusal, answered 403."""

    def authorize(access_key: str, method: str, path: str) -> str | None:
        return "not authorized to perform: s3tables:DeleteTable" if method == "DELETE" else None

    sql_catalog.create_namespace("db")
    sql_catalog.create_table("db.orders", schema=SCHEMA)
    catalog = rest(serve(auth=Auth.SIGV4, authorize=authorize), **sigv4("s3tables"))
    assert catalog.load_table("db.orders").schema() == SCHEMA
    with pytest.raises(ForbiddenError, match="s3tables:DeleteTable"):
        catalog.drop_table("db.orders")
    assert sql_catalog.table_exists("db.orders")


def test_oauth2_client_credentials_are_accepted_and_a_wrong_secret_is_refused(serve: Serve, sql_catalog: SqlCatalog) -> None:
    server = serve(auth=Auth.OAUTH2)
    with pytest.raises(OAuthError, match="invalid_client"):
        rest(server, **oauth2(server, secret="wrong"))
    a_table_lives_through(rest(server, **oauth2(server)), sql_catalog)
    unauthenticated = requests.get(f"{server.url}/v1/{server.prefix}/namespaces", timeout=10)
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["error"]["type"] == "NotAuthorizedException"


def test_oauth2_tokens_expire_and_pyiceberg_fetches_a_new_one(serve: Serve, sql_catalog: SqlCatalog) -> None:
    """A request with an expired token is answered 401; pyiceberg's client then asks for a new
    token and retries, once: the table loads, at the cost of one token and one refused load."""
    sql_catalog.create_namespace("db")
    sql_catalog.create_table("db.orders", schema=SCHEMA)
    server = serve(auth=Auth.OAUTH2)
    catalog = rest(server, **oauth2(server))
    # pyiceberg opens the catalog with a token for its config request and another for the rest
    assert server.counts() == {TOKEN_ROUTE: 2, CONFIG_ROUTE: 1}
    catalog.load_table("db.orders")
    server.reset_counts()
    server.expire_tokens()
    assert catalog.load_table("db.orders").schema() == SCHEMA
    assert server.counts() == {TOKEN_ROUTE: 1, LOAD_ROUTE: 2}


def test_a_short_lived_token_is_renewed_by_pyiceberg_s_oauth2_manager(serve: Serve, sql_catalog: SqlCatalog) -> None:
    """pyiceberg's `auth: {type: oauth2}` manager renews a token before it expires (`expires_in`)."""
    sql_catalog.create_namespace("db")
    sql_catalog.create_table("db.orders", schema=SCHEMA)
    server = serve(auth=Auth.OAUTH2, expires_in=1)
    manager = {"client_id": "icecdc", "client_secret": "secret", "token_url": f"{server.url}/v1/oauth/tokens"}
    auth: dict[str, Any] = {"auth": {"type": "oauth2", "oauth2": manager}}  # a nested property
    catalog = rest(server, **auth)
    server.reset_counts()
    for _ in range(2):
        assert catalog.load_table("db.orders").schema() == SCHEMA
    counts = server.counts()
    assert counts[LOAD_ROUTE] == 2 and counts[TOKEN_ROUTE] == 2  # a token per request: none outlives 1s


def test_requests_are_counted_by_route(serve: Serve, sql_catalog: SqlCatalog) -> None:
    """Opening the catalog is one config request; loading a table one load; appending one commit."""
    sql_catalog.create_namespace("db")
    sql_catalog.create_table("db.orders", schema=SCHEMA)
    server = serve()
    catalog = rest(server)
    assert server.counts() == {CONFIG_ROUTE: 1}
    table = catalog.load_table("db.orders")
    assert server.counts() == {CONFIG_ROUTE: 1, LOAD_ROUTE: 1}
    table.append(rows(1))
    assert server.counts() == {CONFIG_ROUTE: 1, LOAD_ROUTE: 1, COMMIT_ROUTE: 1}


def test_outside_the_surface_everything_is_refused_with_the_spec_s_error_model(serve: Serve, sql_catalog: SqlCatalog) -> None:
    sql_catalog.create_namespace("db")
    server = serve()
    base = f"{server.url}/v1/{server.prefix}"
    refusals = {
        ("GET", f"{server.url}/v1/namespaces"): 400,  # no prefix
        ("GET", f"{server.url}/v1/other-warehouse/namespaces"): 400,
        ("PUT", f"{base}/namespaces/db"): 400,
        ("POST", f"{base}/namespaces/db/properties"): 400,  # a spec route pyiceberg is not told of
        ("POST", f"{server.url}/v1/oauth/tokens"): 400,  # not an OAuth2 stand-in
        ("GET", f"{base}/namespaces/db/tables/missing"): 404,
        ("GET", f"{base}/namespaces/missing"): 404,
        ("POST", f"{base}/namespaces/db/tables"): 400,  # no body
    }
    for (method, url), status in refusals.items():
        answer = requests.request(method, url, timeout=10)
        error = answer.json()["error"]
        assert (answer.status_code, error["code"]) == (status, status), (method, url)
        assert set(error) == {"message", "type", "code"} and error["message"]
    with pytest.raises(BadRequestError, match="no such warehouse"):
        load_catalog("rest", type="rest", uri=server.url, warehouse="another")


@dataclass
class RestSync:
    """`icecdc sync` of db.orders with a config whose catalog is the stand-in `server`."""

    local: Pipeline
    server: RestCatalogServer
    catalog: Catalog  # the stand-in as the test's writer sees it
    path: Path  # the config file

    @classmethod
    def of(
        cls, tmp_path: Path, osmem_url: str, server: RestCatalogServer, writer: dict[str, str] | None = None, **properties: str
    ) -> RestSync:
        """The config's catalog: `properties`; the writer's: `writer` (default: the same)."""
        local = Pipeline(tmp_path, osmem_url, spark=None, engine=EngineKind.IN_PROCESS)
        tables = [{"name": "db.orders", "identifier_columns": ["id"]}]  # Spark sets no identifier field
        raw = config_dict(tmp_path, osmem_url, tables, EngineKind.IN_PROCESS)
        raw["catalog"] = {"name": "lake", "type": "rest", "uri": server.url, "warehouse": server.warehouse, **properties}
        path = tmp_path / "icecdc.yaml"
        path.write_text(yaml.safe_dump(raw))
        return cls(local, server, rest(server, **(properties if writer is None else writer)), path)

    def synced(self) -> Counter[str]:
        """Sync, check the index equals the table read through REST; the sync's catalog requests."""
        self.server.reset_counts()
        run = icecdc("sync", "--config", str(self.path))
        assert run.returncode == 0, run.stdout + run.stderr
        counts = self.server.counts()
        diff = diff_index(self.catalog.load_table("db.orders"), ("id",), self.local.client, "orders")
        assert not diff, diff.summary()
        return counts

    def ids(self) -> list[int]:
        return sorted(int(i) for i in self.local.documents("orders"))


def test_icecdc_sync_exports_a_table_read_through_the_rest_catalog(
    tmp_path: Path, osmem_clone: Any, serve: Serve, aws_credentials: None
) -> None:
    """`icecdc sync` with `catalog: {type: rest, ...}` and SigV4 exports the table, and after each
    commit through the REST catalog (an append, a copy-on-write delete, a schema change) the index
    equals it."""
    server = serve(auth=Auth.SIGV4, signing_name="s3tables")
    run = RestSync.of(tmp_path, osmem_clone.url, server, **sigv4("s3tables"))
    orders(run.local).append(rows(1, 2, 3))  # created in the SQL catalog, read through the stand-in
    run.synced()
    assert run.ids() == [1, 2, 3]
    through_rest = run.catalog.load_table("db.orders")
    through_rest.append(rows(4, 5, status="paid"))
    through_rest.delete("id = 2")  # copy-on-write: the file holding id 2 is rewritten
    run.synced()
    assert run.ids() == [1, 3, 4, 5]
    with through_rest.update_schema() as update:  # a schema change, committed through REST
        update.add_column("note", StringType())
    noted = rows(6).append_column("note", pa.array(["new column"]))
    run.catalog.load_table("db.orders").append(noted)
    run.synced()
    assert json.loads(run.local.documents("orders")["6"])["note"] == "new column"
    # A sync with nothing new: the catalog's config once, the table loaded once.
    assert run.synced() == {CONFIG_ROUTE: 1, LOAD_ROUTE: 1}


def spark_creates_orders(spark: Any, tmp_path: Path, format_version: int) -> None:
    """db.orders created by Spark in the catalog behind the stand-in: updates copy-on-write,
    deletes merge-on-read (position deletes in v2, deletion vectors in v3)."""
    run_sql(
        spark,
        tmp_path,
        "CREATE TABLE lake.db.orders (id BIGINT NOT NULL, region STRING, status STRING, amount DOUBLE) "
        f"USING iceberg PARTITIONED BY (region) TBLPROPERTIES ('format-version'='{format_version}', "
        "'write.update.mode'='copy-on-write', 'write.delete.mode'='merge-on-read')",
        "INSERT INTO lake.db.orders VALUES (1, 'us', 'new', 1.5), (2, 'us', 'new', 3.0), (3, 'eu', 'new', 4.5)",
    )


@pytest.mark.parametrize(
    ("auth", "format_version", "delete_format"),
    [("s3tables", 2, FileFormat.PARQUET), ("glue", 3, FileFormat.PUFFIN), ("oauth2", 2, FileFormat.PARQUET)],
    ids=["sigv4 s3tables, position deletes", "sigv4 glue, deletion vectors", "oauth2, position deletes"],
)
def test_a_table_s_life_through_the_rest_catalog_reaches_the_index(
    tmp_path: Path,
    osmem_clone: Any,
    spark: Any,
    serve: Serve,
    aws_credentials: None,
    auth: str,
    format_version: int,
    delete_format: FileFormat,
) -> None:
    """The end-to-end suite through the stand-in, each auth: the export, a copy-on-write commit, a
    merge-on-read commit, a column added and one dropped (Spark's commits, to the catalog behind
    the stand-in: pyiceberg writes no v3), and the table dropped through REST and created again
    under its name; after every `icecdc sync` the index equals the table as REST serves it."""
    if auth == "oauth2":
        server = serve(auth=Auth.OAUTH2)
        properties = oauth2(server)
    else:
        server = serve(auth=Auth.SIGV4, signing_name=auth)
        properties = sigv4(auth)
    run = RestSync.of(tmp_path, osmem_clone.url, server, **properties)
    spark_creates_orders(spark, tmp_path, format_version)
    run.synced()
    assert run.ids() == [1, 2, 3]

    run_sql(spark, tmp_path, "UPDATE lake.db.orders SET status = 'paid' WHERE id = 1")  # copy-on-write
    run.synced()
    assert json.loads(run.local.documents("orders")["1"])["status"] == "paid"

    run_sql(spark, tmp_path, "DELETE FROM lake.db.orders WHERE id = 2")  # merge-on-read
    tasks = run.catalog.load_table("db.orders").scan().plan_files()
    assert {(d.content, d.file_format) for task in tasks for d in task.delete_files} == {
        (DataFileContent.POSITION_DELETES, delete_format)
    }
    run.synced()
    assert run.ids() == [1, 3]

    run_sql(
        spark,
        tmp_path,
        "ALTER TABLE lake.db.orders ADD COLUMN note STRING",
        "ALTER TABLE lake.db.orders DROP COLUMN amount",
        "INSERT INTO lake.db.orders VALUES (7, 'us', 'new', 'added')",
    )
    run.synced()
    assert json.loads(run.local.documents("orders")["7"]) == {"id": 7, "region": "us", "status": "new", "note": "added"}
    assert "amount" not in json.loads(run.local.documents("orders")["3"])

    dropped = run.catalog.load_table("db.orders").metadata.table_uuid
    run.catalog.drop_table("db.orders")
    spark_creates_orders(spark, tmp_path, format_version)  # ids 1, 2, 3 again, a new table
    assert run.catalog.load_table("db.orders").metadata.table_uuid != dropped
    run.synced()
    assert run.ids() == [1, 2, 3]
    assert json.loads(run.local.documents("orders")["1"])["status"] == "new"
    # nothing new: the config once (and OAuth2's tokens), the table loaded once
    assert {CONFIG_ROUTE: 1, LOAD_ROUTE: 1}.items() <= run.synced().items()


@pytest.fixture
def secret_reads(moto_url: str, monkeypatch: pytest.MonkeyPatch, aws_credentials: None) -> Iterator[FaultProxy]:
    """Secrets Manager (moto's) behind a proxy that counts its requests: each is a secret read."""
    with FaultProxy(moto_url) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", proxy.url)
        yield proxy


def client_secret(moto_url: str, unique: str) -> str:
    """The stand-in's client credentials in a secret of moto's Secrets Manager: its ARN."""
    created = aws_client("secretsmanager", moto_url).create_secret(
        Name=f"catalog-{unique}", SecretString=json.dumps({"client_id": "icecdc", "client_secret": "secret"})
    )
    return str(created["ARN"])


def test_a_sync_of_two_tables_reads_the_oauth2_secret_once_and_renews_tokens(
    tmp_path: Path, osmem_clone: Any, serve: Serve, sql_catalog: SqlCatalog, moto_url: str, unique: str, secret_reads: FaultProxy
) -> None:
    """`icecdc sync` with the client credentials in Secrets Manager: one read for the run; each
    token the stand-in issues serves two requests, so the run renews them (pyiceberg, with the
    credential it was opened with) and still syncs both tables."""
    server = serve(auth=Auth.OAUTH2, token_uses=2)
    from_secret = {"credential_secret_arn": client_secret(moto_url, unique), "oauth2-server-uri": f"{server.url}/v1/oauth/tokens"}
    run = RestSync.of(tmp_path, osmem_clone.url, server, writer=oauth2(server), **from_secret)
    raw = yaml.safe_load(run.path.read_text())
    raw["tables"].append({"name": "db.customers", "identifier_columns": ["id"]})
    run.path.write_text(yaml.safe_dump(raw))
    for name in ("db.orders", "db.customers"):
        sql_catalog.create_table(name, schema=SCHEMA).append(rows(1, 2))
    counts = run.synced()
    assert secret_reads.count() == 1
    assert counts[TOKEN_ROUTE] > 2, counts  # tokens renewed after the first two
    assert sorted(run.local.documents("customers")) == ["1", "2"]


def test_the_planner_s_sweep_reads_the_oauth2_secret_once(
    tmp_path: Path, osmem_clone: Any, serve: Serve, sql_catalog: SqlCatalog, moto_url: str, unique: str, secret_reads: FaultProxy
) -> None:
    """The sweep opens a catalog per table, in threads; they share the run's one secret read.
    Tokens that serve one request each are renewed, and every table is applied here."""
    server = serve(auth=Auth.OAUTH2, token_uses=1)
    local = Pipeline(tmp_path, osmem_clone.url, spark=None, engine=EngineKind.IN_PROCESS)
    names = [f"db.t{i}" for i in range(4)]
    for name in names:
        sql_catalog.create_table(name, schema=SCHEMA).append(rows(1, 2, 3))
    raw = config_dict(tmp_path, osmem_clone.url, [{"name": n, "index": n[3:]} for n in names], EngineKind.IN_PROCESS)
    secret = client_secret(moto_url, unique)
    raw["catalog"] = {
        "name": "lake",
        "type": "rest",
        "uri": server.url,
        "warehouse": server.warehouse,
        "credential_secret_arn": secret,
    }
    config = parse_config(raw)
    store = open_state_store(config.state)
    try:
        sweep = Sweep(config, store, aws_client("glue", moto_url), aws_client("cloudwatch", moto_url))
        outcomes = plan_and_start_each(sweep, tuple(names), "stack", workers=4)
    finally:
        store.close()
    assert [o.error for o in outcomes] == [None] * 4 and all(o.has_work for o in outcomes), outcomes
    assert secret_reads.count() == 1
    assert server.counts()[TOKEN_ROUTE] > 2 * len(names)  # two a catalog opened, and renewals
    for name in names:
        assert not diff_index(sql_catalog.load_table(name), ("id",), local.client, name[3:])


def test_icecdc_sync_signs_for_a_service_the_user_names(
    tmp_path: Path, osmem_clone: Any, serve: Serve, aws_credentials: None
) -> None:
    """A REST catalog behind API Gateway: `rest.signing-name: execute-api`, every request signed
    for it (the stand-in refuses any other scope); the export and a commit reach the index."""
    server = serve(auth=Auth.SIGV4, signing_name="execute-api")
    run = RestSync.of(tmp_path, osmem_clone.url, server, **sigv4("execute-api"))
    orders(run.local).append(rows(1, 2))
    run.synced()
    run.catalog.load_table("db.orders").append(rows(3))
    run.synced()
    assert run.ids() == [1, 2, 3]
    raw = yaml.safe_load(run.path.read_text())
    raw["catalog"]["rest.signing-name"] = "s3tables"
    (tmp_path / "wrong.yaml").write_text(yaml.safe_dump(raw))
    wrong = icecdc("sync", "--config", str(tmp_path / "wrong.yaml"))
    assert wrong.returncode != 0 and "scoped to correct service: 'execute-api'" in wrong.stderr, wrong.stderr

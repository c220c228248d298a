"""Each command opens its OpenSearch destination once: it reads the password's secret once (the
Secrets Manager requests counted in front of moto's server), and a sync's requests share one client
(the connections counted in front of osmem). Before the destination port owned the client, a
pass's steps each opened one and read the secret again."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from icecdc.cli import main
from icecdc.model import EngineKind
from icecdc.sync import sync
from tests.support.aws import aws_client
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline
from tests.support.tables import SCHEMA, rows

NAME = "db.orders"


@pytest.fixture
def local(tmp_path: Path, osmem_clone: Any, moto_url: str, unique: str, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    """A pipeline whose OpenSearch password is a secret in moto; dead letters kept locally."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    arn = aws_client("secretsmanager", moto_url).create_secret(Name=f"os-{unique}", SecretString="s3cret")["ARN"]
    opensearch = {"username": "icecdc", "password_secret_arn": arn}
    return Pipeline(tmp_path, osmem_clone.url, None, EngineKind.IN_PROCESS, opensearch)


@pytest.fixture
def secrets_seen(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A proxy in front of moto that Secrets Manager's requests, and only those, go through."""
    with FaultProxy(moto_url) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", proxy.url)
        yield proxy


def config_file(pipeline: Pipeline) -> Path:
    raw = pipeline.config_dict([{"name": NAME, "index": "orders"}])
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    path = pipeline.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_each_command_reads_the_secret_once(
    local: Pipeline, secrets_seen: FaultProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    """sync (an export, then an incremental pass with an update and a delete), status, verify,
    audit, repair (by id, and a rebuild), replay and check: one GetSecretValue each."""
    table = local.catalog.create_table(NAME, schema=SCHEMA)
    table.append(rows(1, 2, 3))
    path = config_file(local)
    findings = str(local.workdir / "findings")

    def reads(*command: str) -> int:
        before = secrets_seen.count()
        code = main([*command, "--config", str(path)])
        assert code == 0, capsys.readouterr()
        return secrets_seen.count() - before

    assert reads("sync") == 1
    table.overwrite(rows(1, 2, 4))  # an update of 1 and 2, 3 deleted, 4 appended
    assert reads("sync") == 1
    local.assert_index_equals_table(local.config({"name": NAME, "index": "orders"}), NAME)
    seen = {
        "status": reads("status"),
        "verify": reads("verify"),
        "audit": reads("audit", "--findings", findings),
        "repair": reads("repair", "--table", NAME, "--id", "1"),
        "repair --rebuild": reads("repair", "--table", NAME, "--rebuild"),
        "dead-letters replay": reads("dead-letters", "replay"),
        "check": reads("check"),
    }
    assert seen == dict.fromkeys(seen, 1)


def test_spark_executors_read_no_secret(
    tmp_path: Path,
    osmem_clone: Any,
    moto_url: str,
    unique: str,
    spark: Any,
    secrets_seen: FaultProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Spark sync ships its tasks the section with the password resolved on the driver: the
    executors' clients read no secret (each task's used to), so the sync reads it once."""
    for name, value in {"AWS_ENDPOINT_URL": moto_url, "AWS_ENDPOINT_URL_SECRETS_MANAGER": secrets_seen.url}.items():
        monkeypatch.setenv(name, value)
        monkeypatch.setitem(spark.sparkContext.environment, name, value)
    arn = aws_client("secretsmanager", moto_url).create_secret(Name=f"os-{unique}", SecretString="s3cret")["ARN"]
    opensearch = {"username": "icecdc", "password_secret_arn": arn}
    pipeline = Pipeline(tmp_path, osmem_clone.url, spark, EngineKind.SPARK, opensearch)
    table = pipeline.catalog.create_table(NAME, schema=SCHEMA)
    table.append(rows(1, 2, 3))
    config = pipeline.config({"name": NAME, "index": "orders"})
    before = secrets_seen.count()
    pipeline.sync(config, NAME)
    table.overwrite(rows(1, 2, 4))
    pipeline.sync(config, NAME)
    assert secrets_seen.count() - before == 2


def test_a_sync_talks_to_opensearch_on_one_connection(fault_proxy: FaultProxy, tmp_path: Path) -> None:
    """An export, then a pass of updates, deletes and appends (whose lookups go before the writes),
    into two indexes: every request of a sync on the run's one client, so on one kept-alive
    connection (a client per pass step opened one each before)."""
    pipeline = Pipeline(tmp_path, fault_proxy.url, None, EngineKind.IN_PROCESS)
    table = pipeline.catalog.create_table(NAME, schema=SCHEMA)
    table.append(rows(1, 2, 3))
    config = pipeline.config({"name": NAME, "indexes": [{"index": "orders"}, {"index": "orders_copy"}]})

    def connections(change: Callable[[], object]) -> int:
        change()
        before = fault_proxy.connections
        sync(config, None, [NAME])
        opened = fault_proxy.connections - before
        pipeline.assert_index_equals_table(config, NAME)
        return opened

    assert connections(lambda: None) == 1
    assert connections(lambda: (table.overwrite(rows(1, 2, 4)), table.append(rows(5)))) == 1

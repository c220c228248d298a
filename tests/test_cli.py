"""The `icecdc` command as users run it: a subprocess with a config file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from icecdc.config import parse_config
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

# A config whose table has `indx` for `index`: refused, naming the key.
MISSPELLED_KEY = "catalog: {name: lake}\nstate: {path: x.db}\nopensearch: {url: http://x}\ntables: [{name: db.t, indx: t}]\n"


def icecdc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "icecdc.cli", *args], capture_output=True, text=True, timeout=300, check=False, env=env
    )


def without_java() -> dict[str, str]:
    """An environment in which Spark cannot start: no JAVA_HOME, and no java (nor bash) on the PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    return {**env, "PATH": str(Path(sys.executable).parent), "JAVA_HOME": "/nonexistent"}


def test_sync_status_and_verify(pipeline: Pipeline, tmp_path: Path) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    path = tmp_path / "icecdc.yaml"
    path.write_text(yaml.safe_dump(pipeline.config_dict([{"name": "db.orders"}])))

    status = icecdc("status", "--config", str(path))
    assert status.returncode == 0, status.stderr
    assert "db.orders" in status.stdout and "none" in status.stdout

    synced = icecdc("sync", "--config", str(path), "--table", "db.orders")
    assert synced.returncode == 0, synced.stderr
    assert "db.orders: 1 snapshot (spark engine), 1 file, 3 rows read, 0 carryovers dropped, 3 indexed" in synced.stdout

    verified = icecdc("verify", "--config", str(path))
    assert (verified.returncode, verified.stdout.strip()) == (0, "db.orders → orders: index equals table")

    pipeline.delete("orders", "2")
    drifted = icecdc("verify", "--config", str(path))
    assert drifted.returncode == 1 and "1 missing (e.g. ['2'])" in drifted.stdout

    # An _id is unique on one shard only: a routed index can keep a copy on another, as an alias
    # over two indexes does here (osmem holds one document per _id, whatever its routing).
    same = pipeline.client.get(index="orders", id="1")["_source"]
    pipeline.client.indices.create(index="orders-stray")  # created, not by a write: at once on a collection
    pipeline.write("orders-stray", "1", same)
    pipeline.client.indices.put_alias(index="orders-stray", name="orders")
    copied = icecdc("verify", "--config", str(path))
    assert copied.returncode == 1 and "1 held more than once (e.g. ['1'])" in copied.stdout, copied.stdout


def test_a_small_sync_runs_without_a_jvm(pipeline: Pipeline, tmp_path: Path) -> None:
    """`engine.use: auto`: a small commit is applied in-process; the same sync forced onto Spark
    fails in this environment, so the first one cannot have started a JVM."""
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    raw = pipeline.config_dict([{"name": "db.orders"}])
    forced, auto = tmp_path / "spark.yaml", tmp_path / "auto.yaml"
    forced.write_text(yaml.safe_dump(raw))
    auto.write_text(yaml.safe_dump({**raw, "engine": {"use": "auto"}}))

    assert icecdc("sync", "--config", str(forced), env=without_java()).returncode != 0

    synced = icecdc("sync", "--config", str(auto), env=without_java())
    assert synced.returncode == 0, synced.stderr
    assert "db.orders: 1 snapshot (in_process engine), 1 file, 3 rows read" in synced.stdout
    # opensearch-py logs each request at INFO: a line per bulk request, unless asked for (-v)
    assert "opensearch: POST" not in synced.stderr
    table.append(rows(4))
    verbose = icecdc("-v", "sync", "--config", str(auto), env=without_java())
    assert "1 snapshot (in_process engine)" in verbose.stdout
    assert "opensearch: POST" in verbose.stderr
    pipeline.assert_index_equals_table(pipeline.config({"name": "db.orders"}), "db.orders")


def test_errors_are_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "icecdc.yaml"
    path.write_text(MISSPELLED_KEY)
    result = icecdc("sync", "--config", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == "icecdc: error: unknown key tables[0].indx"


def test_output_and_exit_code_survive_the_exit_without_teardown(pipeline: Pipeline, tmp_path: Path) -> None:
    """`icecdc` ends its process without tearing the interpreter down (`cli.entry`): what it printed
    to a block-buffered pipe still arrives, and its exit code is the command's."""
    orders(pipeline).append(rows(1))
    path = tmp_path / "icecdc.yaml"
    path.write_text(yaml.safe_dump(pipeline.config_dict([{"name": "db.orders"}])))
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}

    status = icecdc("status", "--config", str(path), env=buffered)
    assert status.returncode == 0, status.stderr
    assert "db.orders" in status.stdout

    path.write_text(MISSPELLED_KEY)
    refused = icecdc("status", "--config", str(path), env=buffered)
    assert (refused.returncode, refused.stderr.strip()) == (2, "icecdc: error: unknown key tables[0].indx")


def test_status_json_shows_an_export_under_way_and_the_last_audit(pipeline: Pipeline, tmp_path: Path) -> None:
    table = orders(pipeline)
    for f in range(3):
        table.append(rows(*range(3 * f, 3 * f + 3)))
    path = tmp_path / "icecdc.yaml"
    config = {**pipeline.config_dict([{"name": "db.orders"}]), "batch": {"max_files": 1}, "engine": {"use": "in_process"}}
    path.write_text(yaml.safe_dump(config))
    pipeline.one_pass(
        pipeline.config({"name": "db.orders"}).model_copy(update={"batch": parse_config(config).batch}), "db.orders"
    )

    (status,) = json.loads(icecdc("status", "--config", str(path), "--json").stdout)
    assert status["export"] == {"files": 3, "applied": 1} and status["unfinished"] is None
    assert status["checkpoint"] is None and status["last_audit"] is None

    assert icecdc("sync", "--config", str(path)).returncode == 0
    assert icecdc("audit", "--config", str(path)).returncode == 0
    (status,) = json.loads(icecdc("status", "--config", str(path), "--json").stdout)
    assert status["export"] is None and status["pending_items"] == 0 and status["lag_snapshots"] == 0
    assert (
        status["last_audit"]["drifted"] is False and status["checkpoint"]["snapshot_id"] == table.current_snapshot().snapshot_id
    )

"""A newcomer's first hour on their own table: `icecdc init` writes a config, `check` verifies what
a first sync needs without writing anything, `sync --dry-run` shows the plan without writing
anything, then `sync`, `status` and `verify`, against a kept local server; `dev-server` is that
server. The config is found without --config ($ICECDC_CONFIG, ./icecdc.yaml)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from subprocess import PIPE
from typing import Any

import pytest
import yaml
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icecdc.config import load_config
from icecdc.devlimits import DEV_SERVER_LIMITS, DEV_SERVER_ROWS
from icecdc.errors import SinkError
from icecdc.model import EngineKind
from icecdc.sync import sync
from icecdc.testing.commits import update
from tests.support.cli import icecdc
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

MARKS = re.compile(r"^([✓✗!-]) ", re.MULTILINE)


@pytest.fixture
def local(tmp_path: Path, osmem_clone: Any) -> Pipeline:
    """The user's own catalog (pyiceberg, SQLite) and a kept local server (osmem)."""
    return Pipeline(tmp_path, osmem_clone.url, spark=None, engine=EngineKind.IN_PROCESS)


def environment(config: Path | None) -> dict[str, str]:
    """The command's environment: $ICECDC_CONFIG names `config` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "ICECDC_CONFIG"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return {**env, "ICECDC_CONFIG": str(config)} if config is not None else env


def init(local: Pipeline, *extra: str) -> subprocess.CompletedProcess[str]:
    """`icecdc init` for the user's orders table, writing ./icecdc.yaml in the test's directory."""
    uri = f"sqlite:///{local.workdir / 'catalog.db'}"
    args = ["init", "--catalog-uri", uri, "--table", "db.orders"]
    args += ["--opensearch", local.opensearch_url]
    args += extra
    return icecdc(*args, env=environment(None), cwd=local.workdir)


def written(local: Pipeline) -> dict[str, str]:
    """What the state and the server hold: the state's files by their digest, and the indexes."""
    state = sorted(local.workdir.glob("icecdc-state.db*"))
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in state}
    indexes = sorted(local.client.indices.get(index="*"))
    return {**files, "indexes": ",".join(indexes)}


def marks(run: subprocess.CompletedProcess[str]) -> list[str]:
    return MARKS.findall(run.stdout)


def test_a_newcomer_syncs_their_own_table_from_init_to_watch(local: Pipeline) -> None:
    table = orders(local)
    table.append(rows(1, 2, 3))

    made = init(local)
    assert made.returncode == 0, made.stderr
    config_file = local.workdir / "icecdc.yaml"
    config = load_config(config_file)  # the file init writes loads with icecdc's own parser
    assert config.table("db.orders").identifier_columns == ("id",)  # read from the table's schema
    assert "# " in config_file.read_text() and "identifier_columns: [id]" in config_file.read_text()

    # Every later command finds ./icecdc.yaml by itself: no --config, no $ICECDC_CONFIG.
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return icecdc(*args, env=environment(None), cwd=local.workdir)

    nothing = written(local)
    checked = run("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert set(marks(checked)) == {"✓"}, checked.stdout
    assert "ready to sync" in checked.stdout
    planned = run("sync", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert "pass 1: export: 1 work item, 1 file, 3 rows" in planned.stdout, planned.stdout
    assert "in_process engine" in planned.stdout
    assert written(local) == nothing == {"indexes": ""}  # no state file, no index

    synced = run("sync")
    assert synced.returncode == 0, synced.stderr
    local.assert_index_equals_table(config, "db.orders")

    synced_snapshots = len(table.refresh().snapshots())
    update(table, "id = 2", lambda r: {**r, "status": "paid"})
    table.append(rows(4))
    commits = len(table.refresh().snapshots()) - synced_snapshots
    before = written(local)
    planned = run("sync", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    shown = planned.stdout
    assert f"{commits} snapshots to apply, {commits} work items ({commits} to plan)" in shown, shown
    assert f"pass 1: {commits} snapshots of changes" in shown and "in_process engine" in shown
    assert written(local) == before  # the state's files unchanged, no other index
    assert run("sync").returncode == 0

    status = run("status")
    assert status.returncode == 0, status.stderr
    # nothing pending, no snapshot behind
    caught_up = re.compile(r"^db\.orders\s+\d+\s+\d+\s+0\s+0\s", re.MULTILINE)
    assert caught_up.search(status.stdout), status.stdout
    verified = run("verify")
    assert verified.returncode == 0, verified.stderr
    assert "index equals table" in verified.stdout
    local.assert_index_equals_table(config, "db.orders")

    # Then they leave it following the table, and stop it as a service manager would.
    command = [sys.executable, "-m", "icecdc.cli", "sync", "--watch", "--interval", "1s", "-q"]
    with subprocess.Popen(command, cwd=local.workdir, env=environment(None), stdout=PIPE, stderr=PIPE, text=True) as watch:
        table.append(rows(5))
        deadline = time.monotonic() + 60
        while "5" not in local.documents("orders") and time.monotonic() < deadline:
            assert watch.poll() is None, watch.communicate()
            time.sleep(0.5)
        watch.send_signal(signal.SIGTERM)
        _, err = watch.communicate(timeout=60)
    assert watch.returncode == 0 and "nothing is lost" in err, err
    local.assert_index_equals_table(config, "db.orders")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unreachable(local: Pipeline, config: dict[str, Any]) -> None:
    config["opensearch"] = {"url": f"http://127.0.0.1:{closed_port()}"}


def missing_table(local: Pipeline, config: dict[str, Any]) -> None:
    config["tables"].append({"name": "db.nope"})


def foreign_index(local: Pipeline, config: dict[str, Any]) -> None:
    local.client.index(index="orders", id="theirs", body={"owner": "someone else"}, refresh=True)


def corrupt_state(local: Pipeline, config: dict[str, Any]) -> None:
    Path(config["state"]["path"]).write_bytes(os.urandom(8192))


@pytest.mark.parametrize(
    ("fault", "failing", "fix"),
    [
        (unreachable, "✗ opensearch: OpenSearch at http://127.0.0.1:", "icecdc dev-server"),
        (missing_table, "✗ table (db.nope): table 'db.nope' does not exist", "tables[].name"),
        (foreign_index, "✗ index (orders): index 'orders' is not icecdc's", "index_takeover"),
        (corrupt_state, "✗ state: the state file {workdir}/icecdc-state.db is unreadable or corrupt: ", "move"),
    ],
    ids=["unreachable opensearch", "missing table", "index owned by someone else", "corrupt state"],
)
def test_check_names_each_failure_with_its_fix_and_writes_nothing(
    local: Pipeline,
    fault: Any,
    failing: str,
    fix: str,
) -> None:
    orders(local).append(rows(1, 2, 3))
    assert init(local).returncode == 0
    path = local.workdir / "icecdc.yaml"
    raw = yaml.safe_load(path.read_text())
    fault(local, raw)
    path.write_text(yaml.safe_dump(raw))
    before = written(local)

    run = icecdc("check", env=environment(path))  # found through $ICECDC_CONFIG
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and run.stderr == "", run.stderr
    lines = run.stdout.splitlines()
    failures = [n for n, line in enumerate(lines) if line.startswith("✗")]
    assert len(failures) == 1, run.stdout
    assert lines[failures[0]].startswith(failing.format(workdir=local.workdir)), run.stdout
    fixed = lines[failures[0] + 1]
    assert fixed.startswith("    fix: ") and fix in fixed, run.stdout
    assert "NOT ready to sync: " in lines[-1]
    assert written(local) == before  # no state file, no index created; the foreign index untouched
    if fault is foreign_index:
        assert local.documents("orders") == {"theirs": '{"owner":"someone else"}'}


def test_dry_run_of_a_synced_table_writes_nothing_and_names_the_engine(local: Pipeline) -> None:
    """A state file that exists is read, never written: its bytes are the same after a dry run,
    and the table gets no tag; a pass too large for the in-process limits would take Spark."""
    table = orders(local)
    table.append(rows(1, 2))
    assert init(local).returncode == 0
    path = local.workdir / "icecdc.yaml"
    assert icecdc("sync", "--config", str(path)).returncode == 0
    table.append(rows(*range(3, 13)))
    raw = yaml.safe_load(path.read_text())
    raw["engine"] = {"use": "auto", "in_process_max_rows": 5}  # the 10 new rows exceed it
    raw["tables"][0]["protect_checkpoint"] = True  # a sync would tag the table's snapshots
    path.write_text(yaml.safe_dump(raw))
    before = written(local)
    documents = local.documents("orders")

    planned = icecdc("sync", "--dry-run", "--config", str(path))
    assert planned.returncode == 0, planned.stderr
    assert "1 snapshot to apply" in planned.stdout and "10 rows" in planned.stdout, planned.stdout
    assert "→ spark engine" in planned.stdout, planned.stdout
    assert "nothing was written" in planned.stdout
    assert written(local) == before
    assert local.documents("orders") == documents
    assert set(table.refresh().metadata.refs) == {"main"}  # no tag


def test_init_refuses_to_overwrite_and_writes_a_placeholder_for_an_unread_catalog(
    tmp_path: Path,
) -> None:
    """A SQLite catalog that does not exist is not created: its identifier columns are a commented
    placeholder saying why; the file still loads. A second init is refused in one line."""
    uri = f"sqlite:///{tmp_path / 'typo.db'}"
    args = ["init", "--catalog-uri", uri, "--table", "db.orders", "--table", "db.Customers"]
    made = icecdc(*args, env=environment(None), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "icecdc.yaml").read_text()
    assert not (tmp_path / "typo.db").exists()
    missing = f"the catalog database {tmp_path / 'typo.db'} does not exist"
    assert f"# Not read from the table: {missing}." in text
    assert "    # identifier_columns: [<column>]" in text
    config = load_config(tmp_path / "icecdc.yaml")
    assert [t.index for t in config.tables] == ["orders", "customers"]
    assert config.opensearch.url == "http://127.0.0.1:9200"  # the dev server's

    again = icecdc(*args, env=environment(None), cwd=tmp_path)
    assert again.returncode == 2
    overwrite = "give --force to overwrite it, or another --config"
    refused = f"icecdc.yaml exists; nothing was written: {overwrite}"
    assert again.stderr == f"icecdc: error: {refused}\n"
    assert (tmp_path / "icecdc.yaml").read_text() == text
    assert icecdc(*args, "--force", env=environment(None), cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("variable", [False, True], ids=["./icecdc.yaml", "$ICECDC_CONFIG"])
def test_a_missing_default_config_is_one_line_naming_what_was_looked_for(
    tmp_path: Path,
    variable: bool,
) -> None:
    named = tmp_path / "elsewhere.yaml"
    run = icecdc("status", env=environment(named if variable else None), cwd=tmp_path)
    assert run.returncode == 2
    looked_for = "no --config, no $ICECDC_CONFIG, and ./icecdc.yaml"
    looked_for = f"$ICECDC_CONFIG names {named}" if variable else looked_for
    line = f"icecdc: error: no configuration file: {looked_for}, which does not exist; "
    assert run.stderr.startswith(line)
    assert len(run.stderr.splitlines()) == 1


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_dev_server_answers_http_until_stopped(stop: signal.Signals) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "icecdc.cli", "dev-server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(None),
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        said = [server.stdout.readline() for _ in range(3)]  # what to set, memory, limits
        url = re.search(r"at (http://127\.0\.0\.1:\d+)", first)
        assert url, first + (server.stderr.read() if server.stderr else "")
        with urllib.request.urlopen(url.group(1), timeout=10) as answer:
            assert answer.status == 200
            assert b'"distribution":"opensearch"' in answer.read()
        server.send_signal(stop)
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode in (0, 130), err
    assert "Traceback" not in err
    assert "dev server stopped" in out
    # what it is for, and what to run instead for a large table
    assert said[-1] == f"  {DEV_SERVER_LIMITS}\n" and "opensearchproject/opensearch" in said[-1]
    with pytest.raises(OSError):
        urllib.request.urlopen(url.group(1), timeout=5)


def test_init_names_a_column_the_table_has_as_the_identifier_placeholder(local: Pipeline) -> None:
    """Reproduced: `# identifier_columns: [id]` for a table with no `id` column. The placeholder
    names the table's likeliest identity column; for a table with none that can be one, says so."""
    local.catalog.create_table(
        "db.orders",
        schema=Schema(
            NestedField(1, "amount", DoubleType(), required=True),
            NestedField(2, "note", StringType(), required=False),
            NestedField(3, "order_id", LongType(), required=True),
        ),
    )
    local.catalog.create_table("db.scores", schema=Schema(NestedField(1, "score", DoubleType(), required=False)))
    made = init(local, "--table", "db.scores")
    assert made.returncode == 0, made.stderr
    text = (local.workdir / "icecdc.yaml").read_text()
    assert "    # identifier_columns: [order_id]" in text and "[id]" not in text
    assert "    # (none can be one: each is a float, double, struct, list or map)" in text
    assert [t.name for t in load_config(local.workdir / "icecdc.yaml").tables] == ["db.orders", "db.scores"]


def test_dev_server_help_says_what_size_it_is_for_and_what_to_run_instead() -> None:
    shown = icecdc("dev-server", "--help").stdout
    said = " ".join(shown.split())
    assert "tables of up to about 50,000 rows" in said and "documents/s" in said, shown
    assert "for a larger table run a real OpenSearch" in said, shown
    assert "opensearchproject/opensearch" in said.replace("- ", "-"), shown


def test_a_large_pass_into_the_dev_server_says_it_will_take_a_while(
    local: Pipeline, fault_proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Before its first write: the proxy refuses every bulk request, so the pass stops there."""
    table = orders(local)
    table.append(rows(*range(DEV_SERVER_ROWS + 1)))
    fault_proxy.fail_for(600, status=400, path_contains="_bulk")
    config = local.config({"name": "db.orders"})
    through = config.model_copy(update={"opensearch": config.opensearch.model_copy(update={"url": fault_proxy.url})})
    with caplog.at_level(logging.WARNING, logger="icecdc"), pytest.raises(SinkError):
        sync(through, None, ["db.orders"])
    (said,) = [r.getMessage() for r in caplog.records if "dev server" in r.getMessage()]
    expected = f"db.orders: this pass writes from {DEV_SERVER_ROWS + 1:,} rows to the dev server"
    assert said.startswith(expected) and DEV_SERVER_LIMITS in said, said


def test_a_small_pass_into_the_dev_server_says_nothing_of_its_limits(local: Pipeline, caplog: pytest.LogCaptureFixture) -> None:
    orders(local).append(rows(1, 2, 3))
    with caplog.at_level(logging.WARNING, logger="icecdc"):
        local.sync(local.config({"name": "db.orders"}), "db.orders")
    assert not [r for r in caplog.records if "dev server" in r.getMessage()]

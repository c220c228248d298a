"""Every failure a user can cause ends in one line on stderr and its documented exit code (0 done,
1 a difference found, 2 an error, 130 interrupted), with no traceback unless -v: OpenSearch
unreachable or denying a request, a corrupt state file, a missing optional dependency, Ctrl-C, a
reader that leaves the pipe. And the output options: -q/-v anywhere, expected 404s unlogged,
--version."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE
from typing import Any

import pytest
import yaml

from icecdc.deadletters import DeadLetter, DeadLetters
from icecdc.model import EngineKind
from tests.support.cli import icecdc
from tests.support.faults import FaultProxy
from tests.support.filesystems import Refusal, state_filesystem
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

PROGRESS = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ INFO ")  # a log record of a command's progress

# A config for commands that fail before they read a table.
CONFIG = "catalog: {name: lake}\nstate: {path: x.db}\nopensearch: {url: http://x}\n"
TABLES = "tables: [{name: db.t}]\n"

# Each command as a user runs it on the test's table.
COMMANDS = {
    "sync": ["sync"],
    "status": ["status"],
    "verify": ["verify"],
    "audit": ["audit"],
    "repair": ["repair", "--table", "db.orders", "--rebuild"],
    "replay": ["dead-letters", "replay"],
}


@pytest.fixture
def local(tmp_path: Path, fault_proxy: FaultProxy) -> Pipeline:
    """A pipeline on the in-process engine, its OpenSearch behind the test's fault proxy."""
    return Pipeline(tmp_path, fault_proxy.url, spark=None, engine=EngineKind.IN_PROCESS)


def write_config(pipeline: Pipeline, **changes: Any) -> Path:
    """The orders table's config, with dead letters, and `changes` to its sections, as a file."""
    raw = pipeline.config_dict([{"name": "db.orders"}])
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    raw.update(changes)
    path = pipeline.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def synced(pipeline: Pipeline) -> Path:
    """The orders table with three rows, synced by `icecdc sync`; its config file."""
    orders(pipeline).append(rows(1, 2, 3))
    config = write_config(pipeline)
    first = icecdc("sync", "--config", str(config))
    assert first.returncode == 0, first.stderr
    return config


def one_line(run: subprocess.CompletedProcess[str]) -> str:
    """The run's stderr but its progress (INFO records), asserted one line without a traceback."""
    assert "Traceback" not in run.stderr, run.stderr
    lines = [line for line in run.stderr.strip().splitlines() if not PROGRESS.match(line)]
    assert len(lines) == 1, run.stderr
    return lines[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("command", COMMANDS)
def test_unreachable_opensearch_is_one_line_and_exit_2(local: Pipeline, command: str) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    synced(local)
    config = write_config(local, opensearch={"url": url})
    run = icecdc(*COMMANDS[command], "--config", str(config))
    assert run.returncode == 2, run.stderr
    assert one_line(run).startswith(f"icecdc: error: OpenSearch at {url} is unreachable: ")
    traced = icecdc(*COMMANDS[command], "--config", str(config), "-v")  # -v: the traceback too
    assert traced.returncode == 2 and "Traceback" in traced.stderr, traced.stderr
    assert traced.stderr.strip().splitlines()[-1] == run.stderr.strip()


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_status_with_opensearch_down_prints_what_it_knows_first(local: Pipeline, as_json: bool) -> None:
    """The state's checkpoint and the table's lag are known without OpenSearch: printed, then the error."""
    url = f"http://127.0.0.1:{closed_port()}"
    synced(local)
    table = local.catalog.load_table("db.orders")
    synced_to = table.current_snapshot().snapshot_id
    table.append(rows(4))
    config = write_config(local, opensearch={"url": url})
    run = icecdc("status", "--config", str(config), *(["--json"] if as_json else []))
    assert run.returncode == 2, run.stderr
    assert one_line(run).startswith(f"icecdc: error: OpenSearch at {url} is unreachable: ")
    if as_json:
        (status,) = json.loads(run.stdout)
        assert status["checkpoint"]["snapshot_id"] == synced_to and status["lag_snapshots"] == 1, status
        return
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("db.orders")]
    assert line.split()[1:6] == [str(synced_to), str(table.current_snapshot().snapshot_id), "0", "1", line.split()[5]]
    assert "OpenSearch is out of reach" in run.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_a_corrupt_state_file_is_named_in_one_line(local: Pipeline, command: str) -> None:
    config = synced(local)
    state = local.workdir / "state.db"
    # SQLite's WAL files go too: the state is the file alone
    for leftover in local.workdir.glob("state.db-*"):
        leftover.unlink()
    state.write_bytes(os.urandom(8192))
    run = icecdc(*COMMANDS[command], "--config", str(config))
    if command == "verify":  # compares the index with the table: it reads no state
        assert run.returncode == 0, run.stderr
        return
    assert run.returncode == 2, run.stderr
    named = f"icecdc: error: the state file {state} is unreadable or corrupt: file is not a database"
    assert one_line(run).startswith(named)


@pytest.mark.parametrize("how", list(Refusal))
@pytest.mark.parametrize("exists", [True, False], ids=["intact state", "no state yet"])
def test_a_read_only_or_full_filesystem_under_the_state(local: Pipeline, how: Refusal, exists: bool) -> None:
    """`check` fails on it; sync and status say the state cannot be written and to keep the file,
    never to move it aside; it is not changed; once the filesystem recovers, the sync goes on."""
    orders(local).append(rows(1, 2, 3))
    with state_filesystem(local.workdir / "state", how) as filesystem:
        state = filesystem.path / "state.db"
        config = write_config(local, state={"path": str(state)})
        if exists:
            assert icecdc("sync", "--config", str(config)).returncode == 0
        before = state.read_bytes() if exists else None
        filesystem.refuse(how)

        checked = icecdc("check", "--config", str(config))
        assert checked.returncode == 2, checked.stdout
        (line,) = [line for line in checked.stdout.splitlines() if line.startswith("✗")]
        cause = "cannot be written, or its disk is full" if exists else "cannot be created"
        assert line.startswith(f"✗ state: the state file {state} {cause}: "), checked.stdout
        for command in (["sync"], ["status"]):
            run = icecdc(*command, "--config", str(config))
            assert run.returncode == 2, run.stderr
            said = one_line(run)
            assert said.startswith(f"icecdc: error: the state file {state} {cause}: "), said
            assert "fix the permission or free space" in said, said
        for text in [checked.stdout, run.stderr]:
            assert "move it aside" not in text and "exports again" not in text, text
        assert ("keep the file" in checked.stdout) == exists, checked.stdout
        filesystem.recover()
        assert (state.read_bytes() if exists else None) == before  # SQLite's -wal, -shm aside
        synced = icecdc("sync", "--config", str(config))
        assert synced.returncode == 0, synced.stderr
        assert icecdc("check", "--config", str(config)).returncode == 0


def test_an_answer_without_the_key_icecdc_reads_names_the_request(local: Pipeline, fault_proxy: FaultProxy) -> None:
    """A 200 answer of another shape (an error's body) to the bulk request: one line naming it, exit 2."""
    config = synced(local)
    local.catalog.load_table("db.orders").append(rows(4))
    fault_proxy.fail_next(1, status=200, path_contains="_bulk")
    run = icecdc("sync", "--config", str(config))
    assert run.returncode == 2, run.stderr
    assert "OpenSearch answered POST /_bulk" in one_line(run) and "without items" in run.stderr, run.stderr
    assert icecdc("sync", "--config", str(config)).returncode == 0  # nothing advanced: the next sync applies it
    local.assert_index_equals_table(local.config({"name": "db.orders"}), "db.orders")


def test_a_bug_is_exit_3_in_one_line_asking_for_a_report(local: Pipeline) -> None:
    """An error icecdc did not expect (here a work item of a shape no version wrote) is neither 1 nor 2."""
    config = synced(local)
    with sqlite3.connect(local.workdir / "state.db") as db:
        db.execute("INSERT INTO work_items VALUES ('x', 'db.orders', 'pending', 99, '{}')")
    run = icecdc("status", "--config", str(config))
    assert run.returncode == 3, run.stderr
    line = one_line(run)
    assert line.startswith("icecdc: internal error: KeyError: ") and "please report it" in line, line
    assert "-v" in line
    traced = icecdc("status", "--config", str(config), "-v")
    assert traced.returncode == 3 and "Traceback" in traced.stderr, traced.stderr
    assert "with the traceback above" in traced.stderr.strip().splitlines()[-1]


def test_a_403_on_index_creation_is_one_line(local: Pipeline, fault_proxy: FaultProxy) -> None:
    """Creating an index is denied (403), on a first sync and on a rebuild: authorization, not the
    credentials; one line, exit 2, no checkpoint."""
    orders(local).append(rows(1, 2, 3))
    config = write_config(local)
    fault_proxy.fail_next(100, status=403, path_contains="/orders", method="PUT")
    first = icecdc("sync", "--config", str(config))
    assert first.returncode == 2, first.stderr
    line = one_line(first)
    denied = f"icecdc: error: OpenSearch at {fault_proxy.url} denied a request (403: injected 403"
    assert line.startswith(denied), line
    assert "credentials are accepted" in line and "lack a permission" in line, line
    assert "refused the credentials" not in line
    assert local.store().get_checkpoint("db.orders") is None

    fault_proxy.clear()
    assert icecdc("sync", "--config", str(config)).returncode == 0
    fault_proxy.fail_next(100, status=403, path_contains="/orders", method="PUT")
    rebuilt = icecdc(*COMMANDS["repair"], "--config", str(config))
    # (before it, planning's warning that the rebuild, as asked, resets the table's state)
    assert rebuilt.returncode == 2 and "Traceback" not in rebuilt.stderr, rebuilt.stderr
    assert "denied a request (403" in rebuilt.stderr.strip().splitlines()[-1]


def test_a_missing_optional_dependency_names_its_extra(tmp_path: Path) -> None:
    """`doctor` without botocore (the `aws` extra), blocked as Python blocks an import: None in
    sys.modules."""
    config = tmp_path / "icecdc.yaml"
    config.write_text(CONFIG + TABLES)
    code = "import sys; sys.modules['botocore'] = None; from icecdc.cli import entry; entry()"
    run = subprocess.run(
        [sys.executable, "-c", code, "doctor", "before", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert run.returncode == 2, run.stderr
    needs = "icecdc: error: `icecdc doctor` needs botocore, which is not installed: "
    assert one_line(run) == needs + "pip install 'icecdc[aws]'"


# Spark in a subprocess: no `spark` fixture, so the markers are set here.
SPARK = pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.slow])


@pytest.mark.parametrize("engine", ["in_process", SPARK])
def test_ctrl_c_is_130_resumed(local: Pipeline, fault_proxy: FaultProxy, engine: str) -> None:
    """SIGINT while a sync's bulk request is in flight: 130, one line saying nothing is lost; the
    next sync leaves the index equal to the table. On Spark, PySpark's SIGINT handler cancels its
    jobs, which raises a Py4JError where the in-process engine raises KeyboardInterrupt."""
    orders(local).append(rows(*range(1, 51)))
    config = write_config(local, engine={"use": engine})
    fault_proxy.delay_next(1, 20, path_contains="_bulk")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "icecdc.cli", "-q", "sync", "--config", str(config)]
    with subprocess.Popen(command, stdout=PIPE, stderr=PIPE, text=True, env=env) as sync:
        assert fault_proxy.wait_for(1, "_bulk", timeout=120, stop=lambda: sync.poll() is not None)
        sync.send_signal(signal.SIGINT)
        out, err = sync.communicate(timeout=60)
    run = subprocess.CompletedProcess(command, sync.returncode, out, err)
    assert run.returncode == 130, err
    said = "icecdc: interrupted: nothing is lost, the next sync resumes where this one stopped"
    if engine == "spark":
        # Spark's JVM writes its own lines to stderr (its start, the task killed), and under load
        # some after ours as it dies (its Python worker's crash): our line, with no traceback before
        lines = err.strip().splitlines()
        assert said in lines and not any("Traceback" in line for line in lines[: lines.index(said)]), err
    else:
        assert one_line(run) == said

    resumed = icecdc("sync", "--config", str(config))
    assert resumed.returncode == 0, resumed.stderr
    local.assert_index_equals_table(local.config({"name": "db.orders"}), "db.orders")


@pytest.mark.parametrize("letters", [1, 300])
def test_a_reader_leaving_the_pipe_is_no_error(tmp_path: Path, letters: int) -> None:
    """`icecdc dead-letters list | head`: the reader gone before (1 letter: at the exit's flush) or
    while (300 letters: in a print) the list is written; exit 0, nothing on stderr."""
    location = tmp_path / "dead-letters"
    document = '{"id": 1}'
    refused = [DeadLetter("db.t", 1, 1, str(i), 400, f"no: {i}", document) for i in range(letters)]
    DeadLetters(str(location)).write(refused)
    config = tmp_path / "icecdc.yaml"
    config.write_text(f"{CONFIG}dead_letter: {{path: {location}}}\n{TABLES}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "icecdc.cli", "dead-letters", "list", "--config", str(config)]
    with subprocess.Popen(command, stdout=PIPE, stderr=PIPE, text=True, env=env) as listing:
        assert listing.stdout is not None and listing.stderr is not None
        listing.stdout.close()  # `head` that read nothing, or all it wanted
        err = listing.stderr.read()
        listing.wait(timeout=60)
    assert (listing.returncode, err) == (0, "")


def test_quiet_404s_retries_and_q_v_anywhere(local: Pipeline, fault_proxy: FaultProxy) -> None:
    """A first sync's alias lookups answered 404, and a bulk request the client retries after a
    503, are not logged; -q keeps only warnings, before or after the subcommand; -v logs the
    requests, before or after it."""
    orders(local).append(rows(1, 2, 3))
    config = str(write_config(local))
    fault_proxy.fail_next(1, status=503, path_contains="_bulk")
    first = icecdc("sync", "--config", config)
    assert first.returncode == 0, first.stderr
    assert fault_proxy.seen("_bulk")[0].outcome == "failed 503"  # and retried
    # opensearch-py logs a request as "GET <url> [status:404 request:0.002s]"; a snapshot id may
    # hold the digits 404 anywhere else
    assert "[status:" not in first.stderr and " opensearch:" not in first.stderr, first.stderr
    assert "WARNING" not in first.stderr, first.stderr
    assert "INFO icecdc" in first.stderr  # the default: icecdc's own progress

    local.catalog.load_table("db.orders").append(rows(4))
    for quiet in (["-q", "sync", "--config", config], ["sync", "--config", config, "-q"]):
        run = icecdc(*quiet)
        assert (run.returncode, run.stderr) == (0, ""), quiet
    for verbose in (
        ["-v", "status", "--config", config],
        ["status", "--config", config, "--verbose"],
    ):
        run = icecdc(*verbose)
        assert run.returncode == 0, run.stderr
        assert "DEBUG" in run.stderr and "opensearch: GET" in run.stderr, verbose


def test_version_is_the_package_metadata() -> None:
    from importlib.metadata import version

    run = icecdc("--version")
    assert (run.returncode, run.stdout.strip()) == (0, f"icecdc {version('icecdc')}")


def test_opensearch_gone_during_the_writes_is_said_unreachable_not_answering_0(local: Pipeline, fault_proxy: FaultProxy) -> None:
    """OpenSearch answered the checks, then went away: no status is "0", and one document or
    one retry is said in the singular."""
    config = synced(local)
    local.catalog.load_table("db.orders").append(rows(4))
    fault_proxy.drop_connection_after(0, path_contains="_bulk", forward=False)
    raw = yaml.safe_load(config.read_text())
    raw["opensearch"].update(max_retries=1, initial_backoff_seconds=0.01)
    config.write_text(yaml.safe_dump(raw))
    run = icecdc("sync", "--config", str(config))
    assert run.returncode == 2, run.stderr
    said = one_line(run)
    assert "OpenSearch was unreachable for 1 document of index 'orders' after 1 retry: " in said
    assert "answering 0" not in said


def test_an_empty_dead_letter_list_says_there_are_none(local: Pipeline) -> None:
    config = synced(local)
    listed = icecdc("dead-letters", "list", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    location = local.workdir / "dead-letters"
    assert listed.stdout == f"no open dead letters for db.orders in {location}\n"
    since = icecdc("dead-letters", "list", "--config", str(config), "--all", "--since", "1h")
    assert since.stdout == f"no dead letters match the selection for db.orders in {location}\n"

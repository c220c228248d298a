"""`icecdc sync --watch`: rounds that follow the table's commits until SIGTERM (exit 0) or SIGINT
(130) stops them, each with one line saying the next run resumes; a round's error in one line,
then the next round; the lag in `icecdc status`."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import PIPE
from typing import Any

import pytest
import yaml

from icecdc.model import EngineKind
from icecdc.watch import parse_interval
from tests.support.cli import icecdc
from tests.support.faults import FaultProxy
from tests.support.pipeline import Pipeline
from tests.support.streams import Lines
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"
RESUMES = "nothing is lost, the next sync resumes where this one stopped"


@pytest.fixture
def proxy(fault_proxy: FaultProxy) -> FaultProxy:
    return fault_proxy


@pytest.fixture
def local(tmp_path: Path, fault_proxy: FaultProxy) -> Pipeline:
    """A pipeline on the in-process engine, its OpenSearch behind the test's fault proxy."""
    return Pipeline(tmp_path, fault_proxy.url, spark=None, engine=EngineKind.IN_PROCESS)


def write_config(pipeline: Pipeline) -> Path:
    path = pipeline.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(pipeline.config_dict([{"name": NAME}])))
    return path


@contextmanager
def watching(config: Path, *options: str) -> Iterator[subprocess.Popen[str]]:
    """`icecdc sync --watch --interval 1s` for the block; killed if the block left it running."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [
        sys.executable,
        "-m",
        "icecdc.cli",
        "sync",
        "--watch",
        "--interval",
        "1s",
        "--config",
        str(config),
        *options,
    ]
    with subprocess.Popen(command, stdout=PIPE, stderr=PIPE, text=True, env=env) as watch:
        try:
            yield watch
        finally:
            if watch.poll() is None:
                watch.kill()


def caught_up(pipeline: Pipeline, watch: subprocess.Popen[str], seconds: float = 60) -> None:
    """Wait until the index equals the table (the watch's rounds apply each commit)."""
    config = pipeline.config({"name": NAME})
    deadline = time.monotonic() + seconds
    while True:
        assert watch.poll() is None, watch.communicate()
        try:
            pipeline.assert_index_equals_table(config, NAME)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def leases(pipeline: Pipeline) -> list[tuple[str, str, float]]:
    with sqlite3.connect(pipeline.workdir / "state.db") as db:
        return db.execute("SELECT * FROM leases").fetchall()


def test_intervals_read_as_seconds() -> None:
    assert [parse_interval(t) for t in ("30s", "2m", "45", "0.5", "1h")] == [30, 120, 45, 0.5, 3600]
    for bad in ("3x", "-1", "0", "", "m"):
        with pytest.raises(ValueError, match="not a positive duration"):
            parse_interval(bad)


def test_a_bad_interval_is_one_line_and_exit_2(local: Pipeline) -> None:
    run = icecdc("sync", "--watch", "--interval", "3x", "--config", str(write_config(local)))
    assert run.returncode == 2
    assert "interval '3x' is not a positive duration such as 30s, 2m or 45 (seconds)" in run.stderr
    alone = icecdc("sync", "--interval", "3s", "--config", str(write_config(local)))
    assert alone.returncode == 2 and "add --watch" in alone.stderr


def test_the_watch_follows_commits_and_stops_on_sigterm_with_nothing_lost(local: Pipeline) -> None:
    """Commits made while the watch runs reach the index within a few rounds; SIGTERM: exit 0, one
    line, leases released; a plain sync after it has nothing to do, and `status` shows no lag."""
    table = orders(local)
    table.append(rows(1, 2, 3))
    config = write_config(local)
    with watching(config, "-q") as watch:
        caught_up(local, watch)  # the first round's export
        table.append(rows(4, 5))
        table.delete("id = 2")
        caught_up(local, watch)
        table.append(rows(6))
        caught_up(local, watch)
        watch.send_signal(signal.SIGTERM)
        out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    assert err.strip().splitlines() == [f"icecdc: stopped by SIGTERM: {RESUMES}"]
    assert "db.orders: 1 snapshot (" in out  # each round that applied something says so
    assert leases(local) == []  # released as the watch left its rounds

    after = icecdc("sync", "--config", str(config), "--json")
    assert after.returncode == 0, after.stderr
    (result,) = json.loads(after.stdout)["tables"]
    assert result["snapshots"] == 0 and result["indexed"] == 0  # nothing left to do
    local.assert_index_equals_table(local.config({"name": NAME}), NAME)

    (status,) = json.loads(icecdc("status", "--config", str(config), "--json").stdout)
    assert status["lag_snapshots"] == 0 and status["pending_items"] == 0
    assert 0 <= status["seconds_since_checkpoint"] < 120 and status["checkpointed_at"].endswith("Z")


def test_sigint_stops_the_watch_with_130(local: Pipeline) -> None:
    orders(local).append(rows(1, 2))
    with watching(write_config(local), "-q") as watch:
        caught_up(local, watch)
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=60)
    assert watch.returncode == 130
    assert err.strip().splitlines() == [f"icecdc: interrupted: {RESUMES}"]


def test_a_failed_round_is_one_line_and_the_next_round_goes_on(
    local: Pipeline, fault_proxy: FaultProxy, osmem_clone: Any
) -> None:
    """OpenSearch refuses every request for a while: each round in that time fails in one line,
    and a later round applies what was committed meanwhile."""
    direct = Pipeline(local.workdir, osmem_clone.url, None, EngineKind.IN_PROCESS)  # not refused
    table = orders(local)
    table.append(rows(1))
    with watching(write_config(local), "-q", "--json") as watch:
        caught_up(direct, watch)
        fault_proxy.fail_for(3, status=403)
        table.append(rows(2, 3))
        time.sleep(3)
        caught_up(direct, watch)
        watch.send_signal(signal.SIGTERM)
        out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    failed = [line for line in err.splitlines() if line.startswith("icecdc: round ")]
    assert failed and "Traceback" not in err, err
    assert ", the next round retries: " in failed[0] and "403" in failed[0], err
    assert "refused the credentials" not in failed[0]  # a 403: accepted, lacking a permission
    rounds = [json.loads(line) for line in out.splitlines()]  # a JSON document a round, a line each
    assert rounds and all(r["tables"][0]["table"] == NAME for r in rounds), out
    assert all(r["started_at"].endswith("Z") for r in rounds)


def test_a_round_stopped_while_its_pass_writes_still_reports_the_pass(local: Pipeline, proxy: FaultProxy) -> None:
    """SIGTERM while a pass's bulk request hangs: the pass finishes and its round's JSON line says
    what it applied, though no pass follows it (it was lost when the stop ended the round)."""
    orders(local).append(rows(*range(1, 51)))
    config = write_config(local)
    proxy.delay_next(1, 2, path_contains="_bulk")
    with watching(config, "-q", "--json") as watch:
        assert proxy.wait_for(1, "_bulk", timeout=120, stop=lambda: watch.poll() is not None)
        watch.send_signal(signal.SIGTERM)
        out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    assert err.strip().splitlines() == [f"icecdc: stopped by SIGTERM: {RESUMES}"]
    (last,) = [json.loads(line) for line in out.splitlines()]
    (result,) = last["tables"]
    assert result["snapshots"] == 1 and result["indexed"] == 50, last
    assert result["unfinished"]  # stopped before it planned again: not known caught up
    local.assert_index_equals_table(local.config({"name": NAME}), NAME)


def test_a_second_sigterm_abandons_the_pass(local: Pipeline, proxy: FaultProxy) -> None:
    """SIGTERM twice while a pass's bulk request hangs: the pass is abandoned as a crash would
    leave it, but its leases are released; a plain sync then leaves the index equal to the table."""
    orders(local).append(rows(*range(1, 51)))
    config = write_config(local)
    proxy.delay_next(1, 20, path_contains="_bulk")
    with watching(config) as watch:
        err_lines = Lines(watch.stderr)
        assert proxy.wait_for(1, "_bulk", timeout=120, stop=lambda: watch.poll() is not None)
        watch.send_signal(signal.SIGTERM)
        # the second signal only once the first was handled: two signals close together are one
        assert err_lines.awaited("stopping after the pass under way", seconds=30), err_lines.lines
        watch.send_signal(signal.SIGTERM)
        started = time.monotonic()
        watch.wait(timeout=60)
    err = err_lines.text()
    assert watch.returncode == 0, err
    assert err.strip().splitlines()[-1] == f"icecdc: stopped by SIGTERM: {RESUMES}", err
    assert "Traceback" not in err
    assert time.monotonic() - started < 10  # not after the bulk request's 20 s
    assert leases(local) == []

    resumed = icecdc("sync", "--config", str(config))
    assert resumed.returncode == 0, resumed.stderr
    local.assert_index_equals_table(local.config({"name": NAME}), NAME)

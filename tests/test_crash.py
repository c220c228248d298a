"""kill -9 at random points of `icecdc sync`, with commits in between; the next run converges.

Each run is the real command (`python -m icecdc.cli sync --config FILE`) in a session of its own,
against a real pyiceberg table and osmem behind the test proxy, killed with SIGKILL — the process,
its Spark JVM and pyspark's worker daemon — at a point drawn from a seeded random generator. The
points cover the whole run: interpreter and Spark start, planning (a kill as the first of many
work items is written), reading, writing (a kill as a bulk request reaches the server), and
between the last write and the checkpoint (held there by a lock on the state database, so the
window is not left to luck). Commits land between some kills.
A final run must then bring the index to the table's state with the checkpoint at the current
snapshot.

The schedule runs on both destinations: the domain (icecdc → proxy → osmem) and a Serverless
collection (icecdc → the stand-in → proxy → osmem: the proxy counts the bulk requests that reached
the server, the runs carry the stand-in's credentials, writes are fenced by the lease and searches
lag). ICECDC_DESTINATION=domain|serverless runs one (tests/support/destinations.py).

ICECDC_CRASH_SEED picks another schedule; a failure message quotes the seed, the destination and
every kill.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyiceberg.expressions import In
from pyiceberg.table import Table

import icecdc
from icecdc.destination.index import IndexAlias
from icecdc.model import Checkpoint
from icecdc.state import SqliteStateStore
from icecdc.testing.commits import compact, update
from icecdc.verify import diff_index
from tests.support.destinations import Destination, forced
from tests.support.faults import FaultProxy
from tests.support.pipeline import SEARCH_DELAY, SERVERLESS, Pipeline
from tests.support.serverless import CREDENTIALS, ServerlessStandIn
from tests.support.streams import Lines
from tests.support.tables import orders, rows

SEED = int(os.environ.get("ICECDC_CRASH_SEED", "5"))
DESTINATIONS = [forced()] if forced() else list(Destination)  # the same schedule on each
REGIONS = ("us", "eu", "apac")
# Every kill kind appears once or twice; an `anytime` kill is spread by time over a whole run.
KILLS = ["starting", "anytime", "planning", "reading", "writing", "writing", "before-checkpoint"]
# Small commits before a `planning` kill: one work item each, so that the loop writing them lasts
# long enough (tens of milliseconds) for a kill to land inside it.
PLANNING_SNAPSHOTS = 40
RUN_TIMEOUT = 120.0  # seconds a run may take before the test calls it hung
LEASE_SECONDS = 4
# On Serverless the lease fences the writes: none leaves unless the lease outlives 1.75 x
# landing_seconds (1 s), and the `before-checkpoint` lock on the state database also holds back
# the lease's renewals (a failed renewal stops the run); this long a lease lets the round's writes
# finish under the lock, taken at its first bulk request (at least 12 - 4 - 1.75 s after it), on a
# machine not too busy: on CI's, once, the fence stopped them first (FENCED, a round that counts).
# Each run after a kill waits out the dead run's lease.
SERVERLESS_LEASE_SECONDS = 12
# What the lease logs as it stops a run (its renewal failed, or it ran out), and the phases of a
# `before-checkpoint` round: its writes done under the lock, or stopped by the fence first.
STOPS = "; this run stops"
BETWEEN = "between writes and checkpoint"
FENCED = "fenced: the lock held back the lease's renewals"
CHUNK = 10  # documents per bulk request: a batch is several requests, so a kill lands between them

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds a run's processes in /proc (Linux)")


@dataclass
class Kill:
    """What one round did, for the failure message."""

    kind: str
    commits: list[str] = field(default_factory=list)
    phase: str = ""  # where the run was when it died, from what it logged and sent
    seconds: float = 0.0
    outcome: str = ""

    def __str__(self) -> str:
        return f"{self.kind:<18} after {self.seconds:5.1f}s in {self.phase or '?':<32} {self.outcome}; commits before: {self.commits}"


class SyncRun:
    """`icecdc sync` as a subprocess in a new session, its stderr read as it comes."""

    def __init__(self, config_path: Path, log_path: Path, extra_env: dict[str, str]) -> None:
        env = {**os.environ, **extra_env}  # Spark's workers inherit it from the run's JVM
        # The run and its Spark workers import this checkout's icecdc, whichever way it is installed.
        source_root = str(Path(icecdc.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (source_root, env.get("PYTHONPATH")) if p)
        self.log = log_path.open("w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "icecdc.cli", "sync", "--config", str(config_path)],
            stdout=self.log,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # one session holds the run, its JVM and pyspark's daemon: killed as one
        )
        self.applying_at: float | None = None  # seconds into the run when processing began
        self.stderr = Lines(self.proc.stderr, on_line=self._logged)
        self.lines = self.stderr.lines

    def _logged(self, line: str) -> None:
        self.log.write(line)
        if self.applying_at is None and "applying" in line:
            self.applying_at = time.monotonic() - self.started

    def running(self) -> bool:
        return self.proc.poll() is None

    def saw(self, text: str) -> bool:
        return self.stderr.saw(text)

    def wait_until(self, ready: Callable[[], bool], timeout: float = RUN_TIMEOUT, every: float = 0.02) -> bool:
        """Poll `ready()` every `every` seconds; False when the run ended first."""
        deadline = time.monotonic() + timeout
        while self.running():
            if ready():
                return True
            assert time.monotonic() < deadline, f"run hung; stderr tail: {self.lines[-5:]}"
            time.sleep(every)
        return False

    def wait_until_time(self, at: float) -> bool:
        return self.wait_until(partial(_past, at))

    def wait_until_logged(self, text: str) -> bool:
        return self.wait_until(partial(self.saw, text))

    def kill(self) -> None:
        """SIGKILL every process of the run's session; assert none is left."""
        os.killpg(self.proc.pid, signal.SIGKILL)  # the CLI and its JVM: at once
        self.proc.wait(timeout=30)
        # pyspark's worker daemon puts itself and its workers in a process group of their own (same
        # session); left alone it would notice the JVM is gone within a second, but a worker could
        # still send a bulk request meanwhile: a writer outliving its run, which this test must not add.
        deadline = time.monotonic() + 10
        while left := session_processes(self.proc.pid):
            assert time.monotonic() < deadline, f"processes of the killed run survive: {left}"
            for _, group in left:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
            time.sleep(0.05)
        self.close()

    def finish(self) -> int:
        try:
            return self.proc.wait(timeout=RUN_TIMEOUT)
        finally:
            # pyspark's daemon exits on its own within a second or so of its JVM; give it that long
            deadline = time.monotonic() + 10
            while left := session_processes(self.proc.pid):
                assert time.monotonic() < deadline, f"a finished run left processes behind: {left}"
                time.sleep(0.1)
            self.close()

    def close(self) -> None:
        self.stderr.join(10)
        self.log.close()


def session_processes(session: int) -> list[tuple[int, int]]:
    """(pid, process group) of every live process in the session; zombies count as gone."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # the command name may hold spaces and parentheses: the fields start after the last ')'
        state, _ppid, group, sid = stat.rsplit(")", 1)[1].split()[:4]
        if int(sid) == session and state not in ("Z", "X"):
            found.append((int(entry.name), int(group)))
    return found


@dataclass
class Endpoint:
    """Where the runs write (`url`), where the checks read (`check_url`), and the runs' env."""

    url: str
    check_url: str
    opensearch: dict[str, Any] = field(default_factory=dict)  # more of the config's section
    env: dict[str, str] = field(default_factory=dict)
    lease_seconds: float = LEASE_SECONDS
    # The lock that holds back the checkpoint also holds back the lease's renewals: on Serverless,
    # where they fence the writes, it is taken at the run's first bulk request, not before its reads
    lock_at_first_write: bool = False
    kind: Destination = Destination.SERVERLESS  # after the fields above: a domain says so


@pytest.fixture(params=DESTINATIONS, ids=str)
def endpoint(
    request: pytest.FixtureRequest, osmem_server: Any, osmem_clone: Any, fault_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Endpoint]:
    """The destination in front of the proxy: the domain, or the Serverless stand-in."""
    if request.param == Destination.DOMAIN:
        yield Endpoint(fault_proxy.url, osmem_clone.url, kind=Destination.DOMAIN)
        return
    for name, value in CREDENTIALS.items():  # this process's checks sign as the runs do
        monkeypatch.setenv(name, value)
    searcher = osmem_server.clone()
    try:
        with ServerlessStandIn(fault_proxy.url, searcher.url, search_delay=SEARCH_DELAY) as standin:
            yield Endpoint(standin.url, standin.url, SERVERLESS, CREDENTIALS, SERVERLESS_LEASE_SECONDS, True)
            assert standin.refused() == {}, f"seed {SEED}: the stand-in refused {standin.refused()}"
    finally:
        searcher.close()


def checkpoint_of(pipeline: Pipeline) -> Checkpoint | None:
    store = pipeline.store()
    try:
        return store.get_checkpoint("db.orders")
    finally:
        store.close()


def _past(at: float) -> bool:
    return time.monotonic() > at


class FirstItemPlanned:
    """True once the run has written a work item; polled every few milliseconds, so it looks at the
    SQLite write-ahead log's size and time first (a stat) and reads the items only after a write."""

    def __init__(self, store: SqliteStateStore, database: Path) -> None:
        self.store = store
        self.wal = database.with_name(database.name + "-wal")
        self.before = len(store.pending_items("db.orders"))
        self.last: tuple[int, int] | None = self._stat()

    def _stat(self) -> tuple[int, int] | None:
        try:
            stat = self.wal.stat()
        except FileNotFoundError:
            return None
        return stat.st_size, stat.st_mtime_ns

    def __call__(self) -> bool:
        now = self._stat()
        if now == self.last:
            return False
        self.last = now
        return len(self.store.pending_items("db.orders")) > self.before


def requests_reached(proxy: FaultProxy, path: str, n: int) -> bool:
    return proxy.count(path) >= n


def index_equals(table: Table, pipeline: Pipeline) -> bool:
    """The index, or the generation a rebuild writes (a first export after a dead one whose writes
    no checkpoint accounts for builds one), equals the table."""
    indexes = ["orders", *IndexAlias(pipeline.client, "orders").leftovers()]
    return any(not diff_index(table, ("id",), pipeline.client, index) for index in indexes)


def live_ids(table: Table) -> list[int]:
    return sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def commit_randomly(table: Table, rng: random.Random, next_id: int) -> tuple[str, int]:
    """One commit of a kind icecdc follows; (what it was, the next unused id)."""
    ids = live_ids(table)
    kind = rng.choice(["append", "append", "update", "move", "delete", "compact"]) if ids else "append"
    if kind == "append":
        n = rng.randint(10, 40)
        table.append(rows(*range(next_id, next_id + n), region=rng.choice(REGIONS)))
        return f"append {n}", next_id + n
    if kind == "update":
        chosen = rng.sample(ids, min(len(ids), rng.randint(5, 25)))
        status = f"s{rng.randint(0, 999)}"
        update(table, In("id", chosen), lambda r: {**r, "status": status})
        return f"update {len(chosen)}", next_id
    if kind == "move":  # a partition-column change: the row's file moves to another partition
        chosen = rng.sample(ids, min(len(ids), rng.randint(1, 5)))
        region = rng.choice(REGIONS)
        update(table, In("id", chosen), lambda r: {**r, "region": region})
        return f"move {len(chosen)} to {region}", next_id
    if kind == "delete":
        chosen = rng.sample(ids, min(len(ids), rng.randint(1, 8)))
        table.delete(In("id", chosen))
        return f"delete {len(chosen)}", next_id
    compact(table)
    return "compact", next_id


def written_or_stopped(run: SyncRun, table: Table, pipeline: Pipeline) -> bool:
    """Whether every write of the run is done (the index equals the table) or its lease stopped it."""
    return run.saw(STOPS) or index_equals(table, pipeline)


def phase_of(run: SyncRun, bulks_before: int, proxy: FaultProxy) -> str:
    """Where a run was when it died, from what it had logged and sent."""
    if run.saw("; checkpoint "):  # processing's summary line, logged after the checkpoint
        return "after a checkpoint"
    if proxy.count("_bulk") > bulks_before:
        return "writing"
    if run.saw("applying"):
        return "reading"
    if run.saw("planned"):
        return "planned"
    return "starting (Python, Spark, catalog)"


@pytest.mark.slow
@pytest.mark.spark  # in the killed subprocesses
def test_sync_killed_at_random_points_converges(tmp_path: Path, endpoint: Endpoint, fault_proxy: FaultProxy) -> None:  # noqa: C901 - one scenario, a branch per kind of kill
    rng = random.Random(SEED)
    # Spark runs only in the subprocesses; this process reads the table and the index to check them.
    pipeline = Pipeline(tmp_path, endpoint.check_url, spark=None, opensearch=endpoint.opensearch)
    table = orders(pipeline)
    for number, region in enumerate(REGIONS):
        table.append(rows(*range(number * 100, number * 100 + 60), region=region))
    next_id = 1000
    raw = pipeline.config_dict([{"name": "db.orders"}])
    # A killed run's table lease outlives it by up to lease_seconds, and the next run waits that
    # long: short here, so the rounds are not spent waiting (the default is a minute).
    raw["state"]["lease_seconds"] = endpoint.lease_seconds
    raw["opensearch"] = {"url": endpoint.url, **endpoint.opensearch, "bulk_chunk_size": CHUNK}
    raw["spark"] = {
        "master": "local[2]",
        "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    }
    config_path = tmp_path / "icecdc.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = pipeline.config({"name": "db.orders"})  # past the proxy, for the checks

    kills = rng.sample(KILLS, len(KILLS))
    rounds: list[Kill] = []
    run_seconds = 15.0  # a whole run's length, refined from what runs log; spreads the `anytime` kills
    for number, kind in enumerate(kills):
        kill = Kill(kind)
        rounds.append(kill)
        # commits between some kills; before a kill that needs writes to happen, always
        if number and (kind in ("reading", "writing", "before-checkpoint") or rng.random() < 0.5):
            for _ in range(rng.randint(1, 3)):
                done, next_id = commit_randomly(table, rng, next_id)
                kill.commits.append(done)
        if kind == "planning":
            for _ in range(PLANNING_SNAPSHOTS):
                table.append(rows(next_id, region=rng.choice(REGIONS)))
                next_id += 1
            kill.commits.append(f"{PLANNING_SNAPSHOTS} appends of 1")
        table = pipeline.catalog.load_table("db.orders")

        bulks_before = fault_proxy.count("_bulk")
        run = SyncRun(config_path, tmp_path / f"run-{number}.log", endpoint.env)
        lock: sqlite3.Connection | None = None
        fenced = False
        try:
            if kind == "starting":
                reached = run.wait_until_time(run.started + rng.uniform(0.2, 3.0))
            elif kind == "anytime":
                reached = run.wait_until_time(run.started + rng.uniform(0.05, 1.0) * run_seconds)
            elif kind == "planning":  # as soon as this run wrote its first work item, before its last
                store = pipeline.store()
                try:
                    reached = run.wait_until(FirstItemPlanned(store, tmp_path / "state.db"), every=0.002)
                finally:
                    store.close()
            elif kind == "reading":
                delay = rng.uniform(0.0, 1.5)
                reached = run.wait_until_logged("applying") and run.wait_until_time(time.monotonic() + delay)
            elif kind == "writing":
                k = bulks_before + rng.randint(1, 4)  # the k-th bulk request of this run reached the server
                reached = run.wait_until(partial(requests_reached, fault_proxy, "_bulk", k))
            else:  # before-checkpoint: hold the state database so the checkpoint cannot be written
                reached = run.wait_until_logged("applying")
                if reached and endpoint.lock_at_first_write:
                    reached = run.wait_until(partial(requests_reached, fault_proxy, "_bulk", bulks_before + 1), every=0.005)
                if reached:
                    lock = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
                    lock.execute("BEGIN IMMEDIATE")
                    checkpoint = checkpoint_of(pipeline)
                    # every write is done when the index equals the table; the run waits on our lock
                    # (the run's SQLite busy timeout, 30 s, starts only when it tries to write the checkpoint)
                    reached = run.wait_until(partial(written_or_stopped, run, table, pipeline), every=0.5)
                    assert checkpoint_of(pipeline) == checkpoint, (
                        f"seed {SEED} ({endpoint.kind}) round {number}: the checkpoint moved under the lock"
                    )
                    # On Serverless the lock holds back the lease's renewals too: on a slow machine the
                    # fence stops the writes before they are done, and the run stops, advancing nothing.
                    fenced = run.saw(STOPS)
                    if fenced:
                        lock.execute("ROLLBACK")  # so that the run's way out is not held up
                        lock.close()
                        lock = None
            kill.seconds = time.monotonic() - run.started
            if fenced:
                code = run.finish()
                kill.outcome = f"stopped by its lease, exit {code}"
                assert code == 2, f"seed {SEED} ({endpoint.kind}) round {number}: {run.lines[-3:]}"
                assert checkpoint_of(pipeline) == checkpoint, f"seed {SEED} round {number}: it advanced"
            elif reached and run.running():
                run.kill()  # at once; what the run had done is read from its output afterwards, complete by then
                kill.outcome = "killed"
            else:
                code = run.finish()
                kill.outcome = f"finished first, exit {code}"
                assert code == 0, f"seed {SEED} ({endpoint.kind}) round {number}: the run failed on its own: {run.lines[-3:]}"
            if run.applying_at is not None:  # processing takes a few seconds after it begins
                run_seconds = max(run_seconds, run.applying_at + 5)
            if fenced:
                kill.phase = FENCED
            elif kind == "before-checkpoint" and reached:
                kill.phase = BETWEEN
            elif kind == "planning" and reached and not run.saw("planned"):
                kill.phase = "planning"  # it had written work items, and not yet logged that planning was done
            else:
                kill.phase = phase_of(run, bulks_before, fault_proxy)
        finally:
            if run.running():
                run.kill()
            if lock is not None:
                lock.execute("ROLLBACK")
                lock.close()
        # whatever was killed, the checkpoint is a snapshot of this table
        checkpoint = checkpoint_of(pipeline)
        if checkpoint is not None:
            assert checkpoint.table_uuid == str(table.metadata.table_uuid), f"seed {SEED} round {number}"
            assert table.snapshot_by_id(checkpoint.snapshot_id) is not None, f"seed {SEED} round {number}"

    schedule = f"seed {SEED}, {endpoint.kind}:\n" + "\n".join(str(k) for k in rounds)
    # more commits after the last kill, then a run to completion
    for _ in range(2):
        _, next_id = commit_randomly(table, rng, next_id)
    final = SyncRun(config_path, tmp_path / "run-final.log", endpoint.env)
    code = final.finish()
    assert code == 0, f"{schedule}\nfinal run failed: {final.lines[-5:]}"

    table = pipeline.catalog.load_table("db.orders")
    diff = diff_index(table, ("id",), pipeline.client, "orders")
    assert not diff, f"{schedule}\n{diff.summary()}"
    pipeline.assert_index_equals_table(config, "db.orders")
    store = pipeline.store()
    try:
        assert store.get_checkpoint("db.orders").snapshot_id == table.current_snapshot().snapshot_id, schedule
        assert store.pending_items("db.orders") == [], schedule
    finally:
        store.close()
    # the kills landed where they were meant to
    killed = [k for k in rounds if k.outcome == "killed" or k.phase == FENCED]
    assert len(killed) >= len(KILLS) - 1, schedule
    phases = {k.phase for k in killed}
    # (a `planning` kill lands inside planning only by chance since a plan's items are put up to 50
    # a transaction: 40 one-item snapshots are one write, after which planning soon logs "planned")
    assert "writing" in phases and phases & {BETWEEN, FENCED} and len(phases) >= 4, schedule
    print(schedule)  # shown with -s or -rA: what this seed exercised

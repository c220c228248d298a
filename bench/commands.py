"""Whole commands, process start to exit, as users run them (issue 14 items 2, 4 and 5).

Every measured command is a process of its own, timed from outside from its start to its exit,
against the bench sink (bench/sink_server.py); the peak RSS of its process tree (the JVM and
Spark's Python workers included) is sampled as in bench/crossover.py. Tables are written by Spark
SQL through Iceberg's runtime in this process (bench/tables.py), copy-on-write, partitioned by
`region`; the commands read them from the catalog as any reader would.

- `engines` (item 2): `icecdc sync` forced in-process and forced onto Spark, both from the same
  checkpoint (one state store and one index each), on a 10^6-row table in files of 100,000 rows:
  a one-row commit, a 100-row MERGE spread over the table, one confined to the newest rows.
- `peer` (item 4): `icecdc sync` (engine auto) against the peer's job run as a user submits it
  (bench/peer_job.py: a fresh Spark with Iceberg's runtime, `create_changelog_view`, net change
  per key, bulk; bench/peer.py), on one sink: one-row commits one sync each, and batches of
  commits, for recent-rows changes and for changes spread uniformly over a 200,000-row table (every
  commit rewrites most files). Both indexes are then checked against the table.
- `searchable` (item 5): seconds from a commit's return to its document being searchable in the
  sink, `icecdc sync` started right after the commit, in-process vs forced Spark.
- `startup`: where a command's fixed time goes (the interpreter, icecdc's imports, a JVM).

Results: docs/bench/commands.json and docs/bench/commands.md.

    python -m bench.commands [--scale smoke|default]      (BENCH_SCALE sets the default)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from opensearchpy import OpenSearch

from bench.env import REPO, RESULTS, WORK, MemorySampler, config_dict, machine, spark_settings, start_spark
from bench.peer_job import RESULT as PEER_RESULT
from bench.sink_server import SinkServer
from bench.suite import SCALES as SUITE_SCALES
from bench.suite import Bench
from bench.tables import Mutator, create_table
from icecdc.model import EngineChoice
from icecdc.verify import index_documents, table_documents

ICECDC = Path(sys.executable).parent / "icecdc"  # the console script users run
POLL_SECONDS = 0.025  # how often `searchable` asks the sink for the committed document
GOALS = {"one_row": 0.35, "batch": 0.5}  # item 4's goals: icecdc's time over the peer's


@dataclass(frozen=True)
class Scale:
    name: str
    engine_rows: int  # item 2's table (issue: 10^6 rows)
    engine_rows_per_file: int
    merge_changes: int  # item 2's MERGE (issue: 100 rows)
    engine_rounds: int  # each commit kind, each engine, this many times
    peer_rows: int  # item 4's tables (issue: 200,000 rows)
    peer_rows_per_file: int
    one_row_commits: int  # one sync each: an update, a partition move, a delete, in turn
    batches: int  # syncs of `batch_commits` commits of `batch_changes` changed keys each
    batch_commits: int
    batch_changes: int
    searchable_rounds: int  # item 5: commits per engine
    startup_repeats: int  # each piece of a command's fixed cost, this many times (the median is reported)


SCALES = {
    "smoke": Scale("smoke", 20_000, 2_000, 20, 1, 20_000, 2_000, 1, 1, 3, 20, 1, 1),
    "default": Scale("default", 1_000_000, 100_000, 100, 2, 200_000, 10_000, 3, 2, 20, 100, 3, 3),
}
SCALES["full"] = SCALES["default"]  # issue 14's sizes are the default's; `BENCH_SCALE=full make bench` runs them
# What `icecdc sync` prints of a table (icecdc/cli.py): the engine, what the pass read and wrote, its own time.
SYNC_LINE = re.compile(
    r"(?P<snapshots>\d+) snapshots \((?P<engine>\w+) engine\), (?P<files>\d+) files, (?P<rows_read>\d+) rows read, "
    r"(?P<carryovers>\d+) carryovers dropped, (?P<indexed>\d+) indexed, (?P<deleted>\d+) deleted, .* (?P<seconds_inside>[\d.]+)s$"
)

ONE_ROW_OPS = ("U", "M", "D")  # Mutator's MERGE ops: update, partition move, delete
OP_NAMES = {"U": "update", "M": "partition move", "D": "delete", "I": "insert"}


class RowMutator(Mutator):
    """bench.tables.Mutator's MERGE for a single row: one commit of one update, partition move,
    delete or insert (copy-on-write: the row's file is rewritten)."""

    def pick(self, op: str) -> int:
        """The key the next one-row commit of `op` changes (a new id for an insert)."""
        return self._next_id if op == "I" else self._live_keys(1)[0]

    def one_row(self, op: str, key: int) -> None:
        if op == "I":
            self._next_id += 1
        elif op == "D":
            self.deleted.add(key)
        self._bump += 1
        self.spark.createDataFrame([(key, op)], "id BIGINT, op STRING").createOrReplaceTempView("bench_changes")
        self.spark.sql(self._merge())


@dataclass
class Commands:
    """What every measurement shares: the bench's Spark (the writer), the sink, the catalog."""

    bench: Bench
    scale: Scale
    load: list[float] = field(default_factory=list)  # 1-minute load average, every 5 s of the run
    mutators: dict[str, RowMutator] = field(default_factory=dict)  # table → what commits to it

    @property
    def workdir(self) -> Path:
        return self.bench.workdir

    @property
    def spark(self) -> Any:
        return self.bench.spark

    @property
    def sink(self) -> OpenSearch:
        assert self.bench.sink_client is not None
        return self.bench.sink_client

    def icecdc_config(self, table: str, label: str, engine: EngineChoice, export: bool = True, state: str = "") -> Path:
        """A YAML config whose index and state store are `label`'s (`state`: another label's state
        and index, e.g. to catch up on another engine); Spark under the bench's settings."""
        state = state or label
        spark = {
            "master": spark_settings()["spark.master"],
            "conf": {k: v for k, v in spark_settings().items() if k != "spark.master"},
        }
        raw = config_dict(
            self.workdir, self.bench.sink_url, table, state, state, export, engine={"use": str(engine)}, spark=spark
        )
        path = self.workdir / f"{label}-{engine}.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path

    def sync(self, config: Path, watch: Callable[[], bool] | None = None, since: float | None = None) -> dict[str, Any]:
        """`icecdc sync --config CONFIG`, with what it printed: the engine and the time inside it."""
        run = self.run([str(ICECDC), "sync", "--config", str(config)], watch, since)
        found = SYNC_LINE.search(run.pop("stdout").strip())
        if found:
            run.update({k: v if k == "engine" else float(v) if "." in v else int(v) for k, v in found.groupdict().items()})
        return run

    def peer(self, table: str, index: str, *job: str) -> dict[str, Any]:
        """The peer's job (`--load`, or START END) as its own process."""
        argv = [sys.executable, "-m", "bench.peer_job", str(self.workdir), table, index, self.bench.sink_url, *job]
        run = self.run(argv)
        lines = [line for line in run.pop("stdout").splitlines() if line.startswith(PEER_RESULT)]
        run["steps"] = json.loads(lines[-1].removeprefix(PEER_RESULT))
        return run

    def run(self, argv: list[str], watch: Callable[[], bool] | None = None, since: float | None = None) -> dict[str, Any]:
        return whole_command(argv, watch, since)

    def sample_load(self, stop: threading.Event) -> None:
        while not stop.wait(5):
            self.load.append(os.getloadavg()[0])


def whole_command(argv: list[str], watch: Callable[[], bool] | None = None, since: float | None = None) -> dict[str, Any]:
    """One command, process start to exit: wall time, the peak RSS of its largest process and
    the parts of its tree (MiB), the load average as it started; with `watch`, the seconds
    until `watch()` first held (asked every POLL_SECONDS while the command runs), counted from
    `since` (a time.perf_counter() before the start) or else from the start."""
    load = os.getloadavg()
    started = time.perf_counter()
    since = started if since is None else since
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = MemorySampler(opensearch_pid=-1, root_pid=process.pid, interval=0.05)
    seen = None
    try:
        with sampler.phase() as (peaks, _):
            if watch is not None:
                while seen is None and process.poll() is None:
                    if watch():
                        seen = time.perf_counter() - since
                    else:
                        time.sleep(POLL_SECONDS)
            out, err = process.communicate()
    finally:
        sampler.close()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"bench: {' '.join(argv)} failed (exit {process.returncode}): {err[-3000:]}")
    if watch is not None and seen is None:
        if not watch():
            raise RuntimeError(f"bench: {' '.join(argv)} exited without making the commit searchable")
        seen = time.perf_counter() - since
    return {
        "command": " ".join(_shown(a) for a in argv),
        "seconds": round(seconds, 3),
        **({"watched_seconds": round(seen, 3), "started_after_seconds": round(started - since, 3)} if seen is not None else {}),
        "largest_process_mib": round(peaks.largest_process),
        # each part's peak, summed: the parts peak at different moments, so this bounds the tree's peak
        "tree_mib": round(peaks.driver_python + peaks.jvm + peaks.python_workers),
        "memory_mib": {k: round(v) for k, v in asdict(peaks).items() if k not in ("opensearch", "bench_sink", "jvm_heap")},
        "load_average_at_start": [round(x, 2) for x in load],
        "stdout": out,
    }


def _shown(arg: str) -> str:
    """A command's argument as the report prints it: paths relative to the repository."""
    return arg.replace(str(REPO) + "/", "")


def _ratio(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str = "seconds") -> float:
    return round(float(sum(r[key] for r in mine)) / float(sum(r[key] for r in theirs)), 3)


# ----- item 2: the in-process engine against Spark, whole commands


def engines(c: Commands) -> dict[str, Any]:
    scale, name = c.scale, "db.engines"
    create_table(c.spark, name, scale.engine_rows, scale.engine_rows_per_file)
    layout = _layout(c.bench.table(name))
    kinds = (EngineChoice.IN_PROCESS, EngineChoice.SPARK)
    configs = {engine: c.icecdc_config(name, f"engines-{engine}".replace("_", "-"), engine, export=False) for engine in kinds}
    for config in configs.values():
        c.sync(config)  # the checkpoint: the current snapshot, nothing written
    mutator = c.mutators[name] = RowMutator(c.spark, name, scale.engine_rows, hot=1.0)

    def one_row() -> None:
        mutator.hot = 1.0
        mutator.one_row("U", mutator.pick("U"))

    def merge(hot: float) -> Callable[[], None]:
        def commit() -> None:
            mutator.hot = hot
            mutator.commit(scale.merge_changes)

        return commit

    commits = {"one_row": one_row, "merge_spread": merge(0.0), "merge_recent": merge(1.0)}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {kind: {str(e): [] for e in kinds} for kind in commits}
    for number in range(scale.engine_rounds):
        for position, (kind, commit) in enumerate(commits.items()):
            commit()
            order = kinds if (number + position) % 2 == 0 else kinds[::-1]  # who goes first alternates
            for engine in order:
                runs[kind][str(engine)].append(c.sync(configs[engine]))
            print(f"bench.commands: engines {kind}: " + ", ".join(f"{e} {r[-1]['seconds']:.1f} s" for e, r in runs[kind].items()))
    table = c.bench.table(name)
    summary = {
        kind: {
            "in_process_seconds": [r["seconds"] for r in sides[str(EngineChoice.IN_PROCESS)]],
            "spark_seconds": [r["seconds"] for r in sides[str(EngineChoice.SPARK)]],
            "ratio_in_process_to_spark": _ratio(sides[str(EngineChoice.IN_PROCESS)], sides[str(EngineChoice.SPARK)]),
            "ratio_tree_memory": _ratio(sides[str(EngineChoice.IN_PROCESS)], sides[str(EngineChoice.SPARK)], "tree_mib"),
        }
        for kind, sides in runs.items()
    }
    return {
        "table": {
            "rows": scale.engine_rows,
            "rows_per_file": scale.engine_rows_per_file,
            **layout,
            "data_files_after": _data_files(table),
        },
        "merge_changes": scale.merge_changes,
        "summary": summary,
        "runs": runs,
        "configs": {str(e): _shown(str(p)) for e, p in configs.items()},
        "check": _changed_rows_check(c, table, [f"engines-{e}".replace("_", "-") for e in kinds], mutator.deleted),
    }


def _changed_rows_check(c: Commands, table: Any, indexes: list[str], deleted: set[int]) -> dict[str, Any]:
    """Indexes of syncs that started at a checkpoint (no export) hold the changed rows: each
    document equals its row, no deleted key has one, and every engine's index is the same."""
    expected = dict(table_documents(table, ("id",)))
    found = [index_documents(c.sink, index) for index in indexes]
    return {
        "documents": [len(docs) for docs in found],
        "documents_equal_rows": all(expected.get(i) == d for docs in found for i, d in docs.items()),
        "deleted_keys_absent": not any(str(k) in docs for docs in found for k in deleted),
        "indexes_equal": all(docs == found[0] for docs in found),
    }


# ----- item 4: icecdc against the peer's job, whole commands


def against_peer(c: Commands) -> dict[str, Any]:
    return {workload: _peer_workload(c, workload, hot) for workload, hot in (("recent", 1.0), ("uniform", 0.0))}


def _peer_workload(c: Commands, workload: str, hot: float) -> dict[str, Any]:
    scale, name = c.scale, f"db.peer_{workload}"
    ice_index, peer_index = f"{workload}-ice", f"{workload}-peer"
    create_table(c.spark, name, scale.peer_rows, scale.peer_rows_per_file)
    config = c.icecdc_config(name, ice_index, EngineChoice.AUTO)
    layout = _layout(c.bench.table(name))
    export, load = c.sync(config), c.peer(name, peer_index, "--load")  # index == table on both sides
    start = c.bench.snapshot_id(name)
    mutator = RowMutator(c.spark, name, scale.peer_rows, hot=hot)

    def pair(number: int, what: str) -> dict[str, Any]:
        nonlocal start
        end = c.bench.snapshot_id(name)
        sides: dict[str, Callable[[], dict[str, Any]]] = {
            "icecdc": lambda: c.sync(config),
            "peer": lambda: c.peer(name, peer_index, str(start), str(end)),
        }
        order = list(sides) if number % 2 == 0 else list(sides)[::-1]  # who goes first alternates
        done = {side: sides[side]() for side in order}
        start = end
        print(
            f"bench.commands: peer {workload} {what}: icecdc {done['icecdc']['seconds']:.1f} s, peer {done['peer']['seconds']:.1f} s"
        )
        return {"commit": what, **done, "icecdc_first": order[0] == "icecdc", "ratio": _ratio([done["icecdc"]], [done["peer"]])}

    one_row = []
    for number in range(scale.one_row_commits):
        op = ONE_ROW_OPS[number % len(ONE_ROW_OPS)]
        mutator.one_row(op, mutator.pick(op))
        one_row.append(pair(number, f"one-row {OP_NAMES[op]}"))
    batches = []
    for number in range(scale.batches):
        for _ in range(scale.batch_commits):
            mutator.commit(scale.batch_changes)
        batches.append(pair(number, f"{scale.batch_commits} commits of {scale.batch_changes} changes"))
    check = _peer_check(c, name, ice_index, peer_index)
    table = c.bench.table(name)
    for index in (ice_index, peer_index):
        c.bench.drop_index(index, sink=True)  # the sink keeps everything in memory
    return {
        "table": {
            "rows": scale.peer_rows,
            "rows_per_file": scale.peer_rows_per_file,
            **layout,
            "data_files_after": _data_files(table),
            "hot": hot,
        },
        "initial": {"icecdc_export": export, "peer_load": load, "ratio": _ratio([export], [load])},
        "one_row": {
            "commits": one_row,
            "ratio": _ratio([p["icecdc"] for p in one_row], [p["peer"] for p in one_row]),
            "goal": GOALS["one_row"],
        },
        "batch": {
            "syncs": batches,
            "commits_per_sync": scale.batch_commits,
            "changes_per_commit": scale.batch_changes,
            "ratio": _ratio([p["icecdc"] for p in batches], [p["peer"] for p in batches]),
            "goal": GOALS["batch"],
        },
        "config": _shown(str(config)),
        "check": check,
    }


PEER_FIELDS = ("region", "qty", "status", "amount")  # what the workload's commits change


def _peer_check(c: Commands, name: str, ice_index: str, peer_index: str) -> dict[str, Any]:
    """icecdc's index against the table, document by document; the peer's against the table by id
    and the fields the commits change (the peer writes its own JSON: Spark's rows, `default=str`)."""
    expected = dict(table_documents(c.bench.table(name), ("id",)))
    mine, theirs = index_documents(c.sink, ice_index), index_documents(c.sink, peer_index)

    def fields(documents: dict[Any, str]) -> dict[Any, dict[str, str]]:
        return {i: {f: str(v) for f, v in json.loads(d).items() if f in PEER_FIELDS} for i, d in documents.items()}

    return {
        "table_rows": len(expected),
        "icecdc_documents": len(mine),
        "peer_documents": len(theirs),
        "icecdc_index_equals_table": mine == expected,
        "peer_index_matches_table": fields(theirs) == fields(expected),
    }


# ----- item 5: from a commit to its document in the index


def searchable(c: Commands) -> dict[str, Any]:
    """On item 2's table: one-row commits, each followed at once by `icecdc sync` on one engine,
    which the sink is polled for. The other engine's index catches up in-process before its turn,
    so each measured sync applies exactly its own commit."""
    name = "db.engines"
    kinds = (EngineChoice.IN_PROCESS, EngineChoice.SPARK)
    labels = {engine: f"engines-{engine}".replace("_", "-") for engine in kinds}
    configs = {engine: c.icecdc_config(name, labels[engine], engine, export=False) for engine in kinds}
    catch_up = {
        e: c.icecdc_config(name, f"catch-up-{labels[e]}", EngineChoice.IN_PROCESS, export=False, state=labels[e]) for e in kinds
    }
    mutator = c.mutators[name]  # item 2's: it knows which keys its commits deleted
    mutator.hot = 1.0
    runs: dict[str, list[dict[str, Any]]] = {str(e): [] for e in kinds}
    for number in range(c.scale.searchable_rounds):
        for engine in kinds if number % 2 == 0 else kinds[::-1]:
            c.sync(catch_up[engine])
            key = mutator.pick("U")
            before = _version(c.sink, labels[engine], key)
            mutator.one_row("U", key)
            returned = time.perf_counter()
            run = c.sync(configs[engine], _changed(c.sink, labels[engine], key, before), returned)
            run["commit_to_searchable_seconds"] = run.pop("watched_seconds")
            runs[str(engine)].append(run)
            print(
                f"bench.commands: searchable {engine}: {run['commit_to_searchable_seconds']:.2f} s (command {run['seconds']:.1f} s)"
            )
    medians = {e: statistics.median(r["commit_to_searchable_seconds"] for r in rs) for e, rs in runs.items()}
    return {
        "commit": "one-row update (copy-on-write: its 1 file of the table rewritten), `icecdc sync` started at its return",
        "table_rows": c.scale.engine_rows,
        "runs": runs,
        "median_seconds": medians,
        "ratio_in_process_to_spark": round(medians[str(EngineChoice.IN_PROCESS)] / medians[str(EngineChoice.SPARK)], 3),
    }


def _changed(client: OpenSearch, index: str, key: int, before: int | None) -> Callable[[], bool]:
    """Whether the document `key` has a version other than `before` (a new document, or a new version)."""
    return lambda: _version(client, index, key) not in (before, None)


def _version(client: OpenSearch, index: str, key: int) -> int | None:
    """The version of the document `key` in `index` (through its alias), None without one."""
    found = client.get(index=index, id=str(key), ignore=404)
    return int(found["_version"]) if found.get("found") else None


# ----- where a command's fixed time goes


def startup(c: Commands) -> dict[str, Any]:
    """Median whole-command seconds of the pieces every command pays before any work."""
    python = sys.executable
    pieces = {
        "python_interpreter": [python, "-c", "pass"],
        "icecdc_cli_help": [str(ICECDC), "--help"],
        "icecdc_sync_imports": [python, "-c", SYNC_IMPORTS],
        "spark_session_start_stop": [
            python,
            "-c",
            (
                "from pyspark.sql import SparkSession; SparkSession.builder.master('local[2]')"
                ".config('spark.ui.enabled', 'false').getOrCreate().stop()"
            ),
        ],
    }
    return {
        **{
            piece: {
                "command": " ".join(_shown(a) for a in argv),
                "seconds": statistics.median(c.run(argv)["seconds"] for _ in range(c.scale.startup_repeats)),
            }
            for piece, argv in pieces.items()
        },
        "icecdc_sync_imports_by_package": _import_costs(),
    }


SYNC_IMPORTS = "import icecdc.processing, icecdc.engines.in_process, icecdc.cli"  # what `icecdc sync` imports in-process


def _import_costs(top: int = 8) -> dict[str, float]:
    """`python -X importtime` of a sync's imports: seconds per top-level package (each module's
    own time, summed), the largest `top` and the rest."""
    trace = subprocess.run([sys.executable, "-X", "importtime", "-c", SYNC_IMPORTS], capture_output=True, text=True, check=True)
    costs: dict[str, float] = {}
    for line in trace.stderr.splitlines():
        own, _, name = line.removeprefix("import time:").split("|")
        if own.strip().isdigit():
            package = name.strip().split(".")[0]
            costs[package] = costs.get(package, 0.0) + int(own) / 1e6
    ranked = sorted(costs.items(), key=lambda kv: kv[1], reverse=True)
    return {**{k: round(v, 3) for k, v in ranked[:top]}, "other": round(sum(v for _, v in ranked[top:]), 3)}


def _data_files(table: Any) -> int:
    return int(table.inspect.files().num_rows)


def _layout(table: Any) -> dict[str, int]:
    """How bench/tables.py laid the table out: its data files and their rows (range partitioning's
    bounds do not fall on the regions' blocks of ids, so a block may be split over two files)."""
    rows = table.inspect.files().column("record_count").to_pylist()
    return {"data_files": len(rows), "rows_per_file_median": int(statistics.median(rows)), "rows_per_file_max": max(rows)}


MEASUREMENTS: dict[str, Callable[[Commands], dict[str, Any]]] = {
    "startup": startup,
    "engines": engines,
    "searchable": searchable,
    "peer": against_peer,
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.commands")
    parser.add_argument("--scale", default=os.environ.get("BENCH_SCALE", "default"), choices=sorted(SCALES))
    parser.add_argument("--report-only", action="store_true", help="write the Markdown again from the JSON")
    args = parser.parse_args()
    scale = SCALES[args.scale]
    # The default scale's results are the committed ones; a smoke run's stay under .build/bench/.
    out = RESULTS / "commands" if scale.name == "default" else WORK / f"commands-{scale.name}"
    if not args.report_only:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(run(scale), indent=1) + "\n")
    report = markdown(json.loads(out.with_suffix(".json").read_text()))
    out.with_suffix(".md").write_text(report)
    print(report)


def run(scale: Scale) -> dict[str, Any]:
    workdir = WORK / "commands"
    shutil.rmtree(workdir, ignore_errors=True)  # this tool's own directory; the suite's beside it is left alone
    workdir.mkdir(parents=True)
    results: dict[str, Any] = {
        "command": f"python -m bench.commands --scale {scale.name}",
        "scale": asdict(scale),
        "machine": machine(),
        "spark": spark_settings(),
    }
    sink = SinkServer.start()
    spark = start_spark(workdir)
    sampler = MemorySampler(opensearch_pid=-1)  # the Bench's; nothing here measures this process
    c = Commands(Bench(workdir, spark, sink.url, sampler, SUITE_SCALES["smoke"], sink.url, sink.pid), scale)
    stop = threading.Event()
    threading.Thread(target=c.sample_load, args=(stop,), daemon=True).start()
    started = time.time()
    try:
        for name, measure in MEASUREMENTS.items():
            print(f"bench.commands[{scale.name}]: {name} …", flush=True)
            results[name] = measure(c)
    finally:
        stop.set()
        spark.stop()
        sampler.close()
        sink.close()
    results["minutes"] = round((time.time() - started) / 60, 1)
    results["load_average_1min"] = {"min": min(c.load), "mean": round(statistics.mean(c.load), 2), "max": max(c.load)}
    return results


# ----- the report


def markdown(r: dict[str, Any]) -> str:
    m, load = r["machine"], r["load_average_1min"]
    lines = [
        "# Whole commands: icecdc sync on each engine, against the peer's job, commit to searchable (issue 14)",
        "",
        (
            f"`{r['command']}` ([bench/commands.py](../../bench/commands.py); every figure in [commands.json](commands.json)), "
            f"{m['date']}, {r['minutes']} min. {m['cpu']}, {m['cores']} cores shared with other work, {m['memory_gib']} GiB; "
            f"Python {m['python']}, {m['java']}, pyspark {m['pyspark']}, pyiceberg {m['pyiceberg']}, {m['iceberg_spark_runtime']}. "
            f"**Load average** (1 min, sampled every 5 s): {load['min']:.1f}–{load['max']:.1f}, mean {load['mean']:.1f}."
        ),
        "",
        (
            "Every figure is a whole command, process start to exit, each in a process of its own, writing into the bench "
            "sink (bench/sink_server.py); the two sides of a ratio ran back to back on the same commit, alternating which "
            "went first. Ratios are sums of seconds, this side over the other. Memory: the peak RSS of each part of the "
            "command's process tree (driver, JVM, Spark's Python workers), summed."
        ),
        "",
        "| item | measurement | icecdc, mean a sync | other side, mean a sync | ratio (sums) | goal |",
        "|---|---|---|---|---|---|",
        *_summary_rows(r),
        "",
        *_engines_md(r["engines"]),
        *_peer_md(r["peer"]),
        *_searchable_md(r["searchable"]),
        *_where_md(r),
    ]
    return "\n".join(lines) + "\n"


def _met(ratio: float, goal: float) -> str:
    return f"≤ {goal} {'✅' if ratio <= goal else '❌ not met'}"


def _summary_rows(r: dict[str, Any]) -> list[str]:
    rows = []
    e = r["engines"]
    for kind, s in e["summary"].items():
        mine, theirs = statistics.mean(s["in_process_seconds"]), statistics.mean(s["spark_seconds"])
        rows.append(
            f"| 2 | `icecdc sync` of {_commit_names(e)[kind]}, {e['table']['rows']:,} rows ({len(s['spark_seconds'])} syncs) | "
            f"in-process {mine:.1f} s | forced Spark {theirs:.1f} s | **{s['ratio_in_process_to_spark']:.2f}** | — |"
        )
    for workload, w in r["peer"].items():
        for part, what in (
            ("one_row", "one-row commits, one sync each"),
            ("batch", f"{w['batch']['commits_per_sync']} commits a sync"),
        ):
            items = w[part]["commits" if part == "one_row" else "syncs"]
            mine = statistics.mean(i["icecdc"]["seconds"] for i in items)
            theirs = statistics.mean(i["peer"]["seconds"] for i in items)
            rows.append(
                f"| 4 | {workload} rows, {what} ({len(items)} syncs) | {mine:.1f} s | peer's job {theirs:.1f} s | "
                f"**{w[part]['ratio']:.2f}** | {_met(w[part]['ratio'], w[part]['goal'])} |"
            )
    s = r["searchable"]
    medians = s["median_seconds"]
    rows.append(
        f"| 5 | commit → searchable, one-row commit, median | in-process {medians['in_process']:.2f} s | "
        f"forced Spark {medians['spark']:.2f} s | **{s['ratio_in_process_to_spark']:.2f}** | — |"
    )
    return rows


def _seconds(values: list[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in values)


def _commit_names(e: dict[str, Any]) -> dict[str, str]:
    return {
        "one_row": "a one-row update",
        "merge_spread": f"a {e['merge_changes']}-row MERGE spread over the table",
        "merge_recent": f"a {e['merge_changes']}-row MERGE on recent rows",
    }


def _engines_md(e: dict[str, Any]) -> list[str]:
    t, check = e["table"], e["check"]
    lines = [
        f"## Item 2: `icecdc sync`, forced in-process vs forced Spark ({t['rows']:,} rows, copy-on-write, partitioned)",
        "",
        f"The table: {_layout_text(t)}.",
        "",
        (
            "Both engines sync the same commit from the same checkpoint (a state store and an index each; no export: the "
            "indexes hold the changed rows). A MERGE is 60 % updates, 10 % partition moves, 10 % deletes, 20 % inserts "
            "(bench/tables.py `Mutator`); recent rows are the newest tenth of ids."
        ),
        "",
        "| commit | engine | seconds (each run) | rows read | tree MiB | largest process MiB |",
        "|---|---|---|---|---|---|",
    ]
    for kind, sides in e["runs"].items():
        for engine, runs in sides.items():
            lines.append(
                f"| {_commit_names(e)[kind]} | {engine} | {_seconds([x['seconds'] for x in runs])} | "
                f"{runs[0].get('rows_read', 0):,} | {max(x['tree_mib'] for x in runs):,} | {max(x['largest_process_mib'] for x in runs):,} |"
            )
    ok = check["documents_equal_rows"] and check["deleted_keys_absent"] and check["indexes_equal"]
    lines += [
        "",
        f"Check: {check['documents'][0]:,} documents per index; " + (CHANGED_ROWS_OK if ok else f"FAILED ❌ {check}"),
        "",
    ]
    return lines


def _peer_md(p: dict[str, Any]) -> list[str]:
    lines = [
        "## Item 4: `icecdc sync` (engine auto) vs the peer's job",
        "",
        (
            "The peer: `python -m bench.peer_job` (bench/peer_job.py), a fresh Spark with Iceberg's runtime as a user "
            "would submit it, `create_changelog_view` with compute_updates, the net change per key, bulk from the "
            "executors (bench/peer.py); unversioned writes. Both start from their own initial load (icecdc's export, the "
            "peer's Spark read + bulk) and write into the same sink. One-row commits are an update, a partition move and "
            "a delete in turn; a batch's commits are `Mutator` MERGEs. `recent`: keys among the newest tenth of ids; "
            "`uniform`: keys anywhere, so every commit rewrites most files."
        ),
        "",
        "| workload | sync of | icecdc, s | icecdc engine, rows read | peer, s | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for workload, w in p.items():
        t = w["table"]
        init = w["initial"]
        lines.append(
            f"| {workload} ({t['rows']:,} rows, {t['data_files']} → {t['data_files_after']} files) | initial load | "
            f"{init['icecdc_export']['seconds']:.1f} | {_engine(init['icecdc_export'])} | {init['peer_load']['seconds']:.1f} | {init['ratio']:.2f} |"
        )
        for item in w["one_row"]["commits"] + w["batch"]["syncs"]:
            lines.append(
                f"| {workload} | {item['commit']} | {item['icecdc']['seconds']:.1f} | {_engine(item['icecdc'])} | "
                f"{item['peer']['seconds']:.1f} | {item['ratio']:.2f} |"
            )
    lines += ["", *(f"- `{workload}`: {_layout_text(w['table'])}." for workload, w in p.items())]
    lines += ["", "| workload | table rows | icecdc index == table | peer index: same ids, changed fields equal the rows |"]
    lines.append("|---|---|---|---|")
    for workload, w in p.items():
        check = w["check"]
        lines.append(
            f"| {workload} | {check['table_rows']:,} | {'✅' if check['icecdc_index_equals_table'] else '❌'} "
            f"({check['icecdc_documents']:,} documents) | {'✅' if check['peer_index_matches_table'] else '❌'} "
            f"({check['peer_documents']:,} documents) |"
        )
    return [*lines, ""]


CHANGED_ROWS_OK = "every document equals its row, no deleted key has one, and both indexes are equal ✅"
SPARK_START = " (Spark's start included)"
SPARK_STOP = ", Spark's stop"


def _layout_text(t: dict[str, Any]) -> str:
    return (
        f"{t['data_files']} files as bench/tables.py lays out blocks of {t['rows_per_file']:,} ids (a block may be split "
        f"over two files), median {t['rows_per_file_median']:,} rows a file, the largest {t['rows_per_file_max']:,}; "
        f"{t['data_files_after']} files after the commits"
    )


def _engine(run: dict[str, Any]) -> str:
    return f"{run.get('engine', '?')}, {run.get('rows_read', 0):,}"


def _searchable_md(s: dict[str, Any]) -> list[str]:
    lines = [
        "## Item 5: commit to searchable, local path",
        "",
        (
            f"On item 2's {s['table_rows']:,}-row table: {s['commit']}; seconds until the sink answers the document's new "
            "version (polled every 25 ms). The other engine's index catches up (in-process, unmeasured) before each commit, "
            "so every measured sync applies exactly one commit."
        ),
        "",
        "| engine | commit → searchable, s (each) | median | whole command, s (each) |",
        "|---|---|---|---|",
    ]
    for engine, runs in s["runs"].items():
        lines.append(
            f"| {engine} | {_seconds([x['commit_to_searchable_seconds'] for x in runs])} | **{s['median_seconds'][engine]:.2f}** | "
            f"{_seconds([x['seconds'] for x in runs])} |"
        )
    return [*lines, ""]


def _where_md(r: dict[str, Any]) -> list[str]:
    """Where a command's time goes: the fixed pieces against the work."""
    startup_, one_row = r["startup"], r["engines"]["runs"]["one_row"]
    peers = [item["peer"] for w in r["peer"].values() for item in w["one_row"]["commits"]]
    steps = {k: statistics.median(p["steps"][k] for p in peers) for k in peers[0]["steps"]}
    whole = statistics.median(p["seconds"] for p in peers)
    lines = [
        "## Where a command's time goes",
        "",
        "| command (median) | whole, s | where |",
        "|---|---|---|",
    ]
    for engine, runs in one_row.items():
        total = statistics.median(x["seconds"] for x in runs)
        inside = statistics.median(x.get("seconds_inside", 0.0) for x in runs)
        lines.append(
            f"| `icecdc sync`, {engine}, one-row commit (item 2) | {total:.2f} | the sync's own time as icecdc prints it "
            f"{inside:.1f} s{SPARK_START if engine == 'spark' else ''}; the rest, {total - inside:.1f} s, is "
            f"the interpreter, imports, config, catalog and index checks{SPARK_STOP if engine == 'spark' else ''}, and exit |"
        )
    lines.append(
        f"| the peer's job, one-row commit (item 4) | {whole:.2f} | imports {steps['imports']:.1f} s, Spark with Iceberg's "
        f"runtime starting {steps['spark_start']:.1f} s, the job {steps['job']:.1f} s, Spark stopping {steps['spark_stop']:.1f} s, "
        f"exit {whole - sum(steps.values()):.1f} s |"
    )
    lines += [
        "",
        f"Pieces alone (median of {r['scale']['startup_repeats']}):",
        "",
        "| piece | seconds | command |",
        "|---|---|---|",
    ]
    pieces = {k: v for k, v in startup_.items() if k != "icecdc_sync_imports_by_package"}
    lines += [f"| {piece.replace('_', ' ')} | {v['seconds']:.2f} | `{v['command']}` |" for piece, v in pieces.items()]
    costs = startup_["icecdc_sync_imports_by_package"]
    lines += [
        "",
        "`icecdc sync`'s imports by package (`python -X importtime`, each module's own time summed): "
        + ", ".join(f"{k} {v:.2f} s" for k, v in costs.items())
        + f"; {sum(costs.values()):.2f} s in all.",
    ]
    return [*lines, ""]


if __name__ == "__main__":
    main()

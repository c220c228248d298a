"""Whole commands, process start to exit, as users run them, each a process of its own timed from
outside, into the bench sink (results: docs/bench/commands.json and commands.md):

- `engines`: `icecdc sync` forced in-process and forced onto Spark, from the same checkpoint (a state
  store and an index each): a one-row commit, a MERGE spread over the table, one on the newest rows.
- `peer`: `icecdc sync` (engine auto) against the peer's job as a user submits it
  (bench/harness/peer.py), one sink: one-row commits one sync each, and batches of commits, for
  recent-rows changes and for changes spread over the table; both indexes checked against the table.
- `searchable`: seconds from a commit's return to its document being searchable in the sink.
- `startup`: where a command's fixed time goes (the interpreter, icecdc's imports, a JVM).

    python -m bench.whole_commands [--scale smoke|default] [--report-only]   (BENCH_SCALE sets the default)
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

from bench import report
from bench.harness.environment import RESULTS, WORK, config_dict, machine, shown, spark_settings, start_spark
from bench.harness.peer import RESULT as PEER_RESULT
from bench.harness.sampling import MemorySampler, whole_command
from bench.harness.session import Bench, data_files
from bench.harness.sink import SinkServer
from bench.harness.tables import Mutator, create_table
from bench.scales import COMMAND_SCALES, SCALES, CommandScale
from icecdc.model import EngineChoice
from icecdc.verify import index_documents, table_documents

ICECDC = Path(sys.executable).parent / "icecdc"  # the console script users run
GOALS = {"one_row": 0.35, "batch": 0.5}  # against the peer's job: icecdc's time over the peer's
# What `icecdc sync` prints of a table (icecdc/cli.py): the engine, what the pass read and wrote, its own time.
SYNC_LINE = re.compile(
    r"(?P<snapshots>\d+) snapshots \((?P<engine>\w+) engine\), (?P<files>\d+) files, (?P<rows_read>\d+) rows read, "
    r"(?P<carryovers>\d+) carryovers dropped, (?P<indexed>\d+) indexed, (?P<deleted>\d+) deleted, .* (?P<seconds_inside>[\d.]+)s$"
)

ONE_ROW_OPS = ("U", "M", "D")  # Mutator's MERGE ops: update, partition move, delete
OP_NAMES = {"U": "update", "M": "partition move", "D": "delete", "I": "insert"}


@dataclass
class Commands:
    """What every measurement here shares: the bench's Spark (the writer), the sink, the catalog."""

    bench: Bench
    scale: CommandScale
    load: list[float] = field(default_factory=list)  # 1-minute load average, every 5 s of the run
    mutators: dict[str, Mutator] = field(default_factory=dict)  # table → what commits to it

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
        argv = [sys.executable, "-m", "bench.harness.peer", str(self.workdir), table, index, self.bench.sink_url, *job]
        run = self.run(argv)
        lines = [line for line in run.pop("stdout").splitlines() if line.startswith(PEER_RESULT)]
        run["steps"] = json.loads(lines[-1].removeprefix(PEER_RESULT))
        return run

    def run(self, argv: list[str], watch: Callable[[], bool] | None = None, since: float | None = None) -> dict[str, Any]:
        return whole_command(argv, watch, since)

    def sample_load(self, stop: threading.Event) -> None:
        while not stop.wait(5):
            self.load.append(os.getloadavg()[0])


def _ratio(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str = "seconds") -> float:
    return round(float(sum(r[key] for r in mine)) / float(sum(r[key] for r in theirs)), 3)


# ----- engines: the in-process engine against Spark


def engines(c: Commands) -> dict[str, Any]:
    scale, name = c.scale, "db.engines"
    create_table(c.spark, name, scale.engine_rows, scale.engine_rows_per_file)
    layout = _layout(c.bench.table(name))
    kinds = (EngineChoice.IN_PROCESS, EngineChoice.SPARK)
    configs = {engine: c.icecdc_config(name, f"engines-{engine}".replace("_", "-"), engine, export=False) for engine in kinds}
    for config in configs.values():
        c.sync(config)  # the checkpoint: the current snapshot, nothing written
    mutator = c.mutators[name] = Mutator(c.spark, name, scale.engine_rows, hot=1.0)

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
            print(
                f"bench.whole_commands: engines {kind}: "
                + ", ".join(f"{e} {r[-1]['seconds']:.1f} s" for e, r in runs[kind].items())
            )
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
            "data_files_after": data_files(table),
        },
        "merge_changes": scale.merge_changes,
        "summary": summary,
        "runs": runs,
        "configs": {str(e): shown(str(p)) for e, p in configs.items()},
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


# ----- peer: icecdc against the peer's job


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
    mutator = Mutator(c.spark, name, scale.peer_rows, hot=hot)

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
            f"bench.whole_commands: peer {workload} {what}: icecdc {done['icecdc']['seconds']:.1f} s, peer {done['peer']['seconds']:.1f} s"
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
            "data_files_after": data_files(table),
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
        "config": shown(str(config)),
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


# ----- searchable: from a commit to its document in the index


def searchable(c: Commands) -> dict[str, Any]:
    """On the engines' table: one-row commits, each followed at once by `icecdc sync` on one engine,
    which the sink is polled for. The other engine's index catches up in-process before its turn,
    so each measured sync applies exactly its own commit."""
    name = "db.engines"
    kinds = (EngineChoice.IN_PROCESS, EngineChoice.SPARK)
    labels = {engine: f"engines-{engine}".replace("_", "-") for engine in kinds}
    configs = {engine: c.icecdc_config(name, labels[engine], engine, export=False) for engine in kinds}
    catch_up = {
        e: c.icecdc_config(name, f"catch-up-{labels[e]}", EngineChoice.IN_PROCESS, export=False, state=labels[e]) for e in kinds
    }
    mutator = c.mutators[name]  # the engines': it knows which keys its commits deleted
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
                f"bench.whole_commands: searchable {engine}: {run['commit_to_searchable_seconds']:.2f} s (command {run['seconds']:.1f} s)"
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
                "command": " ".join(shown(a) for a in argv),
                "seconds": statistics.median(c.run(argv)["seconds"] for _ in range(c.scale.startup_repeats)),
            }
            for piece, argv in pieces.items()
        },
        "icecdc_sync_imports_by_package": _import_costs(),
    }


SYNC_IMPORTS = "import icecdc.sync, icecdc.engines.in_process, icecdc.cli"  # what `icecdc sync` imports in-process


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


def _layout(table: Any) -> dict[str, int]:
    """How bench/harness/tables.py laid the table out: its data files and their rows (range partitioning's
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
    parser = argparse.ArgumentParser(prog="python -m bench.whole_commands")
    parser.add_argument("--scale", default=os.environ.get("BENCH_SCALE", "default"), choices=sorted(COMMAND_SCALES))
    parser.add_argument("--report-only", action="store_true", help="write the Markdown again from the JSON")
    args = parser.parse_args()
    scale = COMMAND_SCALES[args.scale]
    # The default scale's results are the committed ones; a smoke run's stay under .build/bench/.
    out = RESULTS / "commands.json" if scale.name == "default" else WORK / f"commands-{scale.name}.json"
    if not args.report_only:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(run(scale), indent=1) + "\n")
    print(report.write_commands(out))


def run(scale: CommandScale) -> dict[str, Any]:
    workdir = WORK / "commands"
    shutil.rmtree(workdir, ignore_errors=True)  # this tool's own directory; the others beside it are left alone
    workdir.mkdir(parents=True)
    results: dict[str, Any] = {
        "command": f"python -m bench.whole_commands --scale {scale.name}",
        "scale": asdict(scale),
        "machine": machine(),
        "spark": spark_settings(),
    }
    sink = SinkServer.start()
    spark = start_spark(workdir)
    sampler = MemorySampler(opensearch_pid=-1)  # the Bench's; nothing here measures this process
    c = Commands(Bench(workdir, spark, sink.url, sampler, SCALES["smoke"], sink.url, sink.pid), scale)
    stop = threading.Event()
    threading.Thread(target=c.sample_load, args=(stop,), daemon=True).start()
    started = time.time()
    try:
        for name, measure in MEASUREMENTS.items():
            print(f"bench.whole_commands[{scale.name}]: {name} …", flush=True)
            results[name] = measure(c)
    finally:
        stop.set()
        spark.stop()
        sampler.close()
        sink.close()
    results["minutes"] = round((time.time() - started) / 60, 1)
    results["load_average_1min"] = {"min": min(c.load), "mean": round(statistics.mean(c.load), 2), "max": max(c.load)}
    return results


if __name__ == "__main__":
    main()

"""Lake scale: the control plane of syncs of tables of many small files, of many
tables, and of small commits on a large table, against the issue's goals (`make bench-scale`;
results: docs/bench/scale.json).

- Tables: `real` tables of N small files (one identity partition each, a partitioned append), and
  a `metadata`-only table of 10^6 files: manifests listing hard links to one small file, which
  planning never reads (only planned, never exported).
- State: SQLite, and DynamoDB on moto's server in a process of its own, behind a counter of
  requests, its address space capped (`bench/harness/moto_server.py`). On moto, requests are
  counted and never timed.
- Every measured sync is a process of its own (`python -m bench.scale run ...`), calling
  `icecdc.sync.sync` with a probe: the pass points (`PassPoint`) and the log line that
  starts a pass's writes cut it into phases, each with its wall time, its state requests and the
  peak RSS of every process (the sync's own tree sampled inside; the servers from here).
  Planning alone is a sync stopped at its first `PassPoint.PLANNED`. Only whole commands and
  public functions are measured, so the harness outlives changes inside planning and passes.

    python -m bench.scale [--scale smoke|default] [--only NAME ...]   (BENCH_SCALE sets the default)
    python -m bench.scale run CONFIG.json TABLE [--plan-only] [--counter URL] [--spark]   (one sync)

The deployment of many tables is `bench/many_tables.py` (its part `many_tables`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import yaml
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFile
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from bench.harness.environment import CATALOG, RESULTS, WORK, config_dict, machine, spark_settings
from bench.harness.moto_server import COUNTS_PATH, FAKE_AWS, REGION, MotoServer
from bench.harness.sampling import MemorySampler, whole_command
from bench.harness.sink import SinkServer
from bench.scale_report import GOALS, figures, passes_of

ICECDC = Path(sys.executable).parent / "icecdc"  # the console script users run
RESULT = "bench-scale-result: "  # a child's stdout line that carries its result
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "part", LongType(), required=True),
    NestedField(3, "name", StringType(), required=False),
    identifier_field_ids=[1],
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part"))
APPEND_FILES = 10_000  # files per append of a real table (one snapshot each)
METADATA_FILES = 100_000  # files per fast append of a metadata-only table
LINKS_PER_INODE = 50_000  # hard links to one copy of the small file
# The DataFile fields a metadata-only table's copies share with the one real file.
COPIED = (
    "content",
    "file_format",
    "record_count",
    "file_size_in_bytes",
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
    "split_offsets",
    "sort_order_id",
)
MOTO_MAX_MIB = 6144  # moto's server's address space (RLIMIT_AS)


@dataclass(frozen=True)
class Sizes:
    """What one scale runs."""

    real: tuple[int, ...]  # files of each real table (the largest is the export measured end to end)
    metadata: int  # files of the metadata-only table (planned only)
    rows_per_file: int
    passes: int  # the capped export: batch.max_files = files // passes
    dynamodb_files: int  # real tables up to this size are also exported with the state on DynamoDB
    spark_files: int  # the export on Spark (a real table of this size; 0: none)
    tables: int  # the deployment of many tables (item 5)


SIZES = {
    "tiny": Sizes((200,), 2_000, 2, 2, 200, 0, 5),  # the harness's own test
    "smoke": Sizes((1_000, 10_000), 100_000, 10, 10, 10_000, 1_000, 50),
    "default": Sizes((10_000, 100_000), 1_000_000, 10, 10, 100_000, 100_000, 500),
}
PARTS = ("plan", "export", "many_tables")
Parts = dict[str, Callable[["Scale"], dict[str, Any]]]  # a part's measurement, by name


# ----- tables


def open_lake(workdir: Path) -> SqlCatalog:
    """pyiceberg's view of the bench catalog (the one icecdc's configs name)."""
    return SqlCatalog(CATALOG, uri=f"sqlite:///{workdir / 'catalog.db'}", warehouse=(workdir / "warehouse").as_uri())


def _rows(first_part: int, parts: int, rows_per_file: int) -> pa.Table:
    rows = [
        {"id": p * rows_per_file + r, "part": p, "name": f"n{p * rows_per_file + r}"}
        for p in range(first_part, first_part + parts)
        for r in range(rows_per_file)
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMA.as_arrow())


def real_table(catalog: SqlCatalog, name: str, files: int, rows_per_file: int) -> float:
    """A table of `files` small files, one per partition, written by appends of APPEND_FILES; seconds taken."""
    started = time.perf_counter()
    table = catalog.create_table(name, SCHEMA, partition_spec=SPEC, properties={"format-version": "2"})
    for first in range(0, files, APPEND_FILES):
        table.append(_rows(first, min(APPEND_FILES, files - first), rows_per_file))
    return time.perf_counter() - started


def metadata_table(catalog: SqlCatalog, name: str, files: int, rows_per_file: int, links: Path) -> float:
    """A table whose manifests list `files` files: one real file and hard links to it (and to
    copies of it), each under a partition of its own (their rows do not match it: the table is for planning, never read)."""
    started = time.perf_counter()
    table = catalog.create_table(name, SCHEMA, partition_spec=SPEC, properties={"format-version": "2"})
    table.append(_rows(0, 1, rows_per_file))
    table = catalog.load_table(name)
    original = next(iter(table.scan().plan_files())).file
    source = original.file_path.removeprefix("file://")
    links.mkdir(parents=True, exist_ok=True)
    for first in range(1, files, METADATA_FILES):
        copies = []
        for part in range(first, min(first + METADATA_FILES, files)):
            path = links / f"{part}.parquet"
            if part % LINKS_PER_INODE == 0:  # a file system caps links per inode (ext4: 65,000)
                source = str(links / f"{part}.source.parquet")
                shutil.copyfile(original.file_path.removeprefix("file://"), source)
            os.link(source, path)
            shared = {key: getattr(original, key) for key in COPIED}
            copies.append(DataFile.from_args(file_path=path.as_uri(), partition=Record(part), **shared))
        with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
            for copy in copies:
                append.append_data_file(copy)
        table = catalog.load_table(name)
    return time.perf_counter() - started


def one_row_commit(catalog: SqlCatalog, name: str, row_id: int) -> None:
    """Append one row (a new file in a partition of its own), as a streaming writer commits."""
    row = {"id": row_id, "part": row_id, "name": f"one row {row_id}"}
    catalog.load_table(name).append(pa.Table.from_pylist([row], schema=SCHEMA.as_arrow()))


# ----- one sync, in a process of its own (the child)


class _PlanOnly(Exception):
    """Raised by the probe at the first PLANNED: the sync stops once planned."""


@dataclass
class Phases:
    """Events of one sync (pass points, the start of a pass's writes), each with the wall time,
    the state requests and the memory peaks since the event before."""

    counter: str | None
    sampler: MemorySampler
    events: list[dict[str, Any]] = field(default_factory=list)
    last: float = field(default_factory=time.perf_counter)

    def mark(self, event: str) -> None:
        now = time.perf_counter()
        peaks = self.sampler.cut()
        entry: dict[str, Any] = {"event": event, "seconds": round(now - self.last, 4)}
        if self.counter:
            with urllib.request.urlopen(self.counter + COUNTS_PATH, timeout=600) as answer:
                entry["requests"] = json.loads(answer.read())
        entry["memory_mib"] = {k: round(v, 1) for k, v in asdict(peaks).items() if v and k != "jvm_heap"}
        self.events.append(entry)
        self.last = time.perf_counter()  # the counter's own request is not the sync's time


class _WritesStart(logging.Handler):
    """Marks the log line a pass logs as its writes start (`<table>: applying N snapshots, M files`)."""

    def __init__(self, phases: Phases) -> None:
        super().__init__(logging.INFO)
        self.phases = phases

    def emit(self, record: logging.LogRecord) -> None:
        if ": applying " in record.getMessage():
            self.phases.mark("applying")


def run_child(config_path: str, table: str, plan_only: bool, counter: str | None, on_spark: bool) -> dict[str, Any]:
    """One sync of `table` under the config, cut into phases at its events."""
    from icecdc.config import parse_config
    from icecdc.model import PassPoint
    from icecdc.sync import sync

    config = parse_config(json.loads(Path(config_path).read_text()))
    spark = None
    spark_start = 0.0
    if on_spark:
        from bench.harness.environment import start_spark

        started = time.perf_counter()
        spark = start_spark(Path(config_path).parent, iceberg=False)
        spark.sparkContext.parallelize(range(4), 2).count()  # the Python workers start here, not in the sync
        spark_start = time.perf_counter() - started
    sampler = MemorySampler(opensearch_pid=-1, interval=0.05)
    phases = Phases(counter, sampler)
    sampler.cut()
    if counter:
        urllib.request.urlopen(counter + COUNTS_PATH, timeout=600).read()  # what came before is not the sync's
    logger = logging.getLogger("icecdc")
    logger.setLevel(logging.INFO)
    logger.addHandler(_WritesStart(phases))

    def probe(point: PassPoint) -> None:
        phases.mark(str(point))
        if plan_only and point == PassPoint.PLANNED:
            raise _PlanOnly

    phases.last = started = time.perf_counter()
    result: dict[str, Any] = {}
    try:
        (outcome,) = sync(config, spark, [table], probe=probe)
        result = {"files": outcome.files, "snapshots": outcome.snapshots, "rows": outcome.changes.rows}
    except _PlanOnly:
        pass
    seconds = time.perf_counter() - started
    phases.mark("end")
    sampler.close()
    if spark is not None:
        spark.stop()
    return {"seconds": seconds, "spark_start_seconds": spark_start, **result, "events": phases.events}


# ----- the measurements (the parent)


@dataclass
class Scale:
    """What the measurements of one run share: sizes, the work directory, the sink, moto."""

    name: str
    sizes: Sizes
    workdir: Path
    sink: SinkServer
    moto: MotoServer
    catalog: SqlCatalog

    def config(self, label: str, tables: list[str], dynamodb: bool, **sections: Any) -> Path:
        """A config of `tables` whose state and indexes are `label`'s; written as JSON (for the
        children) and YAML (for the CLI), the JSON path returned."""
        raw = config_dict(self.workdir, self.sink.url, tables[0], label, label, **sections)
        raw["tables"] = [{"name": t, "index": f"{label}-{t.split('.')[-1]}".replace("_", "-")} for t in tables]
        if dynamodb:
            from icecdc.state.dynamodb import create_state_table

            create_state_table(f"state-{label}", REGION, self.moto.url)
            raw["state"] = {"type": "dynamodb", "table": f"state-{label}", "region": REGION, "endpoint_url": self.moto.url}
        path = self.workdir / f"{label}.json"
        path.write_text(json.dumps(raw))
        path.with_suffix(".yaml").write_text(yaml.safe_dump(raw))
        return path

    def child(self, argv: list[str], dynamodb: bool, module: str = "bench.scale") -> dict[str, Any]:
        """A child of `module` (its result: a line RESULT + JSON), timed and sampled from outside,
        with the servers' peaks."""
        with _server_peaks({"bench_sink": self.sink.pid, "moto": self.moto.pid}) as servers:
            run = whole_command([sys.executable, "-m", module, *argv], check=True)
        lines = [line for line in run.pop("stdout").splitlines() if line.startswith(RESULT)]
        result: dict[str, Any] = json.loads(lines[-1].removeprefix(RESULT))
        result["process"] = {k: run[k] for k in ("seconds", "largest_process_mib", "memory_mib")}
        result["servers_mib"] = servers if dynamodb else {"bench_sink": servers["bench_sink"]}
        return result

    def sync(self, config: Path, table: str, dynamodb: bool, plan_only: bool = False, spark: bool = False) -> dict[str, Any]:
        argv = ["run", str(config), table]
        argv += ["--plan-only"] if plan_only else []
        argv += ["--counter", self.moto.url] if dynamodb else []
        argv += ["--spark"] if spark else []
        return self.child(argv, dynamodb)

    def command(self, config: Path, *args: str, dynamodb: bool) -> dict[str, Any]:
        """`icecdc ARGS --config CONFIG.yaml`, a whole command, with its state requests on DynamoDB."""
        if dynamodb:
            self.moto.take()
        with _server_peaks({"bench_sink": self.sink.pid, "moto": self.moto.pid}) as servers:
            run = whole_command([str(ICECDC), *args, "--config", str(config.with_suffix(".yaml"))])
        run.pop("stdout")
        run = {k: run[k] for k in ("seconds", "largest_process_mib", "memory_mib")}
        run["servers_mib"] = servers
        if dynamodb:
            run["requests"] = self.moto.take()
        return run


@contextmanager
def _server_peaks(pids: dict[str, int]) -> Iterator[dict[str, float]]:
    """Peak RSS (MiB) of each server while the block runs."""
    peaks = dict.fromkeys(pids, 0.0)
    stop = threading.Event()

    def sample() -> None:
        while True:
            for name, pid in pids.items():
                with suppress(psutil.Error):
                    peaks[name] = max(peaks[name], round(psutil.Process(pid).memory_info().rss / 2**20, 1))
            if stop.wait(0.1):
                return

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peaks
    finally:
        stop.set()
        thread.join()


def measure_plans(s: Scale) -> dict[str, Any]:
    """Planning alone (a sync stopped once planned) of each table, on SQLite, a process each:
    the real tables and the metadata-only one; on DynamoDB the real tables up to `dynamodb_files`."""
    out: dict[str, Any] = {}
    tables = [(f"db.real_{n}", n) for n in s.sizes.real] + [(f"db.meta_{s.sizes.metadata}", s.sizes.metadata)]
    for name, files in tables:
        for dynamodb in (False, True):
            if dynamodb and (files > s.sizes.dynamodb_files or name.startswith("db.meta")):
                continue
            label = f"plan-{name.split('.')[-1]}-{'ddb' if dynamodb else 'sqlite'}".replace("_", "-")
            config = s.config(label, [name], dynamodb)
            run = s.sync(config, name, dynamodb, plan_only=True)
            plan = run["events"][0]
            out[label] = {
                "files": files,
                "state": "dynamodb" if dynamodb else "sqlite",
                "plan_seconds": plan["seconds"],
                "plan_requests": plan.get("requests"),
                "plan_rss_mib": plan["memory_mib"],
                "process": run["process"],
                "servers_mib": run["servers_mib"],
            }
            print(f"bench.scale: plan {label}: {plan['seconds']:.1f} s, {plan.get('requests', {}).get('total', '-')} requests")
    return out


def measure_exports(s: Scale) -> dict[str, Any]:
    """Each real table exported in `passes` capped passes (in process), on SQLite and, up to
    `dynamodb_files`, on DynamoDB; then a one-row commit and a sync with nothing to do; the
    largest on Spark; a one-row commit on the largest, commit → search."""
    from opensearchpy import OpenSearch

    from icecdc.verify import index_documents, table_documents

    out: dict[str, Any] = {}
    client = OpenSearch(s.sink.url)
    next_id = 10**9
    for files in s.sizes.real:
        name = f"db.real_{files}"
        for dynamodb in (False, True):
            if dynamodb and files > s.sizes.dynamodb_files:
                continue
            label = f"export-{files}-{'ddb' if dynamodb else 'sqlite'}"
            batch = {"max_files": max(1, files // s.sizes.passes)}
            config = s.config(label, [name], dynamodb, engine={"use": "in_process"}, batch=batch)
            run = s.sync(config, name, dynamodb)
            index = f"{label}-{name.split('.')[-1]}".replace("_", "-")
            expected = dict(table_documents(s.catalog.load_table(name), ("id",)))
            run["index_equals_table"] = index_documents(client, index) == expected
            run["split"] = passes_of(run["events"])
            next_id += 1
            one_row_commit(s.catalog, name, next_id)
            run["one_row_commit"] = s.sync(config, name, dynamodb)
            run["nothing_to_do"] = s.command(config, "sync", dynamodb=dynamodb)
            out[label] = run
            split = run["split"]
            print(
                f"bench.scale: {label}: {run['seconds']:.1f} s, {len(split['passes'])} passes, control plane "
                f"{split['control_plane_share']}, {split['requests']} requests, index == table: {run['index_equals_table']}"
            )
    if s.sizes.spark_files:
        name = f"db.real_{s.sizes.spark_files}"
        label = f"export-{s.sizes.spark_files}-spark"
        config = s.config(label, [name], False, engine={"use": "spark"}, spark=_spark_section())
        run = s.sync(config, name, False, spark=True)
        index = f"{label}-{name.split('.')[-1]}".replace("_", "-")
        expected = dict(table_documents(s.catalog.load_table(name), ("id",)))
        run["index_equals_table"] = index_documents(client, index) == expected
        run["split"] = passes_of(run["events"])
        data = sum(run["split"]["data_plane_seconds"])
        run["files_per_second"] = round(run["files"] / run["seconds"], 1) if run["seconds"] else None
        run["data_plane_ms_per_file"] = round(1000 * data / run["files"], 3) if run["files"] else None
        out[label] = run
        print(f"bench.scale: {label}: {run['seconds']:.1f} s, {run['files_per_second']} files/s")
    if s.sizes.real:  # on the largest real table, as its in-process export left it
        out["commit_to_search"] = commit_to_search(s, client, next_id + 1)
    return out


def _spark_section() -> dict[str, Any]:
    settings = spark_settings()
    return {"master": settings["spark.master"], "conf": {k: v for k, v in settings.items() if k != "spark.master"}}


def commit_to_search(s: Scale, client: Any, row_id: int) -> dict[str, Any]:
    """A one-row commit on the largest real table (exported on SQLite): seconds from the commit's
    return to its document searchable, by `icecdc sync` in process (a whole command); then
    another, synced with phases, to tell what dominates."""
    files = s.sizes.real[-1]
    name, label = f"db.real_{files}", f"export-{files}-sqlite"
    config = s.workdir / f"{label}.json"
    index = f"{label}-{name.split('.')[-1]}".replace("_", "-")
    since = time.perf_counter()
    one_row_commit(s.catalog, name, row_id)
    committed = time.perf_counter() - since

    def searchable() -> bool:
        return bool(client.exists(index=index, id=str(row_id)))

    run = whole_command([str(ICECDC), "sync", "--config", str(config.with_suffix(".yaml"))], searchable, since)
    run.pop("stdout")
    one_row_commit(s.catalog, name, row_id + 1)
    phased = s.sync(config, name, False)
    return {
        "files": files,
        "commit_seconds": round(committed, 3),
        "commit_to_search_seconds": run["watched_seconds"],
        "command_seconds": run["seconds"],
        "largest_process_mib": run["largest_process_mib"],
        "phases": passes_of(phased["events"]),
        "phased_seconds": phased["seconds"],
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        child = argparse.ArgumentParser(prog="python -m bench.scale run")
        child.add_argument("mode")
        child.add_argument("config")
        child.add_argument("table")
        child.add_argument("--plan-only", action="store_true")
        child.add_argument("--counter")
        child.add_argument("--spark", action="store_true")
        a = child.parse_args()
        print(RESULT + json.dumps(run_child(a.config, a.table, a.plan_only, a.counter, a.spark)), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=sorted(SIZES), default=os.environ.get("BENCH_SCALE") or "default")
    parser.add_argument("--only", nargs="*", choices=PARTS, default=list(PARTS))
    parser.add_argument("--output", type=Path)
    for size in ("real", "metadata", "rows_per_file", "passes", "dynamodb_files", "spark_files", "tables"):
        option = "--" + size.replace("_", "-")
        if size == "real":
            parser.add_argument(
                option, type=lambda v: tuple(int(n) for n in v.split(",") if n), help="files, comma separated ('': none)"
            )
        else:
            parser.add_argument(option, type=int, help="over the scale's (0: none, where it is a part's size)")
    args = parser.parse_args()
    sizes = replace(
        SIZES[args.scale], **{k: v for k, v in vars(args).items() if k in Sizes.__dataclass_fields__ and v is not None}
    )
    record(args.scale, sizes, args.only, args.output)


def record(scale: str, sizes: Sizes, only: list[str], output: Path | None = None, parts: Parts | None = None) -> None:
    """Run the parts `only` names (`parts`: in place of this module's) and write their results
    into `output` (docs/bench/scale.json) beside those of earlier runs of this scale; print the
    figures against their goals."""
    output = output or RESULTS / "scale.json"
    results = measure(scale, sizes, only, WORK / "scale", parts or {})
    # the parts of earlier runs of this scale stay beside this run's (`--only`), the figures over all
    previous = json.loads(output.read_text()) if output.exists() else {}
    merged = {**previous.get(scale, {}), **results}
    for part in ("tables", "export"):  # and within them, the tables and exports of earlier runs stay
        merged[part] = {**previous.get(scale, {}).get(part, {}), **results.get(part, {})}
    merged["figures"] = figures(merged, sizes.metadata)
    previous[scale] = merged
    output.write_text(json.dumps(previous, indent=1) + "\n")
    print(f"bench.scale: results in {output}")
    for row in merged["figures"]:
        print(f"  {row['figure']}: {row['value']} (goal {row['goal']}; met: {row['met']})")


def measure(scale: str, sizes: Sizes, only: list[str], workdir: Path, parts: Parts) -> dict[str, Any]:
    """Build the tables and run the parts `only` names; the results with their figures."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    os.environ.update(FAKE_AWS)  # the children inherit them
    catalog = open_lake(workdir)
    catalog.create_namespace("db")
    results: dict[str, Any] = {"scale": scale, "goals": GOALS, "machine": machine(), "tables": {}}
    results.update({f"{part}_sizes": asdict(sizes) for part in only})
    for files in sorted({*sizes.real, sizes.spark_files} - {0}) if {"plan", "export"} & set(only) else ():
        results["tables"][f"real_{files}"] = {
            "files": files,
            "seconds": round(real_table(catalog, f"db.real_{files}", files, sizes.rows_per_file), 1),
        }
    if "plan" in only:
        seconds = metadata_table(catalog, f"db.meta_{sizes.metadata}", sizes.metadata, sizes.rows_per_file, workdir / "links")
        results["tables"][f"meta_{sizes.metadata}"] = {"files": sizes.metadata, "seconds": round(seconds, 1)}
    print(f"bench.scale: tables {results['tables']}")
    with SinkServer.start() as sink, MotoServer.start(MOTO_MAX_MIB) as moto:
        s = Scale(scale, sizes, workdir, sink, moto, catalog)
        from bench.many_tables import measure_many_tables  # it builds on this module's tables and Scale

        parts = {"plan": measure_plans, "export": measure_exports, "many_tables": measure_many_tables, **parts}
        for part in only:
            started = time.perf_counter()
            results[part] = parts[part](s)
            results[f"{part}_seconds"] = round(time.perf_counter() - started, 1)
    results["figures"] = figures(results, sizes.metadata)
    return results


if __name__ == "__main__":
    main()

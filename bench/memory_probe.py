"""Memory of a rewrite larger than one task's budget: one UPDATE touching one row in every file of
an unpartitioned copy-on-write table, at two sizes 4x apart, each sync in a process tree of its own;
the peak RSS of the largest process and the time, larger over smaller (results key `probe`). The
layouts beside the sorted table are synced LAYOUT_RUNS times, their medians compared."""

from __future__ import annotations

import statistics
from typing import Any

from pyiceberg.expressions import In
from pyiceberg.table import Table

from bench.harness import isolated
from bench.harness.environment import config_dict, on_spark
from bench.harness.session import Bench, data_files
from bench.harness.tables import create_table, update_every_file
from icecdc.catalog import identifier_columns
from icecdc.config import Config, parse_config
from icecdc.documents import DocumentMapper, encode_document
from icecdc.reading.driver import file_tasks
from icecdc.reading.tasks import DealtRewrite, FileTask, RewriteTask
from icecdc.verify import index_documents

# Below the smaller table's rewrite at every scale, so both sizes take the path of a rewrite too large
# for one task: key ranges, or, without key bounds in the manifests, file by file through the shuffle.
PROBE_BUDGET = 256 * 2**10

# (the tables' key bounds, the batch settings of the sync): each variant syncs the same commit of its tables.
PROBE_VARIANTS: dict[str, tuple[bool, dict[str, int]]] = {
    "default": (True, {}),  # icecdc's default budget, whatever it is
    "cut": (True, {"max_rewrite_bytes": PROBE_BUDGET}),
    "no_bounds": (False, {"max_rewrite_bytes": PROBE_BUDGET}),
}


# The JVM's heap of `icecdc sync` unless `spark.conf` raises it: Spark's default, as icecdc's local
# engine sets none. The bench's 6g (both tools run under it) leaves G1 room to commit more heap the
# longer a sync runs, which is G1's sizing, not what the work holds (`ratio_jvm_heap_after_collection`).
SPARK_DEFAULT_HEAP = {"spark.driver.memory": "1g"}

# Layouts of the same table beside `sorted` (bench.harness.tables.create_table), synced with icecdc's
# defaults: (its identifier columns, the table's layout, Spark settings of the sync over the bench's).
# The `_driver_1g` ones keep Spark's default heap too: the layouts of a user who changes no setting.
PROBE_LAYOUTS: dict[str, tuple[list[str], str, dict[str, str]]] = {
    "spread": (["id"], "spread", {}),  # every file spans the whole key range
    "few_first": (["region", "id"], "few_first", {}),  # the first identifier column has 8 values
    "sorted_driver_1g": (["id"], "sorted", SPARK_DEFAULT_HEAP),
    "spread_driver_1g": (["id"], "spread", SPARK_DEFAULT_HEAP),
    "few_first_driver_1g": (["region", "id"], "few_first", SPARK_DEFAULT_HEAP),
    # Whether the JVM holds more or only sizes its heap larger over a longer run: Java's serial
    # collector keeps its heap near what is live (2026-11-26: 312-335 MiB at both sizes, where G1's
    # default grew 1.3x in the same time)
    "spread_serial_gc": (["id"], "spread", {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC"}),
}
# Syncs of each layout's one change (each from a checkpoint of its own), each process's median peak
# counted: single syncs put the JVM's peak on the spread layout at 1.18-1.46x from 10^6 to 4*10^6
# rows (2026-11-24 and 2026-11-26), the JVM sizing its heap differently from run to run.
LAYOUT_RUNS = 3


def memory_probe(bench: Bench) -> dict[str, Any]:
    """Each size of `scale.probe_rows`, each variant of PROBE_VARIANTS; the index must hold exactly the changed rows."""
    scale = bench.scale
    points = []
    for rows in scale.probe_rows:
        point: dict[str, Any] = {"rows": rows}
        for key_bounds in (True, False):
            name = f"db.probe_{rows}" + ("" if key_bounds else "_no_bounds")
            variants = {v: batch for v, (bounds, batch) in PROBE_VARIANTS.items() if bounds == key_bounds}
            create_table(bench.spark, name, rows, scale.probe_rows_per_file, partitioned=False, key_bounds=key_bounds)
            configs = {
                variant: config_dict(
                    bench.workdir,
                    bench.sink_url,
                    name,
                    f"probe-{rows}-{variant}",
                    state=f"probe-{rows}-{variant}",
                    export=False,
                    **on_spark(),
                    **({"batch": batch} if batch else {}),
                )
                for variant, batch in variants.items()
            }
            for config in configs.values():
                bench.sync(parse_config(config))  # the checkpoint: the current snapshot (nothing to write)
            files_before = data_files(bench.table(name))
            changed = update_every_file(bench.spark, name)
            table = bench.table(name)
            for variant, config in configs.items():
                parsed = parse_config(config)
                tasks = file_tasks(*bench.plan(parsed), ("id",), rewrite_budget=parsed.batch.max_rewrite_bytes)
                result = isolated.run_sync(config, name, f"probe-{rows}-{variant}")
                point[variant] = {
                    **result,
                    "data_files_before": files_before,
                    "data_files_after": data_files(table),
                    "rows_changed": len(changed),
                    "max_rewrite_bytes": parsed.batch.max_rewrite_bytes,
                    "planned": _planned(tasks),
                    "index_equals_changed_rows": index_documents(bench.sink_client, f"probe-{rows}-{variant}")
                    == _documents(table, parsed, changed),
                }
                bench.drop_index(f"probe-{rows}-{variant}", sink=True)
        for layout, (identifiers, laid, spark_conf) in PROBE_LAYOUTS.items():
            point[layout] = _layout(bench, rows, layout, identifiers, laid, spark_conf)
        points.append(point)
        print(
            f"bench: probe {rows:,} rows: " + ", ".join(_probe_line(v, point[v]) for v in (*PROBE_VARIANTS, *PROBE_LAYOUTS)),
            flush=True,
        )
    small, large = points[0], points[-1]
    return {
        "sizes": points,
        "ratio_rows": large["rows"] / small["rows"],
        **{
            variant: {
                "ratio_largest_process_rss": large[variant]["memory_mib"]["largest_process"]
                / small[variant]["memory_mib"]["largest_process"],
                "ratio_seconds": large[variant]["seconds"] / small[variant]["seconds"],
            }
            for variant in (*PROBE_VARIANTS, *PROBE_LAYOUTS)
        },
        # What the JVM's heap held after its collections, larger over smaller. Its RSS follows the
        # heap G1 commits, which it expands after a long pause, more often in a longer sync: it
        # moved 1.02-1.28x from run to run on the spread layout (2026-11-26/27); this stayed 0.92-1.10x.
        "ratio_jvm_heap_after_collection": {
            variant: large[variant]["jvm_heap_mib"]["after_collection_peak"]
            / small[variant]["jvm_heap_mib"]["after_collection_peak"]
            for variant in (*PROBE_VARIANTS, *PROBE_LAYOUTS)
        },
        "ratio_every_process": {
            variant: {
                part: large[variant]["memory_mib"][part] / small[variant]["memory_mib"][part]
                for part in ("driver_python", "jvm", "python_worker_largest")
                if small[variant]["memory_mib"][part]
            }
            for variant in (*PROBE_VARIANTS, *PROBE_LAYOUTS)
        },
    }


def _layout(
    bench: Bench, rows: int, layout: str, identifiers: list[str], laid: str, spark_conf: dict[str, str]
) -> dict[str, Any]:
    """One layout of the table, one row in every file updated, synced with icecdc's defaults (and
    `spark_conf` over the bench's Spark settings) in its own processes, LAYOUT_RUNS times: the
    median of each process's peak and of the time, with every run's."""
    name, label = f"db.probe_{rows}_{layout}", f"probe-{rows}-{layout}"
    create_table(bench.spark, name, rows, bench.scale.probe_rows_per_file, partitioned=False, layout=laid)
    labels = [f"{label}-{run}" for run in range(LAYOUT_RUNS)]
    configs = [config_dict(bench.workdir, bench.sink_url, name, run, state=run, export=False, **on_spark()) for run in labels]
    for config in configs:
        config["tables"][0]["identifier_columns"] = identifiers
        bench.sync(parse_config(config))  # the checkpoint: the current snapshot
    parsed = parse_config(configs[0])
    files_before = data_files(bench.table(name))
    changed = update_every_file(bench.spark, name)
    table = bench.table(name)
    tasks = file_tasks(*bench.plan(parsed), tuple(identifiers), rewrite_budget=parsed.batch.max_rewrite_bytes)
    expected = _documents(table, parsed, changed)
    runs, equal = [], []
    for config, run in zip(configs, labels, strict=True):
        runs.append(isolated.run_sync(config, name, run, spark_conf))
        equal.append(index_documents(bench.sink_client, run) == expected)
        bench.drop_index(run, sink=True)
    return {
        **runs[0],
        "seconds": statistics.median(r["seconds"] for r in runs),
        "memory_mib": _medians(runs, "memory_mib"),
        "jvm_heap_mib": _medians(runs, "jvm_heap_mib"),
        "runs": [{"seconds": r["seconds"], "memory_mib": r["memory_mib"], "jvm_heap_mib": r["jvm_heap_mib"]} for r in runs],
        "layout": laid,
        "identifier_columns": identifiers,
        "spark_conf": spark_conf,
        "data_files_before": files_before,
        "data_files_after": data_files(table),
        "rows_changed": len(changed),
        "max_rewrite_bytes": parsed.batch.max_rewrite_bytes,
        "planned": _planned(tasks),
        "index_equals_changed_rows": all(equal),
    }


def _medians(runs: list[dict[str, Any]], figures: str) -> dict[str, float]:
    """Each figure of the runs' `figures` (each process's peak, or the JVM's heap), its median over the runs."""
    return {name: statistics.median(run[figures][name] for run in runs) for name in runs[0][figures]}


def _probe_line(variant: str, result: dict[str, Any]) -> str:
    memory = result["memory_mib"]
    return f"{variant} {result['seconds']:.1f} s, largest process {memory['largest_process']:,.0f} MiB (jvm {memory['jvm']:,.0f}, worker {memory['python_worker_largest']:,.0f})"


def _planned(tasks: list[Any]) -> dict[str, int]:
    """How the planner cut the rewrite: whole into one task, into key ranges, or file by file (streamed through the shuffle)."""
    rewrites = [t for t in tasks if isinstance(t, RewriteTask | DealtRewrite)]
    whole = [t for t in rewrites if isinstance(t, RewriteTask) and t.key_range is None]
    dealt = [t for t in rewrites if isinstance(t, DealtRewrite)]
    files = [t for t in tasks if isinstance(t, FileTask)]
    return {
        "whole_rewrite_tasks": len(whole),
        "key_range_tasks": len(rewrites) - len(whole) - len(dealt),
        "dealt_ranges": sum(len(t.ranges) for t in dealt),  # each file read once, its rows dealt to these
        "rewrite_bytes": sum(
            {f.data_file.file_path: f.data_file.file_size_in_bytes for t in rewrites for f in t.removed + t.added}.values()
        ),
        "file_tasks": len(files),
        "file_task_bytes": sum(t.data_file.file_size_in_bytes for t in files),
    }


def _documents(table: Table, config: Config, ids: list[int]) -> dict[str, str]:
    """id → document text of the rows with these ids (what the index of a sync of their change holds)."""
    mapper = DocumentMapper(table.schema(), identifier_columns(table, config.tables[0]))
    documents = {}
    for batch in table.scan(row_filter=In("id", ids)).to_arrow_batch_reader():
        for row in batch.to_pylist():
            document = mapper.document(row)
            documents[mapper.document_id(document)] = encode_document(document)
    return documents

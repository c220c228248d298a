"""The bench's one report, from the JSON in docs/bench: the charts (PNG) and the results section of
docs/bench/README.md from results-*.json, and commands.md from commands.json.

Only the README's part between the markers is regenerated; the text around it is written by hand.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display on build machines
import matplotlib.pyplot as plt

from bench.harness.environment import RESULTS

START, END = "<!-- bench:results:start -->", "<!-- bench:results:end -->"
ORDER = ("smoke", "default", "full")
MEMORY_PARTS = (
    "driver_python",
    "jvm",
    "jvm_heap",
    "spark_task_peak",
    "python_workers",
    "python_worker_largest",
    "largest_process",
    "opensearch",
    "bench_sink",
)
CHART_PARTS = ("driver_python", "jvm_heap", "python_workers", "opensearch", "bench_sink")  # RSS of a JVM only grows


def write_all() -> None:
    """Every chart, the README's results section, and commands.md, from the JSON already in docs/bench."""
    runs = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("results-*.json"))]
    runs.sort(key=lambda r: ORDER.index(r["scale"]) if r["scale"] in ORDER else len(ORDER))
    for run in runs:
        _charts(run)
    _readme(runs)
    if (RESULTS / "commands.json").exists():
        write_commands(RESULTS / "commands.json")


def _charts(run: dict[str, Any]) -> None:
    scale = run["scale"]
    if "compare" in run:
        _compare_chart(run["compare"], RESULTS / f"compare-{scale}.png")
    if "sink" in run:
        _sink_chart(run["sink"], RESULTS / f"sink-{scale}.png")
    if "scaling" in run:
        _scaling_chart(run["scaling"], RESULTS / f"scaling-{scale}.png")
    if "batching" in run:
        _batching_chart(run["batching"], RESULTS / f"batching-{scale}.png")
    if "throughput" in run:
        _throughput_chart(run["throughput"], RESULTS / f"throughput-{scale}.png")
    if "probe" in run:
        _probe_chart(run["probe"], RESULTS / f"probe-{scale}.png")
    _memory_chart(run, RESULTS / f"memory-{scale}.png")


def _save(figure: Any, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def _compare_chart(data: dict[str, Any], path: Path) -> None:
    rounds = data["rounds"]
    figure, axes = plt.subplots(figsize=(6, 3.2))
    x = range(len(rounds))
    axes.bar([i - 0.2 for i in x], [r["icecdc"]["seconds"] for r in rounds], width=0.4, label="icecdc")
    axes.bar([i + 0.2 for i in x], [r["peer"]["seconds"] for r in rounds], width=0.4, label="create_changelog_view + bulk")
    axes.set_xticks(list(x), [f"sync {i + 1}\n×{r['ratio']:.2f}" for i, r in enumerate(rounds)])
    axes.set_ylabel("seconds")
    axes.set_title(f"{data['snapshots_per_sync']} snapshots per sync, {data['table']['rows']:,} rows")
    axes.legend()
    _save(figure, path)


def _sink_chart(sink: dict[str, Any], path: Path) -> None:
    labels = ["icecdc export\n(sync)", "icecdc sink\nalone", "raw bulk", "raw parallel_bulk"]
    raw = sink["raw_docs_per_second"]
    values = [sink["icecdc_export_docs_per_second"], raw["icecdc_write_documents"], raw["bulk"], raw["parallel_bulk_2_threads"]]
    figure, axes = plt.subplots(figsize=(6, 3.2))
    axes.bar(labels, values, color=["C0", "C0", "C1", "C1"])
    axes.set_ylabel("documents / second")
    axes.set_title(f"{sink['documents']:,} documents, one OpenSearch")
    _save(figure, path)


def _scaling_chart(data: dict[str, Any], path: Path) -> None:
    sizes = data["sizes"]
    rows = [s["rows"] for s in sizes]
    figure, left = plt.subplots(figsize=(6, 3.2))
    left.plot(rows, [s["seconds_median"] for s in sizes], "o-", color="C0", label="sync seconds")
    left.set_xscale("log")
    left.set_ylim(bottom=0)
    left.set_xlabel("table rows")
    left.set_ylabel("seconds (median)")
    right = left.twinx()
    right.plot(rows, [s["data_bytes_read"] / 2**20 for s in sizes], "s--", color="C1", label="data MiB read")
    right.set_ylim(bottom=0)
    right.set_ylabel("MiB read")
    left.set_title("a one-row update")
    figure.legend(loc="lower right")
    _save(figure, path)


def _batching_chart(data: dict[str, Any], path: Path) -> None:
    figure, axes = plt.subplots(figsize=(6, 3.2))
    axes.bar(
        ["one sync", f"{data['snapshots']} syncs"],
        [data["one_sync"]["seconds"], data["one_sync_per_snapshot"]["seconds"]],
        color=["C0", "C1"],
    )
    axes.set_ylabel("seconds")
    axes.set_title(f"{data['snapshots']} snapshots of {data['changes_per_snapshot']} changes")
    _save(figure, path)


def _throughput_chart(data: dict[str, Any], path: Path) -> None:
    figure, axes = plt.subplots(figsize=(6, 3.2))
    kinds = ("export", "update")
    for offset, (tool, label) in enumerate((("icecdc", "icecdc"), ("peer", "peer (Spark + bulk)"))):
        axes.bar(
            [i + (offset - 0.5) * 0.4 for i in range(len(kinds))],
            [data[k][tool]["rows_per_second_per_core"] for k in kinds],
            width=0.4,
            label=label,
        )
    axes.set_xticks(range(len(kinds)), ["export", "update of every file\n(rows of the rewritten files)"])
    axes.set_ylabel("rows / second / core")
    axes.set_title(f"{data['table']['rows']:,} rows, bench sink, local[{data['cores']}]")
    axes.legend()
    _save(figure, path)


def _probe_chart(data: dict[str, Any], path: Path) -> None:
    sizes = data["sizes"]
    figure, (memory, seconds) = plt.subplots(1, 2, figsize=(8, 3.2))
    variants = _variants(data)
    width = 0.8 / len(variants)
    for offset, variant in enumerate(variants):
        xs = [i + (offset - (len(variants) - 1) / 2) * width for i in range(len(sizes))]
        memory.bar(xs, [s[variant]["memory_mib"]["largest_process"] for s in sizes], width=width, label=PROBE_LABELS[variant])
        seconds.bar(xs, [s[variant]["seconds"] for s in sizes], width=width, label=PROBE_LABELS[variant])
    for axes, label in ((memory, "largest process, peak RSS MiB"), (seconds, "sync seconds")):
        axes.set_xticks(range(len(sizes)), [f"{s['rows']:,} rows" for s in sizes])
        axes.set_ylabel(label)
    tallest = max(s[v]["memory_mib"]["largest_process"] for s in sizes for v in variants)
    memory.set_ylim(top=tallest * 1.5)  # room for the legend above the bars
    memory.legend(fontsize=6, loc="upper center")
    seconds.set_yscale("log")
    figure.suptitle("one row updated in every file of an unpartitioned table")
    _save(figure, path)


PROBE_LABELS = {
    "default": "icecdc's default budget",
    "cut": "budget 256 KiB (below both rewrites)",
    "no_bounds": "budget 256 KiB, no bounds of the key in the manifests",
    "spread": "default budget, every file spanning the whole key range",
    "few_first": "default budget, identifier (region, id), region of 8 values in every file",
    "sorted_driver_1g": "every default (spark.driver.memory 1g, Spark's), files sorted by the key",
    "spread_driver_1g": "every default (spark.driver.memory 1g, Spark's), every file spanning the whole key range",
    "few_first_driver_1g": "every default (spark.driver.memory 1g, Spark's), identifier (region, id), region of 8 values in every file",
    "spread_serial_gc": "default budget, every file spanning the whole key range, the JVM's serial collector",
}


def _variants(probe: dict[str, Any]) -> list[str]:
    return [v for v in PROBE_LABELS if v in probe]


def _memory_phases(run: dict[str, Any]) -> dict[str, dict[str, float]]:
    phases: dict[str, dict[str, float]] = {}
    sink = run.get("sink")
    if sink:
        phases["icecdc export"] = sink["export"]["icecdc"]["memory_mib"]
        phases["peer load"] = sink["export"]["peer_load"]["memory_mib"]
    compare = run.get("compare")
    if compare:
        phases["icecdc sync"] = _max_memory(r["icecdc"]["memory_mib"] for r in compare["rounds"])
        phases["peer sync"] = _max_memory(r["peer"]["memory_mib"] for r in compare["rounds"])
    scaling = run.get("scaling")
    if scaling:
        largest = scaling["sizes"][-1]
        phases[f"one row, {largest['rows']:,}"] = _max_memory(s["memory_mib"] for s in largest["samples"])
    batching = run.get("batching")
    if batching:
        phases["batched sync"] = batching["one_sync"]["memory_mib"]
        phases["per-snapshot syncs"] = batching["one_sync_per_snapshot"]["memory_mib"]
    throughput = run.get("throughput")
    if throughput:
        for kind, tool, label in (
            ("export", "icecdc", "icecdc export (sink)"),
            ("export", "peer", "peer load (sink)"),
            ("update", "icecdc", "icecdc update (sink)"),
            ("update", "peer", "peer update (sink)"),
        ):
            phases[label] = throughput[kind][tool]["memory_mib"]
    return phases


def _max_memory(items: Any) -> dict[str, float]:
    peaks: dict[str, float] = {}
    for item in items:
        for part, value in item.items():
            peaks[part] = max(peaks.get(part, 0.0), value)
    return peaks


def _memory_chart(run: dict[str, Any], path: Path) -> None:
    phases = _memory_phases(run)
    if not phases:
        return
    figure, axes = plt.subplots(figsize=(7, 3.6))
    names = list(phases)
    parts = list(CHART_PARTS)
    width = 0.8 / len(parts)
    for offset, part in enumerate(parts):
        axes.bar(
            [i + (offset - (len(parts) - 1) / 2) * width for i in range(len(names))],
            [phases[n].get(part, 0) for n in names],
            width=width,
            label=part,
        )
    axes.set_xticks(range(len(names)), names, rotation=20, ha="right")
    axes.set_ylabel("peak, MiB (RSS; jvm_heap: heap in use)")
    axes.legend()
    _save(figure, path)


def _readme(runs: list[dict[str, Any]]) -> None:
    path = RESULTS / "README.md"
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text:
        text += f"\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    body = "\n".join(_run_section(run) for run in runs)
    path.write_text(f"{head}{START}\n{body}\n{END}{tail}")


def _run_section(run: dict[str, Any]) -> str:
    m = run["machine"]
    lines = [
        f"### Scale `{run['scale']}`",
        "",
        (
            f"{m['date']} · {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB · Python {m['python']}, {m['java']}, "
            f"pyspark {m['pyspark']}, pyiceberg {m['pyiceberg']}, {m['iceberg_spark_runtime']}, opensearch-py {m['opensearch_py']}, "
            f"osmem-server {m['osmem_server']} · Spark `{run['spark']['spark.master']}`, "
            f"{run['spark']['spark.sql.shuffle.partitions']} shuffle partitions, driver memory {run['spark']['spark.driver.memory']}"
        ),
        *_dates(run),
        "",
        "| measurement | icecdc | reference | ratio | goal |",
        "|---|---|---|---|---|",
    ]
    lines += _goal_rows(run)
    lines += ["", _memory_table(run), ""]
    lines += _probe_table(run)
    lines += _export_2m_table(run)
    lines += _spark_table(run)
    lines += [
        f"![{name}]({name}-{run['scale']}.png)"
        for name in ("compare", "sink", "scaling", "batching", "throughput", "probe", "memory")
        if (RESULTS / f"{name}-{run['scale']}.png").exists()
    ]
    return "\n".join(lines) + "\n"


def _dates(run: dict[str, Any]) -> list[str]:
    """When each measurement ran, where partial runs (`--only`) put measurements of several runs together."""
    dates, cpus = run.get("dates") or {}, run.get("cpus") or {}
    if len(set(dates.values())) <= 1:
        return []
    measured = [f"{name} {date}" + (f" ({cpus[name]})" if name in cpus else "") for name, date in dates.items()]
    return ["", "Measured: " + ", ".join(measured) + "."]


def _goal_rows(run: dict[str, Any]) -> list[str]:
    rows = []
    c = run.get("compare")
    if c:
        r = c["ratio_icecdc_to_peer"]
        rows.append(
            f"| 1. {c['rounds'].__len__()} syncs of {c['snapshots_per_sync']} snapshots, {c['table']['rows']:,} rows, "
            f"{c['changes_per_snapshot']} changes/snapshot | {c['icecdc_seconds']:.1f} s | create_changelog_view + bulk: "
            f"{c['peer_seconds']:.1f} s | **{r:.2f}** | ≤ 0.5 {_met(r <= 0.5)} |"
        )
    s = run.get("sink")
    if s:
        e = s["export"]
        rows.append(
            f"| initial load, {s['documents']:,} rows | {e['icecdc']['seconds']:.1f} s | Spark read + bulk: {e['peer_load']['seconds']:.1f} s | "
            f"{s['ratio_export_icecdc_to_peer_load']:.2f} | — |"
        )
        rows.append(
            f"| 2. export, {s['documents']:,} documents | {s['icecdc_export_docs_per_second']:,.0f} docs/s | raw bulk ceiling "
            f"{s['ceiling_docs_per_second']:,.0f} docs/s | **{s['ratio_sync_to_ceiling']:.2f}** | ≥ 0.8 {_met(s['ratio_sync_to_ceiling'] >= 0.8)} |"
        )
        rows.append(
            f"| 2'. icecdc's sink alone (no Spark), same documents | {s['raw_docs_per_second']['icecdc_write_documents']:,.0f} docs/s | "
            f"{s['ceiling_docs_per_second']:,.0f} docs/s | {s['ratio_icecdc_sink_alone_to_ceiling']:.2f} | — |"
        )
    sc = run.get("scaling")
    if sc:
        small, large = sc["sizes"][0], sc["sizes"][-1]
        rt = sc["ratio_time_largest_to_smallest"]
        rows.append(
            f"| 3. one-row update, {small['rows']:,} → {large['rows']:,} rows ({small['data_files']} → {large['data_files']} files) | "
            f"{small['seconds_median']:.2f} s → {large['seconds_median']:.2f} s | — | **{rt:.2f}** time, "
            f"{sc['ratio_bytes_largest_to_smallest']:.2f} bytes | ≤ 1.3 {_met(rt <= 1.3)} |"
        )
    b = run.get("batching")
    if b:
        rows.append(
            f"| 4. {b['snapshots']} snapshots in one sync vs one sync each | {b['one_sync']['seconds']:.1f} s | "
            f"{b['one_sync_per_snapshot']['seconds']:.1f} s | **{b['ratio_batched_to_per_snapshot']:.3f}** | — |"
        )
    t = run.get("throughput")
    if t:
        rows += _throughput_rows(t)
    p = run.get("probe")
    if p:
        rows += _probe_rows(p)
    x = run.get("export")
    if x:
        rows += _export_rows(x)
    rows += _spread_rows(run.get("export_10m"))
    pr = run.get("projection")
    if pr:
        ex, inc = pr["samples"]["excluded"][-1], pr["samples"]["included"][-1]
        rows.append(
            f"| 10. UPDATE of every row, {pr['rows']:,} rows: a column the index does not hold vs one it holds | "
            f"{pr['excluded_seconds_median']:.2f} s, {ex['indexed']:,} written | {pr['included_seconds_median']:.2f} s, "
            f"{inc['indexed']:,} written | **{pr['ratio_excluded_to_included']:.2f}** | — |"
        )
    e = run.get("export_2m")
    if e:
        rows.append(
            f"| 8. export of {e['rows']:,} rows, bench sink, {e['data_files']} files, own processes | "
            f"{e['seconds']:.1f} s, {e['rows_per_second']:,.0f} rows/s ({e['rows_per_second_per_core']:,.0f} per core) | — | — | "
            f"index == table {_met(e['index_equals_table'])} |"
        )
    return rows


def _throughput_rows(t: dict[str, Any]) -> list[str]:
    """6: rows/s per core of each tool on the bench sink."""
    table = f"{t['table']['rows']:,} rows, {t['table']['data_files']} files"
    export, update = t["export"], t["update"]
    check = t["check"]
    ok = check["icecdc_index_equals_table"] and check.get("same_ids", check.get("peer_same_ids"))
    export_row = (
        f"| 6a. export, {table}, bench sink | {export['icecdc']['rows_per_second_per_core']:,.0f} rows/s/core "
        f"({export['icecdc']['seconds']:.1f} s) | Spark read + bulk: {export['peer']['rows_per_second_per_core']:,.0f} rows/s/core "
        f"({export['peer']['seconds']:.1f} s) | **{export['ratio_icecdc_to_peer_rows_per_second']:.2f}** | — |"
    )
    update_row = (
        f"| 6b. copy-on-write update of one row in each of the {t['table']['data_files']} files "
        f"({update['rows_in_rewritten_files']:,} rows rewritten, {update['rows_changed']} changed), bench sink | "
        f"{update['icecdc']['rows_per_second_per_core']:,.0f} rows/s/core ({update['icecdc']['seconds']:.1f} s) | "
        f"create_changelog_view + bulk: {update['peer']['rows_per_second_per_core']:,.0f} rows/s/core ({update['peer']['seconds']:.1f} s) | "
        f"**{update['ratio_icecdc_to_peer_rows_per_second']:.2f}** | index == table {_met(ok)} |"
    )
    return [export_row, update_row]


def _export_rows(x: dict[str, Any]) -> list[str]:
    """9: exports against the peer's load and the ceiling; whole commands; the in-process engine on 1 and 2 cores."""
    goals, rows = x["goals"], []
    for size in x["sizes"]:
        ice, peer, ceiling = size["icecdc"], size["peer"], size["ceiling"]
        ratio, ok = size["ratio_icecdc_to_peer"], size["check"]["icecdc_index_equals_table"] and size["check"]["same_ids"]
        rows.append(
            f"| 9a. export, {size['rows']:,} rows, {size['data_files']} files, bench sink, Spark | "
            f"{ice['rows_per_second_per_core']:,.0f} rows/s/core ({ice['seconds']:.1f} s; {size['icecdc_of_ceiling']:.2f} of the ceiling) | "
            f"Spark read + bulk: {peer['rows_per_second_per_core']:,.0f} ({peer['seconds']:.1f} s; {size['peer_of_ceiling']:.2f}); "
            f"ceiling (Parquet decode + JSON, 1 core, no network) {ceiling['rows_per_second']:,.0f} | "
            f"**{ratio:.2f}** | ≥ {goals['per_core']} {_met(ratio >= goals['per_core'])}; index == table {_met(ok)} |"
        )
    w = x["whole"]
    rows.append(
        f"| 9b. whole `icecdc sync` of the {w['rows']:,}-row export vs the peer's whole job (`--load`), start to exit | "
        f"{w['icecdc']['seconds']:.1f} s, largest process {w['icecdc']['largest_process_mib']:,} MiB | "
        f"{w['peer']['seconds']:.1f} s, largest process {w['peer']['largest_process_mib']:,} MiB | **{w['ratio']:.2f}** | "
        f"≤ {goals['whole']} {_met(w['ratio'] <= goals['whole'])} |"
    )
    i = x["in_process"]
    one, two = i["one_core"], i["two_cores"]
    runs = i.get("seconds")  # several runs of each (medians compared), or one
    spans = {
        n: f" (median of {i['runs']}: {min(runs[n]):.1f}–{max(runs[n]):.1f})" if runs else "" for n in ("1_cores", "2_cores")
    }
    rows.append(
        f"| 9c. in-process `icecdc sync` of the {i['rows']:,}-row export, 2 cores vs 1 (`taskset`){_sink_named(i)} | "
        f"{two['seconds']:.1f} s{spans['2_cores']}, {_workers(two['memory_mib'])} | "
        f"1 core: {one['seconds']:.1f} s{spans['1_cores']}, largest process {one['memory_mib']['largest_process']:,} MiB | "
        f"**{i['speedup']:.2f}×** faster{_storing_sink(i.get('storing_sink'))}{_machine_speedup(i.get('machine'))} | "
        f"≥ {goals['in_process']} {_met(i['speedup'] >= goals['in_process'])} |"
    )
    return rows + _spread_rows(x.get("spread_update"))


def _sink_named(in_process: dict[str, Any]) -> str:
    """Which sink the in-process runs of the goal wrote to (the storing bench sink before 2026-11-26's second run)."""
    return ", acknowledging sink" if in_process.get("sink") == "acknowledging" else ""


def _storing_sink(stored: dict[str, Any] | None) -> str:
    """The same runs into the storing bench sink, whose one lock queues the workers' requests."""
    if stored is None:
        return ""
    one, two = stored["one_core"]["seconds"], stored["two_cores"]["seconds"]
    return f"; into the storing bench sink {stored['speedup']:.2f}× ({one:.1f} → {two:.1f} s)"


def _machine_speedup(machine: dict[str, Any] | None) -> str:
    """This machine's own 2-core speedup on the same work, measured beside the runs (since 2026-11-26)."""
    if machine is None:
        return ""
    return f"; this machine's own: {machine['speedup']:.2f}× (Parquet decode + JSON, once on one core, twice at once on two)"


def _spread_rows(spread: dict[str, Any] | None) -> list[str]:
    """9d: the largest export and its 1 % update, own processes."""
    rows: list[str] = []
    if spread:
        for phase in ("export", "update"):
            r, m = spread[phase], spread[phase]["memory_mib"]
            rows.append(
                f"| 9d. {spread['rows']:,} rows, Spark, own processes: "
                + (
                    f"export of {r['files']} files"
                    if phase == "export"
                    else f"1 % of the rows updated in every file ({r['rows_read']:,} rows read; {spread['data_files']} files after)"
                )
                + f" | {r['seconds']:.1f} s; peak RSS: "
                f"jvm {m['jvm']:,.0f}, largest Python worker {m['python_worker_largest']:,.0f}, driver {m['driver_python']:,.0f} MiB | — | — | — |"
            )
    return rows


def _workers(memory: dict[str, Any]) -> str:
    """An in-process sync's workers as measured: their largest, or none (a pass too small for them)."""
    largest = memory["python_worker_largest"]
    return f"largest worker process {largest:,} MiB" if largest else "no worker processes (a pass too small for them)"


def _probe_rows(p: dict[str, Any]) -> list[str]:
    """7: the memory probe's ratios, larger table over smaller, per variant."""
    small, large = p["sizes"][0], p["sizes"][-1]
    rows = []
    for variant in _variants(p):
        label = PROBE_LABELS[variant]
        memory, seconds = p[variant]["ratio_largest_process_rss"], p[variant]["ratio_seconds"]
        every = p.get("ratio_every_process", {}).get(variant, {})
        each = ", ".join(f"{part} {ratio:.2f}" for part, ratio in every.items())
        heap = p.get("ratio_jvm_heap_after_collection", {}).get(variant)
        each += f"; jvm heap after collections {heap:.2f}" if heap else ""
        worst = max([memory, *every.values()])
        rows.append(
            f"| 7. one row in every file, unpartitioned, {small['rows']:,} → {large['rows']:,} rows, {label}{_runs(large[variant])} | "
            f"largest process {small[variant]['memory_mib']['largest_process']:,.0f} → {large[variant]['memory_mib']['largest_process']:,.0f} MiB; "
            f"{small[variant]['seconds']:.1f} → {large[variant]['seconds']:.1f} s | — | **{memory:.2f}** memory"
            f"{f' (each process: {each})' if each else ''}, **{seconds:.2f}** time ({p['ratio_rows']:.0f}× rows) | "
            f"memory of every process ≤ 1.25 {_met(worst <= 1.25)}, time ≤ {p['ratio_rows']:.0f} {_met(seconds <= p['ratio_rows'])} |"
        )
    return rows


def _runs(result: dict[str, Any]) -> str:
    """How many syncs a probe figure is the median of, when more than one."""
    runs = result.get("runs")
    return f", median of {len(runs)} syncs" if runs else ""


def _probe_table(run: dict[str, Any]) -> list[str]:
    """Each probe sync: its path, time and each process's peak RSS."""
    probe = run.get("probe")
    if not probe:
        return []
    lines = [
        "| 7. probe sync (own processes) | rewrite read as | seconds | largest process | jvm | jvm heap after collections, peak | largest Python worker | Python workers, summed | driver_python | index == changed rows |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size in probe["sizes"]:
        for variant in _variants(probe):
            r = size[variant]
            memory = r["memory_mib"]
            jvm = [run["memory_mib"]["jvm"] for run in r.get("runs", [])]
            span = f" ({min(jvm):,.0f}–{max(jvm):,.0f})" if jvm else ""
            lines.append(
                f"| {size['rows']:,} rows, {r['data_files_before']} → {r['data_files_after']} files, {PROBE_LABELS[variant]}{_runs(r)} | "
                f"{_path(r['planned'], r['max_rewrite_bytes'])} | {r['seconds']:.1f} | "
                f"{memory['largest_process']:,.0f} | {memory['jvm']:,.0f}{span} | {_heap_after(r)} | {memory['python_worker_largest']:,.0f} | "
                f"{memory['python_workers']:,.0f} | {memory['driver_python']:,.0f} | {_met(r['index_equals_changed_rows'])} |"
            )
    return [*lines, ""]


def _heap_after(r: dict[str, Any]) -> str:
    """The most the JVM's heap held after a collection (its GC log), median of the runs; — before it was recorded."""
    heap = r.get("jvm_heap_mib")
    return f"{heap['after_collection_peak']:,.0f}" if heap else "—"


def _path(planned: dict[str, int], budget: int) -> str:
    """How the planner cut a rewrite of the probe."""
    size = f"{planned['rewrite_bytes'] / 2**20:.1f} MiB"
    limit = f"budget {budget / 2**20:g} MiB"
    parts = []
    if planned["whole_rewrite_tasks"]:
        parts.append(f"{planned['whole_rewrite_tasks']} task, whole ({size} ≤ {limit})")
    if planned["key_range_tasks"]:
        parts.append(f"{planned['key_range_tasks']} tasks by key range ({size} > {limit})")
    if planned.get("dealt_ranges"):
        parts.append(f"each file read once, its rows dealt to {planned['dealt_ranges']} key ranges ({size} > {limit})")
    if planned["file_tasks"]:
        parts.append(
            f"{planned['file_tasks']} file tasks, carryovers cancelled after the shuffle ({planned['file_task_bytes'] / 2**20:.1f} MiB > {limit})"
        )
    return "; ".join(parts)


def _export_2m_table(run: dict[str, Any]) -> list[str]:
    e = run.get("export_2m")
    if not e:
        return []
    m = e["memory_mib"]
    return [
        "| 8. export of 2,000,000 rows (`make bench-export-2m`) | sync, s | with Spark's start, s | rows/s | rows/s/core | largest process | jvm | largest Python worker | Python workers, summed | driver_python |",
        "|---|---|---|---|---|---|---|---|---|---|",
        (
            f"| {e['data_files']} files, {e['table_bytes'] / 2**20:.0f} MiB, bench sink | {e['seconds']:.1f} | {e['wall_seconds_with_start']:.1f} | "
            f"{e['rows_per_second']:,.0f} | {e['rows_per_second_per_core']:,.0f} | {m['largest_process']:,.0f} | {m['jvm']:,.0f} | "
            f"{m['python_worker_largest']:,.0f} | {m['python_workers']:,.0f} | {m['driver_python']:,.0f} |"
        ),
        "",
    ]


def _met(ok: bool) -> str:
    return "✅" if ok else "❌ not met"


def _spark_table(run: dict[str, Any]) -> list[str]:
    """Spark's event log for one sync of each tool in measurement 1 (the last round)."""
    rounds = (run.get("compare") or {}).get("rounds") or []
    if not rounds or "spark" not in rounds[-1]["icecdc"]:
        return []
    lines = [
        "| Spark event log, last sync of 1 | jobs | stages | tasks | executor run, s | shuffle written, MiB | peak execution memory of a task, MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for tool in ("icecdc", "peer"):
        m = rounds[-1][tool]["spark"]
        lines.append(
            f"| {tool} | {m.get('jobs', 0):.0f} | {m.get('stages', 0):.0f} | {m.get('tasks', 0):.0f} | "
            f"{m.get('executor_run_s', 0):.2f} | {m.get('shuffle_written_mib', 0):.2f} | {m.get('peak_execution_memory_mib', 0):.0f} |"
        )
    return [*lines, ""]


def _memory_table(run: dict[str, Any]) -> str:
    phases = _memory_phases(run)
    lines = [
        "| 5. peak memory, MiB (RSS; jvm_heap: heap in use; spark_task_peak: a task's peak execution memory) | "
        + " | ".join(MEMORY_PARTS)
        + " |",
        "|---|" + "---|" * len(MEMORY_PARTS),
    ]
    for name, peaks in phases.items():
        lines.append(f"| {name} | " + " | ".join(f"{peaks[p]:,.0f}" if p in peaks else "—" for p in MEMORY_PARTS) + " |")
    return "\n".join(lines)


# ----- docs/bench/commands.md, from commands.json (bench/whole_commands.py)


def write_commands(path: Path) -> str:
    """The Markdown of the whole-commands results in `path`, written beside it (`.md`); returned."""
    text = commands_markdown(json.loads(path.read_text()))
    path.with_suffix(".md").write_text(text)
    return text


def commands_markdown(r: dict[str, Any]) -> str:
    m, load = r["machine"], r["load_average_1min"]
    lines = [
        "# Whole commands: icecdc sync on each engine, against the peer's job, commit to searchable",
        "",
        (
            f"`{r['command']}` ([bench/whole_commands.py](../../bench/whole_commands.py); every figure in [commands.json](commands.json)), "
            f"{m['date']}, {r['minutes']} min. {m['cpu']}, {m['cores']} cores shared with other work, {m['memory_gib']} GiB; "
            f"Python {m['python']}, {m['java']}, pyspark {m['pyspark']}, pyiceberg {m['pyiceberg']}, {m['iceberg_spark_runtime']}. "
            f"**Load average** (1 min, sampled every 5 s): {load['min']:.1f}–{load['max']:.1f}, mean {load['mean']:.1f}."
        ),
        "",
        (
            "Every figure is a whole command, process start to exit, each in a process of its own, writing into the bench "
            "sink (bench/harness/sink.py); the two sides of a ratio ran back to back on the same commit, alternating which "
            "went first. Ratios are sums of seconds, this side over the other. Memory: the peak RSS of each part of the "
            "command's process tree (driver, JVM, Spark's Python workers), summed."
        ),
        "",
        "| part | measurement | icecdc, mean a sync | other side, mean a sync | ratio (sums) | goal |",
        "|---|---|---|---|---|---|",
        *_summary_rows(r),
        "",
        *_engines_md(r["engines"]),
        *_peer_md(r["peer"]),
        *_searchable_md(r["searchable"]),
        *_where_md(r),
    ]
    return "\n".join(lines) + "\n"


def _within(ratio: float, goal: float) -> str:
    return f"≤ {goal} {'✅' if ratio <= goal else '❌ not met'}"


def _summary_rows(r: dict[str, Any]) -> list[str]:
    rows = []
    e = r["engines"]
    for kind, s in e["summary"].items():
        mine, theirs = statistics.mean(s["in_process_seconds"]), statistics.mean(s["spark_seconds"])
        rows.append(
            f"| engines | `icecdc sync` of {_commit_names(e)[kind]}, {e['table']['rows']:,} rows ({len(s['spark_seconds'])} syncs) | "
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
                f"| peer | {workload} rows, {what} ({len(items)} syncs) | {mine:.1f} s | peer's job {theirs:.1f} s | "
                f"**{w[part]['ratio']:.2f}** | {_within(w[part]['ratio'], w[part]['goal'])} |"
            )
    s = r["searchable"]
    medians = s["median_seconds"]
    rows.append(
        f"| searchable | commit → searchable, one-row commit, median | in-process {medians['in_process']:.2f} s | "
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
        f"## Engines: `icecdc sync`, forced in-process vs forced Spark ({t['rows']:,} rows, copy-on-write, partitioned)",
        "",
        f"The table: {_layout_text(t)}.",
        "",
        (
            "Both engines sync the same commit from the same checkpoint (a state store and an index each; no export: the "
            "indexes hold the changed rows). A MERGE is 60 % updates, 10 % partition moves, 10 % deletes, 20 % inserts "
            "(bench/harness/tables.py `Mutator`); recent rows are the newest tenth of ids."
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
        "## Against the peer: `icecdc sync` (engine auto) vs the peer's job",
        "",
        (
            "The peer: `python -m bench.harness.peer` (bench/harness/peer.py), a fresh Spark with Iceberg's runtime as a user "
            "would submit it, `create_changelog_view` with compute_updates, the net change per key, bulk from the "
            "executors; unversioned writes. Both start from their own initial load (icecdc's export, the "
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
        f"{t['data_files']} files as bench/harness/tables.py lays out blocks of {t['rows_per_file']:,} ids (a block may be split "
        f"over two files), median {t['rows_per_file_median']:,} rows a file, the largest {t['rows_per_file_max']:,}; "
        f"{t['data_files_after']} files after the commits"
    )


def _engine(run: dict[str, Any]) -> str:
    return f"{run.get('engine', '?')}, {run.get('rows_read', 0):,}"


def _searchable_md(s: dict[str, Any]) -> list[str]:
    lines = [
        "## Commit to searchable, local path",
        "",
        (
            f"On the engines' {s['table_rows']:,}-row table: {s['commit']}; seconds until the sink answers the document's new "
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
            f"| `icecdc sync`, {engine}, one-row commit (engines) | {total:.2f} | the sync's own time as icecdc prints it "
            f"{inside:.1f} s{SPARK_START if engine == 'spark' else ''}; the rest, {total - inside:.1f} s, is "
            f"the interpreter, imports, config, catalog and index checks{SPARK_STOP if engine == 'spark' else ''}, and exit |"
        )
    lines.append(
        f"| the peer's job, one-row commit (against the peer) | {whole:.2f} | imports {steps['imports']:.1f} s, Spark with Iceberg's "
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

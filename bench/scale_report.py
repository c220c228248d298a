"""The lake-scale bench's reading of its runs (bench/scale.py): a sync's events cut into passes,
an export's requests per 100 files and per pass, and each figure beside the issue's goal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The goals of the control plane at lake scale (docs/scale.md).
GOALS = {
    "requests_per_100_files": 1.0,  # state requests per 100 files of an export (plus a small constant per pass)
    "plan_1m_seconds_sqlite": 60.0,
    "plan_rss_ratio_10x_files": 1.25,  # planning's peak RSS from 10^5 to 10^6 files
    "control_plane_share": 0.10,  # of a 10^5-file export's wall time
    "one_row_commit_requests": 23,  # today's, not to grow
    "nothing_to_do_requests": 9,
}


def passes_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A sync's events as passes: each pass's plan (up to PLANNED), prepare (to the start of its
    writes), data plane (to WRITTEN) and record (to MARKED_APPLIED or CHECKPOINTED); the control
    plane is all but the data plane. What follows the last pass (a plan that finds nothing) is `tail`."""
    passes: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    names = {"planned": "plan", "applying": "prepare", "written": "data", "marked applied": "record", "checkpointed": "record"}
    for event in events:
        part = names.get(event["event"], "tail" if event["event"] == "end" else event["event"])
        slot = current.setdefault(part, {"seconds": 0.0, "requests": 0, "rss_mib": {}})
        slot["seconds"] = round(slot["seconds"] + event["seconds"], 4)
        slot["requests"] += event.get("requests", {}).get("total", 0)
        for key, value in event["memory_mib"].items():
            slot["rss_mib"][key] = max(slot["rss_mib"].get(key, 0.0), value)
        if event["event"] in ("marked applied", "checkpointed"):
            passes.append(current)
            current = {}
    tail = current
    control = [sum(p[k]["seconds"] for k in p if k != "data") for p in passes]
    data = [p.get("data", {}).get("seconds", 0.0) for p in passes]
    total = sum(control) + sum(data) + sum(v["seconds"] for v in tail.values())
    requests = sum(p[k]["requests"] for p in passes for k in p) + sum(v["requests"] for v in tail.values())
    return {
        "passes": passes,
        "tail": tail,
        "control_plane_seconds": [round(c, 3) for c in control],
        "data_plane_seconds": [round(d, 3) for d in data],
        "control_plane_share": round((sum(control) + sum(v["seconds"] for v in tail.values())) / total, 4) if total else None,
        "requests": requests,
    }


def figures(results: dict[str, Any], metadata_files: int) -> list[dict[str, Any]]:
    """Each figure beside the issue's goal: (figure, value, goal, met)."""
    rows: list[dict[str, Any]] = []

    def add(figure: str, value: Any, goal: str, met: bool | None) -> None:
        rows.append({"figure": figure, "value": value, "goal": goal, "met": met})

    exports = results.get("export", {})
    _request_figures(add, exports)
    _plan_figures(add, results.get("plan", {}), metadata_files)
    _export_figures(add, exports)
    _many_figures(add, results.get("many_tables", {}))
    return rows


Add = Callable[[str, Any, str, "bool | None"], None]


def _request_figures(add: Add, exports: dict[str, Any]) -> None:
    on_dynamodb = [run for label, run in exports.items() if label.endswith("-ddb")]
    for run in on_dynamodb:
        files, split = run["files"], run["split"]
        add(
            f"state requests, export of {files:,} files in {len(split['passes'])} passes (DynamoDB)",
            split["requests"],
            "(measured)",
            None,
        )
    if len(on_dynamodb) >= 2:
        per_100, per_pass = request_costs(on_dynamodb[0], on_dynamodb[-1])
        add("state requests per 100 files of an export (marginal, DynamoDB)", per_100, "≤ 1", per_100 <= 1)
        add("state requests per pass (the constant beside it)", per_pass, "small", None)
        projected = round(per_100 * 10_000 + per_pass * 100)  # 10^6 files, batch.max_files 10^4: 100 passes
        add("projected: export of 10^6 files in 100 passes (requests)", projected, "≤ 10^4", projected <= 10_000)
    for run in on_dynamodb:
        files = run["files"]
        one = run["one_row_commit"]
        one_requests = sum(e.get("requests", {}).get("total", 0) for e in one["events"])
        add(f"state requests, one-row commit after it ({files:,} files)", one_requests, "≤ 23", one_requests <= 23)
        noop = run["nothing_to_do"]["requests"]["total"]
        add(f"state requests, sync with nothing to do ({files:,} files)", noop, "≤ 9", noop <= 9)


def _plan_figures(add: Add, plans: dict[str, Any], metadata: int) -> None:
    meta = plans.get(f"plan-meta-{metadata}-sqlite")
    if meta:
        add(f"planning {metadata:,} files on SQLite (s)", meta["plan_seconds"], "≤ 60", meta["plan_seconds"] <= 60)
        small = plans.get(f"plan-real-{metadata // 10}-sqlite")
        if small:
            ratio = round(meta["process"]["largest_process_mib"] / small["process"]["largest_process_mib"], 3)
            add(
                f"planning's peak RSS, {metadata // 10:,} → {metadata:,} files",
                f"{small['process']['largest_process_mib']} → {meta['process']['largest_process_mib']} MiB ({ratio}×)",
                "≤ 1.25×",
                ratio <= 1.25,
            )


def _export_figures(add: Add, exports: dict[str, Any]) -> None:
    for label, run in exports.items():
        if label.endswith("-sqlite") or label.endswith("-spark"):
            share = run["split"]["control_plane_share"]
            add(f"control plane share, {label}", share, "≤ 0.10", share is not None and share <= 0.10)
        if label.endswith("-spark"):
            add(f"Spark export of {run['files']:,} files: files/s", run["files_per_second"], "(measured)", None)
            add("Spark export: data plane ms per file", run["data_plane_ms_per_file"], "(measured)", None)
    search = exports.get("commit_to_search")
    if search:
        add(
            f"one-row commit → search, {search['files']:,}-file table (s)", search["commit_to_search_seconds"], "(measured)", None
        )


def _many_figures(add: Add, many: dict[str, Any]) -> None:
    for label in ("many-sqlite", "many-ddb"):
        if label in many:
            run = many[label]
            tables = run.get("tables", many["tables"])
            sweep = run["sweep"]
            add(
                f"{tables} tables: the planner's no-op sweep, {label} (s; peak RSS MiB)",
                f"{sweep['seconds']:.2f}; {sweep['process']['largest_process_mib']}",
                "inside the planner Lambda's 300 s and 2,048 MB",
                sweep["seconds"] < 300 and sweep["process"]["largest_process_mib"] < 2048,
            )
            threaded = next((v for k, v in run.items() if k.startswith("sweep_") and k.endswith("_threads")), None)
            if threaded is not None:
                add(
                    f"{tables} tables: the sweep on {threaded['threads']} threads, {label} (s)",
                    threaded["seconds"],
                    "(measured)",
                    None,
                )
            if "requests" in sweep:
                add(
                    f"{tables} tables: the sweep's state requests",
                    sweep["requests"]["total"],
                    f"(measured; {sweep['requests']['total'] / tables:.1f} per table)",
                    None,
                )
            add(f"{tables} tables: icecdc status, {label} (s)", run["status"]["seconds"], "(measured)", None)
            add(f"{tables} tables: no-op sync, {label} (s)", run["nothing_to_do"]["seconds"], "(measured)", None)
            if "requests" in run["nothing_to_do"]:
                requests = run["nothing_to_do"]["requests"]["total"]
                add(
                    f"{tables} tables: no-op sync requests",
                    requests,
                    f"≤ 9 per table ({9 * tables})",
                    requests <= 9 * tables,
                )


def request_costs(small: dict[str, Any], large: dict[str, Any]) -> tuple[float, float]:
    """(requests per 100 files, requests per pass) of two exports on DynamoDB: the first from
    the difference between them, the second from what the larger's files do not account for."""
    files = (large["files"] - small["files"]) / 100
    per_100 = (large["split"]["requests"] - small["split"]["requests"]) / files if files else 0.0
    passes = len(large["split"]["passes"]) or 1
    per_pass = (large["split"]["requests"] - per_100 * large["files"] / 100) / passes
    return round(per_100, 3), round(per_pass, 1)

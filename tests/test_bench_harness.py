"""The bench's own parts: its reading of the JVM's GC log (bench/harness/gclog.py), what the memory
probe judges the JVM by; and the lake-scale bench (bench/scale.py), its reading and a tiny run."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness.gclog import jvm_heap

G1_LOG = """\
[0.003s][info][gc] Using G1
[0.146s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 23M->20M(388M) 5.720ms
[1.243s][info][gc] GC(6) Concurrent Mark Cycle
[1.254s][info][gc] GC(6) Pause Remark 28M->28M(136M) 3.184ms
[3.734s][info][gc] GC(11) Pause Young (Prepare Mixed) (G1 Evacuation Pause) 122M->34M(148M) 7.752ms
[6.182s][info][gc] GC(13) Pause Young (Concurrent Start) (G1 Evacuation Pause) 110M->38M(148M) 6.589ms
[6.247s][info][gc] GC(14) Concurrent Mark Cycle 65.139ms
"""

SERIAL_LOG = """\
[0.004s][info][gc] Using Serial
[0.512s][info][gc] GC(0) Pause Young (Allocation Failure) 33M->10M(119M) 12.301ms
[2.100s][info][gc] GC(1) Pause Full (Metadata GC Threshold) 1536K->1024K(2G) 30.000ms
"""


def test_the_heap_after_collections_is_the_most_any_pause_left_before_the_most_it_let_fill() -> None:
    assert jvm_heap(G1_LOG) == {"pauses": 4, "before_collection_peak": 122, "after_collection_peak": 38, "committed_peak": 388}


def test_every_unit_of_the_log_is_read_as_mib_whatever_the_collector() -> None:
    assert jvm_heap(SERIAL_LOG) == {
        "pauses": 2,
        "before_collection_peak": 33,
        "after_collection_peak": 10,
        "committed_peak": 2048,
    }
    assert jvm_heap("[0.1s][info][gc] GC(0) Pause Full (System.gc()) 2G->1536K(4G) 1.0ms")["before_collection_peak"] == 2048


def test_a_log_without_a_collection_reads_as_none() -> None:
    assert jvm_heap("[0.003s][info][gc] Using G1\n") == {
        "pauses": 0,
        "before_collection_peak": 0.0,
        "after_collection_peak": 0.0,
        "committed_peak": 0.0,
    }


def test_a_syncs_events_are_cut_into_passes_and_the_control_plane_is_all_but_the_writes() -> None:
    from bench.scale_report import passes_of

    def event(name: str, seconds: float, requests: int) -> dict[str, object]:
        return {"event": name, "seconds": seconds, "requests": {"total": requests}, "memory_mib": {"driver_python": 100.0}}

    events = [
        *(event(n, s, r) for n, s, r in [("planned", 1.0, 5), ("applying", 0.5, 2), ("written", 8.0, 0)]),
        *(event(n, s, r) for n, s, r in [("marked applied", 0.5, 1), ("planned", 0.2, 2), ("applying", 0.1, 1)]),
        *(event(n, s, r) for n, s, r in [("written", 8.0, 0), ("checkpointed", 0.2, 1), ("planned", 0.5, 3)]),
        event("end", 0.0, 0),
    ]
    split = passes_of(events)
    assert split["control_plane_seconds"] == [2.0, 0.5]
    assert split["data_plane_seconds"] == [8.0, 8.0]
    assert split["requests"] == 15
    assert split["control_plane_share"] == round(3.0 / 19.0, 4)  # (2.0 + 0.5 + the final plan), of 19 s


def test_an_exports_requests_are_split_into_a_cost_per_100_files_and_one_per_pass() -> None:
    from bench.scale_report import request_costs

    small = {"files": 1_000, "split": {"requests": 10 + 10 * 20, "passes": [{}] * 10}}
    large = {"files": 10_000, "split": {"requests": 100 + 10 * 20, "passes": [{}] * 10}}
    assert request_costs(small, large) == (1.0, 20.0)


@pytest.mark.slow
@pytest.mark.aws
def test_the_scale_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    """The harness end to end, as `make bench-scale` runs it (tables, moto, the sink, children,
    figures): plans and exports of a table of 20 files, on SQLite and DynamoDB, each index equal
    to its table. A process of its own: the bench needs psutil, which only the bench group installs."""
    if importlib.util.find_spec("psutil") is None:
        pytest.skip("the bench group (psutil) is not installed")
    output = tmp_path / "scale.json"
    sizes = ["--real", "20", "--metadata", "200", "--rows-per-file", "1", "--passes", "2", "--dynamodb-files", "20"]
    argv = [sys.executable, "-m", "bench.scale", "--scale", "tiny", "--only", "plan", "export", "--spark-files", "0"]
    env = {**os.environ, "BENCH_WORK": str(tmp_path / "work")}
    run = subprocess.run([*argv, *sizes, "--output", str(output)], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(output.read_text())["tiny"]
    assert results["plan"]["plan-meta-200-sqlite"]["plan_seconds"] > 0
    assert results["plan"]["plan-real-20-ddb"]["plan_requests"]["total"] > 0
    for label in ("export-20-sqlite", "export-20-ddb"):
        export = results["export"][label]
        assert export["index_equals_table"]
        assert len(export["split"]["passes"]) >= 2  # batch.max_files = 20 // 2 (the second: 21 files)
    assert results["export"]["export-20-ddb"]["nothing_to_do"]["requests"]["total"] > 0
    assert results["export"]["commit_to_search"]["commit_to_search_seconds"] > 0
    assert "planning 200 files on SQLite (s)" in {row["figure"] for row in results["figures"]}


@pytest.mark.slow
@pytest.mark.aws
def test_the_many_tables_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    """`python -m bench.many_tables` end to end on 3 tables: the planner's sweep (serial and on
    threads) finds every table caught up on both stores, its state requests counted on DynamoDB."""
    if importlib.util.find_spec("psutil") is None:
        pytest.skip("the bench group (psutil) is not installed")
    output = tmp_path / "scale.json"
    argv = [sys.executable, "-m", "bench.many_tables", "--scale", "tiny", "--tables", "3", "--output", str(output)]
    env = {**os.environ, "BENCH_WORK": str(tmp_path / "work")}
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    many = json.loads(output.read_text())["tiny"]["many_tables"]
    for label in ("many-sqlite", "many-ddb"):
        assert many[label]["sweep"]["with_work"] == many[label]["sweep_8_threads"]["with_work"] == []
        assert many[label]["per_table"]["sweep_fits_the_planner"]["fits"]
    assert many["many-ddb"]["sweep"]["requests"]["total"] == many["many-ddb"]["sweep_8_threads"]["requests"]["total"] > 0


def test_the_pending_memory_bench_reads_back_every_file_it_put_and_heads_hold_less() -> None:
    """`bench.pending_memory` at 2,500 files: 25 export items, every file read back, and counted
    by the heads; the heads hold less than the whole items, a pass's bodies less than all."""
    from bench.pending_memory import measure

    found = measure(2500, pass_files=200)
    assert (found["files"], found["items"], found["head_files"]) == (2500, 25, 2500)
    assert found["whole"]["bytes_per_file"] > 115
    assert found["heads"]["held_bytes"] < found["one_pass_bodies"]["held_bytes"] < found["whole"]["held_bytes"]


@pytest.mark.slow
def test_the_serverless_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    """`bench.serverless_vs_domain` on 200 rows, an export, a round, a rebuild: every side's index
    equals the table, the stand-in refused nothing, and each path's requests are counted by
    operation (a domain's `GET /`, none on Serverless). No psutil needed: it uses no sampler."""
    from bench.serverless_vs_domain import NAMES, measure

    found = measure(200, rounds=1, changes=10, visibility=0.1, workdir=tmp_path / "work", exports=1)
    assert found["index_equals_table"] == dict.fromkeys(NAMES, True)
    assert found["table_rows"] == 200 + 10 - 5
    for part in ("export", "rounds"):
        requests = found["figures"][part]["requests_per_pass"]
        assert requests["domain"]["cluster info"] == 1
        assert "cluster info" not in requests["serverless"]
        assert not {op for op in requests["serverless"] if op == "unsupported" or op.endswith("refused")}
        assert requests["serverless"]["bulk"] >= 1
    # a first export writes the first generation, no swap: no sync waits for visibility
    assert found["figures"]["export"]["visibility_waits_per_pass"] == 0
    assert found["figures"]["rounds"]["visibility_waits_per_pass"] == 0
    assert found["figures"]["rebuild"]["visibility_waits_per_pass"] == 1  # the swap's, no refresh

"""Many tables: a deployment of N one-file tables, synced once; then, with the
state on SQLite and on DynamoDB (moto's server, requests counted, its memory capped): the planner's
sweep, `icecdc status` and `icecdc sync` with nothing to do, each a process of its own with its
wall time, state requests and peak RSS (`bench.harness.sampling.whole_command`).

The sweep is what the planner Lambda runs for the schedule's event, which names every table:
`icecdc.aws.planner.plan_and_start_each` (per table: the table's metadata, its lag and `has_work`, the
index's unfinished states, the lag published to CloudWatch; moto's server stands in for Glue and
CloudWatch), on its pool of `SWEEP_WORKERS` threads as the Lambda runs it, and with one worker (one
table at a time, as the Lambda ran it before the pool).

    python -m bench.many_tables [--tables 500] [--scale default]   (a part of `make bench-scale`;
        results: docs/bench/scale.json, `many_tables`)
    python -m bench.many_tables sweep CONFIG.json MOTO_URL [--threads N]   (one sweep, the child)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from bench.scale import RESULT, SCHEMA, SIZES, SPEC, Scale, _rows, record
from icecdc.aws.planner import SWEEP_WORKERS

STACK = "bench"
SWEEP_THREADS = SWEEP_WORKERS  # the planner's pool: the catalog's, the state's and CloudWatch's calls are I/O
PLANNER_TIMEOUT_SECONDS = 300  # infra/planner.py: PLANNER_TIMEOUT (Lambda's most: 900 s)
PLANNER_MEMORY_MIB = 2048  # infra/planner.py: PLANNER_MEMORY_MB
# Tables of the DynamoDB half at most: moto's transactions copy the whole state table (its server
# reached its 6 GiB cap syncing 500 tables the first time); requests per table do not depend on it.
DYNAMODB_TABLES = 100


def sweep_child(config_path: str, moto_url: str, threads: int) -> dict[str, Any]:
    """The planner's sweep of every table of the config, as the Lambda runs it for the schedule's
    event (`plan_and_start_each`), on `threads` workers."""
    import boto3

    from icecdc.aws.planner import Sweep, plan_and_start_each
    from icecdc.config import parse_config
    from icecdc.state import open_state_store

    config = parse_config(json.loads(Path(config_path).read_text()))
    names = [t.name for t in config.tables]
    glue = boto3.client("glue", endpoint_url=moto_url)
    cloudwatch = boto3.client("cloudwatch", endpoint_url=moto_url)
    store = open_state_store(config.state)
    started = time.perf_counter()
    outcomes = plan_and_start_each(Sweep(config, store, glue, cloudwatch), names, STACK, workers=threads)
    seconds = time.perf_counter() - started
    store.close()
    return {
        "seconds": round(seconds, 3),
        "threads": threads,
        "tables": len(names),
        "with_work": [o.table for o in outcomes if o.has_work],
        "errors": [f"{o.table}: {o.error}" for o in outcomes if o.error],
    }


def measure_many_tables(s: Scale, dynamodb_tables: int = DYNAMODB_TABLES) -> dict[str, Any]:
    """A deployment of `tables` one-file tables, synced once; then, on SQLite and on DynamoDB
    (the first `dynamodb_tables` of them): the planner's sweep (with one worker, and on the planner's
    pool, as the Lambda runs it), `icecdc status`, and `icecdc sync` with nothing to do; each figure also per table."""
    names = [f"db.many_{i:04d}" for i in range(s.sizes.tables)]
    started = time.perf_counter()
    for number, name in enumerate(names):
        s.catalog.create_table(name, SCHEMA, partition_spec=SPEC, properties={"format-version": "2"}).append(
            _rows(number, 1, s.sizes.rows_per_file)
        )
    out: dict[str, Any] = {"tables": len(names), "create_seconds": round(time.perf_counter() - started, 1)}
    for dynamodb in (False, True):
        label = f"many-{'ddb' if dynamodb else 'sqlite'}"
        deployment = names[:dynamodb_tables] if dynamodb else names
        config = s.config(label, deployment, dynamodb, engine={"use": "in_process"})
        runs: dict[str, Any] = {"tables": len(deployment)}
        runs["first_sync"] = s.command(config, "sync", dynamodb=dynamodb)
        for threads in (1, SWEEP_THREADS):
            if dynamodb:
                s.moto.take()
            sweep = s.child(["sweep", str(config), s.moto.url, "--threads", str(threads)], dynamodb, "bench.many_tables")
            if dynamodb:
                sweep["requests"] = s.moto.take()
            assert not sweep["with_work"] and not sweep["errors"], sweep  # every table is caught up
            runs["sweep" if threads == 1 else f"sweep_{threads}_threads"] = sweep
        runs["status"] = s.command(config, "status", dynamodb=dynamodb)
        runs["nothing_to_do"] = s.command(config, "sync", dynamodb=dynamodb)
        runs["per_table"] = per_table(runs, len(deployment))
        out[label] = runs
        print(
            f"bench.many_tables: {label}: sweep {runs['sweep']['seconds']:.1f} s "
            f"({runs[f'sweep_{SWEEP_THREADS}_threads']['seconds']:.1f} s on {SWEEP_THREADS} threads), "
            f"status {runs['status']['seconds']:.1f} s, no-op sync {runs['nothing_to_do']['seconds']:.1f} s",
            flush=True,
        )
    return out


def per_table(runs: dict[str, Any], tables: int) -> dict[str, Any]:
    """Each operation's milliseconds and state requests per table, and whether the sweep fits the
    planner Lambda (its timeout and memory)."""
    out: dict[str, Any] = {}
    for name, run in runs.items():
        if name in ("tables", "first_sync"):
            continue
        figures = {"ms": round(1000 * run["seconds"] / tables, 2)}
        if "requests" in run:
            figures["requests"] = round(run["requests"]["total"] / tables, 2)
        out[name] = figures
    sweep = runs[f"sweep_{SWEEP_THREADS}_threads"]  # as the Lambda runs it
    out["sweep_fits_the_planner"] = {
        "seconds": sweep["seconds"],
        "timeout_seconds": PLANNER_TIMEOUT_SECONDS,
        "peak_rss_mib": sweep["process"]["largest_process_mib"],
        "memory_mib": PLANNER_MEMORY_MIB,
        "fits": sweep["seconds"] < PLANNER_TIMEOUT_SECONDS and sweep["process"]["largest_process_mib"] < PLANNER_MEMORY_MIB,
    }
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "sweep":
        child = argparse.ArgumentParser(prog="python -m bench.many_tables sweep")
        child.add_argument("config")
        child.add_argument("moto_url")
        child.add_argument("--threads", type=int, default=1)
        a = child.parse_args(sys.argv[2:])
        print(RESULT + json.dumps(sweep_child(a.config, a.moto_url, a.threads)), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=sorted(SIZES), default=os.environ.get("BENCH_SCALE") or "default")
    parser.add_argument("--tables", type=int, help="over the scale's (default: 500; smoke: 50)")
    parser.add_argument("--dynamodb-tables", type=int, default=DYNAMODB_TABLES, help="of them, on DynamoDB (moto)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    sizes = SIZES[args.scale] if args.tables is None else replace(SIZES[args.scale], tables=args.tables)
    record(
        args.scale,
        sizes,
        ["many_tables"],
        args.output,
        {"many_tables": partial(measure_many_tables, dynamodb_tables=args.dynamodb_tables)},
    )


if __name__ == "__main__":
    main()

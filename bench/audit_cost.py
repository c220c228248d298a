"""What an audit costs against a verify of the same clean index: whole commands, side by side.

A table of `--rows` rows in four identity partitions is exported into osmem once; then
`icecdc audit` (counts per partition and the default sample) and `icecdc verify` (both read
whole) run in turn, each its own process, `--runs` times: wall time, the peak RSS of the largest
process, and what the audit read (its own cost report). Then `--drift` documents of one partition
are lost and `icecdc repair --from-audit` is timed against `icecdc repair --rebuild` (a full
export into a new generation), each whole, both ending with index == table. Results:
docs/bench/audit.json.

    python -m bench.audit_cost --rows 1000000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml
from opensearchpy import OpenSearch
from osmem_server import OsmemServer
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from bench.harness.environment import REPO, WORK, machine
from bench.harness.sampling import whole_command
from icecdc.config import parse_config
from icecdc.state import SqliteStateStore
from icecdc.sync import sync

RESULTS = REPO / "docs" / "bench" / "audit.json"
REPAIR_RESULTS = REPO / "docs" / "bench" / "repair.json"
REGIONS = ("us", "eu", "apac", "latam")
ROWS_PER_FILE = 50_000
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "status", StringType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
    identifier_field_ids=[1],
)


def build(workdir: Path, rows: int, opensearch_url: str) -> Path:
    """The table, exported into the index; returns the config file the commands read."""
    catalog = SqlCatalog("bench", uri=f"sqlite:///{workdir / 'catalog.db'}", warehouse=(workdir / "warehouse").as_uri())
    catalog.create_namespace_if_not_exists("db")
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
    table = catalog.create_table("db.orders", schema=SCHEMA, partition_spec=spec)
    arrow = SCHEMA.as_arrow()
    for start in range(0, rows, ROWS_PER_FILE):
        ids = range(start, min(rows, start + ROWS_PER_FILE))
        table.append(
            pa.Table.from_pylist(
                [{"id": i, "region": REGIONS[i % len(REGIONS)], "status": f"s{i % 7}", "amount": i * 0.5} for i in ids],
                schema=arrow,
            )
        )
    config = {
        "catalog": {
            "name": "bench",
            "type": "sql",
            "uri": f"sqlite:///{workdir / 'catalog.db'}",
            "warehouse": (workdir / "warehouse").as_uri(),
        },
        "state": {"type": "sqlite", "path": str(workdir / "state.db")},
        "opensearch": {"url": opensearch_url},
        "engine": {"use": "in_process"},
        "tables": [{"name": "db.orders", "index": "orders"}],
    }
    path = workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(config))
    sync(parse_config(config))
    return path


def measure(config: Path, runs: int) -> dict[str, Any]:
    icecdc = [sys.executable, "-m", "icecdc.cli"]
    audit = [*icecdc, "audit", "--config", str(config), "--json"]
    verify = [*icecdc, "verify", "--config", str(config)]
    audits, verifies = [], []
    for _ in range(runs):  # in turn, so that a drift of the machine's speed touches both alike
        audits.append(whole_command(audit))
        verifies.append(whole_command(verify))
    report = json.loads(audits[-1]["stdout"])
    return {
        "audit": _summary(audits),
        "verify": _summary(verifies),
        "time_ratio_audit_to_verify": [round(a["seconds"] / v["seconds"], 3) for a, v in zip(audits, verifies, strict=True)],
        "memory_ratio_audit_to_verify": [
            round(a["largest_process_mib"] / v["largest_process_mib"], 3) for a, v in zip(audits, verifies, strict=True)
        ],
        "audit_report": report,
    }


def measure_repair(config: Path, opensearch_url: str, drift: int) -> dict[str, Any]:
    """A repair of `drift` lost documents against the full export a rebuild makes, whole commands."""
    client = OpenSearch(hosts=[opensearch_url])
    store = SqliteStateStore(config.parent / "state.db")
    checkpoint = store.get_checkpoint("db.orders")
    assert checkpoint is not None
    for doc_id in range(0, drift * len(REGIONS), len(REGIONS)):  # ids of region "us": one partition drifts
        client.delete(index="orders", id=str(doc_id), version=checkpoint.sequence_number, version_type="external_gte")
    client.indices.refresh(index="orders")
    icecdc = [sys.executable, "-m", "icecdc.cli"]
    audited = whole_command([*icecdc, "audit", "--config", str(config), "--json"], check=False)
    repaired = whole_command([*icecdc, "repair", "--config", str(config), "--table", "db.orders", "--from-audit", "--json"])
    rebuilt = whole_command([*icecdc, "repair", "--config", str(config), "--table", "db.orders", "--rebuild"])
    verified = whole_command([*icecdc, "verify", "--config", str(config)])  # exit 0: index == table
    return {
        "drifted_documents": drift,
        "audit_seconds": audited["seconds"],
        "repair": {
            "seconds": repaired["seconds"],
            "largest_process_mib": repaired["largest_process_mib"],
            "report": json.loads(repaired["stdout"]),
        },
        "rebuild": {"seconds": rebuilt["seconds"], "largest_process_mib": rebuilt["largest_process_mib"]},
        "time_ratio_repair_to_rebuild": round(repaired["seconds"] / rebuilt["seconds"], 4),
        "verified_after": verified["stdout"].strip(),
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "command": runs[0]["command"],
        "seconds": [r["seconds"] for r in runs],
        "median_seconds": statistics.median(r["seconds"] for r in runs),
        "largest_process_mib": [r["largest_process_mib"] for r in runs],
        "load_average_at_start": [r["load_average_at_start"] for r in runs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--drift", type=int, default=100, help="documents of one partition lost before the repair")
    parser.add_argument("--repair-only", action="store_true", help="only the repair against the rebuild (docs/bench/repair.json)")
    args = parser.parse_args()
    workdir = WORK / "audit"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    with OsmemServer.start() as server:
        config = build(workdir, args.rows, server.url)
        results: dict[str, Any] = {"machine": machine(), "rows": args.rows}
        if not args.repair_only:
            results.update(measure(config, args.runs))
        results["repair_vs_rebuild"] = measure_repair(config, server.url, args.drift)
    (REPAIR_RESULTS if args.repair_only else RESULTS).write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in results.items() if k != "audit_report"}, indent=2, default=str))


if __name__ == "__main__":
    main()

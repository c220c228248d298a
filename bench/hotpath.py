"""The per-row hot path of a sync (rows → documents → canonical JSON → net change): CPU time of
icecdc's `documents` and `changelog` in the work tree against the same modules at git revision REV,
on rows of the bench tables' schema as pyarrow hands them out. Results: docs/bench/hotpath.json.

    python -m bench.hotpath [--baseline REV] [--rows N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import DecimalType, IntegerType, LongType, NestedField, StringType, TimestamptzType

from bench.harness.environment import REPO, RESULTS
from icecdc.changelog import ChangeStats
from icecdc.model import ChangeType

BASELINE = "f767ca0"  # before the optimizations of documents.py and changelog.py this measures

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "customer", StringType()),
    NestedField(4, "amount", DecimalType(12, 2)),
    NestedField(5, "qty", IntegerType()),
    NestedField(6, "status", StringType()),
    NestedField(7, "updated_at", TimestamptzType()),
    identifier_field_ids=[1],
)


def rows(count: int) -> list[dict[str, Any]]:
    """Rows as pyarrow's to_pylist gives them (ZoneInfo("UTC") timestamps, Decimals), like the reader's."""
    base = dt.datetime(2025, 11, 1, tzinfo=dt.UTC)
    arrow = pa.table(
        {
            "id": pa.array(range(count), pa.int64()),
            "region": [f"r{i % 8}" for i in range(count)],
            "customer": [f"customer-{i % 9973}" for i in range(count)],
            "amount": pa.array([Decimal(i % 100000) / 100 for i in range(count)], pa.decimal128(12, 2)),
            "qty": pa.array([i % 50 for i in range(count)], pa.int32()),
            "status": [("new", "paid", "shipped")[i % 3] for i in range(count)],
            "updated_at": pa.array([base + dt.timedelta(seconds=i) for i in range(count)], pa.timestamp("us", tz="UTC")),
        }
    )
    return arrow.to_pylist()


# Names the baseline imports from where they lived then, and where they live now.
MOVED = {"from icecdc.reading import INSERT\n": "from icecdc.model import ChangeType\n\nINSERT = ChangeType.INSERT\n"}


def _module_at(revision: str, path: str, name: str) -> ModuleType:
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{revision}:{path}"], capture_output=True, text=True, check=True
    ).stdout
    for then, now in MOVED.items():
        source = source.replace(then, now)
    file = Path(tempfile.mkdtemp(prefix="icecdc-hotpath-")) / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


REPEATS = 5  # the best of several CPU-time runs: the machine is shared, wall time is noise


def measure(documents: ModuleType, changelog: ModuleType, sample: list[dict[str, Any]]) -> dict[str, float]:
    """CPU seconds per million rows of each step; changes are carryover pairs plus 10% real updates, as after a rewrite."""
    mapper = documents.DocumentMapper(SCHEMA, ("id",))

    def encode() -> list[tuple[str, str]]:
        return [(mapper.document_id(d), documents.encode_document(d)) for d in map(mapper.document, sample)]

    encoded = encode()

    def net() -> None:
        stats = ChangeStats()
        for number, (doc_id, text) in enumerate(encoded):
            after = text if number % 10 else text.replace('"qty":', '"qty":1')
            changelog.net_write(doc_id, [(5, ChangeType.DELETE, text), (5, ChangeType.INSERT, after)], stats)

    scale = 1e6 / len(sample)
    return {"document_id_encode": _best(encode) * scale, "net_write_per_key_pair": _best(net) * scale}


def _best(step: Any) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.process_time()
        step()
        times.append(time.process_time() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hotpath")
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--rows", type=int, default=50_000)
    args = parser.parse_args()
    sample = rows(args.rows)
    import icecdc.changelog as changelog_now
    import icecdc.documents as documents_now

    before = measure(
        _module_at(args.baseline, "icecdc/documents.py", "documents_before"),
        _module_at(args.baseline, "icecdc/changelog.py", "changelog_before"),
        sample,
    )
    after = measure(documents_now, changelog_now, sample)
    result = {
        "baseline": args.baseline,
        "rows": args.rows,
        "seconds_per_million_rows": {"before": before, "after": after},
        "speedup": {k: before[k] / after[k] for k in before},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hotpath.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

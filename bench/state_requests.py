"""State requests of whole `icecdc sync` runs with the state in DynamoDB (moto's server behind a
counter of requests by `X-Amz-Target`): the export of a table of N identity-partitioned one-row
files, a one-row commit after it, and a sync with nothing to do.

moto is no model of DynamoDB's time (its transactions copy the whole table): requests are counted,
never timed.

    python -m bench.state_requests [--files 1000] [--max-files N]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from osmem_server import OsmemServer
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icecdc.config import parse_config
from icecdc.state.dynamodb import create_state_table
from icecdc.sync import sync

NAME = "db.wide"
REGION = "us-east-1"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType(), required=False),
    identifier_field_ids=[1],
)


@dataclass
class CountingApp:
    """WSGI middleware: counts DynamoDB requests by operation, one at a time (moto's conditional
    writes take no lock; real DynamoDB serialises them)."""

    app: Any
    counts: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith("DynamoDB_"):
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        with self.lock:
            self.counts[target.split(".", 1)[1]] += 1
            return list(self.app(environ, start_response))

    def take(self) -> dict[str, int]:
        """The counts since the last take, and their total."""
        with self.lock:
            counts, self.counts = dict(self.counts), Counter()
        return {"total": sum(counts.values()), **dict(sorted(counts.items()))}


def start_moto() -> tuple[str, CountingApp, Any]:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = CountingApp(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", app, server


def measure(files: int, max_files: int | None, workdir: Path) -> dict[str, Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }.items():
        os.environ[name] = value  # fake credentials: nothing here reaches a real account
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    url, counter, server = start_moto()
    create_state_table("state", REGION, url)
    catalog = SqlCatalog("lake", uri=f"sqlite:///{workdir / 'catalog.db'}", warehouse=(workdir / "warehouse").as_uri())
    catalog.create_namespace("db")
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="id"))
    table = catalog.create_table(NAME, SCHEMA, partition_spec=spec)
    arrow = SCHEMA.as_arrow()
    table.append(pa.Table.from_pylist([{"id": i, "name": f"n{i}"} for i in range(files)], schema=arrow))  # a file each
    with OsmemServer.start() as search:
        raw: dict[str, Any] = {
            "catalog": {
                "name": "lake",
                "type": "sql",
                "uri": f"sqlite:///{workdir / 'catalog.db'}",
                "warehouse": (workdir / "warehouse").as_uri(),
            },
            "state": {"type": "dynamodb", "table": "state", "region": REGION, "endpoint_url": url},
            "opensearch": {"url": search.url},
            "engine": {"use": "in_process"},
            "tables": [{"name": NAME}],
        }
        if max_files:
            raw["batch"] = {"max_files": max_files}
        config = parse_config(raw)
        counter.take()
        results: dict[str, Any] = {"files": files, "max_files": max_files}
        sync(config, table_names=[NAME])
        results["export"] = counter.take()
        table = catalog.load_table(NAME)
        table.append(pa.Table.from_pylist([{"id": files, "name": "one more"}], schema=arrow))
        sync(config, table_names=[NAME])
        results["one_row_commit"] = counter.take()
        sync(config, table_names=[NAME])
        results["nothing_to_do"] = counter.take()
    server.shutdown()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--max-files", type=int, default=None, help="batch.max_files (a capped export)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="state-requests-"))
    try:
        print(json.dumps(measure(args.files, args.max_files, workdir), indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

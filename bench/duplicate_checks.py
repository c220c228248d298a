"""What finding duplicate identifiers costs on the sync path, in-process on osmem.

- appends: a change pass that appends N new keys looks them up (`target._unless_held`: one `_mget`
  per 1,000 appended keys, versions only, as none is found), against the same pass with the lookup
  switched off;
- capped export: an export cut into one file a pass, whose last pass reads the earlier passes'
  files again for their keys (`PassTasks.earlier`), against the same export without that re-read,
  and the uncapped export.

Run: `PYTHONPATH=$PWD .venv/bin/python -m bench.duplicate_checks [rows]` (default 100,000). Each
figure is the median of three runs, alternated; on a shared 2-core machine, read them as ratios.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
from osmem_server import OsmemServer
from pyiceberg.catalog.sql import SqlCatalog

from icecdc.config import Config, parse_config
from icecdc.sync import sync
from tests.support.tables import ARROW, SCHEMA

FILES = 10
REPEATS = 3


def _rows(first: int, count: int) -> pa.Table:
    ids = range(first, first + count)
    return pa.Table.from_pydict(
        {
            "id": list(ids),
            "region": ["us"] * count,
            "status": ["new"] * count,
            "amount": [i * 1.5 for i in ids],
        },
        schema=ARROW,
    )


def _config(workdir: Path, url: str, name: str, **batch: Any) -> Config:
    return parse_config(
        {
            "catalog": {
                "name": "lake",
                "type": "sql",
                "uri": f"sqlite:///{workdir / 'catalog.db'}",
                "warehouse": workdir.as_uri(),
            },
            "state": {"type": "sqlite", "path": str(workdir / "state.db")},
            "opensearch": {"url": url},
            "engine": {"use": "in_process", "in_process_workers": 1},
            "dead_letter": {"path": str(workdir / "dead-letters")},
            "batch": batch,
            "tables": [{"name": name}],
        }
    )


@contextmanager
def _without_append_lookup() -> Iterator[None]:
    with mock.patch("icecdc.engines.target._unless_held", lambda target, writes, appends, duplicates: writes):
        yield


@contextmanager
def _without_reread() -> Iterator[None]:
    with mock.patch("icecdc.sync.passes._Pass.with_earlier", lambda self, tasks, applied: tasks):
        yield


@contextmanager
def _as_is() -> Iterator[None]:
    yield


def _timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def appends(workdir: Path, url: str, catalog: SqlCatalog, rows: int) -> dict[str, float]:
    """Seconds of a change pass appending `rows` new keys to a table of `rows` rows, with and
    without the lookup."""
    seconds: dict[str, list[float]] = {"lookup": [], "no lookup": []}
    for attempt in range(REPEATS):
        for label, switch in (("lookup", _as_is), ("no lookup", _without_append_lookup)):
            name = f"db.appends_{attempt}_{label.replace(' ', '_')}"
            table = catalog.create_table(name, schema=SCHEMA)
            table.append(_rows(0, rows))
            config = _config(workdir, url, name)
            sync(config, table_names=[name])  # the export
            table.append(_rows(rows, rows))
            with switch():
                seconds[label].append(_timed(lambda config=config, name=name: sync(config, table_names=[name])))
    return {label: statistics.median(values) for label, values in seconds.items()}


def capped_export(workdir: Path, url: str, catalog: SqlCatalog, rows: int) -> dict[str, float]:
    """Seconds of an export of `rows` rows in FILES files: uncapped, capped at one file a pass
    with the last pass's re-read of the earlier files' keys, and capped without it."""
    seconds: dict[str, list[float]] = {"uncapped": [], "capped": [], "capped, no re-read": []}
    runs: list[tuple[str, dict[str, int], Callable[[], Any]]] = [
        ("uncapped", {}, _as_is),
        ("capped", {"max_files": 1}, _as_is),
        ("capped, no re-read", {"max_files": 1}, _without_reread),
    ]
    for attempt in range(REPEATS):
        for label, batch, switch in runs:
            slug = label.replace(" ", "_").replace(",", "")
            name = f"db.export_{attempt}_{len(seconds[label])}_{slug}"
            table = catalog.create_table(name, schema=SCHEMA)
            for part in range(FILES):
                table.append(_rows(part * (rows // FILES), rows // FILES))
            config = _config(workdir, url, name, **batch)
            with switch():
                seconds[label].append(_timed(lambda config=config, name=name: sync(config, table_names=[name])))
    return {label: statistics.median(values) for label, values in seconds.items()}


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    server = OsmemServer.start(seed=[], freeze=False, japanese=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            catalog = SqlCatalog("lake", uri=f"sqlite:///{workdir / 'catalog.db'}", warehouse=workdir.as_uri())
            catalog.create_namespace("db")
            added = appends(workdir, server.url, catalog, rows)
            lookup, plain = added["lookup"], added["no lookup"]
            print(f"append pass of {rows} new keys: {lookup:.2f} s with the lookup, {plain:.2f} s without")
            print(f"  +{100 * (lookup / plain - 1):.1f} %, {-(-rows // 1000)} _mget requests")
            export = capped_export(workdir, server.url, catalog, rows)
            whole, cut, bare = export["uncapped"], export["capped"], export["capped, no re-read"]
            print(f"export of {rows} rows in {FILES} files: uncapped {whole:.2f} s; one file a pass")
            print(f"  {cut:.2f} s, {bare:.2f} s without the re-read (+{100 * (cut / bare - 1):.1f} %)")
    finally:
        server.close()


if __name__ == "__main__":
    main()

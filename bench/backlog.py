"""A backlog of one-row snapshots, as a streaming writer leaves them while syncs are paused:
planning's time and peak RSS (`plan_table`, SQLite state), and the one sync that catches it up
(in-process engine, osmem), each in a process of its own.

The commits are written as a writer with manifest merging makes them (Iceberg's default for
appends: a snapshot's manifest list holds its own one-file manifest and the ones before it, merged
into one every `--merge-every` commits), in one catalog commit: pyiceberg commits one at a time
rewrite the whole metadata file each, which a 10^4-snapshot table makes hours long.

    python -m bench.backlog [--commits 1000 10000]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from osmem_server import OsmemServer
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

NAME = "db.stream"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType(), required=False),
    identifier_field_ids=[1],
)


def catalog(workdir: Path) -> SqlCatalog:
    return SqlCatalog("lake", uri=f"sqlite:///{workdir / 'catalog.db'}", warehouse=(workdir / "warehouse").as_uri())


def config(workdir: Path, opensearch_url: str) -> Any:
    from icecdc.config import parse_config

    return parse_config(
        {
            "catalog": {
                "name": "lake",
                "type": "sql",
                "uri": f"sqlite:///{workdir / 'catalog.db'}",
                "warehouse": (workdir / "warehouse").as_uri(),
            },
            "state": {"type": "sqlite", "path": str(workdir / "state.db")},
            "opensearch": {"url": opensearch_url},
            "engine": {"use": "in_process"},
            "tables": [{"name": NAME, "index": "stream"}],
        }
    )


def one_row_commits(table: Table, commits: int, first_id: int, merge_every: int) -> None:
    """`commits` appends of one one-row file each after the current snapshot, in one catalog commit."""
    metadata, io = table.metadata, table.io
    spec, schema, location = metadata.spec(), metadata.schema(), table.location()
    parent = metadata.current_snapshot_id
    current = table.current_snapshot()
    manifests: list[ManifestFile] = current.manifests(io) if current else []
    # (snapshot, sequence number, file) of every live file: what a merge writes as EXISTING entries
    files = [
        (e.snapshot_id or 0, e.sequence_number or 0, e.data_file)
        for m in manifests
        for e in m.fetch_manifest_entry(io, discard_deleted=True)
    ]
    sequence = metadata.next_sequence_number()
    arrow = schema.as_arrow()
    updates: list[Any] = []
    for k in range(commits):
        snapshot_id = 10**15 + sequence
        path = f"{location}/data/stream-{sequence:08d}.parquet"
        pq.write_table(pa.Table.from_pylist([{"id": first_id + k, "name": f"n{k}"}], schema=arrow), path.removeprefix("file://"))
        data_file = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=Record(),
            record_count=1,
            file_size_in_bytes=len(io.new_input(path).open().read()),
        )
        data_file.spec_id = spec.spec_id
        merging = len(manifests) + 1 >= merge_every
        with write_manifest(
            2, spec, schema, io.new_output(f"{location}/metadata/m-{snapshot_id}.avro"), snapshot_id, "zstd"
        ) as w:
            w.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=data_file))
            if merging:  # the commit merges its manifest with the ones before (EXISTING entries keep their commit's numbers)
                for s, seq, f in files:
                    w.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.EXISTING,
                            snapshot_id=s,
                            sequence_number=seq,
                            file_sequence_number=seq,
                            data_file=f,
                        )
                    )
        own = w.to_manifest_file()
        own.sequence_number = own.min_sequence_number = sequence
        if merging:
            own.min_sequence_number = min([sequence, *(seq for _, seq, _ in files)])
        files.append((snapshot_id, sequence, data_file))
        manifests = [own] if merging else [own, *manifests]
        manifest_list = f"{location}/metadata/snap-{snapshot_id}.avro"
        with write_manifest_list(2, io.new_output(manifest_list), snapshot_id, parent, sequence, "zstd") as lw:
            lw.add_manifests(manifests)
        updates.append(
            AddSnapshotUpdate(
                snapshot=Snapshot(
                    snapshot_id=snapshot_id,
                    parent_snapshot_id=parent,
                    sequence_number=sequence,
                    timestamp_ms=int(time.time() * 1000),
                    manifest_list=manifest_list,
                    summary=Summary(Operation.APPEND),
                    schema_id=schema.schema_id,
                )
            )
        )
        parent, sequence = snapshot_id, sequence + 1
    updates.append(SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=parent))
    table.catalog.commit_table(table, (), tuple(updates))


def phase(workdir: Path, url: str, what: str) -> dict[str, Any]:
    """Plan or sync the table in this process: seconds and peak RSS."""
    from icecdc.catalog import identifier_columns
    from icecdc.planning import plan_table
    from icecdc.state import SqliteStateStore
    from icecdc.sync import sync

    settings = config(workdir, url)
    table = catalog(workdir).load_table(NAME)
    started = time.monotonic()
    if what == "plan":
        store = SqliteStateStore(workdir / "state.db")
        result: Any = plan_table(table, settings.tables[0], store, identifier_columns(table, settings.tables[0]))
        done = {"snapshots": result.snapshots, "items": result.items}
    else:
        (result,) = sync(settings, table_names=[NAME])
        done = {"snapshots": result.snapshots, "indexed": result.writes.indexed}
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {**done, "seconds": round(seconds, 2), "peak_rss_mib": round(peak)}


def in_child(workdir: Path, url: str, what: str) -> dict[str, Any]:
    args = [sys.executable, "-m", "bench.backlog", "--phase", what, "--workdir", str(workdir), "--url", url]
    child = subprocess.run(args, capture_output=True, text=True, check=False)
    if child.returncode:
        raise RuntimeError(child.stderr[-3000:])
    return dict(json.loads(child.stdout.strip().splitlines()[-1]))


def measure(commits: int, merge_every: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="backlog-"))
    try:
        lake = catalog(workdir)
        lake.create_namespace("db")
        table = lake.create_table(NAME, SCHEMA)
        table.append(pa.Table.from_pylist([{"id": -1, "name": "first"}], schema=SCHEMA.as_arrow()))
        with OsmemServer.start() as search:
            export = in_child(workdir, search.url, "sync")  # the export; then the writer goes on while syncs pause
            started = time.monotonic()
            one_row_commits(lake.load_table(NAME), commits, 0, merge_every)
            written = time.monotonic() - started
            plan = in_child(workdir, search.url, "plan")
            caught_up = in_child(workdir, search.url, "sync")
            replanned = in_child(workdir, search.url, "plan")  # planning twice: a no-op
        return {
            "commits": commits,
            "written_seconds": round(written, 1),
            "export": export,
            "plan": plan,
            "sync": caught_up,
            "plan_after": replanned,
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--merge-every", type=int, default=100, help="manifests a commit merges into one")
    parser.add_argument("--phase", choices=["plan", "sync"], help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.workdir, args.url, args.phase)))
        return
    for commits in args.commits:
        print(json.dumps(measure(commits, args.merge_every)), flush=True)


if __name__ == "__main__":
    main()

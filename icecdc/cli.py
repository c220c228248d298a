"""The `icecdc` command: sync, status, verify, demo, doctor."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from icecdc.errors import IcecdcError

if TYPE_CHECKING:  # the CLI imports the library lazily: `icecdc --help` starts fast
    from pyiceberg.table import Table

    from icecdc.config import Config, TableConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icecdc", description="Keep OpenSearch indexes equal to Apache Iceberg tables.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    commands = parser.add_subparsers(dest="command", required=True)

    sync = commands.add_parser("sync", help="plan and apply every commit since the last sync")
    sync.add_argument("--config", required=True, type=Path)
    sync.add_argument("--table", action="append", help="only this table (repeatable)")

    status = commands.add_parser("status", help="checkpoint, pending work and lag per table")
    status.add_argument("--config", required=True, type=Path)

    verify = commands.add_parser("verify", help="compare each index with its table (reads both whole)")
    verify.add_argument("--config", required=True, type=Path)
    verify.add_argument("--table", action="append", help="only this table (repeatable)")

    demo = commands.add_parser("demo", help="an embedded catalog, OpenSearch and a few commits, synced")
    demo.add_argument("--dir", type=Path, default=Path(".icecdc-demo"))

    doctor = commands.add_parser(
        "doctor", help="check what makes a first deploy or a first commit fail, with the fix for each (exit 1 if any fails)"
    )
    doctor.add_argument(
        "phase", choices=["before", "after"], help="before: ahead of `cdk deploy`; after: the deployed stack and its first runs"
    )
    doctor.add_argument("--config", required=True, type=Path, help="the configuration `cdk deploy` is given")
    doctor.add_argument("--json", action="store_true", help="one JSON document on stdout, for scripts")

    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        commands_run = {"sync": _sync, "status": _status, "verify": _verify, "demo": _demo, "doctor": _doctor}
        return commands_run[args.command](args)
    except IcecdcError as exc:
        print(f"icecdc: error: {exc}", file=sys.stderr)
        return 2


def _sync(args: argparse.Namespace) -> int:
    from icecdc.config import load_config
    from icecdc.processing import sync

    config = load_config(args.config)
    if args.table:
        for name in args.table:
            config.table(name)  # fail on an unknown name before anything is read
    results = sync(config, table_names=args.table)  # Spark starts only for a pass that needs it
    for r in results:
        checkpoint = r.checkpoint.snapshot_id if r.checkpoint else "unchanged"
        print(
            f"{r.table}: {r.snapshots} snapshots ({r.engine or 'no'} engine), {r.files} files, {r.changes.rows} rows read, "
            f"{r.changes.carryovers} carryovers dropped, {r.writes.indexed} indexed, {r.writes.deleted} deleted, "
            f"{r.writes.superseded} superseded, {r.writes.dead_lettered} dead-lettered, checkpoint {checkpoint}, {r.seconds:.1f}s"
        )
    return 0


def _tables(config: Config, names: list[str] | None) -> Iterator[tuple[TableConfig, Table]]:
    """The named tables (all configured ones when none are named), loaded from the catalog."""
    from icecdc.catalog import load_table, open_catalog

    catalog = open_catalog(config.catalog)
    for table_config in [config.table(n) for n in names] if names else config.tables:
        yield table_config, load_table(catalog, table_config.name)


def _status(args: argparse.Namespace) -> int:
    from icecdc.config import load_config
    from icecdc.deadletters import DeadLetters
    from icecdc.index import IndexAlias
    from icecdc.opensearch import open_client
    from icecdc.state import open_state_store
    from icecdc.status import table_status

    config = load_config(args.config)
    store = open_state_store(config.state)
    client = open_client(config.opensearch)
    dead_letters = DeadLetters(config.dead_letter) if config.dead_letter else None
    print(f"{'table':<30} {'checkpoint':>20} {'current':>20} {'pending':>8} {'lag':>6} {'lag s':>9} {'dead letters':>13}")
    for table_config, table in _tables(config, None):
        s = table_status(table, table_config, store, time.time(), dead_letters, IndexAlias(client, table_config.index))
        checkpoint = s.checkpoint.snapshot_id if s.checkpoint else "none"
        lag = "?" if s.lag_snapshots is None else s.lag_snapshots
        print(
            f"{s.table:<30} {checkpoint!s:>20} {s.current_snapshot_id!s:>20} {s.pending_items:>8} {lag!s:>6} "
            f"{s.lag_seconds:>9.0f} {s.dead_letters:>13}"
        )
        if s.unfinished:
            print(f"  unfinished: {s.unfinished} (the next sync, or the planner's sweep, finishes it)")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from icecdc.catalog import identifier_columns
    from icecdc.config import load_config
    from icecdc.opensearch import open_client
    from icecdc.verify import diff_index

    config = load_config(args.config)
    client = open_client(config.opensearch)
    differing = 0
    for table_config, table in _tables(config, args.table):
        diff = diff_index(table, identifier_columns(table, table_config), client, table_config.index)
        differing += bool(diff)
        print(f"{table_config.name} → {table_config.index}: {diff.summary()}")
    return 1 if differing else 0


def _demo(args: argparse.Namespace) -> int:
    from icecdc.demo import run_demo

    logging.getLogger().setLevel(logging.WARNING)  # the demo prints its own story
    ok = run_demo(args.dir)
    print("\ndemo finished: the index equalled the table after every sync" if ok else "\ndemo FAILED: see ✗ above")
    return 0 if ok else 1


def _doctor(args: argparse.Namespace) -> int:
    from icecdc.config import load_config
    from icecdc.doctor import Phase, diagnose

    # A refused or unreachable OpenSearch request is a check's finding, printed with its fix: not
    # also opensearch-py's warning with a traceback.
    logging.getLogger("opensearch").setLevel(logging.ERROR)
    diagnosis = diagnose(load_config(args.config), Phase(args.phase))
    if args.json:
        print(json.dumps(diagnosis.as_json(), indent=2, ensure_ascii=False))
    else:
        print(f"icecdc doctor {diagnosis.phase}: stack {diagnosis.stack} in {diagnosis.region}")
        for check in diagnosis.checks:
            print("\n".join(check.lines()))
        print(diagnosis.summary())
    return 0 if diagnosis.ok else 1


if __name__ == "__main__":
    sys.exit(main())

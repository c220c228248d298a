"""What the commands say agrees with what they did: the counts of the
planning, pass and summary lines; one summary per command; an audit's drift counted in ids, a
repair's in writes; a derived index name said to be derived; a mistyped SQLite catalog path
refused, not created; a mapping conflict pointing to a command that exists."""

from __future__ import annotations

import argparse
import logging
import os
import re
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from icecdc.cli import _parser
from icecdc.config import parse_config
from icecdc.destination.index import IndexAlias, IndexSpec
from icecdc.destination.index.indices import add_missing_fields
from icecdc.dryrun import dry_run
from icecdc.errors import ConfigError
from icecdc.model import EngineKind, Progress
from icecdc.state import Lease, SqliteStateStore
from icecdc.words import counted
from tests.support.cli import icecdc
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

NAME = "db.orders"
LogCaptured = pytest.LogCaptureFixture
INFO = re.compile(r"^\S+ \S+ INFO (\S+): (.*)$")


@pytest.fixture
def local(tmp_path: Path, osmem_clone: Any) -> Pipeline:
    return Pipeline(tmp_path, osmem_clone.url, spark=None, engine=EngineKind.IN_PROCESS)


def info_lines(stderr: str) -> list[str]:
    """The INFO records of a command, as `logger: message`."""
    return [f"{m[1]}: {m[2]}" for line in stderr.splitlines() if (m := INFO.match(line))]


def test_counts_agree_between_the_planning_pass_and_summary_lines(local: Pipeline) -> None:
    """Reproduced: an export logged "planned 0 snapshots into 1 work items", then "applying 1
    snapshots"; a pass "reads 3 files", then "applying 2 snapshots, 2 files"; and each pass's
    summary was logged as well as printed."""
    table = orders(local)
    for region, ids in (("us", (1, 2, 3)), ("eu", (4, 5, 6)), ("ap", (7, 8, 9))):
        table.append(rows(*ids, region=region))
    path = local.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(local.config_dict([{"name": NAME}])))

    export = icecdc("sync", "--config", str(path))
    snapshot = table.refresh().metadata.current_snapshot_id
    assert export.returncode == 0, export.stderr
    logged = info_lines(export.stderr)
    planned = f"planned an export of snapshot {snapshot} (1 work item), 1 new"
    assert f"icecdc.planning: {NAME}: {planned}" in logged
    assert f"icecdc.sync.passes: {NAME}: applying 1 snapshot, 3 files: in_process engine" in logged
    summary = f"{NAME}: 1 snapshot (in_process engine), 3 files, 9 rows read"
    assert export.stdout.startswith(summary)

    table.append(rows(10, region="us"))
    table.delete("id = 4")  # rewrites eu's file: a task reading the removed and the added file
    changes = icecdc("sync", "--config", str(path))
    logged = info_lines(changes.stderr)
    planned = "planned 2 snapshots of changes (2 work items), 2 new"
    assert f"icecdc.planning: {NAME}: {planned}" in logged
    assert f"icecdc.sync.passes: {NAME}: applying 2 snapshots, 2 files: in_process engine" in logged
    assert changes.stdout.startswith(f"{NAME}: 2 snapshots (in_process engine), 2 files, ")
    said = "\n".join(logged)
    assert "this pass reads" not in said and "rows read" not in said  # said once, on stdout
    assert not [line for line in logged if "nothing new to plan" in line]  # the summary says it
    local.assert_index_equals_table(local.config({"name": NAME}), NAME)


def test_audit_counts_ids_once_and_says_its_summary_once_and_repair_counts_writes(
    local: Pipeline,
) -> None:
    """Reproduced: two ids missing and one extra were "5 findings" (the counts of two partitions
    and the three ids), said twice (logged, and printed); a repair of an intact id said
    "repaired 0 ids"."""
    table = orders(local)
    for region, ids in (("us", (1, 2, 3)), ("eu", (4, 5, 6)), ("ap", (7, 8, 9))):
        table.append(rows(*ids, region=region))
    path = local.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(local.config_dict([{"name": NAME}])))
    assert icecdc("sync", "--config", str(path)).returncode == 0
    for doc_id in ("1", "5"):  # at their own version: a repair (external_gte) may write them again
        version = local.versions("orders")[doc_id]
        local.client.delete(index="orders", id=doc_id, version=version, version_type="external_gte")
    local.client.indices.refresh(index="orders")
    extra = {"id": 99, "region": "ap", "status": "x", "amount": 0.0}
    local.client.index(index="orders", id="99", body=extra, refresh=True)

    audit = icecdc("audit", "--config", str(path), "--seed", "1")
    assert audit.returncode == 1, audit.stderr
    head = audit.stdout.splitlines()[0]
    said = f"{NAME} → orders: 3 ids differ (2 missing, 1 extra) at snapshot "
    assert head.startswith(said), head
    assert "findings" not in audit.stdout and "audited index" not in audit.stderr, audit.stderr

    repaired = icecdc("repair", "--config", str(path), "--table", NAME, "--from-audit")
    assert repaired.returncode == 0, repaired.stdout
    assert "wrote 3 documents of " in repaired.stdout
    assert "ids compared, 2 indexed, 1 deleted, 0 dead-lettered" in repaired.stdout
    assert "repair of" not in repaired.stderr  # the summary once, on stdout
    again = icecdc("repair", "--config", str(path), "--table", NAME, "--id", "1")
    assert "orders: nothing written in 1 ids ('1'): 1 id compared, none differs" in again.stdout
    assert "repaired" not in again.stdout
    local.assert_index_equals_table(local.config({"name": NAME}), NAME)


def test_an_index_name_derived_from_the_table_name_is_said_to_be_derived() -> None:
    """Reproduced: `tables[0].index 'Customers' is not a valid OpenSearch index name`, for an
    `index` key the user never wrote."""
    raw = {"catalog": {"name": "l"}, "state": {"path": "s.db"}, "opensearch": {"url": "http://x"}}
    with pytest.raises(ConfigError) as refused:
        parse_config({**raw, "tables": [{"name": "db.Customers"}]})
    assert str(refused.value) == (
        "tables[0]: the index name 'Customers', derived from the table name 'db.Customers', is not "
        "a valid OpenSearch index name (it must be lower case): name the "
        "index with the table's `index` key, e.g. index: customers"
    )
    named = parse_config({**raw, "tables": [{"name": "db.Customers", "index": "customers"}]})
    assert named.table("db.Customers").index == "customers"
    several = {"name": "db.Customers", "indexes": [{"index": "a"}, {"index": "b"}]}
    targets = parse_config({**raw, "tables": [several]}).table("db.Customers").each_index()
    assert [t.key for t in targets] == ["db.Customers#a", "db.Customers#b"]  # was refused too


def test_a_mistyped_sqlite_catalog_path_is_refused_and_no_file_is_made(tmp_path: Path) -> None:
    """Reproduced: `sync` with `catalog.uri` naming a file in an existing directory created an
    empty catalog there, then said the table did not exist."""
    (tmp_path / "lake").mkdir()
    mistyped = tmp_path / "lake" / "catalgo.db"
    raw = {
        "catalog": {"name": "lake", "type": "sql", "uri": f"sqlite:///{mistyped}"},
        "state": {"path": str(tmp_path / "state.db")},
        "opensearch": {"url": "http://127.0.0.1:9"},
        "tables": [{"name": "db.orders"}],
    }
    path = tmp_path / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    run = icecdc("sync", "--config", str(path))
    assert run.returncode == 2
    assert run.stderr.strip() == (
        f"icecdc: error: catalog 'lake': the SQLite file {mistyped} (catalog.uri) does not exist: "
        "check the path; icecdc opens a catalog and never creates one (pyiceberg or Spark "
        "creates it with its first table)"
    )
    assert not mistyped.exists()


def test_a_mapping_conflict_points_to_repair_rebuild(local: Pipeline, caplog: LogCaptured) -> None:
    """Reproduced: the warning advised "reset the table", a command that does not exist."""
    keyword = {"mappings": {"properties": {"amount": {"type": "keyword"}}}}
    local.client.indices.create(index="conflict", body=keyword)
    spec = IndexSpec(mappings={"properties": {"amount": {"type": "double"}}})
    with caplog.at_level(logging.WARNING, logger="icecdc.destination.index"):
        add_missing_fields(local.client, "conflict", spec)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "reset the table" not in warning
    rebuild = "`icecdc repair --table TABLE --rebuild`, for the table that writes index 'conflict'"
    assert rebuild in warning


def test_a_log_line_clears_the_progress_bar_first(capsys: pytest.CaptureFixture[str]) -> None:
    """Reproduced: on a terminal, a warning logged during a pass was written after the bar's text,
    on the bar's line."""
    from icecdc.cli import _ProgressBar

    root, progress = logging.getLogger(), logging.getLogger("icecdc.progress")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    root.addHandler(handler)
    bar = _ProgressBar.install()
    try:
        shown = Progress(NAME, 1, 2, 300, 1.0, export_files=4, export_files_applied=2)
        progress.info(shown.line(), extra={"progress": shown})
        logging.getLogger("icecdc.sync.passes").warning("a warning during the pass")
        bar.clear()  # the command's end: nothing drawn, nothing cleared
    finally:
        root.removeHandler(handler)
        progress.removeHandler(bar)
        progress.propagate, progress.level = True, logging.NOTSET
    err = capsys.readouterr().err
    drawn = err.split("\x1b[K")[0]
    assert drawn.startswith(f"\r{NAME}: pass 1, [") and "2/4 files" in drawn
    assert err == drawn + "\x1b[K" + "\r\x1b[K" + "WARNING a warning during the pass\n"


def every_command(parser: argparse.ArgumentParser, name: str = "icecdc") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Each command's parser, by its command line, the subcommands' within theirs."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from every_command(sub, f"{name} {command}")


def test_every_command_has_a_description_and_every_argument_a_help_text() -> None:
    """Reproduced: the subcommands' --help had no description line; `repair --table`, `demo --dir`,
    `init --catalog-type` and `dead-letters list --json` had no help text."""
    commands = dict(every_command(_parser()))
    assert {"icecdc repair", "icecdc dead-letters list", "icecdc demo", "icecdc init"} <= set(commands)
    for name, parser in commands.items():
        assert parser.description, f"{name} --help has no description"
        assert " ".join(parser.description.split()) in " ".join(parser.format_help().split())
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, (
                f"{name} {'/'.join(action.option_strings) or action.dest} has no help"
            )
    described = icecdc("repair", "--help")
    assert described.returncode == 0 and "Rewrite a drifted scope of a table's index" in described.stdout.split("options:")[0]


def test_a_run_waiting_for_a_lease_says_at_once_who_holds_it_and_how_long_it_waits(tmp_path: Path, caplog: LogCaptured) -> None:
    """A second run beside a running one (or after a killed one) says what it waits for, the
    holder and the table, and for how long at most, before it waits."""
    store = SqliteStateStore(tmp_path / "state.db")
    with Lease(store, NAME, 60) as running:
        assert running.held
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="icecdc"), Lease(store, NAME, 2) as second:
            assert not second.held
    (said,) = [r for r in caplog.records if "lease" in r.getMessage()]
    assert said.created - (time.time() - (time.monotonic() - started)) < 1.5  # before the 2 s wait
    holder = f"process {os.getpid()} on {socket.gethostname()}"
    assert said.getMessage().startswith(f"{NAME}: {holder} holds the table's processing lease: ")
    assert "waiting for it up to 2 s" in said.getMessage()
    assert re.search(r"runs out in (59|60) s unless that run renews it", said.getMessage())


def test_a_generation_built_where_no_index_served_says_so_not_none(local: Pipeline, caplog: LogCaptured) -> None:
    """A rebuild of an index that does not exist yet: what searches read, and what the swap
    replaced, are worded for none; no log line shows "None"."""
    alias = IndexAlias(local.client, "customers")
    spec = IndexSpec({"properties": {"id": {"type": "long"}}})
    with caplog.at_level(logging.INFO, logger="icecdc"):
        generation = alias.start_rebuild(spec, set())
        alias.finish(generation, spec)
    said = [r.getMessage() for r in caplog.records if r.name.startswith("icecdc")]
    building = f"index 'customers': building generation {generation!r} (no index serves searches until the swap)"
    assert building in said
    assert f"index 'customers': generation {generation!r} swapped in (no index served before)" in said
    assert not [line for line in said if "None" in line]


def test_a_dry_run_of_a_table_with_no_snapshot_says_so_not_none(local: Pipeline) -> None:
    local.catalog.create_table("db.orders", schema=rows(1).schema)
    (plan,) = dry_run(local.config({"name": NAME, "identifier_columns": ["id"]}))
    assert "no snapshot yet" in plan.lines()[0] and "None" not in "\n".join(plan.lines())


def test_a_sync_after_one_that_applied_says_nothing_new_to_plan_once(local: Pipeline, caplog: LogCaptured) -> None:
    """Two rounds of `sync --watch`: the first applies (the summary says it caught up), the second
    finds nothing new: "nothing new to plan" is said once in all, not at the end of the first
    round as well."""
    table = orders(local)
    table.append(rows(1, 2))
    config = local.config({"name": NAME})
    local.sync(config, NAME)
    table.append(rows(3))
    with caplog.at_level(logging.INFO, logger="icecdc"):
        local.sync(config, NAME)
        local.sync(config, NAME)
    said = [r.getMessage() for r in caplog.records]
    assert said.count(f"{NAME}: nothing new to plan") == 1, said


@pytest.mark.parametrize(
    ("n", "thing", "plural", "said"),
    [
        (1, "snapshot", "", "1 snapshot"),
        (2, "snapshot", "", "2 snapshots"),
        (0, "file", "", "0 files"),
        (1, "index", "indexes", "1 index"),
        (2_000, "row", "", "2,000 rows"),
        (2, "retry", "retries", "2 retries"),
    ],
)
def test_counts_are_worded_by_one_helper(n: int, thing: str, plural: str, said: str) -> None:
    assert counted(n, thing, plural) == said

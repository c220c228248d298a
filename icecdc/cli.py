"""The `icecdc` command and its subcommands.

They are init, check, sync, status, verify, audit, repair,
dead-letters, demo, dev-server and doctor.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from icecdc.errors import IcecdcError, access_denied
from icecdc.logs import SUMMARY_LOGGER, quiet_chatty_libraries
from icecdc.model import PassProgress, PassStage, Progress
from icecdc.words import counted

if TYPE_CHECKING:  # the CLI imports the library lazily: `icecdc --help` starts fast
    from pyiceberg.table import Table

    from icecdc.config import Config, TableConfig
    from icecdc.deadletters import Selection, StoredLetter
    from icecdc.destination.port import Destination
    from icecdc.status import TableStatus
    from icecdc.sync import SyncResult


def entry() -> None:
    """The `icecdc` console script: `main`, then an exit that does not tear the interpreter down.

    Tearing down the ~1,000 modules a sync imports, such as pyiceberg, SQLAlchemy, pydantic and
    pyarrow, takes 0.2-0.35 s once the work is done. That is a fifth of a small sync's whole
    command, and serial time in every command.

    The exit is Python's own up to that point: idle pool threads are told to stop, the other
    threads joined, and the atexit handlers run, Spark's and multiprocessing's among them.
    Then `_leave` flushes the logs and the output and ends the process; it is registered
    before any handler the command adds, and so runs after them.
    """
    returned: list[int] = []
    atexit.register(_leave, returned)
    code = main()
    returned.append(code)
    sys.exit(code)


def _leave(returned: list[int]) -> None:
    if not returned:
        return
    code = returned[0]
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # a reader gone from the pipe (`icecdc status | head`): as `main` says
        pass
    except OSError:  # the output could not be written (a full disk): Python's own exit says 120
        code = code or 120
    os._exit(code)


# The extra that installs each optional module a command may import (pyproject.toml's extras).
EXTRAS = {
    "boto3": "aws",
    "botocore": "aws",
    "requests": "aws",
    "pyspark": "spark",
    "py4j": "spark",
    "osmem_server": "local",
    "aws_cdk": "cdk",
    "constructs": "cdk",
    "cdk_nag": "cdk",
}
INTERNAL = 3  # a bug: an error icecdc did not expect
INTERRUPTED = 130  # a shell's code for a command ended by SIGINT (128 + 2)
NOTHING_LOST = "nothing is lost, the next sync resumes where this one stopped"


def main(argv: list[str] | None = None) -> int:
    """Run one command and return its exit code.

    0: done. 1: a difference found, by verify, audit or doctor, or an incomplete repair or replay.
    2: an error, one line on stderr, with its traceback under -v. 3: an internal error (a bug),
    one line asking for a report, with its traceback under -v. 130: interrupted.
    """
    args = _parser().parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    found = list(logging.getLogger().handlers)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_chatty_libraries()
    # opensearch-py logs every failed request as a warning with its traceback: the expected 404 of
    # an alias not made yet, each retry of a request. A failure that matters reaches icecdc, which
    # says it in one line; with -v every request shows, for a user tracing one.
    logging.getLogger("opensearch").setLevel(logging.DEBUG if args.verbose else logging.CRITICAL)
    # each command prints its summary on stdout: the library's log of it would say it twice
    logging.getLogger(SUMMARY_LOGGER).setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    if not args.verbose:  # py4j logs a lost call to Spark's JVM on the root logger, then raises it
        for handler in set(logging.getLogger().handlers) - set(found):  # basicConfig's
            handler.addFilter(_not_py4j)
    with _Interrupts() as interrupts:
        try:
            _locate_config(args)
            return _run(args)
        except KeyboardInterrupt:
            return _interrupted()
        except BrokenPipeError:
            # The reader left (`icecdc dead-letters list | head`): what it read is all it wanted.
            # The rest of the output goes nowhere, so that the exit's flush cannot fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except Exception as exc:  # noqa: BLE001 - a user's failure: one line (-v: its traceback)
            if interrupts.seen():  # Spark's SIGINT handler cancels its jobs: a Py4JError instead
                return _interrupted()
            line = _failure(exc, args)
            if args.verbose:
                logging.exception("icecdc %s failed", args.command)
            if line is None:  # a bug
                print(_internal(exc, args), file=sys.stderr)
                return INTERNAL
            print(f"icecdc: error: {line}", file=sys.stderr)
            return 2


def _internal(exc: Exception, args: argparse.Namespace) -> str:
    """The one line of an error icecdc did not expect: what it was, and how to report it."""
    what = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    traced = "the traceback above" if args.verbose else "the traceback that `-v` adds"
    return (
        f"icecdc: internal error: {what} (a bug in icecdc `{args.command}`: please report it, "
        f"with {traced})"
    )


def _not_py4j(record: logging.LogRecord) -> bool:
    return not (record.name == "root" and f"{os.sep}py4j{os.sep}" in record.pathname)


def _interrupted() -> int:
    print(f"icecdc: interrupted: {NOTHING_LOST}", file=sys.stderr)
    return INTERRUPTED


class _Interrupts:
    """Whether a SIGINT arrived during the command, whichever handler took it.

    PySpark replaces Python's handler with its own, whose cancelling of the running jobs can raise a
    Py4JError rather than KeyboardInterrupt. Python writes each signal's number to the wakeup file
    descriptor, whoever handles it.
    """

    def __enter__(self) -> _Interrupts:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._previous: int | None = None
        with contextlib.suppress(ValueError):  # not the main thread (a test calling `main`)
            self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        return self

    def seen(self) -> bool:
        try:
            return bytes([signal.SIGINT]) in os.read(self._read, 1024)
        except BlockingIOError:  # no signal at all
            return False

    def __exit__(self, *_: object) -> None:
        if self._previous is not None:
            signal.set_wakeup_fd(self._previous)
        os.close(self._read)
        os.close(self._write)


def _run(args: argparse.Namespace) -> int:
    commands_run = {
        "sync": _sync,
        "status": _status,
        "verify": _verify,
        "audit": _audit,
        "repair": _repair,
        "dead-letters": _dead_letters,
        "demo": _demo,
        "doctor": _doctor,
        "init": _init,
        "check": _check,
        "dev-server": _dev_server,
    }
    return commands_run[args.command](args)


def _failure(exc: Exception, args: argparse.Namespace) -> str | None:
    """The one line for a failure a user can cause; None for a bug.

    That is icecdc's own message, OpenSearch's refusal with its URL, the extra that installs a
    missing module, or a file the system refused.
    """
    denied = access_denied(exc)  # an AWS request the caller's IAM refused: its action and resource
    # (an OpenSearch client's own 403 is worded below, with the configured URL)
    if denied is not None and getattr(exc, "denied_request", None) is None:
        return denied
    if isinstance(exc, IcecdcError):
        return str(exc)
    module = exc.name.split(".")[0] if isinstance(exc, ModuleNotFoundError) and exc.name else ""
    if module in EXTRAS:
        install = f"pip install 'icecdc[{EXTRAS[module]}]'"
        return f"`icecdc {args.command}` needs {module}, which is not installed: {install}"
    from icecdc.destination.client import TransportError

    if isinstance(exc, TransportError):
        from icecdc.destination.client import describe_failure

        return describe_failure(exc, _opensearch_url(args))
    if isinstance(exc, OSError):
        return str(exc)  # [Errno 13] Permission denied: 'path'
    return None


def _opensearch_url(args: argparse.Namespace) -> str:
    """The configuration's OpenSearch URL, for a message about a request it failed."""
    from icecdc.config import load_config

    try:
        return load_config(args.config).opensearch.url
    except (IcecdcError, AttributeError):  # no --config, or a config that no longer loads
        return "the configured URL"


def _parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per command, each with its options; -v and -q anywhere."""
    parser = argparse.ArgumentParser(
        prog="icecdc",
        description="Keep OpenSearch indexes equal to Apache Iceberg tables.",
        epilog="exit codes: 0 done, 1 a difference found (verify, audit, doctor, an incomplete "
        "repair or replay), 2 an error (one line on stderr; -v: its traceback), 3 an internal "
        "error (a bug: please report it, with -v's traceback), 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"icecdc {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_sync_status_verify(commands)
    _add_audit_repair(commands)
    _add_dead_letters(commands)
    _add_demo_doctor(commands)
    _add_first_hour(commands)
    _add_output_options(parser, defaults=True)
    _config_by_default(parser)
    _described(parser)
    return parser


def _described(parser: argparse.ArgumentParser) -> None:
    """Each subcommand's --help opens with what it does: its line in its parent's list."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if sub.description is None and listed.get(name):
                    text = str(listed[name])
                    sub.description = text[:1].upper() + text[1:] + "."
                _described(sub)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("icecdc")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def _add_output_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """-v and -q on `parser` and on every subcommand beneath it: before or after the subcommand.

    A subcommand's options default to nothing, so as not to undo the same option given before it."""
    group = parser.add_mutually_exclusive_group()
    default: object = False if defaults else argparse.SUPPRESS
    verbose, quiet = "log debug detail, and a failure's traceback", "log warnings and errors only"
    group.add_argument("-v", "--verbose", action="store_true", default=default, help=verbose)
    group.add_argument("-q", "--quiet", action="store_true", default=default, help=quiet)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases list a parser again
                _add_output_options(sub, defaults=False)


def _add_sync_status_verify(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The commands that sync and read a table's state: sync, status, verify."""
    sync = commands.add_parser("sync", help="plan and apply every commit since the last sync")
    sync.add_argument("--config", required=True, type=Path)
    sync.add_argument("--table", action="append", help="only this table (repeatable)")
    sync.add_argument("--watch", action="store_true", help="sync in rounds until SIGTERM or Ctrl-C")
    between = "with --watch: from one round's start to the next, e.g. 30s, 2m, 45 (default 30s)"
    sync.add_argument("--interval", type=_interval, help=between)
    one_a_round = "one JSON document on stdout (--watch: one a round, a line each)"
    sync.add_argument("--json", action="store_true", help=one_a_round)
    dry_run = "print what a sync would plan, and each pass's engine; write nothing"
    sync.add_argument("--dry-run", action="store_true", help=dry_run)

    status = commands.add_parser("status", help="checkpoint, pending work and lag per table")
    status.add_argument("--config", required=True, type=Path)
    status.add_argument(
        "--json",
        action="store_true",
        help="per table: checkpoint, lag, pending work, an export's progress, dead letters, last "
        "audit",
    )
    status.add_argument("--findings", help="where audits are kept (default: beside a SQLite state)")

    verify = commands.add_parser(
        "verify", help="compare each index with its table (reads both whole)"
    )
    verify.add_argument("--config", required=True, type=Path)
    verify.add_argument("--table", action="append", help="only this table (repeatable)")
    verify.add_argument("--json", action="store_true", help="one JSON document on stdout")


def _add_audit_repair(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The drift commands: audit, repair."""
    audit = commands.add_parser(
        "audit", help="check each index against its table: counts by partition and a sample of rows"
    )
    audit.add_argument("--config", required=True, type=Path)
    audit.add_argument("--table", action="append", help="only this table (repeatable)")
    audit.add_argument(
        "--sample",
        type=int,
        default=None,
        help="rows compared field by field (default 3000; 0: counts only)",
    )
    audit.add_argument("--seed", type=int, help="repeat a sample")
    audit.add_argument(
        "--max-ids",
        type=int,
        default=None,
        help="extra documents named by id (default 1000; more are counted)",
    )
    audit.add_argument(
        "--list-limit",
        type=int,
        default=None,
        help="rows and documents listed to name extra documents, partitions smallest first "
        "(default 1000000)",
    )
    audit.add_argument("--findings", help="where audits are kept (default: beside a SQLite state)")
    audit.add_argument("--json", action="store_true", help="the reports as JSON")

    repair = commands.add_parser(
        "repair", help="rewrite a drifted scope of a table's index, or rebuild it"
    )
    repair.add_argument("--config", required=True, type=Path)
    repair.add_argument("--table", required=True, help="the table whose index is repaired")
    scope = repair.add_mutually_exclusive_group()
    scope.add_argument(
        "--partition",
        action="append",
        help="column=value[,column=value]: one partition (repeatable)",
    )
    scope.add_argument(
        "--from-audit", action="store_true", help="the scope of the last audit's findings"
    )
    scope.add_argument(
        "--rebuild",
        action="store_true",
        help="rebuild the whole index in a new generation, without downtime",
    )
    repair.add_argument(
        "--id", action="append", default=[], help="a document id, exactly as written (repeatable)"
    )
    repair.add_argument(
        "--key",
        action="append",
        default=[],
        help='a row\'s identifier values as JSON, e.g. \'{"a": 1, "b": "x,y"}\' (repeatable)',
    )
    repair.add_argument(
        "--ids-file",
        type=Path,
        help="ids one per line: as written, a JSON string, or a JSON object of identifier values",
    )
    repair.add_argument(
        "--ids", action="append", default=[], help="deprecated: one id with no comma (use --id)"
    )
    repair.add_argument("--findings", help="where audits are kept (default: beside a SQLite state)")
    repair.add_argument("--json", action="store_true", help="the report as JSON")


def _add_dead_letters(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`dead-letters` and its list, show, replay and mark-replayed."""
    letters = commands.add_parser("dead-letters", help="list, show, replay and mark dead letters")
    letter_commands = letters.add_subparsers(dest="letters_command", required=True)
    for command, text in (
        ("list", "the dead letters of each table"),
        ("show", "dead letters in full"),
        ("replay", "write the rows of dead-lettered ids as of the checkpoint again"),
        ("mark-replayed", "mark dead letters dealt with otherwise"),
    ):
        sub = letter_commands.add_parser(command, help=text)
        sub.add_argument("--config", required=True, type=Path)
        sub.add_argument(
            "--location",
            help="a directory or s3://bucket/prefix (default: the config's dead_letter)",
        )
        if command in ("show", "mark-replayed"):
            sub.add_argument("letter", nargs="+", help="a letter's id, as `list` prints it")
        else:
            sub.add_argument("--table", action="append", help="only this table (repeatable)")
            sub.add_argument(
                "--since",
                help="written at or after: an ISO time (UTC unless it says) or an age, e.g. 2h, 3d",
            )
            sub.add_argument("--until", help="written before: as --since")
            sub.add_argument("--reason", help="whose reason contains this text")
        if command == "list":
            sub.add_argument("--all", action="store_true", help="also the letters replayed")
            by_reason = "how many letters each reason has, with one letter's id"
            sub.add_argument("--by-reason", action="store_true", help=by_reason)
        if command == "replay":
            sub.add_argument("--letter", action="append", help="only this letter (repeatable)")
        if command == "mark-replayed":
            sub.add_argument("--note", required=True, help="what was done about them")
        if command in ("list", "replay"):
            sub.add_argument("--json", action="store_true", help="one JSON document on stdout")


def _add_demo_doctor(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The demo, and the deployment's checks."""
    demo = commands.add_parser(
        "demo", help="an embedded catalog, OpenSearch and a few commits, synced"
    )
    where = (
        "the demo's directory, emptied first: its catalog, tables and state (default .icecdc-demo)"
    )
    demo.add_argument("--dir", type=Path, default=Path(".icecdc-demo"), help=where)

    doctor = commands.add_parser(
        "doctor",
        help="check what makes a first deploy or a first commit fail, with the fix for each (exit "
        "1 if any fails)",
    )
    doctor.add_argument(
        "phase",
        choices=["before", "after"],
        help="before: ahead of `cdk deploy`; after: the deployed stack and its first runs",
    )
    doctor.add_argument(
        "--config", required=True, type=Path, help="the configuration `cdk deploy` is given"
    )
    doctor.add_argument(
        "--json", action="store_true", help="one JSON document on stdout, for scripts"
    )


def _add_first_hour(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """A user's first commands: init, check, dev-server."""
    init = commands.add_parser("init", help="write a commented config for a catalog and tables")
    uri = "the catalog's URI: sqlite:///<path> for a SQL catalog on SQLite, a REST catalog's URL"
    init.add_argument("--catalog-uri", help=uri)
    init.add_argument("--warehouse", help="where the catalog puts new tables' files")
    kind = "the catalog's kind: sql (SQLite or another database), glue or rest (default sql)"
    init.add_argument("--catalog-type", choices=["sql", "glue", "rest"], default="sql", help=kind)
    table = "<namespace>.<table> (repeatable)"
    init.add_argument("--table", action="append", required=True, help=table)
    url = "OpenSearch's URL (default: the dev server's)"
    init.add_argument("--opensearch", default="http://127.0.0.1:9200", help=url)
    init.add_argument("--config", type=Path, help="where to write it")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")

    checks = "verify what a first sync needs, writing nothing (exit 2 if any fails)"
    check = commands.add_parser("check", help=checks)
    check.add_argument("--config", type=Path)

    osmem = "a local OpenSearch-compatible server (osmem) until Ctrl-C"
    from icecdc.devlimits import DEV_SERVER_LIMITS

    limits = f"Run {osmem}. It keeps its indexes in memory, and {DEV_SERVER_LIMITS}."
    server = commands.add_parser("dev-server", help=osmem, description=limits)
    port = "the port on 127.0.0.1 (default 9200; 0: a free one)"
    server.add_argument("--port", type=int, default=9200, help=port)
    seed = "load indexes at start from an osmem seed directory or .ndjson file"
    server.add_argument("--data", type=Path, help=seed)


def _config_by_default(parser: argparse.ArgumentParser) -> None:
    """Every command's --config optional: `_locate_config` finds the file when it is not given."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                for option in sub._actions:
                    if option.dest == "config":
                        option.required = False
                        known = f"{option.help}; " if option.help else "the configuration file; "
                        option.help = f"{known}default: $ICECDC_CONFIG, else ./icecdc.yaml"
                _config_by_default(sub)


def _locate_config(args: argparse.Namespace) -> None:
    """The configuration file of a command without --config: $ICECDC_CONFIG, else ./icecdc.yaml."""
    if "config" in vars(args):
        from icecdc.config.location import config_path

        args.config = config_path(args.config, os.environ, must_exist=args.command != "init")


def _init(args: argparse.Namespace) -> int:
    from icecdc.errors import OperationError
    from icecdc.init_config import CatalogType, InitRequest, write_config

    if args.catalog_uri is None and args.catalog_type != "glue":
        raise OperationError(f"--catalog-uri is required for a {args.catalog_type} catalog")
    kind, tables, where = CatalogType(args.catalog_type), tuple(args.table), args.config
    request = InitRequest(args.catalog_uri, kind, tables, where, args.warehouse, args.opensearch)
    for facts in write_config(request, args.force):
        read = ", ".join(facts.identifiers) or "none in its schema"
        read = f"not read ({facts.unread})" if facts.unread else read
        print(f"{facts.name}: identifier columns {read}")
    print(f"wrote {args.config}: next, `icecdc check{_config_option(args.config)}`")
    return 0


def _config_option(path: Path) -> str:
    from icecdc.config.location import DEFAULT_CONFIG

    return "" if path == DEFAULT_CONFIG else f" --config {path}"


def _check(args: argparse.Namespace) -> int:
    from icecdc.check import check
    from icecdc.checklist import Outcome, summary

    # A failure is a check's finding, with its fix: not also opensearch-py's warning.
    logging.getLogger("opensearch").setLevel(logging.CRITICAL)
    checks = check(args.config)
    print(f"icecdc check: {args.config}")
    for found in checks:
        print("\n".join(found.lines()))
    print(summary(checks, "ready to sync"))
    return 2 if any(c.outcome == Outcome.FAILED for c in checks) else 0


def _dev_server(args: argparse.Namespace) -> int:
    from icecdc.devserver import serve

    return serve(args.port, args.data, out=lambda line: print(line, flush=True))


def _dry_run(args: argparse.Namespace, config: Config) -> int:
    from icecdc.dryrun import dry_run

    if not args.verbose:  # planning's own line repeats, in other words, what the plan prints
        logging.getLogger("icecdc.planning").setLevel(logging.WARNING)
    for plan in dry_run(config, args.table):
        print("\n".join(plan.lines()))
    print("dry run: nothing was written (no state, no index, no lease); `icecdc sync` applies it")
    return 0


def _sync(args: argparse.Namespace) -> int:
    from icecdc.config import load_config
    from icecdc.output import dumps, sync_json
    from icecdc.sync import sync

    config = load_config(args.config)
    if args.table:
        for name in args.table:
            config.table(name)  # fail on an unknown name before anything is read
    if args.interval is not None and not args.watch:
        from icecdc.errors import OperationError

        raise OperationError("--interval sets the time between the rounds of --watch: add --watch")
    if args.dry_run:
        return _dry_run(args, config)
    # a bar on a terminal; elsewhere the progress lines are logged
    bar = _ProgressBar.install() if sys.stderr.isatty() else None
    if args.watch:
        return _watch(args, config, bar)
    started = time.time()
    results = sync(config, table_names=args.table)  # Spark starts only for a pass that needs it
    if bar is not None:
        bar.clear()
    if args.json:
        print(dumps(sync_json(results, started, time.time())))
        return 0
    _print_results(results)
    return 0


def _print_results(results: list[SyncResult]) -> None:
    from icecdc.output import sync_line

    for r in results:
        print(sync_line(r))
        _indented([f"{n} dead-lettered: {cause}" for cause, n in r.writes.letters.by_cause()])


def _interval(text: str) -> float:
    from icecdc.watch import parse_interval

    try:
        return parse_interval(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _watch(args: argparse.Namespace, config: Config, bar: _ProgressBar | None) -> int:
    """`sync --watch`: rounds until a signal; a round's failure in one line, and the next round."""
    from icecdc.output import sync_json
    from icecdc.watch import Round, Stop, watch

    def report(done: Round) -> None:
        if bar is not None:
            bar.clear()
        if done.error is not None:
            line = _failure(done.error, args) or f"{type(done.error).__name__}: {done.error}"
            if args.verbose:
                logging.error("round %d failed", done.number, exc_info=done.error)
            said = f"icecdc: round {done.number} failed, the next round retries: {line}"
            print(said, file=sys.stderr)
        elif args.json:
            document = sync_json(list(done.results), *done.times)
            print(json.dumps({"round": done.number, **document}), flush=True)
        elif any(r.snapshots or r.skipped for r in done.results):  # an idle round says nothing
            _print_results(list(done.results))
            sys.stdout.flush()

    stop = watch(config, args.table, 30.0 if args.interval is None else args.interval, report)
    if bar is not None:
        bar.clear()
    if stop == Stop.INTERRUPT:
        return _interrupted()
    print(f"icecdc: stopped by {stop}: {NOTHING_LOST}", file=sys.stderr)
    return 0


def _tables(config: Config, names: list[str] | None) -> Iterator[tuple[TableConfig, Table]]:
    """The named tables (all configured ones when none are named), loaded from the catalog."""
    from icecdc.catalog import load_table, open_catalog

    catalog = open_catalog(config.catalog)
    for table_config in [config.table(n) for n in names] if names else config.tables:
        yield table_config, load_table(catalog, table_config.name)


class _ProgressBar(logging.Handler):
    """Draws `icecdc.progress` records as one line that redraws itself on a terminal.

    The line shows a pass's progress inside it (`PassProgress`), and the
    sync's after each pass (`Progress`).
    """

    WIDTH = 30

    def __init__(self) -> None:
        super().__init__()
        self.drawn = False  # a bar is on the terminal's last line

    @classmethod
    def install(cls) -> _ProgressBar:
        """A bar for `icecdc.progress` records, which every other log line clears first.

        So no other line is written into it.
        """
        bar = cls()
        progress = logging.getLogger("icecdc.progress")
        progress.addHandler(bar)
        progress.setLevel(logging.DEBUG)  # a pass's progress: drawn every second, logged every ten
        progress.propagate = False
        for handler in logging.getLogger().handlers:
            handler.addFilter(bar.cleared)
        return bar

    def cleared(self, _: logging.LogRecord) -> bool:
        """A filter on the other log handlers: clear the bar before their line."""
        self.clear()
        return True

    def clear(self) -> None:
        """Erase the bar, if drawn: the next line starts on a clean line."""
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.drawn = False

    def emit(self, record: logging.LogRecord) -> None:
        progress = getattr(record, "progress", None)
        unit = "rows"
        if isinstance(progress, PassProgress) and progress.stage == PassStage.WRITES:
            unit = "documents"
            shown = (
                f"{progress.stage} {self._bar(progress.fraction)} "
                f"{progress.rows:,}/{progress.rows_total:,} documents"
            )
        elif isinstance(progress, PassProgress):
            shown = (
                f"{progress.stage} {self._bar(progress.fraction)} "
                f"{progress.files}/{progress.files_total} files, "
                f"{progress.rows:,}/{progress.rows_total:,} rows"
            )
        elif isinstance(progress, Progress):
            shown = f"pass {progress.passes}, "
            if progress.export_files:
                fraction = progress.export_files_applied / progress.export_files
                shown += (
                    f"{self._bar(fraction)} "
                    f"{progress.export_files_applied}/{progress.export_files} files"
                )
            elif progress.snapshots_pending:  # a backlog of changes
                fraction = progress.snapshots / (progress.snapshots + progress.snapshots_pending)
                shown += (
                    f"{self._bar(fraction)} "
                    f"{progress.snapshots}/{progress.snapshots + progress.snapshots_pending} "
                    "snapshots"
                )
                shown += f", {progress.files} files"
            else:
                shown += f"{progress.files} files"
            shown += f", {progress.rows:,} rows"
        else:
            return
        left = progress.seconds_left
        eta = f", ~{left:.0f} s left" if left is not None else ""
        sys.stderr.write(
            f"\r{progress.table}: {shown}, {progress.rows_per_second:,.0f} {unit}/s{eta}\x1b[K"
        )
        sys.stderr.flush()
        self.drawn = True

    def _bar(self, fraction: float) -> str:
        done = int(self.WIDTH * fraction)
        return f"[{'#' * done}{'.' * (self.WIDTH - done)}]"


def _status(args: argparse.Namespace) -> int:
    """Each index's status; with OpenSearch out of reach, what is known without it, then exit 2."""
    from icecdc.catalog import identifier_columns
    from icecdc.config import load_config
    from icecdc.destination.client import check_reachable
    from icecdc.destination.index import IndexAlias
    from icecdc.destination.port import Destination
    from icecdc.errors import SinkError
    from icecdc.output import dumps, status_json
    from icecdc.state import index_stores, open_state_store
    from icecdc.status import StatusQuery, table_status

    config = load_config(args.config)
    store = open_state_store(config.state)
    destination = Destination.open(config.opensearch, config.dead_letter)
    client, dead_letters = destination.client, destination.dead_letters
    unreachable: SinkError | None = None
    try:
        check_reachable(client, config.opensearch.url, *config.index_names[:1])
    except SinkError as exc:  # said after what is known without it
        unreachable = exc
    now = time.time()
    statuses = [
        dataclasses.replace(
            table_status(
                table,
                index_config,
                scoped,
                now,
                dead_letters,
                IndexAlias(client, index_config.index) if unreachable is None else None,
                StatusQuery(True, identifier_columns(table, table_config)),
            ),
            table=key,
        )
        for table_config, table in _tables(config, None)
        for index_config, key, scoped in index_stores(table_config, store)
    ]
    if args.json:
        audits = [_last_audit(config, args.findings, s.table) for s in statuses]
        print(dumps([status_json(s, a, now) for s, a in zip(statuses, audits, strict=True)]))
    else:
        _status_lines(statuses, now, unreachable is not None)
    if unreachable is not None:
        raise unreachable
    return 0


def _status_lines(statuses: list[TableStatus], now: float, unreachable: bool) -> None:
    """The status table; without OpenSearch, what the index needs is not told."""
    print(
        f"{'table':<30} {'checkpoint':>20} {'current':>20} {'pending':>8} {'lag':>6} {'lag s':>9} "
        f"{'synced s ago':>12} {'dead letters':>13}"
    )
    for s in statuses:
        checkpoint = s.checkpoint.snapshot_id if s.checkpoint else "none"
        lag = "?" if s.lag_snapshots is None else s.lag_snapshots
        synced = "never" if s.checkpointed_at is None else f"{now - s.checkpointed_at:.0f}"
        print(
            f"{s.table:<30} {checkpoint!s:>20} {s.current_snapshot_id!s:>20} "
            f"{s.pending_items:>8} {lag!s:>6} "
            f"{s.lag_seconds:>9.0f} {synced:>12} {s.dead_letters:>13}"
        )
        if s.export_files:
            print(f"  export under way: {s.export_files_applied} of {s.export_files} files applied")
        if s.unfinished:
            print(
                f"  unfinished: {s.unfinished} (the next sync, or the planner's sweep, finishes it)"
            )
    if unreachable:
        print("(OpenSearch is out of reach: what its indexes need is not known)")


def _last_audit(config: Config, findings: str | None, table_name: str) -> dict[str, object] | None:
    """When the table was last audited and what it found; None when it never was.

    Also None when audits are kept nowhere known.
    """
    from icecdc.audit.findings import findings_location, load_findings

    try:
        report = load_findings(findings_location(config, findings), table_name)
    except IcecdcError:
        return None
    from icecdc.output import iso

    return {
        "audited_at": iso(report.audited_at),
        "snapshot_id": report.snapshot_id,
        "drifted": report.drifted,
        "findings": len(report.drift),
    }


def _verify(args: argparse.Namespace) -> int:
    from icecdc.catalog import identifier_columns
    from icecdc.config import load_config
    from icecdc.destination.client import check_reachable
    from icecdc.destination.port import Destination
    from icecdc.output import dumps, iso, verify_json
    from icecdc.verify import diff_index

    config = load_config(args.config)
    destination = Destination.open(config.opensearch, config.dead_letter)
    client, dead_letters = destination.client, destination.dead_letters
    # unreachable: an error (2), not a diff (1)
    check_reachable(client, config.opensearch.url, *config.index_names[:1])
    differing, started, documents = 0, time.time(), []
    for table_config, table in _tables(config, args.table):
        identifiers = identifier_columns(table, table_config)
        stored = dead_letters.letters(table_config.name) if dead_letters else []
        letters = [(s.letter.doc_id, s.letter.document) for s in stored]
        # every index the table writes, as its shape holds the table
        for configured in table_config.each_index():
            index = configured.config
            pipeline = index.pipeline is not None
            diff = diff_index(
                table, identifiers, client, index.index, index.shape, pipeline, letters
            )
            differing += bool(diff)
            if args.json:
                documents.append(verify_json(table_config.name, index.index, diff))
            else:
                print(f"{table_config.name} → {index.index}: {diff.summary()}")
    if args.json:
        print(dumps({"verified_at": iso(started), "equal": not differing, "indexes": documents}))
    return 1 if differing else 0


def _audit(args: argparse.Namespace) -> int:
    from icecdc.audit import DEFAULT_LIST_LIMIT, DEFAULT_MAX_IDS, DEFAULT_SAMPLE, audit
    from icecdc.config import load_config

    config = load_config(args.config)
    sample = DEFAULT_SAMPLE if args.sample is None else args.sample
    max_ids = DEFAULT_MAX_IDS if args.max_ids is None else args.max_ids
    list_limit = DEFAULT_LIST_LIMIT if args.list_limit is None else args.list_limit
    reports = audit(config, args.table, sample, args.seed, args.findings, max_ids, list_limit)
    if args.json:
        from icecdc.output import audit_json, dumps

        print(dumps([audit_json(r) for r in reports]))
    for r in [] if args.json else reports:
        known = sum(d.known for d in r.drift)
        found = r.summary()
        found += f" ({known} more explained by dead letters)" if known else ""
        if r.resync_pending:
            print(f"{r.table} → {r.index}: not compared: {r.resync_pending}")
            continue
        print(
            f"{r.table} → {r.index}: {found} at snapshot {r.snapshot_id} (sequence number "
            f"{r.sequence_number})"
        )
        print(
            f"  compared {r.compared}: {counted(r.partitions, 'partition')}, "
            f"{counted(r.rows, 'row')}, {counted(r.documents, 'document')}; "
            f"{counted(r.sampled, 'row')} sampled"
        )
        _indented(
            [drift.describe() for drift in r.drift]
            + [
                f"counts {c.partition}: table {counted(c.rows, 'row')}, "
                f"index {counted(c.documents, 'document')}"
                for c in r.counts
            ]
            + [f"note: {note}" for note in r.notes]
            + [f"cost: {r.cost.describe()}"]
        )
    return 1 if any(r.drifted for r in reports) else 0


def _repair(args: argparse.Namespace) -> int:
    from icecdc.audit import RepairIds, rebuild_index, repair_named, repair_scope
    from icecdc.config import load_config
    from icecdc.errors import OperationError
    from icecdc.output import repair_line

    config = load_config(args.config)
    named = RepairIds.from_arguments(args.id, args.key, args.ids_file, args.ids)
    if not (args.partition or args.from_audit or args.rebuild or named):
        raise OperationError(
            "name what to repair: --partition, --id, --key, --ids-file, --from-audit or --rebuild"
        )
    if args.rebuild and named:
        raise OperationError("--rebuild rewrites the whole index: name no ids with it")
    # before a rebuild resets the table's state; the command's one destination
    destination = _check_reachable(config, config.dead_letter)
    if args.rebuild:
        config.table(args.table)
        reason = "asked for by icecdc repair --rebuild"
        result = rebuild_index(config, args.table, reason, destination=destination)
        print(
            f"{args.table}: rebuilt in a new generation: {result.writes.indexed} indexed, "
            f"{result.writes.dead_lettered} dead-lettered, checkpoint "
            f"{result.checkpoint.snapshot_id if result.checkpoint else '?'}"
        )
        return 0
    partitions = args.partition or ()
    scope = repair_scope(config, args.table, partitions, named, args.from_audit, args.findings)
    r = repair_named(config, args.table, scope, destination)
    if args.json:
        print(r.to_json())
    else:
        print(f"{r.table} → {r.index}: {repair_line(r)}")
        _indented(
            [f"not in the table nor the index: {', '.join(repr(i) for i in r.not_found)}"]
            * bool(r.not_found)
            + [
                f"foreign version: id {i!r} has version {v}, above any icecdc wrote"
                for i, v in r.foreign.items()
            ]
            + [f"not written: live rows share the id {i!r}" for i in r.duplicates]
            + [f"note: {note}" for note in r.notes]
            + [f"cost: {r.cost.describe()}"]
        )
    return 0 if r.complete else 1


def _check_reachable(config: Config, dead_letter: str | None) -> Destination:
    """The command's destination, its secret read once; with the dead letters at `dead_letter`.

    It fails, before anything is planned or written, when OpenSearch is unreachable or refuses us.
    """
    from icecdc.destination.client import check_reachable
    from icecdc.destination.port import Destination

    destination = Destination.open(config.opensearch, dead_letter)
    check_reachable(destination.client, config.opensearch.url, *config.index_names[:1])
    return destination


def _dead_letters(args: argparse.Namespace) -> int:
    from icecdc.config import load_config
    from icecdc.deadletters import DeadLetters
    from icecdc.errors import OperationError

    config = load_config(args.config)
    location = args.location or config.dead_letter
    if not location:
        raise OperationError(
            "the configuration has no dead_letter location: name one with --location"
        )
    dead_letters = DeadLetters(location)
    if args.letters_command == "show":
        for stored in dead_letters.get(args.letter):
            print(json.dumps(_letter(stored), indent=2))
        return 0
    if args.letters_command == "mark-replayed":
        for stored in dead_letters.mark_replayed(args.letter, args.note):
            print(f"{stored.letter_id}: {stored.letter.outcome}")
        return 0
    names = args.table or [t.name for t in config.tables]
    for name in names:
        config.table(name)
    selection = _selection(args)
    if args.letters_command == "replay":
        destination = _check_reachable(config, location)
        return _replay(args, config, names, destination, selection)
    selected = [
        s for n in names for s in dead_letters.letters(n, include_replayed=args.all) if selection(s)
    ]
    if not selected and not args.json:
        kept = "" if args.all else " open"
        selecting = any((args.since, args.until, args.reason, getattr(args, "letter", None)))
        matching = " match the selection" if selecting else ""
        print(f"no{kept} dead letters{matching} for {', '.join(names)} in {location}")
        return 0
    return _by_reason(selected, args.json) if args.by_reason else _listing(selected, args.json)


def _listing(selected: list[StoredLetter], as_json: bool) -> int:
    """The letters, one line each (or a JSON array)."""
    if as_json:
        print(json.dumps([_letter(s) for s in selected], indent=2))
        return 0
    print(f"{'letter':<58} {'written (UTC)':<20} {'status':>6} {'doc id':<20} reason")
    for s in selected:
        letter = s.letter
        reason = (
            letter.reason
            if letter.replayed_at is None
            else f"[replayed: {letter.outcome}] {letter.reason}"
        )
        print(
            f"{s.letter_id:<58} {_utc(s.written_at):<20} {letter.status or '-'!s:>6} "
            f"{letter.doc_id or '-':<20} {reason[:100]}"
        )
    return 0


def _by_reason(selected: list[StoredLetter], as_json: bool) -> int:
    """The letters grouped by table and reason (`DeadLetter.kind`), most first.

    Each group has a count and one letter's id.
    """
    groups: dict[tuple[str, str], list[StoredLetter]] = {}
    for stored in selected:
        groups.setdefault((stored.letter.table, stored.letter.kind), []).append(stored)
    ordered = sorted(groups.items(), key=lambda item: (item[0][0], -len(item[1]), item[0][1]))
    rows = [
        {"table": table, "reason": reason, "count": len(group), "sample": group[0].letter_id}
        for (table, reason), group in ordered
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'table':<30} {'count':>8} {'sample letter':<58} reason")
    for row in rows:
        print(f"{row['table']:<30} {row['count']:>8} {row['sample']:<58} {row['reason']}")
    return 0


def _replay(
    args: argparse.Namespace,
    config: Config,
    names: list[str],
    destination: Destination,
    selection: Selection,
) -> int:
    from icecdc.replay import replay_table

    assert destination.dead_letter is not None  # opened with the letters' location
    location = destination.dead_letter
    reports = [replay_table(config, name, location, selection, destination) for name in names]
    if args.json:
        print(json.dumps([vars(r) for r in reports], indent=2))
    for r in [] if args.json else reports:
        print(
            f"{r.table}: {r.replayed} of {counted(r.letters, 'letter')} replayed "
            f"at version {r.version} "
            f"({r.indexed} indexed, {r.deleted} deleted)"
        )
        _indented(
            [
                f"still refused: {letter_id}: {reason}"
                for letter_id, reason in r.still_refused.items()
            ]
            + [
                f"no id to look the row up by: {i} (mark it replayed once dealt with)"
                for i in r.not_replayable
            ]
            + [f"note: {note}" for note in r.notes]
        )
    return 0 if all(r.complete for r in reports) else 1


def _selection(args: argparse.Namespace) -> Selection:
    """The letters --since, --until, --reason and --letter select."""
    from icecdc.deadletters import Selection

    return Selection(
        _moment(args.since, "--since") if args.since else None,
        _moment(args.until, "--until") if args.until else None,
        args.reason,
        frozenset(getattr(args, "letter", None) or ()),
    )


_AGE = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _moment(text: str, option: str) -> float:
    """An ISO time or an age, in seconds since the epoch.

    A time is UTC unless it says otherwise; an age such as `2h` means two hours ago.
    """
    from icecdc.errors import OperationError

    age = _AGE.match(text)
    if age:
        return time.time() - int(age.group(1)) * _SECONDS[age.group(2)]
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise OperationError(
            f"{option} {text!r} is neither an ISO time (2024-05-01T10:00) nor an age (30m, 2h, 3d)"
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).timestamp()


def _utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _letter(stored: StoredLetter) -> dict[str, object]:
    from dataclasses import asdict

    return {
        "letter_id": stored.letter_id,
        "written_at": _utc(stored.written_at),
        **asdict(stored.letter),
    }


def _indented(lines: list[str]) -> None:
    for line in lines:
        print(f"  {line}")


def _demo(args: argparse.Namespace) -> int:
    from icecdc.demo import run_demo

    logging.getLogger().setLevel(logging.WARNING)  # the demo prints its own story
    ok = run_demo(args.dir)
    print(
        "\ndemo finished: the index equalled the table after every sync"
        if ok
        else "\ndemo FAILED: see ✗ above"
    )
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
    entry()

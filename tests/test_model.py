"""A model-based test of the whole pipeline (tests/support/model_machine.py).

`make test` runs it derandomized, a few examples of a few dozen steps (the `icecdc-model`
Hypothesis profile, tests/conftest.py). `make fuzz` runs it for FUZZ_MINUTES with random seeds
(ICECDC_MODEL_PROFILE=fuzz), round after round, printing each failure as the minimal sequence
Hypothesis shrank it to, and the operations it covered. A failure becomes a regression test in
tests/test_model_regressions.py.
"""

from __future__ import annotations

import os
import re
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from icecdc.model import EngineKind
from tests.support.model import (
    Caps,
    CatalogKind,
    CrashAt,
    DestinationKind,
    KeyType,
    Look,
    Operator,
    OperatorCrash,
    Poison,
    StoreKind,
    WriteMode,
    Writer,
    Writers,
)
from tests.support.model_machine import FUZZ, STATS, PipelineMachine, model_machine_fixture  # noqa: F401 - the `model_machine` fixture

REPORT = Path(os.environ.get("ICECDC_MODEL_REPORT", ".build/model"))


def test_the_index_follows_the_table_through_random_histories(model_machine: type[PipelineMachine]) -> None:
    if FUZZ:
        fuzz(model_machine, float(os.environ.get("FUZZ_MINUTES", "10")))
        return
    try:
        run_state_machine_as_test(model_machine, settings=settings.get_profile("icecdc-model"))
    finally:
        print(
            f"\nmodel-based test (excluded known bugs: {sorted(map(str, model_machine.excluded)) or 'none'}):\n{STATS.summary()}"
        )


def plain_table(model_machine: type[PipelineMachine], rows: int, **options: Any) -> PipelineMachine:
    """A machine whose table is v2, unpartitioned, keyed by a long in its schema, written by
    pyiceberg alone, with `rows` rows; `options`: `create`'s other arguments (the store, the catalog)."""
    state = model_machine()
    state.create(
        key=KeyType.LONG,
        version=2,
        partitioned=False,
        identifiers_in_schema=True,
        rows=rows,
        large_strings=False,
        writers=Writers.PYICEBERG,
        **options,
    )
    return state


def test_a_history_with_the_state_in_dynamodb_keeps_it_there(model_machine: type[PipelineMachine]) -> None:
    """The AWS bundle's store under the machine: a crash inside `complete`, then the table dropped
    and made again; every check of the machine runs against DynamoDB on moto, never a SQLite file."""
    state = plain_table(model_machine, rows=3, store=StoreKind.DYNAMODB)
    state.sync(engine=EngineKind.IN_PROCESS, caps=Caps.NONE)
    state.write(Writer.PY_APPEND, 2, 0, Poison.NONE, False, WriteMode.MERGE_ON_READ)
    state.crashing_sync(engine=EngineKind.SPARK, caps=Caps.NONE, crash=CrashAt.COMPLETE_BEFORE, at=0)
    assert state.items_pending()
    state.lose_state()
    assert not state.items_pending()
    state.write(Writer.PY_APPEND, 2, 1, Poison.NONE, False, WriteMode.COPY_ON_WRITE)
    state.sync(engine=EngineKind.IN_PROCESS, caps=Caps.NONE)
    with state.stores() as indexes:
        assert all(store.get_checkpoint(key) is not None for _, key, store in indexes)
    assert not list(state.workdir.rglob("state.db*"))
    state.teardown()


def test_a_history_read_through_the_rest_catalog(model_machine: type[PipelineMachine]) -> None:
    """The REST stand-in under the machine: syncs, a pass and a dry run read the table through it
    (`type: rest`) while pyiceberg writes it through the SQL catalog it serves (the random
    histories draw Spark's writes beside it too)."""
    state = plain_table(model_machine, rows=3, catalog=CatalogKind.REST)
    assert state.rest is not None
    state.sync(engine=EngineKind.IN_PROCESS, caps=Caps.NONE)
    state.write(Writer.PY_APPEND, 2, 0, Poison.NONE, False, WriteMode.COPY_ON_WRITE)
    state.write(Writer.PY_UPDATE, 2, 1, Poison.NONE, False, WriteMode.MERGE_ON_READ)
    state.one_pass(engine=EngineKind.IN_PROCESS, caps=Caps.ONE_FILE)
    state.look(command=Look.DRY_RUN)
    loads = state.rest.counts()["GET /v1/{prefix}/namespaces/{namespace}/tables/{table}"]
    assert loads >= 3, state.rest.counts()
    state.teardown()


def test_a_history_on_a_serverless_collection(model_machine: type[PipelineMachine]) -> None:
    """The Serverless stand-in under the machine: no versions, writes fenced by the lease; crashes
    at a bulk request and inside `complete`, a rebuild, an operator's repair with its answer lost,
    and the machine's checks after each step, as on a domain."""
    state = plain_table(model_machine, rows=3, destination=DestinationKind.SERVERLESS)
    assert state.serverless is not None
    state.sync(engine=EngineKind.IN_PROCESS, caps=Caps.NONE)
    state.write(Writer.PY_UPDATE, 2, 0, Poison.NONE, False, WriteMode.MERGE_ON_READ)
    state.crashing_sync(engine=EngineKind.IN_PROCESS, caps=Caps.NONE, crash=CrashAt.BULK_APPLIED, at=0)
    state.write(Writer.PY_APPEND, 2, 1, Poison.NONE, False, WriteMode.COPY_ON_WRITE)
    state.crashing_sync(engine=EngineKind.SPARK, caps=Caps.ONE_FILE, crash=CrashAt.COMPLETE_BEFORE, at=0)
    state.sync(engine=EngineKind.IN_PROCESS, caps=Caps.NONE)
    state.operate_icecdc(command=Operator.REPAIR_REBUILD, crash=OperatorCrash.BULK_APPLIED, at=0)
    state.operate_icecdc(command=Operator.AUDIT, crash=OperatorCrash.NONE, at=0)
    state.sync(engine=EngineKind.IN_PROCESS, caps=Caps.NONE)
    refused = {k: n for k, n in state.serverless.counts().items() if k == "unsupported" or k.endswith("refused")}
    assert refused == {}, state.serverless.counts()
    state.teardown()


def test_an_outage_then_a_backlog_is_retried_as_the_dry_run_predicts(model_machine: type[PipelineMachine]) -> None:
    """The rule of an OpenSearch outage followed by a backlog, on copy-on-write commits (runs the
    pass collapses): the retry's engine and reads are the dry run's, and the index the table."""
    state = plain_table(model_machine, rows=4)
    state.outage_then_backlog(commits=3, writer=Writer.PY_UPDATE, seed=3)
    assert STATS.steps["  outage: NothingApplied"] >= 1
    state.teardown()


def fuzz(machine: type[PipelineMachine], minutes: float) -> None:
    """Rounds of random examples until the time is up; every distinct failure is kept and reported."""
    REPORT.mkdir(parents=True, exist_ok=True)
    failures_file = REPORT / "fuzz-failures.txt"
    deadline = time.monotonic() + minutes * 60
    seen: dict[str, int] = {}
    rounds = 0
    summary = ""
    last: list[str] = []  # each round's failures, one line per round
    while time.monotonic() < deadline and not stuck(last):
        rounds += 1
        last.append("")
        try:
            run_state_machine_as_test(machine, settings=settings.get_profile("icecdc-fuzz"))
        except Exception as exc:  # noqa: BLE001 - every failure is reported, the fuzzing goes on
            for failure in exc.exceptions if isinstance(exc, ExceptionGroup) else [exc]:
                signature = failure_signature(failure)
                last[-1] += signature
                seen[signature] = seen.get(signature, 0) + 1
                text = f"=== round {rounds}: {signature}\n" + "".join(traceback.format_tb(failure.__traceback__)[-4:])
                text += "".join(traceback.format_exception_only(failure)) + "\n" + what_led_to(failure)
                print(text)
                with failures_file.open("a") as out:
                    out.write(text)
        summary = (
            f"fuzz: {rounds} rounds, excluded known bugs: {sorted(map(str, machine.excluded)) or 'none'}\n{STATS.summary()}\n"
        )
        summary += "".join(f"failure x{count}: {signature}\n" for signature, count in seen.items())
        (REPORT / "fuzz-summary.txt").write_text(summary)  # after every round: an interrupted run keeps its figures
    if stuck(last):
        summary += f"stopped: the same failure {STUCK_ROUNDS} rounds running (a server of the harness gone?)\n"
        (REPORT / "fuzz-summary.txt").write_text(summary)
    print(summary)
    assert not seen, f"{len(seen)} distinct failures; see {failures_file}"


STUCK_ROUNDS = 3  # rounds in a row failing alike: the harness, not a bug, is likely broken


def stuck(rounds: list[str]) -> bool:
    """Whether the last STUCK_ROUNDS rounds all failed, and alike (each round's failures, "" for
    none): a server of the harness is gone (a campaign's osmem killed under it ran thousands of
    rounds on "Connection refused"), or one bug fails every example; either way, stop."""
    tail = rounds[-STUCK_ROUNDS:]
    return len(tail) == STUCK_ROUNDS and tail[0] != "" and len(set(tail)) == 1


def what_led_to(exc: BaseException) -> str:
    """The exceptions a failure was raised from or while handling, each with its last frames.

    Hypothesis reports a step that failed on one run and not on another as inconsistent data
    generation (`FlakyStrategyDefinition`); the step's own error is then only in this chain.
    """
    text = ""
    cause = exc.__cause__ or exc.__context__
    while cause is not None:
        frames = "".join(traceback.format_tb(cause.__traceback__)[-6:])
        text += f"--- raised from or while handling:\n{frames}" + "".join(traceback.format_exception_only(cause))
        cause = cause.__cause__ or cause.__context__
    return text + ("\n" if text else "")


def failure_signature(exc: BaseException) -> str:
    """The failure, with numbers and ids taken out: one line per distinct bug."""
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: " + re.sub(r"[0-9a-f]{8,}|\d+", "#", first)[:160]


pytestmark = pytest.mark.timeout(0 if FUZZ else 600)


def test_a_campaign_stops_once_its_rounds_fail_alike() -> None:
    """`make fuzz` went on for thousands of rounds after its OpenSearch was gone."""
    refused = "URLError: <urlopen error [Errno #] Connection refused>"
    assert stuck([refused] * 3)
    assert stuck(["", "other", refused, refused, refused])
    assert not stuck([refused, refused])
    assert not stuck([refused, "", refused])
    assert not stuck(["", "", ""])
    assert not stuck([refused, "other", refused])

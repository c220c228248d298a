"""The in-process engine reads a large pass in worker processes, one per usable core: the index
still equals the table after exports and changes, duplicate identifiers are still found across
workers, and a worker's error reaches the caller as it was raised."""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

import pytest
from pyiceberg.expressions import EqualTo

from icecdc.config import parse_config
from icecdc.deadletters import DeadLetters
from icecdc.engines import in_process
from icecdc.engines.workers import lambda_vcpus, run_parallel, usable_cores
from icecdc.errors import ProcessingError
from icecdc.model import EngineKind
from icecdc.sync import sync
from icecdc.testing.commits import update
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"


@pytest.fixture
def engine() -> EngineKind:
    return EngineKind.IN_PROCESS


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Workers for passes of any size (the bench measures the threshold's worth)."""
    monkeypatch.setattr(in_process, "PARALLEL_MIN_ROWS", 0)
    caplog.set_level(logging.INFO, logger="icecdc.engines.in_process")
    caplog.set_level(logging.INFO, logger="icecdc.progress")
    return caplog


def two_workers(pipeline: Pipeline, **extra: Any) -> Any:
    raw = pipeline.config_dict([{"name": NAME}])
    raw["engine"]["in_process_workers"] = 2
    return parse_config({**raw, **extra})


def test_an_export_and_changes_read_by_two_workers_leave_index_equal_to_table(
    pipeline: Pipeline, parallel: pytest.LogCaptureFixture
) -> None:
    table = orders(pipeline)
    for first in range(0, 40, 10):
        table.append(rows(*range(first, first + 10), region="eu" if first % 20 else "us"))
    config = two_workers(pipeline)
    exported = pipeline.sync(config, NAME)
    assert exported.writes.indexed == 40
    assert "in 2 worker processes" in parallel.text
    # the parent reports each worker's part as it ends (a worker's own lines would count it twice)
    assert "stage=export files=4/4 rows=40/40 " in parallel.text and "stage=export files=1/4" not in parallel.text

    parallel.clear()
    update(table, EqualTo("id", 3), lambda r: {**r, "status": "paid"})
    update(table, EqualTo("id", 15), lambda r: {**r, "region": "us"})  # a partition move: DELETE and INSERT meet
    table.delete(EqualTo("id", 27))
    changed = pipeline.sync(config, NAME)
    assert (changed.writes.indexed, changed.writes.deleted) == (2, 1)
    assert "in 2 worker processes" in parallel.text


def test_a_key_two_workers_export_is_a_dead_letter_and_not_in_the_index(pipeline: Pipeline, parallel: Any) -> None:
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    table.append(rows(3, 4, region="eu"))  # id 3 again, in another file: another worker's
    config = two_workers(pipeline, dead_letter={"path": str(pipeline.workdir / "dead-letters")})
    (result,) = sync(config, pipeline.spark, [NAME])
    assert sorted(pipeline.documents("orders")) == ["1", "2", "4"]
    assert result.writes.dead_lettered == 2
    letters = DeadLetters(str(pipeline.workdir / "dead-letters")).read(NAME)
    assert [letter["doc_id"] for letter in letters] == ["3", "3"]
    assert all(" and " in letter["reason"] and "must be unique" in letter["reason"] for letter in letters)


def _fails(part: int) -> int:
    if part == 2:
        raise ProcessingError(f"part {part} is bad")
    return part * 10


def test_a_workers_error_is_raised_in_the_caller_and_results_keep_their_order() -> None:
    assert [value for value, _ in run_parallel(_fails, [0, 1, 3, 4], 2)] == [0, 10, 30, 40]
    assert all(peak > 0 for _, peak in run_parallel(_fails, [0, 1], 2))  # each worker's peak RSS
    with pytest.raises(ProcessingError, match="part 2 is bad"):
        run_parallel(_fails, [0, 1, 2, 3], 2)


def test_in_lambda_the_workers_are_the_memorys_whole_vcpus(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (lambda_vcpus(1024), lambda_vcpus(2048), lambda_vcpus(3538), lambda_vcpus(10240)) == (1, 1, 2, 5)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "2048")
    assert usable_cores() == 1


def test_forked_workers_leave_the_connections_of_the_callers_threads_to_spark_open(spark: Any) -> None:
    """A sync can run a pass on Spark and then one on forked workers. py4j shuts a connection down
    when its thread's locals are freed, as a forked child frees every thread's but the forking
    one's: unheld, a child ended the connection a thread of the caller still uses."""
    jvm, client = spark.sparkContext._jvm, spark.sparkContext._gateway._gateway_client
    connection: list[weakref.ref[Any]] = []  # weak: a reference here would keep a child from freeing it
    kept: list[bool] = []
    forked = threading.Event()

    def a_thread_calling_spark_twice() -> None:
        jvm.java.lang.System.nanoTime()
        connection.append(weakref.ref(client.get_thread_connection()))
        forked.wait(timeout=60)
        jvm.java.lang.System.nanoTime()
        kept.append(client.get_thread_connection() is connection[0]())  # not reset, then replaced by a retry

    caller = threading.Thread(target=a_thread_calling_spark_twice)
    caller.start()
    while not connection and caller.is_alive():
        caller.join(timeout=0.01)
    assert [value for value, _ in run_parallel(_fails, [0, 1], 2)] == [0, 10]
    forked.set()
    caller.join()
    assert kept == [True]

"""Shared fixtures: one local SparkSession per test session, a pyiceberg SQL catalog per test,
an osmem clone (OpenSearch over HTTP) per test, and a `Pipeline` that syncs and checks the
invariant: after a sync the index equals the table."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from icecdc.model import EngineKind
from tests.support.destinations import Destination, destination_for
from tests.support.faults import fault_proxy_fixture  # noqa: F401 - the `fault_proxy` fixture, for every test module
from tests.support.pipeline import Pipeline, on_serverless
from tests.support.serverless import serverless_fixture  # noqa: F401 - the `serverless` fixture
from tests.support.spark_sql import iceberg_spark_conf, spark_sql  # noqa: F401 - the `spark_sql` fixture

# moto's server and the per-test DynamoDB tables: the AWS tests and the state-store contract use them
pytest_plugins = ["tests.support.moto"]

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # tests talk to loopback only


# Hypothesis profiles of the model-based test (tests/test_model.py). `icecdc-model`, for `make test`:
# derandomized (the same examples every run), a bounded number of examples and steps, well under 5
# minutes on 2 cores. `icecdc-fuzz`, for `make fuzz`: random seeds, longer sequences, rounds of a few
# examples each until FUZZ_MINUTES are up. ICECDC_MODEL_EXAMPLES and ICECDC_MODEL_STEPS override.
_MODEL = {
    "deadline": None,  # a step starts Spark jobs: seconds, varying with the machine's load
    "database": None,  # a failure is printed as its steps; nothing is replayed from a directory
    "suppress_health_check": list(HealthCheck),  # slow steps and large draws are the point here
}
settings.register_profile(
    "icecdc-model",
    derandomize=True,
    max_examples=int(os.environ.get("ICECDC_MODEL_EXAMPLES", "12")),
    stateful_step_count=int(os.environ.get("ICECDC_MODEL_STEPS", "25")),
    **_MODEL,
)
settings.register_profile(
    "icecdc-fuzz",
    max_examples=int(os.environ.get("ICECDC_MODEL_EXAMPLES", "5")),
    stateful_step_count=int(os.environ.get("ICECDC_MODEL_STEPS", "40")),
    print_blob=True,
    **_MODEL,
)


# Markers from what a test uses, so that `make test-fast` (-m "not spark and not opensearch and
# not aws and not slow") never starts a JVM, an osmem or a moto server.
MARKER_FIXTURES = {"spark": {"spark"}, "opensearch": {"osmem_server", "pipeline"}, "aws": {"moto_url", "moto_server"}}


# The longest files, longest first (`--durations` of `make test`: minutes each). `make test` deals
# whole files to its workers in the order collected (--no-loadscope-reorder); started last, one of
# these would leave a worker running it alone for minutes. A file missing here only costs time.
LONGEST_FILES = (
    "test_scale.py",
    "test_model.py",
    "test_merge_on_read.py",
    "test_crash.py",
    "test_sync.py",
    "test_cli_failures.py",
    "test_model_regressions.py",
    "test_bench_harness.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKER_FIXTURES.items():
            if used & fixtures:
                item.add_marker(marker)
    first = {name: rank for rank, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))  # stable: in-file order kept


@pytest.fixture(autouse=True)
def root_logger_as_found() -> Iterator[None]:
    """Undo what a test's in-process CLI run does to the root logger (`basicConfig` at INFO, and its
    handler). Left at INFO, py4j's finalizers log tracebacks in later tests, and Python 3.11 formats a
    traceback with `ast.parse`: inside another `ast.parse`, that raises "AST constructor recursion
    depth mismatch". (Importing the planner's handler module sets INFO for the session, as Lambda
    needs: tests that read log lines capture only their own.)"""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.setLevel(level)
    root.handlers[:] = handlers


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    # Iceberg's Spark runtime (jars, SQL extensions, the `lake` catalog class) rides along so tests
    # can write merge-on-read tables with Spark SQL; see tests/spark_sql.py.
    builder = SparkSession.builder
    for key, value in iceberg_spark_conf().items():
        builder = builder.config(key, value)
    session = (
        builder.master("local[2]")
        .appName("icecdc-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def engine() -> EngineKind:
    """The engine a test's pipeline forces; `@pytest.mark.parametrize("engine", ENGINES)` runs it on both."""
    return EngineKind.SPARK


@pytest.fixture
def destination(request: pytest.FixtureRequest) -> Destination:
    """The kind of destination the test's `pipeline` writes to: in a module marked
    `drawn_destination`, drawn from the test's node id (about a third on Serverless); a domain for
    `@pytest.mark.domain_only`; ICECDC_DESTINATION forces one (tests/support/destinations.py)."""
    node = request.node
    domain_only = node.get_closest_marker("domain_only") is not None
    return destination_for(node.nodeid, domain_only, node.get_closest_marker("drawn_destination") is not None)


@pytest.fixture
def pipeline(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    spark: Any,
    engine: EngineKind,
    destination: Destination,
    monkeypatch: pytest.MonkeyPatch,
) -> Pipeline:
    """A pipeline over this test's osmem clone, or over the Serverless stand-in (whose searches lag
    the writes) with the writers' credentials in the driver and in Spark's Python workers."""
    if destination == Destination.DOMAIN:
        return Pipeline(tmp_path, request.getfixturevalue("osmem_clone").url, spark, engine)
    return on_serverless(tmp_path, request.getfixturevalue("serverless"), spark, engine, monkeypatch)

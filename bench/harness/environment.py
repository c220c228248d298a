"""Where the bench runs: its paths, one local Spark under fixed settings, the catalog, icecdc configs, the machine.

A run's data lives under `.build/bench/` (gitignored), wiped per run so every run starts empty.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil

from bench.harness import sparklog
from icecdc.config import Config, parse_config

REPO = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("BENCH_WORK") or REPO / ".build" / "bench")  # BENCH_WORK: elsewhere, e.g. beside another run
RESULTS = REPO / "docs" / "bench"
CATALOG = "lake"  # pyiceberg's SqlCatalog name and Spark's catalog name must match (see tests/support/spark_sql.py)
CORES = 2  # the reference machine; both tools get the same local[2]


def _spark_sql_module() -> ModuleType:
    # tests/support/spark_sql.py is the one place that knows where the Iceberg jars come from; loaded by
    # path so that the bench runs from any directory.
    spec = importlib.util.spec_from_file_location("icecdc_tests_spark_sql", REPO / "tests" / "support" / "spark_sql.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def spark_settings() -> dict[str, str]:
    """The one set of Spark settings both tools run under (a dict so the report can print it)."""
    return {
        "spark.master": f"local[{CORES}]",
        "spark.driver.memory": "6g",  # local mode: driver and executor are one JVM
        "spark.sql.shuffle.partitions": str(CORES),
        "spark.default.parallelism": str(CORES),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }


def start_spark(workdir: Path, iceberg: bool = True, extra: dict[str, str] | None = None) -> Any:
    """A SparkSession under `spark_settings()`; with `iceberg`, also Iceberg's runtime, the catalog `lake`
    (for Spark SQL's writes and the peer) and an event log. Without: what icecdc alone needs (it reads with pyiceberg)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    settings = {**spark_settings(), **(extra or {})}
    if iceberg:
        runtime = _spark_sql_module().iceberg_spark_conf()
        if not runtime:
            raise SystemExit("bench: Iceberg's Spark runtime is unavailable; run `make iceberg-jars`")
        events = workdir / sparklog.EVENTS
        events.mkdir()
        settings = {
            **runtime,
            **settings,
            "spark.eventLog.enabled": "true",  # read per measured phase by bench/harness/sparklog.py
            "spark.eventLog.dir": events.as_uri(),
            f"spark.sql.catalog.{CATALOG}.uri": f"jdbc:sqlite:{workdir / 'catalog.db'}",
            f"spark.sql.catalog.{CATALOG}.warehouse": (workdir / "warehouse").as_uri(),
        }
    builder = SparkSession.builder.appName("icecdc-bench")
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if iceberg:
        session.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.db")
    return session


def fresh_workdir() -> Path:
    """The in-process measurements' directory under `.build/bench/`, emptied (the others beside it are left alone)."""
    workdir = WORK / "suite"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    return workdir


def icecdc_config(
    workdir: Path, opensearch_url: str, table: str, index: str, state: str, export: bool = True, **sections: Any
) -> Config:
    """A config for one table of the bench catalog, with its own state store (so syncs do not share checkpoints)."""
    return parse_config(config_dict(workdir, opensearch_url, table, index, state, export, **sections))


def config_dict(
    workdir: Path, opensearch_url: str, table: str, index: str, state: str, export: bool = True, **sections: Any
) -> dict[str, Any]:
    """`icecdc_config`'s YAML as a dict; `sections` adds or replaces top-level sections (`batch`, `engine`)."""
    return {
        "catalog": {
            "name": CATALOG,
            "type": "sql",
            "uri": f"sqlite:///{workdir / 'catalog.db'}",
            "warehouse": (workdir / "warehouse").as_uri(),
        },
        "state": {"type": "sqlite", "path": str(workdir / f"state-{state}.db")},
        "opensearch": {"url": opensearch_url},
        "spark": {"master": f"local[{CORES}]"},
        "tables": [{"name": table, "index": index, "export": export}],
        **sections,
    }


def on_spark() -> dict[str, Any]:
    """The config sections that make every pass run on Spark (an `engine` section, where this icecdc has one)."""
    return {"engine": {"use": "spark"}} if "engine" in Config.model_fields else {}


def machine() -> dict[str, Any]:
    """What the figures were measured on: the report prints it beside them."""
    import opensearchpy
    import pyiceberg
    import pyspark

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    java = subprocess.run(["java", "-version"], check=False, capture_output=True, text=True).stderr.splitlines()[0]
    jars = sorted(p.name for p in (REPO / ".build" / "iceberg-jars").glob("iceberg-spark-runtime*.jar"))
    return {
        "cpu": cpu,
        "cores": psutil.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": java,
        "pyspark": pyspark.__version__,
        "pyiceberg": pyiceberg.__version__,
        "iceberg_spark_runtime": jars[0] if jars else "from ICECDC_SPARK_PACKAGES / ICECDC_ICEBERG_JARS",
        "opensearch_py": opensearchpy.__versionstr__,
        "osmem_server": _version("osmem-server"),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def shown(arg: str) -> str:
    """A path or argument as results print it: relative to the repository, naming no machine's
    directories (the interpreter's environment as `.venv/`, wherever it lives: a work tree's
    `.venv` may be a link to another checkout's)."""
    return arg.replace(sys.prefix + "/", ".venv/").replace(str(REPO) + "/", "")


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)

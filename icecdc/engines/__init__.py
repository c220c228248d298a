"""Where a pass runs: `Engines` picks each pass's engine from how much it reads.

Spark starts only when a pass needs it, so a small `icecdc sync` never starts a JVM.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from icecdc.config import EngineConfig, SparkConfig
from icecdc.engines.base import Engine
from icecdc.engines.export import CarriedKeys
from icecdc.engines.in_process import InProcessEngine
from icecdc.engines.target import Target, Targets
from icecdc.engines.workers import usable_cores
from icecdc.errors import SparkRequired
from icecdc.model import EngineChoice, EngineKind, WorkSize

__all__ = ["Engine", "Engines", "Target", "Targets"]

log = logging.getLogger(__name__)


@dataclass
class Engines:
    """The engines a run may use, and the rule that picks one per pass.

    `spark`: a session to use (tests, a Glue job's own); without one, `spark_config` starts one
    the first time a pass needs it, and `close` stops it. `spark_config=None` and no session: no
    Spark here (the planner Lambda), so a pass that needs it raises `SparkRequired`."""

    config: EngineConfig = field(default_factory=EngineConfig)
    spark_config: SparkConfig | None = field(default_factory=SparkConfig)
    spark: Any = None
    _started: bool = field(default=False, init=False)
    # the compact keys a capped export's in-process passes in this run wrote, for its last pass
    _carried: CarriedKeys = field(default_factory=CarriedKeys, init=False)

    def carried(self, table_name: str, index: str) -> frozenset[tuple[int, str]]:
        """The export files (snapshot, path) of the index whose keys this run's passes kept."""
        return self._carried.held(table_name, index)

    def kind_for(self, size: WorkSize) -> EngineKind:
        """The engine of a pass that reads `size`."""
        if self.config.use != EngineChoice.AUTO:
            return EngineKind(self.config.use)
        limits = self.config
        small = (
            size.files <= limits.in_process_max_files
            and size.rows <= limits.in_process_max_rows
            and size.bytes <= limits.in_process_max_bytes
        )
        return EngineKind.IN_PROCESS if small else EngineKind.SPARK

    def for_pass(self, table_name: str, size: WorkSize) -> Engine:
        """The engine for a pass, or `SparkRequired` where a pass needs Spark and this run has none.

        It raises before anything is written.
        """
        kind = self.kind_for(size)
        # debug: the pass's "applying" line names the engine, and counts files as its progress does
        reads = "%s: this pass reads %d files, %d rows, %d bytes: %s engine"
        log.debug(reads, table_name, size.files, size.rows, size.bytes, kind)
        if kind == EngineKind.IN_PROCESS:
            cores = usable_cores()  # more processes than cores would only hold more memory
            workers = min(self.config.in_process_workers or cores, cores)
            return InProcessEngine(workers, self._carried)
        return self._spark_engine(table_name)

    def _spark_engine(self, table_name: str) -> Engine:
        from icecdc.engines.spark import SparkEngine, spark_session  # pyspark only where Spark runs

        if self.spark is None:
            if self.spark_config is None:
                raise SparkRequired(
                    f"table {table_name!r}: this pass is too large to apply without Spark"
                )
            self.spark, self._started = spark_session(self.spark_config), True
        return SparkEngine(self.spark)

    def close(self) -> None:
        """Stop the Spark session these engines started; a session given to them is left running."""
        if self._started:
            self.spark.stop()
            self.spark, self._started = None, False

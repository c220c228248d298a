"""Spark's own account of each measured phase, read from its event log after the run: per phase, what
RSS cannot give (the largest peak execution memory of a task, executor time, shuffle and input bytes).
Written here because nothing on PyPI summarises Spark's event log.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EVENTS = "spark-events"  # under the bench's work directory
PHASE = "bench-phase-"  # prefix of the job description each measured phase sets
KEY = "spark_phase"  # where a measurement's JSON names its phase


def phase_metrics(events: Path) -> dict[str, dict[str, float]]:
    """Per phase: jobs, stages, tasks, summed executor run and deserialize time, the largest
    peak execution memory of a task, and the bytes shuffled and read."""
    stage_phase: dict[int, str] = {}
    metrics: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for event in _events(events):
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            phase = (event.get("Properties") or {}).get("spark.job.description") or ""
            if phase.startswith(PHASE):
                metrics[phase]["jobs"] += 1
                metrics[phase]["stages"] += len(event["Stage IDs"])
                stage_phase.update(dict.fromkeys(event["Stage IDs"], phase))
        elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in stage_phase:
            task = event.get("Task Metrics") or {}
            totals = metrics[stage_phase[event["Stage ID"]]]
            totals["tasks"] += 1
            totals["executor_run_s"] += task.get("Executor Run Time", 0) / 1000
            totals["executor_deserialize_s"] += task.get("Executor Deserialize Time", 0) / 1000
            totals["peak_execution_memory_mib"] = max(
                totals["peak_execution_memory_mib"], task.get("Peak Execution Memory", 0) / 2**20
            )
            totals["shuffle_written_mib"] += (task.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0) / 2**20
            totals["input_mib"] += (task.get("Input Metrics") or {}).get("Bytes Read", 0) / 2**20
    return {phase: {k: round(v, 3) for k, v in values.items()} for phase, values in metrics.items()}


def attach(results: Any, metrics: dict[str, dict[str, float]]) -> None:
    """Put each phase's Spark metrics beside its measurement, wherever that sits in the results
    (measurements of an earlier run, kept by a partial one, keep theirs)."""
    if isinstance(results, dict):
        phase = results.get(KEY)
        if isinstance(phase, str) and phase in metrics:
            results["spark"] = metrics[phase]
            if isinstance(results.get("memory_mib"), dict):
                results["memory_mib"]["spark_task_peak"] = metrics[phase].get("peak_execution_memory_mib", 0.0)
        for value in results.values():
            attach(value, metrics)
    elif isinstance(results, list):
        for value in results:
            attach(value, metrics)


def _events(directory: Path) -> Iterator[dict[str, Any]]:
    for path in sorted(directory.iterdir()):
        with path.open() as lines:
            for line in lines:
                yield json.loads(line)

"""What the planner found and did for one table: the type its handler, events and metrics share.

Below the planner, so that what reads outcomes (`icecdc.aws.metrics`, `icecdc.aws.events`) does
not import the planner that makes them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableOutcome:
    """What the planner found and did for one table (the handler returns it)."""

    table: str
    has_work: bool = False  # the table is behind its checkpoint, or has items not done
    pending: int = 0
    job_run_id: str | None = None  # the run this call started
    job_running: bool = False  # a run of the table's job was already on (it drains the queue)
    error: str | None = None
    applied_snapshots: int = 0  # snapshots this call applied itself (a small batch, no Glue run)
    checkpoint: int | None = None  # the snapshot the index is at after them
    dead_lettered: int = 0  # documents of those snapshots sent to the dead letters

"""The in-process engine: a small pass read, grouped and written in the calling process, with no
JVM (the CLI's small syncs; the planner Lambda). The same reader, changelog and sink as on Spark;
a dict by document id stands for the shuffle, so a pass's changed rows are held in memory (the
engine configuration's limits keep such passes small)."""

from __future__ import annotations

from dataclasses import dataclass

from icecdc.changelog import ChangeStats
from icecdc.engines.target import Target, Targets, write_keyed_changes
from icecdc.model import ChangeRow, EngineKind
from icecdc.opensearch import open_client
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import Task
from icecdc.sink import SinkStats, delete_older


@dataclass
class Tally:
    """A counter the reader adds to, as it adds to a Spark accumulator on an executor."""

    value: int = 0

    def add(self, n: int) -> None:
        self.value += n


@dataclass(frozen=True)
class InProcessEngine:
    @property
    def kind(self) -> EngineKind:
        return EngineKind.IN_PROCESS

    def apply(self, reader: TableReader, tasks: list[Task], target: Target | Targets) -> tuple[ChangeStats, SinkStats]:
        carried, unreadable = Tally(), Tally()  # carryover pairs and unreadable rows the reader dropped
        by_key: dict[str, list[ChangeRow]] = {}
        for doc_id, change in reader.read(tasks, carried, unreadable):
            by_key.setdefault(doc_id, []).append(change)
        change_stats, sink_stats = write_keyed_changes(target, by_key.items())
        change_stats.add(ChangeStats(rows=2 * carried.value, carryovers=carried.value))
        sink_stats.dead_lettered += unreadable.value
        return change_stats, sink_stats

    def delete_older(self, target: Target, version: int) -> int:
        return delete_older(open_client(target.opensearch), target.opensearch, target.index, version, 0, 1)

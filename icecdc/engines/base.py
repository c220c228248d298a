"""What an engine does for a pass: read, bring every key's changes together, write.

It reads the tasks' files into keyed changes, brings every key's changes together in the one
shuffle, and writes each key's net change. It writes an export's rows where they are read. After a
resync's export it deletes what the table no longer has.
"""

from __future__ import annotations

from typing import Protocol

from icecdc.changelog import ChangeStats
from icecdc.destination.sink import SinkStats
from icecdc.engines.target import Target, Targets
from icecdc.model import EngineKind
from icecdc.reading.reader import TableReader
from icecdc.reading.tasks import ExportTasks, Task


class Engine(Protocol):
    @property
    def kind(self) -> EngineKind: ...

    def apply(
        self, reader: TableReader, tasks: list[Task], target: Target | Targets
    ) -> tuple[ChangeStats, SinkStats]:
        """Read the tasks' files, group the changes by document id, write each key's net change.

        For `Targets`, one read writes each key's net change to several indexes of the table.
        """
        ...

    def export(
        self, reader: TableReader, tasks: ExportTasks, target: Target
    ) -> tuple[ChangeStats, SinkStats]:
        """Write the export tasks' rows where they are read, with no shuffle of documents.

        Duplicate identifiers are settled after, as `icecdc.engines.export` does, among the earlier
        passes' rows too (`ExportTasks`).
        """
        ...

    def delete_older(self, target: Target, version: int) -> int:
        """Delete every document of the target's index older than `version`; return how many."""
        ...

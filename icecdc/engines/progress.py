"""Progress inside a pass, on either engine: tasks and rows done, the rate and the time left.

Tasks are files; done counts stand against the pass's totals. In process, the writes of the
changes, once read, are a stage of their own: documents written against the keys to write. They
are logged to `icecdc.progress` as the pass goes, the logger the progress between passes uses,
and the CLI draws a bar from both on a terminal.

The rows are the manifests' record counts of the files each task reads, known before anything is
read, so a total is there from the first line. An engine says what is done (`PassMeter.add`, `at`);
the meter decides what is logged. That is a line at the start and at the end, and one at most every
`EVERY_SECONDS` between, at INFO, for the Glue job's and the planner's logs and output that is not a
terminal. A DEBUG record comes at most every `REDRAW_SECONDS`, for a bar that redraws itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from icecdc.model import PassProgress, PassStage
from icecdc.reading.tasks import Task, files_read_by

log = logging.getLogger("icecdc.progress")

T = TypeVar("T", bound=Task | tuple[int, Task])


@dataclass(frozen=True)
class Done:
    """Tasks, and the rows of their files.

    Immutable: a Spark accumulator's value is replaced, never changed in place, so the driver's
    polling thread never reads one half added."""

    files: int = 0
    rows: int = 0

    @classmethod
    def of(cls, tasks: Iterable[Task | tuple[int, Task]]) -> Done:
        """Of tasks, or of an export's numbered tasks."""
        found = [task[1] if isinstance(task, tuple) else task for task in tasks]
        return cls(len(found), sum(f.record_count for task in found for f in files_read_by(task)))

    def __add__(self, other: Done) -> Done:
        return Done(self.files + other.files, self.rows + other.rows)


class PassMeter:
    """Reports one stage of a pass over `tasks` as an engine says what it has done."""

    EVERY_SECONDS = 10.0  # INFO lines: enough to follow a long pass, few in the logs
    REDRAW_SECONDS = 1.0  # DEBUG records, for the CLI's bar
    POLL_SECONDS = 1.0  # how often `polling` asks an engine (a Spark job's accumulator)

    def __init__(
        self,
        table_name: str,
        stage: PassStage,
        tasks: Iterable[Task | tuple[int, Task]],
        clock: Callable[[], float] = time.monotonic,
        total: Done | None = None,
    ) -> None:
        self.table_name, self.stage, self.clock = table_name, stage, clock
        self.total, self.done = total or Done.of(tasks), Done()
        self.started = clock()
        self._logged = self._drawn = self.started
        self._report(logging.INFO)  # the totals, before anything is read

    def add(self, done: Done) -> None:
        """`done` more is done."""
        self.at(self.done + done)

    def at(self, done: Done) -> None:
        """So much is done in all, capped at the totals.

        Spark may run a task again, adding twice.
        """
        done = Done(min(done.files, self.total.files), min(done.rows, self.total.rows))
        if done == self.done:
            return
        self.done = done
        now = self.clock()
        if self._finished or now - self._logged >= self.EVERY_SECONDS:
            self._logged = now
            self._report(logging.INFO)
        elif now - self._drawn >= self.REDRAW_SECONDS:
            self._report(logging.DEBUG)

    @property
    def _finished(self) -> bool:
        total = self.total
        return self.done.files >= total.files if total.files else self.done.rows >= total.rows

    def written(self, documents: int) -> None:
        """`documents` more are written (the writes stage counts them as rows)."""
        self.add(Done(0, documents))

    def end(self) -> None:
        """The stage is over: the totals are what was done, logged unless they were already.

        A writes stage's total is an estimate, one document a key an index.
        """
        if not self._finished:
            self.total = self.done
            self._report(logging.INFO)

    def counting(self, tasks: Iterable[T]) -> Iterator[T]:
        """The tasks, each reported done when the next is asked for.

        One process reads them in turn.
        """
        previous: list[T] = []
        for task in tasks:
            if previous:
                self.add(Done.of(previous))
            previous = [task]
            yield task
        self.add(Done.of(previous))

    @contextmanager
    def polling(self, done: Callable[[], Done]) -> Iterator[None]:
        """While the block runs, report `done()` every POLL_SECONDS from a thread of its own.

        The block is a Spark job the driver waits for. Once it has ended
        well, `done()` is reported once more.
        """
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(self.POLL_SECONDS):
                self.at(done())

        thread = threading.Thread(
            target=poll, name=f"icecdc progress of {self.table_name}", daemon=True
        )
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
        self.at(done())

    def _report(self, level: int) -> None:
        self._drawn = self.clock()
        done, total = self.done, self.total
        progress = PassProgress(
            self.table_name,
            self.stage,
            done.files,
            total.files,
            done.rows,
            total.rows,
            self._drawn - self.started,
        )
        log.log(level, progress.line(), extra={"progress": progress})

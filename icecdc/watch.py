"""`icecdc sync --watch`: a sync round per interval, until SIGTERM or SIGINT stops the rounds.

A round is one `sync` of the selected tables. The next round starts an interval after the last one
started, or at once when the last one applied something, as commits may have come meanwhile. A
round's error is reported and the next round goes on, but a configuration error, which every round
would meet again, ends the watch.

Stopping: a signal while the watch waits ends it at once. A signal while a round runs lets the pass
under way finish, so its checkpoint moves, and starts no other; the round reports what its passes
did, and items planned and not applied stay pending for the next run. A second signal abandons the
pass under way as a crash would: nothing of it is recorded, and leaving the table's `with Lease`
block releases its lease, so the next run resumes at once. A process killed outright leaves its
lease to expire instead.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from types import FrameType

from icecdc.config import Config
from icecdc.engines import Engines
from icecdc.errors import ConfigError
from icecdc.sync import SyncResult, sync

log = logging.getLogger(__name__)

Names = list[str] | None  # the tables a round syncs; None: every configured one

_INTERVAL = re.compile(r"^(\d+(?:\.\d+)?)([smh]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def parse_interval(text: str) -> float:
    """Seconds from `30s`, `2m`, `1h` or plain seconds (`45`, `0.5`); else ValueError."""
    found = _INTERVAL.match(text.strip())
    seconds = float(found.group(1)) * _UNIT_SECONDS[found.group(2)] if found else 0.0
    if seconds <= 0:
        example = "such as 30s, 2m or 45 (seconds)"
        raise ValueError(f"interval {text!r} is not a positive duration {example}")
    return seconds


class Stop(StrEnum):
    """The signal that stopped the watch."""

    TERMINATE = "SIGTERM"
    INTERRUPT = "SIGINT"


class Abandoned(BaseException):
    """A second signal while a pass ran: the pass is abandoned as a crash would leave it.

    A BaseException, so that no `except Exception` on the way takes it for a round's failure."""


@dataclass(frozen=True)
class Round:
    """What one sync round did: its results per table, or the error that ended it."""

    number: int
    started: float  # time.time() at its start and its end
    finished: float
    results: tuple[SyncResult, ...] = ()
    error: Exception | None = None

    @property
    def times(self) -> tuple[float, float]:
        return self.started, self.finished

    @property
    def busy(self) -> bool:
        """Whether the round applied anything or stopped short: the next round starts at once."""
        return any(r.snapshots or r.unfinished or r.skipped for r in self.results)


Done = Round | None  # a round's report; None: a stop ended the round


class Watcher:
    """The rounds' stop: set by the first signal, checked between passes and rounds."""

    def __init__(self) -> None:
        self.stop: Stop | None = None
        self._woken = threading.Event()
        self._in_round = False

    def signalled(self, signum: int, _: FrameType | None) -> None:
        """A signal handler: the first signal asks the rounds to stop, a second abandons."""
        if self.stop is not None and self._in_round:
            raise Abandoned
        self.stop = Stop(signal.Signals(signum).name)
        self._woken.set()
        if self._in_round:
            log.info("%s: stopping after the pass under way (again: at once)", self.stop)

    def stopped(self) -> bool:
        """Whether a stop was asked: asked between passes, so none starts after it."""
        return self.stop is not None

    def wait(self, seconds: float) -> None:
        self._woken.wait(max(0.0, seconds))

    @contextmanager
    def round(self) -> Iterator[None]:
        self._in_round = True
        try:
            yield
        finally:
            self._in_round = False

    @contextmanager
    def handling_signals(self) -> Iterator[None]:
        """SIGTERM and SIGINT handled by `signalled` in the block; the previous ones after."""
        stops = (signal.SIGTERM, signal.SIGINT)
        previous = {s: signal.signal(s, self.signalled) for s in stops}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def watch(
    config: Config,
    table_names: Iterable[str] | None,
    interval: float,
    report: Callable[[Round], None],
    watcher: Watcher | None = None,
) -> Stop:
    """Sync rounds until a signal stops them; `report` is given each round.

    Returns the signal that stopped them. A ConfigError ends the watch: it is raised. The rounds
    share one set of engines, so that a Spark session a pass started serves the later rounds too."""
    watcher = watcher or Watcher()
    names = list(table_names) if table_names else None
    engines = Engines(config.engine, config.spark)
    number = 0
    try:
        with watcher.handling_signals():
            while watcher.stop is None:
                number += 1
                started = time.monotonic()
                done = _round(config, names, number, watcher, engines)
                if done is None:  # stopped inside the round
                    break
                report(done)
                if not done.busy:
                    watcher.wait(interval - (time.monotonic() - started))
    finally:
        engines.close()
    assert watcher.stop is not None
    return watcher.stop


def _round(config: Config, names: Names, number: int, watcher: Watcher, engines: Engines) -> Done:
    """One sync round; None when a stop ended it."""
    started = time.time()
    with watcher.round():
        try:
            results = sync(config, table_names=names, engines=engines, stopped=watcher.stopped)
        except Abandoned:
            return None
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported; the next round goes on
            if watcher.stop is not None:
                return None
            return Round(number, started, time.time(), error=exc)
    return Round(number, started, time.time(), tuple(results))

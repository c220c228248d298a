"""A table's processing lease: one run at a time writes a table, and a run that lost it stops."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Self

from icecdc.config import StateConfig
from icecdc.errors import LeaseLost, ProcessingError
from icecdc.state.factory import open_state_store
from icecdc.state.store import StateStore

log = logging.getLogger(__name__)


class Lease:
    """Hold a table's processing lease for a `with` block.

    It waits for the lease up to the lease's own length, as a crashed holder's lease runs out by
    then. It renews the lease in the background and releases it at the end.

    `held` is False when another live run kept it; the block then should leave the table alone.
    `owner` fences the run's checkpoint writes in `StateStore.complete`. `lost` turns True when a
    renewal failed, and the run should stop, as `check` says: it can no longer advance anything.
    """

    def __init__(
        self,
        store: StateStore,
        table_name: str,
        seconds: float,
        wait: bool = True,
        state: StateConfig | None = None,
    ) -> None:
        self._store = store
        self._state = state  # the configuration `store` was opened from, for `fence`
        self._wait = wait  # False: take the lease if it is free, else leave the table at once
        self._table_name = table_name
        self._seconds = seconds
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.held = False
        self.lost = False
        self._until = 0.0  # when (`time.time()`) the lease runs out, as last taken or renewed

    def __enter__(self) -> Self:
        deadline = time.monotonic() + (self._seconds if self._wait else 0.0)
        held = self._acquire()
        if not held and self._wait:
            self._say_waiting()
        while not held and time.monotonic() < deadline:
            time.sleep(min(1.0, self._seconds / 10))
            held = self._acquire()
        self.held = held
        if held:
            self._renewer = threading.Thread(
                target=self._renew, name=f"lease-{self._table_name}", daemon=True
            )
            self._renewer.start()
        return self

    def _acquire(self) -> bool:
        """Take or renew the lease; when taken, it runs out no sooner than `_until`."""
        asked = time.time()
        held = self._store.acquire_lease(self._table_name, self.owner, self._seconds)
        if held:
            self._until = asked + self._seconds
        return held

    def admit(self, seconds: float) -> None:
        """Return once the lease is held for `seconds` more; `LeaseLost` when it is not.

        A lease about to run out waits for the next renewal (a third of the lease), or its end. A
        lease renewed for less than `seconds` never admits the write: `ProcessingError`.
        """
        if self._seconds * 2 / 3 <= seconds:
            raise ProcessingError(_too_short(self._table_name, self._seconds, seconds))
        self.check()
        while self._until <= time.time() + seconds:
            self.check()
            if self._until <= time.time():
                raise LeaseLost.of(self._table_name)
            time.sleep(min(1.0, seconds / 10))

    def _say_waiting(self) -> None:
        """Log, before waiting, who holds the lease, until when, and how long this run waits."""
        holder = self._store.lease_holder(self._table_name)
        who, left = "another run", self._seconds
        if holder is not None:
            who, left = holder_of(holder[0]), max(0.0, holder[1] - time.time())
        log.info(
            "%s: %s holds the table's processing lease: waiting for it up to %.0f s "
            "(it runs out in %.0f s unless that run renews it, as a killed run cannot)",
            self._table_name,
            who,
            self._seconds,
            left,
        )

    def check(self) -> None:
        """Raise `LeaseLost` once the lease is lost: another run may write the table by then."""
        if self.lost:
            raise LeaseLost.of(self._table_name)

    def fence(self) -> LeaseFence | None:
        """A fence on this lease for code that runs where the lease is not (executors, workers).

        None when the lease was not given the configuration of its store.
        """
        if self._state is None:
            return None
        key = self._store.lease_key(self._table_name)
        return LeaseFence(self._state, self._table_name, key, self.owner)

    def _renew(self) -> None:
        while not self._stop.wait(self._seconds / 3):
            try:
                renewed = self._acquire()
            except Exception:  # noqa: BLE001
                # any failure to renew: the lease may run out unseen, so it counts as lost
                log.warning(
                    "%s: renewing the processing lease failed; this run stops",
                    self._table_name,
                    exc_info=True,
                )
                renewed = False
            if not renewed:
                log.warning(
                    "%s: the processing lease ran out or another run took it; this run stops",
                    self._table_name,
                )
                self.lost = True
                return

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.held:
            self._store.release_lease(self._table_name, self.owner)


@dataclass
class LeaseFence:
    """No request leaves unless the lease outlives it: for writes a version cannot order.

    Small and picklable: it reads the lease's record from the store where it runs, at most once
    per renewal the holder makes (a third of the lease), not once per request.
    """

    state: StateConfig
    table_name: str
    key: str  # what the store keeps the lease under
    owner: str
    _until: float = field(default=0.0, compare=False)  # the lease's expiry as last read

    def admit(self, seconds: float) -> None:
        """Return once the lease is held for `seconds` more; `LeaseLost` when it is not.

        A lease about to run out waits for its holder's next renewal, or for its end. A lease
        renewed for less than `seconds` never admits the write: `ProcessingError`.
        """
        while self._until <= time.time() + seconds:
            holder = self._holder()
            if holder is None or holder[0] != self.owner:
                raise LeaseLost.of(self.table_name)
            renewed = self._until != 0.0 and holder[1] > self._until
            if holder[1] <= time.time() + seconds:
                if renewed:
                    raise ProcessingError(_too_short(self.table_name, None, seconds))
                time.sleep(min(1.0, seconds / 10))
            self._until = holder[1]

    def _holder(self) -> tuple[str, float] | None:
        """The lease's record, read from a store opened for it and closed at once.

        Nothing stays open between reads: a fence outlives the pass it fenced (an in-process
        run's workers, a task's closure), and an open SQLite file would hold its filesystem.
        """
        store = open_state_store(self.state)
        try:
            return store.lease_holder(self.key)
        finally:
            store.close()


def _too_short(table_name: str, lease_seconds: float | None, seconds: float) -> str:
    """Why a lease cannot fence a write that must land within `seconds`."""
    lease = f"{lease_seconds:g} s" if lease_seconds is not None else "renewed for too short"
    return (
        f"{table_name}: the processing lease ({lease}) never outlives a write's {seconds:g} s "
        "by the two thirds a renewal leaves: raise state.lease_seconds"
    )


def holder_of(owner: str) -> str:
    """The run a lease's `owner` names: "process 123 on host", or the owner itself."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return f"process {pid} on {host}" if host and pid.isdigit() else f"run {owner}"

"""A table's processing lease: one run at a time writes a table, and a run that lost it stops."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Self

from icecdc.errors import LeaseLost
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
        self, store: StateStore, table_name: str, seconds: float, wait: bool = True
    ) -> None:
        self._store = store
        self._wait = wait  # False: take the lease if it is free, else leave the table at once
        self._table_name = table_name
        self._seconds = seconds
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.held = False
        self.lost = False

    def __enter__(self) -> Self:
        deadline = time.monotonic() + (self._seconds if self._wait else 0.0)
        held = self._store.acquire_lease(self._table_name, self.owner, self._seconds)
        if not held and self._wait:
            self._say_waiting()
        while not held and time.monotonic() < deadline:
            time.sleep(min(1.0, self._seconds / 10))
            held = self._store.acquire_lease(self._table_name, self.owner, self._seconds)
        self.held = held
        if held:
            self._renewer = threading.Thread(
                target=self._renew, name=f"lease-{self._table_name}", daemon=True
            )
            self._renewer.start()
        return self

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

    def _renew(self) -> None:
        while not self._stop.wait(self._seconds / 3):
            try:
                renewed = self._store.acquire_lease(self._table_name, self.owner, self._seconds)
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


def holder_of(owner: str) -> str:
    """The run a lease's `owner` names: "process 123 on host", or the owner itself."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return f"process {pid} on {host}" if host and pid.isdigit() else f"run {owner}"

"""`icecdc dev-server`: a local OpenSearch-compatible server for the local loop.

The server is osmem, the demo's, running until SIGINT or SIGTERM. It keeps its indexes in memory:
after a restart the next sync finds the index gone and exports the tables into it again.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from icecdc.devlimits import DEV_SERVER_LIMITS
from icecdc.errors import OperationError

DEFAULT_PORT = 9200  # OpenSearch's own, which `icecdc init` writes into a config
POLL_SECONDS = 0.5  # how often the server process is looked at while waiting for a signal


def serve(port: int, seed: Path | None = None, out: Callable[[str], None] = print) -> int:
    """Run osmem on 127.0.0.1:`port` until SIGINT or SIGTERM; 0 when stopped so, 2 when it died.

    Port 0 takes a free port. With `seed`, osmem's seed directory or .ndjson
    file, the server is loaded from it.
    """
    from osmem_server import (
        OsmemError,
        OsmemServer,
    )  # the `local` extra's; only this command and the demo need it

    if seed is not None and not seed.exists():
        raise OperationError(f"--data {seed} does not exist: name an osmem seed directory or file")
    try:
        server = OsmemServer.start(seed, japanese=False, addr=f"127.0.0.1:{port}")
    except OsmemError as exc:
        taken = f"the dev server did not start on port {port} (is it taken? --port N)"
        raise OperationError(f"{taken}: {exc}") from None
    with _stopped_by_signals() as stop:
        try:
            out(f"OpenSearch-compatible dev server (osmem {server.version}) at {server.url}")
            out(f"  set opensearch: {{url: {server.url}}} in icecdc.yaml; Ctrl-C stops it")
            out("  indexes are kept in memory: after a restart, a sync exports the tables again")
            out(f"  {DEV_SERVER_LIMITS}")
            while not stop.wait(POLL_SECONDS):
                if server.process.poll() is not None:
                    out(f"the dev server exited ({server.process.returncode})")
                    return 2
        finally:
            server.close()
    out("dev server stopped")
    return 0


@contextmanager
def _stopped_by_signals() -> Iterator[threading.Event]:
    """An event SIGINT and SIGTERM set (instead of raising), for the time of the block."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for number, restored in previous.items():
            signal.signal(number, restored)

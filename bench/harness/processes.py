"""What the bench's server subprocesses share: their shutdown, seen from the bench, and their
exit when the bench that started them is gone."""

from __future__ import annotations

import os
import subprocess
import time


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the process if it still runs, kill it if it does not stop within 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def exit_with(parent: int) -> None:
    """Stop when the process that started this one is gone (no server outlives a killed bench)."""
    while True:
        time.sleep(1)
        if os.getppid() != parent:
            os._exit(0)

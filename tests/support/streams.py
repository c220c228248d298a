"""A child process's output read as it comes, for tests that act on what a run has logged."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import IO


class Lines:
    """A process's stream, its lines gathered by a thread of their own as the process writes them.

    The stream is drained continuously, so the process never blocks on a full pipe; `on_line`
    sees each line as it comes (to copy it to a log, or to note when something first showed).
    """

    def __init__(self, stream: IO[str] | None, on_line: Callable[[str], None] | None = None) -> None:
        assert stream is not None
        self.lines: list[str] = []
        self._on_line = on_line
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)
            if self._on_line is not None:
                self._on_line(line)

    def saw(self, text: str) -> bool:
        """Whether a line so far holds `text`."""
        return any(text in line for line in list(self.lines))

    def awaited(self, text: str, seconds: float) -> bool:
        """Whether a line holding `text` came within `seconds`."""
        deadline = time.monotonic() + seconds
        while not self.saw(text):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def join(self, seconds: float = 30) -> None:
        """Wait up to `seconds` for the stream to end and its last line to be read."""
        self._reader.join(timeout=seconds)

    def text(self) -> str:
        """All the lines, once the stream has ended."""
        self.join()
        return "".join(self.lines)

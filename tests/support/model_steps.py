"""What the model-based test's rules share: counting steps for `make fuzz`'s report, and notes."""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import note as hypothesis_note
from hypothesis.errors import InvalidArgument


@dataclass
class Stats:
    """What the machine ran (all examples of a test session), for `make fuzz`'s report."""

    examples: int = 0
    steps: Counter[str] = field(default_factory=Counter)
    seconds: Counter[str] = field(default_factory=Counter)  # by rule
    started: float = field(default_factory=time.monotonic)

    def summary(self) -> str:
        lines = [f"{self.examples} examples, {sum(self.steps.values())} steps in {time.monotonic() - self.started:.0f}s"]
        lines += [
            f"  {count:6d}  {what}" + (f" ({self.seconds[what]:.0f}s)" if what in self.seconds else "")
            for what, count in sorted(self.steps.items())
        ]
        return "\n".join(lines)


STATS = Stats()


def note(text: str) -> None:
    """Hypothesis prints notes with a failing sequence; a regression test (no Hypothesis) prints them."""
    try:
        hypothesis_note(text)
    except InvalidArgument:
        print(text)


def step(method: Callable[..., None]) -> Callable[..., None]:
    """A rule's body: counted, and marked busy while it runs (a step that raised leaves the machine
    busy, and teardown then skips its final sync: the failure is the step's)."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> None:
        self.busy = True
        STATS.steps[method.__name__] += 1
        started = time.monotonic()
        method(self, *args, **kwargs)
        STATS.seconds[method.__name__] += time.monotonic() - started
        self.busy = False

    return run

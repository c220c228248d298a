"""Crashes at the named points of a pass (`icecdc.model.PassPoint`), through the test-only probe."""

from __future__ import annotations

from icecdc.model import PassPoint, Probe


class Crash(Exception):
    """What a probe raises at its point: the run dies there."""


def crash_at(point: PassPoint) -> Probe:
    """A probe that crashes the run when it reaches `point`."""

    def probe(reached: PassPoint) -> None:
        if reached == point:
            raise Crash(point)

    return probe

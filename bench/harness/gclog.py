"""The JVM's GC log (`-Xlog:gc`), read for the heap it kept: what the memory probe judges the JVM by.

Standard library only: the tests import it, and their environment has none of the bench's packages.
"""

from __future__ import annotations

import re

# A collection in the log, G1's or the serial collector's alike:
# "... Pause Young (Normal) (G1 Evacuation Pause) 120M->45M(376M) 5.1ms" — heap used before and
# after it, and the heap committed.
_COLLECTION = re.compile(r"(\d+)([KMG])->(\d+)([KMG])\((\d+)([KMG])\)")
_MIB = {"K": 1 / 1024, "M": 1, "G": 1024}


def jvm_heap(gc_log: str) -> dict[str, float]:
    """From the JVM's GC log, over its whole life (MiB): the most its heap held after a collection
    (what was live, or left for later), before one (how far the collector let it fill), and the
    most heap the collector had committed. Why: the JVM's RSS counts the heap G1 has committed and
    filled, which it expands after a long pause and so moves from run to run (the probe's spread
    layout, 2026-11-26/27); what the heap keeps after collecting is what would grow if the JVM held data."""
    pauses = [
        (int(before) * _MIB[before_unit], int(after) * _MIB[after_unit], int(committed) * _MIB[committed_unit])
        for before, before_unit, after, after_unit, committed, committed_unit in _COLLECTION.findall(gc_log)
    ]
    return {
        "pauses": len(pauses),
        "before_collection_peak": max((before for before, _, _ in pauses), default=0.0),
        "after_collection_peak": max((after for _, after, _ in pauses), default=0.0),
        "committed_peak": max((committed for _, _, committed in pauses), default=0.0),
    }

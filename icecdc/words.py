"""How icecdc words a count: "1 snapshot", "2 snapshots", in every message and line it prints."""

from __future__ import annotations


def counted(n: int, thing: str, plural: str = "") -> str:
    """`n` and `thing`, plural unless one: "1 file", "2,000 rows", `plural` where not thing+"s"."""
    return f"{n:,} {thing if n == 1 else plural or thing + 's'}"

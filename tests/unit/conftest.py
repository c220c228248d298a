"""tests/unit stays fast: a test here that starts Spark, osmem or moto, or is slow, fails."""

from __future__ import annotations

import pytest

SLOW_MARKERS = {"spark", "opensearch", "aws", "slow"}


@pytest.fixture(autouse=True)
def no_slow_parts(request: pytest.FixtureRequest) -> None:
    marked = SLOW_MARKERS & {marker.name for marker in request.node.iter_markers()}
    assert not marked, f"{request.node.nodeid} is marked {sorted(marked)}: it belongs outside tests/unit"

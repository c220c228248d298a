"""icecdc.destination.sink's guard of an operator's writes: `fenced` stops them once the lease is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from icecdc.destination.sink import fenced
from icecdc.errors import LeaseLost
from icecdc.model import Write
from icecdc.state import Lease, SqliteStateStore


def test_fenced_writes_stop_at_the_first_write_after_the_lease_is_lost(tmp_path: Path) -> None:
    writes = [Write(str(n), 5, "{}") for n in range(3)]
    with Lease(SqliteStateStore(tmp_path / "state.db"), "db.orders", 60) as lease:
        assert lease.held
        sent = fenced(writes, lease)
        assert next(sent) == writes[0]
        lease.lost = True  # what the renewer sets when another run took the table
        lost = "table 'db.orders': this run's processing lease ran out or another run took it"
        with pytest.raises(LeaseLost, match=lost):
            next(sent)
    with Lease(SqliteStateStore(tmp_path / "state.db"), "db.orders", 60) as lease:
        assert list(fenced(writes, lease)) == writes

"""icecdc.state's lease guard: `Lease.check` is the one place a lost lease stops a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from icecdc.errors import LeaseLost
from icecdc.state import Lease, SqliteStateStore


def test_check_passes_while_the_lease_is_held_and_raises_once_it_is_lost(tmp_path: Path) -> None:
    with Lease(SqliteStateStore(tmp_path / "state.db"), "db.orders", 60) as lease:
        assert lease.held
        lease.check()
        lease.lost = True  # what the renewer sets when another run took the table
        lost = "table 'db.orders': this run's processing lease ran out or another run took it"
        with pytest.raises(LeaseLost, match=lost):
            lease.check()

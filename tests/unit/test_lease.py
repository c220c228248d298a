"""icecdc.state's lease guard: `Lease.check` is the one place a lost lease stops a run; `admit` and
`LeaseFence` fence writes no version orders; a SQLite transaction ends as its error says."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from icecdc.config import SqliteStateConfig
from icecdc.errors import LeaseLost, ProcessingError
from icecdc.state import Lease, SqliteStateStore
from icecdc.state.sqlite import _LockedConnection, _SqliteTransaction


def test_check_passes_while_the_lease_is_held_and_raises_once_it_is_lost(tmp_path: Path) -> None:
    with Lease(SqliteStateStore(tmp_path / "state.db"), "db.orders", 60) as lease:
        assert lease.held
        lease.check()
        lease.lost = True  # what the renewer sets when another run took the table
        lost = "table 'db.orders': this run's processing lease ran out or another run took it"
        with pytest.raises(LeaseLost, match=lost):
            lease.check()


def test_a_write_is_admitted_only_while_the_lease_outlives_it(tmp_path: Path) -> None:
    """`Lease.admit`: the fence of a write no version orders (Serverless), in the lease's process."""
    with Lease(SqliteStateStore(tmp_path / "state.db"), "db.orders", 60) as lease:
        lease.admit(30)  # 60 s left: admitted at once
        lease.lost = True
        with pytest.raises(LeaseLost):
            lease.admit(30)
    too_short = r"never outlives a write's 5 s .*state.lease_seconds"
    with Lease(SqliteStateStore(tmp_path / "other.db"), "db.orders", 3) as short, pytest.raises(ProcessingError, match=too_short):
        short.admit(5)  # a renewal leaves 2 s: no write would ever leave


def test_the_fence_where_the_lease_is_not_reads_its_record(tmp_path: Path) -> None:
    """`LeaseFence`: what Spark's executors and the in-process workers ask, from the state store."""
    state = SqliteStateConfig(path=str(tmp_path / "state.db"))
    store = SqliteStateStore(tmp_path / "state.db")
    with Lease(store, "db.orders", 60, state=state) as lease:
        fence = lease.fence()
        assert fence is not None
        travelled = pickle.loads(pickle.dumps(fence))  # as a task's argument: no store in it
        travelled.admit(30)
        store.release_lease("db.orders", lease.owner)
        assert store.acquire_lease("db.orders", "another run", 60)
        with pytest.raises(LeaseLost):
            pickle.loads(pickle.dumps(fence)).admit(30)
        assert Lease(store, "db.orders", 60).fence() is None  # no state configuration given


def _open_files(path: Path) -> int:
    """How many of this process's file descriptors are open on `path`."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if fd.exists() and fd.resolve() == path.resolve())


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc (Linux)")
def test_the_fence_keeps_no_state_file_open_after_it_read(tmp_path: Path) -> None:
    """A fence outlives its pass (in-process workers): a store it kept open held the state's
    filesystem, which then could not turn read-only (found by the fuzz, on a collection)."""
    state = SqliteStateConfig(path=str(tmp_path / "state.db"))
    store = SqliteStateStore(tmp_path / "state.db")
    with Lease(store, "db.orders", 60, state=state) as lease:
        fence = lease.fence()
        assert fence is not None
        fence.admit(30)
        fence._until = 0.0  # read the record again, as after a renewal
        fence.admit(30)
    store.close()  # the run is over; SQLite closes a file only when its last connection does
    assert _open_files(tmp_path / "state.db") == 0


def test_an_error_after_sqlite_rolled_back_by_itself_is_the_error_raised(tmp_path: Path) -> None:
    """SQLite ends a transaction itself on a full disk or an I/O error; the store's ROLLBACK then
    failed with "no transaction is active" and called the state file corrupt (found by the fuzz)."""
    db = _LockedConnection(tmp_path / "state.db")
    with pytest.raises(KeyError, match="the first error"), _SqliteTransaction(db):
        db.execute("ROLLBACK")  # what SQLite does by itself
        raise KeyError("the first error")
    db.close()

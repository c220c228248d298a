"""The local state store: one SQLite file, safe for several processes (SQLite's own locking)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from icecdc.errors import LeaseLost, StateError, StateUnwritable
from icecdc.model import AnyItem, Checkpoint, ItemHead, ItemStatus, WorkItem
from icecdc.state.store import PENDING_PAGE_SIZE, Completion, PendingPage, StateStore

# Keys a `bodies` statement asks for: well within SQLite's 32,766 parameters.
_KEYS_PER_SELECT = 500
# SQLite's result codes of a file or directory it cannot write, or a disk without space: the file
# may be intact. SQLITE_IOERR is what a full disk gives while the WAL's index grows.
_UNWRITABLE = ("SQLITE_READONLY", "SQLITE_FULL", "SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_PERM")
_BUSY = "another process holds it: let it finish, or end it"
CORRUPT_FIX = "restore it from a copy, or move it aside: the next sync exports again"
UNWRITABLE_FIX = (
    "fix the permission or free space on its filesystem, and keep the file: it holds the "
    "checkpoints"
)
NEW_FILE_FIX = "fix the permission or free space of its directory"
# What a probe writes beside the state: a page of SQLite's, which a full disk refuses.
_PROBE_BYTES = 4096


def state_error(path: Path, exc: sqlite3.DatabaseError | OSError) -> StateError:
    """The error of a state file SQLite cannot use, with the fix its cause asks for.

    A file or directory that cannot be written, or a full disk, is `StateUnwritable`: the fix keeps
    the file. A file that is no database, or a damaged one, is moved aside or restored.
    """
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc):
        return StateError(f"the state file {path} cannot be used: {exc} ({_BUSY})")
    if not holds_state(path) or isinstance(exc, OSError) or name.startswith(_UNWRITABLE):
        return _unwritable(path, exc)
    return StateError(f"the state file {path} is unreadable or corrupt: {exc} ({CORRUPT_FIX})")


def holds_state(path: Path) -> bool:
    """Whether there is a state file at `path`: not one SQLite made empty and could not write."""
    return path.is_file() and path.stat().st_size > 0


def _unwritable(path: Path, exc: Exception) -> StateUnwritable:
    if not holds_state(path):
        return StateUnwritable(f"the state file {path} cannot be created: {exc} ({NEW_FILE_FIX})")
    return StateUnwritable(
        f"the state file {path} cannot be written, or its disk is full: {exc} ({UNWRITABLE_FIX})"
    )


def unwritable(path: Path) -> StateUnwritable | None:
    """Why the state file at `path` cannot be written, or None; changes nothing of it.

    A page is written and removed beside it (as SQLite's journal is), and the file, if any, is
    opened for writing; a directory yet to be made is tried at the nearest one there.
    """
    directory = path.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".icecdc-probe-") as probe:
            probe.write(b"\0" * _PROBE_BYTES)
            probe.flush()
            os.fsync(probe.fileno())
        for existing in (p for p in (path, Path(f"{path}-wal")) if p.exists()):
            with existing.open("r+b"):
                pass
    except OSError as exc:
        return _unwritable(path, exc)
    return None


class SqliteStateStore(StateStore):
    """The local store: one SQLite file, safe for several processes (SQLite's own locking)."""

    def __init__(self, path: str | Path) -> None:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise state_error(Path(path), exc) from None
        # One connection, shared by a sync and its lease renewer thread: every use holds its lock.
        self._db = _LockedConnection(Path(path))
        try:
            self._create_tables()
        except BaseException:  # a file it cannot use: its connection is not left open
            self._db.close()
            raise

    def _create_tables(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(
            """
            CREATE TABLE IF NOT EXISTS checkpoints (
                table_name TEXT PRIMARY KEY, table_uuid TEXT NOT NULL,
                snapshot_id INTEGER NOT NULL, sequence_number INTEGER NOT NULL,
                schema_id INTEGER NOT NULL, identifier_columns TEXT NOT NULL,
                updated_at REAL NOT NULL,
                index_uuid TEXT NOT NULL DEFAULT '');
            CREATE TABLE IF NOT EXISTS export_claims (
                table_name TEXT NOT NULL, table_uuid TEXT NOT NULL, replacing TEXT NOT NULL,
                snapshot_id INTEGER NOT NULL, sequence_number INTEGER NOT NULL,
                PRIMARY KEY (table_name, table_uuid, replacing));
            CREATE TABLE IF NOT EXISTS pass_ends (
                table_name TEXT PRIMARY KEY, table_uuid TEXT NOT NULL,
                snapshot_id INTEGER NOT NULL, sequence_number INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS leases (
                table_name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS work_items (
                key TEXT PRIMARY KEY, table_name TEXT NOT NULL, status TEXT NOT NULL,
                sequence_number INTEGER NOT NULL, body TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS work_items_pending
                ON work_items (table_name, status, sequence_number);
            """
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(checkpoints)").fetchall()}
        # a state file written before the index's identity was recorded
        if "index_uuid" not in columns:
            self._db.execute(
                "ALTER TABLE checkpoints ADD COLUMN index_uuid TEXT NOT NULL DEFAULT ''"
            )

    def get_checkpoint(self, table_name: str) -> Checkpoint | None:
        row = self._db.execute(
            "SELECT table_uuid, snapshot_id, sequence_number, schema_id, identifier_columns, "
            "index_uuid "
            "FROM checkpoints WHERE table_name = ?",
            (table_name,),
        ).fetchone()
        if row is None:
            return None
        table_uuid, snapshot_id, sequence_number, schema_id, identifier_columns, index_uuid = row
        return Checkpoint(
            table_uuid,
            snapshot_id,
            sequence_number,
            schema_id,
            tuple(json.loads(identifier_columns)),
            index_uuid,
        )

    def checkpointed_at(self, table_name: str) -> float | None:
        asked = "SELECT updated_at FROM checkpoints WHERE table_name = ?"
        row = self._db.execute(asked, (table_name,)).fetchone()
        return None if row is None else float(row[0])

    def claim_export(self, table_name: str, base: Checkpoint, replacing: str = "") -> Checkpoint:
        self._db.execute(
            "INSERT OR IGNORE INTO export_claims VALUES (?, ?, ?, ?, ?)",
            (table_name, base.table_uuid, replacing, base.snapshot_id, base.sequence_number),
        )
        row = self._db.execute(
            "SELECT table_uuid, snapshot_id, sequence_number FROM export_claims "
            "WHERE table_name = ? AND table_uuid = ? AND replacing = ?",
            (table_name, base.table_uuid, replacing),
        ).fetchone()
        return Checkpoint(*row)

    def begin_pass(self, table_name: str, end: Checkpoint) -> Checkpoint | None:
        with self._transaction():
            recorded = self.pass_end(table_name)
            before = (
                recorded if recorded is not None and recorded.table_uuid == end.table_uuid else None
            )
            if before is None or before.sequence_number < end.sequence_number:
                self._record_pass_end(table_name, end)
        return before

    def unbegin_pass(self, table_name: str, end: Checkpoint, before: Checkpoint | None) -> None:
        with self._transaction():
            if self.pass_end(table_name) != _end_of(end):
                return
            if before is None:
                self._db.execute("DELETE FROM pass_ends WHERE table_name = ?", (table_name,))
            else:
                self._record_pass_end(table_name, before)

    def pass_end(self, table_name: str) -> Checkpoint | None:
        row = self._db.execute(
            "SELECT table_uuid, snapshot_id, sequence_number FROM pass_ends WHERE table_name = ?",
            (table_name,),
        ).fetchone()
        return Checkpoint(*row) if row is not None else None

    def _record_pass_end(self, table_name: str, end: Checkpoint) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO pass_ends VALUES (?, ?, ?, ?)",
            (table_name, end.table_uuid, end.snapshot_id, end.sequence_number),
        )

    def acquire_lease(self, table_name: str, owner: str, seconds: float) -> bool:
        now = time.time()
        with self._transaction():
            cursor = self._db.execute(
                """INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT (table_name) DO UPDATE
                   SET owner = excluded.owner, expires_at = excluded.expires_at
                   WHERE leases.owner = excluded.owner OR leases.expires_at < ?""",
                (table_name, owner, now + seconds, now),
            )
            return cursor.rowcount == 1

    def release_lease(self, table_name: str, owner: str) -> None:
        self._db.execute(
            "DELETE FROM leases WHERE table_name = ? AND owner = ?", (table_name, owner)
        )

    def put_items(self, items: Iterable[WorkItem], replace_done: bool = False) -> int:
        with self._transaction():  # one commit for all, not one per item
            return sum(self._put(item, replace_done) for item in items)

    def _put(self, item: WorkItem, replace_done: bool) -> bool:
        values = (item.key, item.table, item.status, item.sequence_number, item.to_json())
        if not replace_done:
            return (
                self._db.execute(
                    "INSERT OR IGNORE INTO work_items VALUES (?, ?, ?, ?, ?)", values
                ).rowcount
                == 1
            )
        cursor = self._db.execute(
            """INSERT INTO work_items VALUES (?, ?, ?, ?, ?)
               ON CONFLICT (key) DO UPDATE SET status = excluded.status, body = excluded.body
               WHERE work_items.status = ?""",
            (*values, ItemStatus.DONE),
        )
        return cursor.rowcount == 1

    def pending_page(
        self, table_name: str, after: str | None = None, limit: int = PENDING_PAGE_SIZE
    ) -> PendingPage:
        sequence_number, key = _cursor(after) if after is not None else (-1, "")
        rows = self._db.execute(
            "SELECT sequence_number, key, body FROM work_items "
            "WHERE table_name = ? AND status IN (?, ?) "
            "AND (sequence_number, key) > (?, ?) ORDER BY sequence_number, key LIMIT ?",
            (table_name, ItemStatus.PENDING, ItemStatus.APPLIED, sequence_number, key, limit),
        ).fetchall()
        items = tuple(WorkItem.from_json(body) for _, _, body in rows)
        return PendingPage(
            items, f"{rows[-1][0]:020d}|{rows[-1][1]}" if len(rows) == limit else None
        )

    def _complete(self, table_name: str, completion: Completion) -> None:
        checkpoint, fence = completion.checkpoint, completion.fence
        with self._transaction():
            if checkpoint is not None:
                if fence is not None and not self._holds_lease(table_name, fence):
                    raise LeaseLost.of(table_name)
                self._db.execute(
                    """INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (table_name) DO UPDATE SET
                         table_uuid = excluded.table_uuid, snapshot_id = excluded.snapshot_id,
                         sequence_number = excluded.sequence_number, schema_id = excluded.schema_id,
                         identifier_columns = excluded.identifier_columns,
                         updated_at = excluded.updated_at,
                         index_uuid = excluded.index_uuid
                       WHERE excluded.sequence_number > checkpoints.sequence_number
                          OR excluded.table_uuid != checkpoints.table_uuid OR ?""",
                    (
                        table_name,
                        checkpoint.table_uuid,
                        checkpoint.snapshot_id,
                        checkpoint.sequence_number,
                        checkpoint.schema_id,
                        json.dumps(list(checkpoint.identifier_columns)),
                        time.time(),
                        checkpoint.index_uuid,
                        completion.replace,
                    ),
                )
                if completion.replace:  # the resync's index holds nothing past its checkpoint
                    self._record_pass_end(table_name, checkpoint)
            for item in completion.items:  # by key: the body keeps its files, its status is set
                self._db.execute(
                    "UPDATE work_items SET status = ?1, body = json_set(body, '$.status', ?1) "
                    "WHERE key = ?2",
                    (ItemStatus.DONE, item.key),
                )

    def count_pending(self, table_name: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM work_items WHERE table_name = ? AND status IN (?, ?)",
            (table_name, ItemStatus.PENDING, ItemStatus.APPLIED),
        ).fetchone()
        return int(row[0])

    def mark_applied(
        self, table_name: str, items: Iterable[AnyItem], index_uuid: str, fence: str | None = None
    ) -> None:
        with self._transaction():
            if fence is not None and not self._holds_lease(table_name, fence):
                raise LeaseLost.of(table_name)
            for item in items:
                self._db.execute(
                    "UPDATE work_items SET status = ?1, "
                    "body = json_set(body, '$.status', ?1, '$.applied_to', ?2) "
                    "WHERE key = ?3 AND status != ?4",
                    (ItemStatus.APPLIED, index_uuid, item.key, ItemStatus.DONE),
                )

    def bodies(self, table_name: str, heads: Sequence[ItemHead]) -> list[WorkItem]:
        found: dict[str, WorkItem] = {}
        for start in range(0, len(heads), _KEYS_PER_SELECT):
            keys = [h.key for h in heads[start : start + _KEYS_PER_SELECT]]
            rows = self._db.execute(
                f"SELECT key, body FROM work_items WHERE status IN (?, ?) "
                f"AND key IN ({', '.join('?' * len(keys))})",
                (ItemStatus.PENDING, ItemStatus.APPLIED, *keys),
            ).fetchall()
            found |= {key: WorkItem.from_json(body) for key, body in rows}
        return [found[h.key] for h in heads if h.key in found]

    def lease_holder(self, table_name: str) -> tuple[str, float] | None:
        row = self._db.execute(
            "SELECT owner, expires_at FROM leases WHERE table_name = ?", (table_name,)
        ).fetchone()
        return (str(row[0]), float(row[1])) if row is not None and row[1] >= time.time() else None

    def _holds_lease(self, table_name: str, owner: str) -> bool:
        holder = self.lease_holder(table_name)
        return holder is not None and holder[0] == owner

    def _transaction(self) -> _SqliteTransaction:
        return _SqliteTransaction(self._db)

    def close(self) -> None:
        self._db.close()


def _cursor(after: str) -> tuple[int, str]:
    """A page's cursor as its parts.

    The cursor is `<sequence number:020d>|<key>`, as DynamoDB's sort key ends.
    """
    sequence_number, key = after.split("|", 1)
    return int(sequence_number), key


class _LockedConnection:
    """A SQLite connection whose statements and transactions one thread at a time may run.

    A file SQLite cannot use is a `StateError` naming it (`state_error`).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._named():
            connection = sqlite3.connect(
                str(path),
                timeout=30,
                isolation_level=None,
                check_same_thread=False,
            )
        self.connection = connection
        self.lock = threading.RLock()

    def execute(self, sql: str, parameters: tuple[object, ...] = ()) -> sqlite3.Cursor:
        with self.lock, self._named():
            return self.connection.execute(sql, parameters)

    def executescript(self, sql: str) -> None:
        with self.lock, self._named():
            self.connection.executescript(sql)

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
            raise  # icecdc's own statements: not the file's fault
        except sqlite3.DatabaseError as exc:
            raise state_error(self.path, exc) from exc

    def close(self) -> None:
        with self.lock:
            self.connection.close()


class _SqliteTransaction:
    """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on error, holding the connection's lock throughout.

    The connection runs in autocommit mode, so the transaction is begun and ended here.
    """

    def __init__(self, db: _LockedConnection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.lock.acquire()
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        try:
            if not exc_type:
                self._db.execute("COMMIT")
            elif self._db.connection.in_transaction:
                # SQLite rolls back by itself on some errors (a full disk, an I/O error): a second
                # rollback would fail and hide the error that ended the transaction
                self._db.execute("ROLLBACK")
        finally:
            self._db.lock.release()


def _end_of(end: Checkpoint) -> Checkpoint:
    """`end` as `pass_end` reads it back: its table UUID, snapshot id and sequence number."""
    return Checkpoint(end.table_uuid, end.snapshot_id, end.sequence_number)

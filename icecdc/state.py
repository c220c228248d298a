"""Checkpoints and work items: what has been applied to the index and what is still to do.

`StateStore` is the contract; `SqliteStateStore` is the local implementation, DynamoDB the AWS one.
Every implementation passes the same contract suite (tests/test_state_contract.py).

Rules every store keeps:
- work items are written put-if-absent by their deterministic key, so planning twice is a no-op;
- the export base of a table is claimed put-if-absent, so racing planners export one snapshot;
- `complete` advances the checkpoint before it marks items done: a crash between the two leaves
  items the new checkpoint has superseded (see `superseded_by`), which the processor retires unread;
- `complete` with a `fence` (the lease owner) advances nothing unless that owner still holds the
  table's lease, so a run that lost its lease can never move the checkpoint of the run that took it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Self

from icecdc.config import StateConfig
from icecdc.errors import ConfigError, LeaseLost

log = logging.getLogger(__name__)

EXPORT = "export"
CHANGE = "change"
PENDING = "pending"
DONE = "done"


@dataclass(frozen=True)
class Checkpoint:
    """The last snapshot of a table whose changes are all in the index, and the shape they have there."""

    table_uuid: str
    snapshot_id: int
    sequence_number: int
    schema_id: int = -1  # the schema the documents were written in; -1: not recorded
    identifier_columns: tuple[str, ...] = ()  # what their ids were made of
    index_uuid: str = ""  # the OpenSearch index they are in (its settings' index.uuid); "": not recorded

    @property
    def token(self) -> str:
        """Names this checkpoint in the keys of the resync that replaces it: every resync ends on a
        checkpoint that differs in one of these, so each gets its own keys."""
        parts: list[object] = [self.table_uuid, self.snapshot_id, self.schema_id, list(self.identifier_columns)]
        if self.index_uuid:  # absent from checkpoints written before it was recorded: their tokens stay
            parts.append(self.index_uuid)
        return _sha256(json.dumps(parts))[:16]

    def supersedes(self, item: WorkItem) -> bool:
        """True when the item's changes are in the index as of this checkpoint (it was applied by a
        run that crashed before marking it done, or replaced by a resync): retire it unread."""
        if item.resync:
            # A resync's export may be of the checkpoint's own snapshot (a schema change); it is
            # done once the checkpoint it replaces is no longer the current one.
            return item.replacing != self.token
        return item.table_uuid == self.table_uuid and item.sequence_number <= self.sequence_number


# How an export rebuilds an index that already holds documents (WorkItem.resync).
REWRITE = "rewrite"  # write every row (equal versions overwrite), then delete documents older than the export
RESET = "reset"  # empty the index first (versions would go backwards: a rollback, a recreated table, new ids)


@dataclass(frozen=True)
class WorkItem:
    """A group of data files of one snapshot to read and apply.

    An export item lists one file of the export snapshot, read as inserts. A change item lists
    the data files a snapshot added (inserts) and removed (deletes), and the delete files it added
    (merge-on-read: the rows they newly delete are deletes); a snapshot that changes no rows (a
    compaction) still gets one empty item so the checkpoint can move past it.
    """

    table: str
    table_uuid: str
    kind: str  # EXPORT or CHANGE
    snapshot_id: int
    sequence_number: int
    group: int  # this item's position among its snapshot's items, from 0
    groups: int  # how many items the snapshot has; a snapshot is applied only when all are present
    added_files: tuple[str, ...] = ()
    deleted_files: tuple[str, ...] = ()
    delete_files: tuple[str, ...] = ()  # position-delete, deletion-vector and equality-delete files added
    resync: str = ""  # export items only: "" for the first export, else REWRITE or RESET
    replacing: str = ""  # a resync's export items: the token of the checkpoint it replaces
    status: str = PENDING
    created_at: float = field(default_factory=time.time)

    @property
    def key(self) -> str:
        if self.kind == EXPORT:
            # one file per export item; an empty table's export is one item with none
            file_hash = _sha256("".join(self.added_files))
            if self.resync:
                return f"{self.table}|resync|{self.replacing}|{self.snapshot_id}|{file_hash}"
            return f"{self.table}|export|{self.snapshot_id}|{file_hash}"
        paths = sorted(self.added_files + self.deleted_files + self.delete_files)
        return f"{self.table}|{self.snapshot_id}|{_sha256(chr(10).join(paths))}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkItem:
        raw = json.loads(text)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class StateStore(ABC):
    """Checkpoints, export claims and work items of every configured table."""

    @abstractmethod
    def get_checkpoint(self, table: str) -> Checkpoint | None: ...

    @abstractmethod
    def claim_export(self, table: str, base: Checkpoint, replacing: str = "") -> Checkpoint:
        """Record `base` as the export snapshot of the table's UUID that replaces the checkpoint
        `replacing` names (see `Checkpoint.token`; "": the first export) unless one is recorded;
        return the recorded one."""

    @abstractmethod
    def put_item(self, item: WorkItem) -> bool:
        """Write the item unless its key exists; True when this call wrote it."""

    @abstractmethod
    def pending_items(self, table: str) -> list[WorkItem]:
        """The table's pending items, oldest snapshot first."""

    @abstractmethod
    def complete(
        self,
        table: str,
        checkpoint: Checkpoint | None,
        items: Iterable[WorkItem],
        replace: bool = False,
        fence: str | None = None,
    ) -> None:
        """Advance the checkpoint (never backwards, unless `replace`: a resync), then mark the items done.

        `fence`: the lease owner this run holds the table's lease as; when it no longer holds it,
        raise `LeaseLost` and advance nothing."""

    @abstractmethod
    def acquire_lease(self, table: str, owner: str, seconds: float) -> bool:
        """Hold the table's processing lease for `seconds` (or renew it); False while another owner holds it."""

    @abstractmethod
    def release_lease(self, table: str, owner: str) -> None: ...

    def close(self) -> None:
        """Release connections."""


class SqliteStateStore(StateStore):
    """The local store: one SQLite file, safe for several processes (SQLite's own locking)."""

    def __init__(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # One connection, shared by a sync and its lease renewer thread: every use holds its lock.
        self._db = _LockedConnection(sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False))
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.connection.executescript(
            """
            CREATE TABLE IF NOT EXISTS checkpoints (
                table_name TEXT PRIMARY KEY, table_uuid TEXT NOT NULL,
                snapshot_id INTEGER NOT NULL, sequence_number INTEGER NOT NULL,
                schema_id INTEGER NOT NULL, identifier_columns TEXT NOT NULL, updated_at REAL NOT NULL,
                index_uuid TEXT NOT NULL DEFAULT '');
            CREATE TABLE IF NOT EXISTS export_claims (
                table_name TEXT NOT NULL, table_uuid TEXT NOT NULL, replacing TEXT NOT NULL,
                snapshot_id INTEGER NOT NULL, sequence_number INTEGER NOT NULL,
                PRIMARY KEY (table_name, table_uuid, replacing));
            CREATE TABLE IF NOT EXISTS leases (table_name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS work_items (
                key TEXT PRIMARY KEY, table_name TEXT NOT NULL, status TEXT NOT NULL,
                sequence_number INTEGER NOT NULL, body TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS work_items_pending ON work_items (table_name, status, sequence_number);
            """
        )
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(checkpoints)").fetchall()}
        if "index_uuid" not in columns:  # a state file written before the index's identity was recorded
            self._db.execute("ALTER TABLE checkpoints ADD COLUMN index_uuid TEXT NOT NULL DEFAULT ''")

    def get_checkpoint(self, table: str) -> Checkpoint | None:
        row = self._db.execute(
            "SELECT table_uuid, snapshot_id, sequence_number, schema_id, identifier_columns, index_uuid "
            "FROM checkpoints WHERE table_name = ?",
            (table,),
        ).fetchone()
        return Checkpoint(*row[:4], tuple(json.loads(row[4])), row[5]) if row else None

    def claim_export(self, table: str, base: Checkpoint, replacing: str = "") -> Checkpoint:
        self._db.execute(
            "INSERT OR IGNORE INTO export_claims VALUES (?, ?, ?, ?, ?)",
            (table, base.table_uuid, replacing, base.snapshot_id, base.sequence_number),
        )
        row = self._db.execute(
            "SELECT table_uuid, snapshot_id, sequence_number FROM export_claims WHERE table_name = ? AND table_uuid = ? AND replacing = ?",
            (table, base.table_uuid, replacing),
        ).fetchone()
        return Checkpoint(*row)

    def acquire_lease(self, table: str, owner: str, seconds: float) -> bool:
        now = time.time()
        with self._transaction():
            cursor = self._db.execute(
                """INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT (table_name) DO UPDATE
                   SET owner = excluded.owner, expires_at = excluded.expires_at
                   WHERE leases.owner = excluded.owner OR leases.expires_at < ?""",
                (table, owner, now + seconds, now),
            )
            return cursor.rowcount == 1

    def release_lease(self, table: str, owner: str) -> None:
        self._db.execute("DELETE FROM leases WHERE table_name = ? AND owner = ?", (table, owner))

    def put_item(self, item: WorkItem) -> bool:
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO work_items VALUES (?, ?, ?, ?, ?)",
            (item.key, item.table, item.status, item.sequence_number, item.to_json()),
        )
        return cursor.rowcount == 1

    def pending_items(self, table: str) -> list[WorkItem]:
        rows = self._db.execute(
            "SELECT body FROM work_items WHERE table_name = ? AND status = ? ORDER BY sequence_number, key",
            (table, PENDING),
        ).fetchall()
        return [WorkItem.from_json(body) for (body,) in rows]

    def complete(
        self,
        table: str,
        checkpoint: Checkpoint | None,
        items: Iterable[WorkItem],
        replace: bool = False,
        fence: str | None = None,
    ) -> None:
        with self._transaction():
            if checkpoint is not None:
                if fence is not None and not self._holds_lease(table, fence):
                    raise LeaseLost.of(table)
                self._db.execute(
                    """INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (table_name) DO UPDATE SET
                         table_uuid = excluded.table_uuid, snapshot_id = excluded.snapshot_id,
                         sequence_number = excluded.sequence_number, schema_id = excluded.schema_id,
                         identifier_columns = excluded.identifier_columns, updated_at = excluded.updated_at,
                         index_uuid = excluded.index_uuid
                       WHERE excluded.sequence_number > checkpoints.sequence_number
                          OR excluded.table_uuid != checkpoints.table_uuid OR ?""",
                    (
                        table,
                        checkpoint.table_uuid,
                        checkpoint.snapshot_id,
                        checkpoint.sequence_number,
                        checkpoint.schema_id,
                        json.dumps(list(checkpoint.identifier_columns)),
                        time.time(),
                        checkpoint.index_uuid,
                        replace,
                    ),
                )
            for item in items:
                done = WorkItem(**{**asdict(item), "status": DONE})
                self._db.execute("UPDATE work_items SET status = ?, body = ? WHERE key = ?", (DONE, done.to_json(), item.key))

    def _holds_lease(self, table: str, owner: str) -> bool:
        row = self._db.execute("SELECT owner, expires_at FROM leases WHERE table_name = ?", (table,)).fetchone()
        return row is not None and row[0] == owner and row[1] >= time.time()

    def _transaction(self) -> _SqliteTransaction:
        return _SqliteTransaction(self._db)

    def close(self) -> None:
        self._db.close()


class _LockedConnection:
    """A SQLite connection whose statements, and transactions, one thread at a time may run."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.lock = threading.RLock()

    def execute(self, sql: str, parameters: tuple = ()) -> sqlite3.Cursor:
        with self.lock:
            return self.connection.execute(sql, parameters)

    def close(self) -> None:
        with self.lock:
            self.connection.close()


class _SqliteTransaction:
    """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on error (the connection runs in autocommit mode),
    holding the connection's lock throughout."""

    def __init__(self, db: _LockedConnection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.lock.acquire()
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        try:
            self._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self._db.lock.release()


def open_state_store(config: StateConfig) -> StateStore:
    """The store the configuration names."""
    if config.type == "sqlite":
        assert config.path is not None
        return SqliteStateStore(config.path)
    if config.type == "dynamodb":
        from icecdc.state_dynamodb import DynamoDbStateStore  # boto3 is an optional dependency

        return DynamoDbStateStore(table_name=config.table, region=config.region, endpoint_url=config.endpoint_url)
    raise ConfigError(f"state.type {config.type!r} is not supported")


class Lease:
    """Hold a table's processing lease for a `with` block: wait for it up to its own length (a
    crashed holder's lease runs out by then), renew it in the background, release it at the end.

    `held` is False when another live run kept it; the block then should leave the table alone.
    `owner` fences the run's checkpoint writes (`StateStore.complete`); `lost` turns True when a
    renewal failed, and the run should stop: it can no longer advance anything.
    """

    def __init__(self, store: StateStore, table: str, seconds: float) -> None:
        self._store = store
        self._table = table
        self._seconds = seconds
        self.owner = uuid.uuid4().hex
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.held = False
        self.lost = False

    def __enter__(self) -> Self:
        deadline = time.monotonic() + self._seconds
        while not (held := self._store.acquire_lease(self._table, self.owner, self._seconds)) and time.monotonic() < deadline:
            time.sleep(min(1.0, self._seconds / 10))
        self.held = held
        if held:
            self._renewer = threading.Thread(target=self._renew, name=f"lease-{self._table}", daemon=True)
            self._renewer.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self._seconds / 3):
            if not self._store.acquire_lease(self._table, self.owner, self._seconds):
                log.warning("%s: lost the processing lease to another run; this run stops", self._table)
                self.lost = True
                return

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.held:
            self._store.release_lease(self._table, self.owner)

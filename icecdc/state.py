"""Checkpoints and work items: what has been applied to the index and what is still to do.

`StateStore` is the contract; `SqliteStateStore` is the local implementation, DynamoDB the AWS one.
Every implementation passes the same contract suite (tests/test_state_contract.py).

Rules every store keeps:
- work items are written put-if-absent by their deterministic key, so planning twice is a no-op;
- the export base of a table is claimed put-if-absent, so racing planners export one snapshot;
- `complete` advances the checkpoint before it marks items done: a crash between the two leaves
  items whose sequence number is not above the checkpoint, which the processor retires unread.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from icecdc.config import StateConfig
from icecdc.errors import ConfigError

EXPORT = "export"
CHANGE = "change"
PENDING = "pending"
DONE = "done"


@dataclass(frozen=True)
class Checkpoint:
    """The last snapshot of a table whose changes are all in the index."""

    table_uuid: str
    snapshot_id: int
    sequence_number: int


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
    status: str = PENDING
    created_at: float = field(default_factory=time.time)

    @property
    def key(self) -> str:
        if self.kind == EXPORT:
            # one file per export item; an empty table's export is one item with none
            return f"{self.table}|export|{self.snapshot_id}|{_sha256(''.join(self.added_files))}"
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
    def claim_export(self, table: str, base: Checkpoint) -> Checkpoint:
        """Record `base` as the table's export snapshot unless one is recorded for its UUID; return the recorded one."""

    @abstractmethod
    def put_item(self, item: WorkItem) -> bool:
        """Write the item unless its key exists; True when this call wrote it."""

    @abstractmethod
    def pending_items(self, table: str) -> list[WorkItem]:
        """The table's pending items, oldest snapshot first."""

    @abstractmethod
    def complete(self, table: str, checkpoint: Checkpoint | None, items: Iterable[WorkItem]) -> None:
        """Advance the checkpoint (never backwards), then mark the items done."""

    def close(self) -> None:  # noqa: B027 - optional for stores without a connection
        """Release connections."""


class SqliteStateStore(StateStore):
    """The local store: one SQLite file, safe for several processes (SQLite's own locking)."""

    def __init__(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # check_same_thread=False: a store may be opened on one thread and used on another, never by two at once.
        self._db = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(
            """
            CREATE TABLE IF NOT EXISTS checkpoints (
                table_name TEXT PRIMARY KEY, table_uuid TEXT NOT NULL,
                snapshot_id INTEGER NOT NULL, sequence_number INTEGER NOT NULL, updated_at REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS export_claims (
                table_name TEXT NOT NULL, table_uuid TEXT NOT NULL,
                snapshot_id INTEGER NOT NULL, sequence_number INTEGER NOT NULL,
                PRIMARY KEY (table_name, table_uuid));
            CREATE TABLE IF NOT EXISTS work_items (
                key TEXT PRIMARY KEY, table_name TEXT NOT NULL, status TEXT NOT NULL,
                sequence_number INTEGER NOT NULL, body TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS work_items_pending ON work_items (table_name, status, sequence_number);
            """
        )

    def get_checkpoint(self, table: str) -> Checkpoint | None:
        row = self._db.execute(
            "SELECT table_uuid, snapshot_id, sequence_number FROM checkpoints WHERE table_name = ?", (table,)
        ).fetchone()
        return Checkpoint(*row) if row else None

    def claim_export(self, table: str, base: Checkpoint) -> Checkpoint:
        self._db.execute(
            "INSERT OR IGNORE INTO export_claims VALUES (?, ?, ?, ?)",
            (table, base.table_uuid, base.snapshot_id, base.sequence_number),
        )
        row = self._db.execute(
            "SELECT table_uuid, snapshot_id, sequence_number FROM export_claims WHERE table_name = ? AND table_uuid = ?",
            (table, base.table_uuid),
        ).fetchone()
        return Checkpoint(*row)

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
        )
        return [WorkItem.from_json(body) for (body,) in rows]

    def complete(self, table: str, checkpoint: Checkpoint | None, items: Iterable[WorkItem]) -> None:
        with self._transaction():
            if checkpoint is not None:
                self._db.execute(
                    """INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)
                       ON CONFLICT (table_name) DO UPDATE SET
                         table_uuid = excluded.table_uuid, snapshot_id = excluded.snapshot_id,
                         sequence_number = excluded.sequence_number, updated_at = excluded.updated_at
                       WHERE excluded.sequence_number > checkpoints.sequence_number
                          OR excluded.table_uuid != checkpoints.table_uuid""",
                    (table, checkpoint.table_uuid, checkpoint.snapshot_id, checkpoint.sequence_number, time.time()),
                )
            for item in items:
                done = WorkItem(**{**asdict(item), "status": DONE})
                self._db.execute(
                    "UPDATE work_items SET status = ?, body = ? WHERE key = ?", (DONE, done.to_json(), item.key)
                )

    def _transaction(self) -> _SqliteTransaction:
        return _SqliteTransaction(self._db)

    def close(self) -> None:
        self._db.close()


class _SqliteTransaction:
    """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on error (the connection runs in autocommit mode)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")


def open_state_store(config: StateConfig) -> StateStore:
    """The store the configuration names."""
    if config.type == "sqlite":
        assert config.path is not None
        return SqliteStateStore(config.path)
    if config.type == "dynamodb":
        from icecdc.state_dynamodb import DynamoDbStateStore  # boto3 is an optional dependency

        return DynamoDbStateStore(table_name=config.table, region=config.region, endpoint_url=config.endpoint_url)
    raise ConfigError(f"state.type {config.type!r} is not supported")

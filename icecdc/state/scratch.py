"""A scratch copy of a configured store.

It serves a command that must plan without writing the state, such as `icecdc sync --dry-run`:
what it writes goes to the copy, never to the store.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from icecdc.config import SqliteStateConfig, StateConfig
from icecdc.errors import StateError
from icecdc.state.factory import open_state_store
from icecdc.state.sqlite import SqliteStateStore

WAL = "-wal"  # SQLite's write-ahead log beside the file: commits not yet in the file itself


def scratch_copy(config: StateConfig, keys: Iterable[str], directory: Path) -> SqliteStateStore:
    """A SQLite store in `directory` holding what the configured store holds.

    A SQLite store's file is copied; when there is none yet, the copy is an empty store. Of a
    DynamoDB store, each of `keys`' checkpoint, pass end and pending items is read and written in.
    """
    copy = directory / "state.db"
    if isinstance(config, SqliteStateConfig):
        source = Path(config.path)
        for suffix in ("", WAL):
            if Path(f"{source}{suffix}").is_file():
                shutil.copyfile(f"{source}{suffix}", f"{copy}{suffix}")
        try:
            return SqliteStateStore(copy)
        except StateError as exc:  # name the user's file, not the copy
            raise StateError(str(exc).replace(str(copy), str(source))) from None
    store = open_state_store(config)
    scratch = SqliteStateStore(copy)
    try:
        for key in keys:
            checkpoint = store.get_checkpoint(key)
            if checkpoint is not None:
                scratch.complete(key, checkpoint, [], replace=True)
            end = store.pass_end(key)
            if end is not None:
                scratch.begin_pass(key, end)
            for page in store.pages(key):  # no table's every item is held at once
                scratch.put_items(page)
    finally:
        store.close()
    return scratch

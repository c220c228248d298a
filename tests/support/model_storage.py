"""What the storage under icecdc does, as rules of the model-based test (`PipelineMachine` mixes them in).

The filesystem under a SQLite state turns read-only or full, then recovers (`state_filesystem_refuses`):
a sync fails saying the state cannot be written and to keep the file (never to move it aside), and
changes nothing of it; while someone else's index holds the index's name, a sync that can still read
the state (as a read-only one) may refuse that index first, as it must. A data file of the table is corrupt or missing (`damaged_data_file`): the sync
fails naming the table and the file and which of the two, and the index whose pass needs the file
advances nothing past it (one whose filter skips the file's partition or pages may); once the file
is back the next clean sync's check holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pyarrow.parquet as pq
from hypothesis import strategies as st
from hypothesis.stateful import rule
from pyiceberg.manifest import ManifestEntryStatus

from icecdc.errors import IndexNotOwned, StateUnwritable, UnreadableFile
from icecdc.model import EngineKind
from tests.support.filesystems import Refusal
from tests.support.model import TABLE, Caps, Poison, StoreKind, WriteMode, Writer
from tests.support.model_steps import STATS, note, step

if TYPE_CHECKING:
    from tests.support.model_machine import PipelineMachine

# How a data file is damaged: its pages overwritten (the footer kept), or deleted.
DAMAGES = ("corrupt", "missing")
MISSING = "is missing, though the table's current snapshot lists it"
ENGINES = [EngineKind.IN_PROCESS, EngineKind.IN_PROCESS, EngineKind.SPARK]


def added_file(machine: PipelineMachine) -> str:
    """The path of a data file the table's current snapshot added (the first, by name)."""
    table = machine.lake.load()
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return sorted(
        e.data_file.file_path
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
        if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snapshot.snapshot_id
    )[0]


class StorageRules:
    """The rules of what the storage does; see the module's docstring."""

    @rule(how=st.sampled_from(Refusal), engine=st.sampled_from(ENGINES))
    @step
    def state_filesystem_refuses(self: PipelineMachine, how: Refusal, engine: EngineKind) -> None:
        """The state's filesystem turns `how` for one sync, then recovers."""
        if self.store_kind != StoreKind.SQLITE or not self.state_filesystem.can(how):
            note(f"state_filesystem_refuses: skipped (the state in {self.store_kind}, or no {how} filesystem here)")
            return
        state = self.state_path
        before = state.read_bytes() if state.exists() else b""
        config = self.config(engine, Caps.NONE)
        self.state_filesystem.refuse(how)
        try:
            error, _ = self.run_sync(config)
        finally:
            self.state_filesystem.recover()
        unchanged = (state.read_bytes() if state.exists() else b"") == before
        assert unchanged, f"a {how} state filesystem: the state changed"
        if self.squatter is not None and not self.takeover and isinstance(error, IndexNotOwned):
            # the name is someone else's: a sync that can read the state refuses it first
            self.judge_refusal(error)
            return
        assert isinstance(error, StateUnwritable), f"a {how} state filesystem: the sync ended with {error!r}"
        said = str(error)
        assert str(state) in said and "move it aside" not in said, said
        note(f"a {how} state filesystem: {said[:160]}")
        STATS.steps[f"  state filesystem {how}"] += 1

    @rule(damage=st.sampled_from(DAMAGES), engine=st.sampled_from(ENGINES), count=st.integers(1, 3), seed=st.integers(0, 99))
    @step
    def damaged_data_file(self: PipelineMachine, damage: str, engine: EngineKind, count: int, seed: int) -> None:
        """A commit's data file is damaged before it is synced; it is repaired after the failed sync.

        A file none of whose rows an index's shape holds may be skipped unread, by its statistics."""
        note(f"damaged_data_file: {self.commit_rows(Writer.PY_APPEND, count, seed, Poison.NONE, False, WriteMode.COPY_ON_WRITE)}")
        uri = added_file(self)
        path = Path(urlsplit(uri).path)  # pyiceberg writes file:///…, Spark file:/…
        intact = path.read_bytes()
        shapes = self.shape.indexes().values()
        needed = any(shape.holds(row) for row in pq.read_table(path).to_pylist() for shape in shapes)
        if damage == "missing":
            path.unlink()
        else:
            path.write_bytes(intact[:4] + b"\x07" * min(196, len(intact) - 12) + intact[200:])
        config = self.config(engine, Caps.NONE)
        try:
            error, _ = self.run_sync(config)
        finally:
            path.write_bytes(intact)
        said = str(error)
        if error is None:  # a filter pushed down skipped the damaged pages, or the file, by their statistics
            assert damage == "corrupt" or not needed, f"a sync did not fail though {uri} is missing"
            note(f"damaged_data_file: the sync needed none of the damaged pages of {uri}")
            self.check(config, "after a sync that needed none of a damaged file's pages")
            return
        if f"table {TABLE!r}: data file {uri} " not in said:
            self.judge(error, [], None)  # failed before the pass that reads it: a block, a refusal
            return
        assert isinstance(error, UnreadableFile) if damage == "corrupt" else MISSING in said, said
        assert "\n" not in said, said
        self.assert_work_left(error)
        with self.stores(config) as indexes:  # an index that needs none of the file may follow
            current = self.lake.load().current_snapshot()
            assert current is not None
            checkpoints = [store.get_checkpoint(key) for _, key, store in indexes]
            assert any(c is None or c.snapshot_id != current.snapshot_id for c in checkpoints), f"advanced past {uri}"
        STATS.steps[f"  data file {damage}"] += 1  # repaired: the next clean sync's check holds

"""Opt-in guard against snapshot expiration: tags on the snapshots icecdc still has to read.

The option is `tables[].protect_checkpoint`; the tags are Iceberg tags.

Snapshot expiration, Spark's `expire_snapshots` or Glue's table optimizer, keeps every snapshot a
tag points at, and every file such a snapshot references. For each commit after its checkpoint,
icecdc reads the files the commit added, live in it, and the files it removed, live in its parent.
So keeping the checkpoint snapshot and every snapshot after it that is not applied yet keeps all it
needs. A tag on the checkpoint alone would not: expiration drops the snapshots between it and the
head of `main`, as ancestors of a branch are kept only by the branch's own retention settings.

The tags are named `icecdc-<index>-<snapshot id>`: the index names the icecdc table config, so two
deployments following one table keep their own. The planner tags what it plans, and the processor
drops the tags behind the new checkpoint; turning the option off drops them all on the next run.
Each change is one metadata commit, with no new snapshot. What it costs is the files those snapshots
keep, until icecdc has applied them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import ancestors_of

from icecdc.config import TableIndexConfig

log = logging.getLogger(__name__)

# Commits of the tags retried when a writer committed to the table meanwhile.
COMMIT_ATTEMPTS = 5


def tag_prefix(index: str) -> str:
    return f"icecdc-{index}-"


def protected_snapshots(table: Table, index: str) -> dict[str, int]:
    """The icecdc tags of `index` on the table: name → snapshot id."""
    prefix = tag_prefix(index)
    return {
        name: ref.snapshot_id
        for name, ref in table.metadata.refs.items()
        if name.startswith(prefix) and ref.snapshot_ref_type == SnapshotRefType.TAG
    }


def protect(table: Table, index: str, snapshot_ids: Iterable[int]) -> None:
    """Make the icecdc tags of `index` point at exactly `snapshot_ids`, in one metadata commit.

    Only the snapshots the table still has are tagged. There is no
    commit when the tags already point so.
    """
    wanted_ids = set(snapshot_ids)
    for attempt in range(COMMIT_ATTEMPTS):
        wanted = {
            f"{tag_prefix(index)}{s}": s for s in wanted_ids if table.snapshot_by_id(s) is not None
        }
        existing = protected_snapshots(table, index)
        stale = sorted(existing.keys() - wanted.keys())
        missing = sorted(wanted.keys() - existing.keys())
        if not stale and not missing:
            return
        try:
            with table.manage_snapshots() as tags:
                for name in stale:
                    tags.remove_tag(name)
                for name in missing:
                    tags.create_tag(wanted[name], name)
        except CommitFailedException:
            if attempt == COMMIT_ATTEMPTS - 1:
                raise
            table = table.refresh()  # a writer committed meanwhile: try again on its metadata
            continue
        log.info(
            "%s: tags of snapshots icecdc has still to read: +%d -%d",
            index,
            len(missing),
            len(stale),
        )
        return


def keep_unapplied(
    table: Table, config: TableIndexConfig, checkpoint_snapshot_id: int | None
) -> None:
    """Tag the checkpoint snapshot and every snapshot after it on the current lineage.

    That is when the table's config asks for it; else any tags an earlier run left are dropped.
    """
    if not config.protect_checkpoint:
        if protected_snapshots(table, config.index):
            protect(table, config.index, [])
        return
    keep: list[int] = []
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        keep.append(snapshot.snapshot_id)
        if snapshot.snapshot_id == checkpoint_snapshot_id:
            break
    # the checkpoint is off the lineage (a resync follows): keep it and the current snapshot only
    else:
        keep = keep[:1] + ([checkpoint_snapshot_id] if checkpoint_snapshot_id is not None else [])
    protect(table, config.index, keep)

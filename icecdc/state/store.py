"""The state-store contract: checkpoints and work items.

They say what has been applied to the index and what is still to do.

`StateStore` is the contract; `SqliteStateStore` is the local implementation, DynamoDB the AWS one.
Every implementation passes the same contract suite (tests/test_state_contract.py).

Rules every store keeps:
- work items are written put-if-absent by their deterministic key, so planning twice is a no-op;
  `put_items` writes many at once (DynamoDB: up to 50 items a transaction), each still put-if-absent
  on its own: an item that exists stops neither the others nor a later call;
- the export base of a table is claimed put-if-absent, so racing planners export one snapshot;
- every pass records the end of its batch before it writes (the furthest is kept), so that a
  retry knows a dead pass may have written past the checkpoint (see `begin_pass`);
- `complete` advances the checkpoint before it marks items done: a crash between the two leaves
  items the new checkpoint has superseded (see `Checkpoint.supersedes`), which the processor
  retires unread;
- a table's pending items are read as heads (`pending_heads`: no files), a page at a time; a
  pass fetches the files of the items it takes (`bodies`). `complete` and `mark_applied` act by
  key, so take heads as they take items;
- `complete` and `mark_applied` with a `fence` (the lease owner) record nothing unless that owner
  still holds the table's lease, so a run that lost its lease can never move the state of the run
  that took it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from icecdc.model import AnyItem, Checkpoint, ItemHead, ItemStatus, WorkItem

# Pending items a page holds at most (a DynamoDB page holds at most 1 MB of them, too).
PENDING_PAGE_SIZE = 1000


@dataclass(frozen=True)
class PendingPage:
    """A page of a table's pending items, oldest first, and where the next one starts."""

    items: tuple[WorkItem, ...]
    # the cursor of the next page (`StateStore.pending_page`); None: this is the last
    after: str | None


@dataclass(frozen=True)
class Completion:
    """What `StateStore.complete` is asked to record."""

    checkpoint: Checkpoint | None
    items: tuple[AnyItem, ...]  # marked done by key: a head is enough
    replace: bool
    fence: str | None


class StateStore(ABC):
    """Checkpoints, export claims and work items of every configured table."""

    @abstractmethod
    def get_checkpoint(self, table_name: str) -> Checkpoint | None: ...

    @abstractmethod
    def claim_export(self, table_name: str, base: Checkpoint, replacing: str = "") -> Checkpoint:
        """Record `base` as the export snapshot unless one is recorded; return the recorded one.

        The claim is of the table's UUID and of the checkpoint the export replaces, which
        `replacing` names as `Checkpoint.token` does. An empty `replacing` means the first export.
        """

    @abstractmethod
    def begin_pass(self, table_name: str, end: Checkpoint) -> Checkpoint | None:
        """Record that a pass may write the table's changes through `end`.

        Only the furthest end of the table's UUID is kept. The answer is the end recorded before,
        or None when none of this UUID was.
        """

    @abstractmethod
    def unbegin_pass(self, table_name: str, end: Checkpoint, before: Checkpoint | None) -> None:
        """Put back the end `before` a pass recorded `end`, for a pass that wrote nothing.

        None removes the record. Nothing changes unless the recorded end is `end` still.
        """

    @abstractmethod
    def pass_end(self, table_name: str) -> Checkpoint | None:
        """The furthest end a pass recorded with `begin_pass`, or None when none was.

        A resync's `complete` lowers it to the checkpoint, as its new generation or its rewrite
        holds nothing past it.
        """

    def put_item(self, item: WorkItem, replace_done: bool = False) -> bool:
        """Write the item unless its key exists; True when this call wrote it (see `put_items`)."""
        return self.put_items([item], replace_done) == 1

    @abstractmethod
    def put_items(self, items: Iterable[WorkItem], replace_done: bool = False) -> int:
        """Write each item unless its key exists; how many this call wrote.

        Batched (a store writes many per request), each item still put-if-absent on its own: one
        that exists is skipped, the others are written. A call that fails part way leaves some
        written and others not, as that many `put_item` calls would.

        `replace_done`: a DONE item of the key does not stop it; it is pending again. The planner
        asks so of the changes after its checkpoint: a DONE one is of a lineage since left (its
        snapshot rolled back, then current again) or of a pass that finished since the checkpoint
        was read, and the processor retires it unread when the checkpoint has it (`batching`)."""

    def pending_items(self, table_name: str) -> list[WorkItem]:
        """The table's items not done yet, oldest snapshot first: every page.

        Those are the items PENDING or APPLIED.
        """
        return [item for page in self.pages(table_name) for item in page]

    def pending_heads(self, table_name: str) -> list[ItemHead]:
        """The heads of the table's items not done yet, in the order of `pending_items`.

        Read page by page: only one page's files are held at a time.
        """
        return [item.head for page in self.pages(table_name) for item in page]

    def pages(self, table_name: str) -> Iterator[tuple[WorkItem, ...]]:
        """The table's items not done yet, a page at a time, in the order of `pending_items`."""
        after: str | None = None
        while True:
            page = self.pending_page(table_name, after)
            yield page.items
            if (after := page.after) is None:
                return

    @abstractmethod
    def bodies(self, table_name: str, heads: Sequence[ItemHead]) -> list[WorkItem]:
        """The items of these heads, with their files, in the order of `heads`.

        Read in batches (DynamoDB: 100 keys a request). An item done since its head was read is
        left out.
        """

    @abstractmethod
    def pending_page(
        self, table_name: str, after: str | None = None, limit: int = PENDING_PAGE_SIZE
    ) -> PendingPage:
        """At most `limit` of the table's items not done yet, from the cursor `after`.

        They come in the order of `pending_items`: by sequence number, then key. An `after` of None
        starts at the first. An item done meanwhile is skipped, and one read on an earlier page is
        never read again.
        """

    # noqa reason: optional, as only a store that keeps pending items has any to forget
    def forget_pending(self) -> None:  # noqa: B027
        """Read the pending items afresh on the next call (see `PendingOnce`)."""

    @abstractmethod
    def count_pending(self, table_name: str) -> int:
        """How many items of the table are not done (without reading them)."""

    @abstractmethod
    def mark_applied(
        self, table_name: str, items: Iterable[AnyItem], index_uuid: str, fence: str | None = None
    ) -> None:
        """Record that the items' rows are in the index `index_uuid`, their snapshot not done.

        A capped pass of an export does this, so that the next pass does not read them again. An
        item completed meanwhile is skipped, never pending again; the others are marked in batches.

        `fence` works as for `complete`: raise `LeaseLost` and mark nothing unless its owner holds
        the lease.
        """

    def complete(
        self,
        table_name: str,
        checkpoint: Checkpoint | None,
        items: Iterable[AnyItem],
        replace: bool = False,
        fence: str | None = None,
    ) -> None:
        """Advance the checkpoint, then mark the items done.

        The checkpoint never moves backwards, unless `replace` says it is a resync's.

        `fence`: the lease owner this run holds the table's lease as; when it no longer holds it,
        raise `LeaseLost` and advance nothing."""
        self._complete(table_name, Completion(checkpoint, tuple(items), replace, fence))

    @abstractmethod
    def _complete(self, table_name: str, completion: Completion) -> None:
        """`complete`, as the store does it."""

    @abstractmethod
    def acquire_lease(self, table_name: str, owner: str, seconds: float) -> bool:
        """Hold the table's processing lease for `seconds`, or renew it.

        The answer is False while another owner holds it.
        """

    @abstractmethod
    def release_lease(self, table_name: str, owner: str) -> None: ...

    @abstractmethod
    def lease_holder(self, table_name: str) -> tuple[str, float] | None:
        """Who holds the table's lease and until when (`time.time()`), or None when it is free."""

    def lease_key(self, table_name: str) -> str:
        """The name the store keeps the table's lease under (a view's differs from the table's)."""
        return table_name

    def checkpointed_at(self, table_name: str) -> float | None:
        """When the checkpoint last moved (seconds since the epoch); None: never, or unknown."""
        return None

    # noqa reason: optional, as a store without connections has nothing to release
    def close(self) -> None:  # noqa: B027
        """Release connections."""


# A backlog listing at most this many files in all keeps its items' files from its read (a pass's
# default `batch.max_files`, ~1.7 MiB of S3 paths); a larger one has a pass fetch those it takes.
KEPT_BODY_FILES = 10_000


class PendingOnce(StateStore):
    """`store` as one run over a table sees it: pending heads, checkpoint and pass end read once.

    The heads of a table's pending items are read once, page by page (`pending_heads`: no page's
    files are kept), and then kept in step with the run's own writes until `forget_pending`, or a
    `put_items` that wrote or was given an item not kept: another planner put it. Completed items
    are dropped and marked ones become APPLIED. That is one read while the run plans nothing new,
    not one per question asked of the backlog, nor one per pass of a capped export. Items another
    planner writes meanwhile wait for the next read. A pass fetches the files of the items it
    takes (`bodies`, through `ItemBodies`); a backlog of at most `KEPT_BODY_FILES` files keeps
    them from its read instead, so that a small commit's pass asks nothing more of the store. An
    item's files never change (its key is their hash): a kept body is answered with the status and
    mark of its kept head.

    The checkpoint and the pass end are read once too, as planning, the index's claim, the
    batch's selection and the pass all ask for them. They are kept and dropped with the pending
    items, so are never older than the items they judge: a put that drops the items drops all
    three. They are read again after the run writes them itself in `complete` or `begin_pass`.
    The run holds the table's lease, so no other run moves them meanwhile, and its own writes stay
    fenced by the lease and conditional in the store. `begin_pass` reads the recorded end afresh
    in the store, as it always did: it is what tells a pass that another one began since.
    """

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._pending: dict[str, list[ItemHead]] = {}
        self._bodies: dict[str, dict[str, WorkItem]] = {}  # of a small backlog, by key
        self._checkpoints: dict[str, Checkpoint | None] = {}
        self._pass_ends: dict[str, Checkpoint | None] = {}

    def forget_pending(self) -> None:
        self._pending.clear()
        self._bodies.clear()
        self._checkpoints.clear()
        self._pass_ends.clear()
        self._store.forget_pending()

    def pending_heads(self, table_name: str) -> list[ItemHead]:
        if table_name not in self._pending:
            self._read(table_name)
        return list(self._pending[table_name])

    def _read(self, table_name: str) -> None:
        """Read the table's pending heads, page by page, and their bodies while they are few."""
        heads: list[ItemHead] = []
        bodies: dict[str, WorkItem] | None = {}
        files = 0
        for page in self._store.pages(table_name):
            heads += (i.head for i in page)
            files += sum(i.file_count for i in page)
            if bodies is not None and files <= KEPT_BODY_FILES:
                bodies.update((i.key, i) for i in page)
            else:
                bodies = None
        self._pending[table_name] = heads
        if bodies is not None:
            self._bodies[table_name] = bodies

    def bodies(self, table_name: str, heads: Sequence[ItemHead]) -> list[WorkItem]:
        kept, pending = self._bodies.get(table_name, {}), self._pending.get(table_name, [])
        current = {h.key: h for h in pending} if kept else {}
        if not all(h.key in kept and h.key in current for h in heads):
            return self._store.bodies(table_name, heads)
        return [
            replace(kept[h.key], status=current[h.key].status, applied_to=current[h.key].applied_to)
            for h in heads
        ]

    def pending_page(
        self, table_name: str, after: str | None = None, limit: int = PENDING_PAGE_SIZE
    ) -> PendingPage:
        return self._store.pending_page(table_name, after, limit)

    def count_pending(self, table_name: str) -> int:
        return (
            len(self._pending[table_name])
            if table_name in self._pending
            else self._store.count_pending(table_name)
        )

    def put_items(self, items: Iterable[WorkItem], replace_done: bool = False) -> int:
        items = list(items)
        written = self._store.put_items(items, replace_done)
        if written or not self._holds(items):
            # Another planner put what is not kept here. What is read of the pending items afresh
            # is compared with a checkpoint as fresh.
            self.forget_pending()
        return written

    def _holds(self, items: list[WorkItem]) -> bool:
        """Whether every one of `items` is among the pending items kept."""
        keys = {i.key for table in {i.table for i in items} for i in self._pending.get(table, ())}
        return all(i.key in keys for i in items)

    def mark_applied(
        self, table_name: str, items: Iterable[AnyItem], index_uuid: str, fence: str | None = None
    ) -> None:
        items = list(items)
        self._store.mark_applied(table_name, items, index_uuid, fence)
        if table_name in self._pending:
            keys = {i.key for i in items}
            self._pending[table_name] = [
                replace(i, status=ItemStatus.APPLIED, applied_to=index_uuid) if i.key in keys else i
                for i in self._pending[table_name]
            ]

    def _complete(self, table_name: str, completion: Completion) -> None:
        # what the store keeps (never backwards, a resync's pass end): read again
        if completion.checkpoint is not None:
            self._checkpoints.pop(table_name, None)
            self._pass_ends.pop(table_name, None)
        self._store.complete(
            table_name,
            completion.checkpoint,
            completion.items,
            completion.replace,
            completion.fence,
        )
        if table_name in self._pending:
            keys = {i.key for i in completion.items}
            self._pending[table_name] = [i for i in self._pending[table_name] if i.key not in keys]

    def get_checkpoint(self, table_name: str) -> Checkpoint | None:
        if table_name not in self._checkpoints:
            self._checkpoints[table_name] = self._store.get_checkpoint(table_name)
        return self._checkpoints[table_name]

    def checkpointed_at(self, table_name: str) -> float | None:
        return self._store.checkpointed_at(table_name)

    def claim_export(self, table_name: str, base: Checkpoint, replacing: str = "") -> Checkpoint:
        return self._store.claim_export(table_name, base, replacing)

    def begin_pass(self, table_name: str, end: Checkpoint) -> Checkpoint | None:
        self._pass_ends.pop(table_name, None)
        return self._store.begin_pass(table_name, end)

    def unbegin_pass(self, table_name: str, end: Checkpoint, before: Checkpoint | None) -> None:
        self._pass_ends.pop(table_name, None)
        self._store.unbegin_pass(table_name, end, before)

    def pass_end(self, table_name: str) -> Checkpoint | None:
        if table_name not in self._pass_ends:
            self._pass_ends[table_name] = self._store.pass_end(table_name)
        return self._pass_ends[table_name]

    def acquire_lease(self, table_name: str, owner: str, seconds: float) -> bool:
        return self._store.acquire_lease(table_name, owner, seconds)

    def release_lease(self, table_name: str, owner: str) -> None:
        self._store.release_lease(table_name, owner)

    def lease_holder(self, table_name: str) -> tuple[str, float] | None:
        return self._store.lease_holder(table_name)

    def lease_key(self, table_name: str) -> str:
        return self._store.lease_key(table_name)

    def close(self) -> None:
        self._store.close()

"""One index's state among several of one table.

A `StateStore` view keeps the checkpoint, work items, export claim and lease of the table under the
index's own key. Each index of a table, as `tables[].indexes` lists them, so follows the table on
its own, with its own export, generations and checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from icecdc.config import TableConfig, TableIndexConfig
from icecdc.model import AnyItem, Checkpoint, ItemHead, WorkItem
from icecdc.state.store import PENDING_PAGE_SIZE, Completion, PendingPage, StateStore


def index_stores(
    config: TableConfig, store: StateStore
) -> list[tuple[TableIndexConfig, str, StateStore]]:
    """Each index the table writes, as `TableConfig.each_index` lists them.

    For each: its configuration, its state's key, and `store` as that index
    sees it. In the single-index form that is the store itself.
    """
    return [
        (t.config, t.key, store if t.key == config.name else ScopedStore(store, config.name, t.key))
        for t in config.each_index()
    ]


class ScopedStore(StateStore):
    """`store` as one index of the table `table_name` sees it.

    Calls about `table_name` go to the key `key`. The items it answers name `table_name`, as the
    items the planner writes do, though the store holds them under `key`.
    """

    def __init__(self, store: StateStore, table_name: str, key: str) -> None:
        self._store, self._table_name, self._key = store, table_name, key

    def _scoped(self, table_name: str) -> str:
        return self._key if table_name == self._table_name else table_name

    def _in(self, item: AnyItem) -> AnyItem:
        return self._in_head(item) if isinstance(item, ItemHead) else self._in_item(item)

    def _in_item(self, item: WorkItem) -> WorkItem:
        return replace(item, table=self._key) if item.table == self._table_name else item

    def _in_head(self, head: ItemHead) -> ItemHead:
        return head.in_table(self._key) if head.table == self._table_name else head

    def _out(self, item: WorkItem) -> WorkItem:
        return replace(item, table=self._table_name) if item.table == self._key else item

    def get_checkpoint(self, table_name: str) -> Checkpoint | None:
        return self._store.get_checkpoint(self._scoped(table_name))

    def checkpointed_at(self, table_name: str) -> float | None:
        return self._store.checkpointed_at(self._scoped(table_name))

    def claim_export(self, table_name: str, base: Checkpoint, replacing: str = "") -> Checkpoint:
        return self._store.claim_export(self._scoped(table_name), base, replacing)

    def begin_pass(self, table_name: str, end: Checkpoint) -> Checkpoint | None:
        return self._store.begin_pass(self._scoped(table_name), end)

    def unbegin_pass(self, table_name: str, end: Checkpoint, before: Checkpoint | None) -> None:
        self._store.unbegin_pass(self._scoped(table_name), end, before)

    def pass_end(self, table_name: str) -> Checkpoint | None:
        return self._store.pass_end(self._scoped(table_name))

    def put_items(self, items: Iterable[WorkItem], replace_done: bool = False) -> int:
        return self._store.put_items([self._in_item(i) for i in items], replace_done)

    def bodies(self, table_name: str, heads: Sequence[ItemHead]) -> list[WorkItem]:
        inner = [self._in_head(h) for h in heads]
        return [self._out(i) for i in self._store.bodies(self._scoped(table_name), inner)]

    def pending_page(
        self, table_name: str, after: str | None = None, limit: int = PENDING_PAGE_SIZE
    ) -> PendingPage:
        page = self._store.pending_page(self._scoped(table_name), after, limit)
        return PendingPage(tuple(self._out(i) for i in page.items), page.after)

    def forget_pending(self) -> None:
        self._store.forget_pending()

    def count_pending(self, table_name: str) -> int:
        return self._store.count_pending(self._scoped(table_name))

    def mark_applied(
        self, table_name: str, items: Iterable[AnyItem], index_uuid: str, fence: str | None = None
    ) -> None:
        self._store.mark_applied(
            self._scoped(table_name), [self._in(i) for i in items], index_uuid, fence
        )

    def _complete(self, table_name: str, completion: Completion) -> None:
        items = tuple(self._in(i) for i in completion.items)
        self._store.complete(
            self._scoped(table_name),
            completion.checkpoint,
            items,
            completion.replace,
            completion.fence,
        )

    def acquire_lease(self, table_name: str, owner: str, seconds: float) -> bool:
        return self._store.acquire_lease(self._scoped(table_name), owner, seconds)

    def release_lease(self, table_name: str, owner: str) -> None:
        self._store.release_lease(self._scoped(table_name), owner)

    def lease_holder(self, table_name: str) -> tuple[str, float] | None:
        return self._store.lease_holder(self._scoped(table_name))

    def lease_key(self, table_name: str) -> str:
        return self._store.lease_key(self._scoped(table_name))

"""The files of the items one pass takes, fetched from the store as the pass asks for them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from icecdc.errors import ProcessingError
from icecdc.model import ItemHead, WorkItem
from icecdc.state.store import StateStore

# Items fetched at once when one is asked for that is not held: it and the batch's next ones, as
# the caps ask for the export's items one by one, in order (a DynamoDB BatchGetItem's most).
FETCH_AHEAD = 100


class ItemBodies:
    """The bodies of a batch's items, each fetched once, in batches, only when asked for.

    A table's pending items are read as heads (`StateStore.pending_heads`); a pass fetches the
    files of only the items it reads: the caps' export items, as they weigh their bytes (`one`),
    and the items the pass reads or checks (`of`).
    """

    def __init__(
        self, store: StateStore, table_name: str, batch: Sequence[ItemHead], files_ahead: int
    ) -> None:
        self._store, self._table_name = store, table_name
        self._batch, self._files_ahead = list(batch), files_ahead
        self._position = {h.key: n for n, h in enumerate(self._batch)}
        self._held: dict[str, WorkItem] = {}

    def one(self, head: ItemHead) -> WorkItem:
        """The body of `head`, fetched with the batch's next items not held yet.

        The next ones fetched list at most `files_ahead` files (a pass's `batch.max_files`): what
        the caps may take after it.
        """
        if head.key not in self._held:
            self._fetch([head, *self._ahead(head)])
        return self._held[head.key]

    def _ahead(self, head: ItemHead) -> list[ItemHead]:
        """The batch's items after `head` not held, while they list at most `files_ahead` files."""
        ahead: list[ItemHead] = []
        files = head.file_count
        for later in self._batch[self._position.get(head.key, len(self._batch)) + 1 :]:
            files += later.file_count
            if files > self._files_ahead or len(ahead) + 1 >= FETCH_AHEAD:
                break
            if later.key not in self._held:
                ahead.append(later)
        return ahead

    def of(self, heads: Iterable[ItemHead]) -> list[WorkItem]:
        """The bodies of `heads`, in their order; those not held are fetched in one call."""
        heads = list(heads)
        self._fetch([h for h in heads if h.key not in self._held])
        return [self._held[h.key] for h in heads]

    def _fetch(self, heads: list[ItemHead]) -> None:
        if not heads:
            return
        found = {i.key: i for i in self._store.bodies(self._table_name, heads)}
        missing = [h.key for h in heads if h.key not in found]
        if missing:  # done by another run since the heads were read: this pass must start over
            raise ProcessingError(
                f"table {self._table_name!r}: {len(missing)} work items were completed by "
                "another run while this pass read them; the next pass starts over"
            )
        self._held |= found

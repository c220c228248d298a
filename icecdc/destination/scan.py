"""Every document of an index, page by page: by scroll, or by `search_after` where none exists."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from opensearchpy import OpenSearch, helpers

from icecdc.destination.capabilities import ScanMethod

HITS_PER_PAGE = 1000


def every_hit(
    client: OpenSearch,
    index: str,
    body: Mapping[str, Any],
    method: ScanMethod,
    size: int = HITS_PER_PAGE,
) -> Iterator[dict[str, Any]]:
    """The hits of the search `body` (a query, and what else a search takes), every page of it.

    By scroll, or by `search_after` sorted by `_id`: no server-side context, so a destination
    without scroll or point in time (Serverless) can be read whole. Pages by `search_after` see the
    index as it is when each is asked; a scan runs under the table's lease, so no pass writes
    meanwhile.
    """
    if method == ScanMethod.SCROLL:
        yield from helpers.scan(client, index=index, query=dict(body), scroll="10m", size=size)
        return
    after: list[Any] | None = None
    while True:
        page = {**body, "size": size, "sort": [{"_id": "asc"}]}
        if after is not None:
            page["search_after"] = after
        hits = client.search(index=index, body=page)["hits"]["hits"]
        yield from hits
        if len(hits) < size:
            return
        after = hits[-1]["sort"]

"""Every document of an index, page by page: by scroll, or by `search_after` where none exists."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from opensearchpy import OpenSearch, helpers

from icecdc.destination.capabilities import ScanMethod, capabilities_of

HITS_PER_PAGE = 1000

log = logging.getLogger(__name__)


def make_visible(client: OpenSearch, index: str) -> None:
    """Make the writes to `index` visible to search.

    That is a refresh, or, where there is none (Serverless), a wait for as long as the destination
    takes to show them.
    """
    capabilities = capabilities_of(client)
    if capabilities.refresh:
        client.indices.refresh(index=index)
        return
    log.info(
        "waiting %.0f s for the last writes to %r to be visible to search (no refresh here)",
        capabilities.visibility_seconds,
        index,
    )
    time.sleep(capabilities.visibility_seconds)


def scan_index(client: OpenSearch, index: str, body: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The hits of the search `body`, every page, as the destination of `client` scans."""
    return every_hit(client, index, body, capabilities_of(client).scan)


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

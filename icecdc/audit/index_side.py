"""The index's side of an audit or a repair.

It reads counts by partition and documents by id or by a column's value. Each request is counted,
as the audit reports its cost.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from pyiceberg.types import (
    BooleanType,
    DateType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    UUIDType,
)

from icecdc.destination.capabilities import ScanMethod, capabilities_of
from icecdc.destination.client import IDS_PER_REQUEST, OpenSearch
from icecdc.destination.scan import make_visible
from icecdc.documents import encode_document
from icecdc.errors import OperationError

# Buckets per page of a composite aggregation, hits per scroll page.
BUCKETS_PER_REQUEST = 1000
HITS_PER_REQUEST = 1000
SCROLL_KEEP_ALIVE = "2m"
_WHOLE_NUMBERS = frozenset({"long", "integer", "short", "byte"})


@dataclass(frozen=True)
class Hit:
    """A document as the index holds it: its version and its canonical JSON."""

    version: int
    document: str


@dataclass(frozen=True)
class ColumnField:
    """The index field that holds a column's value exactly: aggregated by and queried by term."""

    column: str
    field: str  # e.g. `region.keyword` for a text field's keyword sub-field
    date: bool  # a date field, whose aggregation keys are epoch milliseconds
    # a keyword field keeps no longer strings: their documents count as without a value
    ignore_above: int | None = None

    def held(self, value: Any) -> Any:
        """A value as the field holds it: None for a string longer than it keeps."""
        too_long = (
            isinstance(value, str)
            and self.ignore_above is not None
            and len(value) > self.ignore_above
        )
        return None if too_long else value

    def value(self, key: Any) -> Any:
        """An aggregation key as documents hold the value (dates as ISO text)."""
        if self.date and isinstance(key, int | float):
            return dt.datetime.fromtimestamp(key / 1000, dt.UTC).date().isoformat()
        return key


class IndexSide:
    """What an audit or a repair reads of the index `index` (an alias, or an index)."""

    def __init__(self, client: OpenSearch, index: str) -> None:
        self.client = client
        self.index = index
        self.requests = 0
        self._properties: dict[str, Any] | None = None  # the mapping's fields, read once

    def _call(self, request: Callable[..., Any], **arguments: Any) -> Any:
        self.requests += 1
        return request(**arguments)

    def check_exists(self, table_name: str) -> None:
        # an alias, or an index of that name
        if not self._call(self.client.indices.exists, index=self.index):
            raise OperationError(
                f"index {self.index!r} of table {table_name!r} does not exist: "
                "sync (the table is exported again)"
            )

    def refresh(self) -> None:
        """Make every write searchable, so that counts and searches see what _mget sees.

        A refresh, or where there is none (Serverless), a wait as long as writes take to show.
        """
        self._call(make_visible, client=self.client, index=self.index)

    def column_field(self, column: str, source_type: IcebergType) -> ColumnField | None:
        """The field holding `column` exactly, by the index's mapping; None when there is none.

        There is none for a text field without a keyword sub-field, or a type icecdc does not count
        by.
        """
        if self._properties is None:
            mappings = self._call(self.client.indices.get_mapping, index=self.index)
            found: dict[str, Any] = next(iter(mappings.values()), {})
            self._properties = found.get("mappings", {}).get("properties", {})
        mapping: Any = {"properties": self._properties}
        for part in column.split("."):
            mapping = (
                (mapping.get("properties") or {}).get(part) if isinstance(mapping, dict) else None
            )
        if not isinstance(mapping, dict):
            return None
        kind = mapping.get("type", "object")
        if isinstance(source_type, StringType | UUIDType):
            if kind == "keyword":
                return ColumnField(column, column, False, mapping.get("ignore_above"))
            keyword = (mapping.get("fields") or {}).get("keyword") or {}
            if keyword.get("type") != "keyword":
                return None
            return ColumnField(column, f"{column}.keyword", False, keyword.get("ignore_above"))
        fits = (
            (isinstance(source_type, IntegerType | LongType) and kind in _WHOLE_NUMBERS)
            or (isinstance(source_type, BooleanType) and kind == "boolean")
            or (isinstance(source_type, DateType) and kind == "date")
        )
        return ColumnField(column, column, kind == "date") if fits else None

    def counts(self, fields: list[ColumnField]) -> tuple[dict[tuple[Any, ...], int], int]:
        """The documents per combination of the fields' values, and all documents.

        They are read by a composite aggregation, page by page, with nulls in their own bucket.
        Without fields, it is one count.
        """
        if not fields:
            total = int(self._call(self.client.count, index=self.index)["count"])
            return {(): total}, total
        sources = [
            {f"c{i}": {"terms": {"field": f.field, "missing_bucket": True}}}
            for i, f in enumerate(fields)
        ]
        counts: dict[tuple[Any, ...], int] = {}
        after: dict[str, Any] | None = None
        total = 0
        while True:
            composite: dict[str, Any] = {"size": BUCKETS_PER_REQUEST, "sources": sources}
            if after is not None:
                composite["after"] = after
            body = {
                "size": 0,
                "track_total_hits": True,
                "aggs": {"groups": {"composite": composite}},
            }
            answer = self._call(self.client.search, index=self.index, body=body)
            total = int(answer["hits"]["total"]["value"])
            groups = answer["aggregations"]["groups"]
            for bucket in groups["buckets"]:
                key = tuple(f.value(bucket["key"][f"c{i}"]) for i, f in enumerate(fields))
                counts[key] = counts.get(key, 0) + int(bucket["doc_count"])
            after = groups.get("after_key")
            if len(groups["buckets"]) < BUCKETS_PER_REQUEST or after is None:
                return counts, total

    def fetch(self, ids: Collection[str]) -> dict[str, Hit]:
        """The documents of these ids that the index holds (_mget: real time, no refresh needed)."""
        found: dict[str, Hit] = {}
        wanted = sorted(set(ids))
        for start in range(0, len(wanted), IDS_PER_REQUEST):
            answer = self._call(
                self.client.mget,
                index=self.index,
                body={"ids": wanted[start : start + IDS_PER_REQUEST]},
            )
            for doc in answer["docs"]:
                if doc.get("found"):
                    found[doc["_id"]] = self._hit(doc)
        return found

    def where(self, values: dict[ColumnField, Any]) -> dict[str, Hit]:
        """The documents whose fields hold these values (None: no value)."""
        return self.scan(partition_query(values))

    def scan(self, query: dict[str, Any]) -> dict[str, Hit]:
        """Every document `query` matches, by scroll.

        Call `refresh` first to see the latest writes.
        """
        body = {"query": query, "version": True, "sort": ["_doc"], "size": HITS_PER_REQUEST}
        return {hit["_id"]: self._hit(hit) for page in self._scroll(body) for hit in page}

    def ids(self, query: dict[str, Any]) -> set[str]:
        """The ids of every document `query` matches, by scroll without their sources.

        An audit's listing of a partition fetches nothing else. Call `refresh` first.
        """
        body = {"query": query, "_source": False, "sort": ["_doc"], "size": HITS_PER_REQUEST}
        return {hit["_id"] for page in self._scroll(body) for hit in page}

    def _scroll(self, body: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
        """The hits of a search, page by page, by scroll; the scroll cleared at the end.

        Where there is no scroll (Serverless), by `search_after` on `_id`.
        """
        if capabilities_of(self.client).scan == ScanMethod.SEARCH_AFTER:
            yield from self._pages_after(body)
            return
        answer = self._call(
            self.client.search, index=self.index, body=body, scroll=SCROLL_KEEP_ALIVE
        )
        scroll_id = answer.get("_scroll_id")
        try:
            while True:
                hits = answer["hits"]["hits"]
                yield hits
                if len(hits) < HITS_PER_REQUEST or scroll_id is None:
                    return
                answer = self._call(
                    self.client.scroll, body={"scroll_id": scroll_id, "scroll": SCROLL_KEEP_ALIVE}
                )
                scroll_id = answer.get("_scroll_id", scroll_id)
        finally:
            if scroll_id is not None:
                self._call(self.client.clear_scroll, body={"scroll_id": [scroll_id]}, ignore=(404,))

    def _hit(self, found: dict[str, Any]) -> Hit:
        """A document found, as a `Hit`.

        Its version is 0 where versions are the destination's count of writes (Serverless), not a
        change's sequence number.
        """
        versioned = capabilities_of(self.client).versions
        return Hit(int(found["_version"]) if versioned else 0, encode_document(found["_source"]))

    def _pages_after(self, body: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
        """The hits of a search, page by page, each page after the last `_id` of the one before."""
        page: dict[str, Any] = {**body, "sort": [{"_id": "asc"}]}
        while True:
            hits = self._call(self.client.search, index=self.index, body=page)["hits"]["hits"]
            yield hits
            if len(hits) < HITS_PER_REQUEST:
                return
            page = {**page, "search_after": hits[-1]["sort"]}


def partition_query(values: dict[ColumnField, Any]) -> dict[str, Any]:
    """The documents whose fields hold these values; all documents for no values.

    None stands for no value, as a composite aggregation's missing bucket counts them.
    """
    if not values:
        return {"match_all": {}}
    clauses: list[dict[str, Any]] = []
    for column_field, value in values.items():
        if value is None:
            clauses.append({"bool": {"must_not": {"exists": {"field": column_field.field}}}})
        else:
            clauses.append({"term": {column_field.field: value}})
    return {"bool": {"filter": clauses}}

"""Compare an index with its table: the invariant every sync must leave true.

This reads the whole table and the whole index on one machine: it is a check for tests, the demo
and occasional audits (`icecdc verify`), not part of the pipeline.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyiceberg.table import Table

from icecdc.destination.client import OpenSearch
from icecdc.destination.scan import make_visible, scan_index
from icecdc.documents import DocumentMapper, Shape, encode_document
from icecdc.lookup import TableRows

# How many differing ids a summary quotes.
QUOTED = 5


@dataclass
class IndexDiff:
    """What separates an index from its table; empty when they are equal."""

    missing: list[str] = field(default_factory=list)  # rows with no document
    unexpected: list[str] = field(default_factory=list)  # documents with no row
    # documents whose fields differ from their row
    different: list[str] = field(default_factory=list)
    # documents under another routing than their row's
    misrouted: list[str] = field(default_factory=list)
    copies: list[str] = field(default_factory=list)  # ids the index holds more than once
    # rows with no document and an open letter: by design
    dead_lettered: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.missing or self.unexpected or self.different or self.misrouted or self.copies
        )

    def summary(self) -> str:
        if not self:
            lettered = len(self.dead_lettered)
            return "index equals table" + (
                f" ({lettered} dead-lettered row{'s' if lettered != 1 else ''} with no "
                "document, by design: "
                f"e.g. {self.dead_lettered[:QUOTED]})"
                if lettered
                else ""
            )
        parts = [
            f"{len(ids)} {what} (e.g. {ids[:QUOTED]})"
            for what, ids in (
                ("missing", self.missing),
                ("unexpected", self.unexpected),
                ("different", self.different),
                ("misrouted", self.misrouted),
                ("held more than once", self.copies),
            )
            if ids
        ]
        return "index differs from table: " + "; ".join(parts)


def table_documents(
    table: Table, identifier_columns: tuple[str, ...], shape: Shape | None = None
) -> list[tuple[str | None, str]]:
    """Id and document text of every row of the current snapshot the index's `shape` holds.

    Documents have the shape's columns. The id is None without identifier columns, or
    for a row they give no id: a null one.
    """
    if table.current_snapshot() is None:
        return []
    shape = shape or Shape()
    rows = TableRows(table, "", identifier_columns, shape=shape)
    if rows.has_equality_deletes():  # pyiceberg's scan refuses them: read as a sync does
        return _documents_read_as_synced(rows, identifier_columns, shape)
    mapper = DocumentMapper(table.schema(), identifier_columns, shape)
    documents = []
    for batch in table.scan(row_filter=shape.row_filter).to_arrow_batch_reader():
        for row in batch.to_pylist():
            document = mapper.document(row)
            doc_id = _document_id(mapper, row, document) if identifier_columns else None
            documents.append((doc_id, encode_document(document)))
    return documents


def _documents_read_as_synced(
    rows: TableRows, identifier_columns: tuple[str, ...], shape: Shape
) -> list[tuple[str | None, str]]:
    """`table_documents` read by icecdc's own reader, which applies equality deletes.

    Each live file is read with its deletes. A row with no id, a null
    one, comes as its letter's document.
    """
    named = bool(identifier_columns)  # without them, ids come from the rows' places: left out
    read = [
        (doc_id if named else None, doc)
        for doc_id, doc in rows.documents(rows.data_entries(shape.row_filter))
    ]
    return read + [
        (letter.doc_id if named else None, letter.document or "") for letter in rows.unreadable
    ]


def index_documents(
    client: OpenSearch,
    index: str,
    routings: dict[str, str | None] | None = None,
    copies: list[str] | None = None,
) -> dict[str, str]:
    """id → document text of every document in the index; `routings`, when given, gets id → routing.

    An `_id` is unique on a shard only: a routed index can hold a key on two shards (a copy under
    an old routing value left behind), and an alias over two indexes one in each. `copies`, when
    given, gets each id found again (the one kept is the last found)."""
    if not client.indices.exists(index=index):
        return {}
    make_visible(client, index)
    documents = {}
    for hit in scan_index(client, index, {"query": {"match_all": {}}}):
        if copies is not None and hit["_id"] in documents:
            copies.append(hit["_id"])
        documents[hit["_id"]] = encode_document(hit["_source"])
        if routings is not None:
            routings[hit["_id"]] = hit.get("_routing")
    return documents


def diff_index(
    table: Table,
    identifier_columns: tuple[str, ...],
    client: OpenSearch,
    index: str,
    shape: Shape | None = None,
    pipeline: bool = False,
    letters: Iterable[tuple[str | None, str | None]] = (),
) -> IndexDiff:
    """How the index differs from the rows and columns of the table its `shape` holds, routed by it.

    `pipeline`: the index's writes go through an ingest pipeline, so its documents may hold fields
    the table has not (an embedding): only the fields of the table's columns are compared.
    `letters`: (id, document) of the table's open dead letters: a row with no document that one
    of them names (by id, or by its document for a row with no id) is dead-lettered by design."""
    shape = shape or Shape()
    expected = table_documents(table, identifier_columns, shape)
    routings: dict[str, str | None] = {}
    copies: list[str] = []
    actual = index_documents(client, index, routings, copies)
    if pipeline:
        columns = {f.name for f in shape.project(table.schema()).fields}
        actual = {
            i: encode_document({k: v for k, v in json.loads(doc).items() if k in columns})
            for i, doc in actual.items()
        }
    diff = IndexDiff(copies=sorted(set(copies)))
    if not identifier_columns:
        # Ids come from file positions; compare the documents as multisets.
        want, have = Counter(doc for _, doc in expected), Counter(actual.values())
        diff.missing = sorted(_short(d) for d in (want - have).elements())
        diff.unexpected = sorted(_short(d) for d in (have - want).elements())
        return diff
    wanted = {doc_id: doc for doc_id, doc in expected if doc_id is not None}
    lettered = list(letters)
    by_id = {doc_id for doc_id, _ in lettered if doc_id is not None}
    without_id = Counter(document for doc_id, document in lettered if doc_id is None)
    for missing in sorted(set(wanted) - set(actual)):
        (diff.dead_lettered if missing in by_id else diff.missing).append(missing)
    # rows with no id: never indexed
    for no_id in (doc for doc_id, doc in expected if doc_id is None):
        explained = without_id[no_id] > 0
        without_id[no_id] -= 1
        (diff.dead_lettered if explained else diff.missing).append(f"no id: {_short(no_id)}")
    diff.unexpected = sorted(set(actual) - set(wanted))
    diff.different = sorted(i for i in set(wanted) & set(actual) if wanted[i] != actual[i])
    if shape.routing is not None:
        routed = {i: shape.routing_of(json.loads(doc)) for i, doc in wanted.items()}
        diff.misrouted = sorted(i for i in set(wanted) & set(actual) if routings[i] != routed[i])
    return diff


def _document_id(
    mapper: DocumentMapper, row: dict[str, object], document: dict[str, object]
) -> str | None:
    """The row's `_id`; None when its identifier columns give none.

    They give none for a null one, which a sync dead-letters.
    """
    try:
        return mapper.document_id(mapper.key_fields(row, document))
    except ValueError:
        return None


def _short(document: str) -> str:
    return document if len(document) <= 80 else document[:77] + "..."

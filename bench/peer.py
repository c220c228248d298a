"""The peer: the job a Glue user would write instead of icecdc, with Iceberg's own changelog.

Iceberg's `create_changelog_view` procedure (compute_updates on the identifier columns, which also
drops carryover rows) gives every change between two snapshots; the net change per key is its row
of the highest `_change_ordinal` (UPDATE_AFTER/INSERT before UPDATE_BEFORE/DELETE within one
ordinal); executors write it with opensearch-py's bulk helper from `foreachPartition`.

Unversioned: plain `index` and `delete` actions, as such a job is usually written. That spares the
peer OpenSearch's version checks (icecdc pays them), so the comparison favours the peer slightly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

from bench.env import CATALOG

BULK_CHUNK = 500  # opensearch-py's default, and icecdc's
META_COLUMNS = ("_change_type", "_change_ordinal", "_commit_snapshot_id", "_rank")


def sync(spark: Any, table: str, index: str, opensearch_url: str, start_snapshot: int, end_snapshot: int) -> None:
    """Apply the changes after `start_snapshot` up to `end_snapshot` (inclusive) to `index`."""
    view = "peer_changes"
    spark.sql(
        f"""CALL {CATALOG}.system.create_changelog_view(
              table => '{table}',
              options => map('start-snapshot-id', '{start_snapshot}', 'end-snapshot-id', '{end_snapshot}'),
              compute_updates => true,
              identifier_columns => array('id'),
              changelog_view => '{view}')"""
    )
    net = spark.sql(
        f"""SELECT * FROM (
              SELECT *, row_number() OVER (
                PARTITION BY id
                ORDER BY _change_ordinal DESC, CASE WHEN _change_type IN ('INSERT', 'UPDATE_AFTER') THEN 0 ELSE 1 END
              ) AS _rank
              FROM {view})
            WHERE _rank = 1"""
    )
    net.foreachPartition(partial(_bulk_partition, opensearch_url, index))


def load(spark: Any, table: str, index: str, opensearch_url: str) -> None:
    """The peer's initial load: the whole table as index actions."""
    spark.table(f"{CATALOG}.{table}").foreachPartition(partial(_bulk_partition, opensearch_url, index))


def _bulk_partition(opensearch_url: str, index: str, rows: Iterable[Any]) -> None:
    from opensearchpy import OpenSearch, helpers  # executor side

    client = OpenSearch(hosts=[opensearch_url], timeout=60)
    _, errors = helpers.bulk(client, _actions(index, rows), chunk_size=BULK_CHUNK, raise_on_error=False)
    # A delete of a key the index never had answers 404; anything else is a failure.
    failed = [e for e in errors if next(iter(e.values())).get("status") != 404]
    if failed:
        raise RuntimeError(f"peer: {len(failed)} bulk failures, e.g. {failed[:3]}")


def _actions(index: str, rows: Iterable[Any]) -> Iterator[dict[str, Any]]:
    for row in rows:
        fields = row.asDict()
        change = fields.get("_change_type", "INSERT")
        doc_id = str(fields["id"])
        if change == "DELETE":
            yield {"_op_type": "delete", "_index": index, "_id": doc_id}
            continue
        for name in META_COLUMNS:
            fields.pop(name, None)
        yield {"_op_type": "index", "_index": index, "_id": doc_id, "_source": json.dumps(fields, default=str)}

"""An identifier OpenSearch refuses as an `_id` (over 512 bytes of UTF-8, or empty) is the row's
own fault: found when the row is read, a dead letter naming the row, never sent. Sent, a long id
fails its whole bulk request, and the table would stop at that snapshot for good."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyiceberg.expressions import In
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from icecdc.config import Config, parse_config
from icecdc.deadletters import DeadLetters
from icecdc.model import Write
from icecdc.sink import Refusal, write_documents
from icecdc.sync import sync
from tests.support.pipeline import ENGINES, Pipeline

NAME = "db.keyed"
LONG = "日" * 171  # 513 bytes of UTF-8: one over the limit
SCHEMA = Schema(
    NestedField(1, "key", StringType(), required=False),
    NestedField(2, "n", LongType(), required=False),
)
ARROW = pa.schema([pa.field("key", pa.string()), pa.field("n", pa.int64())])


def keyed_table(pipeline: Pipeline, keys: list[str]) -> None:
    table = pipeline.catalog.create_table(NAME, schema=SCHEMA)
    table.append(pa.Table.from_pylist([{"key": k, "n": i} for i, k in enumerate(keys)], schema=ARROW))


def config(pipeline: Pipeline) -> Config:
    raw = pipeline.config_dict([{"name": NAME, "identifier_columns": ["key"], "index": "keyed"}])
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    return parse_config(raw)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_id_over_512_bytes_and_an_empty_id_are_dead_letters_and_the_table_goes_on(
    pipeline: Pipeline,
) -> None:
    good = [f"k{i}" for i in range(50)]
    keyed_table(pipeline, [*good[:25], LONG, *good[25:], ""])
    assert len(LONG.encode()) == 513  # OpenSearch takes 512
    cfg = config(pipeline)
    snapshot = pipeline.catalog.load_table(NAME).current_snapshot()
    assert snapshot is not None

    (result,) = sync(cfg, pipeline.spark, [NAME])
    assert sorted(pipeline.documents("keyed")) == sorted(good)  # every other row of the request is written
    assert (result.writes.indexed, result.writes.dead_lettered) == (50, 2)
    assert result.checkpoint is not None and result.checkpoint.snapshot_id == snapshot.snapshot_id
    letters = DeadLetters(str(pipeline.workdir / "dead-letters")).read(NAME)
    by_row = {json.loads(letter["document"])["key"]: letter for letter in letters}
    assert set(by_row) == {LONG, ""}
    for letter in letters:  # each names its row: table, snapshot, file (and its document holds the key)
        assert letter["table"] == NAME and letter["snapshot_id"] == snapshot.snapshot_id
        assert ".parquet (snapshot" in letter["reason"]
    assert "the `_id` is over OpenSearch's 512 bytes (identifier columns key): 513 bytes" in by_row[LONG]["reason"]
    assert "the `_id` is empty (identifier columns key)" in by_row[""]["reason"]
    assert by_row[LONG]["cause"] == "the `_id` is over OpenSearch's 512 bytes (identifier columns key)"

    # the bad rows deleted: their deletes are no-ops (no document has such an id), never a failure
    pipeline.catalog.load_table(NAME).delete(In("key", [LONG, ""]))
    (again,) = sync(cfg, pipeline.spark, [NAME])
    table = pipeline.catalog.load_table(NAME)
    assert again.checkpoint is not None and again.checkpoint.snapshot_id == table.metadata.current_snapshot_id
    pipeline.assert_index_equals_table(cfg, NAME)
    assert len(DeadLetters(str(pipeline.workdir / "dead-letters")).read(NAME)) == 2  # no new letter for the deletes


def test_the_sink_never_sends_an_id_opensearch_refuses(pipeline: Pipeline) -> None:
    """Whoever hands the sink writes (a repair, a replay): an index of such an id is a dead letter,
    not sent; a delete of one is dropped; the other writes of the request go through."""
    refused: list[Refusal] = []
    writes = [
        Write("a", 1, '{"n":1}'),
        Write(LONG, 1, '{"n":2}'),
        Write("", 1, '{"n":3}'),
        Write(LONG, 1, None),
    ]
    stats = write_documents(pipeline.client, config(pipeline).opensearch, "plain", writes, refused.extend)
    assert (stats.indexed, stats.deleted, stats.dead_lettered) == (1, 0, 2)
    assert sorted(w.doc_id for w, _, _ in refused) == ["", LONG]
    assert all(status == 400 and "over OpenSearch's 512 bytes" in reason for _, status, reason in refused)
    assert list(pipeline.documents("plain")) == ["a"]

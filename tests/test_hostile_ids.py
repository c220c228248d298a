"""An identifier OpenSearch refuses as an `_id` (over 512 bytes of UTF-8, or empty) is the row's
own fault: found when the row is read, a dead letter naming the row, never sent. Sent, a long id
fails its whole bulk request, and the table would stop at that snapshot for good."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from pyiceberg.expressions import In
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, FloatType, LongType, NestedField, StringType

from icecdc.config import Config, parse_config
from icecdc.deadletters import DeadLetters
from icecdc.destination.sink import Refusal, write_documents
from icecdc.model import EngineKind, Write
from icecdc.sync import sync
from tests.support.cli import icecdc
from tests.support.pipeline import ENGINES, Pipeline

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

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


@pytest.mark.parametrize("kind", [FloatType(), DoubleType()])
def test_a_float_or_double_identifier_is_refused_before_anything_is_read(
    tmp_path: Path, osmem_clone: Any, kind: FloatType | DoubleType
) -> None:
    """Reproduced: NaN and ±inf identifiers were dead-lettered as "identifier column is null"; a
    double identifier column was accepted, though Iceberg allows none as an identifier field (a
    schema's own identifier fields cannot be one: pyiceberg refuses such a schema)."""
    local = Pipeline(tmp_path, osmem_clone.url, spark=None, engine=EngineKind.IN_PROCESS)
    schema = Schema(
        NestedField(1, "score", kind, required=True),
        NestedField(2, "n", LongType(), required=False),
    )
    table = local.catalog.create_table(NAME, schema=schema)
    arrow = pa.schema(
        [pa.field("score", pa.float32() if isinstance(kind, FloatType) else pa.float64(), False), pa.field("n", pa.int64())]
    )
    scores = [1.5, math.nan, math.inf, -math.inf]
    table.append(pa.Table.from_pylist([{"score": s, "n": i} for i, s in enumerate(scores)], schema=arrow))
    raw = local.config_dict([{"name": NAME, "index": "keyed", "identifier_columns": ["score"]}])
    raw["dead_letter"] = {"path": str(tmp_path / "dead-letters")}
    path = tmp_path / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    reason = (
        f"table '{NAME}': identifier column 'score' has type {kind}; Iceberg does not allow float or double "
        "identifier fields (NaN and rounding give no stable identity): choose another column"
    )
    checked = icecdc("check", "--config", str(path))
    assert checked.returncode == 2 and reason in checked.stdout + checked.stderr, checked.stdout + checked.stderr
    synced = icecdc("sync", "--config", str(path))
    assert synced.returncode == 2 and "Traceback" not in synced.stderr
    assert synced.stderr.strip().splitlines()[-1].endswith(reason), synced.stderr
    assert "is null" not in synced.stdout + synced.stderr
    assert local.store().get_checkpoint(NAME) is None and local.store().pending_items(NAME) == []
    assert not local.client.indices.exists(index="keyed") and not (tmp_path / "dead-letters").exists()

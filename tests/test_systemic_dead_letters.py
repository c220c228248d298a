"""Dead letters that show a cause many rows share (identifier columns that are not unique, a mapping
override the rows contradict) fail the pass: exit 2, one line naming each reason with its count and
a sample row, the checkpoint where it was. A few rows' own faults are letters and the table goes on.
Every sync prints its letters by reason; `dead-letters list --by-reason` groups them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from pyiceberg.expressions import IsNull
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icecdc.config import parse_config
from icecdc.deadletters import DeadLetters
from icecdc.errors import ProcessingError
from icecdc.model import EngineKind
from icecdc.sync import sync
from tests.support.cli import icecdc
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.people"
ROWS = 300
SCHEMA = Schema(
    NestedField(1, "id", StringType(), required=False),
    NestedField(2, "country", StringType(), required=False),
    NestedField(3, "status", StringType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
    NestedField(5, "n", LongType(), required=False),
)
ARROW = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("country", pa.string()),
        pa.field("status", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("n", pa.int64()),
    ]
)


def people(first: int, count: int, null_ids: int = 0) -> pa.Table:
    """`count` rows from number `first`: three countries, amounts i * 1.5 (every other one whole);
    the first `null_ids` of them without an id."""
    return pa.Table.from_pylist(
        [
            {
                "id": None if i - first < null_ids else f"p{i}",
                "country": ("fr", "jp", "us")[i % 3],
                "status": "new",
                "amount": i * 1.5,
                "n": i,
            }
            for i in range(first, first + count)
        ],
        schema=ARROW,
    )


def config_file(pipeline: Pipeline, table: dict[str, Any], **dead_letter: Any) -> Path:
    raw = pipeline.config_dict([{"name": NAME, "index": "people", "identifier_columns": ["id"], **table}])
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters"), **dead_letter}
    raw["engine"] = {"use": str(EngineKind.IN_PROCESS)}
    path = pipeline.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    return path


def assert_fails_systemically(pipeline: Pipeline, path: Path, count: int, reason: str, sample: str) -> None:
    """The sync exits 2, one line naming the reason, its count and a sample; nothing advanced."""
    synced = icecdc("sync", "--config", str(path))
    assert synced.returncode == 2, synced.stderr
    assert "Traceback" not in synced.stderr
    (line,) = [line for line in synced.stderr.splitlines() if line.startswith("icecdc: error:")]  # logs beside it
    assert line.startswith(f"icecdc: error: table '{NAME}': {count} dead letters from the pass's {ROWS} rows"), line
    assert f"{count} {reason} (e.g. " in line and sample in line, line
    assert pipeline.store().get_checkpoint(NAME) is None
    status = json.loads(icecdc("status", "--config", str(path), "--json").stdout)
    assert status[0]["checkpoint"] is None and status[0]["pending_items"] > 0, status


def test_identifier_columns_that_are_not_unique_fail_the_pass(pipeline: Pipeline) -> None:
    pipeline.catalog.create_table(NAME, schema=SCHEMA).append(people(0, ROWS))
    path = config_file(pipeline, {"identifier_columns": ["country"]})
    assert_fails_systemically(
        pipeline,
        path,
        ROWS,
        "several live rows share an identifier; the identifier columns (country) must be unique",
        "_id '",
    )


def test_a_mapping_override_every_row_contradicts_fails_the_pass(pipeline: Pipeline) -> None:
    pipeline.catalog.create_table(NAME, schema=SCHEMA).append(people(0, ROWS))
    path = config_file(pipeline, {"mappings": {"properties": {"status": {"type": "integer"}}}})
    assert_fails_systemically(pipeline, path, ROWS, "400 mapper_parsing_exception, field [status]", '"status":"new"')


def test_coerce_false_on_a_float_column_fails_the_pass(pipeline: Pipeline) -> None:
    pipeline.catalog.create_table(NAME, schema=SCHEMA).append(people(0, ROWS))
    path = config_file(pipeline, {"mappings": {"properties": {"amount": {"type": "long", "coerce": False}}}})
    assert_fails_systemically(pipeline, path, ROWS // 2, "400 mapper_parsing_exception, field [amount]", "_id 'p1'")

    # the bound is the user's: half the rows may be letters, and the pass completes with them
    lenient = config_file(
        pipeline,
        {"mappings": {"properties": {"amount": {"type": "long", "coerce": False}}}},
        max_share=0.6,
    )
    synced = icecdc("sync", "--config", str(lenient))
    assert synced.returncode == 0, synced.stderr
    assert f"{ROWS // 2} dead-lettered: 400 mapper_parsing_exception, field [amount]" in synced.stdout
    assert pipeline.store().get_checkpoint(NAME) is not None


def test_one_bad_row_among_many_is_a_letter_and_the_bound_is_configurable(
    pipeline: Pipeline,
) -> None:
    table = pipeline.catalog.create_table(NAME, schema=SCHEMA)
    table.append(people(0, ROWS, null_ids=1))
    path = config_file(pipeline, {})
    synced = icecdc("sync", "--config", str(path))
    assert synced.returncode == 0, synced.stderr
    assert "1 dead-lettered: identifier column 'id' is null" in synced.stdout  # the summary, by reason
    assert pipeline.store().get_checkpoint(NAME) is not None
    assert len(DeadLetters(str(pipeline.workdir / "dead-letters")).read(NAME)) == 1

    grouped = icecdc("dead-letters", "list", "--config", str(path), "--by-reason", "--json")
    assert grouped.returncode == 0, grouped.stderr
    ((row),) = json.loads(grouped.stdout)
    assert (row["table"], row["reason"], row["count"]) == (
        NAME,
        "identifier column 'id' is null",
        1,
    )
    assert row["sample"].startswith(f"{NAME}/")
    listed = icecdc("dead-letters", "list", "--config", str(path))  # the letters one by one, as before
    assert listed.returncode == 0 and "identifier column 'id' is null in file" in listed.stdout

    # a bound of no letter at all: the next pass's one bad row fails it
    table.append(people(ROWS, 20, null_ids=1))
    strict = parse_config(yaml.safe_load(config_file(pipeline, {}, max_share=0.0, min_count=1).read_text()))
    checkpoint = pipeline.store().get_checkpoint(NAME)
    with pytest.raises(
        ProcessingError,
        match=r"1 dead letters from the pass's 20 rows.*: 1 identifier column 'id' is null",
    ):
        sync(strict, None, [NAME])
    assert pipeline.store().get_checkpoint(NAME) == checkpoint


def test_a_change_pass_of_rows_without_ids_fails_until_let_through(pipeline: Pipeline) -> None:
    """Rows found bad when they are read (not by OpenSearch), in a pass of changes after export."""
    table = pipeline.catalog.create_table(NAME, schema=SCHEMA)
    table.append(people(0, 30))
    path = config_file(pipeline, {})
    cfg = parse_config(yaml.safe_load(path.read_text()))
    (first,) = sync(cfg, None, [NAME])
    table.append(people(30, 40, null_ids=40))
    with pytest.raises(
        ProcessingError,
        match=r"40 dead letters from the pass's 40 rows.*: 40 identifier column 'id' is null",
    ):
        sync(cfg, None, [NAME])
    assert pipeline.store().get_checkpoint(NAME) == first.checkpoint

    # the rows deleted, and the pass let through once: the rows' inserts are letters, their deletes
    # none (no document has a null id)
    table.delete(IsNull("id"))
    lenient = parse_config(yaml.safe_load(config_file(pipeline, {}, max_share=1.0).read_text()))
    (fixed,) = sync(lenient, None, [NAME])
    assert fixed.writes.dead_lettered == 40
    assert fixed.checkpoint is not None and fixed.checkpoint.snapshot_id == table.refresh().metadata.current_snapshot_id
    pipeline.assert_index_equals_table(cfg, NAME)

"""Rows that cannot become documents never wedge a table: a string that is not UTF-8, two live
rows with one identifier. They become dead letters naming the table, the file or snapshot and the
column, or, without a dead-letter location, an error saying the same; never a raw Spark traceback.

The tables are written by Spark (Iceberg's Java writer), which stores a string's bytes unchecked."""

from __future__ import annotations

import pytest

from icecdc.config import Config, parse_config
from icecdc.deadletters import DeadLetters
from icecdc.errors import ProcessingError
from icecdc.sync import sync
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.spark_sql import run_sql

# Errors cross from Spark's executors as text and are rebuilt; in-process they are raised as they are.
pytestmark = [pytest.mark.parametrize("engine", ENGINES), pytest.mark.drawn_destination]

NAME = "db.u"


def bad_table(pipeline: Pipeline, *rows: str) -> None:
    run_sql(
        pipeline.spark,
        pipeline.workdir,
        f"CREATE TABLE lake.{NAME} (id bigint NOT NULL, v string) USING iceberg TBLPROPERTIES ('format-version'='2')",
        f"INSERT INTO lake.{NAME} VALUES {', '.join(rows)}",
    )


def configs(pipeline: Pipeline) -> tuple[Config, Config]:
    """(without a dead-letter location, with one)"""
    raw = pipeline.config_dict([{"name": NAME, "identifier_columns": ["id"]}])
    without = parse_config(raw)
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    return without, parse_config(raw)


def test_a_string_that_is_not_utf8_is_a_dead_letter_naming_table_file_snapshot_and_column(pipeline: Pipeline) -> None:
    bad_table(pipeline, "(1, 'ok')", "(2, CAST(X'61FF62' AS STRING))", "(3, 'fine')")
    without, with_dead_letters = configs(pipeline)
    snapshot = pipeline.catalog.load_table(NAME).current_snapshot()
    assert snapshot is not None

    with pytest.raises(
        ProcessingError, match=rf"'db.u': column 'v' is not valid UTF-8 in file .*\.parquet \(snapshot {snapshot.snapshot_id}\)"
    ):
        sync(without, pipeline.spark, [NAME])
    assert pipeline.store().get_checkpoint(NAME) is None

    (result,) = sync(with_dead_letters, pipeline.spark, [NAME])
    assert sorted(pipeline.documents("u")) == ["1", "3"]
    assert result.writes.dead_lettered == 1  # counted, as the job's log line and metric report it
    (letter,) = DeadLetters(str(pipeline.workdir / "dead-letters")).read(NAME)
    assert letter["table"] == NAME and letter["snapshot_id"] == snapshot.snapshot_id
    assert "column 'v' is not valid UTF-8 in file" in letter["reason"] and ".parquet" in letter["reason"]
    assert result.checkpoint is not None and result.checkpoint.snapshot_id == snapshot.snapshot_id


def test_two_live_rows_with_one_identifier_are_dead_letters_naming_table_snapshot_and_columns(pipeline: Pipeline) -> None:
    bad_table(pipeline, "(1, 'a')", "(2, 'first')", "(2, 'second')", "(3, 'c')")
    without, with_dead_letters = configs(pipeline)
    snapshot = pipeline.catalog.load_table(NAME).current_snapshot()
    assert snapshot is not None

    with pytest.raises(
        ProcessingError,
        match=rf"table 'db.u', snapshot {snapshot.snapshot_id}: 2 live rows share the identifier '2'.*identifier columns \(id\) must be unique",
    ):
        sync(without, pipeline.spark, [NAME])
    assert pipeline.store().get_checkpoint(NAME) is None

    (result,) = sync(with_dead_letters, pipeline.spark, [NAME])
    assert sorted(pipeline.documents("u")) == ["1", "3"]
    assert result.writes.dead_lettered == 2
    letters = DeadLetters(str(pipeline.workdir / "dead-letters")).read(NAME)
    assert sorted(letter["document"] for letter in letters) == ['{"id":2,"v":"first"}', '{"id":2,"v":"second"}']
    assert all(letter["doc_id"] == "2" and letter["snapshot_id"] == snapshot.snapshot_id for letter in letters)


def test_an_exported_key_of_two_files_is_not_left_in_the_index_and_its_letters_name_both_files(pipeline: Pipeline) -> None:
    """An export writes each row where it reads it: the key two files share was written, and is
    deleted again once the compact keys show it twice. A later commit that changes the key writes it
    (the delete's version does not stand in its way)."""
    bad_table(pipeline, "(2, 'first')")  # one row: one file
    run_sql(
        pipeline.spark,
        pipeline.workdir,
        f"INSERT INTO lake.{NAME} VALUES (2, 'second')",
        f"INSERT INTO lake.{NAME} VALUES (1, 'a'), (3, 'c')",
    )
    _, with_dead_letters = configs(pipeline)
    files = sorted(task.file.file_path for task in pipeline.catalog.load_table(NAME).scan(row_filter="id == 2").plan_files())
    assert len(files) == 2

    (result,) = sync(with_dead_letters, pipeline.spark, [NAME])
    assert sorted(pipeline.documents("u")) == ["1", "3"]
    assert result.writes.dead_lettered == 2
    letters = DeadLetters(str(pipeline.workdir / "dead-letters")).read(NAME)
    assert sorted(letter["document"] for letter in letters) == ['{"id":2,"v":"first"}', '{"id":2,"v":"second"}']
    assert all(f"in {files[0]} and {files[1]}" in letter["reason"] for letter in letters)

    run_sql(
        pipeline.spark,
        pipeline.workdir,
        f"DELETE FROM lake.{NAME} WHERE v = 'second'",
        f"UPDATE lake.{NAME} SET v = 'fixed' WHERE id = 2",
    )
    pipeline.sync(with_dead_letters, NAME)  # the index equals the table again
    assert pipeline.documents("u")["2"] == '{"id":2,"v":"fixed"}'


def test_an_exported_key_of_two_files_routed_by_a_column_is_deleted_under_its_routing(pipeline: Pipeline) -> None:
    """The same, into an index routed by `v`: each row was written under its own routing value, so
    the key's document is deleted under each; the rows' documents are dead letters."""
    bad_table(pipeline, "(2, 'first')")
    run_sql(pipeline.spark, pipeline.workdir, f"INSERT INTO lake.{NAME} VALUES (2, 'second'), (1, 'a')")
    # shards where settings are managed; a collection sizes its indexes itself
    settings = {"settings": {"number_of_shards": 3}} if pipeline.capabilities.managed_settings else {}
    raw = pipeline.config_dict([{"name": NAME, "identifier_columns": ["id"], "routing": "v", **settings}])
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    (result,) = sync(parse_config(raw), pipeline.spark, [NAME])
    assert sorted(pipeline.documents("u")) == ["1"]
    assert result.writes.dead_lettered == 2
    assert pipeline.client.get(index="u", id="1", routing="a")["_routing"] == "a"

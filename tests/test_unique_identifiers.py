"""Identifier columns name one live row each: a key two live rows share is found wherever the rows
come from (one snapshot, an export's passes however capped, a later append) and handled alike: its
document is deleted, its rows are dead letters (or, without a dead-letter location, the pass fails
naming it); the index never silently keeps one of them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, replace
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.expressions import And, EqualTo
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import FileScanTask

from icecdc.audit import audit
from icecdc.audit.report import Drift, DriftKind
from icecdc.config import Config, parse_config
from icecdc.deadletters import DeadLetters
from icecdc.errors import ProcessingError
from icecdc.model import EngineKind
from icecdc.replay import replay_table
from icecdc.storage import Location
from icecdc.sync import sync
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.spark_sql import SparkSql
from tests.support.tables import BY_REGION, SCHEMA, orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"


def config_of(pipeline: Pipeline, dead_letters: bool = True, name: str = NAME, **batch: Any) -> Config:
    raw = pipeline.config_dict([{"name": name}])
    if dead_letters:
        raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    raw["batch"] = batch
    return parse_config(raw)


def letters(pipeline: Pipeline, name: str = NAME) -> list[tuple[str | None, str | None]]:
    found = DeadLetters(str(pipeline.workdir / "dead-letters")).letters(name)
    return sorted((s.letter.doc_id, s.letter.document) for s in found)


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_a_key_appended_again_then_one_copy_deleted_is_a_dead_letter_not_a_silent_loss(
    pipeline: Pipeline,
) -> None:
    """Snapshot 2 appends a second live row of id 2 (no delete of it): the index held id 2, so the
    append is a duplicate. Snapshot 3 deletes one copy: without the check the index lost id 2 while
    the table still has it, and nothing said so."""
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    config = config_of(pipeline)
    pipeline.sync(config, NAME)
    table.append(rows(2, status="again"))
    (appended,) = sync(config, pipeline.spark, [NAME])
    assert appended.writes.dead_lettered == 2
    assert "2" not in pipeline.documents("orders")  # as an export leaves a key two rows share
    first, second = (
        '{"amount":3.0,"id":2,"region":"us","status":"new"}',
        '{"amount":3.0,"id":2,"region":"us","status":"again"}',
    )
    assert letters(pipeline) == [("2", second), ("2", first)]
    (letter, _) = DeadLetters(str(pipeline.workdir / "dead-letters")).letters(NAME)
    assert "2 live rows share the identifier '2'" in letter.letter.reason and "must be unique" in letter.letter.reason

    table.delete(And(EqualTo("id", 2), EqualTo("status", "new")))  # the fix: one row of id 2 again
    sync(config, pipeline.spark, [NAME])
    assert config.dead_letter is not None
    replayed = replay_table(config, NAME, config.dead_letter)
    assert (replayed.replayed, replayed.still_refused) == (2, {})
    pipeline.assert_index_equals_table(config, NAME)


def two_rows_of_id_2_lettered(pipeline: Pipeline) -> Config:
    """An export of ids 1–3, then a change pass that letters both live rows of id 2."""
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    config = config_of(pipeline)
    pipeline.sync(config, NAME)
    table.append(rows(2, status="again"))
    sync(config, pipeline.spark, [NAME])
    return config


@pytest.mark.parametrize("engine", ENGINES)
def test_a_row_lettered_for_its_shared_id_is_not_lettered_again_by_an_export(pipeline: Pipeline) -> None:
    """Found by fuzz (2026-11-29): a change pass and an export word one row's letter otherwise (the
    export's names the files), and a letter's key was of its reason: the export after a lost index
    lettered both rows of id 2 again, and a replay gave all four letters one reason, leaving two
    open letters of each row."""
    config = two_rows_of_id_2_lettered(pipeline)
    lettered = letters(pipeline)
    assert [doc_id for doc_id, _ in lettered] == ["2", "2"]

    pipeline.client.indices.delete(index="orders-1")  # lost: the next sync exports again
    sync(config, pipeline.spark, [NAME])
    assert letters(pipeline) == lettered
    assert config.dead_letter is not None
    replayed = replay_table(config, NAME, config.dead_letter)
    assert len(replayed.still_refused) == 2
    assert letters(pipeline) == lettered


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_a_replay_merges_two_open_letters_that_end_with_one_row_and_cause(pipeline: Pipeline) -> None:
    """Letters written before a letter's key was of its cause can hold one row twice, worded by a
    change and by an export: refused again, both end with one reason, and the replay keeps the
    older open and marks the other replayed, naming it."""
    config = two_rows_of_id_2_lettered(pipeline)
    assert config.dead_letter is not None
    dead_letters = DeadLetters(config.dead_letter)
    first, second = dead_letters.letters(NAME)
    worded = replace(first.letter, reason=f"{first.letter.reason} (in a.parquet and b.parquet)")
    Location(config.dead_letter).put(f"{NAME}/20260101T000000Z-{'0' * 12}-n1.jsonl", json.dumps(asdict(worded)) + "\n")
    assert len(dead_letters.letters(NAME)) == 3  # as the version before wrote them

    replayed = replay_table(config, NAME, config.dead_letter)
    assert (len(replayed.still_refused), replayed.replayed) == (2, 1)
    assert sorted(s.letter.document for s in dead_letters.letters(NAME)) == sorted(
        [first.letter.document, second.letter.document]
    )
    (merged,) = [s.letter for s in dead_letters.letters(NAME, include_replayed=True) if s.letter.replayed_at]
    assert merged.outcome.startswith("merged into ") and merged.document == first.letter.document


@pytest.mark.parametrize("engine", ENGINES)
def test_a_copy_appended_after_a_rewrite_of_its_keys_file_is_a_second_live_row(pipeline: Pipeline) -> None:
    """Found by fuzz (2026-11-28): a copy-on-write delete rewrote the file of id 2 (carrying it
    over), then a copy of id 2 was appended; the pass collapsed both commits into one change, where
    the carryover hid the append: the copy replaced id 2's document as an update, no letter named
    either row, and a later delete of the original left the copy with no document. (A rewrite
    within `max_rewrite_bytes`, or cut by key bounds, is paired and its carryovers cancelled
    before; this one keeps no bounds.)"""
    table = orders(pipeline)
    with table.transaction() as transaction:
        transaction.set_properties({"write.metadata.metrics.default": "none"})
    table.append(rows(1, 2, 3))
    config = config_of(pipeline, max_rewrite_bytes=1)
    pipeline.sync(config, NAME)
    table.delete(EqualTo("id", 3))  # copy-on-write: the file rewritten, id 2 carried over
    table.append(rows(2, status="again"))
    sync(config, pipeline.spark, [NAME])
    assert "2" not in pipeline.documents("orders")
    assert [json.loads(d or "{}")["status"] for _, d in letters(pipeline)] == ["again", "new"]

    table.delete(And(EqualTo("id", 2), EqualTo("status", "new")))  # the fix: one row of id 2 again
    sync(config, pipeline.spark, [NAME])
    assert config.dead_letter is not None
    assert replay_table(config, NAME, config.dead_letter).still_refused == {}
    pipeline.assert_index_equals_table(config, NAME)


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_an_append_of_a_held_key_without_letters_fails_the_pass(pipeline: Pipeline) -> None:
    """Without a dead-letter location the pass fails naming the key, and nothing advances. (An
    append and the delete of a copy in one pass of copy-on-write commits collapse into an update:
    the table has one row again, which the index gets: no duplicate outlives the pass.)"""
    table = orders(pipeline)
    table.append(rows(1, 2, 3))
    pipeline.sync(config_of(pipeline), NAME)
    checkpoint = pipeline.store().get_checkpoint(NAME)
    table.append(rows(2, status="again"))
    with pytest.raises(
        ProcessingError,
        match=r"2 live rows share the identifier '2'.*identifier columns \(id\) must be unique",
    ):
        sync(config_of(pipeline, dead_letters=False), pipeline.spark, [NAME])
    assert pipeline.store().get_checkpoint(NAME) == checkpoint
    assert '"status":"new"' in pipeline.documents("orders")["2"]  # nothing written of it: found again next time


@pytest.mark.parametrize("engine", ENGINES)
def test_an_export_capped_at_one_file_a_pass_finds_what_an_uncapped_one_finds(
    pipeline: Pipeline,
) -> None:
    """Id 2's rows are in two files, id 5's in three, id 7's twice in one: read one file a pass,
    each pass wrote its row of id 2 and 5 (the last one won, with no letter). The pass that
    finishes the export reads the earlier passes' keys again and settles them as one pass does."""
    for name in ("db.whole", "db.capped"):
        table = pipeline.catalog.create_table(name, schema=SCHEMA, partition_spec=BY_REGION)
        table.append(rows(1, 2, 5))
        table.append(rows(2, 3, status="second"))
        table.append(rows(5, 6, status="second"))
        # one file; two rows of id 7 that differ (identical rows would be one row to a dead letter)
        table.append(pa.concat_tables([rows(5, 7, region="eu", status="third"), rows(7, region="eu", status="4th")]))
    whole, capped = (
        config_of(pipeline, name="db.whole"),
        config_of(pipeline, name="db.capped", max_files=1),
    )

    (one,) = sync(whole, pipeline.spark, ["db.whole"])
    (cut,) = sync(capped, pipeline.spark, ["db.capped"])
    assert (one.writes.dead_lettered, cut.writes.dead_lettered) == (7, 7)
    assert sorted(pipeline.documents("capped")) == sorted(pipeline.documents("whole")) == ["1", "3", "6"]
    assert letters(pipeline, "db.capped") == letters(pipeline, "db.whole")
    assert sorted(doc_id for doc_id, _ in letters(pipeline, "db.capped")) == [
        "2",
        "2",
        "5",
        "5",
        "5",
        "7",
        "7",
    ]


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_the_last_pass_reads_again_the_keys_of_only_the_files_no_pass_of_its_run_wrote(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six files, two a pass; the first pass ran in a run of its own (it stopped), the others in
    one sync. The pass that finishes the export has the keys its run's earlier pass wrote: it reads
    again the keys of the first pass's two files alone, and the two rows of id 0 (in files of the
    first and of a later pass) as candidates. Each file is read once, those three twice: 8 reads,
    not 10 (the later pass's files again). Id 0 is found as an uncapped export finds it."""
    table = orders(pipeline)
    for i in range(6):
        table.append(rows(i, 0, status="again") if i == 3 else rows(i))  # id 0 in files 0, 3
    config = config_of(pipeline, max_files=2)
    first = pipeline.one_pass(config, NAME)
    assert first.partial
    read: list[str] = []
    to_record_batches = ArrowScan.to_record_batches

    def counted(scan: ArrowScan, tasks: Iterable[FileScanTask]) -> Any:
        tasks = list(tasks)
        read.extend(t.file.file_path for t in tasks)
        return to_record_batches(scan, tasks)

    monkeypatch.setattr(ArrowScan, "to_record_batches", counted)
    (result,) = sync(config, pipeline.spark, [NAME])
    assert len(read) == 8, sorted(read)
    assert len(set(read)) == 6  # every file read
    assert result.writes.dead_lettered == 2
    assert sorted(pipeline.documents("orders")) == ["1", "2", "3", "4", "5"]
    assert [doc_id for doc_id, _ in letters(pipeline)] == ["0", "0"]


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_the_audit_reports_an_id_several_live_rows_hold(pipeline: Pipeline) -> None:
    """Known while its letters are open (a sync dead-lettered it); drift once they are marked dealt
    with and the table still holds both rows."""
    table = orders(pipeline)
    table.append(pa.concat_tables([rows(1, 2, 3), rows(2, status="second")]))
    config = config_of(pipeline)
    sync(config, pipeline.spark, [NAME])
    (audited,) = audit(config, [NAME], sample=10)
    duplicate = Drift(DriftKind.DUPLICATE, {"region": "us"}, "2", 2, dead_lettered=1)
    assert duplicate in audited.drift and not audited.drifted
    assert duplicate.describe() == "duplicate identifier: id '2' (region='us'): 2 live rows hold it: the identifier is not unique"

    assert config.dead_letter is not None
    dead_letters = DeadLetters(config.dead_letter)
    dead_letters.mark_replayed([s.letter_id for s in dead_letters.letters(NAME)], "ignored")
    (again,) = audit(config, [NAME], sample=10)
    assert Drift(DriftKind.DUPLICATE, {"region": "us"}, "2", 2) in again.drift and again.drifted


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("region", ["eu", "us"])
def test_a_capped_export_whose_last_pass_reads_no_file_of_a_filtered_index(pipeline: Pipeline, region: str) -> None:
    """A filtered index holds no row of a region: the pass that takes that region's file (the
    last, for one of the two orders) reads nothing of its own, only the earlier passes' keys."""
    table = pipeline.catalog.create_table(NAME, schema=SCHEMA, partition_spec=BY_REGION)
    table.append(rows(1, 2, region="eu"))
    table.append(rows(3, 4, region="us"))
    raw = pipeline.config_dict([{"name": NAME, "where": f"region = '{region}'"}])
    raw["batch"] = {"max_files": 1}
    config = parse_config(raw)
    sync(config, pipeline.spark, [NAME])
    pipeline.assert_index_equals_table(config, NAME)
    assert sorted(pipeline.documents("orders")) == (["1", "2"] if region == "eu" else ["3", "4"])


@pytest.mark.parametrize("engine", ENGINES)
def test_a_copy_of_a_key_updated_in_the_pass_that_appends_it_writes_no_document(pipeline: Pipeline, spark_sql: SparkSql) -> None:
    """Found by fuzz (2026-11-28): Spark merge-on-read commits read in one pass append a copy of id 2,
    then update it (a position delete and an insert in one snapshot). The index held id 2, so the
    append is a second live row, and two still live after the update; the update's write stood, as if
    a later snapshot always settled the key: the index held one of two live rows, the update unnamed."""
    ss, table = spark_sql, spark_sql.name("db.t")
    modes = ", ".join(f"'write.{op}.mode'='merge-on-read'" for op in ("delete", "update", "merge"))
    ss.sql(f"CREATE TABLE {table} (id BIGINT, status STRING) USING iceberg TBLPROPERTIES ('format-version'='2', {modes})")
    ss.sql(f"INSERT INTO {table} VALUES (1, 'new'), (2, 'new'), (3, 'new')")
    raw = pipeline.config_dict([{"name": "db.t", "index": "t", "identifier_columns": ["id"]}])
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    config = parse_config(raw)
    sync(config, pipeline.spark, ["db.t"])
    ss.sql(f"INSERT INTO {table} VALUES (2, 'second')")
    ss.sql(f"UPDATE {table} SET status = 'second, updated' WHERE status = 'second'")
    sync(config, pipeline.spark, ["db.t"])
    assert "2" not in pipeline.documents("t")
    held = [s.letter.document or "" for s in DeadLetters(str(pipeline.workdir / "dead-letters")).letters("db.t")]
    assert sorted(json.loads(d)["status"] for d in held) == ["new", "second", "second, updated"]

    ss.sql(f"DELETE FROM {table} WHERE id = 2 AND status = 'new'")  # the fix: one row of id 2 again
    sync(config, pipeline.spark, ["db.t"])
    replayed = replay_table(config, "db.t", str(pipeline.workdir / "dead-letters"))
    assert replayed.still_refused == {}
    assert json.loads(pipeline.documents("t")["2"])["status"] == "second, updated"
    pipeline.assert_index_equals_table(config, "db.t")

"""`icecdc dead-letters list|show|replay|mark-replayed`: a replay writes the row as the table held
it at the checkpoint (never the letter's stale document), at the checkpoint's version, and
marks each letter; a letter whose document is refused again stays, with the new reason."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from pyiceberg.expressions import EqualTo

from icecdc.audit import audit, rebuild_index
from icecdc.config import Config, parse_config
from icecdc.deadletters import DeadLetter, DeadLetters, Selection
from icecdc.errors import OperationError
from icecdc.model import EngineKind
from icecdc.replay import replay_table
from icecdc.storage import Location
from icecdc.sync import SyncResult, sync
from icecdc.testing.commits import update
from tests.support.aws import aws_client
from tests.support.cli import icecdc
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection

NAME = "db.orders"
# An override that refuses every status that is not a number: the documents' own fault, dead-lettered.
NUMERIC_STATUS = {"properties": {"status": {"type": "integer"}}}


def config_with(pipeline: Pipeline, mappings: dict[str, Any] | None, name: str = NAME, **opensearch: Any) -> Config:
    raw = pipeline.config_dict([{"name": name, "mappings": mappings}])
    raw["opensearch"].update(opensearch)
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    raw["engine"] = {"use": str(EngineKind.IN_PROCESS)}
    return parse_config(raw)


def orders_with_statuses(pipeline: Pipeline, *statuses: str) -> None:
    table = orders(pipeline)
    table.append(pa.concat_tables([rows(i, status=s) for i, s in enumerate(statuses, start=1)]))


def letters(config: Config, include_replayed: bool = False) -> list[DeadLetter]:
    assert config.dead_letter is not None
    return [s.letter for s in DeadLetters(config.dead_letter).letters(NAME, include_replayed)]


def test_an_unmappable_document_fixed_in_the_table_by_a_later_commit(pipeline: Pipeline) -> None:
    orders_with_statuses(pipeline, "1", "2", "new")
    config = config_with(pipeline, NUMERIC_STATUS)
    (result,) = _sync(config)
    assert result.writes.dead_lettered == 1 and [letter.doc_id for letter in letters(config)] == ["3"]
    version = pipeline.store().get_checkpoint(NAME).sequence_number
    # the audit sees the row without a document, and knows it for a dead letter, not drift
    (audited,) = audit(config, [NAME], sample=10)
    assert not audited.drifted and {(d.doc_id, d.count, d.dead_lettered) for d in audited.drift} == {(None, 1, 1), ("3", 1, 1)}
    assert not audited.scope()

    # the row is fixed by a later commit, not synced yet: the replay reads the row as of the
    # checkpoint, still bad, and leaves the letter; the fix's own sync writes the row
    update(pipeline.catalog.load_table(NAME), EqualTo("id", 3), lambda r: {**r, "status": "3"})
    assert config.dead_letter is not None
    early = replay_table(config, NAME, config.dead_letter)
    assert (early.letters, early.replayed, early.indexed, len(early.still_refused)) == (1, 0, 0, 1)
    assert "3" not in pipeline.documents("orders")
    _sync(config)
    pipeline.assert_index_equals_table(config, NAME)
    version = pipeline.store().get_checkpoint(NAME).sequence_number
    report = replay_table(config, NAME, config.dead_letter)
    assert (report.letters, report.replayed, report.indexed, report.still_refused) == (1, 1, 1, {})
    assert json.loads(pipeline.documents("orders")["3"])["status"] == "3"  # never the letter's "new"
    if pipeline.versioned:  # a collection has no versions
        assert pipeline.versions("orders")["3"] == version  # the checkpoint's
    (marked,) = letters(config, include_replayed=True)
    assert marked.replayed_at is not None and marked.outcome == f"indexed the checkpoint's row (version {version})"
    assert letters(config) == [] and DeadLetters(config.dead_letter).count(NAME) == 0

    again = replay_table(config, NAME, config.dead_letter)
    assert (again.letters, again.indexed, again.deleted) == (0, 0, 0)  # a replay twice changes nothing
    _sync(config)
    pipeline.assert_index_equals_table(config, NAME)


def test_a_replay_beside_a_later_run_of_copy_on_write_commits_that_cancels(
    pipeline: Pipeline,
) -> None:
    """The row is X at the checkpoint (dead-lettered: too large for a bulk request), then X→Y, not
    synced. A replay (the limit raised) writes X, the checkpoint's row, at the checkpoint's
    version: after Y→X the next pass collapses the run X→Y→X into nothing, and the index holds X.
    A replay of the current row Y would stay in the index for good."""
    large = "x" * 400
    orders_with_statuses(pipeline, "1", large)
    small = config_with(pipeline, None)
    tight = config_with(pipeline, None, max_chunk_bytes=300)
    (result,) = _sync(tight)
    assert result.writes.dead_lettered == 1 and [letter.doc_id for letter in letters(tight)] == ["2"]
    checkpoint = pipeline.store().get_checkpoint(NAME)
    table = pipeline.catalog.load_table(NAME)
    update(table, EqualTo("id", 2), lambda r: {**r, "status": "2"})  # X→Y, not synced

    assert small.dead_letter is not None
    report = replay_table(small, NAME, small.dead_letter)
    assert (report.replayed, report.indexed, report.version) == (1, 1, checkpoint.sequence_number)
    assert json.loads(pipeline.documents("orders")["2"])["status"] == large  # the checkpoint's row
    if pipeline.versioned:  # a collection has no versions
        assert max(pipeline.versions("orders").values()) <= checkpoint.sequence_number  # never above it

    update(pipeline.catalog.load_table(NAME), EqualTo("id", 2), lambda r: {**r, "status": large})  # Y→X
    (after,) = _sync(small)
    assert after.writes.indexed == 0  # the run X→Y→X changed nothing: collapsed
    pipeline.assert_index_equals_table(small, NAME)


def test_a_mapping_override_fixed_in_the_config_replays_once_the_index_is_rebuilt(pipeline: Pipeline) -> None:
    orders_with_statuses(pipeline, "new", "paid")
    broken = config_with(pipeline, NUMERIC_STATUS)
    (result,) = _sync(broken)
    assert result.writes.dead_lettered == 2

    fixed = config_with(pipeline, None)
    assert fixed.dead_letter is not None
    stays = replay_table(fixed, NAME, fixed.dead_letter)
    assert stays.replayed == 0 and len(stays.still_refused) == 2
    assert "maps status (integer, the schema's text) otherwise than the configuration" in stays.notes[0]
    assert "icecdc repair --rebuild" in stays.notes[0]
    kept = letters(fixed)
    assert [(k.attempts, k.status) for k in kept] == [(1, 400), (1, 400)] and "mapper_parsing_exception" in kept[0].reason

    rebuild_index(fixed, NAME, "the status mapping was fixed")
    pipeline.assert_index_equals_table(fixed, NAME)
    replayed = replay_table(fixed, NAME, fixed.dead_letter)
    assert (replayed.replayed, replayed.still_refused, replayed.notes) == (2, {}, [])
    assert DeadLetters(fixed.dead_letter).count(NAME) == 0
    pipeline.assert_index_equals_table(fixed, NAME)


def test_replay_after_the_row_was_deleted_deletes_its_document(pipeline: Pipeline) -> None:
    orders_with_statuses(pipeline, "1", "new")
    config = config_with(pipeline, NUMERIC_STATUS)
    _sync(config)
    pipeline.catalog.load_table(NAME).delete(EqualTo("id", 2))
    assert config.dead_letter is not None
    early = replay_table(config, NAME, config.dead_letter)  # the row as of the checkpoint: still refused
    assert (early.replayed, early.indexed, early.deleted, len(early.still_refused)) == (0, 0, 0, 1)
    _sync(config)  # the delete's own sync

    report = replay_table(config, NAME, config.dead_letter)
    assert (report.replayed, report.indexed, report.deleted) == (1, 0, 1)
    (marked,) = letters(config, include_replayed=True)
    assert marked.outcome.startswith("deleted: the row is gone")
    _sync(config)
    pipeline.assert_index_equals_table(config, NAME)


@pytest.mark.domain_only  # kept off by external versions; a collection refuses the replay instead
def test_a_later_changes_document_is_left_as_it_is(pipeline: Pipeline) -> None:
    """A pass of a later commit wrote the row's document, then stopped before its checkpoint: the
    replay writes at the checkpoint's version, below that document's, so it leaves it (and says
    so in the letter) rather than overwrite a newer change."""
    orders_with_statuses(pipeline, "1", "new")
    config = config_with(pipeline, NUMERIC_STATUS)
    _sync(config)
    assert config.dead_letter is not None
    (letter,) = letters(config)
    update(pipeline.catalog.load_table(NAME), EqualTo("id", 2), lambda r: {**r, "status": "2"})
    later = pipeline.catalog.load_table(NAME).metadata.last_sequence_number
    fixed = {**json.loads(letter.document or "{}"), "status": "2"}
    pipeline.client.index(index="orders", id="2", body=fixed, version=later, version_type="external", refresh=True)
    update(pipeline.catalog.load_table(NAME), EqualTo("id", 2), lambda r: {**r, "status": "new"})  # the row is bad again
    pipeline.record_pass_end(NAME)  # as that pass did before it wrote

    report = replay_table(config, NAME, config.dead_letter)
    assert (report.replayed, report.indexed, report.still_refused) == (1, 0, {})
    assert pipeline.versions("orders")["2"] == later and json.loads(pipeline.documents("orders")["2"]) == fixed
    (marked,) = letters(config, include_replayed=True)
    assert marked.outcome == f"superseded: the index holds a later change's document (version {later}), left as it is"
    (result,) = _sync(config)  # the later commits' own sync: the last one's row is dead-lettered anew
    assert result.writes.dead_lettered == 1 and [k.doc_id for k in letters(config)] == ["2"]


def test_dead_letter_commands(pipeline: Pipeline, tmp_path: Path) -> None:
    """A letter without an id (a null identifier) cannot be looked up: it stays until marked."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = pipeline.catalog.create_table("db.loose", schema=schema)
    table.append(pa.table({"id": [1, None, 3], "v": ["a", "b", "7"]}, schema=schema))
    raw = pipeline.config_dict(
        [{"name": "db.loose", "identifier_columns": ["id"], "mappings": {"properties": {"v": {"type": "integer"}}}}]
    )
    raw["dead_letter"] = {"path": str(tmp_path / "dead-letters")}
    raw["engine"] = {"use": str(EngineKind.IN_PROCESS)}
    path = tmp_path / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert icecdc("sync", "--config", str(path)).returncode == 0

    listed = icecdc("dead-letters", "list", "--config", str(path), "--json")
    assert listed.returncode == 0, listed.stderr
    found = {letter["doc_id"]: letter for letter in json.loads(listed.stdout)}
    assert set(found) == {None, "1"} and "identifier column 'id' is null" in found[None]["reason"]
    by_reason = json.loads(icecdc("dead-letters", "list", "--config", str(path), "--reason", "MAPPER", "--json").stdout)
    assert [letter["doc_id"] for letter in by_reason] == ["1"]
    assert icecdc("dead-letters", "list", "--config", str(path), "--until", "2000-01-01", "--json").stdout.strip() == "[]"
    shown = icecdc("dead-letters", "show", "--config", str(path), found["1"]["letter_id"])
    assert json.loads(shown.stdout)["document"] == '{"id":1,"v":"a"}'

    update(table, EqualTo("id", 1), lambda r: {**r, "v": "5"})
    assert icecdc("sync", "--config", str(path)).returncode == 0  # the replay reads the checkpoint's rows
    replayed = icecdc("dead-letters", "replay", "--config", str(path), "--since", "1h")
    assert replayed.returncode == 1  # the letter without an id is left
    assert "db.loose: 1 of 2 letters replayed" in replayed.stdout and "no id to look the row up by" in replayed.stdout
    marked = icecdc("dead-letters", "mark-replayed", "--config", str(path), found[None]["letter_id"], "--note", "fixed by hand")
    assert marked.returncode == 0 and "fixed by hand" in marked.stdout
    assert json.loads(icecdc("dead-letters", "list", "--config", str(path), "--json").stdout) == []
    everything = icecdc("dead-letters", "list", "--config", str(path), "--all")
    assert everything.stdout.count("[replayed: ") == 2

    unknown = icecdc("dead-letters", "show", "--config", str(path), "db.loose/20240101T000000Z-0123456789ab:1")
    assert unknown.returncode == 2 and "no dead letter 'db.loose/20240101T000000Z-0123456789ab:1'" in unknown.stderr


def _letter(doc_id: str) -> DeadLetter:
    return DeadLetter(NAME, 1, 1, doc_id, 400, "mapper_parsing_exception: no", '{"id":1}')


def test_marks_are_new_revisions_and_a_crash_between_counts_nothing_twice(tmp_path: Path) -> None:
    dead_letters = DeadLetters(str(tmp_path))
    assert dead_letters.write([_letter("1"), _letter("2")]) == 2
    (original,) = sorted((tmp_path / NAME).iterdir())
    original_text = original.read_text()
    first, second = dead_letters.letters(NAME)
    dead_letters.mark_replayed([first.letter_id], "done by hand")
    assert dead_letters.count(NAME) == 1 and [s.letter_id for s in dead_letters.letters(NAME)] == [second.letter_id]
    (revised,) = sorted((tmp_path / NAME).iterdir())
    assert revised.name.endswith("-r1-n1.jsonl") and revised.name.startswith(original.name.split("-n")[0])

    # a crash after the new revision was written, before the old one was deleted
    original.write_text(original_text)
    assert dead_letters.count(NAME) == 1 and len(dead_letters.letters(NAME, include_replayed=True)) == 2
    dead_letters.mark_replayed([second.letter_id], "done too")
    assert [p.name.endswith("-r2-n0.jsonl") for p in (tmp_path / NAME).iterdir()] == [True]  # the leftover is gone

    with pytest.raises(OperationError, match=r"'nonsense' is not a dead letter's id"):
        dead_letters.get(["nonsense"])
    assert Selection(reason="MAPPER")(first) and not Selection(until=first.written_at)(first)


def test_letters_in_s3(moto_url: str, monkeypatch: pytest.MonkeyPatch, unique: str) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    aws_client("s3", moto_url).create_bucket(Bucket=f"letters-{unique}")
    dead_letters = DeadLetters(f"s3://letters-{unique}/dead-letter/")
    dead_letters.write([_letter("1"), _letter("2")])
    first, _ = dead_letters.letters(NAME)
    (marked,) = dead_letters.mark_replayed([first.letter_id], "done")
    assert marked.letter.outcome == "done" and dead_letters.count(NAME) == 1
    assert len(dead_letters.letters(NAME, include_replayed=True)) == 2
    keys = [o["Key"] for o in aws_client("s3", moto_url).list_objects_v2(Bucket=f"letters-{unique}")["Contents"]]
    assert len(keys) == 1 and keys[0].startswith(f"dead-letter/{NAME}/") and keys[0].endswith("-r1-n1.jsonl")


def _sync(config: Config) -> list[SyncResult]:
    """A sync that leaves dead letters: Pipeline.sync would find the index unequal, on purpose."""
    return sync(config, table_names=[NAME])


@pytest.mark.parametrize("namespace", ["../../escaped", "a/b", "..", "/abs"])
def test_a_namespace_holding_a_separator_or_dots_keeps_its_letters_inside(tmp_path: Path, namespace: str) -> None:
    location = tmp_path / "deep" / "dead-letters"
    dead_letters = DeadLetters(str(location))
    name = f"{namespace}.t"
    assert dead_letters.write([replace(_letter("1"), table=name), replace(_letter("2"), table=name)]) == 2
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(p.resolve().is_relative_to(location.resolve()) for p in written), written
    first, second = dead_letters.letters(name)
    assert dead_letters.get([first.letter_id]) == [first] and dead_letters.count(name) == 2
    dead_letters.mark_replayed([first.letter_id], "done")
    assert dead_letters.count(name) == 1 and [s.letter_id for s in dead_letters.letters(name)] == [second.letter_id]
    assert all(p.resolve().is_relative_to(location.resolve()) for p in tmp_path.rglob("*") if p.is_file())


def test_show_and_mark_replayed_refuse_an_id_reaching_outside_the_location(tmp_path: Path) -> None:
    """An id of `..` reads, rewrites and deletes nothing outside the location: one line, exit 2."""
    location = tmp_path / "letters"
    outside = tmp_path / "outside" / "x"
    DeadLetters(str(tmp_path / "outside")).write([replace(_letter("1"), table="x")])
    (planted,) = outside.iterdir()
    before = planted.read_text()
    stem = planted.name.split("-n")[0]
    config = tmp_path / "icecdc.yaml"
    config.write_text(
        "catalog: {name: lake}\nstate: {path: x.db}\nopensearch: {url: http://x}\ntables: [{name: db.t}]\n"
        f"dead_letter: {{path: {location}}}\n"
    )
    reference = f"../outside/x/{stem}:1"
    for command in (["show", reference], ["mark-replayed", reference, "--note", "n"]):
        run = icecdc("dead-letters", *command, "--config", str(config))
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        (line,) = run.stderr.strip().splitlines()
        assert "'../outside/x' is not one folder inside the dead-letter location" in line, line
    assert [p.name for p in outside.iterdir()] == [planted.name] and planted.read_text() == before
    with pytest.raises(OperationError, match="resolves outside the location"):
        Location(str(location)).get("../outside/x/" + planted.name)

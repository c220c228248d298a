"""The operators' tools at the edges: a row dead-lettered by design
(a null identifier) is explained by `verify`, `audit` and `repair`, not reported as drift; one open
letter per row and reason, however often its file is rewritten; an audit of a table dropped and
created again; ids with commas and composite keys named exactly to `repair`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from pyiceberg.expressions import EqualTo

from icecdc.audit import RepairScope, audit, repair
from icecdc.config import Config, parse_config
from icecdc.deadletters import DeadLetter, DeadLetters
from icecdc.model import EngineKind
from icecdc.replay import replay_table
from icecdc.sync import sync
from icecdc.testing.commits import update
from tests.support.cli import icecdc
from tests.support.pipeline import Pipeline

LOOSE = "db.loose"
# `tags` (a struct) makes a copy-on-write rewrite fall back to per-file changes: every row of the
# rewritten file is read again, the null-identifier row too.
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("v", pa.string()),
        pa.field("tags", pa.struct([pa.field("k", pa.string())])),
    ]
)


@pytest.fixture
def local(tmp_path: Path, osmem_clone: Any) -> Pipeline:
    """A pipeline on the in-process engine, without Spark."""
    return Pipeline(tmp_path, osmem_clone.url, None, EngineKind.IN_PROCESS)


def loose_config(pipeline: Pipeline, mappings: dict[str, Any] | None = None) -> tuple[Config, Path]:
    """The table `db.loose` (ids 1..4 and one null id, one data file), its config with dead letters, synced."""
    table = pipeline.catalog.create_table(LOOSE, schema=SCHEMA)
    values = [1, 2, None, 3, 4]
    table.append(pa.Table.from_pylist([{"id": i, "v": f"v{i}", "tags": {"k": "t"}} for i in values], schema=SCHEMA))
    raw = pipeline.config_dict([{"name": LOOSE, "index": "loose", "identifier_columns": ["id"], "mappings": mappings}])
    raw["dead_letter"] = {"path": str(pipeline.workdir / "dead-letters")}
    path = pipeline.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    config = parse_config(raw)
    sync(config, None, [LOOSE])
    return config, path


def open_letters(config: Config) -> list[DeadLetter]:
    assert config.dead_letter is not None
    return [s.letter for s in DeadLetters(config.dead_letter).letters(LOOSE)]


def test_a_null_identifier_is_explained_by_verify_audit_and_repair(local: Pipeline) -> None:
    config, path = loose_config(local)
    assert [letter.doc_id for letter in open_letters(config)] == [None]

    verified = icecdc("verify", "--config", str(path))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "Traceback" not in verified.stderr and "1 dead-lettered" in verified.stdout

    (report,) = audit(config, [LOOSE], sample=100, seed=1)
    assert not report.drifted, [d.describe() for d in report.drift]
    assert report.sampled == 4  # the rest of the bad row's file is still sampled
    assert not report.scope()

    repaired = repair(config, LOOSE, RepairScope(whole_table=True))
    assert (repaired.indexed, repaired.deleted, repaired.dead_lettered) == (0, 0, 1)
    from_audit = icecdc("repair", "--config", str(path), "--table", LOOSE, "--from-audit")
    assert from_audit.returncode == 0, from_audit.stdout + from_audit.stderr
    assert len(open_letters(config)) == 1  # no second letter


def test_one_open_letter_per_row_and_reason_across_rewrites_replays_and_repairs(local: Pipeline) -> None:
    config, _ = loose_config(local, {"properties": {"v": {"type": "integer"}}})  # every v refused: 4 letters by id
    assert sorted((letter.doc_id or "") for letter in open_letters(config)) == ["", "1", "2", "3", "4"]
    table = local.catalog.load_table(LOOSE)
    for n in range(2):  # copy-on-write rewrites of the file: every row read again
        update(table, EqualTo("id", 1), lambda r, n=n: {**r, "tags": {"k": f"t{n}"}})
        sync(config, None, [LOOSE])
        table = local.catalog.load_table(LOOSE)
    assert config.dead_letter is not None
    replay_table(config, LOOSE, config.dead_letter)
    repair(config, LOOSE, RepairScope(whole_table=True))
    held = [letter.doc_id or "" for letter in open_letters(config)]
    assert sorted(held) == ["", "1", "2", "3", "4"], held


def test_a_letter_dealt_with_and_refused_again_is_open_again(tmp_path: Path) -> None:
    dead_letters = DeadLetters(str(tmp_path))
    first = DeadLetter(LOOSE, 1, 1, None, None, "identifier column 'id' is null in file s3://w/a.parquet (snapshot 1)", '{"v":1}')
    moved = DeadLetter(LOOSE, 2, 2, None, None, "identifier column 'id' is null in file s3://w/b.parquet (snapshot 2)", '{"v":1}')
    other = DeadLetter(LOOSE, 2, 2, None, None, "identifier column 'id' is null in file s3://w/b.parquet (snapshot 2)", '{"v":2}')
    assert dead_letters.write([first]) == 1
    assert dead_letters.write([moved, other, other]) == 1  # the same row moved to another file; a new row once
    assert dead_letters.count(LOOSE) == 2
    (stored,) = [s for s in dead_letters.letters(LOOSE) if s.letter.document == '{"v":1}']
    dead_letters.mark_replayed([stored.letter_id], "fixed by hand")
    assert dead_letters.write([moved]) == 1  # refused again after it was dealt with: a letter again
    assert dead_letters.count(LOOSE) == 2


def test_audit_of_a_table_dropped_and_created_again(local: Pipeline) -> None:
    config, path = loose_config(local)
    local.catalog.drop_table(LOOSE)
    local.catalog.create_table(LOOSE, schema=SCHEMA)

    pending = icecdc("audit", "--config", str(path))
    assert pending.returncode == 0, pending.stdout + pending.stderr
    assert "resync is pending" in pending.stdout

    sync(config, None, [LOOSE])
    (clean,) = audit(config, [LOOSE], sample=100)
    assert not clean.drifted and (clean.rows, clean.documents) == (0, 0), [d.describe() for d in clean.drift]
    local.client.index(index="loose", id="9", body={"id": 9}, refresh=True)  # a document the empty table has no row of
    (extra,) = audit(config, [LOOSE], sample=100)
    assert extra.drifted and [(d.kind, d.doc_id) for d in extra.drift if d.doc_id] == [("extra", "9")]


def test_repair_names_any_id_exactly(local: Pipeline) -> None:
    schema = pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string()), pa.field("v", pa.string())])
    rows = [{"a": 1, "b": "x,y", "v": "one"}, {"a": 2, "b": "z", "v": "two"}]
    local.catalog.create_table("db.pairs", schema=schema).append(pa.Table.from_pylist(rows, schema=schema))
    local.catalog.create_table("db.single", schema=schema).append(pa.Table.from_pylist(rows, schema=schema))
    raw = local.config_dict(
        [
            {"name": "db.pairs", "index": "pairs", "identifier_columns": ["a", "b"]},
            {"name": "db.single", "index": "single", "identifier_columns": ["b"]},
        ]
    )
    path = local.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert icecdc("sync", "--config", str(path)).returncode == 0
    composite = json.dumps(["1", "x,y"], separators=(",", ":"))
    delete(local, "single", "x,y")
    delete(local, "pairs", composite)

    split = icecdc("repair", "--config", str(path), "--table", "db.single", "--ids", "x,y")
    assert split.returncode == 2 and "--id" in split.stderr and len(split.stderr.strip().splitlines()) == 1
    one = icecdc("repair", "--config", str(path), "--table", "db.single", "--id", "x,y", "--id", "nope")
    assert one.returncode == 0, one.stdout + one.stderr
    assert "1 indexed" in one.stdout and "not in the table nor the index: 'nope'" in one.stdout
    assert "x,y" in local.documents("single")

    keyed = icecdc("repair", "--config", str(path), "--table", "db.pairs", "--key", '{"a": 1, "b": "x,y"}')
    assert keyed.returncode == 0, keyed.stdout + keyed.stderr
    assert composite in local.documents("pairs") and "1 indexed" in keyed.stdout

    listed = local.workdir / "ids.txt"
    listed.write_text('z\n{"b": "x,y"}\n')
    delete(local, "single", "x,y")
    from_file = icecdc("repair", "--config", str(path), "--table", "db.single", "--ids-file", str(listed))
    assert from_file.returncode == 0 and "2 ids compared, 1 indexed" in from_file.stdout, from_file.stdout


def test_repair_names_binary_and_nested_keys(local: Pipeline) -> None:
    """A binary key's `_id` is its base64 text, a nested key's column a dotted path: `--id`,
    `--ids-file` and `--key` name them as documents hold them (found by the model-based test)."""
    binary = pa.schema([pa.field("k", pa.binary()), pa.field("v", pa.string())])
    nested = pa.schema([pa.field("key", pa.struct([pa.field("id", pa.int64())])), pa.field("v", pa.string())])
    local.catalog.create_table("db.blobs", schema=binary).append(
        pa.Table.from_pylist([{"k": b"b\x00", "v": "one"}, {"k": b"c", "v": "two"}], schema=binary)
    )
    local.catalog.create_table("db.deep", schema=nested).append(
        pa.Table.from_pylist([{"key": {"id": 1}, "v": "one"}, {"key": {"id": 2}, "v": "two"}], schema=nested)
    )
    raw = local.config_dict(
        [
            {"name": "db.blobs", "index": "blobs", "identifier_columns": ["k"]},
            {"name": "db.deep", "index": "deep", "identifier_columns": ["key.id"]},
        ]
    )
    path = local.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert icecdc("sync", "--config", str(path)).returncode == 0
    assert sorted(local.documents("blobs")) == ["YgA=", "Yw=="]
    listed = local.workdir / "ids.txt"
    listed.write_text('"Yw=="\n')
    named = (("YgA=", ["--id", "YgA="]), ("Yw==", ["--ids-file", str(listed)]), ("YgA=", ["--key", '{"k": "YgA="}']))
    for doc_id, names in named:
        delete(local, "blobs", doc_id)
        repaired = icecdc("repair", "--config", str(path), "--table", "db.blobs", *names)
        assert repaired.returncode == 0 and "1 indexed" in repaired.stdout, repaired.stdout + repaired.stderr
    assert sorted(local.documents("blobs")) == ["YgA=", "Yw=="]

    delete(local, "deep", "2")
    keyed = icecdc("repair", "--config", str(path), "--table", "db.deep", "--key", '{"key.id": 2}')
    assert keyed.returncode == 0 and "1 indexed" in keyed.stdout, keyed.stdout + keyed.stderr
    assert sorted(local.documents("deep")) == ["1", "2"]


def delete(pipeline: Pipeline, index: str, doc_id: str) -> None:
    """Delete a document as a careless writer would, at the version icecdc wrote."""
    version = pipeline.store().get_checkpoint(f"db.{index}").sequence_number
    options = {"version": version, "version_type": "external_gte", "refresh": True}
    pipeline.client.delete(index=index, id=doc_id, **options)


def test_repair_and_replay_after_the_shape_changed_say_sync_first_and_write_nothing(local: Pipeline) -> None:
    """Found by fuzz (2026-11-28): the index was built of some columns, the configuration changed to
    whole rows, and `repair --key` before a sync wrote whole rows into the old shape's strict mapping,
    failing as OpenSearch's fault. The next sync rebuilds the index: both commands now say so."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string()), pa.field("w", pa.string())])
    rows = [{"id": i, "v": f"v{i}", "w": f"w{i}"} for i in (1, 2)]
    local.catalog.create_table("db.shaped", schema=schema).append(pa.Table.from_pylist(rows, schema=schema))
    table = {"name": "db.shaped", "index": "shaped", "identifier_columns": ["id"]}
    raw = local.config_dict([{**table, "columns": ["id", "v"]}])
    raw["dead_letter"] = {"path": str(local.workdir / "dead-letters")}
    path = local.workdir / "icecdc.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert icecdc("sync", "--config", str(path)).returncode == 0
    raw["tables"] = [table]  # whole rows from now on
    path.write_text(yaml.safe_dump(raw))
    before = local.versions("shaped")

    for command in (("repair", "--table", "db.shaped", "--id", "1"), ("dead-letters", "replay", "--table", "db.shaped")):
        done = icecdc(*command, "--config", str(path))
        assert done.returncode == 2, done.stdout + done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "holds another shape of the table" in line and line.endswith("sync first"), line
    assert local.versions("shaped") == before

    assert icecdc("sync", "--config", str(path)).returncode == 0
    local.assert_index_equals_table(parse_config(raw), "db.shaped")
    assert icecdc("repair", "--config", str(path), "--table", "db.shaped", "--id", "1").returncode == 0

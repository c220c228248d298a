"""Progress of a long sync: inside each pass, its files and rows done out of the pass's totals,
the rate and the time left; after each pass, the sync's (an export's files applied, a backlog's
snapshots). Structured lines the CLI draws as a bar on a terminal."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyiceberg.manifest import DataFile, DataFileContent

from icecdc.cli import _ProgressBar
from icecdc.config import parse_config
from icecdc.engines.progress import PassMeter
from icecdc.model import ChangeType, EngineKind, PassProgress, PassStage, Progress
from icecdc.reading.tasks import FileTask
from tests.support.cli import icecdc
from tests.support.pipeline import ENGINES, Pipeline
from tests.support.tables import orders, rows

pytestmark = pytest.mark.drawn_destination  # the pipeline writes to a domain or a Serverless collection


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_a_capped_export_logs_its_progress_pass_by_pass(pipeline: Pipeline, caplog: pytest.LogCaptureFixture) -> None:
    table = orders(pipeline)
    for f in range(3):
        table.append(rows(*range(3 * f, 3 * f + 3)))
    lines = _pass_lines_of_a_capped_sync(pipeline, caplog)
    assert [line.split(" export_files=")[1].split()[0] for line in lines[:2]] == ["1/3", "2/3"]
    assert lines[0].startswith("progress table=db.orders passes=1 files=1 rows=3 ")
    assert "seconds_left=" in lines[0] and lines[2].startswith("progress table=db.orders passes=3 files=3 rows=9 ")


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_a_capped_backlog_logs_its_snapshots_and_time_left_pass_by_pass(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    table = orders(pipeline)
    table.append(rows(0))
    pipeline.sync(pipeline.config({"name": "db.orders"}), "db.orders")
    for f in range(1, 4):
        table.append(rows(f))
    lines = _pass_lines_of_a_capped_sync(pipeline, caplog)
    assert [line.split(" snapshots=")[1].split()[0] for line in lines[:2]] == ["1/3", "2/3"]
    assert "seconds_left=" in lines[0] and " snapshots=" not in lines[2]  # caught up


def _pass_lines_of_a_capped_sync(pipeline: Pipeline, caplog: pytest.LogCaptureFixture) -> list[str]:
    """The progress lines logged after each pass of a sync of db.orders capped at one file a pass."""
    config = parse_config({**pipeline.config_dict([{"name": "db.orders"}]), "batch": {"max_files": 1}})
    caplog.clear()  # earlier lines: the root logger is at INFO once the planner's handler module is imported
    with caplog.at_level(logging.INFO, logger="icecdc.progress"):
        pipeline.sync(config, "db.orders")
    return [r.getMessage() for r in caplog.records if r.name == "icecdc.progress" and " passes=" in r.getMessage()]


def test_the_bar_shows_files_rows_rate_and_time_left(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress("db.orders", 2, 20, 4000, 2.0, export_files=10, export_files_applied=5)
    record = logging.LogRecord("icecdc.progress", logging.INFO, __file__, 0, progress.line(), None, None)
    record.progress = progress
    _ProgressBar().emit(record)
    shown = capsys.readouterr().err
    assert "[###############...............] 5/10 files, 4,000 rows, 2,000 rows/s, ~2 s left" in shown


def test_the_bar_of_the_writes_shows_documents_and_their_rate(capsys: pytest.CaptureFixture[str]) -> None:
    progress = PassProgress("db.orders", PassStage.WRITES, 0, 0, 1000, 4000, 5.0)
    record = logging.LogRecord("icecdc.progress", logging.INFO, __file__, 0, progress.line(), None, None)
    record.progress = progress
    _ProgressBar().emit(record)
    shown = capsys.readouterr().err
    assert "writes [#######.......................] 1,000/4,000 documents, 200 documents/s, ~15 s left" in shown


def in_pass_lines(caplog: pytest.LogCaptureFixture, stage: PassStage) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "icecdc.progress" and f" stage={stage} " in r.getMessage()]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_one_pass_export_and_backlog_show_their_progress_inside_the_pass(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    """Default caps: an export of four files is one pass, and so is a backlog of three snapshots;
    each says its totals (files, and rows from the manifests) when it starts and is done out of them at its end."""
    table = orders(pipeline)
    for f in range(4):
        table.append(rows(*range(3 * f, 3 * f + 3)))
    config = pipeline.config({"name": "db.orders"})
    with caplog.at_level(logging.INFO, logger="icecdc.progress"):
        pipeline.sync(config, "db.orders")
    export = in_pass_lines(caplog, PassStage.EXPORT)
    assert export[0].startswith("progress table=db.orders stage=export files=0/4 rows=0/12 ")
    assert export[-1].startswith("progress table=db.orders stage=export files=4/4 rows=12/12 ")
    assert "seconds_left=0" in export[-1] and all(" files=" in line and "/4 rows=" in line for line in export)

    for f in range(4, 7):
        table.append(rows(*range(3 * f, 3 * f + 3)))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="icecdc.progress"):
        pipeline.sync(config, "db.orders")
    backlog = in_pass_lines(caplog, PassStage.CHANGES)
    assert backlog[0].startswith("progress table=db.orders stage=changes files=0/3 rows=0/9 ")
    assert backlog[-1].startswith("progress table=db.orders stage=changes files=3/3 rows=9/9 ")


def data_task(rows: int) -> FileTask:
    data = DataFile.from_args(content=DataFileContent.DATA, file_path=f"f-{rows}", file_size_in_bytes=1, record_count=rows)
    return FileTask(data, ChangeType.INSERT, 1, 1)


def test_a_pass_logs_a_line_at_its_start_every_ten_seconds_and_at_its_end(caplog: pytest.LogCaptureFixture) -> None:
    """What output that is not a terminal gets (the Glue job's, the planner's logs); a bar redraws
    from the DEBUG records between. A clock the test moves: no waiting."""
    now = [100.0]
    tasks = [data_task(1000) for _ in range(20)]
    with caplog.at_level(logging.DEBUG, logger="icecdc.progress"):
        meter = PassMeter("db.orders", PassStage.EXPORT, tasks, clock=lambda: now[0])
        for task in meter.counting(tasks):  # a task every 2.5 s
            assert task in tasks
            now[0] += 2.5
    lines = [(r.levelno, r.getMessage().split()[3]) for r in caplog.records]
    info = [line for level, line in lines if level == logging.INFO]
    assert info == ["files=0/20", "files=4/20", "files=8/20", "files=12/20", "files=16/20", "files=20/20"]
    assert len(lines) == 21  # every task after the first, each 2.5 s after the last record
    end = caplog.records[-1].progress  # type: ignore[attr-defined]
    assert (end.rows, end.rows_total, end.rows_per_second, end.seconds_left) == (20_000, 20_000, 400.0, 0.0)


def test_an_in_pass_bar_shows_files_rows_rate_and_time_left(capsys: pytest.CaptureFixture[str]) -> None:
    progress = PassProgress("db.orders", PassStage.EXPORT, 3, 12, 4000, 16000, 2.0)
    record = logging.LogRecord("icecdc.progress", logging.DEBUG, __file__, 0, progress.line(), None, None)
    record.progress = progress
    _ProgressBar().emit(record)
    shown = capsys.readouterr().err
    assert "db.orders: export [#######.......................] 3/12 files, 4,000/16,000 rows, 2,000 rows/s, ~6 s left" in shown


def test_a_sync_whose_output_is_no_terminal_logs_progress_lines(pipeline: Pipeline, tmp_path: Path) -> None:
    table = orders(pipeline)
    for f in range(3):
        table.append(rows(*range(2 * f, 2 * f + 2)))
    path = tmp_path / "icecdc.yaml"
    path.write_text(yaml.safe_dump({**pipeline.config_dict([{"name": "db.orders"}]), "engine": {"use": "in_process"}}))
    synced = icecdc("sync", "--config", str(path))
    assert synced.returncode == 0, synced.stderr
    lines = [line.split("icecdc.progress: ", 1)[1] for line in synced.stderr.splitlines() if "icecdc.progress: " in line]
    assert lines[0].startswith("progress table=db.orders stage=export files=0/3 rows=0/6 ")
    assert lines[1].startswith("progress table=db.orders stage=export files=3/3 rows=6/6 ")
    assert lines[2].startswith("progress table=db.orders passes=1 files=3 rows=6 ")  # after the pass
    assert "\r" not in synced.stderr  # no bar


def test_an_in_process_backlog_shows_its_writes_after_its_reads(
    tmp_path: Path, osmem_clone: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The writes of a backlog's documents, the slow part on a slow server, are a stage of their
    own: documents written out of the keys to write, with their rate, up to the end."""
    pipeline = Pipeline(tmp_path, osmem_clone.url, spark=None, engine=EngineKind.IN_PROCESS)
    table = orders(pipeline)
    table.append(rows(1))
    config = pipeline.config({"name": "db.orders"})
    pipeline.sync(config, "db.orders")
    table.append(rows(*range(2, 1202)))
    with caplog.at_level(logging.INFO, logger="icecdc.progress"):
        pipeline.sync(config, "db.orders")
    said = [r.getMessage() for r in caplog.records if r.name == "icecdc.progress"]
    writes = in_pass_lines(caplog, PassStage.WRITES)
    assert writes[0].startswith("progress table=db.orders stage=writes documents=0/1200 documents_per_second=")
    assert writes[-1].startswith("progress table=db.orders stage=writes documents=1200/1200 ")
    reads = in_pass_lines(caplog, PassStage.CHANGES)
    assert said.index(reads[-1]) < said.index(writes[0])  # after the reads

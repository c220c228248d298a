"""Progress of a long sync: one structured line per pass (files, rows, rate, an export's files
applied and the time left), which the CLI draws as a bar on a terminal."""

from __future__ import annotations

import logging

import pytest

from icecdc.cli import _ProgressBar
from icecdc.config import parse_config
from icecdc.model import EngineKind, Progress
from tests.support.pipeline import Pipeline
from tests.support.tables import orders, rows


@pytest.mark.parametrize("engine", [EngineKind.IN_PROCESS])
def test_a_capped_export_logs_its_progress_pass_by_pass(pipeline: Pipeline, caplog: pytest.LogCaptureFixture) -> None:
    table = orders(pipeline)
    for f in range(3):
        table.append(rows(*range(3 * f, 3 * f + 3)))
    config = parse_config({**pipeline.config_dict([{"name": "db.orders"}]), "batch": {"max_files": 1}})
    with caplog.at_level(logging.INFO, logger="icecdc.progress"):
        pipeline.sync(config, "db.orders")
    lines = [r.getMessage() for r in caplog.records if r.name == "icecdc.progress"]
    assert [line.split(" export_files=")[1].split()[0] for line in lines[:2]] == ["1/3", "2/3"]
    assert lines[0].startswith("progress table=db.orders passes=1 files=1 rows=3 ")
    assert "seconds_left=" in lines[0] and lines[2].startswith("progress table=db.orders passes=3 files=3 rows=9 ")


def test_the_bar_shows_files_rows_rate_and_time_left(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress("db.orders", 2, 20, 4000, 2.0, export_files=10, export_files_applied=5)
    record = logging.LogRecord("icecdc.progress", logging.INFO, __file__, 0, progress.line(), None, None)
    record.progress = progress
    _ProgressBar().emit(record)
    shown = capsys.readouterr().err
    assert "[###############...............] 5/10 files, 4,000 rows, 2,000 rows/s, ~2 s left" in shown

"""`icecdc demo`, as `make demo` runs it: every step ends with the index equal to the table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.spark  # the demo runs its own Spark and osmem
@pytest.mark.opensearch
def test_demo(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "icecdc.cli", "demo", "--dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("✓ index equals table") == 7
    assert (
        "compaction (replace snapshot: no document written)\n   sync (in_process engine): 1 snapshot, 0 files, 0 rows read"
        in result.stdout
    )
    assert (tmp_path / "demo" / "icecdc.yaml").exists()

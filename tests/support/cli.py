"""The `icecdc` command as users run it: a subprocess with a config file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def icecdc(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `icecdc args` (in `cwd`); the test's import path is the command's."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)} if env is None else env
    return subprocess.run(
        [sys.executable, "-m", "icecdc.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=environment,
        cwd=cwd,
    )

"""What the AWS bundles carry: the library the entries run, never the demo or the test commits."""

from __future__ import annotations

import zipfile
from pathlib import Path

from infra.bundling import build_bundles

ROOT = Path(__file__).resolve().parents[2]


def test_the_lambda_and_glue_bundles_ship_the_library_without_the_demo_and_the_test_commits(tmp_path: Path) -> None:
    config = tmp_path / "icecdc.yaml"
    config.write_text("tables: []\n")
    bundles = build_bundles(ROOT, config, placeholder=True)
    lambda_files = {p.relative_to(bundles.lambda_code).as_posix() for p in bundles.lambda_code.rglob("*.py")}
    glue_files = set(zipfile.ZipFile(bundles.glue_library).namelist())
    for shipped in (lambda_files, glue_files):
        assert {"icecdc/processing.py", "icecdc/model.py", "icecdc/state/dynamodb.py"} <= shipped
        assert not {f for f in shipped if f.startswith("icecdc/testing/") or f == "icecdc/demo.py"}

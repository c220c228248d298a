"""Code names no issue numbers: a reader of the repository has no tracker to look them up in, so
a comment or docstring names the behaviour or the measurement instead (CONTRIBUTING.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = ("icecdc", "bench", "tests", "infra", "lambdas", "glue_jobs")
BUILT = {"node_modules", "cdk.out", "__pycache__"}  # not written by hand
SUFFIXES = {".py", ".ts", ".js", ".sh", ".toml", ".yaml", ".yml", ".json", ".cfg"}
# "issue 40", "issues 40 and 41", "issue #41", "issue 24's", a bare "#41"; not an upstream
# project's reference a reader can look up ("gh-106905", "opensearch-project/data-prepper#6666").
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+|(?<![\w&/])#\d+\b", re.IGNORECASE)
# This file's examples; and files another piece of work rewords: the model-based test's support.
NOT_SCANNED = {"tests/test_prose.py"}


def code_files() -> list[Path]:
    files = [ROOT / "Makefile"]
    for top in CODE:
        files += [
            path
            for path in sorted((ROOT / top).rglob("*"))
            if path.is_file() and path.suffix in SUFFIXES and not BUILT & set(path.parts)
        ]
    return [p for p in files if p.relative_to(ROOT).as_posix() not in NOT_SCANNED]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("# the layouts with every default (issue 24's).", True),
        ('"""What duplicate checks cost (issue 40 item 5)."""', True),
        ("# fixed for #41", True),
        ("# see Issues #7 and 8", True),
        ("# CPython gh-106905: a collection inside a parse", False),
        ("# the issue's case", False),
        ("colour = '&#39;'", False),
        ("url = 'https://example.com/a#12'", False),
        ("# opensearch-project/data-prepper#6666: the DELETE", False),
    ],
)
def test_the_pattern_finds_issue_numbers_and_nothing_else(text: str, found: bool) -> None:
    assert bool(ISSUE_NUMBER.search(text)) is found


def test_code_names_no_issue_numbers() -> None:
    named = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in code_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if ISSUE_NUMBER.search(line)
    ]
    assert not named, "name the behaviour, not the issue:\n" + "\n".join(named)

"""Prose in the code: no issue numbers, docstrings that open with one line, short lines.

A reader of the repository has no tracker to look issue numbers up in, so a comment or docstring
names the behaviour or the measurement instead (CONTRIBUTING.md). A one-line summary is what
`help()` and an editor show of a docstring; the line length is ruff's.
"""

from __future__ import annotations

import ast
import re
import tomllib
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


# Prose in icecdc/: a docstring opens with one line that says what the thing is or does, then a
# blank line and the rest; no line runs past the line length icecdc/ruff.toml sets for ruff format.
LINE_LENGTH = tomllib.loads((ROOT / "icecdc" / "ruff.toml").read_text())["line-length"]
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def library_files() -> list[Path]:
    return sorted((ROOT / "icecdc").rglob("*.py"))


def summary_faults(source: str) -> list[str]:
    """Where a docstring in `source` does not open with a one-line summary.

    The summary starts right after the opening quotes; a docstring of several lines needs a blank
    line after it.
    """
    faults = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, DOCUMENTED) or (text := ast.get_docstring(node, clean=False)) is None:
            continue
        lines = text.splitlines()
        if not lines or not lines[0].strip() or (len(lines) > 1 and lines[1].strip()):
            name = getattr(node, "name", "the module")
            faults.append(f"{getattr(node, 'lineno', 1)}: {name}: {lines[0] if lines else ''}")
    return faults


@pytest.mark.parametrize(
    ("source", "faults"),
    [
        ('"""One line."""', 0),
        ('"""One line.\n\nThe why, in\nplain sentences.\n"""', 0),
        ('def f():\n    """A summary.\n\n    The why.\n    """', 0),
        ('"""A summary that runs\nonto a second line."""', 1),
        ('class C:\n    """A summary that runs\n    on.\n\n    The why."""', 1),
        ('def f():\n    """\n    Starts on the second line.\n    """', 1),
        ("x = 1", 0),
    ],
)
def test_the_summary_check_finds_a_summary_of_several_lines(source: str, faults: int) -> None:
    assert len(summary_faults(source)) == faults


def test_docstrings_open_with_a_one_line_summary() -> None:
    faults = [f"{path.relative_to(ROOT)}:{fault}" for path in library_files() for fault in summary_faults(path.read_text())]
    assert not faults, "open with one line, then a blank line and the why:\n" + "\n".join(faults)


def test_lines_in_icecdc_fit_the_line_length() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{number}: {len(line)} characters"
        for path in library_files()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if len(line) > LINE_LENGTH
    ]
    assert not long, f"lines over {LINE_LENGTH} characters:\n" + "\n".join(long)

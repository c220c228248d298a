"""What a package people install carries: its license as pyproject.toml declares it, a changelog
with the work not yet released, and the Pythons it supports."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent


def project() -> dict[str, Any]:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"])


def test_the_license_file_is_the_apache_license_pyproject_declares() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert project()["license"] == "Apache-2.0"
    assert "Apache License\n" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_changelog_has_the_unreleased_work() -> None:
    lines = (ROOT / "CHANGELOG.md").read_text().splitlines()
    assert lines[0] == "# Changelog" and "## [Unreleased]" in lines


def test_python_3_11_to_3_13_are_supported() -> None:
    supported = SpecifierSet(project()["requires-python"])
    assert all(version in supported for version in ("3.11.7", "3.12.1", "3.13.0"))
    assert "3.14.0" not in supported and "3.10.13" not in supported

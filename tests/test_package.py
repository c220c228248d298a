"""What a package people install carries: its license as pyproject.toml declares it, a changelog
with the work not yet released, the Pythons it supports, and a wheel that installs and runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent
# Files in icecdc/ that configure a tool, not the package: never in the wheel.
TOOL_CONFIGS = {"ruff.toml"}  # the library's line length (icecdc/ruff.toml)


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


# What a wheel built from this tree holds beyond icecdc/: its metadata, nothing else (no tests,
# infra, bench, local, lambdas or glue_jobs: those run from a checkout, or ship in the AWS bundle).
SOURCE_ONLY = shutil.ignore_patterns(
    ".venv*", ".build", ".git", "cdk.out", "__pycache__", "*.egg-info", "build", "dist",
    ".pytest_cache",
)  # fmt: skip


def built_wheel(tmp_path: Path) -> Path:
    """The wheel `pip wheel` builds from a copy of this tree (isolated, as a user's pip builds)."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=SOURCE_ONLY)
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(dist), source], check=True, timeout=600)
    (wheel,) = dist.glob("icecdc-*.whl")
    return wheel


def as_user(venv: Path, *command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command of `venv`, run as a user would: another directory, no PYTHONPATH to this tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    executable = str(venv / "bin" / command[0])
    run = [executable, *command[1:]]
    return subprocess.run(run, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # builds a wheel, installs it with its dependencies (package index) in a new venv
@pytest.mark.opensearch  # the demo runs its own osmem
def test_the_wheel_installs_in_a_fresh_venv_and_runs_the_demo(tmp_path: Path) -> None:
    """`pip install 'icecdc[local]'` from the wheel, then `icecdc --version` and `icecdc demo`."""
    wheel = built_wheel(tmp_path)
    info = f"icecdc-{project()['version']}.dist-info/"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read(f"{info}entry_points.txt").decode()
    assert {name.split("/")[0] + "/" for name in names} == {"icecdc/", info}
    package = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "icecdc").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.name not in TOOL_CONFIGS
    }  # fmt: skip
    assert package <= names, sorted(package - names)  # every module and data file of the package
    assert f"{info}licenses/LICENSE" in names and "icecdc = icecdc.cli:entry" in entry_points

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    constraints = str(ROOT / "infra" / "locks" / "tested.txt")
    requirement = f"icecdc[local] @ {wheel.as_uri()}"
    install = as_user(venv, "pip", "install", "-q", "-c", constraints, requirement, cwd=tmp_path)
    assert install.returncode == 0, install.stderr
    version = as_user(venv, "icecdc", "--version", cwd=tmp_path)
    expected = (0, f"icecdc {project()['version']}\n")
    assert (version.returncode, version.stdout) == expected, version.stderr
    where = as_user(venv, "python", "-c", "import icecdc; print(icecdc.__file__)", cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr
    demo = as_user(venv, "icecdc", "demo", "--dir", str(tmp_path / "demo"), cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert demo.stdout.count("✓ index equals table") == 7, demo.stdout

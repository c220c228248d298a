"""What the AWS bundles carry: the library the entries run, never the demo or the test commits; and
the dependencies, exactly the files the locks name: pinned, hashed, downloaded
with --require-hashes at synth time, a file whose hash differs refused."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import time
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from infra import bundling
from infra.bundling import (
    GLUE,
    JOB_INSTALLER_OPTIONS,
    LAMBDA,
    LAMBDA_BOTOCORE_SERVICES,
    LAMBDA_PYTHON,
    BytecodeCompiler,
    Platform,
    build_bundles,
    glue_wheels,
    glue_wheels_name,
    lambda_code,
    lambda_layer,
)
from infra.lock import TESTED, render_tested

ROOT = Path(__file__).resolve().parents[2]
LOCKED = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>\S+) \\\n    --hash=sha256:(?P<sha>[0-9a-f]{64})$", re.M)


def test_the_lambda_and_glue_bundles_ship_the_library_without_the_demo_and_the_test_commits(tmp_path: Path) -> None:
    config = tmp_path / "icecdc.yaml"
    config.write_text("tables: []\n")
    bundles = build_bundles(ROOT, config, placeholder=True)
    lambda_files = {p.relative_to(bundles.lambda_code).as_posix() for p in bundles.lambda_code.rglob("*.py")}
    glue_files = set(zipfile.ZipFile(bundles.glue_library).namelist())
    for shipped in (lambda_files, glue_files):
        assert {"icecdc/sync/passes.py", "icecdc/model.py", "icecdc/state/dynamodb.py"} <= shipped
        assert not {f for f in shipped if f.startswith("icecdc/testing/") or f == "icecdc/demo.py"}
    # what Glue installs: the lock itself as the zip's requirements (the placeholder has no wheels)
    assert bundles.glue_wheels.name == glue_wheels_name(GLUE.lock)
    with zipfile.ZipFile(bundles.glue_wheels) as archive:
        assert archive.namelist() == ["wheels/requirements.txt"]
        assert archive.read("wheels/requirements.txt") == GLUE.lock.read_bytes()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "icecdc.yaml"
    path.write_text("tables: []\n")
    return path


def _files(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def test_the_planner_code_ships_the_same_bytecode_every_synth(tmp_path: Path, config: Path) -> None:
    """Bytecode of the runtime's CPython beside every module, the same bytes from two builds: the
    code's asset hash, and so the deployed function, changes only when the code does."""
    first, second = (_files(lambda_code(ROOT, tmp_path / name, config)) for name in ("one", "two"))
    assert first == second
    tag = f"cpython-{LAMBDA_PYTHON.replace('.', '')}"
    sources = [Path(name) for name in first if name.endswith(".py")]
    missing = [s for s in sources if (s.parent / "__pycache__" / f"{s.stem}.{tag}.pyc").as_posix() not in first]
    assert sources and not missing, missing
    assert b"/var/task/icecdc/model.py" in first[f"icecdc/__pycache__/model.{tag}.pyc"]  # tracebacks name the deployed path
    assert str(ROOT).encode() not in b"".join(first.values())  # no path of the build machine


def test_a_synth_never_rewrites_planner_code_another_synth_may_be_copying(tmp_path: Path, config: Path) -> None:
    """Synths run side by side (pytest's workers, two terminals): the same sources find their tree
    published and leave it be; changed ones get a tree of their own. A CI run once failed when one
    synth rebuilt the code in place while CDK copied it into another's cloud assembly."""
    out, compiler = tmp_path / "out", BytecodeCompiler.none()
    first = lambda_code(ROOT, out, config, compiler)
    inodes = {path: path.stat().st_ino for path in first.rglob("*")}
    assert lambda_code(ROOT, out, config, compiler) == first
    config.write_text("tables: []\n# changed\n")
    second = lambda_code(ROOT, out, config, compiler)
    assert second != first and (second / "icecdc.yaml").read_text().endswith("# changed\n")
    assert {path: path.stat().st_ino for path in first.rglob("*")} == inodes
    assert sorted(p.name for p in out.iterdir()) == sorted([first.name, second.name])  # no staging left


def test_a_build_removes_planner_code_no_synth_used_for_a_day(tmp_path: Path, config: Path) -> None:
    """Each configuration gets a tree (each test's is its own): a build removes the trees unused
    for `UNUSED_SECONDS`, and a synth that finds its tree marks it used."""
    out, compiler = tmp_path / "out", BytecodeCompiler.none()
    long_ago = time.time() - bundling.UNUSED_SECONDS - 60
    first = lambda_code(ROOT, out, config, compiler)
    os.utime(first, (long_ago, long_ago))
    assert lambda_code(ROOT, out, config, compiler) == first and first.stat().st_mtime > long_ago + 60
    os.utime(first, (long_ago, long_ago))
    config.write_text("tables: []\n# another\n")
    second = lambda_code(ROOT, out, config, compiler)
    assert [p.name for p in out.iterdir()] == [second.name]


def test_without_the_runtimes_python_synth_warns_and_ships_the_sources(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(bundling, "runtime_interpreter", lambda python=LAMBDA_PYTHON: None)
    code = lambda_code(ROOT, tmp_path / "code", config)
    assert (code / "icecdc" / "model.py").is_file()
    assert not list(code.rglob("*.pyc"))
    assert f"no python{LAMBDA_PYTHON} on this machine" in caplog.text


@pytest.mark.parametrize("platform", [GLUE, LAMBDA], ids=["glue", "lambda"])
def test_the_locks_pin_every_package_with_its_hash_at_the_tested_versions(platform: Platform) -> None:
    text = platform.lock.read_text()
    entries = {m["name"].lower().replace("_", "-"): m["version"] for m in LOCKED.finditer(text)}
    requirement_lines = [line for line in text.splitlines() if line and not line.startswith(("#", "    --hash"))]
    assert len(entries) == len(requirement_lines) > 10  # every requirement has its one sha256
    for requirement in platform.requirements:  # the top level, at the versions of this virtualenv
        name, pinned = re.sub(r"\[.*\]", "", requirement).split("==")
        assert entries[name.lower()] == pinned, requirement
    unpinned = {name.lower() for name in platform.not_pinned_to_the_virtualenv}
    assert not {name for name, _ in platform.left_out} & set(entries)  # never imported: not installed
    for name, locked in entries.items():  # the rest too, where the suite runs it (re-lock: python -m infra.lock)
        try:
            tested = version(name)
        except PackageNotFoundError:
            continue
        assert name in unpinned or tested == locked, f"{platform.lock.name}: {name} {locked} is locked, {tested} tested"


def test_the_virtualenv_installs_at_the_versions_the_locks_name() -> None:
    # The Makefile's installs take infra/locks/tested.txt as constraints: without them a fresh clone
    # installs whatever was released since locking (grpcio 1.85.3 against a lock of 1.85.1 failed CI).
    assert TESTED.read_text() == render_tested((GLUE, LAMBDA)), "re-lock: python -m infra.lock"
    makefile = (ROOT / "Makefile").read_text()
    installs = re.findall(r"pip install -q (.* -e .*)", makefile)  # the project, with its extras
    assert len(installs) >= 4 and all(line.startswith("-c $(CONSTRAINTS) ") for line in installs), installs
    assert f"CONSTRAINTS := {TESTED.relative_to(ROOT).as_posix()}" in makefile


def test_the_planner_layer_keeps_the_models_of_every_aws_service_the_planner_calls() -> None:
    # The layer keeps botocore's models of LAMBDA_BOTOCORE_SERVICES only: a client of any other
    # service would fail in the Lambda alone. Every client the planner's code makes is among them.
    sources = [*(ROOT / "icecdc").rglob("*.py"), ROOT / "lambdas" / "planner" / "handler.py"]
    called = {
        service
        for path in sources
        # the doctor runs on an operator's machine, never in the planner
        if not {"testing", "doctor"} & set(path.parts) and path.name != "demo.py"
        for service in re.findall(r"""\bclient\(\s*["']([a-z0-9-]+)["']""", path.read_text())
    }
    assert called >= {"s3", "glue", "cloudwatch", "dynamodb"}  # the search finds them
    assert called <= set(LAMBDA_BOTOCORE_SERVICES), called - set(LAMBDA_BOTOCORE_SERVICES)


def probe_wheel(directory: Path) -> Path:
    """A tiny pure-Python wheel, so that the download runs offline against a local --find-links."""
    files = {
        "icecdc_probe/__init__.py": b"PROBE = True\n",
        "icecdc_probe-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: icecdc-probe\nVersion: 1.0\n",
        "icecdc_probe-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for name, data in files.items()
    )
    path = directory / "icecdc_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("icecdc_probe-1.0.dist-info/RECORD", record + "icecdc_probe-1.0.dist-info/RECORD,,\n")
    return path


def test_synth_takes_exactly_the_locked_files_and_refuses_any_other(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    wheel = probe_wheel(index)
    offline = ("--no-index", "--find-links", str(index))
    lock = tmp_path / "probe.txt"
    lock.write_text(f"icecdc-probe==1.0 \\\n    --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n")

    zipped = glue_wheels(tmp_path / "out", lock, offline)
    with zipfile.ZipFile(zipped) as archive:
        assert sorted(archive.namelist()) == ["wheels/icecdc_probe-1.0-py3-none-any.whl", "wheels/requirements.txt"]
        assert archive.read("wheels/requirements.txt") == lock.read_bytes()
        assert archive.read(f"wheels/{wheel.name}") == wheel.read_bytes()
    assert glue_wheels(tmp_path / "out", lock, offline) == zipped  # cached by the lock's digest
    layer = lambda_layer(tmp_path / "out", lock, offline)
    assert (layer / "python" / "icecdc_probe" / "__init__.py").read_text() == "PROBE = True\n"

    tampered = tmp_path / "tampered.txt"
    tampered.write_text(f"icecdc-probe==1.0 \\\n    --hash=sha256:{'0' * 64}\n")
    with pytest.raises(SystemExit, match="DO NOT MATCH THE HASHES"):  # pip's own words
        glue_wheels(tmp_path / "out", tampered, offline)
    unhashed = tmp_path / "unhashed.txt"
    unhashed.write_text("icecdc-probe==1.0\n")
    with pytest.raises(SystemExit, match="Hashes are required in --require-hashes mode"):
        lambda_layer(tmp_path / "out", unhashed, offline)
    staged = [p.name for p in (tmp_path / "out").iterdir() if p.is_dir() and "." in p.name]
    assert not staged, staged  # a refused build leaves no staging directory behind


def test_the_zip_of_wheels_is_what_glue_5_installs_and_installs_offline_as_glue_does(tmp_path: Path) -> None:
    """AWS Glue 5.x's zip of wheels (docs/deploy.md, "Locked dependencies"): a name ending in
    `.gluewheels.zip`; one top-level folder `wheels/` holding the `.whl` files and `requirements.txt`,
    nothing else; installed by pip from that folder with the job's installer options (`--no-index`:
    no package index is reached). Here pip installs it as Glue documents it."""
    index = tmp_path / "index"
    index.mkdir()
    wheel = probe_wheel(index)
    lock = tmp_path / "probe.txt"
    lock.write_text(f"icecdc-probe==1.0 \\\n    --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n")
    zipped = glue_wheels(tmp_path / "out", lock, ("--no-index", "--find-links", str(index)))
    assert zipped.name.endswith(".gluewheels.zip") and zipped.name == glue_wheels_name(lock)
    with zipfile.ZipFile(zipped) as archive:
        names = archive.namelist()
        assert all(n.startswith("wheels/") and "/" not in n.removeprefix("wheels/") for n in names)
        assert {n for n in names if not n.endswith(".whl")} == {"wheels/requirements.txt"}
        archive.extractall(tmp_path / "job")
    # every wheel is named in requirements.txt, pinned with its hash (pip then checks them all)
    pinned = {m["name"].lower().replace("_", "-"): m["sha"] for m in LOCKED.finditer(lock.read_text())}
    for path in (tmp_path / "job" / "wheels").glob("*.whl"):
        assert pinned[path.name.split("-")[0].replace("_", "-")] == hashlib.sha256(path.read_bytes()).hexdigest()
    installer_options = JOB_INSTALLER_OPTIONS.split()
    wheels = tmp_path / "job" / "wheels"
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *installer_options,
         "--find-links", str(wheels), "-r", str(wheels / "requirements.txt"), "--target", str(target)],
        check=True, capture_output=True,
    )  # fmt: skip
    assert (target / "icecdc_probe" / "__init__.py").read_text() == "PROBE = True\n"

"""Build the deployable artifacts at synth time, without Docker.

- Dependencies come from locks (`infra/locks/*.txt`, written by `python -m infra.lock`): every
  distribution pinned with its sha256, for CPython 3.11 on the target's platform. Synth downloads
  exactly those wheels with `pip --require-hashes --only-binary=:all:` (a file whose hash differs
  is refused), once: they are cached under .build/ by the lock's digest.
- The Glue job's dependencies: a zip of wheels (`<name>.gluewheels.zip`: `wheels/requirements.txt`,
  the lock with its hashes, and `wheels/*.whl`), installed by Glue 5.1 with `--no-index`, so a run
  asks no package index and pip checks every hash again.
- The planner's dependencies: the Lambda lock installed into a layer directory (`--no-deps`: the
  lock is the whole closure).
- The planner's code: handler + the icecdc package + the configuration file.
- The Glue job's code: the icecdc package as a zip for --extra-py-files (written byte-for-byte the
  same every time, so the asset hash changes only when the code does).
- `placeholder=True` (context `icecdc:placeholderBundles=true`) downloads nothing: the layer is an
  empty directory and the zip of wheels holds only the lock. For the CDK assertion tests, which
  check the template and never run the code.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

log = logging.getLogger(__name__)

PYTHON = "3.11"  # the library requires 3.11, as Glue 5.1 runs it; the planner's runtime is the same
LOCKS = Path(__file__).resolve().parent / "locks"


def manylinux(glibc_minor: int) -> tuple[str, ...]:
    """The wheel platforms a Linux x86_64 with glibc 2.`glibc_minor` runs: pip takes `--platform`
    literally (manylinux_2_28 does not admit a manylinux_2_17 wheel), so every tag is listed."""
    return (
        *(f"manylinux_2_{minor}_x86_64" for minor in range(glibc_minor, 4, -1)),
        "manylinux2014_x86_64",
        "manylinux2010_x86_64",
        "manylinux1_x86_64",
    )


@dataclass(frozen=True)
class Target:
    """Where a lock's wheels run: the top-level requirements, the platforms their wheels may be for."""

    description: str
    requirements: tuple[str, ...]
    platforms: tuple[str, ...]
    lock: Path
    # Left to the resolver when locking, not pinned to the virtualenv's version (infra.lock).
    unpinned: tuple[str, ...] = ()


# Glue 5.1 runs on Amazon Linux 2023 (glibc 2.34): manylinux wheels up to 2_34. What the job
# imports beyond Glue's own packages (pyspark, boto3), at the versions this repo is tested with.
GLUE = Target(
    "AWS Glue 5.1 job",
    (
        f"pyiceberg[pyarrow]=={version('pyiceberg')}",
        f"opensearch-py=={version('opensearch-py')}",
        f"pydantic=={version('pydantic')}",
        f"pyyaml=={version('pyyaml')}",
    ),
    manylinux(34),
    LOCKS / "glue.txt",
)
# The planner reads only metadata (manifests are Avro): no pyarrow (the largest wheel by far) and
# no opensearch-py. fsspec's s3fs is its FileIO instead (see LAMBDA_CATALOG_PROPERTIES). Lambda's
# python3.11 runtime is Amazon Linux 2 (glibc 2.26): manylinux wheels up to 2_26.
LAMBDA = Target(
    "planner Lambda layer",
    (f"pyiceberg[glue,s3fs]=={version('pyiceberg')}", f"pydantic=={version('pydantic')}", f"pyyaml=={version('pyyaml')}"),
    manylinux(26),
    LOCKS / "lambda.txt",
    # s3fs (not in the virtualenv) requires the fsspec of its own release and, through aiobotocore, a
    # narrow botocore range: those follow s3fs.
    unpinned=("fsspec", "boto3", "botocore", "s3transfer"),
)
LAMBDA_CATALOG_PROPERTIES = {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Bundles:
    lambda_code: Path  # handler.py, icecdc/, icecdc.yaml
    lambda_layer: Path  # python/<site-packages>
    glue_script: Path
    glue_library: Path  # icecdc.zip
    glue_wheels: Path  # <name>.gluewheels.zip
    config: Path
    custom_resources: Path  # the stack's custom resources (their own Python, no dependencies)


def build_bundles(root: Path, config_path: Path, placeholder: bool = False) -> Bundles:
    out = root / ".build"
    return Bundles(
        lambda_code=_lambda_code(root, out / "planner-code", config_path),
        lambda_layer=_placeholder_layer(out) if placeholder else lambda_layer(out),
        glue_script=root / "glue_jobs" / "icecdc_job.py",
        glue_library=_library_zip(root, out / "glue" / "icecdc.zip"),
        glue_wheels=glue_wheels(out, placeholder=placeholder),
        config=config_path,
        custom_resources=root / "lambdas" / "custom_resources",
    )


def lock_digest(lock: Path) -> str:
    return hashlib.sha256(lock.read_bytes()).hexdigest()[:16]


def glue_wheels_name(lock: Path = GLUE.lock) -> str:
    """The zip's name, which Glue requires to end in `.gluewheels.zip`; one per lock."""
    return f"icecdc-deps-{lock_digest(lock)}.gluewheels.zip"


def platform_options(target: Target) -> list[str]:
    platforms = [option for platform in target.platforms for option in ("--platform", platform)]
    return ["--only-binary=:all:", "--implementation", "cp", "--python-version", PYTHON, *platforms]


def glue_wheels(out: Path, lock: Path = GLUE.lock, pip_options: Sequence[str] = (), placeholder: bool = False) -> Path:
    """The Glue job's zip of wheels for `lock`, built once and cached under `out` by the lock's digest.
    `pip_options`: extra pip options (an index, find-links); `placeholder`: the lock alone, no wheels."""
    name = glue_wheels_name(lock)
    zipped = out / ("glue-wheels-placeholder" if placeholder else f"glue-wheels-{lock_digest(lock)}") / name
    if zipped.is_file() and not placeholder:
        return zipped
    zipped.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        wheels = Path(tmp) / "wheels"
        wheels.mkdir()
        if not placeholder:
            _pip("download", GLUE, lock, ["--dest", str(wheels)], pip_options)
        shutil.copyfile(lock, wheels / "requirements.txt")  # Glue installs this file, hashes and all
        partial = Path(tmp) / name
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(wheels.iterdir()):
                _add(archive, f"wheels/{path.name}", path.read_bytes())
        partial.replace(zipped)  # the cache holds only complete zips
    return zipped


def lambda_layer(out: Path, lock: Path = LAMBDA.lock, pip_options: Sequence[str] = ()) -> Path:
    """The planner's dependency layer for `lock` under `out`, installed once and cached by the lock's digest."""
    layer = out / f"planner-layer-{lock_digest(lock)}"
    if (layer / "python").is_dir():
        return layer
    staging = out / f"{layer.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    _pip("install", LAMBDA, lock, ["--no-deps", "--target", str(staging / "python")], pip_options)
    for cache in (staging / "python").rglob("__pycache__"):
        shutil.rmtree(cache)  # compiled on the build machine; the runtime writes its own
    staging.rename(layer)  # the cache holds only complete layers
    return layer


def _pip(command: str, target: Target, lock: Path, where: list[str], pip_options: Sequence[str]) -> None:
    arguments = [
        sys.executable, "-m", "pip", command, "--quiet", "--disable-pip-version-check", "--require-hashes",
        *(["--no-deps"] if command == "download" else []), *platform_options(target), "-r", str(lock), *where, *pip_options,
    ]  # fmt: skip
    log.info("%s: %s", target.description, " ".join(arguments))
    try:
        subprocess.run(arguments, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(
            f"pip could not {command} the {target.description}'s locked wheels ({lock}):\n{exc.stderr.strip()}\n"
            "synth needs a package index once (a mismatching hash is refused: re-lock with `python -m infra.lock` "
            "if the lock is stale), or pass -c icecdc:placeholderBundles=true for a template that is not deployable"
        ) from None


def _placeholder_layer(out: Path) -> Path:
    layer = out / "planner-layer-placeholder"
    (layer / "python").mkdir(parents=True, exist_ok=True)
    (layer / "python" / "PLACEHOLDER").write_text("synthesized with icecdc:placeholderBundles=true: not deployable\n")
    return layer


# What the entries never run: the demo and the test commits stay out of the Lambda and Glue bundles.
NOT_SHIPPED = ("demo.py", "testing")


def _lambda_code(root: Path, target: Path, config_path: Path) -> Path:
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.copy2(root / "lambdas" / "planner" / "handler.py", target / "handler.py")
    shutil.copytree(root / "icecdc", target / "icecdc", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", *NOT_SHIPPED))
    shutil.copy2(config_path, target / "icecdc.yaml")
    return target


def _library_zip(root: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((root / "icecdc").rglob("*.py")):
            if any(part in NOT_SHIPPED for part in path.relative_to(root / "icecdc").parts):
                continue
            _add(archive, str(path.relative_to(root)), path.read_bytes())
    return target


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    """A member with a fixed time, so that a zip's bytes (and its asset hash) change only with its content."""
    info = zipfile.ZipInfo(name, _FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)

"""Build the deployable artifacts at synth time, without Docker.

- The planner's dependencies: `pip install --platform manylinux2014_x86_64 --only-binary=:all:`
  for the Lambda runtime into a layer directory. Cached under .build/ by the hash of the
  requirement list, so only the first synth (or a version change) needs PyPI.
- The planner's code: handler + the icecdc package + the configuration file.
- The Glue job's code: the icecdc package as a zip for --extra-py-files (written byte-for-byte the
  same every time, so the asset hash changes only when the code does).
- `placeholder=True` (context `icecdc:placeholderBundles=true`) skips pip: the layer is an empty
  directory. For the CDK assertion tests, which check the template and never run the code.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

log = logging.getLogger(__name__)

LAMBDA_PYTHON = "3.11"  # the library requires 3.11, as Glue 5.1 runs it
LAMBDA_PLATFORM = "manylinux2014_x86_64"
# The planner reads only metadata (manifests are Avro): no pyarrow (the largest wheel by far) and
# no opensearch-py. fsspec's s3fs is its FileIO instead (see LAMBDA_CATALOG_PROPERTIES).
# pydantic (icecdc.config; pyiceberg's too) pins its compiled pydantic-core, so the layer gets that
# wheel for the platform above.
LAMBDA_REQUIREMENTS = (
    f"pyiceberg[glue,s3fs]=={version('pyiceberg')}",
    f"pydantic=={version('pydantic')}",
    f"pyyaml=={version('pyyaml')}",
)
LAMBDA_CATALOG_PROPERTIES = {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}
# What Glue installs with --additional-python-modules: the versions this repo is tested with.
GLUE_PYTHON_MODULES = (
    f"pyiceberg[pyarrow]=={version('pyiceberg')}",
    f"opensearch-py=={version('opensearch-py')}",
    f"pydantic=={version('pydantic')}",
    f"pyyaml=={version('pyyaml')}",
)
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Bundles:
    lambda_code: Path  # handler.py, icecdc/, icecdc.yaml
    lambda_layer: Path  # python/<site-packages>
    glue_script: Path
    glue_library: Path  # icecdc.zip
    config: Path
    domain_access: Path  # the custom resource of a created domain (its own Python, no dependencies)


def build_bundles(root: Path, config_path: Path, placeholder: bool = False) -> Bundles:
    out = root / ".build"
    return Bundles(
        lambda_code=_lambda_code(root, out / "planner-code", config_path),
        lambda_layer=_placeholder_layer(out) if placeholder else lambda_layer(out),
        glue_script=root / "glue_jobs" / "icecdc_job.py",
        glue_library=_library_zip(root, out / "glue" / "icecdc.zip"),
        config=config_path,
        domain_access=root / "lambdas" / "domain_access",
    )


def lambda_layer(out: Path) -> Path:
    """The planner's dependency layer under `out`, built with pip once and cached by its requirements."""
    key = hashlib.sha256("\n".join((LAMBDA_PYTHON, LAMBDA_PLATFORM, *LAMBDA_REQUIREMENTS)).encode()).hexdigest()[:16]
    layer = out / f"planner-layer-{key}"
    if (layer / "python").is_dir():
        return layer
    staging = out / f"planner-layer-{key}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--platform", LAMBDA_PLATFORM, "--implementation", "cp", "--python-version", LAMBDA_PYTHON,
        "--only-binary=:all:", "--target", str(staging / "python"), *LAMBDA_REQUIREMENTS,
    ]  # fmt: skip
    log.info("building the planner layer: %s", " ".join(command))
    try:
        subprocess.run(command, check=True)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(
            f"pip could not build the planner's dependency layer ({exc}); synth needs PyPI once, or pass "
            "-c icecdc:placeholderBundles=true to synthesize a template without it"
        ) from None
    for cache in (staging / "python").rglob("__pycache__"):
        shutil.rmtree(cache)  # compiled on the build machine; the runtime writes its own
    staging.rename(layer)  # the cache holds only complete layers
    return layer


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
            info = zipfile.ZipInfo(str(path.relative_to(root)), _FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return target

"""Build the deployable artifacts at synth time, without Docker.

- Dependencies come from locks (`infra/locks/*.txt`, written by `python -m infra.lock`): every
  distribution pinned with its sha256, for the platform's CPython (3.11 on Glue 5.1, 3.13 for the
  planner's python3.13 runtime) on its platform. Synth downloads
  exactly those wheels with `pip --require-hashes --only-binary=:all:` (a file whose hash differs
  is refused), once: they are cached under .build/ by the lock's digest.
- The Glue job's dependencies: a zip of wheels (`<name>.gluewheels.zip`: `wheels/requirements.txt`,
  the lock with its hashes, and `wheels/*.whl`), installed by Glue 5.1 with `--no-index`, so a run
  asks no package index and pip checks every hash again.
- The planner's dependencies: the Lambda lock installed into a layer directory (`--no-deps`: the
  lock is the whole closure, but for what the planner never imports, left out of it), then trimmed
  of the files the planner never loads (`LAMBDA_TRIM`, each rule with why), so that layer and code
  stay far below Lambda's 250 MiB unzipped with pyarrow in (`python -m infra.bundling` measures).
- The planner's code: handler + the icecdc package + the configuration file.
- The Glue job's code: the icecdc package as a zip for --extra-py-files (written byte-for-byte the
  same every time, so the asset hash changes only when the code does).
- `placeholder=True` (context `icecdc:placeholderBundles=true`) downloads nothing: the layer is an
  empty directory and the zip of wheels holds only the lock. For the CDK assertion tests, which
  check the template and never run the code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

log = logging.getLogger(__name__)

# The interpreters the bundles run on: Glue 5.1's (the library stays importable there), and the
# planner's Lambda runtime python3.13 on Amazon Linux 2023 (glibc 2.34), as infra.planner deploys it.
GLUE_PYTHON = "3.11"
LAMBDA_PYTHON = "3.13"
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
class Platform:
    """Where a lock's wheels run (the Glue job, the planner Lambda): the CPython, the top-level
    requirements, the platform tags their wheels may be for."""

    description: str
    python: str  # the CPython version the wheels are for ("3.11")
    requirements: tuple[str, ...]
    platforms: tuple[str, ...]
    lock: Path
    # Left to the resolver when locking, not pinned to the virtualenv's version (infra.lock).
    unpinned: tuple[str, ...] = ()
    # Pinned by a requirement to another version than the virtualenv's: (name, why).
    held_back: tuple[tuple[str, str], ...] = ()
    # Distributions of the resolved closure the platform never imports: left out of the lock, so
    # never downloaded nor installed: (name, why).
    left_out: tuple[tuple[str, str], ...] = ()

    @property
    def not_pinned_to_the_virtualenv(self) -> tuple[str, ...]:
        return (*self.unpinned, *(name for name, _ in self.held_back))


# Glue 5.1 runs on Amazon Linux 2023 (glibc 2.34): manylinux wheels up to 2_34. What the job
# imports beyond Glue's own packages (pyspark, boto3), at the versions this repo is tested with.
GLUE = Platform(
    "AWS Glue 5.1 job",
    GLUE_PYTHON,
    (
        f"pyiceberg[pyarrow]=={version('pyiceberg')}",
        f"opensearch-py=={version('opensearch-py')}",
        f"pydantic=={version('pydantic')}",
        f"pyyaml=={version('pyyaml')}",
    ),
    manylinux(34),
    LOCKS / "glue.txt",
)
# The planner decides from metadata (manifests are Avro) and applies a small batch itself on the
# in-process engine (icecdc.aws.planner.apply_here): pyiceberg's ArrowScan reads the Parquet files
# (pyarrow) and the sink writes with opensearch-py. It reads S3 through fsspec's s3fs, not pyarrow's
# S3 filesystem (LAMBDA_CATALOG_PROPERTIES). Lambda's python3.13 runtime is Amazon Linux 2023 (glibc
# 2.34): manylinux wheels up to 2_34, so pyarrow is the virtualenv's, as everywhere else (python3.11
# ran on Amazon Linux 2, glibc 2.26, which held pyarrow back at 20, the last manylinux2014 release).
LAMBDA = Platform(
    "planner Lambda layer",
    LAMBDA_PYTHON,
    (
        f"pyiceberg[glue,s3fs]=={version('pyiceberg')}",
        f"pyarrow=={version('pyarrow')}",
        f"opensearch-py=={version('opensearch-py')}",
        f"pydantic=={version('pydantic')}",
        f"pyyaml=={version('pyyaml')}",
    ),
    manylinux(34),
    LOCKS / "lambda.txt",
    # s3fs (not in the virtualenv) requires the fsspec of its own release and, through aiobotocore, a
    # narrow botocore range: those follow s3fs.
    unpinned=("fsspec", "boto3", "botocore", "s3transfer"),
    left_out=(
        (
            "opensearch-protobufs",
            "opensearch-py 3 requires it for a gRPC transport icecdc does not use; opensearchpy never imports it",
        ),
        ("protobuf", "required by opensearch-protobufs only"),
        ("grpcio", "required by opensearch-protobufs only"),
    ),
)
LAMBDA_CATALOG_PROPERTIES = {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}


@dataclass(frozen=True)
class Trim:
    """Files of the planner's layer it never loads, removed after installing: `pattern` is a glob
    under the layer's python/ directory; `keep`: names the glob matches that stay."""

    pattern: str
    why: str
    keep: tuple[str, ...] = ()


# AWS services the planner's code calls (boto3.client(...) in icecdc and the handler; pyiceberg's
# Glue catalog; s3fs's s3 and sts): botocore loads a service's model only when a client of it is made.
LAMBDA_BOTOCORE_SERVICES = ("cloudwatch", "dynamodb", "glue", "s3", "secretsmanager", "sso", "sso-oidc", "sts")
# What the planner never loads, measured on the layer of infra/locks/lambda.txt (pyarrow 26.0.1, CPython 3.13):
# python -m infra.bundling prints the sizes and what each rule removed. tests/aws/test_planner_bundle.py
# applies a batch with the trimmed layer on a bare interpreter, and checks that every rule removes something.
LAMBDA_TRIM = (
    Trim("pyarrow/include", "C++ headers, for compiling extensions against pyarrow"),
    Trim("pyarrow/src", "C++ sources of pyarrow's Python bindings, for the same"),
    Trim("pyarrow/includes", "Cython declarations, for the same"),
    *(
        Trim(f"pyarrow/**/{cython}", "Cython sources and declarations: the modules are compiled (.so)")
        for cython in ("*.pyx", "*.pxd", "*.pxi")
    ),
    Trim("pyarrow/tests", "pyarrow's own test suite"),
    Trim("pyarrow/_pyarrow_cpp_tests*.so", "the C++ tests' bindings of pyarrow's test suite"),
    # A wheel cannot hold symbolic links, so each shared library is there three times: the loader
    # opens the SONAME (libarrow_python.so.2000) that the extension modules name (readelf -d: NEEDED).
    Trim("pyarrow/libarrow*.so", "copies of the libraries under their link-time name (no module names it)"),
    Trim("pyarrow/libarrow*.so.*.*.*", "copies of the libraries under their full version (no module names it)"),
    Trim("pyarrow/_flight*.so", "Arrow Flight RPC: only pyarrow.flight loads it"),
    Trim("pyarrow/libarrow_flight.so.*", "Arrow Flight's library, loaded only with pyarrow._flight"),
    Trim("pyarrow/libarrow_python_flight.so.*", "the same"),
    # libarrow_substrait.so.* stays: pyarrow.lib names it (NEEDED). The wheel has no Gandiva library.
    Trim("pyarrow/_substrait*.so", "Substrait plans: only pyarrow.substrait loads it"),
    # _s3fs and libarrow_s3 (17 MB) stay: pyiceberg.io.pyarrow imports S3RetryStrategy from _s3fs, which links it.
    *(
        Trim(f"pyarrow/_{fs}*.so", "a filesystem of pyarrow's: the planner reads through fsspec (LAMBDA_CATALOG_PROPERTIES)")
        for fs in ("gcsfs", "azurefs", "hdfs")
    ),
    Trim("zstandard/_cffi*.so", "zstandard's CFFI backend: cffi is not in the lock, `import zstandard` loads backend_c"),
    Trim("hive_metastore", "pyiceberg's Hive Metastore client: the stack's catalog is Glue (infra.stack.check_deployable)"),
    Trim("*/tests", "test suites shipped inside packages (fsspec, aioitertools, certifi): nothing imports them"),
    Trim("botocore/data/*/", "API models of AWS services the planner never calls", keep=LAMBDA_BOTOCORE_SERVICES),
)
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
    compiler = BytecodeCompiler.none() if placeholder else BytecodeCompiler.found()  # one lookup, one warning
    return Bundles(
        lambda_code=lambda_code(root, out, config_path, compiler),
        lambda_layer=_placeholder_layer(out) if placeholder else lambda_layer(out, compiler=compiler),
        glue_script=root / "glue_jobs" / "icecdc_job.py",
        glue_library=_library_zip(root, out / "glue" / "icecdc.zip"),
        glue_wheels=glue_wheels(out, placeholder=placeholder),
        config=config_path,
        custom_resources=root / "lambdas" / "custom_resources",
    )


def lock_digest(lock: Path) -> str:
    return hashlib.sha256(lock.read_bytes()).hexdigest()[:16]


# What the jobs pass to pip for the zip of wheels (--python-modules-installer-option): no package
# index, so the zip's wheels, checked against the hashes of its requirements.txt, are all it installs.
JOB_INSTALLER_OPTIONS = "--no-index"


def glue_wheels_name(lock: Path = GLUE.lock) -> str:
    """The zip's name, which Glue requires to end in `.gluewheels.zip`; one per lock."""
    return f"icecdc-deps-{lock_digest(lock)}.gluewheels.zip"


def platform_options(platform: Platform) -> list[str]:
    tags = [option for tag in platform.platforms for option in ("--platform", tag)]
    return ["--only-binary=:all:", "--implementation", "cp", "--python-version", platform.python, *tags]


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


def lambda_layer(
    out: Path,
    lock: Path = LAMBDA.lock,
    pip_options: Sequence[str] = (),
    trim: Sequence[Trim] = LAMBDA_TRIM,
    compiler: BytecodeCompiler | None = None,
) -> Path:
    """The planner's dependency layer for `lock` under `out`, installed once, trimmed of what the
    planner never loads (`trim`), compiled to bytecode (`BytecodeCompiler`), and cached by the
    digest of the lock, the trim rules and the bytecode's magic number."""
    rules = repr([(rule.pattern, rule.keep) for rule in trim])  # the reasons may change without a rebuild
    compiler = compiler or BytecodeCompiler.found()
    key = hashlib.sha256(lock.read_bytes() + rules.encode() + compiler.magic.encode()).hexdigest()[:16]
    layer = out / f"planner-layer-{key}"
    if (layer / "python").is_dir():
        return layer
    with _staged(layer) as staging:  # the cache holds only complete layers
        _pip("install", LAMBDA, lock, ["--no-deps", "--target", str(staging / "python")], pip_options)
        for cache in (staging / "python").rglob("__pycache__"):
            shutil.rmtree(cache)  # compiled by pip's interpreter, not the runtime's
        installed = tree_size(staging / "python")
        removed = {rule.pattern: _remove(staging / "python", rule) for rule in trim}
        compiler.compile(staging / "python", LAMBDA_LAYER_PATH)
        record = {"installed": installed, "removed": removed, "remaining": tree_size(staging / "python")}
        trimmed_record(layer).write_text(json.dumps(record, indent=1) + "\n")
    return layer


def trimmed_record(layer: Path) -> Path:
    """What trimming `layer` removed: the bytes installed, removed by each rule, and remaining."""
    return layer.with_name(f"{layer.name}.trimmed.json")


def _remove(root: Path, rule: Trim) -> int:
    """Remove what `rule` matches under `root`; the bytes removed."""
    removed = 0
    for path in sorted(root.glob(rule.pattern), key=lambda p: len(p.parts)):
        if path.name in rule.keep or not path.exists():  # gone with a directory matched before
            continue
        removed += tree_size(path)
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    return removed


def tree_size(path: Path) -> int:
    """Bytes of the files under `path` (or of the file), as Lambda counts a package's unzipped size."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def zipped_size(path: Path) -> int:
    """Bytes of `path`'s files zipped with deflate, as the CDK asset is."""
    with tempfile.TemporaryFile() as file:
        with zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED) as archive:
            for member in sorted(path.rglob("*")):
                if member.is_file():
                    archive.write(member, member.relative_to(path).as_posix())
        return file.tell()


def _pip(command: str, platform: Platform, lock: Path, where: list[str], pip_options: Sequence[str]) -> None:
    arguments = [
        sys.executable, "-m", "pip", command, "--quiet", "--disable-pip-version-check", "--require-hashes",
        *(["--no-deps"] if command == "download" else []), *platform_options(platform), "-r", str(lock), *where, *pip_options,
    ]  # fmt: skip
    log.info("%s: %s", platform.description, " ".join(arguments))
    try:
        subprocess.run(arguments, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(
            f"pip could not {command} the {platform.description}'s locked wheels ({lock}):\n{exc.stderr.strip()}\n"
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


def lambda_code(root: Path, out: Path, config_path: Path, compiler: BytecodeCompiler | None = None) -> Path:
    """The planner's code under `out`: handler, icecdc and the configuration, with their bytecode
    for the runtime (`compiler`, else the one `BytecodeCompiler.found()` finds).

    Built once per content (the sources, the configuration and the bytecode's magic number name the
    directory) and published by one rename, so a synth never changes a tree that another synth, in
    this process or another, is copying into its cloud assembly."""
    compiler = compiler or BytecodeCompiler.found()
    handler = root / "lambdas" / "planner" / "handler.py"
    sources = [handler, *_shipped_modules(root)]
    digest = hashlib.sha256(config_path.read_bytes() + compiler.magic.encode())
    for path in sources:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    target = out / f"{PLANNER_CODE}{digest.hexdigest()[:16]}"
    if target.is_dir():
        os.utime(target)  # in use: `_prune_unused` keeps it
        return target
    with _staged(target) as staging:
        for path in sources:
            name = "handler.py" if path == handler else path.relative_to(root).as_posix()
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, staging / name)
        shutil.copy2(config_path, staging / "icecdc.yaml")
        compiler.compile(staging, LAMBDA_CODE_PATH)
    _prune_unused(out)
    return target


# The planner's code is built in `out/<PLANNER_CODE><digest of its content>`.
PLANNER_CODE = "planner-code-"
# A tree of planner code no synth has used for this long is removed by the next build of another:
# each test's configuration is its own (~1 MB a tree, 30 trees a `make test`), and a synth copies
# the tree it finds within seconds of finding it.
UNUSED_SECONDS = 86_400


def _prune_unused(out: Path) -> None:
    """Remove the planner's code trees under `out` that no build has used for UNUSED_SECONDS."""
    for path in out.glob(f"{PLANNER_CODE}*"):
        if path.is_dir() and time.time() - path.stat().st_mtime > UNUSED_SECONDS:
            shutil.rmtree(path, ignore_errors=True)


def _shipped_modules(root: Path) -> list[Path]:
    """The files of the icecdc package that the bundles ship, in a stable order."""
    return [
        path
        for path in sorted((root / "icecdc").rglob("*"))
        if path.is_file()
        and path.suffix != ".pyc"
        and not any(part in (*NOT_SHIPPED, "__pycache__") for part in path.relative_to(root / "icecdc").parts)
    ]


@contextmanager
def _staged(target: Path) -> Iterator[Path]:
    """A private directory beside `target`, renamed to `target` when the block ends, removed if it
    fails. Builds may race: if another published `target` first, ours is dropped."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    staging.chmod(0o755)  # mkdtemp's is 0o700
    try:
        staging.rename(target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not target.is_dir():
            raise


# Where Lambda puts a function's code and its layer's python/ directory.
LAMBDA_CODE_PATH = "/var/task"
LAMBDA_LAYER_PATH = "/opt/python"


@dataclass(frozen=True)
class BytecodeCompiler:
    """Writes the bytecode of the planner's modules for Lambda's CPython at synth time.

    Lambda's /var/task and /opt are read-only, so Python cannot keep what it compiles there: without
    these files every cold start compiles every module it imports from source (the planner's
    imports took 2.63 s from source and 1.16 s from bytecode on CPython 3.13 here). Bytecode is
    particular to a CPython minor version, so only an interpreter of the runtime's version
    (LAMBDA_PYTHON) can write it; without one, synth warns and the bundles ship sources only.
    Hash-based and unchecked (as distributions compile read-only trees): the files never change in
    place, and no timestamp need survive the asset's zip. `-d`: tracebacks name the deployed paths,
    and no path of the build machine is in the bundle; the output is the same for the same sources,
    so the code's asset hash still changes only with the code."""

    interpreter: str | None
    magic: str  # the interpreter's bytecode magic number (hex), part of the layer's cache key; "" without one

    @classmethod
    def none(cls) -> BytecodeCompiler:
        """Compiles nothing (a placeholder template, never deployed)."""
        return cls(None, "")

    @classmethod
    def found(cls, python: str = LAMBDA_PYTHON) -> BytecodeCompiler:
        """The runtime's CPython on this machine; without one, a warning and `none()`."""
        interpreter = runtime_interpreter(python)
        if interpreter is None:
            log.warning(
                "no python%s on this machine (pyenv install %s, or one on the PATH): the planner ships without "
                "bytecode, and each cold start compiles the modules it imports (about twice its import time)",
                python,
                python,
            )
            return cls.none()
        probe = [interpreter, "-c", "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"]
        return cls(interpreter, subprocess.run(probe, check=True, capture_output=True, text=True).stdout.strip())

    def compile(self, tree: Path, deployed_at: str) -> None:
        if self.interpreter is None:
            return
        arguments = [self.interpreter, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"]
        done = subprocess.run([*arguments, "-d", deployed_at, str(tree)], capture_output=True, text=True, check=False)
        if done.returncode != 0:  # a file of another Python's syntax: it stays source, as it would be anyway
            log.warning("compileall could not compile every file under %s:\n%s", tree, done.stdout[-2000:])


def runtime_interpreter(python: str = LAMBDA_PYTHON) -> str | None:
    """A CPython of version `python` ("3.13") on this machine: pyenv's (its shim answers only where
    that version is selected), or one on the PATH that is not a shim; None without one."""
    installed = sorted(Path.home().glob(f".pyenv/versions/{python}.*/bin/python{python}"))
    on_path = shutil.which(f"python{python}")
    return str(installed[-1]) if installed else on_path if on_path and "/shims/" not in on_path else None


def _library_zip(root: Path, target: Path) -> Path:
    """The icecdc package as a zip, written beside `target` and renamed over it (synths may race)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.NamedTemporaryFile(dir=target.parent, prefix=f"{target.name}.", delete=False) as file,
        zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED) as archive,
    ):
        for path in _shipped_modules(root):
            if path.suffix == ".py":
                _add(archive, str(path.relative_to(root)), path.read_bytes())
    Path(file.name).chmod(0o644)  # NamedTemporaryFile's is 0o600
    Path(file.name).replace(target)
    return target


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    """A member with a fixed time, so that a zip's bytes (and its asset hash) change only with its content."""
    info = zipfile.ZipInfo(name, _FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


# Lambda refuses a function whose code and layers, unzipped, reach this many bytes (250 MiB, "Function
# code combined with layers exceeds the maximum allowed size of 262144000 bytes").
LAMBDA_UNZIPPED_LIMIT = 262_144_000


def main() -> None:
    """`python -m infra.bundling [config.yaml]`: build the planner's layer and code as synth does, and
    print their sizes, unzipped and zipped, with the layer as installed (untrimmed) for comparison."""
    logging.basicConfig(level=logging.WARNING)
    root = Path(__file__).resolve().parents[1]
    config = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "infra" / "example-config.yaml"
    out = root / ".build"
    out.mkdir(exist_ok=True)
    code = lambda_code(root, out, config)
    layer = lambda_layer(out)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        untrimmed = lambda_layer(Path(tmp), trim=())
        rows = [("layer as installed", untrimmed), ("layer, trimmed", layer), ("function code", code)]
        print(f"{'':22}{'unzipped':>14}{'zipped':>14}")
        for label, path in rows:
            print(f"{label:22}{tree_size(path):>14,}{zipped_size(path):>14,}")
    total = tree_size(layer) + tree_size(code)
    print(f"{'layer + code':22}{total:>14,}   (Lambda's limit: {LAMBDA_UNZIPPED_LIMIT:,} unzipped)")
    record = json.loads(trimmed_record(layer).read_text())
    for rule in LAMBDA_TRIM:
        print(f"  {record['removed'][rule.pattern]:>12,}  {rule.pattern}")


if __name__ == "__main__":
    main()

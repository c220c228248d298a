"""Assemble a working Iceberg Spark runtime (Spark 3.5, Scala 2.12, Iceberg 1.10.2) from package
registries only — PyPI and Debian — for environments without Maven.

    python local/iceberg_runtime.py          # builds .build/iceberg-jars/ once; prints the jars

Why assembly is needed: PyPI's `snowpark-connect-deps-iceberg` ships Iceberg's Spark runtime jar
but not the Jackson it was built against, relocated to `org.apache.iceberg.shaded.com.fasterxml.
jackson` (loading a table fails with ClassNotFoundException `...shaded...JsonFactoryBuilder`).
Jackson 2.18.8 is in PyPI's `snowpark-connect-deps-2`; Debian's jarjar relocates it the way
Iceberg's own shading does. Debian's sqlite-jdbc lets Iceberg's JdbcCatalog open the same SQLite
catalog that pyiceberg's SqlCatalog writes (its native library comes from Debian's
libxerial-sqlite-jdbc-jni, which the JVM finds on Debian's default java.library.path).

Idempotent: a stamp file names the inputs; when it matches, nothing is downloaded or rebuilt.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / ".build" / "iceberg-jars"

ICEBERG_WHEEL = "snowpark-connect-deps-iceberg==1.0.3"
JACKSON_WHEEL = "snowpark-connect-deps-2==3.56.7"
RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
JACKSON_JARS = ("jackson-core-2.18.8.jar", "jackson-databind-2.18.8.jar", "jackson-annotations-2.18.8.jar")
SHADED_JACKSON_JAR = "iceberg-shaded-jackson-2.18.8.jar"
SQLITE_JDBC_JAR = "sqlite-jdbc.jar"
JARJAR_RULE = "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\n"

# Debian's packages (make iceberg-jars installs them): the jarjar tool and the SQLite JDBC driver.
DEBIAN_JARJAR = Path("/usr/share/java/jarjar.jar")
DEBIAN_SQLITE_JDBC = Path("/usr/share/java/sqlite-jdbc.jar")

STAMP = OUT / ".stamp.json"
STAMP_VALUE = {
    "wheels": [ICEBERG_WHEEL, JACKSON_WHEEL],
    "jars": [RUNTIME_JAR, SHADED_JACKSON_JAR, SQLITE_JDBC_JAR],
    "rule": JARJAR_RULE,
}


class BuildError(RuntimeError):
    """The runtime cannot be assembled here (a Debian package or the registry is missing)."""


def jar_paths(out: Path = OUT) -> list[Path]:
    return [out / RUNTIME_JAR, out / SHADED_JACKSON_JAR, out / SQLITE_JDBC_JAR]


def is_built(out: Path = OUT) -> bool:
    stamp = out / STAMP.name
    try:
        current = json.loads(stamp.read_text()) == STAMP_VALUE
    except (OSError, ValueError):
        return False
    return current and all(p.is_file() for p in jar_paths(out))


def _pip_download(requirement: str, dest: Path) -> Path:
    # --no-deps: the wheels are plain jar containers; their dependency lists are irrelevant here.
    # pip's HTTP cache makes a second download of the same wheel a local copy.
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(dest), requirement],
        check=True,
    )
    name = requirement.split("==")[0].replace("-", "_")
    (wheel,) = dest.glob(f"{name}-*.whl")
    return wheel


def _extract_member(wheel: Path, basename: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        (member,) = [n for n in zf.namelist() if n.endswith(f"/jars/{basename}")]
        target = dest / basename
        with zf.open(member) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return target


def _merge_for_jarjar(jars: list[Path], merged: Path) -> None:
    """One jar of all Jackson classes, without what jarjar cannot relocate: the multi-release
    copies under META-INF/versions (jarjar renames by class name, so they would collide with the
    base classes — which are Java 8 bytecode and fine on Java 17) and module-info."""
    seen: set[str] = set()
    with zipfile.ZipFile(merged, "w", zipfile.ZIP_DEFLATED) as out:
        for jar in jars:
            with zipfile.ZipFile(jar) as zf:
                for info in zf.infolist():
                    name = info.filename
                    if name.endswith(("/", "module-info.class")) or name.startswith("META-INF/"):
                        continue
                    if name in seen:
                        continue
                    seen.add(name)
                    out.writestr(name, zf.read(name))


def build(out: Path = OUT, force: bool = False) -> list[Path]:
    """Build the jars into `out` unless they are already there; return their paths."""
    if not force and is_built(out):
        return jar_paths(out)
    missing = [str(p) for p in (DEBIAN_JARJAR, DEBIAN_SQLITE_JDBC) if not p.is_file()]
    if missing:
        raise BuildError(
            f"missing {', '.join(missing)}: install Debian's libjarjar-java and libxerial-sqlite-jdbc-java "
            "(`make iceberg-jars` does), or set ICECDC_ICEBERG_JARS / ICECDC_SPARK_PACKAGES"
        )
    if shutil.which("java") is None:
        raise BuildError("java not found: jarjar needs a JVM (`make java` installs one)")
    out.mkdir(parents=True, exist_ok=True)
    (out / STAMP.name).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="icecdc-iceberg-") as tmp_name:
        tmp = Path(tmp_name)
        iceberg_wheel = _pip_download(ICEBERG_WHEEL, tmp)
        jackson_wheel = _pip_download(JACKSON_WHEEL, tmp)
        runtime = _extract_member(iceberg_wheel, RUNTIME_JAR, tmp)
        jackson = [_extract_member(jackson_wheel, name, tmp) for name in JACKSON_JARS]
        merged = tmp / "jackson-merged.jar"
        _merge_for_jarjar(jackson, merged)
        rules = tmp / "rules.txt"
        rules.write_text(JARJAR_RULE)
        shaded = tmp / SHADED_JACKSON_JAR
        subprocess.run(["java", "-jar", str(DEBIAN_JARJAR), "process", str(rules), str(merged), str(shaded)], check=True)
        # Move into place last, so an interrupted build never leaves a half-written jar behind a stamp.
        shutil.move(runtime, out / RUNTIME_JAR)
        shutil.move(shaded, out / SHADED_JACKSON_JAR)
        shutil.copyfile(DEBIAN_SQLITE_JDBC, out / SQLITE_JDBC_JAR)
    (out / STAMP.name).write_text(json.dumps(STAMP_VALUE))
    return jar_paths(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--force", action="store_true", help="rebuild even when the jars are there")
    args = parser.parse_args()
    started = time.monotonic()
    try:
        jars = build(args.out, args.force)
    except (BuildError, subprocess.CalledProcessError) as exc:
        print(f"iceberg_runtime: error: {exc}", file=sys.stderr)
        return 2
    for jar in jars:
        print(f"{jar}  {jar.stat().st_size / 1e6:.1f} MB")
    print(f"iceberg_runtime: ready in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

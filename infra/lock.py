"""Write the dependency locks of the AWS bundle: `python -m infra.lock` (needs a package index).

The Glue job and the planner's layer install exactly the files these locks name, checked by hash
(infra.bundling downloads them at synth time with `--require-hashes`, and Glue's pip checks them
again at run time); no package index is asked at run time. A lock is the whole dependency closure
of its top-level requirements for its CPython (3.11 for Glue, 3.13 for the planner) on its platform, resolved by pip (`install
--dry-run --report`) with every package this repository's virtualenv has pinned to the version the
test suite runs with (but for the versions a platform holds back, each with its reason; and the
distributions a platform never imports are left out). Re-run it after changing a dependency's version and commit the locks
(tests/aws/test_bundling.py fails while a lock and the virtualenv disagree).

It also writes `infra/locks/tested.txt`, the constraints every Makefile install runs with: each
locked version a platform pins to the virtualenv, without hashes (a lock's hashes are for its own
platform's wheels). A fresh clone's virtualenv is then the one the locks were made from, not
whatever a package index released since (a grpcio release once failed CI that way).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from importlib.metadata import distributions
from pathlib import Path

from infra.bundling import GLUE, LAMBDA, LOCKS, Platform, platform_options

TESTED = LOCKS / "tested.txt"
LOCKED = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>\S+) \\$", re.M)


def resolve(platform: Platform) -> list[tuple[str, str, str]]:
    """(name, version, sha256) of every distribution `platform` installs, by name."""
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "tested.txt"
        tested = {d.metadata["Name"].lower(): d.version for d in distributions() if d.metadata["Name"]}
        for name in platform.not_pinned_to_the_virtualenv:
            tested.pop(name, None)
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(tested.items())))
        report = Path(tmp) / "report.json"
        command = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--disable-pip-version-check",
            "--report", str(report), "--target", str(Path(tmp) / "target"), "--constraint", str(constraints),
            *platform_options(platform), *platform.requirements,
        ]  # fmt: skip
        subprocess.run(command, check=True)
        installs = json.loads(report.read_text())["install"]
    found = []
    left_out = {name for name, _ in platform.left_out}
    for entry in installs:
        if entry["metadata"]["name"].lower() in left_out:
            continue
        archive = entry["download_info"].get("archive_info", {})
        digest = archive.get("hashes", {}).get("sha256") or archive.get("hash", "").removeprefix("sha256=")
        if not digest:
            raise SystemExit(f"{entry['metadata']['name']}: pip reported no sha256 for {entry['download_info']['url']}")
        found.append((entry["metadata"]["name"], entry["metadata"]["version"], digest))
    return sorted(found, key=lambda row: row[0].lower())


def render(platform: Platform, rows: list[tuple[str, str, str]]) -> str:
    header = [
        f"# {platform.description}: locked by `python -m infra.lock`; do not edit.",
        f"# CPython {platform.python} on {platform.platforms[0]} and older; top level: {' '.join(platform.requirements)}",
        *(f"# {name}: held back: {why}" for name, why in platform.held_back),
        *(f"# left out: {name}: {why}" for name, why in platform.left_out),
    ]
    return "\n".join([*header, *(f"{name}=={version} \\\n    --hash=sha256:{digest}" for name, version, digest in rows)]) + "\n"


def render_tested(platforms: tuple[Platform, ...]) -> str:
    """The constraints of the virtualenv: every locked version pinned to it, from the locks' text."""
    pins: dict[str, str] = {}
    for platform in platforms:
        unpinned = {name.lower() for name in platform.not_pinned_to_the_virtualenv}
        for match in LOCKED.finditer(platform.lock.read_text()):
            name = match["name"].lower().replace("_", "-")
            if name in unpinned:
                continue
            if pins.setdefault(name, match["version"]) != match["version"]:
                raise SystemExit(
                    f"{name}: the locks disagree ({pins[name]} and {match['version']}); the virtualenv has one version"
                )
    header = "# The virtualenv's constraints (Makefile): the locks' versions; written by `python -m infra.lock`; do not edit.\n"
    return header + "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def main(names: list[str] | None = None) -> None:
    """Lock every platform, or those named (`python -m infra.lock lambda`)."""
    platforms = {"glue": GLUE, "lambda": LAMBDA}
    for platform in (platforms[name] for name in names or platforms):
        platform.lock.write_text(render(platform, resolve(platform)))
        print(f"wrote {platform.lock}")
    TESTED.write_text(render_tested((GLUE, LAMBDA)))
    print(f"wrote {TESTED}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Write the dependency locks of the AWS bundle: `python -m infra.lock` (needs a package index).

The Glue job and the planner's layer install exactly the files these locks name, checked by hash
(infra.bundling downloads them at synth time with `--require-hashes`, and Glue's pip checks them
again at run time); no package index is asked at run time. A lock is the whole dependency closure
of its top-level requirements for its CPython (3.11 for Glue, 3.13 for the planner) on its platform, resolved by pip (`install
--dry-run --report`) with every package this repository's virtualenv has pinned to the version the
test suite runs with (but for the versions a target holds back, each with its reason; and the
distributions a target never imports are left out). Re-run it after changing a dependency's version and commit the locks
(tests/aws/test_bundling.py fails while a lock and the virtualenv disagree).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from importlib.metadata import distributions
from pathlib import Path

from infra.bundling import GLUE, LAMBDA, Target, platform_options


def resolve(target: Target) -> list[tuple[str, str, str]]:
    """(name, version, sha256) of every distribution `target` installs, by name."""
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "tested.txt"
        tested = {d.metadata["Name"].lower(): d.version for d in distributions() if d.metadata["Name"]}
        for name in target.not_pinned_to_the_virtualenv:
            tested.pop(name, None)
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(tested.items())))
        report = Path(tmp) / "report.json"
        command = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--disable-pip-version-check",
            "--report", str(report), "--target", str(Path(tmp) / "target"), "--constraint", str(constraints),
            *platform_options(target), *target.requirements,
        ]  # fmt: skip
        subprocess.run(command, check=True)
        installs = json.loads(report.read_text())["install"]
    found = []
    left_out = {name for name, _ in target.left_out}
    for entry in installs:
        if entry["metadata"]["name"].lower() in left_out:
            continue
        archive = entry["download_info"].get("archive_info", {})
        digest = archive.get("hashes", {}).get("sha256") or archive.get("hash", "").removeprefix("sha256=")
        if not digest:
            raise SystemExit(f"{entry['metadata']['name']}: pip reported no sha256 for {entry['download_info']['url']}")
        found.append((entry["metadata"]["name"], entry["metadata"]["version"], digest))
    return sorted(found, key=lambda row: row[0].lower())


def render(target: Target, rows: list[tuple[str, str, str]]) -> str:
    header = [
        f"# {target.description}: locked by `python -m infra.lock`; do not edit.",
        f"# CPython {target.python} on {target.platforms[0]} and older; top level: {' '.join(target.requirements)}",
        *(f"# {name}: held back: {why}" for name, why in target.held_back),
        *(f"# left out: {name}: {why}" for name, why in target.left_out),
    ]
    return "\n".join([*header, *(f"{name}=={version} \\\n    --hash=sha256:{digest}" for name, version, digest in rows)]) + "\n"


def main(names: list[str] | None = None) -> None:
    """Lock every target, or those named (`python -m infra.lock lambda`)."""
    targets = {"glue": GLUE, "lambda": LAMBDA}
    for target in (targets[name] for name in names or targets):
        target.lock.write_text(render(target, resolve(target)))
        print(f"wrote {target.lock}")


if __name__ == "__main__":
    main(sys.argv[1:])

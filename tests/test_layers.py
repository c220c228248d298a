"""The import graph of icecdc points one way (see docs/architecture.md, "Code layout"): a
module imports only modules of lower layers, or of its own package. Read from the source, so a
new upward import fails here by name."""

from __future__ import annotations

import ast
import gc
import re
import subprocess
import sys
import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "icecdc"

# Bottom first. A package name covers its modules.
LAYERS: list[set[str]] = [
    # value types, no icecdc imports; checklist: checks and fixes, as doctor and check say them
    # devlimits: what the dev server is for, as the help, the server and a pass say it; words: counts
    {
        "icecdc.model",
        "icecdc.errors",
        "icecdc.compat",
        "icecdc.documents",
        "icecdc.checklist",
        "icecdc.devlimits",
        "icecdc.words",
    },
    # logs: which libraries the entries quiet; verdict: what becomes of an index (pure)
    # secret_values: a secret's string, for the password and a REST catalog's credentials
    # memo: values a run makes once per key (a secret read, a destination opened)
    {"icecdc.config", "icecdc.storage", "icecdc.logs", "icecdc.verdict", "icecdc.secret_values", "icecdc.memo"},
    {"icecdc.destination.capabilities"},  # what the destination can do, as data
    {
        "icecdc.catalog",
        "icecdc.secrets",
        "icecdc.deadletters",
        "icecdc.destination.index",  # the index's one owner: mappings (pure), the alias and its generations
        "icecdc.manifests",
        "icecdc.protection",
        "icecdc.state",
    },
    # the client, with the credentials icecdc.secrets reads; every document of an index, scanned
    {"icecdc.destination.client", "icecdc.destination.scan"},
    {"icecdc.reading.tasks", "icecdc.changelog", "icecdc.destination.sink", "icecdc.testing"},
    {"icecdc.destination.facts"},  # every fact of an index the verdicts decide on, in one order
    {"icecdc.destination.port"},  # one index's destination for a run: client, capabilities, claim
    {"icecdc.reading.driver", "icecdc.reading.ranges", "icecdc.reading.reader", "icecdc.planning", "icecdc.batching"},
    # where a pass runs; what an operator or the planner asks; rows looked up by scope
    {"icecdc.engines", "icecdc.status", "icecdc.lookup"},
    # verify: reads as a sync does what pyiceberg cannot scan; dryrun: a sync's plan, unwritten
    {"icecdc.sync", "icecdc.verify", "icecdc.dryrun"},
    {"icecdc.audit", "icecdc.replay"},  # operators' commands: drift audit and repair, dead-letter replay
    # what the entries call (aws/: contract, events, planner, metrics, ...); watch: sync --watch
    {"icecdc.aws", "icecdc.demo", "icecdc.devserver", "icecdc.init_config", "icecdc.watch"},
    {"icecdc.check"},  # a first sync's needs, checked: reads what init_config writes
    {"icecdc.doctor", "icecdc.output"},  # doctor reads what icecdc.aws names; output: --json
    {"icecdc.cli"},
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    for level, names in enumerate(LAYERS):
        if any(module == n or module.startswith(n + ".") for n in names):
            return level
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def imports_of(path: Path, package: str = "icecdc") -> set[str]:
    """The modules of `package` the file imports (`from package import x` counts as `package.x`)."""
    found: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith(package + "."):
            found |= {f"{package}.{a.name}" for a in node.names} if node.module == package else {node.module}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if (a.name + ".").startswith(package + ".")}
    return found


def parsed(path: Path) -> ast.Module:
    """`ast.parse` with the cyclic collector paused. Python 3.11 keeps the AST constructor's depth
    count per interpreter (CPython gh-106905): a collection inside a parse runs finalizers, which
    can hand the GIL to a thread that logs a traceback, and 3.11 formats one with `ast.parse`; the
    outer parse then fails with "AST constructor recursion depth mismatch" (a CI run did, when
    py4j's finalizer thread logged a connection reset)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(path.read_text())
    finally:
        if was_enabled:
            gc.enable()


def package_of(module: str) -> str:
    return module.rsplit(".", 1)[0] if module.count(".") > 1 else module


def test_every_import_points_down_or_stays_in_its_package() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        for target in imports_of(path):
            same_package = package_of(target) == package_of(module) or target.startswith(module + ".")
            if not same_package and target != "icecdc" and layer_of(target) >= layer_of(module):
                upward.append(f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})")
    assert upward == []


# The pass reads, shuffles and writes the batches the run hands it; the run checks each index and
# plans. A pass that planned would decide a resync in the middle of a write.
THE_PASS = ("icecdc.sync.passes", "icecdc.sync.indexes")


def source_of(module: str) -> Path | None:
    """The file of an icecdc module or package, None for a name that is neither."""
    path = PACKAGE.parent / module.replace(".", "/")
    found = [p for p in (path / "__init__.py", path.with_suffix(".py")) if p.is_file()]
    return found[0] if found else None


def test_the_pass_does_not_import_planning() -> None:
    """Neither directly nor through a module it imports (its package's `__init__` aside)."""
    reached: dict[str, Path] = {}
    todo = list(THE_PASS)
    while todo:
        module = todo.pop()
        path = source_of(module)
        if module not in reached and path is not None:
            reached[module] = path
            todo += imports_of(path)
    assert set(THE_PASS) <= set(reached)  # what this test reads is there
    assert sorted(m for m, path in reached.items() if "icecdc.planning" in imports_of(path)) == []


# Pure: what they decide is computed from their arguments, never asked of OpenSearch.
PURE = ("icecdc.destination.index.mappings", "icecdc.batching")


def test_the_pure_modules_import_no_opensearch_client() -> None:
    clients = {m: imports_of(PACKAGE.parent / f"{m.replace('.', '/')}.py", "opensearchpy") for m in PURE}
    assert clients == {m: set() for m in PURE}


def test_no_test_module_imports_another() -> None:
    """What tests share lives in tests/support; a test module importing another would run its tests twice."""
    tests = PACKAGE.parent / "tests"
    crossing = [
        f"{path.relative_to(tests)} imports {target}"
        for path in sorted(tests.rglob("*.py"))
        for target in imports_of(path, "tests")
        if not target.startswith("tests.support")
    ]
    assert crossing == []


def test_the_bench_modules_the_tests_import_need_no_package_of_the_bench_group_alone() -> None:
    """`make test` installs the test groups, not the bench's; a developer's venv often has both.
    Imported in a Python where each package only the bench group names is missing, as on a clean
    checkout (a CI run failed at collection when bench.harness.isolated, which a test imported,
    imported psutil)."""
    root = PACKAGE.parent
    imported = sorted({m for path in sorted((root / "tests").rglob("*.py")) for m in imports_of(path, "bench")})
    project = tomllib.loads((root / "pyproject.toml").read_text())
    groups = project["dependency-groups"]
    installed = [*groups["test"], *groups["cdk-test"], *project["project"]["dependencies"]]
    installed += [r for extra in project["project"]["optional-dependencies"].values() for r in extra]

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[^A-Za-z0-9_.-]", r, maxsplit=1)[0].lower().replace("-", "_") for r in requirements}

    bench_only = sorted(names(groups["bench"]) - names(installed))
    assert imported and bench_only  # what this test reads is there
    script = f"import importlib, sys; sys.modules.update(dict.fromkeys({bench_only!r})); [importlib.import_module(m) for m in {imported!r}]"
    run = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def import_cycles() -> list[list[str]]:
    """The groups of icecdc's modules that import each other round, `TYPE_CHECKING` imports too."""
    graph = {module_name(p): imports_of(p) for p in sorted(PACKAGE.rglob("*.py"))}
    graph = {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            if (module := todo.pop()) not in seen:
                seen.add(module)
                todo += graph[module]
        reach[start] = seen
    groups = {frozenset({m} | {o for o in reach[m] if m in reach[o]}) for m in graph if m in reach[m]}
    return sorted(sorted(g) for g in groups)


def test_no_modules_import_each_other_round() -> None:
    """A cycle through a `TYPE_CHECKING` import is one all the same: the type they share goes down."""
    assert import_cycles() == []

"""The shape of icecdc's code, read from the source: short signatures, each guard written once,
the AWS contract apart. A new long signature or a second copy of a guard fails here by name."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "icecdc"

MAX_PARAMETERS = 7
# Functions still over MAX_PARAMETERS while their parameter objects are made elsewhere: empty
# once they are. Nothing is added here: a new function takes a parameter object instead.
LONG_SIGNATURES_LEFT: set[str] = set()


def sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text())


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """How many parameters a caller passes: all, `*args` and `**kwargs` too, but `self`/`cls`."""
    arguments = function.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    bound = 1 if names and names[0] in ("self", "cls") else 0
    return len(names) - bound + (arguments.vararg is not None) + (arguments.kwarg is not None)


def test_no_function_takes_more_than_seven_parameters() -> None:
    functions = [
        (module, node)
        for module, tree in sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    long = {f"{m}:{f.name}": parameters(f) for m, f in functions if parameters(f) > MAX_PARAMETERS}
    assert {name: n for name, n in long.items() if name not in LONG_SIGNATURES_LEFT} == {}
    shorter = LONG_SIGNATURES_LEFT - set(long)
    assert not shorter, f"{sorted(shorter)} got shorter: take them off LONG_SIGNATURES_LEFT"


MAX_PASS_LINES = 40


def test_no_function_of_a_sync_is_over_forty_lines() -> None:
    """Every function of `icecdc/sync/` (the run and the pass) fits in 40 lines, its docstring aside."""
    long = {}
    for module, tree in sources():
        if not module.startswith("sync/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = node.body[0]
                documented = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                start = first.end_lineno + 1 if documented and len(node.body) > 1 else first.lineno
                assert node.end_lineno is not None and first.end_lineno is not None
                if node.end_lineno - start + 1 > MAX_PASS_LINES:
                    long[f"{module}:{node.name}"] = node.end_lineno - start + 1
    assert {m for m, _ in sources() if m.startswith("sync/")} >= {"sync/run.py", "sync/passes.py"}
    assert long == {}


def test_a_lost_lease_is_checked_in_one_place() -> None:
    """`Lease.check()` raises `LeaseLost`; only the lease itself reads `lost`."""
    reading = {
        module
        for module, tree in sources()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "lost"
        if isinstance(node.ctx, ast.Load)
    }
    assert reading == {"state/lease.py"}


def test_each_guard_and_its_constant_is_defined_once() -> None:
    """The writes fenced by the lease (`icecdc.destination.sink.fenced`) and the ids one `_mget` asks for."""
    defined: dict[str, list[str]] = {}
    for module, tree in sources():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            else:
                continue
            for name in names:
                defined.setdefault(name.lstrip("_"), []).append(module)
    guards = {name: defined.get(name) for name in ("fenced", "IDS_PER_REQUEST")}
    assert guards == {"fenced": ["destination/sink.py"], "IDS_PER_REQUEST": ["destination/client.py"]}


def test_the_names_infra_and_the_aws_entries_share_need_only_the_standard_library() -> None:
    """infra/ reads `icecdc.aws.contract` when it synthesizes: no AWS SDK, pyiceberg or other
    icecdc module comes with it (the planner, events and metrics are modules of their own)."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse((PACKAGE / "aws" / "contract.py").read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported and imported - set(sys.stdlib_module_names) == set()

"""`icecdc sync` into a Serverless collection against the domain path, whole commands side by side
(goal: at most 1.25x the domain's time; results: docs/bench/serverless.json and docs/bench/summary.md).

One table (pyiceberg, copy-on-write, partitioned by `region`) exported (`icecdc sync`, several
times, each into new indexes), then K incremental rounds (each one commit of updates, one of
deletes, one of appends, then `icecdc sync`), then rebuilt (`icecdc repair --rebuild`: a new
generation and the alias's swap, the one place here where Serverless waits `visibility_seconds`
for a domain's refresh). Every pass is run by four configs, each with its own state store and
index, one after the other in an order that rotates:

- `domain`: an OpenSearch Service domain as the stack deploys it, signed with SigV4 for `es`
  (versions, refresh, scroll), through a plain forwarding proxy (tests/support/faults.py's
  FaultProxy) that counts the requests, so both paths pay one loopback hop of Python: the
  reference of every ratio;
- `serverless`: `aws_service: aoss` through the Serverless stand-in (tests/support/serverless.py:
  SigV4 `aoss` verified, the undocumented refused, requests counted by operation), no versions
  (the lease fences the writes), `visibility_seconds` waited where a domain refreshes;
- `serverless_no_wait`: the same with `visibility_seconds: 0`, so the difference is the waits;
- `serverless_thin`: icecdc configured for Serverless (`aoss`, the waits) through the domain's
  plain proxy instead of the stand-in: icecdc's own cost of the Serverless path, without the
  stand-in's (its checks of every request and bulk item run in this process, on the same 2 cores).

Each pass also records the CPU seconds of this process (the proxy's or the stand-in's threads:
the bench does nothing else meanwhile) and of the bench sink.

Both sit in front of the bench sink (bench/harness/sink.py), not osmem: the stand-in forwards
what Serverless documents, and the bench sink answers all of it that a sync sends (index and
alias admin, `_bulk` without versions, `_mget`; a sync does not search). osmem replaces a
document in time proportional to the index, which would time osmem. The stand-in's search
delay is 0 (its searcher unused: searches go to the sink at once), so `visibility_seconds` is
icecdc's own fixed wait per generation swap, not the stand-in's.

    python -m bench.serverless_vs_domain [--rows N] [--rounds K] [--visibility S] [--output PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import yaml
from opensearchpy import OpenSearch
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import In

from bench.harness.sink import SinkServer
from icecdc.testing.commits import update
from icecdc.verify import index_documents, table_documents
from tests.support.faults import FaultProxy
from tests.support.serverless import ACCESS_KEY, SECRET_KEY, ServerlessStandIn, route_of
from tests.support.tables import ARROW, BY_REGION, SCHEMA

ICECDC = Path(sys.executable).parent / "icecdc"  # the console script users run
REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "bench"
CATALOG = "lake"
TABLE = "db.orders"
REGIONS = ("us", "eu", "ap", "sa")
GOAL = 1.25  # Serverless's time over the domain's, at most
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Side:
    """One way to run the same syncs: the destination icecdc is told of, and what stands there."""

    name: str
    service: str  # opensearch.aws_service
    waits: bool  # visibility_seconds as the bench is given, else 0
    standin: bool  # through the Serverless stand-in, else the plain proxy


SIDES = (
    Side("domain", "es", waits=False, standin=False),
    Side("serverless", "aoss", waits=True, standin=True),
    Side("serverless_no_wait", "aoss", waits=False, standin=True),
    Side("serverless_thin", "aoss", waits=True, standin=False),
)
NAMES = tuple(side.name for side in SIDES)


class Collection(ServerlessStandIn):
    """The stand-in with no searcher: at search delay 0 searches go to the upstream, and the
    changes it would mirror to a searcher (index creation, aliases) are not sent twice."""

    def _to_searcher(self, method: str, target: str, body: bytes = b"") -> tuple[int, list[tuple[str, str]], bytes]:
        return 200, [], b"{}"

    def _forget_deleted(self) -> None:
        return None


def operation(method: str, path: str) -> str:
    """A request's operation as Serverless's table names it, or what a domain alone answers."""
    route = route_of(method, path)
    if route is not None:
        return route.operation
    segments = path.strip("/").split("/") if path.strip("/") else []
    if not segments:
        return "cluster info"
    first = next((n for n, s in enumerate(segments) if s.startswith("_")), None)
    if first is None:
        return f"{method} {path}"
    return " ".join(s.lstrip("_").replace("_", " ") for s in segments[first : first + 2])


def domain_counts(proxy: FaultProxy) -> Counter[str]:
    """The proxy's requests so far, by operation."""
    found: Counter[str] = Counter()
    for key, n in proxy.counts.items():
        method, path = key.split(" ", 1)
        found[operation(method, path)] += n
    return found


def rows(ids: range | list[int], status: str = "new") -> pa.Table:
    """The table's rows of these ids, the region dealt by id."""
    regions = [REGIONS[i % len(REGIONS)] for i in ids]
    return pa.Table.from_pylist(
        [{"id": i, "region": r, "status": status, "amount": i * 1.5} for i, r in zip(ids, regions, strict=True)],
        schema=ARROW,
    )


def round_commits(table: Any, number: int, rows_now: int, changes: int) -> dict[str, int]:
    """One round's commits: `changes` updates, `changes // 2` deletes, `changes` appends."""
    stride = max(1, rows_now // changes)
    updated = list(range(number % stride, rows_now, stride))[:changes]
    deleted = [i + 1 for i in updated[: changes // 2]]
    update(table, In("id", updated), lambda r: {**r, "status": f"round-{number}"})
    table.delete(In("id", deleted))
    table.append(rows(range(rows_now, rows_now + changes)))
    return {"updated": len(updated), "deleted": len(deleted), "appended": changes}


def write_config(workdir: Path, side: Side, label: str, url: str, visibility: float) -> Path:
    """The YAML of one side; `label` names its index and state store."""
    opensearch: dict[str, Any] = {"url": url, "aws_service": side.service, "aws_region": "us-east-1"}
    if side.service == "aoss":
        opensearch["visibility_seconds"] = visibility if side.waits else 0.0
    raw = {
        "catalog": {
            "name": CATALOG,
            "type": "sql",
            "uri": f"sqlite:///{workdir / 'catalog.db'}",
            "warehouse": (workdir / "warehouse").as_uri(),
        },
        "state": {"type": "sqlite", "path": str(workdir / f"state-{label}.db")},
        "opensearch": opensearch,
        "tables": [{"name": TABLE, "index": index_name(label)}],
    }
    path = workdir / f"{label}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def whole_command(config: Path, command: tuple[str, ...] = ("sync",)) -> dict[str, Any]:
    """`icecdc COMMAND --config CONFIG`, process start to exit: seconds, and the waits it logged."""
    started = time.perf_counter()
    argv = [str(ICECDC), *command[:1], "--config", str(config), *command[1:]]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"bench: {' '.join(argv)} failed ({done.returncode}): {done.stderr[-3000:]}")
    with config.with_suffix(".log").open("a") as log:  # what each sync logged, for a reader
        log.write(done.stderr)
    lines = done.stderr.splitlines()
    return {
        "seconds": round(seconds, 3),
        "visibility_waits": sum("visible to search" in line for line in lines),
        "landing_waits": sum("can still land" in line for line in lines),
    }


@contextmanager
def destinations(sink_url: str) -> Iterator[tuple[FaultProxy, Collection]]:
    with ExitStack() as stack:
        proxy = stack.enter_context(FaultProxy(sink_url))
        collection = stack.enter_context(Collection(sink_url, sink_url))
        yield proxy, collection


def measure(rows_count: int, rounds: int, changes: int, visibility: float, workdir: Path, exports: int = 3) -> dict[str, Any]:
    """`exports` exports (the last one's indexes kept) and `rounds` incremental rounds, each
    synced by every side in a rotating order: times, requests by operation, index == table."""
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ |= {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    catalog = SqlCatalog(CATALOG, uri=f"sqlite:///{workdir / 'catalog.db'}", warehouse=(workdir / "warehouse").as_uri())
    catalog.create_namespace_if_not_exists("db")
    table = catalog.create_table(TABLE, schema=SCHEMA, partition_spec=BY_REGION)
    for start in range(0, rows_count, 10_000):
        table.append(rows(range(start, min(rows_count, start + 10_000))))
    passes: list[dict[str, Any]] = []
    with SinkServer.start() as sink, destinations(sink.url) as (proxy, collection):
        urls = {side.name: collection.url if side.standin else proxy.url for side in SIDES}
        for number in range(exports):
            labels = {side.name: side.name if number == exports - 1 else f"{side.name}_x{number}" for side in SIDES}
            configs = {s.name: write_config(workdir, s, labels[s.name], urls[s.name], visibility) for s in SIDES}
            commits = {"exported": rows_count}
            passes.append(one_pass(f"export {number + 1}", number, configs, (proxy, collection, sink), commits))
            for name, label in labels.items():
                if label != name:  # the sink holds every document in memory
                    sink.request("DELETE", f"/{index_name(label)}-*")
        rows_now = rows_count
        for number in range(1, rounds + 1):
            commits = round_commits(catalog.load_table(TABLE), number, rows_now, changes)
            rows_now += changes
            passes.append(one_pass(f"round {number}", exports + number, configs, (proxy, collection, sink), commits))
        rebuild = ("repair", "--table", TABLE, "--rebuild")  # a new generation, then the swap: a wait
        rebuilt = {"rebuilt": rows_now - rounds * (changes // 2)}
        passes.append(one_pass("rebuild", exports + rounds + 1, configs, (proxy, collection, sink), rebuilt, rebuild))
        expected = dict(table_documents(catalog.load_table(TABLE), ("id",)))
        client = OpenSearch(hosts=[sink.url], timeout=120)
        equal = {name: index_documents(client, index_name(name)) == expected for name in NAMES}
    return summary(rows_count, rounds, changes, visibility, passes, equal, len(expected))


def index_name(label: str) -> str:
    return label.replace("_", "-")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def one_pass(
    name: str,
    number: int,
    configs: dict[str, Path],
    servers: tuple[FaultProxy, Collection, SinkServer],
    commits: dict[str, int],
    command: tuple[str, ...] = ("sync",),
) -> dict[str, Any]:
    """Every side's `icecdc COMMAND` (a sync of what is new), the first side rotating with `number`."""
    proxy, collection, sink = servers
    order = SIDES[number % len(SIDES) :] + SIDES[: number % len(SIDES)]
    done: dict[str, Any] = {"pass": name, **commits, "order": [side.name for side in order]}
    for side in order:
        counted = collection.counts if side.standin else (lambda: domain_counts(proxy))
        before, cpu, sink_cpu = Counter(counted()), time.process_time(), cpu_seconds(sink.pid)
        run = whole_command(configs[side.name], command)
        done[side.name] = {
            **run,
            "bench_cpu_seconds": round(time.process_time() - cpu, 3),
            "sink_cpu_seconds": round(cpu_seconds(sink.pid) - sink_cpu, 3),
            "requests": dict(sorted((Counter(counted()) - before).items())),
        }
    figures = ", ".join(f"{n} {done[n]['seconds']:.2f} s" for n in NAMES)
    print(f"bench.serverless_vs_domain: {name}: {figures}", flush=True)
    return done


def summary(
    rows_count: int,
    rounds: int,
    changes: int,
    visibility: float,
    passes: list[dict[str, Any]],
    equal: dict[str, bool],
    table_rows: int,
) -> dict[str, Any]:
    """Each part's medians and the ratios of their sums against the domain's."""
    parts = {
        "export": [p for p in passes if p["pass"].startswith("export")],
        "rounds": [p for p in passes if p["pass"].startswith("round")],
        "rebuild": [p for p in passes if p["pass"] == "rebuild"],
    }
    figures: dict[str, Any] = {}
    for part, which in parts.items():
        if not which:
            continue
        seconds = {name: [p[name]["seconds"] for p in which] for name in NAMES}
        domain = sum(seconds["domain"])
        figures[part] = {
            **{f"{name}_median_seconds": round(statistics.median(seconds[name]), 3) for name in NAMES},
            **{f"ratio_{name}": round(sum(seconds[name]) / domain, 3) for name in NAMES[1:]},
            **{
                f"{name}_median_{cpu}": round(statistics.median(p[name][cpu] for p in which), 3)
                for name in NAMES
                for cpu in ("bench_cpu_seconds", "sink_cpu_seconds")
            },
            "visibility_waits_per_pass": statistics.median(p["serverless"]["visibility_waits"] for p in which),
            "landing_waits_per_pass": statistics.median(p["serverless"]["landing_waits"] for p in which),
            # the serverless side less its waits (visibility_seconds each), over the domain's
            "ratio_serverless_less_waits": round(
                sum(p["serverless"]["seconds"] - p["serverless"]["visibility_waits"] * visibility for p in which) / domain,
                3,
            ),
            "median_pair_ratio_serverless": round(
                statistics.median(p["serverless"]["seconds"] / p["domain"]["seconds"] for p in which), 3
            ),
            "requests_per_pass": {name: which[-1][name]["requests"] for name in NAMES},
        }
    return {
        "dates": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "rows": rows_count,
        "rounds": rounds,
        "changes_per_round": {"updated": changes, "deleted": changes // 2, "appended": changes},
        "visibility_seconds": visibility,
        "goal": GOAL,
        "figures": figures,
        "table_rows": table_rows,
        "index_equals_table": equal,
        "passes": passes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000, help="rows exported")
    parser.add_argument("--rounds", type=int, default=6, help="incremental rounds after the export")
    parser.add_argument("--changes", type=int, default=300, help="updates (and appends) per round; half as many deletes")
    parser.add_argument("--exports", type=int, default=3, help="exports timed, each into new indexes")
    parser.add_argument("--visibility", type=float, default=0.5, help="the serverless side's visibility_seconds")
    parser.add_argument("--output", type=Path, default=RESULTS / "serverless.json")
    args = parser.parse_args()
    workdir = Path(os.environ.get("BENCH_WORK") or REPO / ".build" / "bench") / "serverless"
    if workdir.exists():
        shutil.rmtree(workdir)
    result = measure(args.rows, args.rounds, args.changes, args.visibility, workdir, args.exports)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["figures"], indent=1))
    print(f"bench.serverless_vs_domain: results in {urlsplit(args.output.as_uri()).path}")


if __name__ == "__main__":
    main()

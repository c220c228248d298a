"""icecdc against the peer (the job a Glue user would write with `create_changelog_view`): the same
snapshots of one table synced into two indexes, time and memory of each sync (results key `compare`)."""

from __future__ import annotations

from typing import Any

from bench.harness import peer
from bench.harness.sampling import Measure, measured
from bench.harness.session import Bench, check_indexes, counters, data_files, measure_fields
from bench.harness.tables import Mutator, create_table
from bench.profiles import profile_executor_path
from icecdc.config import Config
from icecdc.destination.index import IndexAlias
from icecdc.sync import SyncResult


def compare(bench: Bench) -> dict[str, Any]:
    """Rounds of `scale.snapshots` commits, each synced by both tools; neither exports first (the
    initial load is `sink_efficiency`'s), and the indexes are checked at the end."""
    scale, spark, name = bench.scale, bench.spark, "db.compare"
    create_table(spark, name, scale.compare_rows, scale.rows_per_file)
    config = bench.config(name, "ice", export=False)
    bench.sync(config)  # the checkpoint: the current snapshot, where the peer starts too
    IndexAlias(bench.client, "peer").ensure()
    mutator = Mutator(spark, name, scale.compare_rows, hot=scale.hot)
    start = bench.snapshot_id(name)
    # An unmeasured round first: both tools start their Python workers and import their libraries once.
    mutator.commit(scale.changes)
    _compare_round(bench, config, name, start, bench.snapshot_id(name), icecdc_first=True)
    start = bench.snapshot_id(name)
    rounds = []
    profile_config = bench.config(name, "profile", export=False)
    for number in range(scale.rounds):
        if number == scale.rounds - 1:
            bench.plan(profile_config)  # the profiled batch is the last round's snapshots
        for _ in range(scale.snapshots):
            mutator.commit(scale.changes)
        end = bench.snapshot_id(name)
        rounds.append(_compare_round(bench, config, name, start, end, icecdc_first=number % 2 == 0))
        start = end
    ice_seconds = sum(r["icecdc"]["seconds"] for r in rounds)
    peer_seconds = sum(r["peer"]["seconds"] for r in rounds)
    return {
        "table": {"rows": scale.compare_rows, "rows_per_file": scale.rows_per_file, "data_files": data_files(bench.table(name))},
        "snapshots_per_sync": scale.snapshots,
        "changes_per_snapshot": scale.changes,
        "hot": scale.hot,
        "rounds": rounds,
        "icecdc_seconds": ice_seconds,
        "peer_seconds": peer_seconds,
        "ratio_icecdc_to_peer": ice_seconds / peer_seconds,
        "executor_profile": profile_executor_path(bench, profile_config),
        "check": check_indexes(bench, bench.client, config, name, "ice", "peer"),
    }


def _compare_round(bench: Bench, config: Config, name: str, start: int, end: int, icecdc_first: bool) -> dict[str, Any]:
    """One sync of the same snapshots by each tool; which goes first alternates to cancel warm-up effects."""

    def run_peer() -> Measure:
        with measured(bench.sampler) as measure:
            peer.sync(bench.spark, name, "peer", bench.opensearch_url, start, end)
        return measure

    def run_icecdc() -> tuple[Measure, SyncResult]:
        return bench.sync(config)

    if icecdc_first:
        (ice, result), theirs = run_icecdc(), run_peer()
    else:
        theirs = run_peer()
        ice, result = run_icecdc()
    return {
        "icecdc": {**measure_fields(ice), **counters(result)},
        "peer": measure_fields(theirs),
        "ratio": ice.seconds / theirs.seconds,
        "icecdc_first": icecdc_first,
    }

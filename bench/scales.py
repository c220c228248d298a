"""How big each measurement is at each scale: `smoke` (a quick check), `default` (what `make bench`
runs, well under 30 minutes on 2 cores) and `full` (the sizes the benchmarks were specified at)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    """The sizes of the measurements `python -m bench` runs in one process."""

    name: str
    compare_rows: int  # sync_vs_peer's table (full: 1,000,000)
    rows_per_file: int
    rounds: int  # syncs of `snapshots` snapshots each
    snapshots: int
    changes: int  # changed keys per snapshot
    scaling_rows: tuple[int, ...]  # update_cost's tables (full: 10^5, 10^6, 10^7)
    scaling_repeats: int
    batch_rows: int
    batch_snapshots: int  # full: 50
    batch_changes: int
    sink_rows: int  # osmem indexes ~2,000 documents/s on 2 cores: this sets sink_efficiency's length
    hot: float  # share of changed keys among the newest tenth of ids; the rest anywhere (rewriting more files)
    throughput_rows: int  # throughput's table, on the bench sink
    throughput_rows_per_file: int
    probe_rows: tuple[int, int]  # memory_probe's two sizes, in files of one size
    probe_rows_per_file: int
    export_rows: tuple[int, ...]  # export_speed's tables: two side by side with the peer; a third (full) exported alone
    export_rows_per_file: int


SCALES = {
    "smoke": Scale(
        name="smoke",
        compare_rows=20_000,
        rows_per_file=2_000,
        rounds=1,
        snapshots=5,
        changes=20,
        scaling_rows=(10_000, 40_000),
        scaling_repeats=2,
        batch_rows=10_000,
        batch_snapshots=5,
        batch_changes=10,
        sink_rows=5_000,
        hot=1.0,
        throughput_rows=50_000,
        throughput_rows_per_file=5_000,
        probe_rows=(50_000, 200_000),
        probe_rows_per_file=5_000,
        export_rows=(50_000, 100_000),
        export_rows_per_file=5_000,
    ),
    "default": Scale(
        name="default",
        compare_rows=200_000,
        rows_per_file=10_000,
        rounds=2,
        snapshots=20,
        changes=100,
        scaling_rows=(100_000, 1_000_000),
        scaling_repeats=3,
        batch_rows=100_000,
        batch_snapshots=50,
        batch_changes=20,
        sink_rows=30_000,
        hot=1.0,
        throughput_rows=1_000_000,
        throughput_rows_per_file=100_000,
        probe_rows=(1_000_000, 4_000_000),
        probe_rows_per_file=100_000,
        export_rows=(1_000_000, 2_000_000),
        export_rows_per_file=100_000,
    ),
    "full": Scale(
        name="full",
        compare_rows=1_000_000,
        rows_per_file=10_000,
        rounds=3,
        snapshots=20,
        changes=500,
        scaling_rows=(100_000, 1_000_000, 10_000_000),
        scaling_repeats=3,
        batch_rows=100_000,
        batch_snapshots=50,
        batch_changes=20,
        sink_rows=200_000,
        hot=0.8,
        throughput_rows=2_000_000,
        throughput_rows_per_file=100_000,
        probe_rows=(1_000_000, 4_000_000),
        probe_rows_per_file=100_000,
        export_rows=(1_000_000, 2_000_000, 10_000_000),
        export_rows_per_file=100_000,
    ),
}


@dataclass(frozen=True)
class CommandScale:
    """The sizes of `python -m bench.whole_commands` (each command a process of its own)."""

    name: str
    engine_rows: int  # the engines' table (10^6 rows at default)
    engine_rows_per_file: int
    merge_changes: int  # the engines' MERGE (100 rows at default)
    engine_rounds: int  # each commit kind, each engine, this many times
    peer_rows: int  # the tables against the peer's job (200,000 rows at default)
    peer_rows_per_file: int
    one_row_commits: int  # one sync each: an update, a partition move, a delete, in turn
    batches: int  # syncs of `batch_commits` commits of `batch_changes` changed keys each
    batch_commits: int
    batch_changes: int
    searchable_rounds: int  # commit to searchable: commits per engine
    startup_repeats: int  # each piece of a command's fixed cost, this many times (the median is reported)


COMMAND_SCALES = {
    "smoke": CommandScale(
        name="smoke",
        engine_rows=20_000,
        engine_rows_per_file=2_000,
        merge_changes=20,
        engine_rounds=1,
        peer_rows=20_000,
        peer_rows_per_file=2_000,
        one_row_commits=1,
        batches=1,
        batch_commits=3,
        batch_changes=20,
        searchable_rounds=1,
        startup_repeats=1,
    ),
    "default": CommandScale(
        name="default",
        engine_rows=1_000_000,
        engine_rows_per_file=100_000,
        merge_changes=100,
        engine_rounds=2,
        peer_rows=200_000,
        peer_rows_per_file=10_000,
        one_row_commits=3,
        batches=2,
        batch_commits=20,
        batch_changes=100,
        searchable_rounds=3,
        startup_repeats=3,
    ),
}
COMMAND_SCALES["full"] = COMMAND_SCALES["default"]  # the default is already the specified size

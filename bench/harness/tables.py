"""Bench tables and their commits, written by Spark SQL through Iceberg's runtime: copy-on-write, format
v2, partitioned by `region` (or not), ids laid out in files of `rows_per_file`, so one changed row
rewrites one file. Copy-on-write because `create_changelog_view` (the peer) reads nothing else.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from bench.harness.environment import CATALOG

REGIONS = 8
COLUMNS = "id, region, customer, amount, qty, status, updated_at"
STATUSES = ("new", "paid", "shipped", "returned")
BASE_TS = 1_760_000_000  # seconds; timestamps are BASE_TS + id, then bumped by updates


def create_table(
    spark: Any,
    name: str,
    rows: int,
    rows_per_file: int,
    partitioned: bool = True,
    key_bounds: bool = True,
    layout: str = "sorted",
) -> None:
    """A copy-on-write table of `rows` rows in about rows / rows_per_file files, partitioned by
    `region` or not; without `key_bounds`, the manifests keep no bounds of `id` (no column metrics).
    `layout`: `sorted`, each file a block of contiguous ids (one region per block); `spread`, rows
    dealt to files round-robin, so every file spans the whole range of ids (as a hash-distributed
    write, or many MERGEs, leave a table); `few_first`, ids sorted as `sorted` but `region` taking
    its 8 values in every file (a first identifier column of a handful of values, `(region, id)`)."""
    spark.sql(f"DROP TABLE IF EXISTS {CATALOG}.{name}")
    partitioning = "PARTITIONED BY (region)" if partitioned else ""
    metrics = "" if key_bounds else ", 'write.metadata.metrics.column.id' = 'none'"
    spark.sql(
        f"""CREATE TABLE {CATALOG}.{name} (
              id BIGINT NOT NULL, region STRING, customer STRING, amount DECIMAL(12, 2),
              qty INT, status STRING, updated_at TIMESTAMP)
            USING iceberg {partitioning}
            TBLPROPERTIES (
              'format-version' = '2',
              'write.delete.mode' = 'copy-on-write', 'write.update.mode' = 'copy-on-write',
              'write.merge.mode' = 'copy-on-write',
              -- keep the files the data lays out (no shuffle into one file per partition)
              'write.distribution-mode' = 'none', 'write.spark.fanout.enabled' = 'true'{metrics})"""
    )
    spark.sql(f"ALTER TABLE {CATALOG}.{name} SET IDENTIFIER FIELDS id")
    files = max(1, rows // rows_per_file)
    # One region per block of rows_per_file ids, and a range partitioning on id: each write task
    # gets about one block, so each file holds one block.
    region = f"id % {REGIONS}" if layout == "few_first" else f"floor(id / {rows_per_file}) % {REGIONS}"
    data = spark.range(rows).selectExpr(
        "id",
        f"concat('r', cast({region} as string)) AS region",
        "concat('customer-', cast(id % 9973 as string)) AS customer",
        "cast((id % 100000) / 100.0 as decimal(12, 2)) AS amount",
        "cast(id % 50 as int) AS qty",
        f"element_at(array{STATUSES}, cast(id % {len(STATUSES)} as int) + 1) AS status",
        f"timestamp_seconds({BASE_TS} + id) AS updated_at",
    )
    laid = data.repartition(files) if layout == "spread" else data.repartitionByRange(files, "id").sortWithinPartitions("id")
    laid.writeTo(f"{CATALOG}.{name}").append()


def update_every_file(spark: Any, name: str, bump: int = 1) -> list[int]:
    """One copy-on-write UPDATE that changes one row in every data file of the table (the row with
    the file's lowest id, by Iceberg's `_file` column): every file is rewritten, and all but one
    row of each is a carryover. Returns the ids of the rows it changed."""
    lowest = spark.sql(f"SELECT min(id) AS id FROM {CATALOG}.{name} GROUP BY _file").collect()
    keys = sorted(int(row["id"]) for row in lowest)
    spark.createDataFrame([(k,) for k in keys], "id BIGINT").createOrReplaceTempView("bench_every_file")
    spark.sql(
        f"""MERGE INTO {CATALOG}.{name} t USING bench_every_file s ON t.id = s.id
            WHEN MATCHED THEN UPDATE SET t.qty = t.qty + 1, t.updated_at = timestamp_seconds({BASE_TS} + t.id + {bump})"""
    )
    return keys


@dataclass
class Mutator:
    """Commits snapshots of mixed changes — updates, partition moves, deletes, inserts — one MERGE each.

    Which keys change: `hot` of them within the newest tenth of ids (recent rows change most, as in
    an orders table), the rest anywhere. Copy-on-write rewrites every file a changed key lives in."""

    spark: Any
    table: str
    rows: int  # ids 0 .. rows-1 exist at the start
    seed: int = 6
    hot: float = 0.8
    deleted: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self._next_id = self.rows
        self._bump = 0

    def commit(self, changes: int) -> None:
        """One snapshot with about `changes` changed keys: 60% updates, 10% partition moves, 10% deletes, 20% inserts."""
        keys = self._live_keys(int(changes * 0.8))
        updates, moves, deletes = (
            keys[: len(keys) * 6 // 8],
            keys[len(keys) * 6 // 8 : len(keys) * 7 // 8],
            keys[len(keys) * 7 // 8 :],
        )
        inserts = list(range(self._next_id, self._next_id + max(1, changes // 5)))
        self._next_id += len(inserts)
        self.deleted.update(deletes)
        self._bump += 1
        source = (
            [(k, "U") for k in updates] + [(k, "M") for k in moves] + [(k, "D") for k in deletes] + [(k, "I") for k in inserts]
        )
        self.spark.createDataFrame(source, "id BIGINT, op STRING").createOrReplaceTempView("bench_changes")
        self.spark.sql(self._merge())

    def pick(self, op: str) -> int:
        """The key the next one-row commit of `op` changes (a new id for an insert)."""
        return self._next_id if op == "I" else self._live_keys(1)[0]

    def one_row(self, op: str, key: int) -> None:
        """One commit of a single update (U), partition move (M), delete (D) or insert (I) of `key`."""
        if op == "I":
            self._next_id += 1
        elif op == "D":
            self.deleted.add(key)
        self._bump += 1
        self.spark.createDataFrame([(key, op)], "id BIGINT, op STRING").createOrReplaceTempView("bench_changes")
        self.spark.sql(self._merge())

    def update_one(self) -> None:
        """One snapshot that changes a single row (copy-on-write: its file is rewritten)."""
        key = self._live_keys(1)[0]
        self._bump += 1
        self.spark.sql(
            f"UPDATE {CATALOG}.{self.table} SET qty = qty + 1, updated_at = timestamp_seconds({BASE_TS} + id + {self._bump}) WHERE id = {key}"
        )

    def _live_keys(self, count: int) -> list[int]:
        hot_start = self.rows - max(1, self.rows // 10)
        chosen: set[int] = set()
        while len(chosen) < count:
            low = hot_start if self._random.random() < self.hot else 0
            key = self._random.randrange(low, self.rows)
            if key not in self.deleted:
                chosen.add(key)
        return sorted(chosen)

    def _merge(self) -> str:
        moved = f"concat('r', cast((cast(substr(t.region, 2) as int) + 1) % {REGIONS} as string))"
        return f"""
            MERGE INTO {CATALOG}.{self.table} t USING bench_changes s ON t.id = s.id
            WHEN MATCHED AND s.op = 'D' THEN DELETE
            WHEN MATCHED AND s.op = 'U' THEN UPDATE SET
              t.amount = t.amount + 1, t.qty = t.qty + 1, t.status = 'paid',
              t.updated_at = timestamp_seconds({BASE_TS} + t.id + {self._bump})
            WHEN MATCHED AND s.op = 'M' THEN UPDATE SET
              t.region = {moved}, t.updated_at = timestamp_seconds({BASE_TS} + t.id + {self._bump})
            WHEN NOT MATCHED AND s.op = 'I' THEN INSERT ({COLUMNS}) VALUES (
              s.id, concat('r', cast(s.id % {REGIONS} as string)), concat('customer-', cast(s.id % 9973 as string)),
              cast(1.00 as decimal(12, 2)), 1, 'new', timestamp_seconds({BASE_TS} + s.id))"""

"""Spark SQL with Iceberg's Spark runtime against each test's own pyiceberg SQLite catalog.

The session-scoped `spark` fixture loads the Iceberg runtime (`iceberg_spark_conf`). A test asks
for `spark_sql` (or calls `spark_catalog`) and gets a child session — `spark.newSession()`, same
JVM and SparkContext — whose Spark catalog `lake` is an Iceberg JdbcCatalog on the test's
`catalog.db` and `warehouse`, the very ones `Pipeline.catalog` (pyiceberg SqlCatalog "lake") uses.

Why a child session per test and not a catalog name per test: Iceberg's JdbcCatalog writes its
Spark catalog name into `iceberg_tables.catalog_name`, and pyiceberg reads only rows of its own
name, so the Spark catalog must be called `lake`. Spark's CatalogManager caches a catalog per
session after first use, so re-pointing `lake` in one shared session would keep the old SQLite
file; a child session has its own SQL conf and catalog cache, and costs milliseconds.

Where the jars come from (first that applies):
  ICECDC_SPARK_PACKAGES  Maven coordinates for `spark.jars.packages`, e.g.
                         org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2,org.xerial:sqlite-jdbc:3.46.1.3
  ICECDC_ICEBERG_JARS    prebuilt jars for `spark.jars`: files or directories, ':' or ',' separated
  default                local/iceberg_runtime.py builds them into .build/iceberg-jars (`make iceberg-jars`)
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CATALOG = "lake"  # must equal pyiceberg's SqlCatalog name: it is the catalog_name column of both
EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"

# Catalog settings shared by every test; uri and warehouse are set per child session.
CATALOG_CONF = {
    f"spark.sql.catalog.{CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
    f"spark.sql.catalog.{CATALOG}.type": "jdbc",
    # pyiceberg creates the V1 layout (iceberg_tables with iceberg_type); JdbcCatalog then uses
    # it too, and creates it itself when Spark is first to touch a fresh catalog.db.
    f"spark.sql.catalog.{CATALOG}.jdbc.schema-version": "V1",
    # Tests interleave pyiceberg and Spark commits on one table: a cached Table in Spark would
    # read a stale snapshot after a pyiceberg commit.
    f"spark.sql.catalog.{CATALOG}.cache-enabled": "false",
}

# Why the Iceberg runtime could not be loaded, when it could not; spark_sql fails with it.
_unavailable: list[str] = []


def _load_builder() -> ModuleType:
    # local/ is a directory of scripts, not a package: load the builder by path.
    spec = importlib.util.spec_from_file_location("icecdc_local_iceberg_runtime", REPO / "local" / "iceberg_runtime.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _jar_list(value: str) -> list[str]:
    jars: list[str] = []
    for item in filter(None, re.split(r"[,:]", value)):
        path = Path(item).expanduser()
        jars.extend(sorted(str(p) for p in path.glob("*.jar")) if path.is_dir() else [str(path)])
    return jars


def iceberg_spark_conf() -> dict[str, str]:
    """Spark settings that load Iceberg's runtime, its SQL extensions and the `lake` catalog
    class; {} (and the reason kept for `spark_sql`) when no runtime can be had."""
    packages = os.environ.get("ICECDC_SPARK_PACKAGES")
    jars_env = os.environ.get("ICECDC_ICEBERG_JARS")
    conf = {"spark.sql.extensions": EXTENSIONS, **CATALOG_CONF}
    if packages:
        return {"spark.jars.packages": packages, **conf}
    if jars_env:
        return {"spark.jars": ",".join(_jar_list(jars_env)), **conf}
    builder = _load_builder()
    try:
        jars = builder.build()
    except Exception as exc:  # noqa: BLE001 - any failure leaves the rest of the suite runnable
        _unavailable.append(f"Iceberg Spark runtime unavailable: {exc}")
        return {}
    return {"spark.jars": ",".join(str(j) for j in jars), **conf}


@dataclass
class SparkSql:
    """A test's Spark view of its catalog: `session.sql(...)` on `catalog`.`db`.`table`."""

    session: Any  # pyspark.sql.SparkSession, a child of the shared session
    catalog: str = CATALOG

    def sql(self, query: str) -> Any:
        return self.session.sql(query)

    def name(self, table: str) -> str:
        """`db.x` -> `lake.db.x`, for SQL."""
        return f"{self.catalog}.{table}"

    def java_table(self, table: str) -> Any:
        """The org.apache.iceberg.Table behind `table` (py4j), for Iceberg's Java API."""
        jvm = self.session._jvm
        return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.session._jsparkSession, self.name(table))

    def close(self) -> None:
        # JdbcCatalog keeps a pool of open SQLite connections; release them with the test.
        manager = self.session._jsparkSession.sessionState().catalogManager()
        if manager.isCatalogRegistered(self.catalog):
            manager.catalog(self.catalog).icebergCatalog().close()


def spark_catalog(spark: Any, workdir: Path, namespace: str | None = "db") -> SparkSql:
    """A child session of `spark` whose catalog `lake` is `workdir`/catalog.db with `workdir`/warehouse,
    as Pipeline's pyiceberg catalog; creates `namespace` when given (both sides see it)."""
    if _unavailable:
        pytest.fail(_unavailable[0])
    session = spark.newSession()
    session.conf.set(f"spark.sql.catalog.{CATALOG}.uri", f"jdbc:sqlite:{workdir / 'catalog.db'}")
    session.conf.set(f"spark.sql.catalog.{CATALOG}.warehouse", (workdir / "warehouse").as_uri())
    result = SparkSql(session)
    if namespace:
        result.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{namespace}")
    return result


def run_sql(spark: Any, workdir: Path, *statements: str) -> None:
    """Statements of Iceberg's Spark SQL on `workdir`'s catalog, its connections closed after:
    SQLite lets one process write at a time, and tests commit with pyiceberg in between."""
    session = spark_catalog(spark, workdir, namespace=None)
    try:
        for statement in statements:
            session.sql(statement).collect()
    finally:
        session.close()


@pytest.fixture
def spark_sql(spark: Any, tmp_path: Path) -> Iterator[SparkSql]:
    """Spark SQL on this test's catalog (the one `pipeline.catalog` opens: same tmp_path)."""
    result = spark_catalog(spark, tmp_path)
    yield result
    result.close()


def write_equality_deletes(  # noqa: C901 - one script of JVM calls; its branches check the input
    ss: SparkSql, table: str, rows: list[dict[str, Any]], *, inserts: list[dict[str, Any]] | None = None, format_: str = "parquet"
) -> list[Any]:
    """Commit equality deletes to `table` the way Flink's upsert writer does: Iceberg's own Java
    writers (GenericAppenderFactory) and one RowDelta. The equality fields are the keys of `rows`
    (every row has the same keys); a partitioned table needs the partition source columns among
    them, and gets one delete file per partition. `inserts` (full rows) are added as data files
    in the same commit, as an upsert does: they carry the delete's sequence number, so the
    deletes do not apply to them. Returns the committed Java DeleteFiles and DataFiles.

    Why a staging table: values must reach Iceberg's writers as Iceberg's Java types (Long,
    LocalDate, ...), and py4j turns every boxed number back into a Python int. So Spark types
    the rows, writes them to a throw-away Iceberg table in a Hadoop catalog outside the test's
    catalog, and IcebergGenerics reads them back as Records that never leave the JVM."""
    if not rows:
        raise ValueError("no rows to delete")
    columns = list(rows[0])
    if any(list(r) != columns for r in rows):
        raise ValueError("every row needs the same columns in the same order")
    session = ss.session
    jvm = session._jvm
    gateway = session.sparkContext._gateway
    target = ss.java_table(table)
    schema = target.schema()
    spec = target.spec()
    # The delete rows' schema: the table's fields (ids, types) in the order of `columns`.
    delete_schema = jvm.org.apache.iceberg.Schema(jvm.java.util.ArrayList([schema.findField(c) for c in columns]))
    if spec.isPartitioned():
        sources = {schema.findColumnName(f.sourceId()) for f in spec.fields()}
        if not sources <= set(columns):
            raise ValueError(f"partitioned table: rows need the partition source columns {sorted(sources)}")
    ids = gateway.new_array(gateway.jvm.int, len(columns))
    for i, c in enumerate(columns):
        ids[i] = schema.findField(c).fieldId()
    factory = jvm.org.apache.iceberg.data.GenericAppenderFactory(schema, spec, ids, delete_schema, None)
    file_format = jvm.org.apache.iceberg.FileFormat.fromString(format_)
    files = jvm.org.apache.iceberg.io.OutputFileFactory.builderFor(target, 1, 1).format(file_format).build()

    staging_dir = Path(tempfile.mkdtemp(prefix="icecdc-eqdel-"))
    staging_catalog = f"eqdel_{uuid.uuid4().hex[:12]}"
    session.conf.set(f"spark.sql.catalog.{staging_catalog}", "org.apache.iceberg.spark.SparkCatalog")
    session.conf.set(f"spark.sql.catalog.{staging_catalog}.type", "hadoop")
    session.conf.set(f"spark.sql.catalog.{staging_catalog}.warehouse", staging_dir.as_uri())

    def write(name: str, data: list[dict[str, Any]], row_schema: Any, new_writer: Any) -> list[Any]:
        """Stage `data`, then write it with one writer per partition; the writers' files."""
        staged = f"{staging_catalog}.s.{name}"
        spark_schema = session.table(ss.name(table)).select(*[f.name() for f in row_schema.columns()]).schema
        session.createDataFrame(data, spark_schema).coalesce(1).writeTo(staged).create()
        records = jvm.org.apache.iceberg.data.IcebergGenerics.read(
            jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(session._jsparkSession, staged)
        ).build()
        writers: dict[str, Any] = {}  # partition path -> writer
        # Partition transforms take Iceberg's internal values (days, micros): hence the wrapper.
        wrapper = jvm.org.apache.iceberg.data.InternalRecordWrapper(row_schema.asStruct())
        key = jvm.org.apache.iceberg.PartitionKey(spec, row_schema) if spec.isPartitioned() else None
        iterator = records.iterator()
        try:
            while iterator.hasNext():
                record = iterator.next()  # a Java Record: stays in the JVM, positional like row_schema
                partition = None
                if key is not None:
                    key.partition(wrapper.wrap(record))
                    partition = key.copy()
                path = "" if key is None else key.toPath()
                if path not in writers:
                    out = files.newOutputFile(spec, partition) if partition is not None else files.newOutputFile()
                    writers[path] = new_writer(out, file_format, partition)
                writers[path].write(record)
        finally:
            records.close()
            for writer in writers.values():
                writer.close()
        return [w.toDeleteFile() if name == "deletes" else w.toDataFile() for w in writers.values()]

    try:
        delta = target.newRowDelta()
        delete_files = write("deletes", rows, delete_schema, factory.newEqDeleteWriter)
        for delete_file in delete_files:
            delta.addDeletes(delete_file)
        data_files = write("inserts", inserts, schema, factory.newDataWriter) if inserts else []
        for data_file in data_files:
            delta.addRows(data_file)
        delta.commit()
        return delete_files + data_files
    finally:
        for name in ("deletes", "inserts"):
            session.sql(f"DROP TABLE IF EXISTS {staging_catalog}.s.{name}")
        shutil.rmtree(staging_dir, ignore_errors=True)


__all__ = ["CATALOG", "SparkSql", "iceberg_spark_conf", "spark_catalog", "spark_sql", "write_equality_deletes"]

"""Every private API of PySpark and py4j that icecdc uses, in one place.

py4j is PySpark's gateway to the JVM. They are used as the pyspark of Glue 5.1 has them,
pinned in pyproject.toml. Each does what no public function offers; why is said next to
it. The tests that use them, tests/test_batches.py and tests/test_in_process_workers.py,
fail loudly when an upgrade changes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyspark import SparkContext
from pyspark.rdd import RDD
from pyspark.serializers import BatchedSerializer, pack_long

# The pyspark release these were checked against.
PYSPARK_VERSION = "3.5.6"


def partition_as_sent(rdd: RDD[tuple[int, Any]], partitions: int) -> RDD[tuple[int, Any]]:
    """`rdd.partitionBy(partitions, lambda key: key)`, each record sent on as the worker makes it.

    The keys are in [0, partitions). Each record goes on to the JVM's shuffle as
    soon as the Python worker makes it.

    Why not `RDD.partitionBy`: it buckets records in the Python worker and sends them on only every
    min(10 x partitions, 1000) records, in `add_shuffle_key` of pyspark/rdd.py. A task whose records
    are large, as a dealt rewrite's Arrow batches are, then holds more of them with every partition.
    Why not a DataFrame's `repartition`: converting each record to a row costs the JVM about 3x the
    memory and the time, as the bench's memory probe measured. The rest is `partitionBy`'s own code.
    """
    serializer = rdd.ctx._unbatched_serializer

    def one_by_one(_: int, records: Iterable[tuple[int, Any]]) -> Iterator[bytes]:
        for key, value in records:
            yield pack_long(key)  # type: ignore[no-untyped-call]
            yield serializer.dumps([(key, value)])  # type: ignore[no-untyped-call]

    keyed = rdd.mapPartitionsWithIndex(one_by_one, preservesPartitioning=True)
    keyed._bypass_serializer = True  # type: ignore[attr-defined]  # the records are bytes already
    jvm = rdd.ctx._jvm
    assert jvm is not None
    pairs = jvm.PairwiseRDD(keyed._jrdd.rdd()).asJavaPairRDD()
    # PythonPartitioner's hash of a key is `pack_long`'s value, modulo `partitions`: the key itself
    partitioner = jvm.PythonPartitioner(partitions, id(partition_as_sent))
    batched = BatchedSerializer(serializer)  # type: ignore[no-untyped-call]
    return RDD(jvm.PythonRDD.valueOfPair(pairs.partitionBy(partitioner)), rdd.ctx, batched)


def py4j_connections() -> list[Any]:
    """The open connections of this process's threads to Spark's JVM; none before a JVM starts.

    Why: a forked child must hold them. py4j shuts a connection's socket down when the thread that
    owns it ends, in `ClientServerConnection.__del__`, once the thread's locals are freed. In a
    child forked from one thread, every other thread's locals are freed at the fork, and the
    shutdown ends the TCP connection the parent shares. The parent's threads then find theirs reset:
    py4j's finalizer worker logs it and reconnects, and another thread's call to Spark could fail.
    Held by the child, they are never freed there, as a child ends with `os._exit`, which runs no
    finalizer. A connection in the middle of a call is not in py4j's deque and not held.
    """
    client = getattr(SparkContext._gateway, "_gateway_client", None)
    return list(getattr(client, "deque", ()))

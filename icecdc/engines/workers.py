"""Processes for the in-process engine's parts of a pass, one per usable core.

Processes, not threads: a pass's time is spent turning rows into documents in Python, which holds
the GIL. Arrow's own threads decode Parquet, a small part.

Forked, so a worker starts in milliseconds with icecdc imported, and nothing re-imports the caller's
main module, as a fork server or spawn would run an unguarded script again. The caller's other
threads, such as a lease's renewal, are not in the child, which uses none of their locks. Each
worker gets its part and answers through a pipe, not a `multiprocessing.Pool`, whose queues need
POSIX semaphores that AWS Lambda lacks.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import resource
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

from icecdc.errors import ProcessingError

log = logging.getLogger(__name__)

P = TypeVar("P")
R = TypeVar("R")

# Lambda gives a function one vCPU per 1,769 MB of memory (AWS Lambda
# documentation, "Memory and computing power").
LAMBDA_MB_PER_VCPU = 1769


def usable_cores() -> int:
    """The cores this process may run on; in AWS Lambda, no more than its memory's vCPU share."""
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    memory = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
    if memory:
        cores = min(cores, lambda_vcpus(int(memory)))
    return max(cores, 1)


def lambda_vcpus(memory_mb: int) -> int:
    """Whole vCPUs a Lambda function of this memory gets (at least one)."""
    return max(memory_mb // LAMBDA_MB_PER_VCPU, 1)


def run_parallel(
    function: Callable[[P], R],
    parts: Sequence[P],
    workers: int,
    ended: Callable[[int], None] | None = None,
) -> list[tuple[R, int]]:
    """`function(part)` of every part, each in a process of its own, at most `workers` at once.

    When one process would do, it runs in this one. Each result comes with the peak
    RSS of its worker in bytes, 0 in this process. `ended(number)` is called here as
    each part's result arrives, for progress. The first error a worker raises is
    raised here, and the others are stopped.
    """
    results: list[tuple[R, int] | None] = [None] * len(parts)
    if workers <= 1 or len(parts) <= 1:
        for number, part in enumerate(parts):
            results[number] = (function(part), 0)
            if ended is not None:
                ended(number)
        return [r for r in results if r is not None]
    context = multiprocessing.get_context("fork")
    waiting = list(enumerate(parts))
    running: dict[Connection, tuple[Any, int]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                number, part = waiting.pop(0)
                receive, send = context.Pipe(duplex=False)
                process = context.Process(target=_work, args=(function, part, send), daemon=True)
                with _jvm_connections_held():
                    process.start()
                send.close()
                running[receive] = (process, number)
            for ready in wait(list(running)):
                assert isinstance(ready, Connection)
                process, number = running.pop(ready)
                results[number] = _answer(ready, process)
                if ended is not None:
                    ended(number)
    finally:
        for process, _ in running.values():
            process.kill()
    return [r for r in results if r is not None]


@contextmanager
def _jvm_connections_held() -> Iterator[list[Any]]:
    """Hold the process's connections to Spark's JVM, if it has any, while a child is forked.

    The child is inside this block until it ends, so it never frees and shuts down the connections
    it shares with this process (see `pyspark_compat.py4j_connections`).
    """
    if "pyspark" not in sys.modules:  # no JVM; importing pyspark would cost a small pass its start
        yield []
        return
    from icecdc.engines.pyspark_compat import py4j_connections

    held = py4j_connections()  # a local: what `yield` hands out is not kept by this frame
    yield held


def _answer(connection: Connection, process: Any) -> Any:
    try:
        failed, value, peak = connection.recv()
    except EOFError:
        process.join()
        raise ProcessingError(f"an in-process worker died (exit code {process.exitcode})") from None
    process.join()
    if failed:
        raise value
    return value, peak


def _work(function: Callable[[Any], Any], part: Any, send: Connection) -> None:
    try:
        value = function(part)
    # Every error goes back to the caller, which raises it.
    except BaseException as exc:  # noqa: BLE001
        send.send((True, exc, 0))
    else:
        send.send((False, value, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))
    send.close()

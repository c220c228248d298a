"""The bench's reading of the JVM's GC log (bench/harness/gclog.py): what the memory probe judges the JVM by."""

from __future__ import annotations

from bench.harness.gclog import jvm_heap

G1_LOG = """\
[0.003s][info][gc] Using G1
[0.146s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 23M->20M(388M) 5.720ms
[1.243s][info][gc] GC(6) Concurrent Mark Cycle
[1.254s][info][gc] GC(6) Pause Remark 28M->28M(136M) 3.184ms
[3.734s][info][gc] GC(11) Pause Young (Prepare Mixed) (G1 Evacuation Pause) 122M->34M(148M) 7.752ms
[6.182s][info][gc] GC(13) Pause Young (Concurrent Start) (G1 Evacuation Pause) 110M->38M(148M) 6.589ms
[6.247s][info][gc] GC(14) Concurrent Mark Cycle 65.139ms
"""

SERIAL_LOG = """\
[0.004s][info][gc] Using Serial
[0.512s][info][gc] GC(0) Pause Young (Allocation Failure) 33M->10M(119M) 12.301ms
[2.100s][info][gc] GC(1) Pause Full (Metadata GC Threshold) 1536K->1024K(2G) 30.000ms
"""


def test_the_heap_after_collections_is_the_most_any_pause_left_before_the_most_it_let_fill() -> None:
    assert jvm_heap(G1_LOG) == {"pauses": 4, "before_collection_peak": 122, "after_collection_peak": 38, "committed_peak": 388}


def test_every_unit_of_the_log_is_read_as_mib_whatever_the_collector() -> None:
    assert jvm_heap(SERIAL_LOG) == {
        "pauses": 2,
        "before_collection_peak": 33,
        "after_collection_peak": 10,
        "committed_peak": 2048,
    }
    assert jvm_heap("[0.1s][info][gc] GC(0) Pause Full (System.gc()) 2G->1536K(4G) 1.0ms")["before_collection_peak"] == 2048


def test_a_log_without_a_collection_reads_as_none() -> None:
    assert jvm_heap("[0.003s][info][gc] Using G1\n") == {
        "pauses": 0,
        "before_collection_peak": 0.0,
        "after_collection_peak": 0.0,
        "committed_peak": 0.0,
    }

"""A sync: the run over a table's indexes, and the pass that reads, shuffles and writes for them.

`run` holds the leases, the rounds of plan-then-pass, the deadline and the progress, and plans.
`passes` applies one batch to 1..N indexes at once, and plans nothing. `indexes` is what both
know of an index: its claim, the spec a pass writes, where a capped pass wrote.
"""

from icecdc.sync.passes import PassResult
from icecdc.sync.run import PassOptions, SyncResult, SyncRun, process_table, sync, sync_table

__all__ = [
    "PassOptions",
    "PassResult",
    "SyncResult",
    "SyncRun",
    "process_table",
    "sync",
    "sync_table",
]

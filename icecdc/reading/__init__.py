"""Reading the files of work items into change rows, for copy-on-write and merge-on-read tables.

Two sides. `driver`, with `ranges`, runs on the driver and turns work items into tasks
from the manifests alone. `reader` runs on the executors and reads the tasks' files
into change rows. `tasks` holds what passes between them. This package imports none of
them, so an executor loads only what it runs.

A task says which file to read, whether its rows are inserts or deletes, at which sequence number,
and which delete files are in force. Executors read each file with pyiceberg's `ArrowScan`: columns
are matched by field ID and projected onto the current schema, so a renamed column reads right, a
dropped one is gone, and an added one is null. Identity-partition values come from metadata. Each
row becomes a document (see `documents.py`) keyed by its `_id`.

What a snapshot's files mean:

- A data file it added: INSERTs of its rows live at the snapshot, with the deletes in force applied.
- A data file it removed: DELETEs of its rows live just before, with the parent's deletes applied.
- A position-delete file or deletion vector it added: DELETEs of the rows of the referenced data
  files that were live before and are not after. Only newly deleted positions count, and a new
  vector that replaces an older one yields just the difference.
- An equality-delete file it added on the identifier columns: a DELETE per key, with no scan.

Consecutive copy-on-write commits of one pass collapse into one change (`_collapse`): files added
and removed within the run are never read.
"""

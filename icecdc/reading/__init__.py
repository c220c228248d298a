"""Reading the files of work items into change rows, Iceberg-aware, copy-on-write and merge-on-read.

Two sides: `driver` (with `ranges`) runs on the driver (work items and manifests → tasks, metadata
only), `reader` on the executors (tasks → files → change rows); `tasks` holds what passes between
them. This package imports none of them, so an executor loads only what it runs.

The driver turns work items into tasks (metadata only: which file, insert or delete, which
sequence number, which delete files are in force). Executors read each file with pyiceberg's
`ArrowScan`: columns are matched by field ID, projected onto the current schema (a renamed column
reads right, a dropped one is gone, an added one is null), and identity-partition values come from
metadata. Each row becomes a document (see `documents.py`) keyed by its `_id`.

What a snapshot's files mean:
- a data file it added: INSERTs of its rows live at the snapshot (deletes in force applied);
- a data file it removed: DELETEs of its rows live just before (the parent's deletes applied);
- a position-delete file or deletion vector it added: DELETEs of the rows of the referenced data
  files that were live before and are not after — only newly deleted positions count, and a new
  vector that replaces an older one yields just the difference;
- an equality-delete file it added (on the identifier columns): a DELETE per key, no scan.

Consecutive copy-on-write commits of one pass collapse into one change (`_collapse`): files
added and removed within the run are never read.
"""

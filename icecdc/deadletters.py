"""Dead letters: documents that can never be written, kept with the reason, never dropped silently.

OpenSearch refuses some documents for good (a mapping conflict, a document too large), and some
rows cannot become documents (a null identifier). They go to a dead-letter location — a local
directory, or `s3://bucket/prefix/` in AWS — as JSON lines, one file per executor task that had
any, and the batch completes. `icecdc status` counts them. The count is in each file's name
(`…-n<count>.jsonl`) so counting lists names and reads no file.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_COUNT = re.compile(r"-n(\d+)\.jsonl$")


@dataclass(frozen=True)
class DeadLetter:
    table: str
    snapshot_id: int | None
    sequence_number: int
    doc_id: str | None
    status: int | None  # OpenSearch's HTTP status for the item; None when the row never became a document
    reason: str
    document: str | None  # the document's JSON text (None for a delete)


class DeadLetters:
    """Writes and counts dead letters at a local directory or an `s3://bucket/prefix` location."""

    def __init__(self, location: str) -> None:
        self.location = location.rstrip("/")

    def write(self, letters: Iterable[DeadLetter]) -> int:
        """Store the letters, one file per table; return how many were stored."""
        by_table: dict[str, list[DeadLetter]] = {}
        for letter in letters:
            by_table.setdefault(letter.table, []).append(letter)
        for table, batch in by_table.items():
            name = f"{table}/{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}-n{len(batch)}.jsonl"
            body = "".join(json.dumps(asdict(letter), sort_keys=True) + "\n" for letter in batch)
            self._put(name, body)
        return sum(len(batch) for batch in by_table.values())

    def count(self, table: str) -> int:
        return sum(int(m.group(1)) for name in self._names(table) if (m := _COUNT.search(name)))

    def read(self, table: str) -> list[dict[str, Any]]:
        """Every dead letter of a table (for operators and tests)."""
        return [json.loads(line) for name in sorted(self._names(table)) for line in self._get(name).splitlines()]

    # Storage: a local directory or S3, by the location's scheme.

    def _s3(self) -> tuple[object, str, str]:
        import boto3  # only the S3 location needs it

        bucket, _, prefix = self.location.removeprefix("s3://").partition("/")
        return boto3.client("s3"), bucket, (prefix + "/" if prefix else "")

    def _put(self, name: str, body: str) -> None:
        if self.location.startswith("s3://"):
            s3, bucket, prefix = self._s3()
            s3.put_object(Bucket=bucket, Key=prefix + name, Body=body.encode())  # type: ignore[attr-defined]
        else:
            path = Path(self.location) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)

    def _get(self, name: str) -> str:
        if self.location.startswith("s3://"):
            s3, bucket, prefix = self._s3()
            body: bytes = s3.get_object(Bucket=bucket, Key=prefix + name)["Body"].read()  # type: ignore[attr-defined]
            return body.decode()
        return (Path(self.location) / name).read_text()

    def _names(self, table: str) -> list[str]:
        if self.location.startswith("s3://"):
            s3, bucket, prefix = self._s3()
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}{table}/")  # type: ignore[attr-defined]
            return [obj["Key"][len(prefix) :] for page in pages for obj in page.get("Contents", [])]
        directory = Path(self.location) / table
        return [f"{table}/{p.name}" for p in directory.glob("*.jsonl")] if directory.is_dir() else []

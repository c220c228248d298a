"""Small text objects at a location: a local directory, or `s3://bucket/prefix` in AWS.

Dead letters and the audit's findings live there; the scheme of the location picks the storage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class Location:
    """Put, get, list and delete text objects by name (`a/b.jsonl`) under one location."""

    def __init__(self, location: str) -> None:
        self.location = location.rstrip("/")

    @property
    def is_s3(self) -> bool:
        return self.location.startswith("s3://")

    def put(self, name: str, body: str) -> None:
        if self.is_s3:
            s3, bucket, prefix = self._s3()
            s3.put_object(Bucket=bucket, Key=prefix + name, Body=body.encode())
            return
        path = Path(self.location) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside, then renamed: a reader never sees half an object, as with S3.
        partial = path.with_name(f".{path.name}.partial")
        partial.write_text(body)
        partial.replace(path)

    def get(self, name: str) -> str | None:
        """The object's text; None when there is none of that name."""
        if self.is_s3:
            s3, bucket, prefix = self._s3()
            try:
                body: bytes = s3.get_object(Bucket=bucket, Key=prefix + name)["Body"].read()
            except s3.exceptions.NoSuchKey:
                return None
            return body.decode()
        path = Path(self.location) / name
        return path.read_text() if path.is_file() else None

    def names(self, folder: str) -> list[str]:
        """The names of the objects directly in `folder` (`folder/x`, not `folder/sub/x`)."""
        if self.is_s3:
            s3, bucket, prefix = self._s3()
            pages = s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=f"{prefix}{folder}/", Delimiter="/"
            )
            return [obj["Key"][len(prefix) :] for page in pages for obj in page.get("Contents", [])]
        directory = Path(self.location) / folder
        if not directory.is_dir():
            return []
        return [
            f"{folder}/{p.name}"
            for p in directory.iterdir()
            if p.is_file() and not p.name.startswith(".")
        ]

    def delete(self, name: str) -> None:
        """Delete the object; one that is gone already is fine."""
        if self.is_s3:
            s3, bucket, prefix = self._s3()
            s3.delete_object(Bucket=bucket, Key=prefix + name)
            return
        (Path(self.location) / name).unlink(missing_ok=True)

    def _s3(self) -> tuple[Any, str, str]:
        import boto3  # only an S3 location needs it

        bucket, _, prefix = self.location.removeprefix("s3://").partition("/")
        return boto3.client("s3"), bucket, (prefix + "/" if prefix else "")

"""Small text objects at a location: a local directory, or `s3://bucket/prefix` in AWS.

Dead letters and the audit's findings live there; the scheme of the location picks the storage.
Every name resolves inside the location: a table's name becomes one folder or file name by
`name_part`, and a name that would reach outside is refused.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from icecdc.errors import OperationError

# What a name's part may not hold as it is: a separator, the escape itself, a control character.
_UNSAFE = re.compile(r"[/\\%\x00-\x1f\x7f]|^\.")


def name_part(text: str) -> str:
    """`text` as one folder or file name: `/`, `\\`, `%`, control characters, a leading `.` escaped.

    Percent-encoded, so a table's name holding `/` or `..` stays inside the location; a name
    without them is itself. `text_of` reads it back.
    """
    return _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m[0].encode()), text)


def text_of(part: str) -> str:
    """The text `name_part` made this part of."""
    return unquote(part)


def is_name_part(part: str) -> bool:
    """Whether `part` is one `name_part` can make: one folder or file name, not `.` or `..`."""
    return bool(part) and name_part(text_of(part)) == part


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
        path = self._path(name)
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
        path = self._path(name)
        return path.read_text() if path.is_file() else None

    def names(self, folder: str) -> list[str]:
        """The names of the objects directly in `folder` (`folder/x`, not `folder/sub/x`)."""
        if self.is_s3:
            s3, bucket, prefix = self._s3()
            pages = s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=f"{prefix}{folder}/", Delimiter="/"
            )
            return [obj["Key"][len(prefix) :] for page in pages for obj in page.get("Contents", [])]
        directory = self._path(folder)
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
        self._path(name).unlink(missing_ok=True)

    def _path(self, name: str) -> Path:
        """The local path of a name; OperationError when it resolves outside the location."""
        root = Path(os.path.abspath(self.location))
        path = Path(os.path.abspath(root / name))  # `..` taken away as written, links kept
        if not path.is_relative_to(root) or path == root:
            raise OperationError(
                f"{name!r} resolves outside the location {self.location}: nothing was read "
                "or written there"
            )
        return root / name

    def _s3(self) -> tuple[Any, str, str]:
        import boto3  # only an S3 location needs it

        bucket, _, prefix = self.location.removeprefix("s3://").partition("/")
        return boto3.client("s3"), bucket, (prefix + "/" if prefix else "")

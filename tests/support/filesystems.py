"""A small filesystem of its own for the state: it turns read-only or full, then recovers.

A tmpfs is mounted at the directory, which needs root with the right to mount (CAP_SYS_ADMIN):
root ignores a directory's permission bits, so only a real read-only or full filesystem refuses
it. Without the right to mount, a user other than root gets a directory whose permission bits
refuse writes (read-only only); root gets neither, and `can` says so.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pytest

FILLER = ".filler"  # the file that takes a full filesystem's every free byte


class Refusal(StrEnum):
    READ_ONLY = "read-only"
    FULL = "full"


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True, check=False).returncode == 0


def _remount(path: Path, mode: str) -> None:
    """Remount `path` `ro` or `rw`; a file held open for writing there refuses `ro` (EBUSY)."""
    done = subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"remount,{mode} {path}: {done.stderr.strip()} (a file held open for writing?)"


@dataclass
class StateFilesystem:
    """The filesystem at `path`: `refuse` turns it read-only or full, `recover` undoes it."""

    path: Path
    mounted: bool
    closed: bool = False

    @classmethod
    def open(cls, path: Path, size: str = "16m") -> StateFilesystem:
        """A tmpfs of `size` at the new directory `path`, or a directory of its own (see the module)."""
        path.mkdir(parents=True)
        return cls(path, _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)))

    def can(self, how: Refusal) -> bool:
        return self.mounted or (how == Refusal.READ_ONLY and os.geteuid() != 0)

    def refuse(self, how: Refusal) -> None:
        assert self.can(how), f"{self.path} cannot be made {how} here"
        if how == Refusal.FULL:
            self._fill()
        elif self.mounted:
            _remount(self.path, "ro")
        else:
            for p in [self.path, *self.path.iterdir()]:
                p.chmod(0o555 if p.is_dir() else 0o444)

    def recover(self) -> None:
        if self.mounted:
            _remount(self.path, "rw")
        else:
            for p in [self.path, *self.path.iterdir()]:
                p.chmod(0o755 if p.is_dir() else 0o644)
        (self.path / FILLER).unlink(missing_ok=True)

    def close(self) -> None:
        """Unmount it, or give the directory its permissions back; once, whoever asks first."""
        if self.closed:
            return
        self.closed = True
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, check=False)
        elif self.path.exists():
            self.recover()

    def _fill(self) -> None:
        with (self.path / FILLER).open("ab", buffering=0) as filler, suppress(OSError):
            for chunk in (1 << 20, 4096, 1):  # down to the last byte
                with suppress(OSError):
                    while True:
                        filler.write(b"\0" * chunk)


@contextmanager
def state_filesystem(path: Path, how: Refusal) -> Iterator[StateFilesystem]:
    """`StateFilesystem.open(path)`, skipping the test where it cannot be made `how`."""
    filesystem = StateFilesystem.open(path)
    try:
        if not filesystem.can(how):
            pytest.skip(f"a {how} filesystem needs the right to mount a tmpfs (or, read-only, a user not root)")
        yield filesystem
    finally:
        filesystem.close()

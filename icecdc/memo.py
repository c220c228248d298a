"""Values a run makes once per key, from any thread: a secret read, a destination opened.

A refusal (`ConfigError`) is kept too, and raised again for the key: it costs one read as well.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from icecdc.errors import ConfigError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class Memo(Generic[K, V]):
    """Each key's value, made by the first call that asks for it; safe across threads."""

    _made: dict[K, V | ConfigError] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, key: K, make: Callable[[K], V]) -> V:
        """`key`'s value: `make(key)` on the first call, its value or its refusal after."""
        with self._lock:
            if key not in self._made:
                try:
                    self._made[key] = make(key)
                except ConfigError as exc:
                    self._made[key] = exc
            found = self._made[key]
        if isinstance(found, ConfigError):
            raise ConfigError(str(found))
        return found

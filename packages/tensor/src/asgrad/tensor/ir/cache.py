"""A small least-recently-used cache, for compiled programs and their specialisations.

Every cache of compiled code in asgrad is bounded: a program compiled per output set
([`asgrad.tensor.evaluate`][asgrad.tensor.evaluate]), per fed shapes (the CPU's generated functions,
the GPU's plans). When full, the entry used least recently goes.

>>> cache: LRUCache[str, int] = LRUCache(2)
>>> cache.put("a", 1), cache.put("b", 2), cache.get("a"), cache.put("c", 3)
(1, 2, 1, 3)
>>> sorted(cache.keys())  # "b" was used least recently
['a', 'c']
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, KeysView, ValuesView
from typing import Generic, TypeVar

from asgrad.tensor.errors import ArgumentError

__all__ = ["LRUCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """At most ``maxsize`` entries; the least recently used one goes first. Thread-safe."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ArgumentError(f"an LRUCache holds at least one entry, got maxsize={maxsize}")
        self.maxsize = maxsize
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The entry of ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> V:
        """Store ``value`` under ``key``, evicting the least recently used entry if full."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
            return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def keys(self) -> KeysView[K]:
        return self._entries.keys()

    def values(self) -> ValuesView[V]:
        return self._entries.values()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

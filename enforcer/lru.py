"""Bounded, thread-safe least-recently-used maps: the process-wide caches of compiled objects.

Every cache has an entry cap; the caches of compiled objects (tools, schemas, value automata)
also share one byte budget, :data:`COMPILED`, like xgrammar's compiler cache: when a new object
is stored and the cached objects (their automata and the masks filled so far) take more than
the limit, the least recently used objects across those caches are dropped until they fit.
Default 1 GiB; ``ENFORCER_CACHE_LIMIT_BYTES`` in the environment or :func:`set_cache_limit`.
Matchers keep their compiled object alive: dropping it from a cache never breaks a sequence.

Lifetime: the process (or until :meth:`LRU.clear`). Cost: O(1) per lookup under one lock; a
store in a byte-capped cache sums the sizes of the cached objects (O(entries), at compile time).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")

DEFAULT_CACHE_LIMIT_BYTES = 1 << 30


class BytePool:
    """Caches that share one byte budget; the least recently used entry among them goes first."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.caches: list["LRU"] = []
        self.lock = threading.RLock()
        self.clock = itertools.count()

    def size_bytes(self) -> int:
        """Bytes held by every entry of every cache in the pool (an entry shared by two caches
        counts twice)."""
        with self.lock:
            return sum(cache.size_bytes() for cache in self.caches)

    def trim(self) -> None:
        """Drop least recently used entries until the pool fits its limit (the newest entry of
        each cache stays, so an object larger than the limit is still cached alone)."""
        with self.lock:
            total = self.size_bytes()
            while total > self.limit_bytes:
                oldest = min((c for c in self.caches if len(c) > 1), key=LRU._oldest_tick, default=None)
                if oldest is None:
                    return
                total -= oldest._evict_oldest()


def _limit_from_environment() -> int:
    text = os.environ.get("ENFORCER_CACHE_LIMIT_BYTES", "")
    if not text:
        return DEFAULT_CACHE_LIMIT_BYTES
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"ENFORCER_CACHE_LIMIT_BYTES must be an integer number of bytes, got {text!r}") from None
    if value < 0:
        raise ValueError(f"ENFORCER_CACHE_LIMIT_BYTES must be >= 0, got {value}")
    return value


COMPILED = BytePool(_limit_from_environment())
"""The byte budget of the caches of compiled tools, schemas and value automata."""


def set_cache_limit(limit_bytes: int) -> None:
    """Cap the memory of the cached compiled objects (automata and masks) at ``limit_bytes``;
    applies at once. ``0`` keeps only the most recent object of each cache."""
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes < 0:
        raise ValueError(f"cache limit must be a non-negative integer number of bytes, got {limit_bytes!r}")
    COMPILED.limit_bytes = limit_bytes
    COMPILED.trim()


def cache_size_bytes() -> int:
    """Bytes held now by the cached compiled objects (what :func:`set_cache_limit` caps)."""
    return COMPILED.size_bytes()


class LRU(Generic[V]):
    """At most ``maxsize`` entries; the least recently used one goes first. With a ``pool``,
    ``sizeof(value)`` bytes of each entry count against the pool's budget."""

    def __init__(self, maxsize: int, pool: BytePool | None = None,
                 sizeof: Callable[[V], int] | None = None) -> None:
        if (pool is None) != (sizeof is None):
            raise ValueError("a byte-capped cache needs both a pool and a sizeof function")
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._pool = pool
        self._sizeof = sizeof
        self._lock = pool.lock if pool is not None else threading.RLock()
        if pool is not None:
            with pool.lock:
                pool.caches.append(self)

    def _tick(self) -> int:
        return next(self._pool.clock) if self._pool is not None else 0

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items[key] = (hit[0], self._tick())
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: Hashable, value: V) -> V:
        """Keep ``value`` unless another thread stored one first; returns the kept value."""
        with self._lock:
            kept = self._items.setdefault(key, (value, self._tick()))[0]
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        if self._pool is not None:
            self._pool.trim()
        return kept

    def size_bytes(self) -> int:
        """Bytes of the entries (0 without a ``sizeof``)."""
        if self._sizeof is None:
            return 0
        with self._lock:
            return sum(self._sizeof(value) for value, _ in self._items.values())

    def _oldest_tick(self) -> int:
        return next(iter(self._items.values()))[1]

    def _evict_oldest(self) -> int:
        """Drop the least recently used entry; returns its size."""
        _, (value, _) = self._items.popitem(last=False)
        return self._sizeof(value) if self._sizeof is not None else 0

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def values(self) -> list[V]:
        with self._lock:
            return [value for value, _ in self._items.values()]

    def __len__(self) -> int:
        return len(self._items)

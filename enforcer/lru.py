"""Bounded, thread-safe least-recently-used maps: the process-wide caches of compiled objects.

Every cache has an entry cap; the caches of compiled objects (tools, schemas, value automata)
also share one byte budget, :data:`COMPILED`, like xgrammar's compiler cache: when a new object
is stored and the cached objects (their automata and the masks filled so far) take more than
the limit, the least recently used objects across those caches are dropped until they fit.
Default 1 GiB; ``ENFORCER_CACHE_LIMIT_BYTES`` in the environment or :func:`set_cache_limit`.
Matchers keep their compiled object alive: dropping it from a cache never breaks a sequence.

Lifetime: the process (or until :meth:`LRU.clear`). Cost: O(1) per lookup under one lock. A
store in a byte-capped cache measures the new object and adds it to the pool's running total;
cached objects grow after they are stored (their masks fill lazily), so the pool measures every
entry again every ``max(RECOUNT_MIN_STORES, entries / RECOUNT_SHARE)`` stores, and on every
store once the recorded total passes half the limit: far from the limit a store costs a few size
measures amortised, not one per cached object (with 500 cached schemas that was 0.4 ms on every
compile of a new one; a cold 16-tool set's 17 stores measured 150 objects), and an object's
growth shows within that many stores.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")

DEFAULT_CACHE_LIMIT_BYTES = 1 << 30
RECOUNT_SHARE = 8
RECOUNT_MIN_STORES = 8
"""The pool measures every entry again after ``max(RECOUNT_MIN_STORES, entries / RECOUNT_SHARE)``
stores, and on every store once the recorded total passes half the limit: an object's growth
after it was stored shows within that many stores, and near the limit at once."""


class BytePool:
    """Caches that share one byte budget; the least recently used entry among them goes first.
    Keeps the total of the sizes its entries had when last measured (:attr:`recorded`)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.caches: list["LRU"] = []
        self.lock = threading.RLock()
        self.clock = itertools.count()
        self.recorded = 0
        """Sum of the entries' sizes as last measured (under :attr:`lock`)."""
        self._stores_since_recount = 0

    def size_bytes(self) -> int:
        """Bytes held now by every entry of every cache in the pool (an entry shared by two
        caches counts twice): each entry measured again (O(entries))."""
        with self.lock:
            self._recount()
            return self.recorded

    def stored(self, size: int) -> None:
        """A cache stored an entry of ``size`` bytes: the total grows, and the budget is kept."""
        with self.lock:
            self.recorded += size
            self._stores_since_recount += 1
            self.trim(force=False)

    def trim(self, force: bool = True) -> None:
        """Drop least recently used entries until the pool fits its limit (the newest entry of
        each cache stays, so an object larger than the limit is still cached alone), by their
        sizes as recorded. The entries are measured again first when ``force``d, when the recorded
        total passes half the limit, or after ``max(RECOUNT_MIN_STORES, entries / RECOUNT_SHARE)``
        stores since they last were."""
        with self.lock:
            entries = sum(len(cache) for cache in self.caches)
            if force or 2 * self.recorded > self.limit_bytes \
                    or self._stores_since_recount >= max(RECOUNT_MIN_STORES, entries // RECOUNT_SHARE):
                self._recount()
            while self.recorded > self.limit_bytes:
                oldest = min((c for c in self.caches if len(c) > 1), key=LRU._oldest_tick, default=None)
                if oldest is None:
                    return
                oldest._drop_oldest()

    def _recount(self) -> None:
        self.recorded = sum(cache._remeasure() for cache in self.caches)
        self._stores_since_recount = 0


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
    ``sizeof(value)`` bytes of each entry count against the pool's budget (measured when stored
    and whenever the pool counts again)."""

    def __init__(self, maxsize: int, pool: BytePool | None = None,
                 sizeof: Callable[[V], int] | None = None) -> None:
        if (pool is None) != (sizeof is None):
            raise ValueError("a byte-capped cache needs both a pool and a sizeof function")
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, _Entry[V]] = OrderedDict()
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
            hit.tick = self._tick()
            self._items.move_to_end(key)
            return hit.value

    def put(self, key: Hashable, value: V) -> V:
        """Keep ``value`` unless another thread stored one first; returns the kept value."""
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                hit.tick = self._tick()
                self._items.move_to_end(key)
                return hit.value
            size = self._sizeof(value) if self._sizeof is not None else 0
            self._items[key] = _Entry(value, self._tick(), size)
            while len(self._items) > self.maxsize:
                self._drop_oldest()
            if self._pool is not None:
                self._pool.stored(size)
        return value

    def _remeasure(self) -> int:
        """Measure every entry again; returns their total (under the pool's lock)."""
        if self._sizeof is None:
            return 0
        total = 0
        for entry in self._items.values():
            entry.size = self._sizeof(entry.value)
            total += entry.size
        return total

    def _oldest_tick(self) -> int:
        return next(iter(self._items.values())).tick

    def _drop_oldest(self) -> None:
        """Drop the least recently used entry (and its size from the pool's total)."""
        _, entry = self._items.popitem(last=False)
        if self._pool is not None:
            self._pool.recorded -= entry.size

    def clear(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.recorded -= sum(entry.size for entry in self._items.values())
            self._items.clear()

    def values(self) -> list[V]:
        with self._lock:
            return [entry.value for entry in self._items.values()]

    def __len__(self) -> int:
        return len(self._items)


class _Entry(Generic[V]):
    """A cached value, when it was last used (the pool's clock) and its size as last measured."""

    __slots__ = ("value", "tick", "size")

    def __init__(self, value: V, tick: int, size: int) -> None:
        self.value, self.tick, self.size = value, tick, size

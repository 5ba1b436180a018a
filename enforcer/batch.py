"""Masks for a whole batch in one call: :func:`fill_bitmasks` (into a packed bitmask) and
:func:`batch_mask_words` (the mask arrays themselves).

Rows whose mask is already computed are copied in one vectorised write; rows that need a new
mask (a state seen for the first time) are computed in worker threads (the compiled walk runs
with the GIL released), then written with the others. Cost: one 4-byte-per-32-ids copy per row
plus, for new states, their mask computation spread over the workers.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

from .matcher import Matcher, check_bitmask, write_bitmask_ids, write_bitmask_row

MAX_WORKERS = max(1, min(8, os.cpu_count() or 1))
"""Threads that compute new masks for different rows at once."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _workers() -> ThreadPoolExecutor:
    """The process-wide worker pool (started on the first batch with two new masks)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(MAX_WORKERS, thread_name_prefix="enforcer-masks")
        return _pool


def batch_mask_words(matchers: Sequence[Matcher]) -> list[np.ndarray]:
    """Each matcher's packed mask words (``mask_words()``; read-only arrays, shared with its
    mask cache), the new ones computed in worker threads when there are two or more."""
    words: list[np.ndarray | None] = [m.mask_words(compute=False) for m in matchers]
    missing = [k for k, w in enumerate(words) if w is None]
    if len(missing) == 1:
        words[missing[0]] = matchers[missing[0]].mask_words()
    elif missing:
        for k, w in zip(missing, _workers().map(lambda k: matchers[k].mask_words(), missing)):
            words[k] = w
    return words  # type: ignore[return-value]


def fill_bitmasks(matchers: Sequence[Matcher], bitmask: Any, indices: Sequence[int] | None = None) -> None:
    """Write the allowed tokens of ``matchers[k]`` into row ``indices[k]`` (default ``k``) of a
    packed int32 bitmask (numpy array or CPU/GPU torch tensor of shape ``(batch, words)``).
    Same result and same checks (:func:`~enforcer.matcher.check_bitmask`, ``ValueError`` before
    anything is written) as calling ``fill_bitmask`` per row: rows whose matcher lists its few
    allowed ids are written from them, the others from their mask words."""
    rows = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
    if len(rows) != len(matchers):
        raise ValueError(f"{len(matchers)} matchers but {len(rows)} row indices")
    if not rows:
        return
    few = [m.few_allowed_ids(compute=False) for m in matchers]  # new masks: computed by the workers
    dense = [k for k, ids in enumerate(few) if ids is None]
    words: list[np.ndarray | None] = [None] * len(matchers)
    for k, w in zip(dense, batch_mask_words([matchers[k] for k in dense])):
        words[k] = w
    rows = [check_bitmask(bitmask, row, m.words_per_row if w is None else w.shape[0])
            for row, m, w in zip(rows, matchers, words)]
    # a numpy array, or a CPU tensor through its numpy view; a tensor on another device gets one
    # host-to-device copy per row
    target = bitmask if isinstance(bitmask, np.ndarray) else bitmask.numpy() if bitmask.is_cpu else None
    for row, m, ids, w in zip(rows, matchers, few, words):
        if w is None:
            write_bitmask_ids(bitmask, row, ids, m.words_per_row)
        elif target is None:
            write_bitmask_row(bitmask, row, w)
        else:
            target[row] = w

"""A whole batch's masks in one call: :func:`fill_bitmasks` (into a packed bitmask).

Every row's matcher is asked for its few allowed ids or its mask words (new states computed
then, in the calling thread), every row index checked, then the rows written. Worker threads do
not pay for new masks: one is mostly interpreter work (the compiled walk about a fifth of it),
so threads mostly wait for the GIL and hand it over (the first 40 steps of 64 rows of corpus
schemas: 82-111 ms in one thread against 236-252 ms on two workers). Cost: one
4-byte-per-32-ids copy per row plus, for new states, their mask computation.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .matcher import Matcher, check_bitmask, write_bitmask_ids, write_bitmask_row


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
    few = [m.few_allowed_ids() for m in matchers]
    words = [m.mask_words() if ids is None else None for m, ids in zip(matchers, few)]
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

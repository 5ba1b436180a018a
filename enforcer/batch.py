"""A whole batch's masks in one call: :func:`fill_bitmasks` (into a packed bitmask).

Every row index is checked, then each row written by its matcher's ``fill_bitmask`` (new states
computed then, in the calling thread). Worker threads do not pay for new masks: one is mostly
interpreter work (the compiled walk about a fifth of it), so threads mostly wait for the GIL and
hand it over (the first 40 steps of 64 rows of corpus schemas: 82-111 ms in one thread against
236-252 ms on two workers). Cost: one row write per matcher (its few ids or a copy of its packed
mask) plus, for new states, their mask computation.
"""

from __future__ import annotations

from typing import Any, Sequence

from .matcher import Matcher, check_bitmask


def fill_bitmasks(matchers: Sequence[Matcher], bitmask: Any, indices: Sequence[int] | None = None) -> None:
    """Write the allowed tokens of ``matchers[k]`` into row ``indices[k]`` (default ``k``) of a
    packed int32 bitmask (numpy array or CPU/GPU torch tensor of shape ``(batch, words)``).
    Same result and same checks (:func:`~enforcer.matcher.check_bitmask`, ``ValueError`` before
    anything is written) as calling ``fill_bitmask`` per row, which it does once every row is
    checked."""
    rows = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
    if len(rows) != len(matchers):
        raise ValueError(f"{len(matchers)} matchers but {len(rows)} row indices")
    if not rows:
        return
    rows = [check_bitmask(bitmask, row, m.words_per_row) for row, m in zip(rows, matchers)]
    for row, m in zip(rows, matchers):
        m.fill_bitmask(bitmask, row)

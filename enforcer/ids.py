"""The token-id contract shared by every matcher and both parsers."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

__all__ = ["as_token_id"]


def as_token_id(token_id: Any) -> int | None:
    """The id contract of every matcher: ``token_id`` as an ``int`` when it is integer-like (a
    Python ``int``, a numpy integer, a 0-d integer numpy array or torch tensor), else ``None``
    (floats, strings, ``None``, booleans, arrays of several ids). Matchers refuse what is not
    an id in ``range(vocab_size)`` (``accept_token`` returns False); parsers skip it. O(1)."""
    if type(token_id) is int:
        return token_id
    if isinstance(token_id, (bool, np.bool_)) or getattr(token_id, "ndim", 0) != 0 \
            or str(getattr(token_id, "dtype", "")) in ("bool", "torch.bool"):
        return None
    try:
        return operator.index(token_id)
    except TypeError:
        return None

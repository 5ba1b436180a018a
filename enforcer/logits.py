"""Packed token masks applied to host logits: :func:`masked_scores`.

A mask row holds one bit per token id (32 per ``int32`` word, the layout of ``fill_bitmask``).
Cost: one pass over the scores by the compiled kernel, with the GIL released (about the cost of
writing the rows); without the built extension, numpy unpacks the bits and selects.
"""

from __future__ import annotations

import numpy as np

try:
    from ._kernels import masked_scores as _masked_scores_kernel
except ImportError:  # a source tree without the built extension
    _masked_scores_kernel = None


def masked_scores(source: np.ndarray, target: np.ndarray, bitmask: np.ndarray) -> None:
    """Write into ``target`` the ``source`` scores whose ids row ``r`` of ``bitmask`` allows,
    ``-inf`` elsewhere (ids past the mask's words too). ``source``/``target``: float arrays of
    one shape ``(rows, width)``; ``bitmask``: int32 ``(>= rows, words)``."""
    rows, width = source.shape
    if target.shape != source.shape or bitmask.ndim != 2 or bitmask.shape[0] < rows:
        raise ValueError(f"masked_scores: scores {source.shape} into {target.shape} under a bitmask {bitmask.shape}")
    packed = bitmask[:rows]
    if (_masked_scores_kernel is not None and source.dtype == target.dtype == np.float32
            and packed.dtype == np.int32 and all(a.flags.c_contiguous for a in (source, target, packed))):
        _masked_scores_kernel(source, target, packed)
        return
    bits = np.unpackbits(np.ascontiguousarray(packed, dtype=np.int32).view(np.uint8), axis=1, bitorder="little")
    keep = np.zeros((rows, width), dtype=bool)
    covered = min(width, bits.shape[1])
    keep[:, :covered] = bits[:, :covered]
    np.copyto(target, np.where(keep, source, -np.inf))

"""Packed token masks applied to logits: :func:`masked_scores` (host rows into new rows),
:func:`mask_rows_in_place` (some host rows of a batch, in place, from a packed bitmask),
:func:`mask_rows_from_words` (the same from one mask array per row, where it lies),
:func:`allows_any` (whether a mask allows an id below a width) and
:func:`allowed_on_device` (the bits of packed rows as a bool tensor on an accelerator).

A mask row holds one bit per token id (32 per ``int32`` word, the layout of ``fill_bitmask``).
Cost: one pass over the scores by the compiled kernel, with the GIL released (about the cost of
writing the rows); without the built extension, numpy unpacks the bits and selects.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

try:
    from ._kernels import allows_any as _allows_any_kernel
    from ._kernels import mask_rows_from_words as _mask_words_kernel
    from ._kernels import mask_rows_in_place as _mask_rows_kernel
    from ._kernels import masked_scores as _masked_scores_kernel
except ImportError:  # a source tree without the built extension
    _masked_scores_kernel = _mask_rows_kernel = _mask_words_kernel = _allows_any_kernel = None

STREAM_MIN_BYTES = 16 << 20
"""Scores written in one call from which the kernels write long runs with non-temporal stores:
past the caches those skip reading each line before overwriting it (64 rows of 151,899 float32
scores, 39 MB: 2.0 instead of 5.2 ms), within them they are slower (one such row: 121 instead
of 12 us). Measured on the CI machine (2 cores, 4 MB of L2 each): the two cross between 10 MB
(16 rows) and 19 MB (32 rows)."""


def _streams(rows: int, width: int, itemsize: int) -> bool:
    """Whether a call writing ``rows`` rows of ``width`` scores of ``itemsize`` bytes streams."""
    return rows * width * itemsize >= STREAM_MIN_BYTES


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
        _masked_scores_kernel(source, target, packed, _streams(rows, width, 4))
        return
    np.copyto(target, np.where(_allowed(packed, width), source, -np.inf))


def _allowed(packed: np.ndarray, width: int) -> np.ndarray:
    """Bool ``(rows, width)``: bit ``i % 32`` of word ``i // 32`` of each packed row (False past
    the words). The numpy fallback's unpacking."""
    bits = np.unpackbits(np.ascontiguousarray(packed, dtype=np.int32).view(np.uint8), axis=1, bitorder="little")
    keep = np.zeros((packed.shape[0], width), dtype=bool)
    covered = min(width, bits.shape[1])
    keep[:, :covered] = bits[:, :covered]
    return keep


_BITS_OF_SIZE = {2: np.int16, 4: np.int32, 8: np.int64}
"""The integer type a float score of each width is written through (its bits)."""


def mask_rows_in_place(logits: Any, rows: Sequence[int], bitmask: np.ndarray) -> None:
    """Set ``logits[rows[k], i]`` to ``-inf`` where row ``k`` of ``bitmask`` clears bit ``i``
    (ids past the mask's words too), leaving the allowed scores untouched. ``logits``: a
    C-contiguous host array of floats (numpy float16/32/64, or a CPU torch tensor of those or
    bfloat16), written through an integer view of its bits; ``bitmask``: int32
    ``(>= len(rows), words)``, row ``k`` for ``rows[k]``. Cost: the compiled kernel scans each
    row's words (a word of ones is one comparison) and writes each banned score, GIL released: a
    free-text row banning a few ids costs a few microseconds, a structural row one write of the
    row; without the built extension numpy unpacks the rows. ``ValueError`` for other arrays."""
    bits, minus_inf = _score_bits(logits)
    rows = np.asarray(rows, dtype=np.int64)
    if bitmask.ndim != 2 or bitmask.shape[0] < rows.shape[0] or bitmask.dtype != np.int32:
        raise ValueError(f"mask_rows_in_place: a bitmask {bitmask.shape} ({bitmask.dtype}) for {rows.shape[0]} rows")
    if _mask_rows_kernel is not None:
        try:  # the kernel checks every row before it writes
            _mask_rows_kernel(bits, rows, np.ascontiguousarray(bitmask), minus_inf,
                              _streams(rows.shape[0], bits.shape[1], bits.itemsize))
        except ValueError:
            _check_rows(bits, rows, "mask_rows_in_place")
            raise
        return
    _check_rows(bits, rows, "mask_rows_in_place")
    _mask_rows_numpy(bits, rows, bitmask, minus_inf)


def _mask_rows_numpy(bits: np.ndarray, rows: np.ndarray, bitmask: np.ndarray, minus_inf: int) -> None:
    """The fallback without the built extension (rows and bitmask checked by the caller): numpy
    unpacks each row's bits and writes ``minus_inf`` where they are clear."""
    keep = _allowed(bitmask[:rows.shape[0]], bits.shape[1])
    for k, row in enumerate(rows):
        bits[row][~keep[k]] = minus_inf


def mask_rows_from_words(logits: Any, rows: Sequence[int], masks: Sequence[np.ndarray]) -> None:
    """:func:`mask_rows_in_place` with row ``rows[k]`` masked by ``masks[k]``: a 1-D C-contiguous
    int32 array of packed words (all of one length), as a matcher's ``mask_words`` returns it.
    The kernel reads each mask where it lies, so a batch needs no packed copy, and rows that
    share a mask (free text) read one array. ``ValueError`` for other arrays."""
    bits, minus_inf = _score_bits(logits)
    rows = np.asarray(rows, dtype=np.int64)
    masks = list(masks)
    if len(masks) != rows.shape[0]:
        raise ValueError(f"mask_rows_from_words: {len(masks)} masks for {rows.shape[0]} rows")
    if _mask_words_kernel is not None:
        try:  # the kernel checks every row and takes every mask's buffer (checking it) before it writes
            _mask_words_kernel(bits, rows, masks, minus_inf, _streams(rows.shape[0], bits.shape[1], bits.itemsize))
        except (TypeError, ValueError, BufferError):
            _check_rows(bits, rows, "mask_rows_from_words")
            _check_mask_words(masks)
            raise
        return
    _check_rows(bits, rows, "mask_rows_from_words")
    _check_mask_words(masks)
    if masks:
        _mask_rows_numpy(bits, rows, np.stack(masks), minus_inf)


def _check_mask_words(masks: list[Any]) -> None:
    """``ValueError`` naming the first of ``masks`` that is not a 1-D C-contiguous int32 array."""
    for mask in masks:
        if type(mask) is not np.ndarray or mask.dtype != np.int32 or mask.ndim != 1 or not mask.flags.c_contiguous:
            raise ValueError(f"mask_rows_from_words: a mask must be a 1-D C-contiguous int32 array, got "
                             f"{type(mask).__name__} {getattr(mask, 'dtype', None)} {getattr(mask, 'shape', None)}")


def _check_rows(bits: np.ndarray, rows: np.ndarray, caller: str) -> None:
    """``ValueError`` naming ``caller`` unless each of ``rows`` (int64) is a row of ``bits``: run
    without the kernel, and to name the rows after the kernel refused them."""
    if rows.size and not (0 <= rows.min() and rows.max() < bits.shape[0]):
        raise ValueError(f"{caller}: rows {rows.tolist()} are not all rows of logits with {bits.shape[0]}")


def allows_any(words: np.ndarray, width: int) -> bool:
    """Whether packed ``words`` (1-D int32) allow an id below ``width``. The compiled scan goes
    by blocks of 64 words and stops at the first nonzero one: a mask that allows anything early
    costs a call (about 0.3 us), an empty one a pass over its words (0.8 us for 151,899 ids);
    without the extension (or for another array) numpy reads the words."""
    if _allows_any_kernel is not None:
        try:
            return _allows_any_kernel(words, width)
        except (TypeError, ValueError, BufferError):
            pass
    full, rest = divmod(max(width, 0), 32)
    return bool(words[:full].any()) or bool(rest and words.shape[0] > full and int(words[full]) & ((1 << rest) - 1))


_FORMATS: dict[Any, tuple[Any, int]] = {}
"""Per float dtype (numpy or torch): the integer dtype of its bits and the bits of ``-inf``."""


def _score_bits(logits: Any) -> tuple[np.ndarray, int]:
    """A 2-D C-contiguous float array or CPU tensor as an integer array over its bits, and the
    bits of ``-inf`` in its format (what :func:`mask_rows_in_place` writes)."""
    numpy = isinstance(logits, np.ndarray)
    fmt = _FORMATS.get(logits.dtype)
    if fmt is None:
        fmt = _format(logits.dtype)
    contiguous = logits.flags.c_contiguous if numpy else logits.is_contiguous() and logits.device.type == "cpu"
    if fmt is None or logits.ndim != 2 or not contiguous:
        raise ValueError(f"mask_rows_in_place: logits must be a 2-D C-contiguous host float array, got "
                         f"{type(logits).__name__} {logits.dtype} of shape {tuple(logits.shape)}")
    as_int, minus_inf = fmt
    return (logits.view(as_int) if numpy else logits.detach().view(as_int).numpy()), minus_inf


def _format(dtype: Any) -> tuple[Any, int] | None:
    """The entry of :data:`_FORMATS` for ``dtype`` (None: not a float dtype of 2, 4 or 8 bytes)."""
    if isinstance(dtype, np.dtype):
        if dtype.kind != "f" or dtype.itemsize not in _BITS_OF_SIZE:
            return None
        as_int = _BITS_OF_SIZE[dtype.itemsize]
        fmt = (as_int, int(np.array(-np.inf, dtype=dtype).view(as_int)))
    else:  # a torch dtype (this module does not import torch)
        torch = sys.modules["torch"]
        if not dtype.is_floating_point or dtype.itemsize not in _BITS_OF_SIZE:
            return None
        as_int = {2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize]
        fmt = (as_int, int(torch.tensor(float("-inf"), dtype=dtype).view(as_int)))
    _FORMATS[dtype] = fmt
    return fmt


_BIT_VALUES = np.left_shift(np.uint32(1), np.arange(32, dtype=np.uint32)).view(np.int32)
"""Bit ``k`` of an int32 word, for ``k`` in 0..31 (bit 31 is the sign bit)."""
_DEVICE_BIT_VALUES: dict[Any, Any] = {}
""":data:`_BIT_VALUES` as a tensor, per device (made once)."""


def allowed_on_device(packed: Any, width: int) -> Any:
    """Bool tensor ``(rows, width)`` on ``packed``'s device: bit ``i % 32`` of word ``i // 32``
    of each row of the int32 tensor ``packed`` (False past its words). Two kernels (each word's
    32 bits tested at once, then compared), a third where ``width`` passes the words."""
    torch = sys.modules["torch"]
    bit_values = _DEVICE_BIT_VALUES.get(packed.device)
    if bit_values is None:
        bit_values = _DEVICE_BIT_VALUES.setdefault(packed.device, torch.from_numpy(_BIT_VALUES).to(packed.device))
    keep = (packed.unsqueeze(-1) & bit_values).view(packed.shape[0], -1) != 0
    if keep.shape[1] < width:  # logits wider than the tokenizer's ids (padded embeddings)
        return torch.nn.functional.pad(keep, (0, width - keep.shape[1]), value=False)
    return keep[:, :width]

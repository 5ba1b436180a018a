"""``masked_scores``: the compiled pass against its numpy fallback (the oracle), on bitmasks
with every kind of word (zeros, ones, mixed), a partial last word and scores wider than the
mask."""

import numpy as np
import pytest

from enforcer import logits


def _bitmask(rng: np.random.Generator, rows: int, vocab: int) -> np.ndarray:
    words = (vocab + 31) // 32
    kinds = rng.integers(0, 3, size=(rows, words))
    mixed = rng.integers(-2**31, 2**31, size=(rows, words), dtype=np.int64).astype(np.int32)
    packed = np.where(kinds == 0, 0, np.where(kinds == 1, -1, mixed)).astype(np.int32)
    if vocab % 32:  # no bit past the vocabulary, as fill_bitmask writes them
        packed[:, -1] &= np.int32((1 << (vocab % 32)) - 1)
    return packed


@pytest.mark.parametrize("vocab, width", [(100, 100), (100, 130), (151_899, 151_936), (64, 64)])
def test_compiled_pass_matches_numpy(vocab: int, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    if logits._masked_scores_kernel is None:
        pytest.skip("the compiled extension is not built")
    rng = np.random.default_rng(vocab + width)
    source = rng.standard_normal((5, width), dtype=np.float32)
    bitmask = _bitmask(rng, 7, vocab)  # more mask rows than score rows: the first ones apply
    compiled, reference = np.empty_like(source), np.empty_like(source)
    logits.masked_scores(source, compiled, bitmask)
    monkeypatch.setattr(logits, "_masked_scores_kernel", None)
    logits.masked_scores(source, reference, bitmask)
    assert np.array_equal(compiled, reference)
    bits = np.unpackbits(bitmask[:5].view(np.uint8), axis=1, bitorder="little")[:, :width].astype(bool)
    assert np.array_equal(np.isfinite(compiled[:, :bits.shape[1]]), bits)
    assert np.array_equal(compiled[:, :bits.shape[1]][bits], source[:, :bits.shape[1]][bits])
    assert not np.isfinite(compiled[:, bits.shape[1]:]).any()


RUNS_VOCAB = 2_990
"""Ids of the masks with long runs: 94 words, the last one partial."""


@pytest.fixture(params=[False, True], ids=["plain", "streaming"])
def stores(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Plain stores, or non-temporal ones for every call (a threshold of 0 bytes)."""
    if request.param:
        monkeypatch.setattr(logits, "STREAM_MIN_BYTES", 0)
    return request.param


@pytest.mark.parametrize("width", [3_001, 3_004, 3_040, 4_000])
def test_long_runs_of_allowed_and_banned_words_match_numpy(width: int, stores: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of words of ones and of zeros long enough for the streaming copy and fill (from 8
    words), starting at every alignment a row can have, between mixed words, into the partial
    last word and past the mask's words: the compiled pass writes what the numpy fallback
    writes, with plain stores and with non-temporal ones."""
    if logits._masked_scores_kernel is None:
        pytest.skip("the compiled extension is not built")
    rng = np.random.default_rng(width)
    vocab, words = RUNS_VOCAB, (RUNS_VOCAB + 31) // 32
    bitmask = np.zeros((6, words), dtype=np.int32)
    for k in range(6):
        at = 0
        while at < words:  # alternate runs of ones, zeros and mixed words, 1 to 30 words each
            run = int(rng.integers(1, 31))
            kind = int(rng.integers(0, 3))
            bitmask[k, at:at + run] = -1 if kind == 0 else 0 if kind == 1 else \
                rng.integers(-2**31, 2**31, size=len(bitmask[k, at:at + run]), dtype=np.int64).astype(np.int32)
            at += run
    bitmask[:, -1] &= np.int32((1 << (vocab % 32)) - 1)
    source = rng.standard_normal((6, width), dtype=np.float32)
    compiled, expected = np.empty_like(source), np.empty_like(source)
    logits.masked_scores(source, compiled, bitmask)
    monkeypatch.setattr(logits, "_masked_scores_kernel", None)
    logits.masked_scores(source, expected, bitmask)
    assert np.array_equal(compiled, expected)


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="masked_scores"):
        logits.masked_scores(np.zeros((2, 64), np.float32), np.zeros((2, 32), np.float32), np.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match="masked_scores"):
        logits.masked_scores(np.zeros((3, 64), np.float32), np.zeros((3, 64), np.float32), np.zeros((2, 2), np.int32))


FLOAT_DTYPES = ["float16", "float32", "float64", "bfloat16"]


def _scores(rng: np.random.Generator, rows: int, width: int, dtype: str):
    """Scores of ``dtype``: numpy arrays, or a torch tensor for bfloat16 (numpy has none)."""
    values = rng.standard_normal((rows, width), dtype=np.float32)
    if dtype != "bfloat16":
        return values.astype(dtype)
    torch = pytest.importorskip("torch")
    return torch.from_numpy(values).to(torch.bfloat16)


def _as_numpy(scores) -> np.ndarray:
    return scores if isinstance(scores, np.ndarray) else scores.float().numpy()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("vocab, width", [(100, 100), (100, 96), (151_899, 151_899), (64, 64)])
@pytest.mark.parametrize("compiled", [True, False])
def test_rows_masked_in_place_keep_the_rest(vocab: int, width: int, dtype: str, compiled: bool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows named (out of order, not all) get ``-inf`` exactly where their mask row clears a
    bit (the columns past the mask's words too); their allowed scores and the other rows keep
    their values, bit for bit. The compiled kernel and the numpy fallback alike, every float
    dtype through its bits."""
    if compiled and logits._mask_rows_kernel is None:
        pytest.skip("the compiled extension is not built")
    if not compiled:
        monkeypatch.setattr(logits, "_mask_rows_kernel", None)
    rng = np.random.default_rng(vocab + width)
    scores = _scores(rng, 6, width, dtype)
    before = _as_numpy(scores).copy()
    rows = [4, 1, 2]
    bitmask = _bitmask(rng, 4, vocab)  # one mask row more than rows named: unused
    logits.mask_rows_in_place(scores, rows, bitmask)
    after = _as_numpy(scores)
    bits = np.unpackbits(bitmask.view(np.uint8), axis=1, bitorder="little")[:, :width].astype(bool)
    for k, row in enumerate(rows):
        allowed = np.zeros(width, dtype=bool)
        allowed[:bits.shape[1]] = bits[k]
        assert np.array_equal(np.isneginf(after[row]), ~allowed)
        assert np.array_equal(after[row][allowed], before[row][allowed])
    for row in (0, 3, 5):
        assert np.array_equal(after[row], before[row])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("width", [3_001, 3_040, 4_000])
def test_long_banned_runs_are_written_like_the_numpy_fallback(dtype: str, width: int, stores: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of zero words long enough for the kernel's streaming stores (from 8 words), starting
    at every alignment a row can have (widths that leave rows off any 16-byte boundary), next to
    single allowed ids, running into the partial last word and past the mask's words: the
    compiled kernel writes what the numpy fallback writes, bit for bit, and no allowed score
    changes; with plain stores and with non-temporal ones."""
    if logits._mask_rows_kernel is None:
        pytest.skip("the compiled extension is not built")
    rng = np.random.default_rng(width)
    vocab, words = RUNS_VOCAB, (RUNS_VOCAB + 31) // 32
    bitmask = np.zeros((7, words), dtype=np.int32)
    for k in range(7):  # a few allowed ids, a few words of ones, the rest banned in long runs
        for tid in rng.choice(vocab, size=k * 3, replace=False):
            bitmask[k, tid // 32] |= np.int32(np.uint32(1 << int(tid % 32)).view(np.int32))
        start = int(rng.integers(0, words - 4))
        bitmask[k, start:start + k % 4] = -1
    bitmask[:, -1] &= np.int32((1 << (vocab % 32)) - 1)
    scores = _scores(rng, 9, width, dtype)
    expected = scores.clone() if hasattr(scores, "clone") else scores.copy()
    rows = [8, 0, 3, 1, 5, 2, 7]
    logits.mask_rows_in_place(scores, rows, bitmask)
    monkeypatch.setattr(logits, "_mask_rows_kernel", None)
    logits.mask_rows_in_place(expected, rows, bitmask)
    assert np.array_equal(_as_numpy(scores), _as_numpy(expected), equal_nan=True)
    bits = np.unpackbits(bitmask.view(np.uint8), axis=1, bitorder="little")[:, :vocab].astype(bool)
    assert np.isneginf(_as_numpy(scores)[8]).sum() == width - bits[0].sum()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("compiled", [True, False])
def test_rows_masked_from_their_own_mask_arrays_equal_the_packed_bitmask(dtype: str, compiled: bool,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """One mask array per row (two rows sharing one, read-only as the mask caches hand them out)
    writes exactly what the same masks packed into a bitmask write, bit for bit; the compiled
    kernel and the numpy fallback alike."""
    if compiled and logits._mask_words_kernel is None:
        pytest.skip("the compiled extension is not built")
    if not compiled:
        monkeypatch.setattr(logits, "_mask_words_kernel", None)
    rng = np.random.default_rng(7)
    width = 1_000
    bitmask = _bitmask(rng, 3, width - 40)  # past the words: banned too
    masks = [bitmask[0].copy(), bitmask[1].copy(), bitmask[2].copy()]
    for m in masks:
        m.setflags(write=False)
    rows, by_row = [4, 1, 2, 0], [masks[0], masks[1], masks[0], masks[2]]
    scores = _scores(rng, 5, width, dtype)
    expected = scores.clone() if hasattr(scores, "clone") else scores.copy()
    logits.mask_rows_in_place(expected, rows, np.stack(by_row))
    logits.mask_rows_from_words(scores, rows, by_row)
    assert np.array_equal(_as_numpy(scores), _as_numpy(expected), equal_nan=True)
    assert np.isneginf(_as_numpy(scores)[4]).sum() > 40 and not np.isneginf(_as_numpy(scores)[3]).any()


def test_rows_masked_from_mask_arrays_refuse_what_they_cannot_read() -> None:
    scores = np.zeros((2, 64), np.float32)
    with pytest.raises(ValueError, match="1-D C-contiguous int32"):
        logits.mask_rows_from_words(scores, [0], [np.zeros(2, np.int64)])
    with pytest.raises(ValueError, match="1-D C-contiguous int32"):
        logits.mask_rows_from_words(scores, [0], [np.zeros((2, 4), np.int32)[:, 0]])
    with pytest.raises(ValueError, match="1 masks for 2 rows"):
        logits.mask_rows_from_words(scores, [0, 1], [np.zeros(2, np.int32)])
    with pytest.raises(ValueError, match="not all rows"):
        logits.mask_rows_from_words(scores, [2], [np.zeros(2, np.int32)])
    if logits._mask_words_kernel is not None:
        with pytest.raises(ValueError, match="words"):
            logits.mask_rows_from_words(scores, [0, 1], [np.zeros(2, np.int32), np.zeros(3, np.int32)])


def test_allows_any_counts_the_ids_below_the_width_only() -> None:
    """An id past ``width`` does not count; an array that changes is read again each time."""
    mask = np.zeros(4, np.int32)
    mask[3] = 1 << 5  # id 101 only
    mask.setflags(write=False)
    assert logits.allows_any(mask, 128) and logits.allows_any(mask, 102)
    assert not logits.allows_any(mask, 101) and not logits.allows_any(mask, 96) and not logits.allows_any(mask, 0)
    assert logits.allows_any(mask, 102)
    live = np.zeros(4, np.int32)
    assert not logits.allows_any(live, 128)
    live[0] = 1
    assert logits.allows_any(live, 128)
    assert not logits.allows_any(np.zeros(2, np.int32), 1_000)  # a width past the words


@pytest.mark.parametrize("compiled", [True, False])
def test_allows_any_matches_the_first_set_id(compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled scan and the numpy reading against the first id each mask sets, over sparse
    random masks (the sign bit and the word at the width's edge included) and every width
    around them."""
    if compiled and logits._allows_any_kernel is None:
        pytest.skip("the compiled extension is not built")
    if not compiled:
        monkeypatch.setattr(logits, "_allows_any_kernel", None)
    rng = np.random.default_rng(3)
    for trial in range(200):
        words = np.zeros(int(rng.integers(1, 12)), np.int32)
        for t in rng.integers(0, words.shape[0] * 32, size=int(rng.integers(0, 3))):
            words.view(np.uint32)[t >> 5] |= np.uint32(1 << int(t & 31))
        set_ids = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
        for width in range(0, words.shape[0] * 32 + 40):
            expected = bool(set_ids.size and set_ids[0] < width)
            assert logits.allows_any(words, width) is expected, (words.tolist(), width)


def test_rows_masked_in_place_refuse_what_they_cannot_write() -> None:
    with pytest.raises(ValueError, match="C-contiguous host float array"):
        logits.mask_rows_in_place(np.zeros((2, 64), np.int32), [0], np.zeros((1, 2), np.int32))
    with pytest.raises(ValueError, match="C-contiguous host float array"):
        logits.mask_rows_in_place(np.zeros((64, 2), np.float32).T, [0], np.zeros((1, 2), np.int32))
    with pytest.raises(ValueError, match="bitmask"):
        logits.mask_rows_in_place(np.zeros((2, 64), np.float32), [0, 1], np.zeros((1, 2), np.int32))
    with pytest.raises(ValueError, match="not all rows"):
        logits.mask_rows_in_place(np.zeros((2, 64), np.float32), [2], np.zeros((1, 2), np.int32))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("width", [3_001, 3_004, 3_040])
def test_streamed_rows_keep_their_allowed_scores_up_to_the_limit_and_past_it(dtype: str, width: int,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Streaming rows that allow few columns are written whole, the allowed scores built into
    their chunks: rows allowing none, one, neighbours inside one 16-byte chunk, the first and
    last columns (the unaligned head and tail), and exactly the kernel's limit, one more and
    one less (past it, run by run), at every row alignment the widths give: bit for bit what
    the numpy fallback writes."""
    if logits._mask_rows_kernel is None:
        pytest.skip("the compiled extension is not built")
    from enforcer._kernels import STREAM_KEEP_LIMIT as limit

    monkeypatch.setattr(logits, "STREAM_MIN_BYTES", 0)
    rng = np.random.default_rng(width + limit)
    vocab, words = RUNS_VOCAB, (RUNS_VOCAB + 31) // 32
    allowed = [[], [1_500], [64, 65, 66, 67, 68], [0, 1, vocab - 1], [0, width - 1]]
    allowed += [sorted(rng.choice(vocab, size=n, replace=False).tolist()) for n in (limit - 1, limit, limit + 1)]
    bitmask = np.zeros((len(allowed), words), dtype=np.int32)
    for k, ids in enumerate(allowed):
        for tid in ids:
            if tid < vocab:
                bitmask[k, tid // 32] |= np.int32(np.uint32(1 << (tid % 32)).view(np.int32))
    scores = _scores(rng, len(allowed) + 1, width, dtype)
    expected = scores.clone() if hasattr(scores, "clone") else scores.copy()
    rows = list(range(len(allowed), 0, -1))
    logits.mask_rows_in_place(scores, rows, bitmask)
    monkeypatch.setattr(logits, "_mask_rows_kernel", None)
    logits.mask_rows_in_place(expected, rows, bitmask)
    got = _as_numpy(scores)
    assert np.array_equal(got, _as_numpy(expected), equal_nan=True)
    for k, ids in enumerate(allowed):
        kept = [t for t in ids if t < vocab]
        assert np.isneginf(got[rows[k]]).sum() == width - len(kept)

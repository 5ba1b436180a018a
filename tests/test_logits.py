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


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="masked_scores"):
        logits.masked_scores(np.zeros((2, 64), np.float32), np.zeros((2, 32), np.float32), np.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match="masked_scores"):
        logits.masked_scores(np.zeros((3, 64), np.float32), np.zeros((3, 64), np.float32), np.zeros((2, 2), np.int32))

"""fill_bitmasks: one call for a batch gives the rows that fill_bitmask gives row by row."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from enforcer import clear_cache, compile_json_schema, compile_tools
from enforcer.batch import fill_bitmasks

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                     "days": {"type": "integer", "minimum": 1}},
    "required": ["city"]}}}]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                           "tags": {"type": "array", "items": {"enum": ["a", "b", "cc"]}}},
          "required": ["name"]}


def _matchers(vocab, rng: random.Random, n: int) -> list:
    """Matchers of both kinds at random reachable states, some finished with stop tokens."""
    schema = compile_json_schema(SCHEMA, vocab)
    tools = compile_tools(TOOLS, vocab)
    out = []
    for k in range(n):
        matcher = schema.matcher(stop_token_ids=[vocab.vocab_size - 1]) if k % 2 else tools.matcher()
        for _ in range(rng.randrange(0, 30)):
            allowed = matcher.allowed_token_ids()
            if not allowed or matcher.is_finished:
                break
            assert matcher.accept_token(rng.choice(allowed))
        out.append(matcher)
    return out


def _rows_one_by_one(matchers, rows, shape):
    expected = np.full(shape, -1, dtype=np.int32)
    for matcher, row in zip(matchers, rows):
        matcher.fill_bitmask(expected, row)
    return expected


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_batch_matches_row_by_row(kimi_vocab, kind) -> None:
    clear_cache()  # new states: computed inside the batch call
    rng = random.Random(11)
    matchers = _matchers(kimi_vocab, rng, 24)
    words = (kimi_vocab.vocab_size + 31) // 32
    rows = rng.sample(range(32), len(matchers))
    bitmask = np.full((32, words), -1, dtype=np.int32)
    if kind == "torch":
        bitmask = torch.from_numpy(bitmask)
    fill_bitmasks(matchers, bitmask, rows)
    expected = _rows_one_by_one(matchers, rows, (32, words))
    got = bitmask.numpy() if kind == "torch" else bitmask
    assert np.array_equal(got[rows], expected[rows])
    untouched = sorted(set(range(32)) - set(rows))
    assert (got[untouched] == -1).all()


def test_batch_rejects_mismatched_indices(kimi_vocab) -> None:
    matchers = _matchers(kimi_vocab, random.Random(1), 2)
    with pytest.raises(ValueError, match="2 matchers but 1 row indices"):
        fill_bitmasks(matchers, np.zeros((2, 10), dtype=np.int32), [0])

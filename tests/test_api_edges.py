"""API edges shared by every matcher (JSON, Kimi K2 and Kimi K3 places): one id contract, one
bitmask contract, and ``allowed_token_ids()`` / ``fill_bitmask`` / ``accept_token`` agreeing at
every step, finished or not."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import torch

from enforcer import Vocabulary, compile_json_schema, compile_tools, encode_chat
from enforcer.ids import as_token_id
from enforcer.testing import tokenizers as tt

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]},
                                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["unit", "days"]}}}]


@pytest.fixture(scope="module")
def k3_vocab() -> Vocabulary:
    return Vocabulary.from_tokenizer(tt.kimi_k3_tokenizer("fast"))


def _json(vocab: Vocabulary) -> Any:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 22, 333]}},
              "required": ["ok", "n"]}
    return compile_json_schema(schema, vocab).matcher(stop_token_ids=[vocab.token_id("<|im_end|>")])


def _k2(vocab: Vocabulary) -> Any:
    return compile_tools(TOOLS, vocab, tool_choice="required", allow_thinking=False,
                         parallel_tool_calls=False).matcher()


def _k3(vocab: Vocabulary) -> Any:
    prompt = encode_chat([{"role": "user", "content": "weather?"}], vocab, tools=TOOLS, thinking=False)
    return compile_tools(TOOLS, vocab, format="kimi_k3", tool_choice="required", allow_thinking=False,
                         parallel_tool_calls=False).matcher(prompt_ids=prompt)


MATCHERS: dict[str, Callable[[Vocabulary], Any]] = {"json": _json, "kimi_k2": _k2, "kimi_k3": _k3}


@pytest.fixture(params=sorted(MATCHERS))
def make(request: pytest.FixtureRequest, kimi_vocab: Vocabulary, k3_vocab: Vocabulary) -> Callable[[], Any]:
    vocab = k3_vocab if request.param == "kimi_k3" else kimi_vocab
    return lambda: MATCHERS[request.param](vocab)


def _sample(matcher: Any, vocab: Vocabulary, seed: int = 0, limit: int = 200) -> list[int]:
    """A random turn that ends: random allowed ids, but a control id whenever one is allowed
    among free text (so that free text and K3 string values end)."""
    rng = np.random.default_rng(seed)
    ids: list[int] = []
    while not matcher.is_finished and len(ids) < limit:
        allowed = matcher.allowed_token_ids()
        assert allowed, matcher.error
        special = [i for i in allowed if i in vocab.special_ids]
        pool = special if special and len(allowed) > 1000 else allowed
        token = int(rng.choice(pool))
        assert matcher.accept_token(token)
        ids.append(token)
    assert matcher.is_finished, "the sampled turn did not end"
    return ids


def _state(matcher: Any) -> tuple:
    bitmask = np.zeros((1, (matcher_vocab(matcher).vocab_size + 31) // 32), np.int32)
    matcher.fill_bitmask(bitmask)
    calls = getattr(matcher, "calls", None)
    return bitmask.tobytes(), matcher.is_finished, matcher.is_accepting(), calls


def matcher_vocab(matcher: Any) -> Vocabulary:
    return matcher._compiled.vocabulary if hasattr(matcher, "_compiled") else matcher._tools.vocabulary


INTEGER_LIKE: dict[str, Callable[[int], Any]] = {
    "int": int, "numpy int64": np.int64, "numpy int32": np.int32, "numpy uint32": np.uint32,
    "0-d numpy array": np.array, "0-d torch tensor": torch.tensor,
    "0-d torch int32 tensor": lambda i: torch.tensor(i, dtype=torch.int32),
}
NOT_IDS: dict[str, Callable[[int], Any]] = {
    "float": float, "numpy float": np.float64, "str": str, "None": lambda i: None, "bool": lambda i: True,
    "numpy bool": lambda i: np.bool_(True), "torch bool": lambda i: torch.tensor(True),
    "float tensor": lambda i: torch.tensor(float(i)), "1-d tensor": lambda i: torch.tensor([i]),
    "1-d array": lambda i: np.array([i]), "list": lambda i: [i],
}


def test_as_token_id() -> None:
    for name, form in INTEGER_LIKE.items():
        assert as_token_id(form(7)) == 7 and type(as_token_id(form(7))) is int, name
    for name, form in NOT_IDS.items():
        assert as_token_id(form(7)) is None, name


def test_every_integer_like_id_is_the_same_id(make: Callable[[], Any]) -> None:
    reference = make()
    vocab = matcher_vocab(reference)
    ids = _sample(reference, vocab)
    expected = _state(reference)
    for name, form in INTEGER_LIKE.items():
        matcher = make()
        for token in ids:
            assert matcher.accept_token(form(token)), (name, token)
        assert _state(matcher) == expected, name


def test_anything_else_is_refused_and_changes_nothing(make: Callable[[], Any]) -> None:
    reference = make()
    vocab = matcher_vocab(reference)
    ids = _sample(reference, vocab)
    matcher = make()
    for token in ids:
        before = _state(matcher)
        for name, form in NOT_IDS.items():
            assert matcher.accept_token(form(token)) is False, (name, token)
        for outside in (-1, -vocab.vocab_size, vocab.vocab_size, 10**12):
            assert matcher.accept_token(outside) is False, outside
        assert _state(matcher) == before
        assert matcher.accept_token(token)


def test_allowed_ids_bitmask_and_accept_agree_at_every_step(make: Callable[[], Any]) -> None:
    reference = make()
    vocab = matcher_vocab(reference)
    ids = _sample(reference, vocab, seed=3)
    rng = np.random.default_rng(1)
    matcher = make()
    bitmask = np.zeros((2, (vocab.vocab_size + 31) // 32), np.int32)
    for step in range(len(ids) + 1):
        allowed = matcher.allowed_token_ids()
        matcher.fill_bitmask(bitmask, 1)
        bits = np.unpackbits(bitmask[1].view(np.uint8), bitorder="little")
        assert np.flatnonzero(bits).tolist() == allowed
        allowed_set = set(allowed)
        sample = [*rng.choice(allowed, min(len(allowed), 40), replace=False).tolist()] if allowed else []
        sample += [*(set(vocab.special_ids) - allowed_set)]
        sample += [int(i) for i in rng.integers(0, vocab.vocab_size, 60) if int(i) not in allowed_set]
        for token in sample:
            accepted = matcher.accept_token(token)
            assert accepted == (token in allowed_set), (step, token)
            if accepted:
                matcher.rollback(1)
        if step < len(ids):
            assert matcher.accept_token(ids[step])
    assert matcher.is_finished and matcher.allowed_token_ids() == []
    assert not matcher.accept_token(ids[-1])  # the stop token again: as the empty mask says


BAD_BUFFERS: dict[str, Callable[[int], Any]] = {
    "numpy float32": lambda w: np.zeros((1, w), np.float32),
    "numpy int64": lambda w: np.zeros((1, w), np.int64),
    "numpy int16": lambda w: np.zeros((1, w), np.int16),
    "numpy bool": lambda w: np.zeros((1, w), bool),
    "numpy uint32": lambda w: np.zeros((1, w), np.uint32),
    "torch float32": lambda w: torch.zeros((1, w), dtype=torch.float32),
    "torch int64": lambda w: torch.zeros((1, w), dtype=torch.int64),
    "torch bool": lambda w: torch.zeros((1, w), dtype=torch.bool),
    "unpacked numpy (1, vocab)": lambda w: np.zeros((1, w * 32), np.int32),
    "unpacked torch (1, vocab)": lambda w: torch.zeros((1, w * 32), dtype=torch.int32),
    "one word short": lambda w: np.zeros((1, w - 1), np.int32),
    "one word long": lambda w: np.zeros((1, w + 1), np.int32),
    "1-d": lambda w: np.zeros(w, np.int32),
    "3-d": lambda w: np.zeros((1, 1, w), np.int32),
    "list": lambda w: [[0] * w],
}


@pytest.mark.parametrize("buffer", sorted(BAD_BUFFERS))
def test_fill_bitmask_refuses_a_wrong_buffer_before_writing(make: Callable[[], Any], buffer: str) -> None:
    matcher = make()
    words = (matcher_vocab(matcher).vocab_size + 31) // 32
    bitmask = BAD_BUFFERS[buffer](words)
    with pytest.raises(ValueError, match="bitmask must"):
        matcher.fill_bitmask(bitmask)
    if hasattr(bitmask, "any"):
        assert not bitmask.any()


@pytest.mark.parametrize("index", [None, -1, 2, 1.0, True, "0", torch.tensor([0])])
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_fill_bitmask_refuses_an_index_that_is_not_a_row(make: Callable[[], Any], index: Any, kind: str) -> None:
    matcher = make()
    words = (matcher_vocab(matcher).vocab_size + 31) // 32
    bitmask = np.zeros((2, words), np.int32) if kind == "numpy" else torch.zeros((2, words), dtype=torch.int32)
    with pytest.raises(ValueError, match="index must be an int in \\[0, 2\\)"):
        matcher.fill_bitmask(bitmask, index)
    assert not bitmask.any()
    matcher.fill_bitmask(bitmask, np.int64(1))  # integer-like rows are rows
    matcher.fill_bitmask(bitmask, torch.tensor(0))
    assert bitmask[0].any() and bitmask[1].any()



@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_fill_bitmask_checks_a_reused_buffer_as_a_new_one(make: Callable[[], Any], kind: str) -> None:
    # a bitmask filled before is remembered (no checks, no tensor-to-numpy view at the next step):
    # a wrong row, a matcher of another width or a tensor given other storage in place must
    # still be refused or written where they belong
    matcher = make()
    words = (matcher_vocab(matcher).vocab_size + 31) // 32
    bitmask = np.zeros((2, words), np.int32) if kind == "numpy" else torch.zeros((2, words), dtype=torch.int32)
    matcher.fill_bitmask(bitmask, 1)
    expected = (bitmask[1].numpy() if kind == "torch" else bitmask[1]).copy()
    assert expected.any() and not bitmask[0].any()
    for bad in (2, -1, True, None):
        with pytest.raises(ValueError, match="index must be an int in \\[0, 2\\)"):
            matcher.fill_bitmask(bitmask, bad)
    assert not bitmask[0].any()
    narrow = compile_json_schema({"type": "integer"}, Vocabulary.from_token_bytes([b"1", b"2"])).matcher()
    with pytest.raises(ValueError, match="bitmask must have shape"):
        narrow.fill_bitmask(bitmask, 0)
    assert not bitmask[0].any()
    if kind == "torch":
        before = bitmask.numpy()
        bitmask.set_(torch.zeros((2, words), dtype=torch.int32))  # same shape, other storage
        matcher.fill_bitmask(bitmask, 0)
        assert np.array_equal(bitmask[0].numpy(), expected) and not before[0].any()
    else:
        matcher.fill_bitmask(bitmask, 0)
        assert np.array_equal(bitmask[0], expected)


def test_stop_ids_follow_the_same_contract(kimi_vocab: Vocabulary) -> None:
    compiled = compile_json_schema({"type": "integer"}, kimi_vocab)
    eos = kimi_vocab.token_id("<|im_end|>")
    for bad in (1.5, None, -1, kimi_vocab.vocab_size, "3"):
        with pytest.raises(ValueError, match="stop token ids must be ints"):
            compiled.matcher(stop_token_ids=[bad])
    one = kimi_vocab.encode_text("1")
    for form in INTEGER_LIKE.values():
        matcher = compiled.matcher(stop_token_ids=[form(eos)])
        assert matcher.accept_tokens(one) and matcher.accept_token(eos) and matcher.is_finished

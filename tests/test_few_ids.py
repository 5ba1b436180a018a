"""Masks written as ids: where a frame lists its allowed tokens (a K3 tag's next pieces, a place's
delimiters), ``fill_bitmask`` and ``fill_bitmasks`` write the row from those ids instead of a
packed mask. The oracle is the packed mask itself (``mask_words``), at every position of real
turns of each format; the compiled writer and the fallback write the same rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from enforcer import clear_cache, compile_tools
from enforcer.batch import fill_bitmasks
from enforcer.formats import kimi_k3
from enforcer.matcher import write_bitmask_ids
from enforcer.tools import MAX_FEW_IDS

try:
    from enforcer._kernels import RowWriter
except ImportError:  # a source tree without the built extension
    RowWriter = None

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]},
                                            "days": {"type": "integer"}},
           "required": ["city"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "parameters": {
             "type": "object", "properties": {"tz": {"type": "string"}}}}}]


def _k3_turn(vocab: Any) -> tuple[list[int], list[int]]:
    """(prompt, turn) ids of a K3 turn with two calls: control tokens by id, tag text piece by
    piece as the format writes it."""
    open_id, close_id, sep_id, end_id = (vocab.token_id(n) for n in (kimi_k3.OPEN, kimi_k3.CLOSE, kimi_k3.SEP,
                                                                      kimi_k3.END_OF_MSG))

    def tag(opener: int, word: str, attributes: list[tuple[str, str]] = ()) -> list[int]:
        pieces = [t for p in kimi_k3.tag_pieces(word, attributes) for t in vocab.encode_text(p)]
        return [opener, *pieces, sep_id]

    def argument(key: str, json_type: str, value: str) -> list[int]:
        return tag(open_id, "argument", [("key", key), ("type", json_type)]) + vocab.encode_text(value) \
            + tag(close_id, "argument")

    prompt = tag(open_id, "message", [("role", "assistant")]) + tag(open_id, "think")
    turn = vocab.encode_text("Checking.") + tag(close_id, "think") + tag(open_id, "response") \
        + vocab.encode_text("Sure.") + tag(close_id, "response") + tag(open_id, "tools") \
        + tag(open_id, "call", [("tool", "get_weather"), ("index", "1")]) + argument("city", "string", "Paris") \
        + argument("days", "number", "3") + tag(close_id, "call") \
        + tag(open_id, "call", [("tool", "get_time"), ("index", "2")]) + argument("tz", "string", "UTC") \
        + tag(close_id, "call") + tag(close_id, "tools") + tag(close_id, "message") + [end_id]
    return prompt, turn


def _rows_filled_first(tools: list[dict], vocab: Any, prompt: list[int], turn: list[int]) -> list[int]:
    """The turn's rows as a decode loop writes them (``fill_bitmask`` first at each position of
    a fresh compile: the few ids, else the mask, found by the fill itself) against the packed
    masks of a second fresh compile. Returns the positions whose allowed tokens are no few ids
    (rows written from a packed mask)."""
    clear_cache()
    matcher = compile_tools(tools, vocab, format="kimi_k3").matcher(prompt_ids=prompt)
    rows = []
    for token in turn:
        bitmask = torch.full((1, matcher.words_per_row), -1, dtype=torch.int32)
        matcher.fill_bitmask(bitmask, 0)
        rows.append(bitmask[0].numpy().copy())
        assert matcher.accept_token(token)
    clear_cache()
    oracle = compile_tools(tools, vocab, format="kimi_k3").matcher(prompt_ids=prompt)
    packed = []
    for position, (token, row) in enumerate(zip(turn, rows)):
        assert np.array_equal(row, oracle.mask_words()), f"position {position}"
        if oracle.few_allowed_ids() is None:
            packed.append(position)
        assert oracle.accept_token(token)
    return packed


def test_k3_rows_filled_before_any_other_question_are_the_packed_masks(kimi_k3_vocab: Any) -> None:
    prompt, turn = _k3_turn(kimi_k3_vocab)
    _rows_filled_first(TOOLS, kimi_k3_vocab, prompt, turn)


def test_k3_tag_node_with_more_children_than_listed_ids_fills_its_packed_mask(kimi_k3_vocab: Any) -> None:
    """Past ``MAX_FEW_IDS`` tools whose names start with different tokens, the call tag's node
    before the name holds more children than a row lists: filled from its packed mask."""
    names = []
    for token in range(1000, kimi_k3_vocab.vocab_size):  # whole lowercase words, one token each
        text = kimi_k3_vocab.token_bytes(token) or b""
        if len(text) >= 5 and text.isalpha() and text.islower() and text.isascii() \
                and kimi_k3_vocab.encode_text(text.decode()) == [token]:
            names.append(text.decode())
            if len(names) == MAX_FEW_IDS + 6:
                break
    assert len(names) > MAX_FEW_IDS
    many = [{"type": "function", "function": {"name": n, "parameters": WEATHER}} for n in names]
    prompt, turn = _k3_turn(kimi_k3_vocab)
    open_id, sep_id, close_id = (kimi_k3_vocab.token_id(n) for n in (kimi_k3.OPEN, kimi_k3.SEP, kimi_k3.CLOSE))
    call_word = kimi_k3_vocab.encode_text("call")
    first_call = next(k for k in range(len(turn))
                      if turn[k] == open_id and turn[k + 1:k + 1 + len(call_word)] == call_word)
    turn = turn[:first_call]  # up to the tools' first call
    pieces = [t for p in kimi_k3.tag_pieces("call", [("tool", names[-1]), ("index", "1")])
              for t in kimi_k3_vocab.encode_text(p)]
    city = [t for p in kimi_k3.tag_pieces("argument", [("key", "city"), ("type", "string")])
            for t in kimi_k3_vocab.encode_text(p)]
    name_at = len(turn) + 1 + pieces.index(kimi_k3_vocab.encode_text(names[-1])[0])
    turn += [open_id, *pieces, sep_id, open_id, *city, sep_id, *kimi_k3_vocab.encode_text("Oslo"), close_id]
    assert name_at in _rows_filled_first(many, kimi_k3_vocab, prompt, turn)  # the name's node: packed


def _k2_turn(vocab: Any) -> list[int]:
    """A K2 section with one call: markers by id, the rest as text."""
    def marker(name: str) -> int:
        return vocab.token_id(name)

    return (vocab.encode_text("Let me check.") + [marker("<|tool_calls_section_begin|>"), marker("<|tool_call_begin|>")]
            + vocab.encode_text("functions.get_weather:0") + [marker("<|tool_call_argument_begin|>")]
            + vocab.encode_text('{"city": "Paris", "unit": "c"}')
            + [marker("<|tool_call_end|>"), marker("<|tool_calls_section_end|>"), marker("<|im_end|>")])


def _walk_checking_rows(matcher: Any, ids: list[int]) -> int:
    """Accept ``ids`` one by one; before each, the row ``fill_bitmask`` writes (into a bitmask
    full of ones, so a missed clear shows) must be ``mask_words()``, and listed ids must be
    exactly the row's bits. Returns how many positions listed their ids."""
    words = matcher.words_per_row
    listed = 0
    for position, token in enumerate(ids + [None]):
        expected = matcher.mask_words()
        few = matcher.few_allowed_ids()
        for bitmask in (np.full((3, words), -1, dtype=np.int32), torch.full((3, words), -1, dtype=torch.int32)):
            matcher.fill_bitmask(bitmask, 1)
            row = bitmask[1].numpy() if isinstance(bitmask, torch.Tensor) else bitmask[1]
            assert np.array_equal(row, expected), f"row differs from the packed mask at position {position}"
            assert (np.asarray(bitmask[0]) == -1).all() and (np.asarray(bitmask[2]) == -1).all()
        if few is not None:
            listed += 1
            assert len(few) <= MAX_FEW_IDS
            assert sorted(set(few)) == matcher.allowed_token_ids()
        if token is not None:
            assert matcher.accept_token(token), f"token {token} refused at position {position}"
    return listed


def test_k3_turn_rows_from_ids_are_the_packed_masks(kimi_k3_vocab: Any) -> None:
    clear_cache()
    prompt, turn = _k3_turn(kimi_k3_vocab)
    matcher = compile_tools(TOOLS, kimi_k3_vocab, format="kimi_k3").matcher(prompt_ids=prompt)
    listed = _walk_checking_rows(matcher, turn)
    assert matcher.is_finished
    # every tag piece and every control-token place lists its ids: most of the turn
    assert listed >= len(turn) // 2, f"only {listed} of {len(turn)} positions listed their ids"


def test_k2_section_rows_from_ids_are_the_packed_masks(kimi_vocab: Any) -> None:
    clear_cache()
    turn = _k2_turn(kimi_vocab)
    matcher = compile_tools(TOOLS, kimi_vocab, format="kimi_k2").matcher()
    assert _walk_checking_rows(matcher, turn) >= 2  # the places between markers
    assert matcher.is_finished and [c["function"]["name"] for c in matcher.calls] == ["get_weather"]


def test_batch_writes_listed_and_packed_rows(kimi_k3_vocab: Any) -> None:
    clear_cache()
    prompt, turn = _k3_turn(kimi_k3_vocab)
    compiled = compile_tools(TOOLS, kimi_k3_vocab, format="kimi_k3")
    matchers = []
    for stop in range(0, len(turn), 3):  # a matcher at every third position: tags, text, JSON
        matcher = compiled.matcher(prompt_ids=prompt)
        assert matcher.accept_tokens(turn[:stop])
        matchers.append(matcher)
    assert any(m.few_allowed_ids() is not None for m in matchers)
    assert any(m.few_allowed_ids() is None for m in matchers)
    words = matchers[0].words_per_row
    rows = list(range(len(matchers)))[::-1]
    for bitmask in (np.full((len(matchers), words), -1, dtype=np.int32),
                    torch.full((len(matchers), words), -1, dtype=torch.int32)):
        fill_bitmasks(matchers, bitmask, rows)
        got = bitmask.numpy() if isinstance(bitmask, torch.Tensor) else bitmask
        for matcher, row in zip(matchers, rows):
            assert np.array_equal(got[row], matcher.mask_words())


def test_strided_and_read_only_bitmasks_take_the_packed_path() -> None:
    words = 8
    wide = np.full((2, 2 * words), -1, dtype=np.int32)
    strided = wide[:, ::2]  # rows not contiguous inside: written from a packed mask
    write_bitmask_ids(strided, 1, (0, 33, 255), words)
    assert strided[1].tolist() == [1, 2, 0, 0, 0, 0, 0, np.int32(np.uint32(1 << 31)).item()]
    assert (strided[0] == -1).all() and (wide[:, 1::2] == -1).all()
    frozen = np.zeros((1, words), dtype=np.int32)
    frozen.setflags(write=False)
    with pytest.raises(ValueError):
        write_bitmask_ids(frozen, 0, (1,), words)
    with pytest.raises(ValueError, match="shape"):
        write_bitmask_ids(np.zeros((1, words + 1), dtype=np.int32), 0, (1,), words)


@pytest.mark.skipif(RowWriter is None, reason="needs the compiled extension")
def test_row_writer_checks_ids_and_rows() -> None:
    rows = np.full((2, 4), -1, dtype=np.int32)
    writer = RowWriter(rows)
    writer.write_ids(0, [3, 40, 127])
    assert rows[0].tolist() == [8, 1 << 8, 0, np.int32(np.uint32(1 << 31)).item()] and (rows[1] == -1).all()
    with pytest.raises(ValueError, match="id 128"):
        writer.write_ids(1, [5, 128])
    assert (rows[1] == 0).all()  # cleared, not half written
    with pytest.raises(ValueError, match="id -1"):
        writer.write_ids(1, [-1])
    with pytest.raises(ValueError, match="row 2"):
        writer.write_ids(2, [1])
    with pytest.raises(ValueError):  # rows not contiguous inside: refused when made
        RowWriter(np.zeros((2, 8), dtype=np.int32)[:, ::2])


@pytest.mark.skipif(RowWriter is None, reason="needs the compiled extension")
def test_row_writer_copies_packed_words_of_the_row_width_only() -> None:
    rows = np.full((2, 4), -1, dtype=np.int32)
    writer = RowWriter(rows)
    words = np.array([1, -2, 3, 1 << 30], dtype=np.int32)
    words.setflags(write=False)  # masks are kept read-only
    writer.write_words(1, words)
    assert rows[1].tolist() == words.tolist() and (rows[0] == -1).all()
    writer.write_words(0, np.array([7, 0, 0, 1], dtype=np.uint32))  # a walk's scratch words
    assert rows[0].tolist() == [7, 0, 0, 1]
    for wrong, match in ((np.zeros(3, np.int32), "12 bytes"), (np.zeros(4, np.int64), "8-byte items"),
                         (np.zeros(5, np.int32), "20 bytes")):
        with pytest.raises(ValueError, match=match):
            writer.write_words(1, wrong)
    with pytest.raises(ValueError, match="contiguous"):  # not copied as if it were
        writer.write_words(1, np.zeros(8, np.int32)[::2])
    with pytest.raises(ValueError, match="row 2"):
        writer.write_words(2, words)
    assert rows[1].tolist() == words.tolist()  # nothing written by a refused call


ORDER = {"type": "object", "properties": {
    "id": {"type": "integer"}, "status": {"enum": ["open", "paid", "shipped"]},
    "note": {"type": "string", "maxLength": 40}, "lines": {"type": "array", "items": {
        "type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
                                         "qty": {"type": "integer", "minimum": 1}},
        "required": ["sku", "qty"], "additionalProperties": False}}},
    "required": ["id", "status"], "additionalProperties": False}


@pytest.mark.kernels
def test_json_rows_from_walked_ids_are_the_packed_masks(kimi_vocab: Any) -> None:
    """Plain JSON: a state whose walk finds few ids keeps them (a key's next pieces, a
    delimiter); at every position of an instance the row written from them, or from the packed
    mask, is the packed mask of a fresh table (a second compile after clearing the caches),
    the stop token included where the value may end."""
    import json

    from enforcer import compile_json_schema

    text = json.dumps({"id": 7, "status": "paid", "note": "leave at the door", "lines": [{"sku": "ABC-12", "qty": 2}]})
    stop = kimi_vocab.vocab_size - 1
    clear_cache()
    matcher = compile_json_schema(ORDER, kimi_vocab).matcher(stop_token_ids=[stop])
    ids = kimi_vocab.encode_text(text)
    rows = []
    listed = 0
    for token in ids + [stop]:
        bitmask = np.full((1, matcher.words_per_row), -1, dtype=np.int32)
        matcher.fill_bitmask(bitmask, 0)
        rows.append(bitmask[0].copy())
        listed += matcher.few_allowed_ids() is not None
        assert matcher.accept_token(token)
    assert matcher.is_finished and listed >= len(ids) // 2
    clear_cache()  # the oracle: packed masks only, computed afresh
    oracle = compile_json_schema(ORDER, kimi_vocab).matcher(stop_token_ids=[stop])
    for position, (token, row) in enumerate(zip(ids + [stop], rows)):
        assert np.array_equal(row, oracle.mask_words()), f"position {position}"
        assert oracle.accept_token(token)


@pytest.mark.kernels
def test_few_ids_and_packed_masks_of_one_table_agree(kimi_vocab: Any) -> None:
    """A state listed first packs the same ids; a state packed first lists none afterwards; a
    walk past MAX_FEW_IDS (a number's digits) and a shared-work state (a string body) stay
    packed; the thread's scratch mask is zero again after every walk, listed or not."""
    from enforcer import compile_json_schema
    from enforcer.masks import MAX_FEW_IDS, reference_mask, token_index

    clear_cache()
    compiled = compile_json_schema(ORDER, kimi_vocab)
    table, index = compiled.masks, token_index(kimi_vocab)

    def state_after(text: str) -> int:
        matcher = compiled.matcher()
        assert matcher.accept_tokens(kimi_vocab.encode_text(text))
        return matcher._states[-1]

    key, body, colon = (state_after(t) for t in ('{"', '{"id": 7, "status": "paid", "note": "x', '{"id": 7, "status"'))
    listed = table.few_ids(key)
    assert listed is not None and 0 < len(listed) <= MAX_FEW_IDS and not index.scratch().any()
    assert np.array_equal(table.mask(key), reference_mask(index, table.dfa, key))
    free = compile_json_schema({"type": "object", "properties": {"any": {}}}, kimi_vocab)
    matcher = free.matcher()
    assert matcher.accept_tokens(kimi_vocab.encode_text('{"any":'))
    value = matcher._states[-1]  # any JSON value may start: thousands of ids
    assert free.masks.few_ids(value) is None and not index.scratch().any()  # over MAX_FEW_IDS: packed
    assert np.array_equal(free.masks.mask(value), reference_mask(index, free.dfa, value))
    assert table.few_ids(body) is None and not index.scratch().any()  # a string body: shared work, packed
    table.mask(colon)  # packed first
    assert table.few_ids(colon) is None

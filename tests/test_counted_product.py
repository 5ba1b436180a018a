"""A length-bounded pattern or format kept as a counted product (rows per copy, no table):
the same language, the same trimmed states and the same masks as the whole intersection it
replaces (its oracle here), in bounded memory for bounds whose table would take gigabytes."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from enforcer import SchemaTooComplexError, automaton, clear_cache, compile_json_schema
from enforcer.automaton import DFA, CountedDFA, CountedProduct, Embedded, LazyDFA, _Determiniser, compile_node
from enforcer.json_schema import SchemaCompiler, SchemaOptions, _string_char_dfa

from test_masks import assert_table_matches_reference, make_encoder, random_walk, teacher_forced_masks


def _content(pattern: str, raw: bool) -> DFA:
    """The body automaton of ``pattern`` as the schema compiler builds it (every escape)."""
    compiler = SchemaCompiler({"type": "string", "pattern": pattern}, SchemaOptions())
    return compile_node(compiler._pattern(pattern, "", "raw" if raw else "all"))


class _PythonConstruction:
    """The Python subset construction (the kernel's oracle) read like a lazy automaton."""

    def __init__(self, node: Embedded) -> None:
        self._det = _Determiniser(node, trim=True, compiled=False)

    def row(self, state: int) -> np.ndarray:
        return np.asarray(self._det.row_reference(state, None))

    @property
    def accepting_list(self) -> list[bool]:
        return self._det.accepting


def _same_states(a, b, limit: int = 200_000) -> int:
    """Walk both automata in step from their starts over every byte: at every pair of states
    reached the same bytes die and acceptance agrees (both trimmed: no state that cannot end).
    Returns the pairs visited."""
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        x, y = stack.pop()
        assert bool(a.accepting_list[x]) == bool(b.accepting[y])
        row_a, row_b = np.asarray(a.row(x)), np.asarray(b.row(y))
        assert np.array_equal(row_a < 0, row_b < 0), (x, y, np.flatnonzero((row_a < 0) != (row_b < 0))[:8])
        for pair in set(zip(row_a[row_a >= 0].tolist(), row_b[row_b >= 0].tolist())):
            if pair not in seen:
                seen.add(pair)
                stack.append(pair)
        assert len(seen) < limit
    return len(seen)


CASES = [  # (pattern, raw, minimum, maximum)
    (r"^\S+@\S+$", False, 0, 9),
    (r"^\S+@\S+$", True, 2, 12),
    (r"^[a-z]+(\.[a-z]{2,})+$", False, 5, 14),
    (r"^(?:\S+\s+){0,3}\S+$", True, 0, 11),
    (r"^x*y?$", False, 3, 7),
    (r"^(ab)+c?$", True, 0, 9),
    (r"^\d+px$", False, 4, 10),
    (r"^[é-ü]+-?\d*$", False, 1, 6),
    (r"^\S+$", True, 0, 0),
]


@pytest.mark.parametrize("pattern,raw,minimum,maximum", CASES)
def test_counted_product_is_the_whole_intersection(monkeypatch, pattern, raw, minimum, maximum) -> None:
    monkeypatch.setattr(automaton, "EAGER_PRODUCT_STATES", 0)  # small bounds, the lazy form all the same
    content = _content(pattern, raw)
    counted = CountedDFA(_string_char_dfa(raw), minimum, maximum)
    whole = content.intersect(counted.dense())
    product = CountedProduct.of(counted, content, 10**6)
    if whole.is_empty:
        assert isinstance(product, DFA) and product.is_empty
        return
    assert isinstance(product, CountedProduct)
    dense = product.dense()
    assert dense.difference(whole).is_empty and whole.difference(dense).is_empty
    # embedded, as a lazy automaton builds it: by the compiled construction and by the Python one
    # (each through its own reading of the rows: the kernel's limits, array_row's)
    assert _same_states(LazyDFA(Embedded(product)), whole) > 1
    assert _same_states(_PythonConstruction(Embedded(product)), whole) > 1
    # the rows it hands out agree with its table, copy by copy
    rows = np.array([product.array_row(s) for s in range(product.num_states)])
    assert np.array_equal(rows, dense.transitions)


def test_counts_that_cycle_are_followed_to_the_bound(kimi_vocab) -> None:
    # "(ab)+" ends after an even count only: the ending slots alternate, and the flags follow
    # the cycle to the bound (3000 characters: 1500 pairs fit, 1501 do not)
    product = CountedProduct.of(CountedDFA(_string_char_dfa(True), 0, 3000), _content("^(ab)+$", True), 10**6)
    assert isinstance(product, CountedProduct)
    clear_cache()
    compiled = compile_json_schema({"type": "string", "pattern": "^(ab)+$", "maxLength": 3000}, kimi_vocab)
    assert any(isinstance(b.dfa, CountedProduct) for b in _blocks(compiled))
    dfa = compiled.dfa

    def ends(text: str) -> bool:
        state = dfa.walk(0, json.dumps(text).encode())
        return state >= 0 and bool(dfa.accepting_list[state])

    assert ends("ab") and ends("ab" * 1500)
    assert not ends("aba") and not ends("ab" * 1500 + "ab") and not ends("")
    assert dfa.walk(0, b'"' + b"ab" * 1500 + b"a") < 0  # dead at once: no way to end from there


def test_no_string_of_the_bounds_matches() -> None:
    content = _content(r"^\S{70,}$", False)
    counted = CountedDFA(_string_char_dfa(False), 0, 60)
    product = CountedProduct.of(counted, content, 10**6)
    assert isinstance(product, DFA) and product.is_empty


def _blocks(compiled) -> list:
    return list(compiled.dfa._determiniser().blocks)


def test_a_long_bounded_email_compiles_lazily_with_exact_masks(kimi_tokenizer, kimi_vocab) -> None:
    """maxLength 255 on an email pattern: a counted product (its table would hold about 100,000
    states); strings up to the bound pass, one character more is refused, and every mask
    computed on the way (far from the bound, from the shared loop; near it, by the whole walk)
    matches the reference walk."""
    clear_cache()
    schema = {"type": "object", "properties": {"email": {"type": "string", "pattern": r"^\S+@\S+$", "maxLength": 255}},
              "required": ["email"]}
    compiled = compile_json_schema(schema, kimi_vocab)
    assert any(isinstance(b.dfa, CountedProduct) for b in _blocks(compiled))
    encode = make_encoder(kimi_tokenizer)
    bitmask = np.zeros((1, (kimi_vocab.vocab_size + 31) // 32), dtype=np.int32)
    for email in ["a@b", "jonas.weber@example.com", "x" * 200 + "@" + "y" * 54, "ü" * 100 + "@" + "日本" * 77]:
        assert len(email) <= 255
        matcher = compiled.matcher()
        for token in encode(json.dumps({"email": email}, ensure_ascii=False)):
            matcher.fill_bitmask(bitmask)
            assert (bitmask[0, token >> 5] >> (token & 31)) & 1, email[:20]
            assert matcher.accept_token(token)
        assert matcher.is_accepting()
    too_long = json.dumps({"email": "x" * 200 + "@" + "y" * 55}).encode()
    state = compiled.dfa.walk(0, too_long)
    assert state < 0 or not compiled.dfa.accepting_list[state]
    no_at = compiled.dfa.walk(0, json.dumps({"email": "x" * 30}).encode())
    assert no_at < 0 or not compiled.dfa.accepting_list[no_at]
    assert assert_table_matches_reference(compiled.masks) > 40
    rng = random.Random(3)
    for _ in range(6):
        random_walk(compiled.matcher(), kimi_vocab, rng, 80)
    assert assert_table_matches_reference(compiled.masks) > 40


def test_lazy_and_whole_products_give_the_same_masks(monkeypatch, kimi_tokenizer, kimi_vocab) -> None:
    """The same schema compiled both ways (the whole intersection forced by a large
    ``EAGER_PRODUCT_STATES``): identical masks at every token of the same streams."""
    schema = {"type": "string", "pattern": r"^[a-z]+(\.[a-z]{2,})+$", "minLength": 4, "maxLength": 60}
    encode = make_encoder(kimi_tokenizer)
    streams = [encode(json.dumps(t)) for t in ("abc.de", "a" * 40 + ".xy.zw", "q" * 54 + ".ab.cd")]
    masks = []
    for eager in (False, True):
        monkeypatch.setattr(automaton, "EAGER_PRODUCT_STATES", 10**9 if eager else 0)
        clear_cache()
        compiled = compile_json_schema(schema, kimi_vocab)
        assert any(isinstance(b.dfa, CountedProduct) for b in _blocks(compiled)) != eager
        masks.append(teacher_forced_masks(compiled, kimi_vocab, streams))
    for lazy_rows, whole_rows in zip(*masks):
        assert all(np.array_equal(a, b) for a, b in zip(lazy_rows, whole_rows))


def test_a_counted_product_past_its_block_budget_is_refused_at_once() -> None:
    """``format: uri-reference`` (1,350 slots) with ``maxLength: 2000``: 2.7 million counted
    states, past ``MAX_PRODUCT_BLOCK_STATES``. Refused there, naming the keyword, the pointer and
    the budget, instead of intersecting whole up to ``max_states`` first (1.6 s to the same
    refusal before; jsonschemabench had 6 such schemas, all refused)."""
    schema = {"type": "object", "properties": {"link": {"type": "string", "format": "uri-reference",
                                                        "maxLength": 2000}}}
    with pytest.raises(SchemaTooComplexError) as caught:
        SchemaCompiler(schema, SchemaOptions()).compile()
    error = caught.value
    assert error.pointer == "/properties/link" and error.keyword == "maxLength"
    assert error.budget == f"MAX_PRODUCT_BLOCK_STATES={automaton.MAX_PRODUCT_BLOCK_STATES}"
    assert "maxLength 2000 with a pattern or format needs 2,701,350 counted states" in str(error)


def test_compiled_live_flags_are_the_numpy_layers() -> None:
    """The compiled flags of a counted product's states (ending layers, their cycle, prefix
    counts) against the numpy passes they replace, on random slot tables (unit ends and
    pattern ends at random, bounds below and past the point where layers repeat) and on a
    real email-with-maxLength product; both give None when the layers do not repeat within
    MAX_COUNT_LAYERS (lowered here)."""
    if automaton._counted_live_kernel is None:
        pytest.skip("the compiled kernels are not built")
    rng = np.random.default_rng(7)
    checked = cycled = 0
    for n in (1, 2, 5, 30, 200):
        for density in (0.02, 0.1):
            table = np.where(rng.random((n, 256)) < density, rng.integers(0, n, size=(n, 256)), -1).astype(np.int32)
            completes = (table >= 0) & (rng.random((n, 256)) < 0.3)
            ends = rng.random(n) < 0.2
            for minimum, maximum in ((0, 0), (0, 7), (3, 40), (40, 300)):
                fast = automaton.counted_live(table, completes, ends, minimum, maximum)
                slow = automaton.counted_live(table, completes, ends, minimum, maximum, compiled=False)
                assert fast.dtype == slow.dtype == bool and np.array_equal(fast, slow), (n, density, minimum, maximum)
                checked += 1
                cycled += maximum == 300 and slow.any()
    assert checked == 40 and cycled > 3
    counted = CountedDFA(_string_char_dfa(False), 1, 254)
    content = compile_node(SchemaCompiler({}, SchemaOptions())._string_body({"format": "email"}, "", raw=False))
    unit_loop = automaton.DFA(np.where(counted.step == counted.period, 0, counted.step), np.zeros(counted.period, bool))
    table, _, first, second = automaton.state_pairs(unit_loop.table, unit_loop.classes, content.table, content.classes,
                                                    200_000)
    completes = (table >= 0) & (first[np.maximum(table, 0)] == 0)
    ends = (first == 0) & content.accepting[second]
    fast = automaton.counted_live(table, completes, ends, 1, 254)
    assert fast[0, 0] and np.array_equal(fast, automaton.counted_live(table, completes, ends, 1, 254, compiled=False))


def test_layers_that_do_not_repeat_soon_enough_give_no_flags(monkeypatch) -> None:
    # a chain of slots: layer c holds slot n - 1 - c alone, so nothing repeats before n layers
    n = 12
    table = np.full((n, 256), -1, dtype=np.int32)
    table[np.arange(n - 1), ord("a")] = np.arange(1, n)
    completes = table >= 0
    ends = np.zeros(n, dtype=bool)
    ends[n - 1] = True
    monkeypatch.setattr(automaton, "MAX_COUNT_LAYERS", 5)
    for compiled in (True, False):
        assert automaton.counted_live(table, completes, ends, 0, 20, compiled=compiled) is None
    monkeypatch.setattr(automaton, "MAX_COUNT_LAYERS", 40)
    fast = automaton.counted_live(table, completes, ends, 0, 20)
    assert np.array_equal(fast, automaton.counted_live(table, completes, ends, 0, 20, compiled=False))
    assert fast[9, 0] and not fast[10, 0]  # slot 0 ends after 11 more units: within 20 from count 9, not from 10

"""Byte-level expressions and DFAs: construction, trimming, minimisation, products."""

import random

import pytest

from enforcer.automaton import (ANY_CODEPOINT, EPSILON, NOTHING, Graph, alt, byte_chars, codepoints,
                                compile_node, literal, optional, plus, repeat, separated, seq, star)


def test_literal_concat_star():
    dfa = compile_node(seq(literal("ab"), star(byte_chars(b"xy")), literal("c")))
    assert dfa.matches("abc") and dfa.matches("abxyyxc")
    assert not dfa.matches("ab") and not dfa.matches("abzc") and not dfa.matches("abcc")


def test_every_live_state_can_accept():
    # the branch "ax" can never finish: it must not survive as a dead end
    dfa = compile_node(alt(seq(literal("ab"), NOTHING), literal("ac")))
    assert dfa.walk(0, b"ab") == -1
    assert dfa.matches("ac")


@pytest.mark.parametrize("text", ["", "héllo", "中文", "😀", "\x7f", "\U0010ffff", "\ud7ff"])
def test_utf8_accepts_valid(text):
    assert compile_node(star(ANY_CODEPOINT)).matches(text.encode("utf-8"))


@pytest.mark.parametrize("data", [b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xff",
                                  b"\xe0\x80\x80", b"\x80"])
def test_utf8_rejects_invalid(data):
    assert not compile_node(star(ANY_CODEPOINT)).matches(data)


def test_codepoint_ranges_exact():
    rng = random.Random(0)
    ranges = [(0x41, 0x5A), (0x4E00, 0x4E10), (0x1F600, 0x1F64F), (0x7FF, 0x801)]
    dfa = compile_node(codepoints(ranges))
    for _ in range(3000):
        cp = rng.choice([rng.randint(0, 0x10FFFF), rng.randint(0x4DF0, 0x4E20), rng.randint(0x7F0, 0x810),
                         rng.randint(0x1F5F0, 0x1F660)])
        if 0xD800 <= cp <= 0xDFFF:
            continue
        inside = any(lo <= cp <= hi for lo, hi in ranges)
        assert dfa.matches(chr(cp).encode("utf-8")) == inside, hex(cp)


def test_repeat_bounds_and_separated():
    dfa = compile_node(repeat(literal("a"), 2, 4))
    assert [dfa.matches("a" * n) for n in range(6)] == [False, False, True, True, True, False]
    sep = compile_node(separated(literal("x"), literal(","), 1, 3))
    assert sep.matches("x") and sep.matches("x,x,x") and not sep.matches("x,x,x,x") and not sep.matches("")


def test_graph_node():
    g = Graph(2, 0, frozenset({1}), ((0, literal("ab"), 1), (1, literal("c"), 1), (0, EPSILON, 1)))
    dfa = compile_node(g)
    assert dfa.matches("") and dfa.matches("abcc") and dfa.matches("cc") and not dfa.matches("a")


def test_minimisation_merges_equivalent_states():
    dfa = compile_node(alt(literal("abc"), literal("xbc")))
    assert dfa.num_states == 4


def test_intersect_and_difference():
    a = compile_node(star(byte_chars(b"ab")))
    b = compile_node(repeat(byte_chars(b"abc"), 0, 2))
    both = a.intersect(b)
    assert both.matches("ab") and not both.matches("aba") and not both.matches("c")
    diff = a.difference(compile_node(literal("ab")))
    assert not diff.matches("ab") and diff.matches("aba") and diff.matches("")
    assert a.is_disjoint(compile_node(literal("c")))


def test_empty_language():
    assert compile_node(NOTHING).is_empty
    assert compile_node(seq(literal("a"), NOTHING)).is_empty
    assert not compile_node(optional(plus(literal("a")))).is_empty

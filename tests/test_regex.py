"""enforcer.regex: JSON string characters, ECMA-262 patterns and JSON Schema formats.

Oracles: Python's ``json`` (what a body decodes to), Python's ``re`` for patterns rewritten into
the same language (``$`` as ``\\Z``; ``.``, ``\\d``, ``\\w``, ``\\s`` spelled out), the
standard library (``datetime``, ``ipaddress``) and jsonschema's FormatChecker for formats.
"""

from __future__ import annotations

import datetime
import ipaddress
import itertools
import json
import random
import re
import uuid
from functools import lru_cache
from pathlib import Path

import numpy as np
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from enforcer.automaton import DFA, compile_node, repeat, star
from enforcer.errors import InvalidSchemaError, SchemaTooComplexError, UnsupportedSchemaError
from enforcer.regex import (_json_string_chars, _one_bmp_char, FORMAT_DOCS, JSON_STRING_CHAR_ANY, MAX_GROUP_DEPTH,
                            MAX_PATTERN_POSITIONS, format_node, json_string_char, pattern_node)

SHORT = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}
ECMA_SPACE = "\t\n\v\f\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def bodies(s: str) -> tuple[str, str]:
    """The two usual JSON bodies of ``s``: UTF-8 kept, and ASCII with ``\\u`` escapes."""
    return json.dumps(s, ensure_ascii=False)[1:-1], json.dumps(s)[1:-1]


def random_encoding(s: str, rnd: random.Random) -> str:
    """A body of ``s`` with every character written in a randomly chosen valid JSON form."""
    out = []
    for c in s:
        cp = ord(c)
        forms = []
        if cp >= 0x20 and c not in '"\\':
            forms.append(c)
        if c in SHORT:
            forms.append("\\" + SHORT[c])
        if cp < 0x10000:
            units = [cp]
        else:
            units = [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
        forms.append("".join("\\u" + "".join(rnd.choice((d.lower(), d.upper()))
                                             for d in f"{u:04x}") for u in units))
        out.append(rnd.choice(forms))
    return "".join(out)


def decode_body(body: bytes) -> str | None:
    """What a JSON string body decodes to, or None when it is not valid JSON text (invalid
    UTF-8, bad escapes, raw controls) or holds a lone surrogate."""
    try:
        value = json.loads('"' + body.decode("utf-8") + '"')
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if re.search("[\ud800-\udfff]", value):
        return None
    return value


def minimal_states(dfa: DFA) -> int:
    """States of the minimal equivalent DFA (Moore refinement; compile_node leaves automata
    past its minimisation limit as built)."""
    trans = np.unique(dfa.transitions, axis=1)  # bytes that every state treats alike: one column
    classes = dfa.accepting.astype(np.int64)
    count = len(np.unique(classes))
    while True:
        succ = np.where(trans >= 0, classes[np.where(trans >= 0, trans, 0)], -1)
        _, classes = np.unique(np.concatenate([classes[:, None], succ], axis=1), axis=0,
                               return_inverse=True)
        classes = classes.reshape(-1)
        if classes.max() + 1 == count:
            return count
        count = int(classes.max()) + 1


@lru_cache(maxsize=None)
def pattern_dfa(pattern: str, escapes: str = "all") -> DFA:
    return compile_node(pattern_node(pattern, "/p", escapes=escapes))


@lru_cache(maxsize=None)
def format_dfa(fmt: str, escapes: str = "all") -> DFA:
    node = format_node(fmt, "/f", escapes=escapes)
    assert node is not None
    return compile_node(node)


# --------------------------------------------------------------------------------------------
# json_string_char


ANY_STAR = compile_node(star(JSON_STRING_CHAR_ANY))


def test_any_star_is_small() -> None:
    assert minimal_states(ANY_STAR) == 20


@given(st.text())
def test_any_star_accepts_every_encoding(s: str) -> None:
    s = re.sub("[\ud800-\udfff]", "", s)
    for body in bodies(s):
        assert ANY_STAR.matches(body)
    assert ANY_STAR.matches(random_encoding(s, random.Random(s)))


FRAGMENTS = [b"\\", b"u", b"U", b"d8", b"D8", b"3d", b"dB", b"dc", b"Dc", b"00", b"0", b"e9", b"Ff",
             b"9", b'"', b"a", b"n", b"x", b"/", b"\xc3", b"\xa9", b"\xed\xa0\x80", b"\xc0\x80",
             b"\xf4\x90\x80\x80", b"\xf0\x9f\x98\x80", b"\x00", b"\x1f", b"\x7f", b"\xe2\x80\xa8",
             b"\xf5", b"\x80", b"\\ud83d", b"\\ude00", b"\\u00", b"\\uD800\\uDC00"]


@settings(max_examples=600)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8))
def test_any_star_accepts_exactly_valid_bodies(parts: list[bytes]) -> None:
    body = b"".join(parts)
    assert ANY_STAR.matches(body) == (decode_body(body) is not None)


@pytest.mark.parametrize("body", [
    b"\\ud800", b"\\udc00", b"\\uDBFF\\u0041", b"\\ud83d", b"x\\ude00", b"\\ud83d\\ud83d",
    b"\\ude00\\ud83d", b"\xed\xa0\x80", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80",
    b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\x80", b"\xc3", b"\xe2\x82",
    b"\xff", b"\x00", b"\n", b"\x1f", b'"', b"\\", b"\\x41", b"\\u12", b"\\u12g4", b"\\U0041",
    b"\\a", b"\\'",
])
def test_any_star_rejects(body: bytes) -> None:
    assert not ANY_STAR.matches(body)


CHAR_SETS = [
    ((0x41, 0x5A),),
    ((0x00, 0x1F), (0x22, 0x22), (0x2F, 0x2F), (0x5C, 0x5C)),
    ((0xE9, 0xE9), (0x7FF, 0x801), (0xD7FF, 0xE000), (0xFFFF, 0x10000)),
    ((0x1F600, 0x1F64F), (0x10FFFF, 0x10FFFF), (0x103FF, 0x10400)),
    ((0x30, 0x39), (0xD800, 0xDFFF)),  # surrogates in the set are ignored
    ((0x0, 0x10FFFF),),
]


@pytest.mark.parametrize("ranges", CHAR_SETS)
def test_char_exact_on_every_bmp_code_point(ranges: tuple[tuple[int, int], ...]) -> None:
    dfa = compile_node(json_string_char(ranges))
    for cp in range(0x10000):
        inside = any(lo <= cp <= hi for lo, hi in ranges) and not 0xD800 <= cp <= 0xDFFF
        assert dfa.matches(f"\\u{cp:04X}") == inside, hex(cp)
        assert dfa.matches(f"\\u{cp:04x}") == inside, hex(cp)
        raw = chr(cp).encode("utf-8", "surrogatepass")
        assert dfa.matches(raw) == (inside and cp >= 0x20 and cp not in (0x22, 0x5C)), hex(cp)


@settings(max_examples=400)
@given(st.sampled_from(CHAR_SETS), st.integers(0, 0x10FFFF), st.randoms(use_true_random=False))
def test_char_exact_on_random_code_points(ranges, cp: int, rnd: random.Random) -> None:
    dfa = compile_node(json_string_char(ranges))
    inside = any(lo <= cp <= hi for lo, hi in ranges)
    if 0xD800 <= cp <= 0xDFFF:
        assert not dfa.matches(f"\\u{cp:04x}")
        return
    assert dfa.matches(random_encoding(chr(cp), rnd)) == inside
    assert dfa.matches(json.dumps(chr(cp))[1:-1]) == inside


@pytest.mark.parametrize("ranges", CHAR_SETS)
def test_char_exact_at_range_edges(ranges: tuple[tuple[int, int], ...]) -> None:
    """Every code point next to a range end, in every form (surrogate pairs for astral ones)."""
    dfa = compile_node(json_string_char(ranges))
    rnd = random.Random(0)
    edges = {cp + d for lo, hi in ranges for cp in (lo, hi) for d in (-1, 0, 1)}
    edges |= {0xFFFF, 0x10000, 0x103FF, 0x10400, 0x10FFFF}
    for cp in sorted(c for c in edges if 0 <= c <= 0x10FFFF and not 0xD800 <= c <= 0xDFFF):
        inside = any(lo <= cp <= hi for lo, hi in ranges)
        for _ in range(4):
            assert dfa.matches(random_encoding(chr(cp), rnd)) == inside, hex(cp)
        assert dfa.matches(json.dumps(chr(cp))[1:-1]) == inside, hex(cp)


def test_char_accepts_one_character_only() -> None:
    dfa = compile_node(json_string_char(((0x61, 0x61),)))
    assert dfa.matches("a") and dfa.matches("\\u0061")
    assert not dfa.matches("aa") and not dfa.matches("") and not dfa.matches("\\u0061a")


def test_char_short_escapes() -> None:
    for c, letter in SHORT.items():
        dfa = compile_node(json_string_char(((ord(c), ord(c)),)))
        assert dfa.matches("\\" + letter)
        assert dfa.matches(f"\\u{ord(c):04x}")
        assert dfa.matches(c) == (c not in '"\\' and ord(c) >= 0x20)


def test_char_common_escapes() -> None:
    everything = compile_node(star(json_string_char(((0, 0x10FFFF),), escapes="common")))
    for body in ["A", "\\u00e9", "\\u003c", "\\u003E", "\\u0026", "\\u0027", "\\u002b", "\\u003d",
                 "\\u0060", "\\u0022", "\\u005c", "\\u002f", "\\u000a", "\\ud83d\\ude00", "\\n"]:
        assert everything.matches(body), body
    for body in ["\\u0041", "\\u0030", "\\u0020", "\\u002d", "\\u007e"]:
        assert not everything.matches(body), body
    assert minimal_states(everything) <= 32


def test_char_rejects_bad_ranges() -> None:
    with pytest.raises(ValueError):
        json_string_char([(0, 0x110000)])
    with pytest.raises(ValueError):
        json_string_char([(0, 1)], escapes="some")  # type: ignore[arg-type]


def test_repeat_any_state_count() -> None:
    dfa = compile_node(repeat(JSON_STRING_CHAR_ANY, 0, 8))
    assert dfa.matches("a" * 8) and dfa.matches("\\ud83d\\ude00" * 8)
    assert not dfa.matches("a" * 9)
    assert minimal_states(dfa) == 8 * minimal_states(ANY_STAR) + 1


# --------------------------------------------------------------------------------------------
# pattern_node against Python's re


CLASS_BODIES = {"\\d": "0-9", "\\w": "A-Za-z0-9_", "\\s": ECMA_SPACE}


def python_pattern(ecma: str) -> str:
    """The same language in Python's syntax (no flags), for the ECMA subset used here: ``$`` ->
    ``\\Z``, ``.`` -> no line terminators, ``\\d \\w \\s`` -> the ECMA sets, ``[^]`` -> anything,
    ``[]`` -> nothing, ``(?<name>`` -> ``(?P<name>``."""
    out, i, in_class = [], 0, False
    while i < len(ecma):
        c = ecma[i]
        if c == "\\":
            esc = ecma[i:i + 2]
            if esc.lower() in CLASS_BODIES:
                body = CLASS_BODIES[esc.lower()]
                if in_class:
                    assert esc.islower(), "negated class escape inside a class"
                    esc = body
                else:
                    esc = ("[" if esc.islower() else "[^") + body + "]"
            out.append(esc)
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            out.append(c)
        elif ecma.startswith("[^]", i):
            out.append("(?s:.)")
            i += 2
        elif ecma.startswith("[]", i):
            out.append("(?!)")
            i += 1
        elif ecma.startswith("(?<", i) and ecma[i + 3] not in "=!":
            out.append("(?P<")
            i += 2
        elif c == "[":
            in_class = True
            out.append(c)
            if ecma.startswith("[^", i):
                out.append("^")
                i += 1
        elif c == "$":
            out.append(r"\Z")
        elif c == ".":
            out.append("[^\n\r\u2028\u2029]")
        else:
            out.append(c)
        i += 1
    return "".join(out)


ORACLE_PATTERNS = [
    "abc", "^abc$", "^a", "b$", "a|b|c", "^(a|bc)+$", "^$", "", "a*", "^a*$", "a+b?c{2,3}",
    "^[a-c]{2}$", "[^a]", "^[^ab]*$", r"\d\d", r"^\d{3}-\d{4}$", r"^[\w]+$", r"^\w\d$", r"\s",
    r"^\S+$", "^.$", "^..$", "f.*o", "^.*bar$", "(^[^5]*$)|7", "(^a|b)c", "(a|^)b", "a(b$|c)",
    "(^|x)+y$", "(?:a|^){2}b", "^(?:$|a)", "a$|^b", "^(ab)*$", r"^\\$", r'^"', r"^[\\/]+$",
    r"^\/$", r"^a\.b$", "^[a-zA-Z0-9_]*", "^([a-z])([a-z0-9-])*$", "[0-9]{2,}",
    "^([01]?[0-9]|2[0-3]):[0-5][0-9]$", "^(/[^/]+)+$", "[^]", "^[^]{2}$", "[]", "a[]|b",
    "^(?:a{2}){1,2}$", "^é+$", "😀{2}", "^[é😀]$", r"^\n", "x{0}y", "^a{0,}$", "^(a?){3}$",
    "^(?<name>ab)$", "a{2", "^]$", "^}$", "^(?:^a|b){3}$", "(?:a|^b){3,}", "(?:a$|b){2,3}", r"^[\d\s]+$", r"\D\W",
    # lookaheads right after a leading ^: they test the input from its start
    "^(?!ab)[a-c/]*$", "^(?=.{2,3}$)a*b*/?$", "^(?!.*//)(?=a)[a/]+", "^(?!x)", "^(?=a)(?!ab)", "^(?=$)",
    "^(?!a)|b", "^(?=[ab]{2})(?!.*é).*1$",
]
ALPHABET = "abcxy015é😀 \"\\/-:\n\r\u2028\ufeff\x1c"


@pytest.mark.parametrize("pattern", ORACLE_PATTERNS)
def test_pattern_matches_like_python(pattern: str) -> None:
    oracle = re.compile(python_pattern(pattern))
    dfa = pattern_dfa(pattern)
    rnd = random.Random(pattern)
    samples = ["".join(t) for n in range(3) for t in itertools.product("ab/", repeat=n)]
    samples += ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 7))) for _ in range(300)]
    for s in samples:
        expected = oracle.search(s) is not None
        for body in (*bodies(s), random_encoding(s, rnd)):
            assert dfa.matches(body) == expected, (pattern, s, body)


@settings(max_examples=25, deadline=None)
@given(st.data())
@pytest.mark.parametrize("pattern", [p for p in ORACLE_PATTERNS if "[]" not in p and "(?=" not in p and "(?!" not in p])
def test_pattern_accepts_generated_matches(pattern: str, data: st.DataObject) -> None:
    """Strings that Python's engine matches (drawn from the pattern itself) are accepted."""
    oracle = re.compile(python_pattern(pattern))
    s = data.draw(st.from_regex(oracle))
    assert oracle.search(s)
    body = random_encoding(s, random.Random(s))
    assert pattern_dfa(pattern).matches(body), (pattern, s, body)


ATOMS = [("a", "a"), ("b", "b"), ("é", "é"), ("😀", "😀"), ("/", "/"), ('\\"', '"'),
         ("\\\\", "\\\\"), ("\\n", "\\n"), (".", "[^\n\r\u2028\u2029]"), ("[ab]", "[ab]"),
         ("[^a]", "[^a]"), ("\\d", "[0-9]"), ("\\w", "[A-Za-z0-9_]"), ("\\s", "[" + ECMA_SPACE + "]"),
         ("\\S", "[^" + ECMA_SPACE + "]"), ("[^]", "(?s:.)"), ("^", "^"), ("$", "\\Z"),
         ("(?:)", "(?:)")]


def regex_trees() -> st.SearchStrategy[tuple[str, str]]:
    """(ECMA source, Python source) pairs of random expressions, anchors anywhere."""
    def extend(inner: st.SearchStrategy[tuple[str, str]]) -> st.SearchStrategy[tuple[str, str]]:
        def cat(parts):
            return "".join(p[0] for p in parts), "".join(p[1] for p in parts)

        def alt_(parts):
            return ("(?:" + "|".join(p[0] for p in parts) + ")",
                    "(?:" + "|".join(p[1] for p in parts) + ")")

        def quant(args):
            (e, p), q = args
            return f"(?:{e}){q}", f"(?:{p}){q}"
        return st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(cat),
            st.lists(inner, min_size=2, max_size=3).map(alt_),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}", "*?", "{3}", "{2,4}"])
                      ).map(quant),
            inner.map(lambda p: (f"({p[0]})", f"({p[1]})")))
    return st.recursive(st.sampled_from(ATOMS), extend, max_leaves=8)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(regex_trees(), st.lists(st.text(alphabet="ab1é😀/\"\\\n \u2028", max_size=6), min_size=20,
                                max_size=20), st.randoms(use_true_random=False))
def test_random_patterns_match_like_python(tree: tuple[str, str], samples: list[str],
                                           rnd: random.Random) -> None:
    ecma, python = tree
    oracle = re.compile(python)
    dfa = compile_node(pattern_node(ecma, ""))
    for s in samples + ["", "a", "ab"]:
        expected = oracle.search(s) is not None
        for body in (*bodies(s), random_encoding(s, rnd)):
            assert dfa.matches(body) == expected, (ecma, s, body)


@settings(max_examples=60, deadline=None)
@given(regex_trees())
def test_random_anchored_patterns_on_all_short_strings(tree: tuple[str, str]) -> None:
    ecma, python = tree
    oracle = re.compile(python)
    dfa = compile_node(pattern_node(ecma, ""))
    for n in range(5):
        for t in itertools.product("ab\n", repeat=n):
            s = "".join(t)
            assert dfa.matches(json.dumps(s)[1:-1]) == (oracle.search(s) is not None), (ecma, s)


@settings(max_examples=100, deadline=None)
@given(regex_trees(), st.sampled_from(["all", "raw", "common"]))
def test_a_whole_anchored_pattern_is_the_language_of_the_general_search(tree: tuple[str, str], escapes: str) -> None:
    """``^X$`` is lifted as X alone; the same pattern written ``^(?:X)$|^(?:X)$`` takes the
    general search with its anchor graphs: both are the same minimal automaton."""
    from test_json_schema import _same_automaton

    from enforcer.automaton import MINIMISE_LIMIT

    ecma = tree[0]
    direct = compile_node(pattern_node(f"^{ecma}$", "", escapes=escapes))
    general = compile_node(pattern_node(f"^(?:{ecma})$|^(?:{ecma})$", "", escapes=escapes))
    if max(direct.num_states, general.num_states) > MINIMISE_LIMIT:
        # compile_node keeps automata this large as built (not minimal): the languages must agree
        assert direct.difference(general).is_empty and general.difference(direct).is_empty, ecma
    else:
        assert _same_automaton(direct, general), ecma


# --------------------------------------------------------------------------------------------
# ECMA-262 specifics that Python does not share


@pytest.mark.parametrize("pattern, text, expected", [
    (r"^\d$", "٣", False), (r"^\d$", "7", True), (r"^\D$", "٣", True),
    (r"^\w$", "é", False), (r"^\w$", "_", True), (r"^\W$", "é", True),
    (r"^\s$", "\ufeff", True), (r"^\s$", "\u00a0", True), (r"^\s$", "\u2028", True),
    (r"^\s$", "\x1c", False), (r"^\s$", "\u180e", False), (r"^\S$", "\x1c", True),
    ("^.$", "\n", False), ("^.$", "\r", False), ("^.$", "\u2028", False), ("^.$", "\u2029", False),
    ("^.$", "\x85", True), ("^.$", "😀", True), ("^..$", "😀", False),
    ("^a$", "a\n", False), ("a$", "a\nb", False), ("^b", "a\nb", False),
    ("^[^]$", "\n", True), ("[]", "", False), ("^[]]$", "]", False), ("^[]]$", "", False),
    (r"^\cJ$", "\n", True), (r"^\x41\u0042\u{43}$", "ABC", True), (r"^\u{1F600}$", "😀", True),
    (r"^\uD83D\uDE00$", "😀", True), (r"^[\uD83D\uDE00]$", "😀", True), (r"\uD83D", "😀", False),
    (r"^[\b]$", "\b", True), (r"^\0$", "\0", True), (r"^\v$", "\v", True),
    (r"^\p{Lu}+$", "ÀB", True), (r"^\p{Lu}$", "a", False), (r"^\P{L}$", "1", True),
    (r"^\p{gc=Nd}$", "٣", True), (r"^\p{General_Category=Letter}$", "π", True),
    (r"^\p{Letter}+$", "Hello", True), (r"^\p{Letter}+$", "π", True),
    (r"^\p{Letter}+$", "123", False), (r"^[\p{N}a]+$", "a٣", True), (r"^\p{ASCII}$", "é", False),
    (r"^\p{Any}$", "😀", True), (r"^\p{Assigned}$", "\U000E0080", False),
    ("a{,2}", "a{,2}", True), ("a{,2}", "aa", False), ("^{$", "{", True), ("^a{2$", "a{2", True),
    (r"^\-\ \/\#$", "- /#", True), ("^(?<x>a)(?<y>b)$", "ab", True), ("^a*?$", "aaa", True),
    ("^[a-]$", "-", True), ("^[-a]$", "-", True), ("^[a-c-e]$", "-", True), ("^[a-c-e]$", "d", False),
    (r"^[\d-]+$", "1-2", True), (r"^[^\W\d]+$", "ab_", True), (r"^[^\W\d]+$", "a1", False),
])
def test_ecma_specifics(pattern: str, text: str, expected: bool) -> None:
    dfa = pattern_dfa(pattern)
    for body in bodies(text):
        assert dfa.matches(body) == expected


@pytest.mark.parametrize("pattern, reason", [
    ("(?=a)b", "lookahead"), ("(?!a)b", "lookahead"), ("^a(?=b)", "lookahead"), ("^(?:(?!a)b)", "lookahead"),
    ("^(?=a)*b", "quantified lookahead"), ("(?<=a)b", "lookbehind"), ("(?<!a)b", "lookbehind"), (r"\bword", "word boundary"), (r"a\B", "word boundary"),
    (r"(a)\1", "backreference"), (r"(?<n>a)\k<n>", "backreference"), ("(?i)abc", "flag"),
    ("(?i:a)b", "flag"), ("(?-i:a)", "flag"), (r"\p{Script=Greek}", "property"),
    (r"\p{sc=Han}", "property"), (r"\p{Emoji}", "property"), (r"[\p{Script_Extensions=Latin}]", "property"),
])
def test_unsupported_constructs(pattern: str, reason: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        pattern_node(pattern, "/properties/x")
    assert info.value.keyword == "pattern"
    assert info.value.pointer == "/properties/x"
    assert reason in str(info.value)


@pytest.mark.parametrize("pattern", [
    "(", ")", "a)", "(a", "[a", "[", "a**", "*a", "+", "?", "a{3,1}", "{2}", "^*", "$+", "[z-a]",
    "\\", "\\x4", "\\xzz", "\\u12", "\\u{110000}", "\\u{}", "\\a", "\\z", "\\Z", "\\A", "\\e",
    "(?P<n>a)", "(?<1n>a)", "[\\d-z]", "[a-\\w]", "\\c1", "\\01", "\\p{gc=Foo}", "\\pL",
    "\\p{L", "(?<n>a",
])
def test_invalid_patterns(pattern: str) -> None:
    with pytest.raises(InvalidSchemaError) as info:
        pattern_node(pattern, "/a/b")
    assert info.value.pointer == "/a/b"


def test_pattern_must_be_a_string() -> None:
    with pytest.raises(InvalidSchemaError):
        pattern_node(5, "/x")  # type: ignore[arg-type]


def test_pattern_too_large() -> None:
    with pytest.raises(SchemaTooComplexError, match="/deep"):
        pattern_node("(a{1000}){1000}", "/deep")
    pattern_node("a{%d}" % MAX_PATTERN_POSITIONS, "/ok")
    with pytest.raises(SchemaTooComplexError, match="/nest"):
        pattern_node("(" * (MAX_GROUP_DEPTH + 1) + "a" + ")" * (MAX_GROUP_DEPTH + 1), "/nest")
    nested = "(?:" * MAX_GROUP_DEPTH + "a" + ")" * MAX_GROUP_DEPTH
    assert compile_node(pattern_node(f"^{nested}$", "/ok")).matches("a")
    anchored_loops = "(?:" * 8 + "(?:^a|b$)" + "".join(f")*{c}" for c in "cdefghij")
    with pytest.raises(SchemaTooComplexError, match="/loops"):
        pattern_node(anchored_loops, "/loops")


def test_long_patterns_do_not_recurse() -> None:
    assert pattern_dfa("^" + "ab" * 1500 + "$").matches("ab" * 1500)
    assert not pattern_dfa("^" + "ab" * 1500 + "$").matches("ab" * 1499)
    assert pattern_dfa("^" + "a?" * 400 + "$").matches("a" * 400)
    assert not pattern_dfa("^" + "a?" * 400 + "$").matches("a" * 401)


def test_unsatisfiable_pattern_is_empty() -> None:
    assert pattern_dfa("a^b").is_empty
    assert pattern_dfa("$a").is_empty
    assert pattern_dfa(r"^\uDC00$").is_empty


def test_common_escapes_pattern() -> None:
    full, common = pattern_dfa(r"^\d{4}$"), pattern_dfa(r"^\d{4}$", "common")
    assert full.matches("2024") and common.matches("2024")
    assert full.matches("\\u0032024") and not common.matches("\\u0032024")
    assert minimal_states(common) < minimal_states(full)


# --------------------------------------------------------------------------------------------
# Formats


VALID = {
    "date-time": ["1963-06-19T08:30:06.283185Z", "1963-06-19T08:30:06Z", "1937-01-01T12:00:27.87+00:20",
                  "1990-12-31T15:59:50.123-08:00", "2020-02-29t00:00:00z", "1998-12-31T23:59:60Z",
                  "1998-12-31T23:59:60.5+00:00", "0001-01-01T00:00:00-23:59", "9999-12-31T23:59:59+23:59"],
    "date": ["1963-06-19", "2020-01-31", "2021-02-28", "2020-02-29", "2000-02-29", "2400-02-29",
             "2021-04-30", "0001-01-01", "9999-12-31", "1904-02-29", "0400-02-29"],
    "time": ["08:30:06Z", "08:30:06.283185Z", "08:30:06+00:20", "08:30:06-08:00", "08:30:06z",
             "23:59:60Z", "23:59:60-00:00", "00:00:00+23:59"],
    "uuid": ["2EB8AA08-AA98-11EA-B4AA-73B441D16380", "2eb8aa08-aa98-11ea-b4aa-73b441d16380",
             "2eb8aa08-AA98-11ea-B4Aa-73B441D16380", "00000000-0000-0000-0000-000000000000",
             "98d80576-482e-427f-8434-7f86890ab222", "99c17cbb-656f-564a-940f-1a4568f03487",
             "99c17cbb-656f-f64a-940f-1a4568f03487"],
    "email": ["joe.bloggs@example.com", "te~st@example.com", "~test@example.com", "test~@example.com",
              '"joe bloggs"@example.com', '"joe..bloggs"@example.com', '"joe@bloggs"@example.com',
              "joe.bloggs@[127.0.0.1]", "joe.bloggs@[IPv6:::1]", "te.s.t@example.com",
              "a+b=c/d{e}|f!#$%&'*?^`@x-1.y", '"\\"q\\\\"@h', "x@[ipv6:1:2:3:4:5:6:7:8]"],
    "ipv4": ["192.168.0.1", "0.0.0.0", "255.255.255.255", "87.10.0.1", "1.2.3.4"],
    "ipv6": ["::1", "::", "::abef", "1:d6::42", "1::d6:192.168.0.1", "::ffff:192.168.0.1",
             "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
             "1::8", "ABCD:EF01:2345:6789:ABCD:EF01:2345:6789", "1:2::3:4:5:6:7", "fe80::1:2"],
    "uri": ["http://foo.bar/?baz=qux#quux", "http://foo.com/blah_(wiki)#cite-1",
            "http://foo.bar/?q=Test%20URL-encoded%20stuff", "http://xn--nw2a.xn--j6w193g/",
            "http://-.~_!$&'()*+,;=:%40:80%2f::::::@example.com", "http://223.255.255.254",
            "ftp://ftp.is.co.za/rfc/rfc1808.txt", "http://www.ietf.org/rfc/rfc2396.txt",
            "ldap://[2001:db8::7]/c=GB?objectClass?one", "mailto:John.Doe@example.com",
            "news:comp.infosystems.www.servers.unix", "tel:+1-816-555-1212",
            "telnet://192.0.2.16:80/", "urn:oasis:names:specification:docbook:dtd:xml:4.1.2",
            "a:", "http://[v1.fe]/", "file:///etc/hosts", "s://h/%7e"],
    "hostname": ["www.example.com", "xn--4gbwdl.xn--wgbh1c", "hostname", "host-name", "h0stn4me",
                 "1host", "hostnam3", "a" * 63, ("a" * 63 + ".") * 3 + "a", "A.B-C.d"],
    "uri-template": ["", "http://example.com/{id}", "/search{?q,lang}", "{+path:6}/here", "{var*}",
                     "http://a/{a.b,c}{#frag}", "é{x}", "{;x,y:12}", "map?{x,y}", "{/list*,path:4}"],
    "uri-reference": ["http://foo.bar/?baz=qux#quux", "//foo.bar/?baz=qux#quux", "/abc", "abc", "#fragment",
                      "", "?q=1", "a/b/c", "../x", "./a:b", "%41"],
    "json-pointer": ["", "/", "/foo/0", "/a~1b", "/m~0n", "/ ", "/é/~01", "//", "/foo//bar"],
    "iri": ["http://ƒøø.ßår/?∂éœ=πîx#πîüx", "http://➡.ws/䨹", "http://example.com/ü", "x:ü", "a:",
            "http://[2001:db8::7]/c", "http://[::1]/", "ldap://[2001:db8::7]/c=GB?objectClass?one",
            "http://a/?\ue000", "mailto:John.Doe@example.com", "http://a/\U00010000/\U000EFFFD",
            "http://a/?\U00100000", "http://[v1.fe]/", "http://[V1.fe]/", "urn:isbn:0451450523", "s://h/%7e"],
    "iri-reference": ["http://ƒøø.ßår/?∂éœ=πîx#ƒrägmênt", "//ƒøø.ßår/?∂éœ=πîx#πîüx", "/âππ", "âππ", "#ƒrägmênt",
                      "", "?q=1", "../ü", "./a:b", "%41", "//[::1]:80/x"],
    "relative-json-pointer": ["1", "0/foo/bar", "2/0/baz/1/zip", "0#", "1#", "0", "120/foo/bar", "0/", "1+1/a",
                              "0-1#", "10/a~0b~1c", "3+10"],
    "duration": ["P4DT12H30M5S", "P4Y", "PT0S", "P0D", "P1M", "PT1M", "PT36H", "P1DT12H", "P2W", "P1Y2M",
                 "P1Y2M3D", "P1M2D", "PT1H1M", "PT1M1S", "P1DT1M1S", "P99999999999999999999Y", "PT1S"],
}
INVALID = {
    "date-time": ["1990-02-31T15:59:59.123-08:00", "1990-12-31T15:59:59-24:00",
                  "1963-06-19T08:30:06.28123+01:00Z", "06/19/1963 08:30:06 PST",
                  "2013-350T01:01:01", "1963-6-19T08:30:06.283185Z", "1963-06-1T08:30:06.283185Z",
                  "1963-06-1৪T00:00:00Z", "1998-12-31T23:59:61Z", "1998-12-31T23:58:60Z",
                  "1998-12-31T22:59:60Z", "1998-12-31T15:59:60-08:00", "2021-02-29T00:00:00Z",
                  "1963-06-19T08:30:06", "1963-06-19 08:30:06Z", "0000-01-01T00:00:00Z",
                  "1963-06-19T08:30:06.Z", "1963-06-19T24:00:00Z"],
    "date": ["06/19/1963", "2013-350", "1998-1-20", "1998-01-1", "1998-13-01", "1998-04-31",
             "2020-02-30", "2021-02-29", "1900-02-29", "2100-02-29", "1963-06-1৪", "20230328",
             "2023-W01", "2023-W13-2", "2022W527", "0000-01-01", "2020-00-10", "2020-01-00",
             "2020-01-32", "12020-01-01", ""],
    "time": ["008:030:006Z", "8:3:6Z", "8:0030:6Z", "22:59:60Z", "23:58:60Z", "23:59:61Z",
             "23:59:60+01:00", "01:29:60+01:30", "08:30:06-8:000", "08:30:06+00:60",
             "08:30:06+24:00", "24:00:00Z", "00:60:00Z", "00:00:61Z", "08:30:06",
             "01:01:01,1111Z", "12:00:00.52", "1২:00:00Z", "08:30:06 Z", "08:30:06.Z",
             "08:30:06Zz"],
    "uuid": ["2eb8aa08-aa98-11ea-b4aa-73b441d1638", "2eb8aa08-aa98-11ea-73b441d16380",
             "2eb8aa08-aa98-11ea-b4ga-73b441d16380", "2eb8aa08aa9811eab4aa73b441d16380",
             "2eb8aa08aa98-11ea-b4aa73b441d16380", "2eb8-aa08-aa98-11ea-b4aa73b44-1d16380",
             "2eb8aa08aa9811eab4aa73b441d16380----", "{2eb8aa08-aa98-11ea-b4aa-73b441d16380}",
             "urn:uuid:2eb8aa08-aa98-11ea-b4aa-73b441d16380"],
    "email": ["2962", ".test@example.com", "test.@example.com", "te..st@example.com",
              "joe.bloggs@invalid=domain.com", "joe.bloggs@[127.0.0.300]", "@example.com", "a@",
              "a b@c", '"a"b"@c', "a@-b.c", "a@b-.c", "a@b..c", "a@[IPv6:1::2::3]", "a@[1.2.3]",
              "é@example.com", "a@" + "b" * 64],
    "ipv4": ["127.0.0.0.1", "256.256.256.256", "127.0", "0x7f000001", "2130706433", "087.10.0.1",
             "1.2.3.4\n", "1২7.0.0.1", "192.168.1.0/24", "01.2.3.4", "1.2.3.04", "1.2.3.", ".1.2.3",
             "1..2.3", " 1.2.3.4", "300.1.1.1", "1.2.3.256"],
    "ipv6": ["12345::", "::abcef", "1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1", "::laptop", ":2:3:4:5:6:7:8",
             "1:2:3:4:5:6:7:", ":2:3:4::8", "1::d6::42", "1::2:192.168.256.1", "1::2:192.168.ff.1",
             "::ffff:192.168.0.1:1", "1:2:3:4:5:::8", "1:2:3:4:5:6:7:8:9", "fe80::a%eth1",
             " ::1", "::1 ", "1:2:3:4:5:6:7:8::", "::1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:1.2.3.4",
             "1:2:3:4:5:1.2.3.4", "1::1.2.3.4.5", "100:100:100:100:100:100:255.255.255.255.255",
             "1:2:3:4:5:6:7:৪", "1::01.2.3.4", "fe80:0:0:0:200:f8ff:fe21:67cf:", "0:0:0:0:0:0:0:0:1",
             "", ":"],
    "uri": ["//foo.bar/?baz=qux#quux", "/abc", "\\\\WINDOWS\\fileshare", "abc",
            "http:// shouldfail.com", ":// should fail", "bar,baz:foo", "https://[@example.org/test.txt",
            "https://example.org/foobar\\.txt", "https://example.org/foo bar.txt",
            "https://[::1]x/", "http://ƒøø.ßår/?∂éœ=πîx#πîüx", "http://a/%zz", "http://a/%4",
            "1http://a", "http://[1::2::3]/", "http://a#b#c", "http://a@b@c", "http://a/b{c}", "http://a/<b>", ""],
    "hostname": ["-a-host-name-that-starts-with--", "not_a_valid_host_name", "a" * 64,
                 "-hostname", "hostname-", "_hostname", "hostname_", "host_name", "", ".",
                 "a..b", "a.", ".a", "ex ample.com", "é.com", "a.-b", "a.b-", "xn--é"],
    "uri-template": ["http://example.com/resource/{", "a{b", "x}", "{", "{}", "{:3}", "{x:0}", "{x:12345}",
                     "a b", "{x,}", "{.x.}", "{x y}", "<x>", "%zz"],
    "uri-reference": ["\\\\WINDOWS\\fileshare", "abc#fragm\\ent", "#frag\\ment", "a b", "a:b:c d", "%zz", "http://a/<b>",
                      "1a:b/c", "a#b#c"],
    "json-pointer": ["/foo/bar~", "#", "#/", "a", "/~2", "/~", "foo/bar", "0"],
    "iri": ["http://2001:0db8:85a3:0000:0000:8a2e:0370:7334", "/abc", "\\\\WINDOWS\\filëshare", "âππ",
            "http:// a.com", "ü:x", "http://a/\ue000", "http://a/#\ue000", "http://a/\ufffe", "http://a/\U000EFFFE",
            "http://a/\U000E0FFF", "http://a/%zz", "http://a@b@c", "http://[1::2::3]/", "http://a/<b>", ""],
    "iri-reference": ["\\\\WINDOWS\\filëshare", "#ƒräg\\mênt", "a b", "%zz", "ü:x", "a#b#c", "\ue000",
                      "?\ufffe", "1a:ü/c"],
    "relative-json-pointer": ["/foo/bar", "-1/foo/bar", "+1/foo/bar", "0##", "01/a", "0#/a", "", "0+0/a",
                              "1-01", "1/~2", "a", "#", "0 /a", "١/a"],
    "duration": ["PT1D", "P", "P1YT", "PT", "P2D1Y", "P1D2H", "P2S", "P1Y2W", "P0.5D", "P1", "p1d", "P1d",
                 "PT1H1S", "P1D1S", "P١D", "1D", "P1YM", "P-1D", "P1.5W", "PT1.5S", "P1W1D", ""],
}


@pytest.mark.parametrize("fmt", sorted(FORMAT_DOCS))
def test_format_samples(fmt: str) -> None:
    dfa = format_dfa(fmt)
    for s in VALID[fmt]:
        for body in bodies(s):
            assert dfa.matches(body), (fmt, s, body)
        assert dfa.matches(random_encoding(s, random.Random(s))), (fmt, s)
    for s in INVALID[fmt]:
        for body in bodies(s):
            assert not dfa.matches(body), (fmt, s)


@pytest.mark.parametrize("fmt", sorted(FORMAT_DOCS))
def test_format_common_escapes_same_values(fmt: str) -> None:
    full, common = format_dfa(fmt), format_dfa(fmt, "common")
    for s in VALID[fmt] + INVALID[fmt]:
        for body in bodies(s):
            assert common.matches(body) == full.matches(body), (fmt, s)
    assert minimal_states(common) < minimal_states(full)


def test_format_unknown_and_bad() -> None:
    assert format_node("idn-hostname", "/f") is None  # refused by the compiler: UNENFORCED_FORMATS
    assert format_node("color", "/f") is None
    with pytest.raises(InvalidSchemaError):
        format_node(3, "/f")  # type: ignore[arg-type]
    assert set(FORMAT_DOCS) == {"date-time", "date", "time", "uuid", "email", "ipv4", "ipv6", "uri-template",
                                "uri", "hostname", "uri-reference", "json-pointer", "iri", "iri-reference",
                                "relative-json-pointer", "duration"}


def test_date_exact_over_four_centuries() -> None:
    dfa = format_dfa("date")
    for year in itertools.chain(range(1, 5), range(1896, 2105), (1600, 1700, 2400, 9999)):
        for month in range(1, 13):
            for day in range(28, 33):
                text = f"{year:04d}-{month:02d}-{day:02d}"
                try:
                    datetime.date(year, month, day)
                    valid = True
                except ValueError:
                    valid = False
                assert dfa.matches(text) == valid, text


@settings(max_examples=300)
@given(st.datetimes(min_value=datetime.datetime(1, 1, 1), timezones=st.timezones()),
       st.sampled_from(["auto", "seconds", "milliseconds", "microseconds"]), st.booleans())
def test_date_time_accepts_isoformat(moment: datetime.datetime, spec: str, zulu: bool) -> None:
    offset = moment.utcoffset()
    if offset is None or offset.seconds % 60 or abs(offset) >= datetime.timedelta(days=1):
        return
    text = moment.isoformat(timespec=spec)
    if zulu and offset == datetime.timedelta(0):
        text = text[:-6] + "Z"
    assert format_dfa("date-time").matches(text), text
    assert format_dfa("time").matches(text[11:]), text[11:]
    assert format_dfa("date").matches(text[:10]), text[:10]


@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**128 - 1), st.integers(0, 6))
def test_ip_addresses_from_ipaddress(v4: int, v6: int, zero_run: int) -> None:
    a4 = ipaddress.IPv4Address(v4)
    assert format_dfa("ipv4").matches(str(a4))
    groups = [(v6 >> (16 * (7 - i))) & 0xFFFF for i in range(8)]
    groups[zero_run:zero_run + 2] = [0, 0]  # make '::' compression happen
    a6 = ipaddress.IPv6Address(sum(g << (16 * (7 - i)) for i, g in enumerate(groups)))
    for text in (a6.compressed, a6.exploded, a6.compressed.upper(),
                 a6.exploded[:30] + str(a4), (str(a6.compressed).rsplit(":", 2)[0] + ":" + str(a4))):
        expected = _python_ipv6(text)
        assert format_dfa("ipv6").matches(text) == expected, text


def _python_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
        return True
    except ValueError:
        return False


def test_uuid_from_uuid_module() -> None:
    rnd = random.Random(1)
    for _ in range(200):
        u = uuid.UUID(int=rnd.getrandbits(128))
        assert format_dfa("uuid").matches(str(u)) and format_dfa("uuid").matches(str(u).upper())
        assert not format_dfa("uuid").matches(u.hex)


# --- against jsonschema's FormatChecker (strict with rfc3339-validator, fqdn, rfc3986-validator)


def checker_or_skip():
    jsonschema = pytest.importorskip("jsonschema")
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for needed in ("date-time", "hostname", "uri"):
        if needed not in checker.checkers:
            pytest.skip(f"jsonschema has no strict {needed} checker (install rfc3339-validator, "
                        "fqdn, rfc3986-validator)")
    return checker


def known_disagreement(fmt: str, s: str) -> bool:
    """Where jsonschema's checker and the RFCs part ways (see FORMAT_DOCS and the report)."""
    if fmt in ("date-time", "time") and ":60" in s:
        return True  # rfc3339-validator refuses every leap second
    if fmt == "hostname":
        return len(s) > 253 or s.endswith(".")  # total length not enforced; fqdn allows a root dot
    if fmt == "email":
        return True  # the checker only looks for '@'; checked one way below
    if fmt == "uuid":  # uuid.UUID parses with int(x, 16): '_', a sign, spaces, more '-' pass
        return re.fullmatch("[0-9a-fA-F-]*", s) is None or s.count("-") > 4
    if fmt in ("iri", "iri-reference"):  # rfc3987-syntax: BMP only, nine IPv6 forms, lower-case 'v'
        return "[" in s or any(ord(c) > 0xFFFF for c in s)
    if fmt == "relative-json-pointer":  # the checker refuses any digit after a 0 ('100'), takes any
        prefix = re.match(r"\d*", s).group()  # Unicode digit ('١')
        return re.search("[0-9]0[0-9]", prefix) is not None or not prefix.isascii()
    return False


def mutations(s: str, rnd: random.Random, count: int) -> list[str]:
    alphabet = "0123456789abcdefAFZzT:.-+/@[]%_~ \"\\v"
    out = []
    for _ in range(count):
        chars = list(s)
        for _ in range(rnd.randint(1, 2)):
            op, i = rnd.randrange(3), rnd.randrange(len(chars) + 1)
            if op == 0 and i < len(chars):
                del chars[i]
            elif op == 1:
                chars.insert(i, rnd.choice(alphabet))
            elif i < len(chars):
                chars[i] = rnd.choice(alphabet)
        out.append("".join(chars))
    return out


@pytest.mark.parametrize("fmt", sorted(FORMAT_DOCS))
def test_formats_agree_with_jsonschema(fmt: str) -> None:
    checker = checker_or_skip()
    dfa = format_dfa(fmt)
    rnd = random.Random(fmt)
    samples = VALID[fmt] + INVALID[fmt]
    for s in VALID[fmt]:
        samples += mutations(s, rnd, 150)
    disagreements = []
    for s in samples:
        ours = dfa.matches(json.dumps(s, ensure_ascii=False)[1:-1])
        try:
            theirs = checker.conforms(s, fmt)
        except ArithmeticError:  # isoduration's Decimal overflows on '9e999999999': not a duration
            theirs = False
        if fmt in ("email", "uri-template", "duration"):
            assert not ours or theirs, s  # ours is the RFC, stricter than the checker, never looser
        elif fmt == "relative-json-pointer" and re.match(r"\d+[+-]", s):
            assert not theirs, s  # an index manipulation: the draft's, which the checker refuses
        elif ours != theirs and not known_disagreement(fmt, s):
            disagreements.append((s, ours, theirs))
    assert not disagreements, disagreements[:20]


@pytest.mark.parametrize("iri, uri", [("iri", "uri"), ("iri-reference", "uri-reference")])
def test_ascii_iris_are_uris(iri: str, uri: str) -> None:
    """RFC 3987 adds non-ASCII characters to RFC 3986 and nothing else: over ASCII text an IRI
    (reference) is exactly a URI (reference), whose automaton is checked against its RFC
    and jsonschema's checker above."""
    ours, theirs = format_dfa(iri), format_dfa(uri)
    rnd = random.Random(iri)
    samples = [s for s in VALID[uri] + INVALID[uri] + VALID[iri] + INVALID[iri] if s.isascii()]
    for s in list(samples):
        samples += mutations(s, rnd, 100)
    for s in samples:
        body = json.dumps(s)[1:-1]
        assert ours.matches(body) == theirs.matches(body), s


def test_iri_characters_by_plane() -> None:
    """ucschar in paths (every plane but the last, whose characters sit past U+E1000), iprivate in
    queries only; noncharacters nowhere."""
    iri = format_dfa("iri")
    for code, path, query in [(0xA0, True, True), (0xD7FF, True, True), (0xE000, False, True),
                              (0xF8FF, False, True), (0xF900, True, True), (0xFDD0, False, False),
                              (0xFFEF, True, True), (0xFFFE, False, False), (0x10000, True, True),
                              (0x1FFFD, True, True), (0x1FFFE, False, False), (0xE0FFF, False, False),
                              (0xE1000, True, True), (0xEFFFD, True, True), (0xF0000, False, True),
                              (0x10FFFD, False, True), (0x10FFFE, False, False)]:
        char = chr(code)
        assert iri.matches(json.dumps(f"x:/{char}", ensure_ascii=False)[1:-1]) == path, hex(code)
        assert iri.matches(json.dumps(f"x:/?{char}")[1:-1]) == query, hex(code)
        assert iri.matches(json.dumps(f"x:/#{char}", ensure_ascii=False)[1:-1]) == path, hex(code)


@pytest.mark.parametrize("fmt, text", [
    ("hostname", "host\n"), ("hostname", "١٢٣"), ("date-time", "1963-06-19T08:30:06Z\n"),
    ("time", "08:30:06Z\n"), ("uri", "http://a/b\n"), ("uuid", "+9c17cbb-656f-f64a-940f-1a4568f03487"),
    ("uuid", "2eb8aa08-aa98-11ea-b4aa-73b4_1d16380"), ("email", "@"), ("duration", "P0.5D"),
    ("duration", "PT1H1S"), ("relative-json-pointer", "١/a"),
])
def test_checker_leniencies_we_refuse(fmt: str, text: str) -> None:
    """jsonschema's checkers take these (Python's ``$`` before a final newline, Unicode ``\\d``,
    ``int(x, 16)``, a bare '@'); the RFCs do not, and neither do we."""
    assert checker_or_skip().conforms(text, fmt)
    assert not format_dfa(fmt).matches(json.dumps(text)[1:-1])


# --------------------------------------------------------------------------------------------
# The shared corpus


def corpus_patterns(corpus: Path) -> dict[str, str]:
    """Every ``pattern`` / ``patternProperties`` key in maskbench and the draft 2020-12 suite,
    with where it was first seen."""
    found: dict[str, str] = {}

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    found.setdefault(value, where)
                if key == "patternProperties" and isinstance(value, dict):
                    for p in value:
                        found.setdefault(p, where)
                walk(value, where)
        elif isinstance(node, list):
            for value in node:
                walk(value, where)

    for path in sorted((corpus / "maskbench").glob("*.json")):
        walk(json.loads(path.read_text()), path.name)
    for path in sorted((corpus / "json-schema-test-suite" / "draft2020-12").glob("*.json")):
        for group in json.loads(path.read_text()):
            walk(group["schema"], path.name)
    return found


@pytest.mark.corpus
def test_corpus_patterns_compile(corpus_dir: Path) -> None:
    patterns = corpus_patterns(corpus_dir)
    assert len(patterns) > 100
    for pattern, where in patterns.items():
        dfa = compile_node(pattern_node(pattern, where))
        assert not dfa.is_empty, (pattern, where)
        if pattern.isascii() and "\\p" not in pattern:
            oracle = re.compile(python_pattern(pattern))
            rnd = random.Random(pattern)
            for _ in range(50):
                s = "".join(rnd.choice("abcxyz012345789 /\n") for _ in range(rnd.randint(0, 12)))
                assert dfa.matches(json.dumps(s)[1:-1]) == (oracle.search(s) is not None), (pattern, s)


@pytest.mark.corpus
def test_corpus_pattern_suite(corpus_dir: Path) -> None:
    groups = json.loads((corpus_dir / "json-schema-test-suite" / "draft2020-12" / "pattern.json")
                        .read_text())
    checked = 0
    for group in groups:
        dfa = compile_node(pattern_node(group["schema"]["pattern"], ""))
        for case in group["tests"]:
            if isinstance(case["data"], str):
                for body in bodies(case["data"]):
                    assert dfa.matches(body) == case["valid"], case["description"]
                checked += 1
    assert checked >= 5


@pytest.mark.parametrize("fmt", ["uri-reference", "json-pointer"])
def test_new_format_samples_agree_with_jsonschema(fmt: str) -> None:
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for s in VALID[fmt]:
        assert checker.conforms(s, fmt), (fmt, s)
    for s in INVALID[fmt]:
        assert not checker.conforms(s, fmt), (fmt, s)


@pytest.mark.parametrize("escapes", ["all", "common"])
def test_one_bmp_character_is_the_range_algebras_node(escapes: str) -> None:
    """The shortcut for one BMP code point (each character of a key, enum or constant) accepts
    exactly what the general construction accepts: every control, escaped and printable ASCII
    character, Latin-1, and the edges around the surrogates and the end of the BMP."""
    points = [*range(0x100), 0x7FF, 0x800, 0x2028, 0xD7FF, 0xE000, 0xFEFF, 0xFFFD, 0xFFFF]
    for cp in points:
        fast = compile_node(_one_bmp_char(cp, escapes))
        general = compile_node(_json_string_chars(((cp, cp),), escapes))
        assert fast.content_key == general.content_key, hex(cp)

"""JSON string bodies as byte automata: single characters, ECMA-262 ``pattern`` and ``format``.

Every node built here describes the bytes *between the quotes* of a JSON string, and every way of
writing a character is part of it: raw UTF-8, the short escapes, ``\\uXXXX`` with hex digits in
either case, and surrogate pairs for astral characters. Nothing else is: lone surrogate escapes,
raw control characters and invalid UTF-8 never match.

* :func:`json_string_char` - one character out of a code-point set.
* :func:`pattern_node` - an ECMA-262 regular expression with JSON Schema semantics: a *search*
  (``abc`` matches anywhere) unless ``^``/``$`` anchor it. The regular part of ECMA-262 (Unicode
  mode, plus the harmless Annex B leniencies: a ``{``, ``}`` or ``]`` that starts no construct is
  literal) is parsed here; anchors are exact wherever they stand (``(^a|b)c``). Lookaround, word
  boundaries, backreferences and inline flags raise :class:`UnsupportedSchemaError`.
* :func:`format_node` - documented regular forms of JSON Schema ``format`` values
  (:data:`FORMAT_DOCS`).

Each takes ``escapes`` (:data:`Escapes`): ``"all"`` (default, exact JSON), ``"common"`` (no
``\\uXXXX`` for plain printable ASCII, which no encoder writes: several times fewer states) or
``"raw"`` (the characters' UTF-8 bytes, unencoded).

Cost: building a node is linear in the pattern once counted repetitions are expanded (capped by
:data:`MAX_PATTERN_POSITIONS`); anchors cost a constant factor, except inside repeated groups
where each level copies its body up to three times (capped by :data:`MAX_EXPANDED_NODES`).
Character nodes are cached per code-point set for the life of the process, the General_Category
table (0.2 s) on first use of ``\\p{...}``; every node is immutable. Compiling a node to a DFA
(:func:`enforcer.automaton.compile_node`) is the caller's job.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Literal

import numpy as np

from .automaton import (DFA, EPSILON, NOTHING, Embedded, Graph, Node, alt, byte_chars, byte_set, codepoints,
                        compile_node, literal, normalise_ranges, plus, repeat, seq, star, thompson_pieces)
from .errors import InvalidSchemaError, SchemaTooComplexError, UnsupportedSchemaError

__all__ = ["json_string_char", "JSON_STRING_CHAR_ANY", "pattern_node", "format_node",
           "FORMAT_DOCS", "Escapes", "MAX_EXPANDED_NODES", "MAX_GROUP_DEPTH",
           "MAX_PATTERN_POSITIONS", "UNICODE_VERSION"]

MAX_CODEPOINT = 0x10FFFF
MAX_GROUP_DEPTH = 64
"""Deepest group nesting accepted (the parser and the compiler recurse on it)."""
MAX_PATTERN_POSITIONS = 50_000
"""Most character positions a pattern may expand to (``a{1000}`` is 1000) before it is refused
with :class:`SchemaTooComplexError`: beyond this the automaton would be too large to be useful."""
MAX_EXPANDED_NODES = 1_000_000
"""Most byte-level pieces the node of a pattern may expand to when compiled (anchors inside
nested loops multiply copies: ``((^a|b$)*c)*...``); past it :class:`SchemaTooComplexError`."""
UNICODE_VERSION = unicodedata.unidata_version
"""The Unicode version behind ``\\p{...}`` (General_Category): Python's ``unicodedata``."""

Ranges = tuple[tuple[int, int], ...]
Escapes = Literal["all", "common", "raw"]
"""Which ``\\uXXXX`` escapes to accept. ``"all"``: every one JSON allows. ``"common"``: none for
printable ASCII characters other than ``" \\ / < > & ' + = ` `` - the only ones that common
encoders (Python, JavaScript, Go, .NET, Gson, PHP) ever write as ``\\uXXXX``; automata of ASCII
patterns and formats shrink several times. ``"raw"``: no JSON encoding at all - each character
as its UTF-8 bytes (string values that a format writes unquoted, such as Kimi K3's)."""
_ESCAPES = ("all", "common", "raw")


# --------------------------------------------------------------------------------------------
# Code-point sets: sorted, merged, inclusive ranges


def _complement(ranges: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODEPOINT:
        out.append((nxt, MAX_CODEPOINT))
    return tuple(out)


def _minus(a: Ranges, b: Ranges) -> Ranges:
    return _intersect(a, _complement(b))


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _chars(text: str) -> Ranges:
    return normalise_ranges((ord(c), ord(c)) for c in text)


# --------------------------------------------------------------------------------------------
# One character inside a JSON string


_MUST_ESCAPE: Ranges = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
_SHORT_ESCAPES = {0x22: b'"', 0x5C: b"\\", 0x2F: b"/", 0x08: b"b", 0x0C: b"f", 0x0A: b"n",
                  0x0D: b"r", 0x09: b"t"}
_SURROGATES: Ranges = ((0xD800, 0xDFFF),)
_UNESCAPED_ASCII: Ranges = _minus(((0x20, 0x7E),), _chars("\"\\/<>&'+=`"))


@lru_cache(maxsize=None)
def _hex_digit(lo: int, hi: int) -> Node:
    """One hex digit (either case) whose value lies in ``lo..hi`` (one node per pair, at most
    136)."""
    rs = []
    if lo <= 9:
        rs.append((0x30 + lo, 0x30 + min(hi, 9)))
    if hi >= 10:
        a, b = max(lo, 10) - 10, hi - 10
        rs += [(0x41 + a, 0x41 + b), (0x61 + a, 0x61 + b)]
    return byte_set(rs)


def _hex_value(lo: int, hi: int, width: int = 4) -> Node:
    """``width`` hex digits whose value lies in ``lo..hi`` (split on the leading digit, like a
    UTF-8 range compiler)."""
    if width == 1:
        return _hex_digit(lo, hi)
    unit = 16 ** (width - 1)
    a, b = divmod(lo, unit)
    c, d = divmod(hi, unit)
    if a == c:
        return seq(_hex_digit(a, a), _hex_value(b, d, width - 1))
    parts: list[Node] = []
    if b:
        parts.append(seq(_hex_digit(a, a), _hex_value(b, unit - 1, width - 1)))
        a += 1
    tail = NOTHING
    if d != unit - 1:
        tail = seq(_hex_digit(c, c), _hex_value(0, d, width - 1))
        c -= 1
    if a <= c:
        parts.append(seq(_hex_digit(a, c), *[_hex_digit(0, 15)] * (width - 1)))
    return alt(*parts, tail)


def _surrogate_pairs(lo: int, hi: int) -> Node:
    """``XXXX\\uYYYY`` (after a leading ``\\u``) for the astral code points ``lo..hi``."""
    hl, ll = divmod(lo - 0x10000, 0x400)
    hh, lh = divmod(hi - 0x10000, 0x400)

    def pair(h_lo: int, h_hi: int, l_lo: int, l_hi: int) -> Node:
        return seq(_hex_value(0xD800 + h_lo, 0xD800 + h_hi), literal("\\u"),
                   _hex_value(0xDC00 + l_lo, 0xDC00 + l_hi))

    if hl == hh:
        return pair(hl, hl, ll, lh)
    parts: list[Node] = []
    if ll:
        parts.append(pair(hl, hl, ll, 0x3FF))
        hl += 1
    tail = NOTHING
    if lh != 0x3FF:
        tail = pair(hh, hh, 0, lh)
        hh -= 1
    if hl <= hh:
        parts.append(pair(hl, hh, 0, 0x3FF))
    return alt(*parts, tail)


@lru_cache(maxsize=4096)
def _json_string_char(ranges: Ranges, escapes: Escapes) -> Node:
    """The node of :func:`json_string_char`, cached per set and mode: one BMP code point by
    :func:`_one_bmp_char`, any other set by :func:`_json_string_chars`."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1] and escapes != "raw" \
            and (ranges[0][0] < 0xD800 or 0xE000 <= ranges[0][0] <= 0xFFFF):
        return _one_bmp_char(ranges[0][0], escapes)
    return _json_string_chars(ranges, escapes)


def _json_string_chars(ranges: Ranges, escapes: Escapes) -> Node:
    """:func:`_json_string_char` of any set, by range algebra."""
    if escapes == "raw":
        return codepoints(_minus(ranges, _SURROGATES))
    raw = codepoints(_minus(ranges, _MUST_ESCAPE))
    short = byte_chars(b"".join(esc for cp, esc in sorted(_SHORT_ESCAPES.items())
                                if _intersect(ranges, ((cp, cp),))))
    bmp = _minus(_intersect(ranges, ((0, 0xFFFF),)), _SURROGATES)
    if escapes == "common":
        bmp = _minus(bmp, _UNESCAPED_ASCII)
    astral = _intersect(ranges, ((0x10000, MAX_CODEPOINT),))
    unicode_escape = alt(*(_hex_value(lo, hi) for lo, hi in bmp),
                         *(_surrogate_pairs(lo, hi) for lo, hi in astral))
    escaped = seq(literal("\\"), alt(short, seq(literal("u"), unicode_escape)))
    return alt(raw, escaped)


def _one_bmp_char(cp: int, escapes: Escapes) -> Node:
    """:func:`_json_string_char` of one code point of the BMP other than a surrogate (keys,
    enums and constants are built a character at a time): the same language from membership
    tests instead of the range algebra, about 3x faster on a character's first sight (13
    against 37 us)."""
    raw = NOTHING if cp < 0x20 or cp == 0x22 or cp == 0x5C else literal(chr(cp))
    short = _SHORT_ESCAPES.get(cp)
    unescaped = escapes == "common" and any(lo <= cp <= hi for lo, hi in _UNESCAPED_ASCII)
    unicode_escape = NOTHING if unescaped else \
        seq(literal("u"), *(_hex_digit(digit, digit) for digit in (cp >> 12, (cp >> 8) & 15, (cp >> 4) & 15, cp & 15)))
    return alt(raw, seq(literal("\\"), alt(literal(short) if short else NOTHING, unicode_escape)))


def json_string_char(ranges: Iterable[tuple[int, int]], *, escapes: Escapes = "all") -> Node:
    """Every encoding, inside a JSON string body, of one code point out of the inclusive
    ``ranges``: raw UTF-8 where JSON allows it, the short escapes, ``\\uXXXX`` (either case) for
    BMP characters (see :data:`Escapes`) and ``\\uD8xx\\uDCxx`` surrogate pairs for astral ones.
    Surrogate code points in ``ranges`` are ignored (a JSON text cannot carry them). Cached per
    set."""
    if escapes not in _ESCAPES:
        raise ValueError(f"escapes must be one of {_ESCAPES}, not {escapes!r}")
    rs = normalise_ranges(ranges)
    for lo, hi in rs:
        if lo < 0 or hi > MAX_CODEPOINT:
            raise ValueError(f"code point range ({lo:#x}, {hi:#x}) is outside 0..0x10FFFF")
    return _json_string_char(rs, escapes)


JSON_STRING_CHAR_ANY: Node = json_string_char(((0, MAX_CODEPOINT),))
"""Any one character of a JSON string body."""


# --------------------------------------------------------------------------------------------
# Character classes of ECMA-262


_DIGIT = _chars("0123456789")
_WORD = normalise_ranges([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
_SPACE = normalise_ranges([(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
                (0xFEFF, 0xFEFF)])
_LINE_TERMINATORS = normalise_ranges([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
_DOT = _complement(_LINE_TERMINATORS)
_CLASS_ESCAPES = {"d": _DIGIT, "D": _complement(_DIGIT), "w": _WORD, "W": _complement(_WORD),
                  "s": _SPACE, "S": _complement(_SPACE)}
_CONTROL_ESCAPES = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}

_GENERAL_CATEGORIES = {
    "Lu": ("Uppercase_Letter",), "Ll": ("Lowercase_Letter",), "Lt": ("Titlecase_Letter",),
    "Lm": ("Modifier_Letter",), "Lo": ("Other_Letter",), "Mn": ("Nonspacing_Mark",),
    "Mc": ("Spacing_Mark",), "Me": ("Enclosing_Mark",), "Nd": ("Decimal_Number", "digit"),
    "Nl": ("Letter_Number",), "No": ("Other_Number",), "Pc": ("Connector_Punctuation",),
    "Pd": ("Dash_Punctuation",), "Ps": ("Open_Punctuation",), "Pe": ("Close_Punctuation",),
    "Pi": ("Initial_Punctuation",), "Pf": ("Final_Punctuation",), "Po": ("Other_Punctuation",),
    "Sm": ("Math_Symbol",), "Sc": ("Currency_Symbol",), "Sk": ("Modifier_Symbol",),
    "So": ("Other_Symbol",), "Zs": ("Space_Separator",), "Zl": ("Line_Separator",),
    "Zp": ("Paragraph_Separator",), "Cc": ("Control", "cntrl"), "Cf": ("Format",),
    "Cs": ("Surrogate",), "Co": ("Private_Use",), "Cn": ("Unassigned",),
    "L": ("Letter",), "LC": ("Cased_Letter",), "M": ("Mark", "Combining_Mark"),
    "N": ("Number",), "P": ("Punctuation", "punct"), "S": ("Symbol",), "Z": ("Separator",),
    "C": ("Other",),
}
_CATEGORY_ALIASES = {alias: short for short, names in _GENERAL_CATEGORIES.items()
                     for alias in (short, *names)}


@lru_cache(maxsize=1)
def _category_table() -> dict[str, Ranges]:
    """Code points per two-letter General_Category (one pass over all code points, ~0.3 s,
    once per process)."""
    found: dict[str, list[tuple[int, int]]] = {}
    start, current = 0, unicodedata.category("\0")
    for cp in range(1, MAX_CODEPOINT + 2):
        cat = unicodedata.category(chr(cp)) if cp <= MAX_CODEPOINT else ""
        if cat != current:
            found.setdefault(current, []).append((start, cp - 1))
            start, current = cp, cat
    return {cat: tuple(rs) for cat, rs in found.items()}


def _general_category(short: str) -> Ranges:
    table = _category_table()
    if short == "LC":
        return normalise_ranges(table["Lu"] + table["Ll"] + table["Lt"])
    if len(short) == 1:
        return normalise_ranges(r for cat, rs in table.items() if cat[0] == short for r in rs)
    return table.get(short, ())


_BINARY_PROPERTIES = {"Any": lambda: ((0, MAX_CODEPOINT),), "ASCII": lambda: ((0, 0x7F),),
                      "Assigned": lambda: _complement(_general_category("Cn"))}


# --------------------------------------------------------------------------------------------
# Regular-expression tree (code points) and its parser


@dataclass(frozen=True, slots=True, eq=False)
class _Chars:
    ranges: Ranges


@dataclass(frozen=True, slots=True, eq=False)
class _Cat:
    items: tuple["_Re", ...]


@dataclass(frozen=True, slots=True, eq=False)
class _Or:
    items: tuple["_Re", ...]


@dataclass(frozen=True, slots=True, eq=False)
class _Loop:
    item: "_Re"
    lo: int
    hi: int | None


@dataclass(frozen=True, slots=True, eq=False)
class _Anchor:
    end: bool  # False: ``^``, True: ``$``


@dataclass(frozen=True, slots=True, eq=False)
class _Look:
    """A lookahead ``(?=item)`` or, ``negative``, ``(?!item)``: exact only right after a leading
    ``^`` (:func:`_leading_lookaheads`)."""

    item: "_Re"
    negative: bool


_Re = _Chars | _Cat | _Or | _Loop | _Anchor | _Look

_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_GROUP_NAME = re.compile(r"<([^\W\d]|\$)([\w$]*)>")
_MODIFIER_GROUP = re.compile(r"\(\?[a-zA-Z]*(-[a-zA-Z]*)?[:)]")


class _Parser:
    """Recursive descent over the regular part of ECMA-262 (Unicode mode semantics: ``.`` and
    classes range over code points, ``\\u{...}`` and ``\\p{...}`` are known)."""

    def __init__(self, source: str, pointer: str) -> None:
        self.src = source
        self.pos = 0
        self.pointer = pointer
        self.depth = 0

    def invalid(self, what: str) -> InvalidSchemaError:
        return InvalidSchemaError(
            self.pointer, f"invalid regular expression {self.src!r}: {what} at offset {self.pos}")

    def unsupported(self, what: str) -> UnsupportedSchemaError:
        return UnsupportedSchemaError(
            "pattern", self.pointer, f"{what} in {self.src!r} (offset {self.pos}) is not regular "
            "or not supported exactly")

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.src[i] if i < len(self.src) else ""

    def parse(self) -> _Re:
        node = self.disjunction()
        if self.pos < len(self.src):
            raise self.invalid("unmatched ')'")
        return node

    def disjunction(self) -> _Re:
        options = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.alternative())
        return options[0] if len(options) == 1 else _Or(tuple(options))

    def alternative(self) -> _Re:
        items: list[_Re] = []
        while self.pos < len(self.src) and self.peek() not in "|)":
            items.append(self.term())
        return items[0] if len(items) == 1 else _Cat(tuple(items))

    def term(self) -> _Re:
        c = self.peek()
        if c in "^$":
            self.pos += 1
            if self.quantifier(consume=False):
                raise self.invalid("nothing to repeat")
            return _Anchor(c == "$")
        if c == "\\" and self.peek(1) in ("b", "B"):
            raise self.unsupported("a word boundary assertion (\\b, \\B)")
        if self.src.startswith(("(?<=", "(?<!"), self.pos):
            raise self.unsupported("a lookbehind assertion")
        if self.src.startswith(("(?=", "(?!"), self.pos):
            negative = self.peek(2) == "!"
            self.pos += 3
            look = _Look(self.group_body(), negative)
            if self.quantifier(consume=False):
                raise self.unsupported("a quantified lookahead")
            return look
        atom = self.atom()
        bounds = self.quantifier(consume=True)
        if bounds is None:
            return atom
        if self.peek() == "?":  # lazy: the same language
            self.pos += 1
        if self.quantifier(consume=False):
            raise self.invalid("nothing to repeat")
        return _Loop(atom, *bounds)

    def quantifier(self, consume: bool) -> tuple[int, int | None] | None:
        c = self.peek()
        bounds: tuple[int, int | None] | None = None
        end = self.pos + 1
        if c == "*":
            bounds = (0, None)
        elif c == "+":
            bounds = (1, None)
        elif c == "?":
            bounds = (0, 1)
        elif c == "{":
            m = _QUANTIFIER.match(self.src, self.pos)
            if m is None:
                return None  # Annex B: a literal brace
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            if hi is not None and hi < lo:
                raise self.invalid("numbers out of order in {} quantifier")
            bounds, end = (lo, hi), m.end()
        if bounds is not None and consume:
            self.pos = end
        return bounds

    def atom(self) -> _Re:
        c = self.peek()
        if c == "(":
            return self.group()
        if c == ".":
            self.pos += 1
            return _Chars(_DOT)
        if c == "[":
            return _Chars(self.char_class())
        if c == "\\":
            self.pos += 1
            d = self.peek()
            if d in tuple("123456789") or d == "k":
                raise self.unsupported("a backreference")
            return _Chars(self.escape(in_class=False)[0])
        if c in "*+?" or (c == "{" and self.quantifier(consume=False)):
            raise self.invalid("nothing to repeat")
        self.pos += 1
        return _Chars(((ord(c), ord(c)),))

    def group(self) -> _Re:
        self.pos += 1
        if self.src.startswith("?:", self.pos):
            self.pos += 2
        elif self.src.startswith("?<", self.pos):
            m = _GROUP_NAME.match(self.src, self.pos + 1)
            if m is None:
                raise self.invalid("invalid group name")
            self.pos = m.end()
        elif self.peek() == "?":
            if _MODIFIER_GROUP.match(self.src, self.pos - 1):
                raise self.unsupported("an inline flag group")
            raise self.invalid("invalid group")
        return self.group_body()

    def group_body(self) -> _Re:
        """A group's disjunction and its ``)``, with what opened it read."""
        self.depth += 1
        if self.depth > MAX_GROUP_DEPTH:
            raise SchemaTooComplexError(
                f"pattern {self.src!r} at {self.pointer or '(root)'} nests groups deeper than "
                f"{MAX_GROUP_DEPTH}")
        inner = self.disjunction()
        if self.peek() != ")":
            raise self.invalid("missing ')'")
        self.pos += 1
        self.depth -= 1
        return inner

    def char_class(self) -> Ranges:
        self.pos += 1
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        parts: list[tuple[int, int]] = []
        while True:
            c = self.peek()
            if c == "":
                raise self.invalid("missing ']'")
            if c == "]":
                self.pos += 1
                break
            first, single = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                _, last = self.class_atom()
                if single is None or last is None:
                    raise self.invalid("a character class escape cannot bound a range")
                if single > last:
                    raise self.invalid("range out of order in character class")
                parts.append((single, last))
            else:
                parts.extend(first)
        ranges = normalise_ranges(parts)
        return _complement(ranges) if negate else ranges

    def class_atom(self) -> tuple[Ranges, int | None]:
        c = self.peek()
        if c == "\\":
            self.pos += 1
            return self.escape(in_class=True)
        self.pos += 1
        return ((ord(c), ord(c)),), ord(c)

    def escape(self, in_class: bool) -> tuple[Ranges, int | None]:
        """After a backslash: the set it stands for and, if it is one character, that one."""
        c = self.peek()
        if c == "":
            raise self.invalid("\\ at end of pattern")
        self.pos += 1
        if c in _CLASS_ESCAPES:
            return _CLASS_ESCAPES[c], None
        if c in "pP":
            ranges = self.property()
            return (_complement(ranges) if c == "P" else ranges), None
        cp = self.char_escape(c, in_class)
        return ((cp, cp),), cp

    def char_escape(self, c: str, in_class: bool) -> int:
        if c in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[c]
        if in_class and c == "b":
            return 0x08
        if c == "c":
            letter = self.peek()
            if not ("a" <= letter.lower() <= "z"):
                raise self.invalid("\\c must be followed by an ASCII letter")
            self.pos += 1
            return ord(letter) % 32
        if c == "0":
            if self.peek().isdigit():
                raise self.invalid("legacy octal escape")
            return 0
        if c == "x":
            return self.hex_digits(2)
        if c == "u":
            return self.unicode_escape()
        if c.isascii() and c.isalnum():
            raise self.invalid(f"unknown escape \\{c}")
        return ord(c)  # identity escape of a syntax or other non-alphanumeric character

    def hex_digits(self, count: int) -> int:
        text = self.src[self.pos:self.pos + count]
        if len(text) != count or not all(ch in "0123456789abcdefABCDEF" for ch in text):
            raise self.invalid(f"expected {count} hex digits")
        self.pos += count
        return int(text, 16)

    def unicode_escape(self) -> int:
        if self.peek() == "{":
            end = self.src.find("}", self.pos)
            digits = self.src[self.pos + 1:end] if end > 0 else ""
            if not digits or not all(ch in "0123456789abcdefABCDEF" for ch in digits) or \
                    int(digits, 16) > MAX_CODEPOINT:
                raise self.invalid("invalid \\u{...} escape")
            self.pos = end + 1
            return int(digits, 16)
        cp = self.hex_digits(4)
        if 0xD800 <= cp <= 0xDBFF and self.src.startswith("\\u", self.pos):
            save = self.pos
            self.pos += 2
            try:
                low = self.hex_digits(4)
            except InvalidSchemaError:
                low = -1
            if 0xDC00 <= low <= 0xDFFF:
                return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            self.pos = save
        return cp

    def property(self) -> Ranges:
        if self.peek() != "{" or "}" not in self.src[self.pos:]:
            raise self.invalid("\\p and \\P must be followed by {...}")
        end = self.src.index("}", self.pos)
        body = self.src[self.pos + 1:end]
        self.pos = end + 1
        name, _, value = body.partition("=")
        if value:
            if name not in ("General_Category", "gc"):
                raise self.unsupported(f"the Unicode property \\p{{{body}}}")
            if value not in _CATEGORY_ALIASES:
                raise self.invalid(f"unknown General_Category value {value!r}")
            return _general_category(_CATEGORY_ALIASES[value])
        if name in _CATEGORY_ALIASES:
            return _general_category(_CATEGORY_ALIASES[name])
        if name in _BINARY_PROPERTIES:
            return _BINARY_PROPERTIES[name]()
        raise self.unsupported(
            f"the Unicode property \\p{{{body}}} (supported: General_Category values, Any, ASCII, "
            "Assigned)")


def _positions(node: _Re) -> int:
    """How many character positions ``node`` expands to (counted repetitions multiplied out)."""
    if isinstance(node, _Chars):
        return 1
    if isinstance(node, _Anchor):
        return 0
    if isinstance(node, (_Cat, _Or)):
        return sum(_positions(i) for i in node.items)
    if isinstance(node, _Look):
        return _positions(node.item)
    return _positions(node.item) * max(node.lo + 1 if node.hi is None else node.hi, 1)


# --------------------------------------------------------------------------------------------
# Tree -> byte node, with exact anchors
#
# ``ne(n, s, e)``: the non-empty strings ``n`` matches when the position before them is the
# start of the input (``s``) or not, and the position after them the end of the input (``e``)
# or not. ``em(n, s, e)``: whether ``n`` matches the empty string at a position with those
# flags. ``s`` only matters to nodes holding a ``^`` and ``e`` to nodes holding a ``$``, so the
# flags are normalised away elsewhere and a node without anchors is lifted once, as it stands
# (``plain``). A concatenation becomes a :class:`Graph` over its parts that tracks whether
# anything was consumed yet and guesses whether the rest will be empty up to the end, so
# anchors cost a constant factor and no nesting.


class _Lift:
    """Lifts one tree; memoised per node (by identity, while the tree is alive)."""

    def __init__(self, escapes: Escapes) -> None:
        self.escapes = escapes
        self._anchors: dict[int, tuple[bool, bool]] = {}
        self._em: dict[tuple[int, bool, bool], bool] = {}
        self._ne: dict[tuple[int, bool, bool], Node] = {}
        self._plain: dict[int, Node] = {}

    def anchors(self, n: _Re) -> tuple[bool, bool]:
        """Whether ``n`` holds a ``^`` and whether it holds a ``$``."""
        hit = self._anchors.get(id(n))
        if hit is None:
            if isinstance(n, _Anchor):
                hit = (not n.end, n.end)
            elif isinstance(n, _Chars):
                hit = (False, False)
            elif isinstance(n, _Loop):
                hit = self.anchors(n.item)
            else:
                inner = [self.anchors(i) for i in n.items]
                hit = (any(a for a, _ in inner), any(b for _, b in inner))
            self._anchors[id(n)] = hit
        return hit

    def flags(self, n: _Re, s: bool, e: bool) -> tuple[bool, bool]:
        has_start, has_end = self.anchors(n)
        return s and has_start, e and has_end

    def em(self, n: _Re, s: bool, e: bool) -> bool:
        s, e = self.flags(n, s, e)
        key = (id(n), s, e)
        hit = self._em.get(key)
        if hit is None:
            if isinstance(n, _Chars):
                hit = False
            elif isinstance(n, _Anchor):
                hit = e if n.end else s
            elif isinstance(n, _Cat):
                hit = all(self.em(i, s, e) for i in n.items)
            elif isinstance(n, _Or):
                hit = any(self.em(i, s, e) for i in n.items)
            else:
                hit = n.lo == 0 or self.em(n.item, s, e)
            self._em[key] = hit
        return hit

    def plain(self, n: _Re) -> Node:
        """Every string an anchor-free ``n`` matches, the empty one included."""
        hit = self._plain.get(id(n))
        if hit is None:
            if isinstance(n, _Chars):
                hit = json_string_char(n.ranges, escapes=self.escapes)
            elif isinstance(n, _Cat):
                hit = seq(*(self.plain(i) for i in n.items))
            elif isinstance(n, _Or):
                hit = alt(*(self.plain(i) for i in n.items))
            else:
                assert isinstance(n, _Loop)
                hit = repeat(self.plain(n.item), n.lo, n.hi)
            self._plain[id(n)] = hit
        return hit

    def ne(self, n: _Re, s: bool, e: bool) -> Node:
        s, e = self.flags(n, s, e)
        key = (id(n), s, e)
        hit = self._ne.get(key)
        if hit is None:
            if self.anchors(n) == (False, False) and not self.em(n, False, False):
                hit = self.plain(n)
            elif isinstance(n, _Anchor):
                hit = NOTHING
            elif isinstance(n, _Or):
                hit = alt(*(self.ne(i, s, e) for i in n.items))
            elif isinstance(n, _Cat):
                hit = self._cat(n, s, e)
            else:
                assert isinstance(n, _Loop)
                hit = self._loop(n, s, e)
            self._ne[key] = hit
        return hit

    def _cat(self, n: _Cat, s: bool, e: bool) -> Node:
        """Graph states (i, consumed, rest_empty_to_end) before part i; a part is crossed empty
        (same position) or non-empty through a shared middle edge per flag variant."""
        ends = (False, True) if e else (False,)
        index: dict[object, int] = {"start": 0}
        edges: list[tuple[int, Node, int]] = []

        def state(key: object) -> int:
            return index.setdefault(key, len(index))

        for b in ends:
            edges.append((0, EPSILON, state((0, False, b))))
        for i, part in enumerate(n.items):
            has_start, has_end = self.anchors(part)
            for consumed in (False, True):
                at_start = s and not consumed
                for b in ends:
                    src = index.get((i, consumed, b))
                    if src is None:
                        continue
                    if self.em(part, at_start, b):
                        edges.append((src, EPSILON, state((i + 1, consumed, b))))
                    if b:
                        continue  # the rest must be empty: nothing may be consumed here
                    for b2 in ends:
                        body = self.ne(part, at_start, b2)
                        if body is NOTHING:
                            continue
                        mid = (i, at_start and has_start, b2 and has_end)
                        if ("in", mid) not in index:
                            edges.append((state(("in", mid)), body, state(("out", mid))))
                        edges.append((src, EPSILON, index[("in", mid)]))
                        edges.append((index[("out", mid)], EPSILON, state((i + 1, True, b2))))
        final = index.get((len(n.items), True, e))
        if final is None:
            return NOTHING
        return Graph.trimmed_of(len(index), 0, frozenset({final}), tuple(edges))

    def _loop(self, n: _Loop, s: bool, e: bool) -> Node:
        item, lo, hi = n.item, n.lo, n.hi
        if hi == 0:
            return NOTHING
        if self.anchors(item) == (False, False):  # nullable loop: pad with empty iterations
            return repeat(self.ne(item, False, False), 1, hi)
        pad_edges = self.em(item, s, False) or self.em(item, False, e)
        pad_inner = self.em(item, False, False)
        one = self.ne(item, s, e) if lo <= 1 or pad_edges else NOTHING
        many = NOTHING
        if hi is None or hi >= 2:
            least = 2 if pad_edges or pad_inner else max(lo, 2)
            middle = repeat(self.ne(item, False, False), least - 2, None if hi is None else hi - 2)
            many = seq(self.ne(item, s, False), middle, self.ne(item, False, e))
        return alt(one, many)


def _parse(pattern: str, pointer: str) -> _Re:
    if not isinstance(pattern, str):
        raise InvalidSchemaError(pointer, f"pattern must be a string, not {type(pattern).__name__}")
    tree = _Parser(pattern, pointer).parse()
    size = _positions(tree)
    if size > MAX_PATTERN_POSITIONS:
        raise SchemaTooComplexError(
            f"pattern {pattern!r} at {pointer or '(root)'} expands to {size} character positions "
            f"(limit {MAX_PATTERN_POSITIONS})")
    return tree


def _search(tree: _Re, escapes: Escapes) -> Node:
    """Bodies of the strings in which ``tree`` matches somewhere (ECMA ``RegExp.test``)."""
    lift = _Lift(escapes)
    any_char = json_string_char(((0, MAX_CODEPOINT),), escapes=escapes)
    anything, some = star(any_char), plus(any_char)
    has_start, has_end = lift.anchors(tree)
    whole = _anchored_middle(tree, lift)
    if whole is not None:
        return lift.plain(whole)
    if not has_start and not has_end:
        if lift.em(tree, False, False):
            return anything
        return seq(anything, lift.plain(tree), anything)
    if not has_end:
        matched = seq(alt(lift.ne(tree, True, False), seq(some, lift.ne(tree, False, False))),
                      anything)
    elif not has_start:
        matched = seq(anything, alt(lift.ne(tree, False, True), seq(lift.ne(tree, False, False),
                                                                     some)))
    else:
        matched = alt(lift.ne(tree, True, True), seq(lift.ne(tree, True, False), some),
                      seq(some, lift.ne(tree, False, True)), seq(some, lift.ne(tree, False, False), some))
    empties = [EPSILON if lift.em(tree, True, True) else NOTHING]
    if lift.em(tree, True, False) or lift.em(tree, False, True):
        empties.append(some)
    elif lift.em(tree, False, False):
        empties.append(repeat(any_char, 2, None))
    return alt(matched, *empties)


def _anchored_middle(tree: _Re, lift: "_Lift") -> _Re | None:
    """``middle`` when ``tree`` is ``^middle$`` with no anchor inside ``middle`` (the usual form
    of a pattern), else None. Such a pattern matches exactly the strings ``middle`` matches
    whole: lifted as it stands (~10 us for ``^[A-Z]{2}-[0-9]{4}$``) instead of through the
    anchor graphs of the general search (~100 us, 25% more NFA states, same language)."""
    if not isinstance(tree, _Cat) or len(tree.items) < 2:
        return None
    first, last = tree.items[0], tree.items[-1]
    if not (isinstance(first, _Anchor) and not first.end and isinstance(last, _Anchor) and last.end):
        return None
    if any(lift.anchors(item) != (False, False) for item in tree.items[1:-1]):
        return None
    return _Cat(tree.items[1:-1])


def _full_match(tree: _Re, escapes: Escapes) -> Node:
    """Bodies of the strings ``tree`` matches from start to end (no search)."""
    lift = _Lift(escapes)
    return alt(lift.ne(tree, True, True), EPSILON if lift.em(tree, True, True) else NOTHING)


def pattern_node(pattern: str, pointer: str, *, escapes: Escapes = "all") -> Node:
    """The JSON string bodies of every string that the ECMA-262 regular expression ``pattern``
    matches somewhere (JSON Schema ``pattern`` semantics). Raises
    :class:`UnsupportedSchemaError` (keyword ``"pattern"``) for constructs that are not regular
    or not supported exactly, :class:`InvalidSchemaError` for an invalid expression and
    :class:`SchemaTooComplexError` past :data:`MAX_PATTERN_POSITIONS`. ``pointer`` locates the
    schema object holding the pattern, for error messages; ``escapes`` is :data:`Escapes`."""
    if escapes not in _ESCAPES:
        raise ValueError(f"escapes must be one of {_ESCAPES}, not {escapes!r}")
    tree = _parse(pattern, pointer)
    # a pattern matches somewhere when one of its alternatives does: each is searched alone
    # when one of them opens with lookaheads
    options = tree.items if isinstance(tree, _Or) and any(map(_has_look, tree.items)) else (tree,)
    nodes = []
    for option in options:
        body, looks = _leading_lookaheads(option, pattern, pointer)
        node = _search(body, escapes)
        if looks:
            try:
                node = _with_lookaheads(node, looks, escapes)
            except SchemaTooComplexError as exc:
                raise SchemaTooComplexError(f"pattern {pattern!r} at {pointer or '(root)'} with its lookaheads: "
                                            f"{exc.reason}", pointer, exc.budget, "pattern") from None
        nodes.append(node)
    node = alt(*nodes)
    size = thompson_pieces(node, MAX_EXPANDED_NODES + 1)
    if size > MAX_EXPANDED_NODES:
        raise SchemaTooComplexError(
            f"pattern {pattern!r} at {pointer or '(root)'} expands to more than {MAX_EXPANDED_NODES:,} automaton "
            f"pieces")
    return node


def _leading_lookaheads(tree: _Re, pattern: str, pointer: str) -> tuple[_Re, list[_Look]]:
    """``tree`` (the pattern or one of its top alternatives) without the lookaheads right after
    its leading ``^`` (``^(?!x)(?=y)rest``: they test the input from its start, so each is the
    set of strings ``^x`` matches), and those lookaheads; a lookahead anywhere else is refused
    (it would test each position a match may start at, or the middle of one)."""
    looks: list[_Look] = []
    rest = tree
    if isinstance(tree, _Cat) and tree.items and isinstance(tree.items[0], _Anchor) and not tree.items[0].end:
        k = 1
        while k < len(tree.items) and isinstance(tree.items[k], _Look):
            looks.append(tree.items[k])
            k += 1
        if looks:
            rest = _Cat((tree.items[0],) + tree.items[k:]) if k < len(tree.items) else tree.items[0]
    if _has_look(rest) or any(_has_look(look.item) for look in looks):
        raise UnsupportedSchemaError("pattern", pointer, f"a lookahead in {pattern!r} elsewhere than right after a "
                                     "leading '^' is not supported exactly")
    return rest, looks


def _has_look(node: _Re) -> bool:
    if isinstance(node, _Look):
        return True
    if isinstance(node, (_Cat, _Or)):
        return any(_has_look(i) for i in node.items)
    return isinstance(node, _Loop) and _has_look(node.item)


def _with_lookaheads(node: Node, looks: list[_Look], escapes: Escapes) -> Node:
    """``node`` (the strings the pattern's rest matches, from the start) within each positive
    lookahead's strings and outside each negative one's: automata built whole (within
    :data:`~enforcer.automaton.DEFAULT_MAX_STATES`), as one embedded automaton."""
    dfa = compile_node(node)
    for look in looks:
        tested = compile_node(_search(_Cat((_Anchor(False), look.item)), escapes))
        dfa = dfa.difference(tested) if look.negative else dfa.intersect(tested)
    return Embedded(dfa)


# --------------------------------------------------------------------------------------------
# Formats: ECMA-262 sources compiled with the machinery above (so every JSON encoding of a valid
# value is accepted)


def _ipv6_source(h16: str, ipv4: str) -> str:
    """RFC 4291 section 2.2: eight groups, or fewer around one ``::``; the last two groups may
    be a dotted IPv4 address."""
    forms = [f"(?:{h16}:){{7}}{h16}", f"(?:{h16}:){{6}}{ipv4}"]
    for left in range(8):
        head = "" if left == 0 else f"(?:{h16}:){{{left - 1}}}{h16}"
        free = 7 - left  # groups the right side may still hold: '::' stands for at least one
        tails = [""]
        if free >= 1:
            tails.append(f"(?:{h16}:){{0,{free - 1}}}{h16}")
        if free >= 2:
            tails.append(f"(?:{h16}:){{0,{free - 2}}}{ipv4}")
        forms.append(f"{head}::(?:{'|'.join(tails)})")
    return "|".join(f"(?:{f})" for f in forms)


_HEX = "[0-9A-Fa-f]"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_IPV6 = _ipv6_source(f"{_HEX}{{1,4}}", _IPV4)
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"
_YEAR = r"(?:[1-9]\d{3}|0[1-9]\d\d|00[1-9]\d|000[1-9])"
_LEAP_YEAR = r"(?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (rf"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-"
         rf"(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))|{_LEAP_YEAR}-02-29)")
_FRAC = r"(?:\.\d+)?"
_TIME = (rf"(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d{_FRAC}(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)|"
         rf"23:59:60{_FRAC}(?:[Zz]|[+-]00:00))")
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_EMAIL = (rf"(?:{_ATEXT}+(?:\.{_ATEXT}+)*|\"(?:[ !#-\[\]-~]|\\[ -~])*\")"
          rf"@(?:{_HOSTNAME}|\[(?:{_IPV4}|[Ii][Pp][Vv]6:(?:{_IPV6}))\])")
_PCT = f"%{_HEX}{_HEX}"
_SUB_DELIMS = "!$&'()*+,;="
_UCSCHAR = (r"\u00A0-\uD7FF\uF900-\uFDCF\uFDF0-\uFFEF"
            + "".join(rf"\u{{{plane:X}0000}}-\u{{{plane:X}FFFD}}" for plane in range(1, 14))
            + r"\u{E1000}-\u{EFFFD}")
_IPRIVATE = r"\uE000-\uF8FF\u{F0000}-\u{FFFFD}\u{100000}-\u{10FFFD}"


def _uri_sources(unreserved: str, private: str = "") -> tuple[str, str]:
    """(absolute form, relative reference) of RFC 3986 with ``unreserved`` characters (a class
    body) and ``private`` ones allowed in the query only: ASCII for URIs, with ucschar and
    iprivate for RFC 3987's IRIs (which add nothing else)."""
    pchar = rf"(?:[{unreserved}{_SUB_DELIMS}:@]|{_PCT})"
    authority = (rf"(?:(?:[{unreserved}{_SUB_DELIMS}:]|{_PCT})*@)?"
                 rf"(?:\[(?:{_IPV6}|[vV]{_HEX}+\.[A-Za-z0-9\-._~{_SUB_DELIMS}:]+)\]|"
                 rf"(?:[{unreserved}{_SUB_DELIMS}]|{_PCT})*)(?::\d*)?")
    query_fragment = rf"(?:\?(?:{pchar}|[{private}/?])*)?(?:#(?:{pchar}|[/?])*)?"
    rooted = rf"//{authority}(?:/{pchar}*)*|/(?:{pchar}+(?:/{pchar}*)*)?"
    absolute = rf"[A-Za-z][A-Za-z0-9+.\-]*:(?:{rooted}|{pchar}+(?:/{pchar}*)*|){query_fragment}"
    relative = rf"(?:{rooted}|(?:[{unreserved}{_SUB_DELIMS}@]|{_PCT})+(?:/{pchar}*)*|){query_fragment}"
    return absolute, relative


_URI, _RELATIVE_REF = _uri_sources(r"A-Za-z0-9\-._~")
_IRI, _IRELATIVE_REF = _uri_sources(rf"A-Za-z0-9\-._~{_UCSCHAR}", _IPRIVATE)
_JSON_POINTER = r"(?:/(?:[^~/]|~[01])*)*"

_NON_NEGATIVE = "(?:0|[1-9][0-9]*)"
_RELATIVE_JSON_POINTER = rf"{_NON_NEGATIVE}(?:[+-][1-9][0-9]*)?(?:#|{_JSON_POINTER})"

_DURATION_TIME = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DURATION = (rf"P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)(?:{_DURATION_TIME})?"
             rf"|{_DURATION_TIME}|[0-9]+W)")

_VARCHAR = "[A-Za-z0-9_]"
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9]\d{{0,3}}|\*)?"
_URI_TEMPLATE = (rf"(?:[!#$&(-;=?-\[\]_a-z~\u00A0-\uD7FF\uF900-\uFDCF\uFDF0-\uFFEF]|{_PCT}"
                 rf"|\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\}})*")

_FORMAT_SOURCES = {
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "date": _DATE,
    "time": _TIME,
    "uuid": f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}",
    "email": _EMAIL,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uri": _URI,
    "hostname": _HOSTNAME,
    "uri-template": _URI_TEMPLATE,
    "uri-reference": rf"(?:{_URI}|{_RELATIVE_REF})",
    "json-pointer": _JSON_POINTER,
    "iri": _IRI,
    "iri-reference": rf"(?:{_IRI}|{_IRELATIVE_REF})",
    "relative-json-pointer": _RELATIVE_JSON_POINTER,
    "duration": _DURATION,
}

UNENFORCED_FORMATS: dict[str, str] = {
    "regex": "ECMA-262 regular expressions nest (parentheses, classes): not a regular language",
    "idn-email": "RFC 6531 addresses need IDNA 2008 validation of the domain (not regular over text)",
    "idn-hostname": "IDNA 2008 hostnames need contextual rules (not regular over text)",
}
"""Standard formats that are not enforced: with formats asserted they are refused (never a
looser constraint), whatever ``unknown_formats`` says."""

FORMAT_DOCS: dict[str, str] = {
    "date-time": "RFC 3339 date-time: exact days per month and leap years (year 0000 refused, as "
                 "Python's datetime does), 'T'/'Z' either case, fractional seconds, offset "
                 "±hh:mm; second 60 only as 23:59:60 in UTC (Z, +00:00, -00:00)",
    "date": "RFC 3339 full-date YYYY-MM-DD: exact days per month, Feb 29 only in Gregorian leap "
            "years, year 0001-9999",
    "time": "RFC 3339 full-time hh:mm:ss[.frac](Z|±hh:mm) (offset required); leap second as in "
            "date-time",
    "uuid": "RFC 4122 8-4-4-4-12 hex digits, either case, any version",
    "email": "RFC 5321 Mailbox: dot-atom or quoted local part @ hostname labels or [IPv4] / "
             "[IPv6:...] literal; length limits (64/254) not enforced",
    "ipv4": "dotted quad, octets 0-255 without leading zeros",
    "ipv6": "RFC 4291 text forms: 1-4 hex digits per group, one '::', trailing dotted IPv4; "
            "no zone id",
    "uri": "RFC 3986 URI: scheme ':' hier-part ['?' query] ['#' fragment], ASCII only, "
           "percent-encoding checked, IPv6/IPvFuture host literals",
    "hostname": "RFC 1123 labels of 1-63 letters, digits and inner hyphens, dot-separated, no "
                "trailing dot; the 253-character total is not enforced",
    "uri-reference": "RFC 3986 URI-reference: a URI (as 'uri') or a relative reference "
                     "(network-path, absolute-path, no-colon first segment, or empty) with query and fragment",
    "json-pointer": "RFC 6901: empty, or '/'-prefixed reference tokens where '~' is followed by 0 or 1",
    "iri": "RFC 3987 IRI: 'uri' with ucschar (every plane) where RFC 3986 allows unreserved "
           "characters and iprivate in the query; jsonschema's rfc3987-syntax checker refuses "
           "characters past U+FFFF, some IPv6 literal forms ('::1') and 'V' in IPvFuture",
    "iri-reference": "RFC 3987 IRI-reference: an IRI (as 'iri') or an irelative-ref (as in "
                     "'uri-reference', with ucschar)",
    "relative-json-pointer": "draft-bhutton-relative-json-pointer-00: a non-negative integer "
                             "without leading zeros, an optional index manipulation (+1, -2: "
                             "jsonschema's checker refuses it), then '#' or a JSON pointer",
    "duration": "RFC 3339 Appendix A ABNF (what draft 2020-12 names): P then date parts "
                "(Y[M[D]], M[D] or D) with optional T time parts (H[M[S]], M[S] or S), T time "
                "parts alone, or weeks (W) alone; ASCII digits, no fractions (ISO 8601 allows "
                "them, the ABNF does not; jsonschema's isoduration checker takes them)",
    "uri-template": "RFC 6570 (level 4): literals (BMP ucschar, no iprivate) and {op var,var:3,var*} "
                    "expressions; no reserved operators (= , ! @ |) and no percent-encoded variable "
                    "names (the uri-template checker refuses both)",
}


FORMAT_TABLES = Path(__file__).parent / "data" / "format_tables.bin"
"""Every format's minimal DFA per escape mode, built ahead and shipped with the package (~380 KB).
Regenerate after editing a format source or how automata are built (the test suite fails until
then): ``python -c "from enforcer.regex import write_format_tables; write_format_tables()"``.

Layout: a line of JSON mapping each entry's key to ``[offset, length, states, columns]``, then
the entries, each a zlib stream of: the column each byte reads (256 uint8), the accepting
states (``numpy.packbits``) and the distinct columns of the transition table (little-endian
int16, ``states`` rows of ``columns``). One file read and one small decompression per format:
an ``.npz`` costs ~1 ms more per process (zip directory, codec import, one header per array)."""
_FORMAT_TABLE_LAYOUT = 1
"""Version of the layout of :data:`FORMAT_TABLES`; part of every entry's key."""


def _format_table_key(fmt: str, escapes: Escapes) -> str:
    """The key of ``fmt``'s entry in the tables: a digest of what its automaton is built from
    (the format's source, the escape mode, the layout), so an edited source finds no entry."""
    text = f"{_FORMAT_TABLE_LAYOUT}\n{escapes}\n{_FORMAT_SOURCES[fmt]}"
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def build_format_dfa(fmt: str, escapes: Escapes) -> DFA:
    """``fmt``'s minimal DFA built from its source (1-40 ms: the parse, the byte-level node and
    the determinisation)."""
    return compile_node(_full_match(_Parser(_FORMAT_SOURCES[fmt], "").parse(), escapes))


def write_format_tables(path: Path = FORMAT_TABLES) -> None:
    """Build every format's DFA in every escape mode and write them to ``path`` in the layout
    of :data:`FORMAT_TABLES` (about 1 s)."""
    index: dict[str, list[int]] = {}
    entries: list[bytes] = []
    offset = 0
    for escapes in _ESCAPES:
        for fmt in _FORMAT_SOURCES:
            dfa = build_format_dfa(fmt, escapes)
            if dfa.num_states > np.iinfo(np.int16).max:
                raise ValueError(f"format {fmt!r} ({escapes}) has {dfa.num_states} states: more than int16 holds")
            columns, classes = dfa.table, dfa.classes
            entry = zlib.compress(classes.tobytes() + np.packbits(dfa.accepting).tobytes()
                                  + columns.astype("<i2").tobytes(), 9)
            index[_format_table_key(fmt, escapes)] = [offset, len(entry), *columns.shape]
            entries.append(entry)
            offset += len(entry)
    path.write_bytes(json.dumps(index).encode("ascii") + b"\n" + b"".join(entries))


@lru_cache(maxsize=None)
def _table_file(path: Path) -> tuple[dict[str, list[int]], bytes] | None:
    """The index and the entries of the tables at ``path``, read once per process and kept
    (~380 KB; None: missing or unreadable)."""
    try:
        head, _, body = path.read_bytes().partition(b"\n")
        index = json.loads(head)
    except (OSError, ValueError, RecursionError):
        return None
    return (index, body) if isinstance(index, dict) else None


def shipped_format_dfa(tables: Path, fmt: str, escapes: Escapes) -> DFA | None:
    """``fmt``'s DFA read from the tables at ``tables`` (0.01-2 ms, after 0.2 ms to read the
    file once), or None when they hold no entry for its current source or the entry is
    unreadable or inconsistent."""
    file = _table_file(tables)
    if file is None:
        return None
    index, body = file
    entry = index.get(_format_table_key(fmt, escapes))
    if not (isinstance(entry, list) and len(entry) == 4 and all(type(v) is int and v >= 0 for v in entry)):
        return None
    offset, length, states, width = entry
    accepting_bytes = (states + 7) // 8
    try:
        data = zlib.decompress(body[offset:offset + length])
    except zlib.error:
        return None
    if not states or not width or len(data) != 256 + accepting_bytes + 2 * states * width:
        return None
    classes = np.frombuffer(data, np.uint8, 256)
    accepting = np.unpackbits(np.frombuffer(data, np.uint8, accepting_bytes, 256), count=states).astype(bool)
    columns = np.frombuffer(data, "<i2", states * width, 256 + accepting_bytes).reshape(states, width)
    if int(classes.max()) >= width or int(columns.min()) < -1 or int(columns.max()) >= states:
        return None
    return DFA(columns.astype(np.int32), accepting, classes)


_FORMAT_TABLE_IDS: set[int] = set()
"""``id()`` of every format DFA :func:`_format` made (each lives as long as the process)."""


@lru_cache(maxsize=None)
def _format(fmt: str, escapes: Escapes) -> Node:
    """The format's minimal DFA as an embedded block, once per process: read from
    :data:`FORMAT_TABLES` (0.01-2 ms), or built (1-40 ms) when they hold no current entry for
    it, and spread to one column per byte for the mask walks (0.1-4 ms: 0.1-8 MB, as the first
    walk of its states would). Rows of a value's automaton inside it then read the block's
    table instead of determinising the format's bounded repeats (hostname labels: a subset per
    position) in every schema, and its states' masks share the per-vocabulary work of embedded
    automata."""
    dfa = shipped_format_dfa(FORMAT_TABLES, fmt, escapes)
    if dfa is None:
        dfa = build_format_dfa(fmt, escapes)
    dfa.transitions  # spread with the load: a compile pays it, not the first mask inside the format
    _FORMAT_TABLE_IDS.add(id(dfa))
    return Embedded(dfa)


def is_format_table(dfa: DFA) -> bool:
    """Whether ``dfa`` is a ``format``'s automaton: a constant of the library, as long-lived as
    the process, whatever schema embeds it."""
    return id(dfa) in _FORMAT_TABLE_IDS


def format_node(fmt: str, pointer: str, *, escapes: Escapes = "all") -> Node | None:
    """The JSON string bodies of valid ``fmt`` values (see :data:`FORMAT_DOCS`), or ``None`` for
    a format this module does not know; ``escapes`` is :data:`Escapes`. Read from
    :data:`FORMAT_TABLES` (or built) once per format, escape mode and process."""
    if not isinstance(fmt, str):
        raise InvalidSchemaError(pointer, f"format must be a string, not {type(fmt).__name__}")
    if escapes not in _ESCAPES:
        raise ValueError(f"escapes must be one of {_ESCAPES}, not {escapes!r}")
    if fmt not in _FORMAT_SOURCES:
        return None
    return _format(fmt, escapes)

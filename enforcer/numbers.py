"""JSON numbers as byte expressions: syntax, exact decimal bounds, exact ``multipleOf``.

Bounds and ``multipleOf`` are decided on the decimal text, so they are exact for every number
written without an exponent. When a number schema carries a bound or ``multipleOf``, exponent
notation is not generated (documented restriction): deciding ``1.5e3 <= x`` on exponent forms is
not regular in general. Inclusive bounds of zero (``minimum: 0``, the commonest) are the
exception: the sign decides them, for the text and for the double it parses to alike, so numbers
under them take exponents too. Integers accept an optional all-zero fraction (``3.0`` is an integer in
JSON Schema). Cost: expression size linear in the number of digits of the bounds.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from functools import lru_cache
from math import gcd
from typing import NamedTuple

from .automaton import (EPSILON, NOTHING, Embedded, Graph, Node, alt, byte_set, intersect_nodes, literal,
                        optional, plus, repeat, seq, star)

DIGIT = byte_set([(0x30, 0x39)])
NONZERO = byte_set([(0x31, 0x39)])
_INT_DIGITS = alt(literal("0"), seq(NONZERO, star(DIGIT)))
_FRACTION = seq(literal("."), plus(DIGIT))
_ZERO_FRACTION = optional(seq(literal("."), plus(literal("0"))))
_EXPONENT = seq(byte_set([(0x45, 0x45), (0x65, 0x65)]), optional(byte_set([(0x2B, 0x2B), (0x2D, 0x2D)])),
                plus(DIGIT))

NUMBER: Node = seq(optional(literal("-")), _INT_DIGITS, optional(_FRACTION), optional(_EXPONENT))
"""Any JSON number."""
INTEGER: Node = seq(optional(literal("-")), _INT_DIGITS, _ZERO_FRACTION)
"""Any JSON number whose value is an integer, written without exponent."""
DOUBLE_DIGITS = 15
"""Decimal digits a binary64 double keeps (``DBL_DIG``): a number written with at most this many
digits and a non-zero fraction digit parses (``json.loads``, JavaScript) to a double that is not
an integer; with more it may round to one (``1.0000000000000001`` and ``2**60 + 0.5`` do)."""


def _fraction_with_nonzero(widths: int) -> list[Node]:
    """``[F_0, ..., F_widths]``: ``F_m`` is 1 to ``m`` fraction digits, one of them non-zero
    (``F_m = [1-9][0-9]{0,m-1} | 0 F_(m-1)``); size quadratic in ``m``."""
    out = [NOTHING]
    for m in range(1, widths + 1):
        out.append(alt(seq(NONZERO, repeat(DIGIT, 0, m - 1)), seq(literal("0"), out[m - 1])))
    return out


def _fractional() -> Node:
    fractions = _fraction_with_nonzero(DOUBLE_DIGITS - 1)
    parts = [seq(_digit_between(0, 9), literal("."), fractions[DOUBLE_DIGITS - 1])]
    for k in range(2, DOUBLE_DIGITS):
        parts.append(seq(NONZERO, repeat(DIGIT, k - 1, k - 1), literal("."), fractions[DOUBLE_DIGITS - k]))
    return seq(optional(literal("-")), alt(*parts))
PLAIN_INTEGER: Node = seq(optional(literal("-")), _INT_DIGITS)
"""Integers without a fraction part (draft-04's ``integer``: ``1.0`` is not one)."""
WITH_FRACTION: Node = seq(optional(literal("-")), _INT_DIGITS, _FRACTION)
"""Numbers written with a fraction part, without exponent (draft-04's non-integers: ``1.0`` is
one)."""


def _digit_between(lo: int, hi: int) -> Node:
    return byte_set([(0x30 + lo, 0x30 + hi)]) if lo <= hi else NOTHING


FRACTIONAL: Node = _fractional()
"""Numbers that are not integers, also once parsed as doubles: written without exponent, with a
non-zero fraction digit, in at most ``DOUBLE_DIGITS`` digits (longer ones are refused: they may
parse to an integer)."""


def _precise() -> Node:
    parts = [seq(_digit_between(0, 9), literal("."), repeat(DIGIT, 1, DOUBLE_DIGITS - 1))]
    for k in range(2, DOUBLE_DIGITS):
        parts.append(seq(NONZERO, repeat(DIGIT, k - 1, k - 1), literal("."), repeat(DIGIT, 1, DOUBLE_DIGITS - k)))
    return seq(optional(literal("-")), alt(_INT_DIGITS, *parts))


DIVISIBLE_AS_WRITTEN: Node = _precise()
"""Numbers whose divisibility a parser sees as written: integers without a fraction part (JSON
parsers that keep integers exact) and numbers with one in at most ``DOUBLE_DIGITS`` digits (the
double nearest them is as far from a multiple as they are; 20 digits with a fraction part may
parse to a double that is a multiple where the number is not, or the reverse). ``multipleOf``
and its negation accept only these."""


# ---- unsigned integer parts (canonical: no leading zeros) ----------------------------------


def _int_same_length_cmp(digits: str, greater: bool, inclusive: bool, canonical: bool = True) -> Node:
    """Digit strings of len(digits) compared with ``digits`` lexicographically (= numerically at
    equal length); ``canonical``: no leading zero unless the length is 1 (an integer's digits;
    the digits after a shared prefix may start with zeros)."""
    parts: list[Node] = []
    n = len(digits)
    for i, ch in enumerate(digits):
        d = int(ch)
        lowest = 1 if (canonical and i == 0 and n > 1) else 0
        prefix = literal(digits[:i])
        rest = repeat(DIGIT, n - i - 1, n - i - 1)
        if greater:
            parts.append(seq(prefix, _digit_between(max(d + 1, lowest), 9), rest))
        else:
            parts.append(seq(prefix, _digit_between(lowest, d - 1), rest))
    if inclusive:
        parts.append(literal(digits))
    return alt(*parts)


def _int_range(low: int, high: int) -> Node:
    """Canonical unsigned integer texts of the values ``low`` to ``high`` inclusive (0 <= low):
    per length, the digit strings between the bounds, split at the first digit where they
    differ. Size linear in the digits of the bounds."""
    if low > high:
        return NOTHING
    lo, hi = str(low), str(high)
    if len(lo) < len(hi):
        middle = [seq(NONZERO, repeat(DIGIT, n - 1, n - 1)) for n in range(len(lo) + 1, len(hi))]
        return alt(_int_same_length_cmp(lo, True, True), *middle, _int_same_length_cmp(hi, False, True))
    shared = next((i for i, (a, b) in enumerate(zip(lo, hi)) if a != b), len(lo))
    if shared == len(lo):
        return literal(lo)
    prefix, a, b = literal(lo[:shared]), int(lo[shared]), int(hi[shared])
    rest = len(lo) - shared - 1
    tails = alt(seq(literal(lo[shared]), _int_same_length_cmp(lo[shared + 1:], True, True, canonical=False)
                    if rest else EPSILON),
                seq(_digit_between(a + 1, b - 1), repeat(DIGIT, rest, rest)),
                seq(literal(hi[shared]), _int_same_length_cmp(hi[shared + 1:], False, True, canonical=False)
                    if rest else EPSILON))
    return seq(prefix, tails)


def _int_cmp(digits: str, op: str) -> Node:
    """Canonical unsigned integer texts ``x`` with ``x op digits`` (op in ge, gt, le, lt)."""
    n = len(digits)
    greater = op in ("ge", "gt")
    same = _int_same_length_cmp(digits, greater, op in ("ge", "le"))
    if greater:
        longer = seq(NONZERO, repeat(DIGIT, n, None))
        return alt(longer, same)
    shorter = alt(literal("0"), seq(NONZERO, repeat(DIGIT, 0, n - 2))) if n > 1 else NOTHING
    return alt(shorter, same)


# ---- fraction digit strings (the part after the point), compared as 0.d ------------------------


def _frac_cmp(digits: str, op: str) -> Node:
    """Non-empty digit strings ``d`` with ``0.d op 0.digits``."""
    digits = digits.rstrip("0")
    any_tail = star(DIGIT)
    if not digits:
        if op == "ge":
            return plus(DIGIT)
        if op == "gt":
            return seq(star(DIGIT), NONZERO, star(DIGIT))
        if op == "le":
            return plus(literal("0"))
        return NOTHING
    d = int(digits[0])
    rest = digits[1:].rstrip("0")
    if op in ("ge", "gt"):
        above = seq(_digit_between(d + 1, 9), any_tail)
        if rest:
            same = seq(literal(digits[0]), _frac_cmp(rest, op))
        else:
            same = seq(literal(digits[0]), any_tail if op == "ge" else seq(any_tail, NONZERO, any_tail))
        return alt(above, same)
    below = seq(_digit_between(0, d - 1), any_tail)
    if rest:
        ending_here = EPSILON  # 0.d stops at this digit: strictly below a longer non-zero bound
        same = seq(literal(digits[0]), alt(ending_here, _frac_cmp(rest, op)))
    else:
        same = seq(literal(digits[0]), plus(literal("0"))) if op == "le" else NOTHING
        if op == "le":
            same = alt(literal(digits[0]), same)
    return alt(below, same)


def _fraction_suffix(frac_digits: str, op: str, integer: bool) -> Node:
    """What may follow an integer part equal to the bound's, whose fraction digits are
    ``frac_digits``, for the number to compare with the bound by ``op``: nothing, or a point
    and fraction digits."""
    frac_zero = not frac_digits.strip("0")
    # does the integer part alone (a zero fraction) satisfy the comparison?
    without_fraction_holds = {
        "ge": frac_zero, "gt": False, "le": True, "lt": not frac_zero,
    }[op]
    if integer:
        return _ZERO_FRACTION if without_fraction_holds else NOTHING
    return alt(EPSILON if without_fraction_holds else NOTHING, seq(literal("."), _frac_cmp(frac_digits, op)))


def _magnitude_cmp(int_digits: str, frac_digits: str, op: str, integer: bool) -> Node:
    """Unsigned decimal texts ``I(.F)?`` compared with the magnitude ``int_digits.frac_digits``."""
    fraction_any = _ZERO_FRACTION if integer else optional(_FRACTION)
    strictly = _int_cmp(int_digits, "gt" if op in ("ge", "gt") else "lt")
    return alt(seq(strictly, fraction_any), seq(literal(int_digits), _fraction_suffix(frac_digits, op, integer)))


class _MagnitudeBound(NamedTuple):
    """One side of an interval of magnitudes: ``value op bound`` (op in ge, gt, le, lt)."""

    bound: Decimal
    op: str


def _magnitudes(low: _MagnitudeBound | None, high: _MagnitudeBound, integer: bool) -> Node | None:
    """Unsigned decimal texts whose magnitude satisfies ``low`` (``None``: no lower bound) and
    ``high``, built directly: the integer parts strictly between the bounds take any fraction,
    those equal to a bound's take the fractions that side allows. ``None`` when both bounds
    share their integer part and the numbers may have fractions (two fraction comparisons to
    intersect)."""
    _, high_int, high_frac = _split_decimal(high.bound)
    if low is None:
        return _magnitude_cmp(high_int, high_frac, high.op, integer)
    _, low_int, low_frac = _split_decimal(low.bound)
    a, b = int(low_int), int(high_int)
    if a > b:
        return NOTHING
    low_suffix = _fraction_suffix(low_frac, low.op, integer)
    high_suffix = _fraction_suffix(high_frac, high.op, integer)
    if a == b:
        if not integer:
            return None
        both = low_suffix is not NOTHING and high_suffix is not NOTHING
        return seq(literal(low_int), _ZERO_FRACTION) if both else NOTHING
    fraction_any = _ZERO_FRACTION if integer else optional(_FRACTION)
    return alt(seq(_int_range(a + 1, b - 1), fraction_any), seq(literal(low_int), low_suffix),
               seq(literal(high_int), high_suffix))


def _interval(lower: tuple[Decimal, bool], upper: tuple[Decimal, bool], integer: bool) -> Node | None:
    """Signed texts between two bounds, without an automaton product: a non-negative text's
    magnitude and a negative one's each lie in an interval of magnitudes (``-m >= lower`` is
    ``m <= -lower``). ``None`` where :func:`_magnitudes` gives up."""
    (lo, lo_exclusive), (hi, hi_exclusive) = lower, upper
    # x = m >= 0 (also "-0": its magnitude is 0 and so is its value)
    if hi < 0 or (hi == 0 and hi_exclusive):
        non_negative: Node | None = NOTHING
    else:
        open_below = lo < 0 or (lo == 0 and not lo_exclusive)
        above = None if open_below else _MagnitudeBound(lo, "gt" if lo_exclusive else "ge")
        non_negative = _magnitudes(above, _MagnitudeBound(hi, "lt" if hi_exclusive else "le"), integer)
    # x = -m: x >= lo is m <= -lo, x <= hi is m >= -hi
    if lo > 0 or (lo == 0 and lo_exclusive):
        negative: Node | None = NOTHING
    else:
        open_below = hi > 0 or (hi == 0 and not hi_exclusive)
        above = None if open_below else _MagnitudeBound(-hi, "gt" if hi_exclusive else "ge")
        negative = _magnitudes(above, _MagnitudeBound(-lo, "lt" if lo_exclusive else "le"), integer)
    if non_negative is None or negative is None:
        return None
    node = alt(non_negative, seq(literal("-"), negative))
    return NOTHING if node.empty else node


def _split_decimal(value: Decimal) -> tuple[bool, str, str]:
    """(negative, integer digits, fraction digits) of a finite decimal, no exponent."""
    negative = value < 0
    text = format(abs(value), "f")
    if "." in text:
        int_part, frac = text.split(".")
    else:
        int_part, frac = text, ""
    int_part = int_part.lstrip("0") or "0"
    return negative, int_part, frac.rstrip("0")


def canonical_text(value: Decimal) -> tuple[str, bool]:
    """``(text, is_integer)``: the shortest plain JSON text of a finite decimal (no exponent, no
    trailing fraction zeros); the texts equal to it are this one followed by ``.0...`` (an
    integer) or by more zeros (a fraction), and for zero also ``-0``."""
    negative, int_digits, frac_digits = _split_decimal(value)
    sign = "-" if negative and (int_digits != "0" or frac_digits) else ""
    return (f"{sign}{int_digits}.{frac_digits}" if frac_digits else f"{sign}{int_digits}"), not frac_digits


ZERO_FRACTION: Node = _ZERO_FRACTION
"""``.0``, ``.00``, ... or nothing: what may follow an integer's canonical text."""


def to_decimal(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        d = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        return None
    return d if d.is_finite() else None


@lru_cache(maxsize=256)
def bounded_number(lower: tuple[Decimal, bool] | None, upper: tuple[Decimal, bool] | None,
                   integer: bool) -> Node:
    """Numbers ``x`` with ``lower <= x`` (``<`` when the flag says exclusive) and likewise for
    ``upper``; ``None`` leaves a side open. Exact; exponent notation only for numbers (not
    integers) whose every bound is an inclusive zero. Two bounds are one expression built
    directly (:func:`_interval`, tens of microseconds), except where both share an integer part
    and a fraction: those are the product of the two sides' automata (a few hundred); one bound
    30-60 us. Cached like :func:`~enforcer.automaton.literal` (nodes are immutable; equal bounds
    such as ``minimum: 0`` recur within a schema and across schemas), emptied with the compile
    caches."""
    # an inclusive bound of zero holds of the double a text parses to as of the text (underflow
    # gives a zero of the same sign, overflow an infinity); an exclusive one does not (1e-400)
    zero_bounds = not integer and all(b is None or (b[0] == 0 and not b[1]) for b in (lower, upper))
    if lower is not None and upper is not None and not zero_bounds:
        direct = _interval(lower, upper, integer)
        if direct is not None:
            return direct
    constraints: list[Node] = []
    if lower is not None:
        op = "gt" if lower[1] else "ge"
        constraints.append(alt(_signed_cmp(lower[0], op, integer), _exponent_zero_cmp(op) if zero_bounds else NOTHING))
    if upper is not None:
        op = "lt" if upper[1] else "le"
        constraints.append(alt(_signed_cmp(upper[0], op, integer), _exponent_zero_cmp(op) if zero_bounds else NOTHING))
    if not constraints:
        return INTEGER if integer else seq(optional(literal("-")), _INT_DIGITS, optional(_FRACTION))
    if len(constraints) == 1:
        return constraints[0]
    dfa = intersect_nodes(constraints[0], constraints[1])
    return Embedded(dfa) if not dfa.is_empty else NOTHING


_MANTISSA = seq(_INT_DIGITS, optional(_FRACTION))
_ZERO_MANTISSA = seq(literal("0"), optional(seq(literal("."), plus(literal("0")))))
_NONZERO_MANTISSA = alt(seq(NONZERO, star(DIGIT), optional(_FRACTION)),
                        seq(literal("0."), star(literal("0")), NONZERO, star(DIGIT)))


def _exponent_zero_cmp(op: str) -> Node:
    """Numbers written with an exponent that compare with zero by ``op`` (ge, gt, le, lt): the
    sign and a non-zero mantissa digit decide it (``-0e5`` is zero)."""
    if op == "ge":
        mantissas = alt(_MANTISSA, seq(literal("-"), _ZERO_MANTISSA))
    elif op == "gt":
        mantissas = _NONZERO_MANTISSA
    elif op == "le":
        mantissas = alt(seq(literal("-"), _MANTISSA), _ZERO_MANTISSA)
    else:
        mantissas = seq(literal("-"), _NONZERO_MANTISSA)
    return seq(mantissas, _EXPONENT)


def _signed_cmp(bound: Decimal, op: str, integer: bool) -> Node:
    """Signed decimal texts x with ``x op bound``."""
    negative, int_digits, frac_digits = _split_decimal(bound)
    fraction_any = _ZERO_FRACTION if integer else optional(_FRACTION)
    unsigned_any = seq(_INT_DIGITS, fraction_any)
    zero = seq(literal("0"), _ZERO_FRACTION if integer else optional(seq(literal("."), plus(literal("0")))))
    flipped = {"ge": "le", "gt": "lt", "le": "ge", "lt": "gt"}[op]
    is_zero = int_digits == "0" and not frac_digits
    if op in ("ge", "gt"):
        if not negative:
            positive = _magnitude_cmp(int_digits, frac_digits, op, integer)
            # -0 equals 0: allowed exactly when 0 itself is
            neg_zero = seq(literal("-"), zero) if (is_zero and op == "ge") else NOTHING
            return alt(positive, neg_zero)
        # bound < 0: every non-negative number, and negatives with |x| flipped-op |bound|
        return alt(unsigned_any, seq(literal("-"), _magnitude_cmp(int_digits, frac_digits, flipped, integer)))
    if negative:
        return seq(literal("-"), _magnitude_cmp(int_digits, frac_digits, flipped, integer))
    # bound >= 0, op in le/lt: every negative number, -0 when 0 itself qualifies, and the
    # non-negatives below the bound
    nonzero = seq(NONZERO, star(DIGIT), fraction_any)
    if not integer:
        nonzero = alt(nonzero, seq(literal("0."), star(DIGIT), NONZERO, star(DIGIT)))
    negatives = seq(literal("-"), nonzero)
    neg_zero = seq(literal("-"), zero) if (op == "le" or not is_zero) else NOTHING
    return alt(negatives, neg_zero, _magnitude_cmp(int_digits, frac_digits, op, integer))


MAX_MULTIPLE_STATES = 100_000
"""Largest (residue x fraction digit) automaton :func:`multiple_of` builds."""


def multiple_of(step: Decimal, integer: bool) -> Node | None:
    """Numbers that are integer multiples of ``step`` (> 0), without exponent; ``None`` when the
    automaton would be too large (more than 10,000 residues, or more than
    :data:`MAX_MULTIPLE_STATES` (residue, fraction digit) states). Trailing zeros past the
    step's last digit loop on one state, so the automaton is deterministic: one state per
    (digits written after the point, residue)."""
    exponent = step.normalize().as_tuple().exponent
    scale = max(0, -int(exponent))
    modulus = int(step.scaleb(scale))
    if modulus <= 0 or modulus > 10_000:
        return None
    scale_used = scale
    if integer:
        # integers that are multiples of p / 10^s are the multiples of p / gcd(p, 10^s)
        modulus, scale_used = modulus // gcd(modulus, 10 ** scale), 0
    m, s = modulus, scale_used
    if m * (s + 1) > MAX_MULTIPLE_STATES:
        return None
    start, zero = 0, 1

    def int_state(r: int) -> int:
        return 2 + r

    def frac_state(j: int, r: int) -> int:
        return 2 + m + (j - 1) * m + r

    trailing = 2 + m + s * m
    edges: list[tuple[int, Node, int]] = [(start, literal("0"), zero)]
    accepting: set[int] = {trailing}
    for d in range(1, 10):
        edges.append((start, literal(str(d)), int_state(d % m)))
    for r in range(m):
        for d in range(10):
            edges.append((int_state(r), literal(str(d)), int_state((10 * r + d) % m)))
    for src, r in [(zero, 0)] + [(int_state(r), r) for r in range(m)]:
        if (r * 10 ** s) % m == 0:
            accepting.add(src)
            if not s:  # with fraction digits, "." and zeros go through the frac states
                edges.append((src, seq(literal("."), plus(literal("0"))), trailing))
        if s:
            for d in range(10):
                edges.append((src, seq(literal("."), literal(str(d))), frac_state(1, (10 * r + d) % m)))
    for j in range(1, s + 1):
        for r in range(m):
            if j < s:
                for d in range(10):
                    edges.append((frac_state(j, r), literal(str(d)), frac_state(j + 1, (10 * r + d) % m)))
            if (r * 10 ** (s - j)) % m == 0:
                accepting.add(frac_state(j, r))
                if j == s:  # before the last digit, zeros go on through the frac states
                    edges.append((frac_state(j, r), plus(literal("0")), trailing))
    graph = Graph.trimmed_of(trailing + 1, start, frozenset(accepting), tuple(edges))
    return seq(optional(literal("-")), graph)

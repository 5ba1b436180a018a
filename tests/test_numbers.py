"""Exact numeric bounds and multipleOf on decimal text, checked against Decimal arithmetic."""

import json
import random
from decimal import Decimal as D

import pytest

from enforcer.automaton import compile_node
from enforcer.numbers import INTEGER, NUMBER, bounded_number, multiple_of

rng = random.Random(1)
SAMPLES = [0, 1, -1, 2.5, -2.5, 3, 10, 100, 0.1, 0.25, -0.75, 7, 1.5, 2, 9.99, 10.01, -10, -9.5, 49, 50, 51,
           14, 15, 0.5, -0.5] + [rng.randint(-300, 300) for _ in range(300)] + \
          [round(rng.uniform(-120, 120), rng.randint(0, 3)) for _ in range(400)]


def texts():
    out = {"-0", "0.0", "-0.0", "1.0", "3.00", "1.50"}
    for v in SAMPLES:
        t = json.dumps(v)
        out.add(t)
        if "." in t:
            out.add(t + "0")
    return sorted(out)


def check(node, predicate, integer=False):
    dfa = compile_node(node)
    for t in texts():
        value = D(t)
        expected = predicate(value) and (not integer or value == value.to_integral_value())
        assert dfa.matches(t) == expected, t


@pytest.mark.parametrize("lower,upper", [
    ((D("2.5"), False), None), ((D("2.5"), True), (D("50"), False)), ((D("-10"), False), (D("-0.75"), True)),
    (None, (D("0"), True)), ((D("0"), False), None), ((D("-1.5"), False), (D("1.5"), False)),
])
@pytest.mark.parametrize("integer", [False, True])
def test_bounds_exact(lower, upper, integer):
    def pred(x):
        ok = True
        if lower is not None:
            ok &= x > lower[0] if lower[1] else x >= lower[0]
        if upper is not None:
            ok &= x < upper[0] if upper[1] else x <= upper[0]
        return ok
    check(bounded_number(lower, upper, integer), pred, integer)


@pytest.mark.parametrize("step", ["7", "0.5", "0.25", "1.5", "2", "0.01"])
@pytest.mark.parametrize("integer", [False, True])
def test_multiple_of_exact(step, integer):
    s = D(step)
    check(multiple_of(s, integer), lambda x: (x / s) % 1 == 0, integer)


def test_number_syntax():
    num, integer = compile_node(NUMBER), compile_node(INTEGER)
    for good in ["0", "-0", "12", "1.5", "1e5", "1E+5", "-2.5e-3"]:
        assert num.matches(good)
    for bad in ["01", "1.", ".5", "+1", "1e", "--1", "1.5.2"]:
        assert not num.matches(bad)
    assert integer.matches("3") and integer.matches("3.0") and not integer.matches("3.5")
    assert not integer.matches("1e2")


BOUNDS = ["-1000", "-123.45", "-10", "-9.5", "-1", "-0.75", "0", "0.001", "0.5", "1", "1.5", "2.5", "9",
          "9.99", "10", "10.01", "19", "30", "99", "100", "101", "123.45", "1000", "65535"]


@pytest.mark.parametrize("integer", [False, True])
def test_two_bounds_built_directly_equal_the_product_of_their_sides(integer):
    """Two bounds are one expression built without an automaton product; its language is the
    product's (the construction the single-bound parts still use), compared as automata."""
    from enforcer.automaton import intersect_nodes
    from enforcer.numbers import _interval, _signed_cmp
    pairs = rng.sample([(lo, hi) for lo in BOUNDS for hi in BOUNDS], 150)
    built = 0
    for lo, hi in pairs:
        for lo_exclusive, hi_exclusive in [(False, False), (True, False), (False, True), (True, True)]:
            lower, upper = (D(lo), lo_exclusive), (D(hi), hi_exclusive)
            if not integer and lower == (0, False) and upper == (0, False):
                continue  # bounds of an inclusive zero take exponents: the product's case
            direct = _interval(lower, upper, integer)
            if direct is None:  # both bounds in one integer part, with fractions
                assert not integer and int(D(lo)) == int(D(hi))
                continue
            built += 1
            product = intersect_nodes(_signed_cmp(D(lo), "gt" if lo_exclusive else "ge", integer),
                                      _signed_cmp(D(hi), "lt" if hi_exclusive else "le", integer))
            dfa = compile_node(direct)
            assert dfa.difference(product).is_empty and product.difference(dfa).is_empty, (lower, upper)
    assert built > 500


@pytest.mark.parametrize("low,high", [(0, 0), (0, 9), (1, 30), (7, 7), (19, 1001), (100, 199), (120, 345),
                                      (5, 4), (0, 65535), (1234, 1299)])
def test_int_range(low, high):
    from enforcer.numbers import _int_range
    dfa = compile_node(_int_range(low, high))
    for v in range(0, 70000, 1 if high < 2000 else 7):
        assert dfa.matches(str(v)) == (low <= v <= high), v
    assert not dfa.matches("01") and not dfa.matches("007")


def test_equal_bounds_share_one_node_until_the_compile_caches_are_cleared() -> None:
    import enforcer

    first = bounded_number((D(0), False), None, False)
    assert bounded_number((D("0.0"), False), None, False) is first  # equal bounds: one node
    assert bounded_number((D(0), True), None, False) is not first  # exclusive: another language
    enforcer.clear_cache()
    again = bounded_number((D(0), False), None, False)
    assert again is not first  # a cold compile builds its bounds afresh
    dfa = compile_node(again)
    assert dfa.matches(b"0.5") and dfa.matches(b"1e3") and not dfa.matches(b"-1")

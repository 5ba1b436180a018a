"""A differential test of ``enforcer.regex`` against interegular, an independent regex-to-FSM
compiler, on the patterns interegular can parse.

interegular gives what Python's ``re`` cannot: strings *of the pattern's language* (its FSM
enumerates them), so every pattern is checked on strings it matches as well as on random ones
(which rarely match a real pattern). JSON Schema ``pattern`` is an unanchored search; interegular
matches whole strings, so a leading ``^`` / trailing ``$`` are taken off and the search is
spelled out (a prefix, a suffix or any substring matching). Strings are ASCII without ``\\r``:
there ECMA-262's and interegular's ``\\d``, ``\\w``, ``\\s`` and ``.`` agree.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

interegular = pytest.importorskip("interegular")

from enforcer.automaton import compile_node  # noqa: E402
from enforcer.regex import pattern_node  # noqa: E402

PATTERNS = [
    r"^[a-z]+$", r"^\d{3}-\d{4}$", r"^[A-Z]{2}[0-9]{2,4}$", r"(foo|bar)+baz", r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$",
    r"^(\+|-)?\d+(\.\d+)?$", r"colou?r", r"^[a-f0-9]{8}-[a-f0-9]{4}$", r"a{2,}b{0,3}", r"^(ab|cd){1,3}$",
    r"[xyz]", r"^\s*\w+\s*$", r"^v\d+\.\d+\.\d+$", r"^[A-Za-z_][A-Za-z0-9_]*$", r"^#?[0-9a-fA-F]{6}$",
    r"^.{2,5}$", r"^[^0-9]*$", r"\d\d", r"^(a|b)*c$", r"^https?://[a-z.]+(/[a-z]*)*$", r"^[a-z]{1,3}",
    r"[0-9]$", r"^(?:[01]\d|2[0-3]):[0-5]\d$", r"^\w{2}\W\w$", r"^[\w.-]+$", r"^a.c$", r"(ab)?(cd)?e{1,2}",
]
ALPHABET = "abcdefxyz ABCZ019_-.:@/#+\n\t"


def _oracle(pattern: str) -> tuple[Any, str] | None:
    """(interegular FSM of the pattern without its end anchors, which ends were anchored), or
    None when interegular cannot parse it."""
    anchored = ""
    core = pattern
    if core.startswith("^"):
        core, anchored = core[1:], anchored + "^"
    if core.endswith("$") and not core.endswith("\\$"):
        core, anchored = core[:-1], anchored + "$"
    try:
        return interegular.parse_pattern(core).to_fsm(), anchored
    except Exception:  # interegular refuses what it cannot parse (anchors inside, \b, ...)
        return None


def _searches(fsm: Any, anchored: str, s: str) -> bool:
    """Whether ``s`` matches by JSON Schema's search semantics, through interegular."""
    starts = [0] if "^" in anchored else range(len(s) + 1)
    for i in starts:
        ends = [len(s)] if "$" in anchored else range(i, len(s) + 1)
        if any(fsm.accepts(s[i:j]) for j in ends):
            return True
    return False


def _members(fsm: Any, rnd: random.Random, count: int) -> list[str]:
    """Up to ``count`` strings of the FSM's language, by random walks (a random transition, then
    a random character of it) that stay on states that can still accept (``fsm.islive``) and
    stop at a final state with probability 1/3, at most 40 symbols, 4 * count walks at most. interegular's "anything else" symbol becomes an ASCII character outside the
    pattern's alphabet. Bounded: 160 * count steps."""
    others = [c for c in ALPHABET + "%&=~" if c not in fsm.alphabet and c != "\r"]
    groups = fsm.alphabet.by_transition
    found: list[str] = []
    for _ in range(4 * count):
        if len(found) == count:
            break
        state, text = fsm.initial, []
        for _ in range(40):
            if state in fsm.finals and (rnd.random() < 1 / 3 or not fsm.map.get(state)):
                break
            moves = []  # a transition first, then a character of it: '@' is as likely as [^@]
            for t, nxt in fsm.map.get(state, {}).items():
                chars = [c for c in groups[t] if (isinstance(c, str) and c.isascii() and c != "\r")
                         or (not isinstance(c, str) and others)]
                if chars and fsm.islive(nxt):
                    moves.append((chars, nxt))
            if not moves:
                break
            chars, state = rnd.choice(moves)
            symbol = rnd.choice(chars)
            text.append(symbol if isinstance(symbol, str) else rnd.choice(others))
        word = "".join(text)
        if state in fsm.finals and fsm.accepts(word):
            found.append(word)
    return found


def check_pattern(pattern: str, where: str = "/p") -> int:
    """Compare on members of the language (with and without random text around them) and on
    random strings; returns the number of members compared (-1: interegular cannot parse it)."""
    oracle = _oracle(pattern)
    if oracle is None:
        return -1
    fsm, anchored = oracle
    dfa = compile_node(pattern_node(pattern, where))
    rnd = random.Random(pattern)
    noise = lambda: "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 4)))  # noqa: E731
    strings = []
    members = _members(fsm, rnd, 30)
    for member in members:
        strings += [member, noise() + member, member + noise()]
    strings += ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 10))) for _ in range(60)]
    for s in strings:
        assert dfa.matches(json.dumps(s)[1:-1]) == _searches(fsm, anchored, s), (pattern, s)
    return len(members)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_patterns_agree_with_interegular(pattern: str) -> None:
    assert check_pattern(pattern) >= 20, f"interegular cannot parse {pattern!r}, or its walks found no member"


@pytest.mark.corpus
def test_corpus_patterns_agree_with_interegular(corpus_dir: Path) -> None:
    from test_regex import corpus_patterns

    checked = members = 0
    for pattern, where in corpus_patterns(corpus_dir).items():
        if not pattern.isascii() or "\\p" in pattern:
            continue  # interegular reads \p and non-ASCII classes differently from ECMA-262
        try:
            n = check_pattern(pattern, where)
        except Exception as exc:  # refused by enforcer.regex (lookaround, ...): test_regex covers refusals
            if type(exc).__name__ in ("UnsupportedSchemaError", "SchemaTooComplexError"):
                continue
            raise
        checked += n >= 0
        members += max(n, 0)
    assert checked >= 50 and members >= 20 * checked, (checked, members)

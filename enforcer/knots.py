"""Recursive and shared sub-values as levels built on demand.

A schema's compiler builds one node per sub-schema and depth. A sub-value met again while it
is being built (a ``$ref`` recursion) becomes a *knot*: a :class:`~enforcer.automaton.Deferred`
placeholder whose level is the node being built, so recursion goes as deep as a text goes
instead of being cut. A large sub-value met again elsewhere (a definition many properties
name) becomes a *share*: a placeholder whose level is that node, so a lazily built automaton
holds it once per use as one state, not as a copy of all of its states. Automata built whole
(intersections, differences) build a share's node in place and cut a knot (``bounded`` is
NOTHING: recursion stops there, a subset of the values).

:func:`finish` checks what a compile made before anything is decoded: every knot reached has
its level, no knot's language is empty (a recursion with no way out would let a text start a
value it can never finish), and no level holds an embedded automaton too large to copy at
each expansion (:data:`~enforcer.automaton.MAX_LEVEL_BLOCK_STATES`). Lifetime: that of the
compiled automaton (its placeholders keep their levels and templates).
"""

from __future__ import annotations

from typing import Iterator

from .automaton import (MAX_LEVEL_BLOCK_STATES, NOTHING, Concat, Deferred, Embedded, Graph, Node, Repeat, Union,
                        sub_expressions)


class Level:
    """A knot's or share's level: the node it stands for (a knot's is set once the node that
    met itself is built)."""

    __slots__ = ("node", "recursive")

    def __init__(self, node: Node | None, recursive: bool) -> None:
        self.node = node
        self.recursive = recursive

    def __call__(self) -> Node:
        if self.node is None:  # pragma: no cover - finish() refuses a compile that leaves one unset
            raise RuntimeError("a knot's level was never built")
        return self.node


class KnotsUnusable(Exception):
    """What a compile made cannot be decoded with knots and shares (:func:`finish` says why);
    the compiler builds the value again with recursion cut instead."""


def knot() -> Deferred:
    """A placeholder for a sub-value being built, its level set when it is built."""
    return Deferred(Level(None, recursive=True), NOTHING)


def share(node: Node) -> Deferred:
    """A placeholder for ``node``, built in place where an automaton is built whole."""
    return Deferred(Level(node, recursive=False), node)


def level_of(node: Node) -> Level | None:
    """The knot's or share's level of a placeholder (None: another node)."""
    return node.level if isinstance(node, Deferred) and isinstance(node.level, Level) else None


def largest_block(node: Node, memo: dict[int, tuple[Node, int]]) -> int:
    """The most states of an embedded automaton in ``node`` outside its placeholders (what its
    level template writes out), memoised by node identity in ``memo``, whose entries keep their
    node: a node the compile drops (an abandoned attempt's) cannot lend its identity, and its
    size, to a later one. Iterative."""
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        part, visited = stack.pop()
        if id(part) in memo:
            continue
        if part.block_states == 0 or isinstance(part, Deferred):
            memo[id(part)] = (part, 0)
        elif isinstance(part, Embedded):
            memo[id(part)] = (part, part.dfa.num_states)
        elif not visited:
            stack.append((part, True))
            stack.extend((sub, False) for sub in sub_expressions(part) if id(sub) not in memo)
        else:
            memo[id(part)] = (part, max((memo[id(sub)][1] for sub in sub_expressions(part)), default=0))
    return memo[id(node)][1]


def copyable(node: Node, memo: dict[int, tuple[Node, int]]) -> bool:
    """Whether every embedded automaton of ``node`` outside its placeholders is small enough to
    be copied with a level (:data:`~enforcer.automaton.MAX_LEVEL_BLOCK_STATES`): at no cost when
    all its embedded states together are (``block_states``, an upper bound of the largest), else
    through :func:`largest_block` and its ``memo``."""
    return node.block_states <= MAX_LEVEL_BLOCK_STATES or largest_block(node, memo) <= MAX_LEVEL_BLOCK_STATES


def finish(node: Node, sizes: dict[int, tuple[Node, int]] | None = None) -> None:
    """Check the knots and shares ``node`` reaches (see the module's docstring); raise
    :class:`KnotsUnusable` naming what fails. ``sizes``: :func:`largest_block`'s memo, when the
    caller kept one (the compiler's, filled where it made shares). Cost: a few passes over the
    distinct parts."""
    levels = list(levels_reached(node))
    sizes = {} if sizes is None else sizes
    for level in levels:
        if level.node is None:
            raise KnotsUnusable("a recursion's level was left unbuilt (its build was abandoned)")
        if not copyable(level.node, sizes):
            raise KnotsUnusable("a repeated level holds an embedded automaton too large to copy")
    knots = [level for level in levels if level.recursive]
    # least fixpoint: a knot is non-empty once its level is, given those found so far
    finite: set[int] = set()
    changed = True
    while changed:
        changed = False
        memo: dict[int, bool] = {}
        for level in knots:
            if id(level) not in finite and not _empty(level.node, finite, memo):
                finite.add(id(level))
                changed = True
    if len(finite) < len(knots):
        raise KnotsUnusable("a recursion has no finite value")


def levels_reached(node: Node) -> Iterator[Level]:
    """The knot and share levels ``node`` reaches, through the levels themselves, each once."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        part = stack.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        level = level_of(part)
        if level is not None:
            yield level
            if level.node is not None:
                stack.append(level.node)
        elif part.block_states:  # parts without blocks hold no placeholder
            stack.extend(sub_expressions(part))


def _empty(node: Node, finite: set[int], memo: dict[int, bool]) -> bool:
    """Whether ``node`` matches nothing when the knots outside ``finite`` (ids of their levels)
    match nothing. Memoised by node identity in ``memo``; iterative."""
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        part, visited = stack.pop()
        if id(part) in memo:
            continue
        level = level_of(part)
        if part.empty or part.block_states == 0 or isinstance(part, Embedded):  # exact already
            memo[id(part)] = part.empty
        elif level is not None:
            if level.recursive:
                memo[id(part)] = id(level) not in finite
            elif id(level.node) in memo:
                memo[id(part)] = memo[id(level.node)]
            else:
                stack += [(part, True), (level.node, False)]
        elif isinstance(part, Deferred):
            memo[id(part)] = False  # a free-form value
        elif not visited:
            stack.append((part, True))
            stack.extend((sub, False) for sub in sub_expressions(part) if id(sub) not in memo)
        else:
            memo[id(part)] = _empty_given(part, memo)
    return memo[id(node)]


def _empty_given(part: Node, memo: dict[int, bool]) -> bool:
    """Whether a composite node matches nothing, its sub-expressions' verdicts in ``memo``."""
    if isinstance(part, Concat):
        return any(memo[id(sub)] for sub in part.parts)
    if isinstance(part, Union):
        return all(memo[id(sub)] for sub in part.alternatives)
    if isinstance(part, Repeat):
        return part.minimum > 0 and memo[id(part.node)]
    assert isinstance(part, Graph)
    return part.reaches_no_end(lambda sub: memo[id(sub)])

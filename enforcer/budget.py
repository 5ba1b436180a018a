"""The compile-time budget: how large an expression's automaton can get, known before it is built.

:func:`nfa_size` counts the states the Thompson construction in :mod:`enforcer.automaton` will
create for a :class:`~enforcer.automaton.Node`, exactly: every use of a shared sub-expression
counts (the builder copies it at each use), a bounded repeat counts each copy, an embedded DFA
counts its states. The schema compiler measures every sub-schema's expression as it is made and
refuses, naming the pointer, the first one past :attr:`SchemaOptions.max_nfa_states
<enforcer.json_schema.SchemaOptions.max_nfa_states>`, so that neither compile nor the first
mask can explode (the lazy DFA's states are subsets of these NFA states, built one per byte a
walk reads). Cost: linear in the number of distinct nodes (each is measured once per
:class:`SizeMeter`); lifetime: one schema compile.
"""

from __future__ import annotations

from .automaton import EPSILON, NOTHING, ByteSet, Concat, Embedded, Graph, Node, Repeat, Union

DEFAULT_MAX_NFA_STATES = 2_000_000
"""Default budget: NFA states per compiled value automaton. The largest expression of the
7,491 shared corpus schemas is far below it (see ``tests/test_hostile.py``); a NFA this large
takes about 0.5 s and 100 MB to build."""


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Concat):
        return node.parts
    if isinstance(node, Union):
        return node.alternatives
    if isinstance(node, Repeat):
        return (node.node,)
    if isinstance(node, Graph):
        return tuple(sub for _, sub, _ in node.edges)
    return ()


class SizeMeter:
    """Memoised :func:`nfa_size` over the nodes of one compile (nodes are immutable, so a size
    never changes; the meter keeps each measured node alive so its id stays unique)."""

    def __init__(self) -> None:
        self._sizes: dict[int, tuple[Node, int]] = {}

    def size(self, node: Node) -> int:
        """NFA states the builder creates for ``node`` (iterative: no recursion limit)."""
        sizes = self._sizes
        hit = sizes.get(id(node))
        if hit is not None:
            return hit[1]
        stack: list[tuple[Node, bool]] = [(node, False)]
        while stack:
            current, expanded = stack.pop()
            if id(current) in sizes:
                continue
            children = _children(current)
            if not expanded:
                pending = {id(c): c for c in children if id(c) not in sizes}  # a shared child once
                if pending:
                    stack.append((current, True))
                    stack.extend((c, False) for c in pending.values())
                    continue
            sizes[id(current)] = (current, self._own(current, [sizes[id(c)][1] for c in children]))
        return sizes[id(node)][1]

    @staticmethod
    def _own(node: Node, child_sizes: list[int]) -> int:
        """States of ``node`` given its children's (mirrors ``_NFA._build``)."""
        if isinstance(node, ByteSet) or node is EPSILON or node is NOTHING:
            return 0
        if isinstance(node, Concat):
            return len(node.parts) - 1 + sum(child_sizes)
        if isinstance(node, Union):
            return sum(child_sizes)
        if isinstance(node, Repeat):
            (inner,) = child_sizes
            optional = 1 if node.maximum is None else node.maximum - node.minimum
            joints = node.minimum + (2 if node.maximum is None else optional)
            return joints + (node.minimum + optional) * inner
        if isinstance(node, Graph):
            return node.num_states + sum(child_sizes)
        if isinstance(node, Embedded):
            return node.dfa.num_states
        return 0


def nfa_size(node: Node) -> int:
    """NFA states the Thompson construction creates for ``node`` (see :class:`SizeMeter`)."""
    return SizeMeter().size(node)

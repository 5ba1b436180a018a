"""Byte-level regular expressions and the deterministic automata they compile to.

Every constraint in the library (JSON values, string patterns, call ids) is expressed as a
:class:`Node` over bytes and compiled once into a trimmed, minimal :class:`DFA`: state 0 is the
start, ``transitions[s, b]`` is the next state or ``-1`` (held as ``table[s, classes[b]]``, one
column per class of bytes read alike), and every live state can still reach an accepting one,
so "the walk did not die" means "the text can still be completed".

Cost: Thompson construction and subset construction are linear in the size of the expression and
the resulting automaton; minimisation is vectorised with numpy. Nodes and DFAs are immutable.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import hashlib
import itertools
from array import array
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, Sequence
from weakref import WeakKeyDictionary

import numpy as np

from .errors import SchemaTooComplexError

try:
    from ._kernels import (BLOCK_STATE_FLAG, DEFERRED_PERIOD, SubsetConstruction, TableReader, ThompsonNFA,
                           blocks_last, column_classes, dfa_product, finalised_table, index_single_bytes,
                           live_order, moore_classes, nfa_csr, reaching, text_trie)
    from ._kernels import counted_live as _counted_live_kernel
except ImportError:  # a source tree without the built extension: the Python walks do the work
    SubsetConstruction = TableReader = ThompsonNFA = blocks_last = dfa_product = finalised_table = live_order = None
    moore_classes = index_single_bytes = None
    column_classes = None
    nfa_csr = reaching = _counted_live_kernel = text_trie = None
    DEFERRED_PERIOD = -1
    BLOCK_STATE_FLAG = 2
if TYPE_CHECKING:
    from ._kernels import TrieWalk

DEAD = -1
ROW_BYTES = 1_180
"""A row as an int array of 256 entries (the form byte-by-byte walks read)."""
FIRST_TABLE_ROWS = (256, 4096)
"""Bounds on a lazy automaton's first table capacity, which is its NFA's state count: room for
the rows a walk builds without stopping to grow the table (a 512-row copy took ~50 us inside
first passes). Allocated uninitialised (memory is touched only where rows are built), counted
whole."""
SUBSET_BYTES = 300
"""About what one lazily built state's NFA subset (its key and index entry) takes, besides its members."""
SUBSET_ITEM_BYTES = 24
"""About what each NFA state in a subset or a closure adds (4 bytes in its key, a slot in its
closure tuple, a share of the int objects and of the sets a row is built from)."""
NFA_STATE_BYTES = 50
"""About what one NFA state takes at the peak of building a lazy automaton's NFA (its edges and
epsilons, handed over to the per-state slices made from them: 49-50 bytes measured on 5-6
million-state NFAs); the subset construction's per-state scratch is made a page of 4,096
states at a time, where a closure first reaches one."""
BLOCK_STATE_BYTES = 18
"""About what one state of an embedded DFA takes in the NFA at its peak (its slots in the
per-state slices and flags; no edges: 17 bytes measured on 1.6 million block states)."""
MAX_WHOLE_NFA_STATES = 4_000_000
"""Most NFA states of an automaton built whole (:attr:`Node.whole_states`: every
:class:`Deferred` part as its ``bounded``), checked before it is built: a shared part written
once per use may be far larger than the lazily built automaton that holds it as placeholders."""
DEFAULT_MAX_STATES = 200_000
DEFAULT_MAX_AUTOMATON_BYTES = 512 << 20
"""Decode-time budget of one lazy automaton: its NFA, its subsets, its table and rows."""
MINIMISE_LIMIT = 300
"""Larger automata are kept as built: refinement rounds grow with their depth, and a decoding
path visits one state per byte whether or not equivalent states were merged (masks are computed
lazily per visited state), so minimising them buys little and costs most of a compile."""


class EagerBudget:
    """States one compile may build whole (subset tables and products, summed), and the
    automata it built, by what they were built from: see :func:`eager_budget`."""

    __slots__ = ("limit", "used", "keys", "built")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.keys = StructureKeys()
        self.built: dict[tuple, tuple] = {}
        """A built automaton by its operands' keys (:meth:`StructureKeys.key`, or the identities
        of the automata a product multiplies), with the operands it keeps alive: the last
        element of each entry."""


def _built_once(key: Callable[[StructureKeys], tuple], build: Callable[[], "DFA"], operands: tuple = ()) -> "DFA":
    """``build()``, or inside an :func:`eager_budget` the automaton this compile built before
    from the same ``key`` (made from its structure keys), which spends nothing; ``operands``
    are kept alive with it where the key holds their identities."""
    budget = _EAGER_BUDGET.get()
    if budget is None:
        return build()
    k = key(budget.keys)
    hit = budget.built.get(k)
    if hit is None:
        hit = budget.built[k] = (*operands, build())
    return hit[-1]


_EAGER_BUDGET: contextvars.ContextVar[EagerBudget | None] = contextvars.ContextVar("eager_budget", default=None)


@contextlib.contextmanager
def eager_budget(limit: int) -> Iterator[EagerBudget]:
    """Around one compile: every automaton built whole inside (by :func:`compile_node` or a
    product) adds its states to a running total, and the build that takes it past ``limit``
    raises :class:`SchemaTooComplexError` (``max_eager_states``), so that no schema spends
    minutes intersecting automata that are each within ``max_states``. An automaton built
    again from the same expression (one definition intersected at several pointers, a fallback
    attempt) or the same operands is the one built before, at no cost (Prometheus' config:
    152 of 173 builds, 1.4 million states). Per context (thread, task); a nested compile has
    its own. Lifetime: the compile's, with every automaton built inside."""
    budget = EagerBudget(limit)
    token = _EAGER_BUDGET.set(budget)
    try:
        yield budget
    finally:
        _EAGER_BUDGET.reset(token)


def eager_states_spent() -> int | None:
    """States the current :func:`eager_budget` has counted so far (None: no budget here)."""
    budget = _EAGER_BUDGET.get()
    return None if budget is None else budget.used


def refund_eager_states(used: int) -> None:
    """Set the current :func:`eager_budget`'s count back to ``used`` (an earlier reading of
    :func:`eager_states_spent`): a compile that starts over at other settings, whose automata
    are built again, is bounded per attempt, not by what its abandoned attempts spent."""
    budget = _EAGER_BUDGET.get()
    if budget is not None:
        budget.used = used


def _spend(states: int) -> None:
    """Count ``states`` built whole against the current :func:`eager_budget` (if any)."""
    budget = _EAGER_BUDGET.get()
    if budget is not None:
        budget.used += states
        if budget.used > budget.limit:
            raise _eager_exceeded(budget.limit)


def _build_limit(max_states: int | None) -> int | None:
    """The most states the next automaton built whole may have: ``max_states``, or what the
    current :func:`eager_budget` has left when that is less, so that a build the budget cannot
    afford stops where it runs out instead of finishing first (a product that reaches
    ``max_states`` takes seconds)."""
    budget = _EAGER_BUDGET.get()
    if budget is None:
        return max_states
    left = max(budget.limit - budget.used, 0)
    return left if max_states is None or left < max_states else max_states


def _limit_exceeded(max_states: int | None, limit: int | None) -> SchemaTooComplexError:
    """The error of a build stopped at ``limit`` (from :func:`_build_limit`): the eager budget's
    when that was the tighter bound, else ``max_states``'."""
    if limit is not None and (max_states is None or limit < max_states):  # only a budget makes it less
        return _eager_exceeded(_EAGER_BUDGET.get().limit)
    return states_exceeded(max_states)


def _eager_exceeded(limit: int) -> SchemaTooComplexError:
    return SchemaTooComplexError(f"building automata whole takes more than {limit:,} states",
                                 budget=f"max_eager_states={limit}")


def states_exceeded(max_states: int) -> SchemaTooComplexError:
    """The error of an automaton built eagerly past ``max_states`` states (``SchemaOptions.max_states``),
    without a pointer: the schema compiler names the sub-schema and keyword it was building."""
    return SchemaTooComplexError(f"automaton exceeds {max_states:,} states", budget=f"max_states={max_states}")


# --------------------------------------------------------------------------------------------
# Expression tree


class Node:
    """A regular expression over bytes. Build with the helper functions below.

    ``nfa_states``: exactly how many states the Thompson NFA of the node has (what
    :class:`_NFA` builds between its start and end for a lazily built automaton), known at
    construction from the children's counts: every use of a shared sub-expression counts (the
    builder copies it at each use), a bounded repeat counts each copy, an embedded DFA counts
    its states, a :class:`Deferred` node its placeholder. The compile-time budget reads it
    (:func:`nfa_size`) at no cost.

    ``block_states``: how many of those are the states of embedded DFAs (:class:`Embedded`,
    every use counted) and placeholders, which hold no edges of their own in the NFA (see
    :func:`nfa_budget_size`).

    ``whole_states``: the states of the NFA an automaton built whole makes (each placeholder's
    ``bounded`` in its place), checked against ``MAX_WHOLE_NFA_STATES`` before it is built.

    ``empty``: whether the node matches no string at all, also known at construction from the
    children's (exact: a sequence is empty when a part is, a union when every branch is, a
    graph when no path of non-empty edges joins its start to an accepting state)."""

    __slots__ = ()
    nfa_states: int
    block_states: int
    whole_states: int
    empty: bool


def _set_derived(node: Node, count: int, empty: bool, blocks: int, whole: int) -> None:
    """Record what a node's constructor derives from its children (frozen dataclasses: written
    through their slots' descriptors, half the cost of ``object.__setattr__``; a large schema's
    compile builds tens of thousands of nodes)."""
    setters = _DERIVED_SETTERS.get(type(node))
    if setters is None:
        setters = _DERIVED_SETTERS[type(node)] = _slot_setters(type(node), _DERIVED_FIELDS)
    set_count, set_whole, set_empty, set_blocks = setters
    set_count(node, count)
    set_whole(node, whole)
    set_empty(node, empty)
    set_blocks(node, blocks)


_DERIVED_FIELDS = ("nfa_states", "whole_states", "empty", "block_states")
_DERIVED_SETTERS: dict[type, tuple[Callable[[Any, Any], None], ...]] = {}


def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of each named slot of ``cls`` (a frozen dataclass's fields, written once
    by its constructor)."""
    return tuple(next(c.__dict__[name] for c in cls.__mro__ if name in c.__dict__).__set__ for name in names)


@dataclass(frozen=True, slots=True, eq=False)
class ByteSet(Node):
    """One byte out of the inclusive ranges ``((lo, hi), ...)``."""

    ranges: tuple[tuple[int, int], ...]
    nfa_states = 0
    block_states = 0
    whole_states = 0

    @property
    def empty(self) -> bool:
        return not self.ranges


@dataclass(frozen=True, slots=True, eq=False)
class Concat(Node):
    parts: tuple[Node, ...]
    nfa_states: int = field(init=False, repr=False)
    empty: bool = field(init=False, repr=False)
    block_states: int = field(init=False, repr=False)
    whole_states: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        count, empty, blocks, whole = len(self.parts) - 1, False, 0, len(self.parts) - 1
        for p in self.parts:  # one pass: built tens of thousands of times per large schema
            count += p.nfa_states
            blocks += p.block_states
            whole += p.whole_states
            empty = empty or p.empty
        _set_derived(self, count, empty, blocks, whole)

    @classmethod
    def of_flat(cls, parts: tuple[Node, ...], count: int, empty: bool, blocks: int, whole: int) -> "Concat":
        """A Concat of ``parts`` whose derived fields the caller summed already (:func:`seq`,
        from the flattened parts' own sums: a 20-part key-and-value member costs one pass over
        its 3 arguments, not one over its 20 parts)."""
        node = object.__new__(cls)
        _set_concat_parts(node, parts)
        _set_derived(node, count, empty, blocks, whole)
        return node


(_set_concat_parts,) = _slot_setters(Concat, ("parts",))


@dataclass(frozen=True, slots=True, eq=False)
class Union(Node):
    alternatives: tuple[Node, ...]
    nfa_states: int = field(init=False, repr=False)
    empty: bool = field(init=False, repr=False)
    block_states: int = field(init=False, repr=False)
    whole_states: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        count, empty, blocks, whole = 0, True, 0, 0
        for a in self.alternatives:
            count += a.nfa_states
            blocks += a.block_states
            whole += a.whole_states
            empty = empty and a.empty
        _set_derived(self, count, empty, blocks, whole)

    @classmethod
    def of_flat(cls, alternatives: tuple[Node, ...], count: int, empty: bool, blocks: int, whole: int) -> "Union":
        """A Union of ``alternatives`` whose derived fields the caller summed already
        (:func:`alt`, in its pass over them)."""
        node = object.__new__(cls)
        _set_union_alternatives(node, alternatives)
        _set_derived(node, count, empty, blocks, whole)
        return node


(_set_union_alternatives,) = _slot_setters(Union, ("alternatives",))


@dataclass(frozen=True, slots=True, eq=False)
class Repeat(Node):
    """``node{minimum,maximum}``; ``maximum=None`` is unbounded."""

    node: Node
    minimum: int
    maximum: int | None
    nfa_states: int = field(init=False, repr=False)
    empty: bool = field(init=False, repr=False)
    block_states: int = field(init=False, repr=False)
    whole_states: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        optional = 1 if self.maximum is None else self.maximum - self.minimum
        joints = self.minimum + (2 if self.maximum is None else optional)
        copies = self.minimum + optional
        _set_derived(self, joints + copies * self.node.nfa_states, self.minimum > 0 and self.node.empty,
                     copies * self.node.block_states, joints + copies * self.node.whole_states)


@dataclass(frozen=True, slots=True, eq=False)
class Embedded(Node):
    """An already compiled :class:`DFA` (or a :class:`CountedDFA`) used as a sub-expression."""

    dfa: "DFA | CountedDFA"
    nfa_states: int = field(init=False, repr=False)
    empty: bool = field(init=False, repr=False)
    block_states: int = field(init=False, repr=False)
    whole_states: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _set_derived(self, self.dfa.num_states, self.dfa.is_empty, self.dfa.num_states, self.dfa.num_states)


@dataclass(frozen=True, slots=True, eq=False)
class Deferred(Node):
    """A sub-expression built a level at a time: ``level()`` is its outermost level, whose
    deeper levels are :class:`Deferred` nodes in turn (free-form JSON values: any nesting, as
    deep as a text goes; ``$ref`` recursion and sub-values used many times:
    :mod:`enforcer.knots`). A lazily built automaton (:class:`LazyDFA`) holds one placeholder
    state per use and adds a level's states the first time a walk reaches it (see
    :class:`LevelTemplate`); an automaton built whole builds ``bounded`` instead (the same
    language cut at a fixed depth, or the level itself). As a placeholder it counts one NFA
    state, one of a block (:attr:`Node.nfa_states`). Identity matters: keep one node per
    language (cached)."""

    level: Callable[[], Node]
    bounded: Node
    templates: dict = field(default_factory=dict, init=False, repr=False)
    """:func:`level_template` per builder kind, made on first use."""
    whole_states: int = field(init=False, repr=False)
    """Those of ``bounded``: what an automaton built whole builds in its place."""
    nfa_states = 1
    block_states = 1
    empty = False
    num_states = 1
    """As a block: a single placeholder state."""
    is_empty = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "whole_states", self.bounded.whole_states)


@dataclass(frozen=True, slots=True, eq=False, init=False)
class Graph(Node):
    """An automaton whose edges are expressions over states ``0..num_states-1``: built from
    ``edges``, ``(source, node, target)`` triples, and held as three columns, edge ``k`` going
    from ``sources[k]`` to ``targets[k]`` by ``bodies[k]`` (the collector stops tracking the
    two columns of ints at its first pass over them: a large schema's object graphs left
    thousands of triples for every collection inside a decode to walk); it starts at
    ``start`` and may end at any of ``accepting``. Used to lift character-level automata
    (regex engines) to bytes, and for objects' and arrays' members."""

    num_states: int
    start: int
    accepting: frozenset[int]
    sources: tuple[int, ...]
    bodies: tuple[Node, ...]
    targets: tuple[int, ...]
    nfa_states: int = field(init=False, repr=False)
    empty: bool = field(init=False, repr=False)
    block_states: int = field(init=False, repr=False)
    whole_states: int = field(init=False, repr=False)
    trim: bool = field(init=False, repr=False)
    """Every state reaches an accepting one (edges other than NOTHING taken as non-empty):
    the Thompson NFA leaves no dead state inside it."""

    def __init__(self, num_states: int, start: int, accepting: frozenset[int],
                 edges: Iterable[tuple[int, Node, int]]) -> None:
        self._set_shape(num_states, start, accepting, *(tuple(zip(*edges)) or ((), (), ())))
        # the sizes in one pass over the edges (a string enum's graph has one per character)
        count = whole = num_states
        blocks = 0
        empty_body = False
        for sub in self.bodies:
            count += sub.nfa_states
            whole += sub.whole_states
            blocks += sub.block_states
            empty_body = empty_body or (sub.empty and sub is not NOTHING)
        live = self._live_states()
        # with no empty body but NOTHING, the start reaches an end over non-empty edges exactly
        # when it is live: one backward pass serves both flags
        _set_derived(self, count, self.reaches_no_end() if empty_body else not live[self.start], blocks, whole)
        object.__setattr__(self, "trim", all(live))

    def _set_shape(self, num_states: int, start: int, accepting: frozenset[int], sources: tuple[int, ...],
                   bodies: tuple[Node, ...], targets: tuple[int, ...]) -> None:
        """Write the fields a constructor is given."""
        for set_field, value in zip(_GRAPH_SHAPE_SETTERS, (num_states, start, accepting, sources, bodies, targets)):
            set_field(self, value)

    @property
    def edges(self) -> Iterator[tuple[int, Node, int]]:
        """The ``(source, node, target)`` triples, made as they are read."""
        return zip(self.sources, self.bodies, self.targets)

    @classmethod
    def of_trim(cls, num_states: int, start: int, accepting: frozenset[int], sources: tuple[int, ...],
                bodies: tuple[Node, ...], targets: tuple[int, ...]) -> "Graph":
        """A graph given as columns whose maker knows it to be trim (every state reaches an
        accepting one: a minimal acyclic automaton of some sequences), its derived fields summed
        without the liveness pass (half the cost of a string enum's graph); built as any other
        graph where a body is empty or no state accepts."""
        count = whole = num_states
        blocks = 0
        for sub in bodies:
            if sub.empty:
                return cls(num_states, start, accepting, zip(sources, bodies, targets))
            count += sub.nfa_states
            whole += sub.whole_states
            blocks += sub.block_states
        if not accepting:
            return cls(num_states, start, accepting, zip(sources, bodies, targets))
        graph = object.__new__(cls)
        graph._set_shape(num_states, start, accepting, sources, bodies, targets)
        object.__setattr__(graph, "trim", True)
        _set_derived(graph, count, False, blocks, whole)
        return graph

    def trimmed(self) -> Node:
        """The same language without the states that reach no accepting one, nor their edges
        (a graph built state by state, such as an object's members, may leave some): a trim
        graph, whose NFA needs no liveness pass when built; NOTHING when the start is such a
        state. Cost: one backward pass over the edges."""
        if self.trim:
            return self
        return Graph.trimmed_of(self.num_states, self.start, self.accepting, tuple(self.edges))

    @classmethod
    def trimmed_of(cls, num_states: int, start: int, accepting: frozenset[int],
                   edges: tuple[tuple[int, Node, int], ...]) -> Node:
        """``Graph(num_states, start, accepting, edges).trimmed()`` with one liveness pass
        instead of three (the untrimmed graph is never built, the trimmed one is known trim: an
        object's graph, built state by state, usually leaves a dead state or two)."""
        reverse: list[list[int]] = [[] for _ in range(num_states)]
        for src, sub, dst in edges:
            if sub is not NOTHING:
                reverse[dst].append(src)
        live = _reaching(reverse, accepting)
        if not live[start]:
            return NOTHING
        if all(live):
            kept = edges
        else:
            number = {s: k for k, s in enumerate(s for s in range(num_states) if live[s])}
            kept = [(number[a], sub, number[b]) for a, sub, b in edges if sub is not NOTHING and live[a] and live[b]]
            num_states, start, accepting = len(number), number[start], frozenset(number[s] for s in accepting)
        sources, bodies, targets = (tuple(column) for column in zip(*kept)) if kept else ((), (), ())
        return cls.of_trim(num_states, start, accepting, sources, bodies, targets)

    def _live_states(self) -> list[bool]:
        """Per state, whether it reaches an accepting state over the edges other than NOTHING."""
        reverse: list[list[int]] = [[] for _ in range(self.num_states)]
        pairs = zip(self.sources, self.targets) if NOTHING not in self.bodies else \
            ((src, dst) for src, sub, dst in self.edges if sub is not NOTHING)
        for src, dst in pairs:
            reverse[dst].append(src)
        return _reaching(reverse, self.accepting)

    def reaches_no_end(self, empty: Callable[[Node], bool] = lambda body: body.empty) -> bool:
        """No path of edges whose bodies are not ``empty`` (default: their own flag) joins the
        start to an accepting state (depth first, stopping at the first accepting state reached)."""
        if self.start in self.accepting:
            return False
        outgoing: dict[int, list[int]] = {}
        for a, body, b in self.edges:
            if not empty(body):
                outgoing.setdefault(a, []).append(b)
        reached = {self.start}
        stack = [self.start]
        while stack:
            for b in outgoing.get(stack.pop(), ()):
                if b not in reached:
                    if b in self.accepting:
                        return False
                    reached.add(b)
                    stack.append(b)
        return True


_GRAPH_SHAPE_SETTERS = _slot_setters(Graph, ("num_states", "start", "accepting", "sources", "bodies", "targets"))


@dataclass(frozen=True, slots=True, eq=False)
class _Epsilon(Node):
    nfa_states = 0
    block_states = 0
    whole_states = 0
    empty = False


@dataclass(frozen=True, slots=True, eq=False)
class _Nothing(Node):
    nfa_states = 0
    block_states = 0
    whole_states = 0
    empty = True


EPSILON: Node = _Epsilon()
"""Matches the empty string."""
NOTHING: Node = _Nothing()
"""Matches no string at all."""


class StructureKeys:
    """Structural identities of nodes: two nodes get the same key exactly when they are the
    same expression (the same kinds, bytes, bounds and edges, the same embedded automata by
    identity; a placeholder is its ``bounded``, which is what an automaton built whole builds
    in its place), however many times a compiler built them. Hash-consed: each distinct node
    costs one tuple and one dictionary lookup, once (memoised by identity; the nodes are kept
    alive). Iterative. Lifetime: one compile (:class:`EagerBudget`)."""

    __slots__ = ("_by_id", "_interned")

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Node, int]] = {}
        self._interned: dict[tuple, int] = {}

    def key(self, node: Node) -> int:
        by_id = self._by_id
        stack = [node]
        while stack:
            part = stack[-1]
            if id(part) in by_id:
                stack.pop()
                continue
            below = (part.bounded,) if isinstance(part, Deferred) else sub_expressions(part)
            missing = [sub for sub in below if id(sub) not in by_id]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            if isinstance(part, Deferred):  # the same expression as its bounded, where built whole
                by_id[id(part)] = (part, by_id[id(part.bounded)][1])
            else:
                by_id[id(part)] = (part, self._interned.setdefault(self._shape(part), len(self._interned)))
        return by_id[id(node)][1]

    def _shape(self, node: Node) -> tuple:
        """``node``'s kind and fields, its sub-expressions by key (all known)."""
        by_id = self._by_id
        if isinstance(node, Concat):
            return "concat", *(by_id[id(p)][1] for p in node.parts)
        if isinstance(node, Union):
            return "union", *(by_id[id(a)][1] for a in node.alternatives)
        if isinstance(node, Repeat):
            return "repeat", by_id[id(node.node)][1], node.minimum, node.maximum
        if isinstance(node, Graph):
            return ("graph", node.num_states, node.start, node.accepting,
                    tuple((a, by_id[id(sub)][1], b) for a, sub, b in node.edges))
        if isinstance(node, ByteSet):
            return "bytes", node.ranges
        if isinstance(node, Embedded):
            return "embedded", id(node.dfa)
        if node is EPSILON or node is NOTHING:
            return "constant", node.empty
        raise TypeError(f"no structure key for {type(node).__name__}")  # pragma: no cover - every kind is above


def normalise_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def byte_set(ranges: Iterable[tuple[int, int]]) -> Node:
    norm = normalise_ranges(ranges)
    return ByteSet(norm) if norm else NOTHING


def byte_chars(chars: bytes) -> Node:
    """One byte out of ``chars``."""
    return byte_set((b, b) for b in chars)


_SINGLE_BYTES: tuple[Node, ...] = tuple(ByteSet(((b, b),)) for b in range(256))
"""One shared node per byte value (nodes are immutable); the compiled Thompson builder reads
their bytes by address (:func:`enforcer._kernels.index_single_bytes`)."""
if index_single_bytes is not None:
    index_single_bytes(_SINGLE_BYTES)


@lru_cache(maxsize=8192)
def literal(data: bytes | str) -> Node:
    """Exactly the bytes ``data`` (UTF-8 for text). Nodes are immutable: one per text, shared
    (keys and punctuation are built thousands of times in a large schema)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) < 2:
        return _SINGLE_BYTES[data[0]] if data else EPSILON
    # what seq makes of the single bytes, summed here: a byte set adds no state and is never empty
    joints = len(data) - 1
    return Concat.of_flat(tuple([_SINGLE_BYTES[b] for b in data]), joints, False, 0, joints)


def seq(*parts: Node) -> Node:
    """Concatenation, flattened (a Concat part's parts are taken in its place: no nesting to
    recurse through). Derived fields are summed over the arguments, a Concat argument's from
    its own fields."""
    flat: list[Node] = []
    count = blocks = whole = 0
    empty = False
    for part in parts:
        if part is NOTHING:
            return NOTHING
        if part is EPSILON:
            continue
        if type(part) is Concat:  # no subclass
            inner = part.parts
            flat += inner
            joints = len(inner) - 1
            count += part.nfa_states - joints
            whole += part.whole_states - joints
        else:
            flat.append(part)
            count += part.nfa_states
            whole += part.whole_states
        blocks += part.block_states
        empty = empty or part.empty
    if not flat:
        return EPSILON
    if len(flat) == 1:
        return flat[0]
    joints = len(flat) - 1
    return Concat.of_flat(tuple(flat), joints + count, empty, blocks, joints + whole)


def alt(*alternatives: Node) -> Node:
    """Union. Byte sets among the alternatives are merged into one; other duplicates are
    dropped by identity (structural hashing of large trees would cost more than it saves)."""
    flat: list[Node] = []
    seen: set[int] = set()
    byte_sets: list[ByteSet] = []
    count = blocks = whole = 0
    empty = True
    for a in alternatives:
        items = a.alternatives if isinstance(a, Union) else (a,)
        for item in items:
            if item is NOTHING or id(item) in seen:
                continue
            if isinstance(item, ByteSet):
                byte_sets.append(item)
                continue
            seen.add(id(item))
            flat.append(item)
            count += item.nfa_states
            blocks += item.block_states
            whole += item.whole_states
            empty = empty and item.empty
    if byte_sets:  # one byte set stands as it is; several are merged
        merged = byte_sets[0] if len(byte_sets) == 1 else byte_set([r for b in byte_sets for r in b.ranges])
        flat.insert(0, merged)
        empty = empty and merged.empty
    if not flat:
        return NOTHING
    if len(flat) == 1:
        return flat[0]
    return Union.of_flat(tuple(flat), count, empty, blocks, whole)


def repeat(node: Node, minimum: int = 0, maximum: int | None = None) -> Node:
    if maximum is not None and maximum < minimum:
        return NOTHING
    if maximum == 0 or node is EPSILON:
        return EPSILON
    if node is NOTHING:
        return EPSILON if minimum == 0 else NOTHING
    if minimum == 1 and maximum == 1:
        return node
    return Repeat(node, minimum, maximum)


def optional(node: Node) -> Node:
    return repeat(node, 0, 1)


def star(node: Node) -> Node:
    return repeat(node, 0, None)


def plus(node: Node) -> Node:
    return repeat(node, 1, None)


def separated(item: Node, separator: Node, minimum: int = 0, maximum: int | None = None) -> Node:
    """``item (separator item)*`` with between ``minimum`` and ``maximum`` items. Without a
    ``maximum``, the items after the first ``minimum - 1`` are one copy of ``item`` that the
    separator leads back to (a two-state :class:`Graph`), not a first item and a looping copy:
    the second item of a list then stands in the very states of the first, and shares their
    rows and masks."""
    if maximum is not None and (maximum < minimum or maximum == 0):
        return EPSILON if minimum == 0 and (maximum is None or maximum >= 0) else NOTHING
    if maximum is None:  # trim: both states reach the end unless a body is empty (of_trim checks)
        loop = Graph.of_trim(2, 0, frozenset({1}), (0, 1), (item, separator), (1, 0)).trimmed()
        if minimum == 0:
            return optional(loop)
        return seq(repeat(seq(item, separator), minimum - 1, minimum - 1), loop)
    rest_min = max(minimum - 1, 0)
    rest_max = None if maximum is None else maximum - 1
    one_or_more = seq(item, repeat(seq(separator, item), rest_min, rest_max))
    return optional(one_or_more) if minimum == 0 else one_or_more


# --------------------------------------------------------------------------------------------
# UTF-8


_UTF8_BOUNDS = ((0x0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def _utf8_sequences(lo: int, hi: int) -> list[Node]:
    """Byte expressions for the code points ``lo..hi`` of one encoded length (no splitting
    across lengths). Recursive on the leading byte, as in RE2's UTF-8 range compiler."""
    a, b = chr(lo).encode("utf-8", "surrogatepass"), chr(hi).encode("utf-8", "surrogatepass")
    assert len(a) == len(b)
    return _byte_range_sequences(a, b)


def _byte_range_sequences(a: bytes, b: bytes) -> list[Node]:
    """All byte strings s with a <= s <= b lexicographically, same length, where trailing
    positions range over continuation bytes (0x80-0xBF)."""
    if len(a) == 1:
        return [byte_set([(a[0], b[0])])]
    cont_lo, cont_hi = bytes([0x80] * (len(a) - 1)), bytes([0xBF] * (len(a) - 1))
    if a[0] == b[0]:
        return [seq(byte_set([(a[0], a[0])]), alt(*_byte_range_sequences(a[1:], b[1:])))]
    out: list[Node] = []
    first_lo, first_hi = a[0], b[0]
    if a[1:] != cont_lo:
        out.append(seq(byte_set([(a[0], a[0])]), alt(*_byte_range_sequences(a[1:], cont_hi))))
        first_lo += 1
    tail_hi_full = b[1:] == cont_hi
    if not tail_hi_full:
        first_hi -= 1
    if first_lo <= first_hi:
        out.append(seq(byte_set([(first_lo, first_hi)]),
                       *[byte_set([(0x80, 0xBF)])] * (len(a) - 1)))
    if not tail_hi_full:
        out.append(seq(byte_set([(b[0], b[0])]), alt(*_byte_range_sequences(cont_lo, b[1:]))))
    return out


def codepoints(ranges: Iterable[tuple[int, int]]) -> Node:
    """UTF-8 encodings of the code points in the inclusive ``ranges``. Surrogates
    (U+D800-U+DFFF) are never produced: they are not valid UTF-8."""
    pieces: list[Node] = []
    for lo, hi in normalise_ranges(ranges):
        for sub_lo, sub_hi in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)):
            for blo, bhi in _UTF8_BOUNDS:
                s, e = max(sub_lo, blo), min(sub_hi, bhi)
                if s <= e:
                    pieces.extend(_utf8_sequences(s, e))
    return alt(*pieces)


ANY_CODEPOINT = codepoints([(0, 0x10FFFF)])


# --------------------------------------------------------------------------------------------
# Thompson NFA


def _reaching(reverse: list[list[int]], targets: Iterable[int]) -> list[bool]:
    """Which states reach one of ``targets``, given each state's predecessors."""
    alive = [False] * len(reverse)
    stack = list(targets)
    for t in stack:
        alive[t] = True
    while stack:
        t = stack.pop()
        for s in reverse[t]:
            if not alive[s]:
                alive[s] = True
                stack.append(s)
    return alive


class Block(NamedTuple):
    """An :class:`Embedded` automaton inside an NFA: its state ``s`` is NFA state ``base + s``;
    its accepting states lead (by epsilon) to NFA state ``end``."""

    base: int
    dfa: "DFA | CountedDFA"
    end: int


_FRAGMENT_MIN_STATES = 16
"""Sub-expressions with fewer NFA states are rebuilt at each use (copying costs more)."""


class _Fragment(NamedTuple):
    """Where one build of a sub-expression put its states, edges and blocks in the NFA."""

    first_state: int
    first_edge: int
    first_eps: int
    first_block: int
    last_state: int
    last_edge: int
    last_eps: int
    last_block: int
    start: int
    end: int
    node: Node  # keeps the node alive while its id keys the fragment


class _NFA:
    """Thompson NFA held in flat integer arrays (no Python object per state or edge, so a large
    NFA adds nothing to the collector's work). The states of an embedded DFA are a numbered
    range with no stored edges: they are read off the DFA's table when a walk needs them."""

    __slots__ = ("num_states", "edges", "eps", "may_dead_end", "blocks", "deferred", "_fragments")

    def __init__(self, deferred: bool = False) -> None:
        self.num_states = 0
        self.deferred = deferred
        """Whether a :class:`Deferred` node is a placeholder block (else its ``bounded`` is built)."""
        self.edges = array("i")  # (source, lo, hi, target) per byte edge
        self.eps = array("i")  # (source, target) per epsilon edge
        self.may_dead_end = False  # set when a part could leave states that cannot finish
        self.blocks: list[Block] = []
        self._fragments: dict[int, _Fragment] = {}

    def new(self) -> int:
        self.num_states += 1
        return self.num_states - 1

    def _edge(self, src: int, lo: int, hi: int, dst: int) -> None:
        self.edges.extend((src, lo, hi, dst))

    def take_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The byte edges int32[n, 4] (source, lo, hi, target) and the epsilon edges int32[m, 2]
        (source, target), as :meth:`enforcer._kernels.ThompsonNFA.take_arrays` hands them over
        (here views of the builder's arrays)."""
        return (np.frombuffer(self.edges, dtype=np.int32).reshape(-1, 4),
                np.frombuffer(self.eps, dtype=np.int32).reshape(-1, 2))

    def _eps(self, src: int, dst: int) -> None:
        self.eps.extend((src, dst))

    def build(self, node: Node, start: int, end: int) -> None:
        """Add ``node`` between ``start`` and ``end``. A sub-expression used in several places
        (a ``$ref`` definition, a shared value) is built once; later uses copy its states and
        edges with numpy, renumbered."""
        if node.nfa_states < _FRAGMENT_MIN_STATES:  # small: built again at each use
            self._build(node, start, end)
            return
        fragment = self._fragments.get(id(node))
        if fragment is not None:
            self._copy(fragment, start, end)
            return
        first = (self.num_states, len(self.edges), len(self.eps), len(self.blocks))
        self._build(node, start, end)
        self._fragments[id(node)] = _Fragment(*first, self.num_states, len(self.edges), len(self.eps),
                                              len(self.blocks), start, end, node)

    def _copy(self, f: "_Fragment", start: int, end: int) -> None:
        offset = self.num_states - f.first_state

        def renumber(states: np.ndarray) -> np.ndarray:
            out = states + offset
            out[states == f.start] = start
            out[states == f.end] = end
            return out

        edges = np.frombuffer(self.edges[f.first_edge:f.last_edge], dtype=np.int32).reshape(-1, 4).copy()
        edges[:, 0], edges[:, 3] = renumber(edges[:, 0]), renumber(edges[:, 3])
        eps = np.frombuffer(self.eps[f.first_eps:f.last_eps], dtype=np.int32).reshape(-1, 2).copy()
        eps[:, 0], eps[:, 1] = renumber(eps[:, 0]), renumber(eps[:, 1])
        self.edges.frombytes(edges.tobytes())
        self.eps.frombytes(eps.tobytes())
        for block in self.blocks[f.first_block:f.last_block]:
            new_end = end if block.end == f.end else start if block.end == f.start else block.end + offset
            self.blocks.append(Block(block.base + offset, block.dfa, new_end))
        self.num_states += f.last_state - f.first_state

    def _build(self, node: Node, start: int, end: int) -> None:
        kind = type(node)
        if kind is ByteSet:
            edges = self.edges
            for lo, hi in node.ranges:
                edges.extend((start, lo, hi, end))
        elif kind is Concat:
            cur = start
            last = len(node.parts) - 1
            edges = self.edges
            for i, part in enumerate(node.parts):
                if i == last:
                    nxt = end
                else:
                    nxt = self.num_states
                    self.num_states += 1
                if type(part) is ByteSet:  # most parts of literals and keys: one edge, inline
                    for lo, hi in part.ranges:
                        edges.extend((cur, lo, hi, nxt))
                else:
                    self.build(part, cur, nxt)
                cur = nxt
        elif node is EPSILON:
            self._eps(start, end)
        elif node is NOTHING:
            self.may_dead_end = True
        elif isinstance(node, Union):
            for a in node.alternatives:
                self.build(a, start, end)
        elif isinstance(node, Repeat):
            cur = start
            for _ in range(node.minimum):
                nxt = self.new()
                self.build(node.node, cur, nxt)
                cur = nxt
            if node.maximum is None:
                loop = self.new()
                self._eps(cur, loop)
                back = self.new()
                self.build(node.node, loop, back)
                self._eps(back, loop)
                self._eps(loop, end)
            else:
                self._eps(cur, end)
                for _ in range(node.maximum - node.minimum):
                    nxt = self.new()
                    self.build(node.node, cur, nxt)
                    self._eps(nxt, end)
                    cur = nxt
        elif isinstance(node, Graph):
            if not node.trim:
                self.may_dead_end = True
            local = [self.new() for _ in range(node.num_states)]
            self._eps(start, local[node.start])
            for a in node.accepting:
                self._eps(local[a], end)
            for src, sub, dst in node.edges:
                self.build(sub, local[src], local[dst])
        elif isinstance(node, Embedded):
            dfa = node.dfa
            if dfa.is_empty:  # no state to enter: no block (its base would name the next state)
                self.may_dead_end = True
                return
            base = self.num_states
            self.num_states += dfa.num_states
            self.blocks.append(Block(base, dfa, end))
            self._eps(start, base)
        elif kind is Deferred:
            if self.deferred:
                base = self.new()
                self.blocks.append(Block(base, node, end))
                self._eps(start, base)
            else:
                self.build(node.bounded, start, end)
        else:  # pragma: no cover - programming error
            raise TypeError(f"not a Node: {node!r}")


class _BlocksLast(NamedTuple):
    """An NFA renumbered by :func:`_blocks_last`."""

    edges: np.ndarray
    eps: np.ndarray
    blocks: list[Block]
    states: list[int]
    num_regular: int


def _blocks_last(n: int, edges: np.ndarray, eps: np.ndarray, blocks: list[Block],
                 states: Sequence[int], compiled: bool = True) -> _BlocksLast:
    """The NFA of ``n`` states (``edges`` int32[E, 4], ``eps`` int32[M, 2], ``blocks`` in
    ascending bases) renumbered so that the states outside blocks come first, in their order
    (``0..num_regular-1``), and the blocks' states after them, block after block: whatever
    is kept per state (slices of edges, flags) then covers the states outside blocks only, and
    a block costs nothing per state. ``states`` (states outside blocks) are renumbered too.
    Byte edges never touch a block's states; an epsilon edge may enter a block at its base.
    The edge arrays (the builder's, handed over) are renumbered in place, by the compiled
    :func:`enforcer._kernels.blocks_last` when built and ``compiled``, else with numpy (its
    reference). Cost: a binary search over the bases per edge end, nothing per block state."""
    if not blocks:
        return _BlocksLast(edges, eps, blocks, list(states), n)
    bases = [b.base for b in blocks]
    before = [0, *itertools.accumulate(b.dfa.num_states for b in blocks)]
    r = n - before[-1]

    def renumbered(state: int) -> int:
        k = bisect.bisect_right(bases, state)
        if k and bases[k - 1] == state:  # entering a block at its base
            return r + before[k - 1]
        return state - before[k]

    if compiled and blocks_last is not None:
        blocks_last(edges, eps, np.array(bases, dtype=np.int64), np.array(before, dtype=np.int64), r)
    else:
        for column in (edges[:, 0], edges[:, 3], eps[:, 0], eps[:, 1]):
            column[...] = [renumbered(x) for x in column.tolist()]
    laid = [Block(r + before[j], b.dfa, renumbered(b.end)) for j, b in enumerate(blocks)]
    return _BlocksLast(edges, eps, laid, [renumbered(x) for x in states], r)


def thompson_pieces(node: Node, cap: int) -> int:
    """The pieces the Thompson construction builds for ``node``, at most ``cap``: each byte
    set (one edge per range), epsilon and nothing one, a graph its states, an embedded
    automaton its states, a shared sub-node counted at each use and a bounded repeat once per
    copy (anchors inside nested loops multiply copies). Linear in the distinct sub-nodes:
    :meth:`enforcer._kernels.ThompsonNFA.pieces` when built (an unanchored path pattern's: 33
    us against 88), else :func:`_pieces_reference`."""
    if ThompsonNFA is not None:
        return new_nfa().pieces(node, cap)
    return _pieces_reference(node, {}, cap)


def _pieces_reference(node: Node, memo: dict[int, int], cap: int) -> int:
    """:func:`thompson_pieces` in Python: the fallback and the oracle of its differential
    test."""
    hit = memo.get(id(node))
    if hit is None:
        if isinstance(node, Concat):
            hit = sum(_pieces_reference(p, memo, cap) for p in node.parts)
        elif isinstance(node, Union):
            hit = sum(_pieces_reference(a, memo, cap) for a in node.alternatives)
        elif isinstance(node, Repeat):
            copies = node.maximum if node.maximum is not None else node.minimum + 1
            hit = _pieces_reference(node.node, memo, cap) * max(copies, 1)
        elif isinstance(node, Graph):
            hit = node.num_states + sum(_pieces_reference(body, memo, cap) for body in node.bodies)
        elif isinstance(node, Embedded):
            hit = node.dfa.num_states
        else:
            hit = 1
        hit = memo[id(node)] = min(hit, cap)
    return hit


def new_nfa(compiled: bool = True, deferred: bool = False) -> "_NFA":
    """An empty Thompson NFA builder: the compiled :class:`enforcer._kernels.ThompsonNFA` when
    built and ``compiled``, else :class:`_NFA` (its reference: same states, same edges).
    ``deferred``: :class:`Deferred` nodes become placeholder blocks (else their ``bounded`` is
    built)."""
    if compiled and ThompsonNFA is not None:
        return ThompsonNFA((ByteSet, Concat, Union, Repeat, Graph, Embedded, EPSILON, NOTHING, Block, Deferred),
                           _FRAGMENT_MIN_STATES, deferred)
    return _NFA(deferred)


class LevelTemplate(NamedTuple):
    """One level of a :class:`Deferred` node as NFA states ``0..num_states-1``, which an
    expansion appends to a lazy automaton's NFA shifted past its last state: per-state slices
    of byte edges and epsilon edges (CSR, as :func:`~enforcer._kernels.nfa_csr` makes them),
    what a subset keeps of each state, the level's start and end (its end gets an epsilon edge
    to the continuation of the placeholder it replaces), the level's own placeholders (its
    deeper levels) and its embedded automata. An embedded automaton stays a block at every
    expansion: its rows are its own automaton's, so states inside it share that automaton's
    masks (:meth:`_Determiniser.embedding`) wherever the level is copied."""

    num_states: int
    start: int
    end: int
    edge_start: np.ndarray  # int32[num_states + 1]
    edge_lo: np.ndarray  # uint8[E]
    edge_hi: np.ndarray  # uint8[E]
    edge_dst: np.ndarray  # int32[E]
    eps_start: np.ndarray  # int32[num_states + 1]
    eps_dst: np.ndarray  # int32[M]
    important: np.ndarray  # uint8[num_states]: 1 reads a byte, BLOCK_STATE, 0 passes epsilon edges on only
    placeholders: tuple["Placeholder", ...]
    blocks: tuple[Block, ...]
    """Embedded automata (not placeholders), numbered as in the template, bases ascending."""
    kernel_blocks: tuple
    """``blocks`` as the compiled construction takes them (``(base, *rows, end)``, see
    :func:`_kernel_block`); empty for the Python construction."""


BLOCK_STATE = BLOCK_STATE_FLAG
"""A template state inside an embedded automaton: a subset keeps it, its edges are the
automaton's row (the compiled construction reads the same flag)."""


class Placeholder(NamedTuple):
    """A :class:`Deferred` node's state in an NFA and the state its language leads to."""

    state: int
    node: Deferred
    continuation: int


def level_template(node: Deferred, compiled: bool = True) -> LevelTemplate:
    """``node.level()`` as a :class:`LevelTemplate`, built by :func:`new_nfa` (``compiled``
    says which builder) and kept on the node. Cost: one Thompson construction of one level
    (a free-form level: ~190 states), once per node and builder."""
    hit = node.templates.get(compiled)
    if hit is not None:
        return hit
    nfa = new_nfa(compiled, deferred=True)
    start, end = nfa.new(), nfa.new()
    nfa.build(node.level(), start, end)
    n = nfa.num_states
    edges, eps = nfa.take_arrays()
    placeholders = tuple(Placeholder(b.base, b.dfa, b.end) for b in nfa.blocks if isinstance(b.dfa, Deferred))
    blocks = tuple(b for b in nfa.blocks if not isinstance(b.dfa, Deferred))
    *csr, important = (nfa_csr if compiled and nfa_csr is not None else _nfa_csr_reference)(n, edges, eps, None)
    for block in blocks:
        important[block.base:block.base + block.dfa.num_states] = BLOCK_STATE
    kernel_blocks = tuple((b.base, *_kernel_block(b.dfa), b.end) for b in blocks) if compiled else ()
    hit = node.templates[compiled] = LevelTemplate(n, start, end, *csr, important, placeholders, blocks,
                                                   kernel_blocks)
    return hit


MAX_LEVEL_BLOCK_STATES = 20_000
"""Most states of one embedded automaton inside a level built on demand (a knot's or a
share's, :mod:`enforcer.knots`): each expansion numbers the automaton's states anew, about
50 bytes each in the construction's per-state arrays (a ``maxLength`` of 1,000 is about
20,000 states, 1 MB a copy), so a larger one is refused where the level is made."""


def sub_expressions(node: Node) -> Sequence[Node]:
    """The sub-expressions of a composite node, in order (none for the others: a
    :class:`Deferred` node's levels are not among them)."""
    if isinstance(node, Concat):
        return node.parts
    if isinstance(node, Union):
        return node.alternatives
    if isinstance(node, Repeat):
        return (node.node,)
    if isinstance(node, Graph):
        return node.bodies
    return ()


# --------------------------------------------------------------------------------------------
# DFA


class _Reading:
    """Reading a string through an automaton that offers ``row``, ``accepting_list`` and
    ``is_empty``."""

    __slots__ = ()

    def walk(self, state: int, data: bytes) -> int:
        """State after reading ``data`` from ``state`` (``-1`` when it dies)."""
        for b in data:
            state = self.row(state)[b]
            if state < 0:
                return DEAD
        return state

    read = walk
    """What a matcher calls per token (a lazy automaton reads through its compiled reader)."""

    def matches(self, data: bytes | str) -> bool:
        if isinstance(data, str):
            data = data.encode("utf-8")
        if self.is_empty:
            return False
        s = self.walk(0, data)
        return s >= 0 and bool(self.accepting_list[s])


def _compact(table: np.ndarray, classes: np.ndarray | None = None) -> "ByteTable":
    """The compact form of ``table`` read through ``classes`` (each byte's column, any
    numbering; None: one column per byte): its distinct columns, numbered by their first byte,
    so that one table has one compact form. :func:`enforcer._kernels.column_classes` when
    built, else numpy (the same result). Cost: two or three passes over the table."""
    if classes is None:
        if table.shape[1] != 256:
            raise ValueError(f"a table without byte classes has 256 columns, not {table.shape[1]}")
        classes = _BYTE_COLUMNS
    table = np.ascontiguousarray(table, dtype=np.int32)
    merged, columns = (column_classes or _column_classes_reference)(table, np.ascontiguousarray(classes, np.uint8))
    merged.setflags(write=False)
    return ByteTable(columns, merged)


def _by_first_appearance(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``labels`` (int[n]) numbered 0, 1, ... in order of first appearance: ``(each element's
    number, int[n]; the index of each number's first element, ascending)``."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty(order.shape[0], dtype=np.intp)
    rank[order] = np.arange(order.shape[0])
    return rank[inverse.reshape(-1)], first[order]


def _column_classes_reference(table: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`enforcer._kernels.column_classes` in numpy: the fallback and the oracle of its
    differential test."""
    if table.shape[0] == 0:
        return np.zeros(256, dtype=np.uint8), table[:, :1]
    _, inverse = np.unique(table[:, classes], axis=1, return_inverse=True)
    numbers, lead_bytes = _by_first_appearance(inverse.reshape(-1))
    lead = classes[lead_bytes]
    if lead.shape[0] == table.shape[1] and np.array_equal(lead, np.arange(table.shape[1])):
        return numbers.astype(np.uint8), table
    return numbers.astype(np.uint8), np.ascontiguousarray(table[:, lead])


class DFA(_Reading):
    """A trimmed DFA over bytes (minimal when :func:`compile_node` built it from up to
    ``MINIMISE_LIMIT`` states).

    Held compact: :attr:`table` is an ``int32`` array of shape ``(num_states, k)``, one column
    per byte class, and :attr:`classes` (``uint8[256]``) the class of each byte, so that the
    next state of ``s`` on byte ``b`` is ``table[s, classes[b]]`` (``-1``: the dead state). The
    classes are the bytes whose columns are equal, numbered by their first byte: one table has
    one compact form. JSON automata have 13-76 classes, a table 4-20 times smaller than 256
    columns. :attr:`transitions` spreads it to ``(num_states, 256)`` on first use, for the walks
    that read bytes (kept: walked automata are the ones a matcher reaches). ``accepting`` is a
    bool array. State 0 is the start state. Immutable once built.
    """

    __slots__ = ("table", "classes", "accepting", "_transitions", "_rows", "_rows_built", "_ranges",
                 "_accepting_list", "_content_key", "_read_bytes", "_built_flags", "__weakref__")

    exhausted = None
    """A built DFA never stops growing (see :attr:`LazyDFA.exhausted`)."""

    def __init__(self, table: np.ndarray, accepting: np.ndarray, classes: np.ndarray | None = None,
                 compact: bool = False) -> None:
        """``table`` with ``classes`` (uint8[256]: each byte's column), or without them 256
        columns, one per byte. Equal columns are merged here (one or two passes over the
        table), unless ``compact`` says that ``table`` and ``classes`` are the compact form
        already (taken as they are)."""
        if not compact:
            table, classes = _compact(table, classes)
        self.table = table
        self.classes = classes
        self._transitions: np.ndarray | None = None
        self._content_key: bytes | None = None
        self._read_bytes: np.ndarray | None = None
        self._built_flags: np.ndarray | None = None  # every row is built: all ones, for the walks
        self.accepting = accepting
        self.table.setflags(write=False)
        self.accepting.setflags(write=False)
        self._rows: list[Sequence[int] | None] | None = None
        self._rows_built = 0
        self._ranges: list[list[tuple[int, int, int]]] | None = None
        self._accepting_list: list[bool] = accepting.tolist()

    @property
    def num_states(self) -> int:
        return int(self.table.shape[0])

    @property
    def is_empty(self) -> bool:
        """True when the DFA accepts no string."""
        return self.num_states == 0

    @property
    def transitions(self) -> np.ndarray:
        """The table spread to one column per byte (``int32[num_states, 256]``, read-only), made
        on first use and kept (1 KiB a state)."""
        if self._transitions is None:
            spread = np.take(self.table, self.classes, axis=1)
            spread.setflags(write=False)
            self._transitions = spread
        return self._transitions

    @property
    def rows(self) -> list[Sequence[int] | None]:
        """Transitions as one int array per state, a fast form for byte-by-byte walks; a state's
        entry is None until :meth:`row` first reads it (as in :attr:`LazyDFA.rows`): a walk
        pays for the rows it reads (about 0.5 us each), not for the whole table."""
        if self._rows is None:
            self._rows = [None] * self.num_states
        return self._rows

    def row(self, state: int) -> Sequence[int]:
        rows = self.rows
        r = rows[state]
        if r is None:
            # int arrays: the collector tracks them but they refer to nothing (a fresh tuple or
            # list of 256 ints costs each collection 256 visits, for a list as long as it lives)
            r = rows[state] = array("i", self.array_row(state).tobytes())
            self._rows_built += 1
        return r

    def all_rows(self) -> list[Sequence[int]]:
        """:attr:`rows` with every row built, for walks that read them without the None check
        (once per automaton, about 0.5 us a state)."""
        if self._rows_built < self.num_states:
            for state in range(self.num_states):
                self.row(state)
        return self.rows  # type: ignore[return-value]

    def array_row(self, state: int) -> np.ndarray:
        """The row of ``state``, one entry per byte (int32[256]: a view of the spread table once
        made, else a new array; not to be written)."""
        if self._transitions is not None:
            return self._transitions[state]
        return self.table[state][self.classes]

    @property
    def accepting_list(self) -> list[bool]:
        return self._accepting_list

    def memory_size_bytes(self) -> int:
        """Bytes held: the table, its spread form once made, plus the rows walks made in list
        form."""
        rows = self._rows_built * ROW_BYTES
        spread = self._transitions.nbytes if self._transitions is not None else 0
        return int(self.table.nbytes + self.classes.nbytes + self.accepting.nbytes) + spread + rows

    @property
    def content_key(self) -> bytes:
        """A digest of the table and the accepting states: equal keys, equal automata (state by
        state), whichever schema built them. Computed once (~1 ms per MB of table)."""
        if self._content_key is None:
            digest = hashlib.blake2b(digest_size=16)
            digest.update(self.classes.tobytes())
            digest.update(self.table.tobytes())
            digest.update(np.packbits(self.accepting).tobytes())
            self._content_key = digest.digest()
        return self._content_key

    @property
    def read_bytes(self) -> np.ndarray:
        """The bytes some state reads (bool[256], read-only; computed once, one pass over the
        table)."""
        if self._read_bytes is None:
            read = (self.table >= 0).any(axis=0)[self.classes] if self.num_states else np.zeros(256, dtype=bool)
            read.setflags(write=False)
            self._read_bytes = read
        return self._read_bytes

    def ensure(self, states: np.ndarray) -> np.ndarray:
        """All rows exist already: the table itself."""
        return self.transitions

    def kernel_view(self) -> tuple[np.ndarray, np.ndarray]:
        """(table, built flags as uint8) for the compiled walk: every row is built."""
        return self.transitions, self._all_built()

    def building_walk(self, walk: Callable[..., tuple]) -> tuple:
        """``walk(table, built flags, None)``: a built DFA has no row to build."""
        return walk(*self.kernel_view(), None)

    def walk_trie(self, kernel: "TrieWalk", state: int, words: np.ndarray,
                  starts: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Set in ``words`` (packed uint32) the bits of the tokens of ``kernel``'s trie that the
        DFA reads whole from ``state``, or with ``starts`` (int32 trie nodes, int32 states) the
        tokens below each node that the DFA reads whole from its state, the node's bytes read
        (:meth:`enforcer._kernels.TrieWalk.walk`)."""
        nodes, states = starts if starts is not None else (None, None)
        kernel.walk(self.transitions, self._all_built(), state, words, None, 0, nodes, states)

    def _all_built(self) -> np.ndarray:
        flags = self._built_flags
        if flags is None:
            flags = self._built_flags = np.ones(self.num_states, dtype=np.uint8)
        return flags

    def ranges(self, state: int) -> list[tuple[int, int, int]]:
        """Outgoing transitions of ``state`` as ``(lo, hi, target)`` byte ranges. All states'
        ranges are found at once on first use (vectorised over the table) and kept."""
        if self._ranges is None:
            table = np.asarray(self.transitions)
            starts_mask = np.ones(table.shape, dtype=bool)
            starts_mask[:, 1:] = table[:, 1:] != table[:, :-1]
            rows, starts = np.nonzero(starts_mask)
            ends = np.full(len(starts), 255, dtype=np.int64)
            same_row = rows[1:] == rows[:-1]
            ends[:-1][same_row] = starts[1:][same_row] - 1
            targets = table[rows, starts]
            keep = targets != DEAD
            out: list[list[tuple[int, int, int]]] = [[] for _ in range(table.shape[0])]
            for r, lo, hi, t in zip(rows[keep].tolist(), starts[keep].tolist(), ends[keep].tolist(),
                                    targets[keep].tolist()):
                out[r].append((lo, hi, t))
            self._ranges = out
        return self._ranges[state]

    def intersect(self, other: "DFA", max_states: int = DEFAULT_MAX_STATES) -> "DFA":
        """The product automaton: strings accepted by both."""
        if self.is_empty or other.is_empty:
            return _empty_dfa()
        return self._product(other, keep_other_dead=False, max_states=max_states)

    def difference(self, other: "DFA", max_states: int = DEFAULT_MAX_STATES) -> "DFA":
        """Strings accepted by ``self`` and not by ``other``."""
        if self.is_empty:
            return self
        return self._product(other, keep_other_dead=True, max_states=max_states)

    def _product(self, other: "DFA", keep_other_dead: bool, max_states: int) -> "DFA":
        """Pairs of states reached by the same strings. Intersection follows bytes both accept;
        difference follows every byte ``self`` accepts, ``other`` possibly dead (-1). The
        compiled breadth-first walk (:func:`enforcer._kernels.dfa_product`) when built, else
        :meth:`_product_reference` (same table, state for state)."""
        def build() -> DFA:
            limit = _build_limit(max_states)
            try:
                if dfa_product is None:
                    return self._product_reference(other, keep_other_dead, limit)
                pairs = state_pairs(self.table, self.classes, other.table, other.classes, limit, keep_other_dead)
            except SchemaTooComplexError:
                raise _limit_exceeded(max_states, limit) from None
            return self._from_pairs(other, keep_other_dead, pairs)

        return _built_once(lambda keys: ("product", id(self), id(other), keep_other_dead, max_states), build,
                           (self, other))

    def _product_reference(self, other: "DFA", keep_other_dead: bool, max_states: int) -> "DFA":
        """:meth:`_product` in Python: the fallback without the compiled kernels and the oracle
        of its differential test."""
        table, first, second = _pairs_reference(self.transitions, other.transitions if not other.is_empty else None,
                                                keep_other_dead, max_states)
        return self._from_pairs(other, keep_other_dead, StatePairs(table, _BYTE_COLUMNS, first, second))

    def _from_pairs(self, other: "DFA", keep_other_dead: bool, pairs: "StatePairs") -> "DFA":
        """The product automaton of :meth:`_product` from its pairs, trimmed and minimised."""
        table, classes, first, second = pairs
        _spend(table.shape[0])
        acc = self.accepting[first]
        seconds_accept = np.zeros(first.shape[0], dtype=bool)
        live = second >= 0
        seconds_accept[live] = other.accepting[second[live]]
        acc = acc & ~seconds_accept if keep_other_dead else acc & seconds_accept
        return _finalise(table, acc, classes=classes)

    def is_disjoint(self, other: "DFA") -> bool:
        return self.intersect(other).is_empty

    def __repr__(self) -> str:
        return f"DFA(states={self.num_states}, accepting={int(self.accepting.sum())})"


def _pairs_reference(a_t: np.ndarray, b_t: np.ndarray | None, keep_other_dead: bool,
                     max_states: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of states of two tables reached by the same strings, breadth first from
    ``(0, 0)`` (``b_t`` None: the second automaton is empty, every pair holds -1): the table over
    pair numbers and each pair's two states. Intersection follows bytes both read, with
    ``keep_other_dead`` every byte the first reads. In Python: the fallback of
    :func:`enforcer._kernels.dfa_product` and the oracle of its differential test."""
    width = a_t.shape[1]
    index = {(0, 0 if b_t is not None else DEAD): 0}
    pairs = list(index)
    rows: list[np.ndarray] = []
    dead_row = np.full(width, DEAD, dtype=np.int32)
    i = 0
    while i < len(pairs):
        sa, sb = pairs[i]
        ta = a_t[sa]
        tb = b_t[sb] if sb >= 0 else dead_row
        row = np.full(width, DEAD, dtype=np.int32)
        follow = (ta >= 0) if keep_other_dead else (ta >= 0) & (tb >= 0)
        for byte in np.flatnonzero(follow):
            key = (int(ta[byte]), int(tb[byte]))
            target = index.get(key)
            if target is None:
                target = index[key] = len(pairs)
                pairs.append(key)
                if len(pairs) > max_states:
                    raise states_exceeded(max_states)
            row[byte] = target
        rows.append(row)
        i += 1
    first = np.array([a for a, _ in pairs], dtype=np.int32)
    second = np.array([b for _, b in pairs], dtype=np.int32)
    return np.stack(rows), first, second


class StatePairs(NamedTuple):
    """The pairs of states of two automata reached by the same strings (:func:`state_pairs`)."""

    table: np.ndarray
    """int32[pairs, k]: each pair's row over pair numbers, one column per joint byte class."""
    classes: np.ndarray
    """uint8[256]: each byte's column of :attr:`table`."""
    first: np.ndarray
    """int32[pairs]: each pair's state of the first automaton."""
    second: np.ndarray
    """int32[pairs]: each pair's state of the second (-1: dead)."""


_BYTE_COLUMNS = np.arange(256, dtype=np.uint8)
_BYTE_COLUMNS.setflags(write=False)
"""The classes of a table with one column per byte."""


def joint_classes(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The byte classes two automata's classes split the bytes into, numbered by their first
    byte: ``(each byte's joint class uint8[256], each joint class's column of the first,
    of the second)``. About 10 us."""
    numbers, lead = _by_first_appearance(first.astype(np.int32) * 256 + second)
    return numbers.astype(np.uint8), np.ascontiguousarray(first[lead]), np.ascontiguousarray(second[lead])


def state_pairs(a_table: np.ndarray, a_classes: np.ndarray, b_table: np.ndarray, b_classes: np.ndarray,
                max_states: int, keep_other_dead: bool = False) -> StatePairs:
    """Two compact tables' pairs of states (each a table and its byte classes, as
    :class:`DFA` holds them) over their joint byte classes (see :func:`_pairs_reference`): the
    compiled walk when built. Past ``max_states`` pairs :class:`SchemaTooComplexError`."""
    classes, column_a, column_b = joint_classes(a_classes, b_classes)
    if dfa_product is None:
        found = _pairs_reference(a_table[:, column_a], b_table[:, column_b] if b_table.shape[0] else None,
                                 keep_other_dead, max_states)
    else:
        found = dfa_product(a_table, b_table, column_a, column_b, keep_other_dead, max_states)
        if found is None:
            raise states_exceeded(max_states)
    return StatePairs(found[0], classes, found[1], found[2])


def counted_repeat(unit: DFA, minimum: int, maximum: int) -> DFA:
    """``unit{minimum,maximum}`` as a table (:meth:`CountedDFA.dense`: no subset construction,
    no trim), for a prefix-free ``unit``; the empty automaton when ``minimum > maximum``."""
    if minimum > maximum:
        return _empty_dfa()
    return CountedDFA(unit, minimum, maximum).dense()


_COUNTED_UNITS: "WeakKeyDictionary[DFA, tuple[DFA, np.ndarray]]" = WeakKeyDictionary()
""":func:`_counted_unit` per unit automaton, as long as it lives (the encoded string character
is the unit of every ``maxLength`` of every compile)."""


def _counted_unit(unit: DFA) -> tuple[DFA, np.ndarray]:
    """(``unit`` trimmed, its step table: int32[q, 256], from each of its ``q`` inner states the
    inner state reached, ``q`` on completing a unit, or -1), checked to be a non-empty,
    prefix-free unit that does not accept the empty string; made once per unit (about 20 us of
    numpy calls) and read-only."""
    hit = _COUNTED_UNITS.get(unit)
    if hit is not None:
        return hit
    given = unit
    acc = unit.accepting
    if unit.is_empty or acc[0]:
        raise ValueError("a counted repeat needs a non-empty unit that does not accept the empty string")
    if (unit.transitions[acc] >= 0).any():
        raise ValueError("a counted repeat needs a prefix-free unit")
    order = _live_order(unit.transitions, acc)
    if order is not None and len(order) < unit.num_states:  # trimmed: every inner state leads somewhere
        unit = _renumbered(unit.transitions, acc, order)
        acc = unit.accepting
    inner = np.flatnonzero(~acc)  # start (0) first
    q = len(inner)
    local = np.full(unit.num_states, DEAD, dtype=np.int32)
    local[inner] = np.arange(q, dtype=np.int32)
    t = unit.transitions[inner]  # (q, 256)
    safe = np.where(t >= 0, t, 0)
    step = np.where(t < 0, DEAD, np.where(acc[safe], q, local[safe])).astype(np.int32)
    step.setflags(write=False)
    hit = _COUNTED_UNITS[given] = (unit, step)
    return hit


class CountedDFA:
    """``unit{minimum,maximum}`` for a prefix-free ``unit`` (no accepted string extends
    another, e.g. one encoded character), kept without its table. State ``k * q + s`` has read
    ``k`` units and stands at inner state ``s`` of the next (``q`` inner states, ``s = 0``
    between units); after ``maximum`` units only the state between units is left. The row of
    ``k * q + s`` is the unit's row ``s`` (:attr:`step`: an inner state, ``q`` on a completed
    unit, or dead) shifted by ``k * q``, so an embedding NFA reads ``q`` rows whatever the bound
    (:meth:`kernel_block`) and a lazy automaton builds only the positions a walk reaches: a
    ``maxLength: 8192`` string is 20 rows of 1 KiB instead of a 168 MB table. Cost to make: the
    unit's trim and rows (the accepting flags, ``maximum * q + 1`` bytes, on first use).
    Immutable."""

    __slots__ = ("unit", "minimum", "maximum", "period", "step", "_accepting", "_content_key", "_shortest_unit")

    def __init__(self, unit: DFA, minimum: int, maximum: int) -> None:
        if not 0 <= minimum <= maximum:
            raise ValueError(f"a counted repeat needs 0 <= minimum <= maximum, not {minimum}..{maximum}")
        unit, self.step = _counted_unit(unit)
        self.unit = unit
        """The unit, trimmed (its string bodies' masks are judged from it)."""
        self.minimum = minimum
        self.maximum = maximum
        self.period = self.step.shape[0]
        """States per unit (``q``)."""
        self._accepting: np.ndarray | None = None
        self._content_key: bytes | None = None
        self._shortest_unit = 0

    @property
    def num_states(self) -> int:
        return self.maximum * self.period + 1

    @property
    def shortest_unit(self) -> int:
        """Bytes of the unit's shortest string (1 for a character; made once, a breadth-first
        pass over the unit's rows)."""
        if not self._shortest_unit:
            q = self.period
            seen = np.zeros(q + 1, dtype=bool)
            seen[0] = True
            frontier = seen.copy()
            length = 0
            while not frontier[q] and frontier.any():
                targets = self.step[frontier[:q]]
                reached = np.zeros(q + 1, dtype=bool)
                reached[targets[targets >= 0]] = True
                frontier = reached & ~seen
                seen |= reached
                length += 1
            self._shortest_unit = length
        return self._shortest_unit

    is_empty = False
    """A counted repeat accepts ``minimum`` units at least."""

    @property
    def accepting(self) -> np.ndarray:
        """Whether each state accepts: between units, after ``minimum`` of them (made once)."""
        if self._accepting is None:
            accepting = np.zeros(self.num_states, dtype=bool)
            accepting[self.period * self.minimum::self.period] = True
            accepting.setflags(write=False)
            self._accepting = accepting
        return self._accepting

    def array_row(self, state: int) -> np.ndarray:
        """The row of ``state`` (a new int32[256] array)."""
        copy, inner = divmod(state, self.period)
        if copy == self.maximum:
            return np.full(256, DEAD, dtype=np.int32)
        row = self.step[inner]
        return np.where(row >= 0, row + copy * self.period, DEAD).astype(np.int32)

    def remaining(self, state: int) -> int:
        """Units ``state`` may still read when it stands between two units, else -1."""
        copy, inner = divmod(state, self.period)
        return self.maximum - copy if inner == 0 else -1

    @property
    def read_bytes(self) -> np.ndarray:
        """The bytes some state reads (the unit's; none without a unit to read)."""
        return self.unit.read_bytes if self.maximum else np.zeros(256, dtype=bool)

    @property
    def content_key(self) -> bytes:
        """A digest of the unit and the bounds: equal keys, equal automata."""
        if self._content_key is None:
            digest = hashlib.blake2b(b"counted", digest_size=16)
            digest.update(self.unit.content_key)
            digest.update(np.array([self.minimum, self.maximum], dtype=np.int64).tobytes())
            self._content_key = digest.digest()
        return self._content_key

    def kernel_block(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        """(:attr:`step`, :attr:`accepting` as uint8, :attr:`period`, no flags: every state
        lives): the block as the compiled subset construction reads it."""
        return self.step, self.accepting.view(np.uint8), self.period, _EVERY_STATE_LIVES

    def dense(self, max_states: int | None = None) -> DFA:
        """The whole table (``num_states`` rows over the unit's byte classes: for
        intersections, which read every row); past ``max_states`` states
        :class:`SchemaTooComplexError`."""
        if max_states is not None and self.num_states > max_states:
            raise states_exceeded(max_states)
        q, maximum = self.period, self.maximum
        step, classes = _compact(self.step)
        table = np.empty((maximum * q + 1, step.shape[1]), dtype=np.int32)
        copies = table[: maximum * q].reshape(maximum, q, step.shape[1])  # in place: two passes, no temporary
        np.add(step, (np.arange(maximum, dtype=np.int32) * q)[:, None, None], out=copies)
        np.copyto(copies, DEAD, where=(step < 0)[None])
        table[maximum * q] = DEAD
        return DFA(table, self.accepting.copy(), classes)

    def __repr__(self) -> str:
        return f"CountedDFA({self.minimum}..{self.maximum} units of {self.period} states)"


MAX_PRODUCT_BLOCK_STATES = 1 << 21
"""States (copies times period) past which a length-bounded pattern is refused (the compiled
subset construction keeps about 30 bytes per embedded state). Intersected whole instead, it
would hold the slots reachable at each count, ten times ``max_states`` and more: every
jsonschemabench schema with such a product was refused there, after up to 1.5 s (``format:
uri-reference`` with ``maxLength: 2000``, 1,350 slots; a 9,700-slot pattern with
``maxLength: 500``)."""

EAGER_PRODUCT_STATES = 4096
"""Up to this many states (copies times pairs) a length-bounded pattern is intersected whole: a
small table, trimmed and minimised, whose masks are shared at every position."""


class CountedProduct:
    """``unit{minimum,maximum}`` (a :class:`CountedDFA`) intersected with ``pattern``, kept
    without its table: the pairs (unit state, pattern state) that one unit's strings reach form
    a *period* of ``p`` slots, and state ``k * p + j`` (``k`` units read, at slot ``j``) reads the
    row of slot ``j`` shifted by ``k * p`` (a target ``p + j'`` completes a unit: slot ``j'`` of
    the next copy). A ``maxLength: 255`` email pattern is a few hundred rows instead of a
    100 MB table; a lazy automaton builds only the positions a walk reaches.

    Trim: whether state ``k * p + j`` can still end within the bounds is one flag per state
    (:attr:`live`, ``num_states`` bytes, from the slots that end after exactly ``c`` more units,
    computed per ``c`` until they repeat); rows drop targets that cannot. Immutable."""

    __slots__ = ("minimum", "maximum", "period", "step", "live", "loop", "full_run", "_accepting", "_content_key")

    def __init__(self, minimum: int, maximum: int, step: np.ndarray, live: np.ndarray, ends: np.ndarray,
                 loop: DFA) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.period = step.shape[0]
        self.step = step
        """int32[p, 256]: within a copy, the slot reached; ``p + j`` on completing a unit; or -1."""
        copies = live.reshape(maximum + 1, self.period)
        self.live = live.view(np.uint8)
        """uint8[num_states]: whether the state can still end within the bounds."""
        accepting = np.zeros_like(copies)
        accepting[minimum:] = copies[minimum:] & ends
        self._accepting = accepting.reshape(-1)
        self.loop = loop
        """The slots as one automaton without the count (targets modulo ``p``; slot 0 starts;
        accepting: a pattern end between units): within copies where every slot lives (see
        :attr:`full_run`) a walk reads exactly as this does."""
        # per copy, how many consecutive copies from it have every slot live (up to the next that
        # does not, or past the last)
        index = np.arange(maximum + 1)
        stops = np.where(copies.all(axis=1), maximum + 1, index)
        self.full_run = np.minimum.accumulate(stops[::-1])[::-1] - index
        for part in (self.step, self.live, self._accepting, self.full_run):
            part.setflags(write=False)
        self._content_key: bytes | None = None

    @classmethod
    def of(cls, counted: CountedDFA, pattern: DFA, max_states: int) -> "CountedProduct | DFA | None":
        """The product of ``counted`` and ``pattern``; the empty :class:`DFA` when no string of
        the bounds matches; None when a whole intersection is as cheap
        (:data:`EAGER_PRODUCT_STATES`) or unit counts do not repeat within
        :data:`MAX_COUNT_LAYERS`: the caller then intersects whole. Past
        :data:`MAX_PRODUCT_BLOCK_STATES` states :class:`SchemaTooComplexError` (without a
        pointer: the caller names it). Cost: the pairs of one unit's strings (at most
        ``max_states``, else :class:`SchemaTooComplexError`), a few vectorised passes per count
        until the slots that end repeat, then ``num_states`` flags."""
        q = counted.period
        if (counted.step == 0).any():  # the unit re-enters its start: no slot marks a unit's end
            return None
        loop_table, loop_classes = _compact(np.where(counted.step == q, 0, counted.step).astype(np.int32))
        table, classes, first, second = state_pairs(loop_table, loop_classes, pattern.table, pattern.classes,
                                                    max_states)
        n = table.shape[0]
        states = (counted.maximum + 1) * n
        if states > MAX_PRODUCT_BLOCK_STATES:
            raise SchemaTooComplexError(f"{states:,} counted states ({counted.maximum + 1:,} counts times {n:,} "
                                        "pattern slots)", budget=f"MAX_PRODUCT_BLOCK_STATES={MAX_PRODUCT_BLOCK_STATES}")
        if states <= EAGER_PRODUCT_STATES:
            return None
        _spend(n)
        completes = (table >= 0) & (first[np.maximum(table, 0)] == 0)
        ends = (first == 0) & pattern.accepting[second]
        live = counted_live(table, completes, ends, counted.minimum, counted.maximum)
        if live is None:
            return None
        if not live[0, 0]:
            return _empty_dfa()
        keep = np.flatnonzero(live.any(axis=0))  # slot 0 first
        p = keep.shape[0]
        number = np.full(n, DEAD, dtype=np.int32)
        number[keep] = np.arange(p, dtype=np.int32)
        kept = table[keep]
        targets = np.where(kept >= 0, number[np.maximum(kept, 0)], DEAD).astype(np.int32)
        step = np.where(targets < 0, DEAD, np.where(completes[keep], targets + p, targets)).astype(np.int32)
        flags = live if p == n else live[:, keep]  # every slot kept (the common case): no column gather
        return cls(counted.minimum, counted.maximum, np.ascontiguousarray(step[:, classes]),
                   np.ascontiguousarray(flags).reshape(-1), ends[keep], DFA(targets, ends[keep].copy(), classes))

    @property
    def num_states(self) -> int:
        return (self.maximum + 1) * self.period

    is_empty = False
    """:meth:`of` returns an empty table instead."""

    @property
    def accepting(self) -> np.ndarray:
        """Whether each state accepts: a pattern end between units, ``minimum`` units read at
        least."""
        return self._accepting

    def _shifted(self, rows: np.ndarray, copies: np.ndarray) -> np.ndarray:
        """``rows`` (slot rows) read at ``copies`` (one per row): targets as states, the dead
        and those that cannot end as -1; the last copy reads nothing."""
        copies = copies[:, None]
        targets = np.where(rows >= 0, rows + copies * self.period, 0)
        live = (rows >= 0) & (copies < self.maximum)
        live &= self.live[np.minimum(targets, self.num_states - 1)].astype(bool)
        return np.where(live, targets, DEAD).astype(np.int32)

    def array_row(self, state: int) -> np.ndarray:
        """The row of ``state`` (a new int32[256] array)."""
        copy, slot = divmod(state, self.period)
        return self._shifted(self.step[slot][None], np.array([copy]))[0]

    def reads_as_loop(self, state: int, units: int) -> bool:
        """Whether every walk from ``state`` that completes at most ``units`` units reads as
        :attr:`loop` does from its slot (every slot lives in the copies it can reach)."""
        copy = state // self.period
        return copy + units < self.maximum and self.full_run[copy] > units

    @property
    def read_bytes(self) -> np.ndarray:
        """The bytes some state reads."""
        return self.loop.read_bytes

    @property
    def content_key(self) -> bytes:
        """A digest of the rows, flags and bounds: equal keys, equal automata."""
        if self._content_key is None:
            digest = hashlib.blake2b(b"counted product", digest_size=16)
            for part in (self.step, self.live, np.array([self.minimum, self.maximum], dtype=np.int64)):
                digest.update(np.ascontiguousarray(part).tobytes())
            self._content_key = digest.digest()
        return self._content_key

    def kernel_block(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        """(:attr:`step`, :attr:`accepting` as uint8, :attr:`period`, :attr:`live`): the
        block as the compiled subset construction reads it."""
        return self.step, self.accepting.view(np.uint8), self.period, self.live

    def dense(self, max_states: int | None = None) -> DFA:
        """The whole table (``num_states`` rows over the slots' byte classes, for
        intersections); past ``max_states`` states :class:`SchemaTooComplexError`."""
        if max_states is not None and self.num_states > max_states:
            raise states_exceeded(max_states)
        copies = np.repeat(np.arange(self.maximum + 1, dtype=np.int64), self.period)
        step, classes = _compact(self.step)
        rows = np.tile(step, (self.maximum + 1, 1))
        return DFA(self._shifted(rows, copies), self.accepting.copy(), classes)

    def __repr__(self) -> str:
        return f"CountedProduct({self.minimum}..{self.maximum} units, {self.period} slots)"


MAX_COUNT_LAYERS = 4096
"""Unit counts a counted product follows before its ending slots must repeat."""


def counted_live(table: np.ndarray, completes: np.ndarray, ends: np.ndarray, minimum: int, maximum: int,
                 compiled: bool = True) -> np.ndarray | None:
    """bool[maximum + 1, n]: whether state ``(k, j)`` of a counted product lives, i.e. slot ``j``
    ends after some count ``c`` of further units with ``minimum <= k + c <= maximum`` (None:
    the ending layers do not repeat within :data:`MAX_COUNT_LAYERS`). One compiled call
    (:func:`enforcer._kernels.counted_live`) when built and ``compiled``, else
    :func:`_ending_layers` and prefix counts in numpy (its reference: the same flags; ~5x
    slower, ~10 ms at 2,048 counts of a URI's 679 slots)."""
    if compiled and _counted_live_kernel is not None:
        return _counted_live_kernel(np.ascontiguousarray(table, dtype=np.int32),
                                    np.ascontiguousarray(completes, dtype=np.uint8),
                                    np.ascontiguousarray(ends, dtype=np.uint8), minimum, maximum, MAX_COUNT_LAYERS)
    layers = _ending_layers(table, completes, ends, maximum)
    if layers is None:
        return None
    ks = np.arange(maximum + 1)
    reached = np.zeros((maximum + 2, table.shape[0]), dtype=np.int32)
    np.cumsum(layers, axis=0, out=reached[1:])
    lowest = np.maximum(0, minimum - ks)
    return reached[maximum - ks + 1] - reached[lowest] > 0


def _ending_layers(table: np.ndarray, completes: np.ndarray, ends: np.ndarray, maximum: int) -> np.ndarray | None:
    """bool[maximum + 1, n]: row ``c`` holds the slots of a counted product's period that end
    after exactly ``c`` more units. Row ``c`` is the predecessors of row ``c - 1`` across a
    unit's end, closed under predecessors within a unit; the rows are computed until one
    repeats an earlier one (from there they cycle), at most :data:`MAX_COUNT_LAYERS` (None
    past it)."""
    n = table.shape[0]
    sources = np.repeat(np.arange(n, dtype=np.int64), table.shape[1])
    targets = table.reshape(-1).astype(np.int64)
    live = targets >= 0
    # each distinct (source, target, crosses) once, as one int64
    keys = sorted_distinct((sources[live] * n + targets[live]) * 2 + completes.reshape(-1)[live])
    pairs, crosses = np.divmod(keys, 2)
    ends_at, starts_at = pairs % n, pairs // n
    within = (starts_at[crosses == 0], ends_at[crosses == 0])
    across = (starts_at[crosses == 1], ends_at[crosses == 1])

    def closed(layer: np.ndarray) -> np.ndarray:
        while True:
            grown = layer.copy()
            grown[within[0][layer[within[1]]]] = True
            if (grown == layer).all():
                return layer
            layer = grown

    layers = [closed(ends.copy())]
    seen = {layers[0].tobytes(): 0}
    while len(layers) <= maximum:
        if len(layers) > MAX_COUNT_LAYERS:
            return None
        following = np.zeros(n, dtype=bool)
        following[across[0][layers[-1][across[1]]]] = True
        following = closed(following)
        earlier = seen.get(following.tobytes())
        if earlier is not None:  # from here the rows cycle through layers[earlier:]
            cycle = layers[earlier:]
            while len(layers) <= maximum:
                layers.append(cycle[(len(layers) - earlier) % len(cycle)])
            break
        seen[following.tobytes()] = len(layers)
        layers.append(following)
    return np.array(layers[:maximum + 1])

PERIODIC = (CountedDFA, CountedProduct)
"""Embedded automata kept as rows that repeat per copy (no table)."""

def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-d array, ascending: a sort and a neighbour compare. Used for
    ``np.unique(values)``, which in numpy 2 hashes (2-5x slower on these integer arrays) and
    imports ``numpy.ma`` on its first call in a process (~10 ms, once, wherever it lands)."""
    ordered = np.sort(values)
    distinct = np.empty(ordered.size, dtype=bool)
    distinct[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=distinct[1:])
    return ordered[distinct]


def concat_ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, e)`` for every pair, vectorised."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return offsets + np.arange(total, dtype=np.int64)


def _empty_dfa() -> DFA:
    return DFA(np.zeros((0, 256), dtype=np.int32), np.zeros(0, dtype=bool))


def _reaching_reference(n: int, sources: np.ndarray, targets: np.ndarray, end: int) -> np.ndarray:
    """Which of ``n`` states reach ``end`` over the edges ``sources -> targets`` (bool array),
    breadth first over predecessors with numpy: the fallback of the compiled ``reaching`` and
    the oracle of its differential test."""
    order = np.argsort(targets, kind="stable")
    preds = sources[order]
    starts = np.searchsorted(targets[order], np.arange(n + 1))
    alive = np.zeros(n, dtype=bool)
    alive[end] = True
    frontier = np.array([end], dtype=np.int64)
    while frontier.size:  # one numpy step per level
        lo, hi = starts[frontier], starts[frontier + 1]
        found = preds[concat_ranges(lo, hi)]
        found = sorted_distinct(found[~alive[found]])
        alive[found] = True
        frontier = found.astype(np.int64)
    return alive


def _subset_key(states: Iterable[int]) -> bytes:
    """A set of NFA states as the int32 bytes of its sorted members (one key per set)."""
    return array("i", sorted(states)).tobytes()


def _nfa_csr_reference(n: int, edges: np.ndarray, eps: np.ndarray, alive: np.ndarray | None) -> tuple:
    """:func:`enforcer._kernels.nfa_csr` with numpy (the fallback without the compiled kernels
    and the oracle of its differential test): a stable sort by source, then a count per state
    and a running sum."""
    if alive is not None:  # a target past the flags (an embedded block's base) is kept
        flags = np.append(alive.astype(bool), True)
        at = alive.shape[0]
        edges = edges[flags[np.minimum(edges[:, 3], at)]]
        eps = eps[flags[np.minimum(eps[:, 1], at)]]

    def grouped(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        starts = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(table[:, 0], minlength=n), out=starts[1:])
        return starts, table[np.argsort(table[:, 0], kind="stable")]

    edge_start, by_source = grouped(edges)
    eps_start, eps_by_source = grouped(eps)
    return (edge_start, by_source[:, 1].astype(np.uint8), by_source[:, 2].astype(np.uint8),
            np.ascontiguousarray(by_source[:, 3]), eps_start, np.ascontiguousarray(eps_by_source[:, 1]),
            (np.diff(edge_start) > 0).astype(np.uint8))


class _Determiniser:
    """Subset construction over a Thompson NFA, one DFA state at a time: by the compiled
    :class:`enforcer._kernels.SubsetConstruction` when built (``compiled``), else in Python
    (:meth:`row_reference`, also the oracle of the kernel's differential test: same states,
    same numbering). ``lazy``: :class:`Deferred` nodes are placeholders whose levels are added
    when a closure first reaches them (else their ``bounded`` is built)."""

    def __init__(self, node: Node, trim: bool, compiled: bool = True, keep: Sequence[int] = (),
                 lazy: bool = False) -> None:
        if not lazy and node.whole_states > MAX_WHOLE_NFA_STATES:
            raise SchemaTooComplexError(f"an automaton built whole needs {node.whole_states:,} NFA states",
                                        budget=f"MAX_WHOLE_NFA_STATES={MAX_WHOLE_NFA_STATES}")
        nfa = new_nfa(compiled, deferred=lazy)
        built_start, built_end = nfa.new(), nfa.new()
        nfa.build(node, built_start, built_end)
        self.num_nfa_states = nfa.num_states
        edges, eps = nfa.take_arrays()
        if 2 * node.block_states >= nfa.num_states:  # mostly block states: numbered last, kept nothing per state
            laid = _blocks_last(nfa.num_states, edges, eps, nfa.blocks, (built_start, built_end, *keep), compiled)
        else:  # a few: renumbering every edge would cost more than their slices
            laid = _BlocksLast(edges, eps, nfa.blocks, [built_start, built_end, *keep], nfa.num_states)
        self.blocks = laid.blocks
        start = self.start = laid.states[0]
        self.end = laid.states[1]
        self.kept = np.asarray(laid.states[2:], dtype=np.int64)
        """``keep`` as numbered here."""
        self.num_regular = laid.num_regular
        """States with slices of their own: all of them, or (blocks numbered last) those outside blocks."""
        self._block_bases = [b.base for b in self.blocks]
        self._block_ends = [b.base + b.dfa.num_states for b in self.blocks]
        self._expansions_seen = 0
        """Expansions of the compiled construction whose blocks :attr:`blocks` holds."""
        self._compiled = compiled
        # levels of Deferred nodes, added past the NFA's states (the Python construction's; the
        # kernel keeps its own): a record per placeholder met, and per added state its edges,
        # epsilon edges, whether a subset keeps it, and its record when it is a placeholder
        self._levels: list[list] = []
        """[node, continuation, first state of its expansion or -1, depth] per placeholder met."""
        self._block_levels = {b.base: self._new_level(b.dfa, b.end, 1) for b in self.blocks
                              if isinstance(b.dfa, Deferred)}
        self._added_edges: list[tuple[tuple[int, int, int], ...]] = []
        self._added_eps: list[tuple[int, ...]] = []
        self._added_keep: list[int] = []  # a template's flag: 0, 1 (reads a byte) or BLOCK_STATE
        self._added_depth: list[int] = []
        self._added_levels: dict[int, int] = {}
        edges, eps = laid.edges, laid.eps
        alive = None
        if trim and nfa.may_dead_end:
            alive, eps = self._alive(edges, eps)
        # per-state slices (CSR), in the order the edges were added
        self._edge_start, self._edge_lo, self._edge_hi, self._edge_dst, self._eps_start, self._eps_dst, important = (
            nfa_csr if nfa_csr is not None else _nfa_csr_reference)(self.num_regular, edges, eps, alive)
        del nfa, edges, eps, laid, alive  # the builder's arrays, freed before the construction's own
        self._edges: dict[int, tuple[tuple[int, int, int], ...]] = {}
        self._epsilons: dict[int, tuple[int, ...]] = {}
        self._leaving: dict[int, np.ndarray] = {}
        self._closures: dict[int, tuple[int, ...]] = {}
        # a subset holds only the NFA states that decide what follows: those that read a byte
        # (edges, embedded blocks), the end (acceptance) and ``keep`` (a tagged union's exits);
        # two subsets that differ in pass-through states only are one DFA state
        if self.num_regular == self.num_nfa_states:  # (block states numbered last have no flags: all are kept)
            for block in self.blocks:
                important[block.base:block.base + block.dfa.num_states] = not isinstance(block.dfa, Deferred)
        important[self.end] = True
        important[self.kept] = True
        self._important = important
        self._array_bytes = sum(a.nbytes for a in (self._edge_lo, self._edge_hi, self._edge_dst, self._eps_dst)) \
            + self._edge_start.nbytes + self._eps_start.nbytes + important.nbytes
        self.subset_items = 0  # NFA states held by the subsets and closures, for the byte estimate
        self._kernel = None
        if compiled and SubsetConstruction is not None:
            self._kernel = SubsetConstruction(
                self.num_nfa_states, start, self.end, self._edge_start,
                self._edge_lo, self._edge_hi, self._edge_dst, self._eps_start,
                self._eps_dst, self._important, [(b.base, *_kernel_block(b.dfa), b.end) for b in self.blocks],
                # the kernel's levels are the compiled builder's; a module function, not a bound
                # method: that would tie this object and its kernel in a cycle, which only the
                # collector frees (an eager build's determiniser, its blocks and levels)
                [b.dfa if isinstance(b.dfa, Deferred) else None for b in self.blocks], level_template)
            self.accepting: list[bool] = self._kernel.accepting(0)
            return
        first = self.closure(start)
        # subsets are keyed by their sorted members as int32 bytes: bytes are not tracked by the
        # garbage collector (frozensets are), so thousands of states add nothing to its pauses
        key = _subset_key(first)
        self.index: dict[bytes, int] = {key: 0}
        self.sets: list[bytes] = [key]
        self.accepting = [self.end in first]
        self.subset_items += len(first)

    @property
    def num_states(self) -> int:
        """DFA states created so far."""
        return self._kernel.num_states if self._kernel is not None else len(self.sets)

    @property
    def added_nfa_states(self) -> int:
        """NFA states the levels of :class:`Deferred` nodes added so far."""
        if self._kernel is not None:
            return self._kernel.num_nfa_states - self.num_nfa_states
        return len(self._added_edges)

    def memory_size_bytes(self) -> int:
        """The NFA's arrays, the kernel's subsets and added levels (or about 300 bytes per
        Python subset and 50 per added NFA state), plus about 300 bytes per NFA state visited in
        Python and 24 per NFA state a Python subset or closure holds."""
        if self._kernel is not None:
            held = self._kernel.nbytes
        else:
            held = SUBSET_BYTES * len(self.sets) + NFA_STATE_BYTES * len(self._added_edges)
        return self._array_bytes + held + SUBSET_BYTES * len(self._closures) + SUBSET_ITEM_BYTES * self.subset_items

    def _template(self, node: Deferred) -> LevelTemplate:
        return level_template(node, self._compiled)

    def _new_level(self, node: Deferred, continuation: int, depth: int) -> int:
        """A record for a placeholder of ``node`` leading to ``continuation``, ``depth`` levels
        down (1: a placeholder of the NFA built first), not expanded."""
        self._levels.append([node, continuation, -1, depth])
        return len(self._levels) - 1

    def nesting(self, i: int) -> int:
        """How many levels of :class:`Deferred` nodes down the deepest NFA state of DFA state
        ``i`` lies (0: none of them added). Cost: one pass over its members."""
        if self._kernel is not None:
            return self._kernel.nesting(i)
        n = self.num_nfa_states
        return max((self._added_depth[s - n] for s in self.members(i) if s >= n), default=0)

    def _expansion(self, level: int) -> int:
        """The first state of placeholder record ``level``'s expansion, its level's states
        appended on first call (see :meth:`enforcer._kernels.SubsetConstruction._expansion`,
        which appends alike)."""
        node, continuation, first, depth = self._levels[level]
        if first >= 0:
            return first
        template = self._template(node)
        base = self.num_nfa_states + len(self._added_edges)
        starts, lo, hi, dst = (a.tolist() for a in (template.edge_start, template.edge_lo, template.edge_hi,
                                                    template.edge_dst))
        eps_starts, eps_dst = template.eps_start.tolist(), template.eps_dst.tolist()
        for j in range(template.num_states):
            a, b = starts[j], starts[j + 1]
            self._added_edges.append(tuple((lo[e], hi[e], dst[e] + base) for e in range(a, b)))
            eps = tuple(t + base for t in eps_dst[eps_starts[j]:eps_starts[j + 1]])
            self._added_eps.append(eps + (continuation,) if j == template.end else eps)
            self._added_keep.append(int(template.important[j]))
            self._added_depth.append(depth)
        self._add_level_blocks(base, template)
        for placeholder in template.placeholders:
            self._added_levels[base + placeholder.state] = self._new_level(placeholder.node,
                                                                           base + placeholder.continuation, depth + 1)
        first = self._levels[level][2] = base + template.start
        return first

    def _alive(self, edges: np.ndarray, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which states with slices can reach the end (uint8[num_regular]; a block's base
        says whether its block lives), and ``eps`` without the edges into blocks numbered last
        that cannot (:func:`~enforcer._kernels.nfa_csr` keeps edges past the flags). An
        embedded DFA is trimmed already: its states live exactly when the state after it does,
        so each block is one node here, entered at its base. Cost: one pass over the edges,
        none over the block states."""
        r, n_blocks = self.num_regular, len(self.blocks)
        bases = np.array(self._block_bases, dtype=np.int64)
        eps_targets = eps[:, 1].astype(np.int64)
        k = np.searchsorted(bases, eps_targets, side="right") - 1
        entering = (k >= 0) & (bases[np.maximum(k, 0)] == eps_targets)
        eps_targets[entering] = r + k[entering]  # the block's node
        nodes = np.arange(r, r + n_blocks, dtype=np.int32)
        sources = np.concatenate([edges[:, 0], eps[:, 0], nodes])
        targets = np.concatenate([edges[:, 3], eps_targets.astype(np.int32),
                                  np.array([b.end for b in self.blocks], dtype=np.int32)])
        if reaching is not None:  # the compiled pass (one step per state, not per level)
            alive = reaching(r + n_blocks, sources, targets, self.end)
        else:
            alive = _reaching_reference(r + n_blocks, sources, targets, self.end).view(np.uint8)
        flags = alive[:r].copy()
        inside = bases < r  # a block numbered among the others: its base's flag is its own
        flags[bases[inside]] = alive[r:][inside]
        dead = bases[~inside][alive[r:][~inside] == 0]
        if dead.size:
            eps = np.ascontiguousarray(eps[~np.isin(eps[:, 1], dead)])
        return flags, eps

    def _add_level_blocks(self, base: int, template: LevelTemplate) -> None:
        """Record the embedded automata of ``template``'s expansion at NFA state ``base``,
        appended past every other block (bases stay ascending)."""
        for block in template.blocks:
            self.blocks.append(Block(base + block.base, block.dfa, base + block.end))
            self._block_bases.append(base + block.base)
            self._block_ends.append(base + block.base + block.dfa.num_states)

    def _block_at(self, s: int) -> tuple[Block, int] | None:
        """The block NFA state ``s`` belongs to and its DFA state (None: not a block state)."""
        if self._kernel is not None and s >= self.num_nfa_states:  # the kernel's expansions' blocks
            for base, template in self._kernel.expansions(self._expansions_seen):
                self._add_level_blocks(base, template)
                self._expansions_seen += 1
        k = bisect.bisect_right(self._block_bases, s) - 1
        if k < 0 or s >= self._block_ends[k]:
            return None
        block = self.blocks[k]
        return block, s - block.base

    def edges_of(self, s: int) -> Sequence[tuple[int, int, int]]:
        """``(lo, hi, target)`` byte edges of NFA state ``s`` (made on first use; a block
        state's from its DFA's row)."""
        hit = self._edges.get(s)
        if hit is not None:
            return hit
        at = self._block_at(s)
        if at is None and s >= self.num_nfa_states:  # added by an expansion
            hit = self._added_edges[s - self.num_nfa_states] if self._kernel is None else tuple(self._kernel.edges_of(s))
        elif at is None:
            a, b = self._edge_start[s:s + 2].tolist()
            hit = tuple(zip(self._edge_lo[a:b].tolist(), self._edge_hi[a:b].tolist(), self._edge_dst[a:b].tolist()))
        elif isinstance(at[0].dfa, Deferred):  # a placeholder reads nothing
            hit = ()
        else:
            block, local = at
            row = block.dfa.array_row(local)
            starts = np.flatnonzero(np.diff(row, prepend=DEAD - 1))
            ends = np.append(starts[1:] - 1, 255)
            targets = row[starts]
            live = targets >= 0
            hit = tuple((lo, hi, block.base + t) for lo, hi, t in
                        zip(starts[live].tolist(), ends[live].tolist(), targets[live].tolist()))
        self._edges[s] = hit
        return hit

    def eps_of(self, s: int) -> Sequence[int]:
        hit = self._epsilons.get(s)
        if hit is not None:
            return hit
        at = self._block_at(s)
        if at is None and s >= self.num_nfa_states:  # added by an expansion
            level = self._added_levels.get(s)
            hit = self._added_eps[s - self.num_nfa_states] if level is None else (self._expansion(level),)
        elif at is None:
            a, b = self._eps_start[s:s + 2].tolist()
            hit = tuple(self._eps_dst[a:b].tolist())
        elif isinstance(at[0].dfa, Deferred):
            hit = (self._expansion(self._block_levels[at[0].base]),)
        else:
            block, local = at
            hit = (block.end,) if block.dfa.accepting[local] else ()
        self._epsilons[s] = hit
        return hit

    def members(self, i: int) -> Sequence[int]:
        """The NFA states of DFA state ``i`` (ascending)."""
        if self._kernel is not None:
            return self._kernel.members(i)
        return memoryview(self.sets[i]).cast("i")

    def closure(self, state: int) -> tuple[int, ...]:
        """The important NFA states (see ``__init__``) reachable from ``state`` by epsilon
        edges (cached; a tuple of ints, which the collector stops tracking)."""
        hit = self._closures.get(state)
        if hit is not None:
            return hit
        if self._kernel is not None:  # the kernel's own (it holds the levels it added)
            hit = self._closures[state] = tuple(self._kernel.closure_of(state))
            self.subset_items += len(hit)
            return hit
        seen = {state}
        stack = [state]
        eps_of = self.eps_of
        while stack:
            s = stack.pop()
            for t in eps_of(s):
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        result = tuple(s for s in seen if self._kept(s))
        self._closures[state] = result
        self.subset_items += len(result)
        return result

    def _kept(self, s: int) -> bool:
        """Whether a subset keeps NFA state ``s`` (see ``__init__``): a flagged state with
        slices, a block state other than a placeholder, an added state that reads a byte."""
        if s >= self.num_nfa_states:
            return self._added_keep[s - self.num_nfa_states]
        if s >= self.num_regular:
            return s not in self._block_levels
        return bool(self._important[s])

    def _edge_bytes(self, states: Iterable[int]) -> np.ndarray:
        """The bytes on which any of the NFA ``states`` has an edge (bool[256])."""
        out = np.zeros(256, dtype=bool)
        for s in states:
            for lo, hi, _ in self.edges_of(s):
                out[lo:hi + 1] = True
        return out

    def embedding(self, i: int) -> tuple[Block, int, np.ndarray] | None:
        """(block, state ``s`` of its DFA, leaving bytes) when the NFA states of DFA state ``i``
        that read bytes are state ``s`` of one embedded automaton, in one block or in several
        copies of it (the branches of a union that share a property), plus states outside
        blocks; the leaving bytes are those on which a walk from ``i`` can step off the blocks:
        the edges of those other states and, from any accepting state of a block, the edges
        after it. A walk over bytes outside them stays in the blocks, every copy at the same
        state, and lives exactly as long as a walk of the automaton from ``s``. None when no
        block state reads a byte, or the block states are of different automata or states."""
        if not self.blocks:
            return None
        if self._kernel is not None:
            inside, others = self._kernel.block_members(i)
        else:
            inside, others = self._block_members_reference(i)
        if not inside:
            return None
        block, local = self._block_at(inside[0])
        leaving = self._edge_bytes(others)
        for s in inside:
            copy, at = self._block_at(s)
            if copy.dfa is not block.dfa or at != local:
                return None
            after = self._leaving.get(copy.base)
            if after is None:
                after = self._leaving[copy.base] = self._edge_bytes(self.closure(copy.end))
            leaving |= after
        return block, local, leaving

    def _block_members_reference(self, i: int) -> tuple[list[int], list[int]]:
        """:meth:`enforcer._kernels.SubsetConstruction.block_members` in Python (the fallback
        and the oracle of its differential test)."""
        inside: list[int] = []
        others: list[int] = []
        for s in self.members(i):
            if self.edges_of(s):
                (others if self._block_at(s) is None else inside).append(s)
        return inside, others

    def row_into(self, i: int, out: np.ndarray, max_states: int | None) -> None:
        """Write the transitions of DFA state ``i`` to ``out`` (int32[256]), creating the states
        they lead to; past ``max_states`` states raise :class:`SchemaTooComplexError`."""
        if self._kernel is None:
            out[:] = self.row_reference(i, max_states)
            return
        if self._kernel.row(i, out, -1 if max_states is None else max_states) < 0:
            raise states_exceeded(max_states)
        self.sync_accepting()

    @property
    def kernel(self) -> "SubsetConstruction | None":
        """The compiled subset construction (None: the Python one builds the rows)."""
        return self._kernel

    def sync_accepting(self) -> None:
        """Extend :attr:`accepting` with the states the compiled construction created since."""
        if len(self.accepting) < self._kernel.num_states:
            self.accepting.extend(self._kernel.accepting(len(self.accepting)))

    def row_reference(self, i: int, max_states: int | None) -> list[int]:
        """Transitions of DFA state ``i`` (creating the states they lead to), in Python."""
        edges_of = self.edges_of
        row = [DEAD] * 256
        outgoing = [e for s in self.members(i) for e in edges_of(s)]
        if outgoing:
            # split the byte axis at every range boundary; each edge adds its target's closure
            # to the pieces it covers
            cuts = sorted({lo for lo, _, _ in outgoing} | {hi + 1 for _, hi, _ in outgoing})
            at = {c: k for k, c in enumerate(cuts)}
            covering: list[list[int]] = [[] for _ in range(len(cuts) - 1)]
            for elo, ehi, t in outgoing:
                for k in range(at[elo], at[ehi + 1]):
                    covering[k].append(t)
            # closures piece by piece, edges in order, as the kernel takes them: a closure may
            # add a level's states, numbered in the order closures meet placeholders
            for k, starts in enumerate(covering):
                if not starts:
                    continue
                targets = set()
                for t in starts:
                    targets.update(self.closure(t))
                lo, hi = cuts[k], cuts[k + 1] - 1
                key = _subset_key(targets)
                target = self.index.get(key)
                if target is None:
                    target = self.index[key] = len(self.sets)
                    self.sets.append(key)
                    self.accepting.append(self.end in targets)
                    self.subset_items += len(targets)
                    if max_states is not None and len(self.sets) > max_states:
                        raise states_exceeded(max_states)
                row[lo:hi + 1] = [target] * (hi - lo + 1)
        return row


_EVERY_STATE_LIVES = np.zeros(0, dtype=np.uint8)
"""The flags of a block whose every state can end."""


_NO_CLASSES = np.zeros(0, dtype=np.uint8)
"""The classes of a block whose rows have one entry per byte."""


def _kernel_block(dfa: "DFA | CountedDFA | CountedProduct") -> tuple[np.ndarray, np.ndarray, np.ndarray, int,
                                                                       np.ndarray]:
    """(rows, their byte classes, accepting as uint8, period, live flags) of an embedded
    automaton for the compiled subset construction: a table's every row over its classes
    (period 0), or a counted repeat's unit rows, or a counted product's slot rows and flags
    (256 entries a row, no classes)."""
    if isinstance(dfa, PERIODIC):
        rows, accepting, period, live = dfa.kernel_block()
        return rows, _NO_CLASSES, accepting, period, live
    if isinstance(dfa, Deferred):
        return (np.empty((0, 256), dtype=np.int32), _NO_CLASSES, np.zeros(1, dtype=np.uint8), DEFERRED_PERIOD,
                _EVERY_STATE_LIVES)
    return dfa.table, dfa.classes, np.ascontiguousarray(dfa.accepting, dtype=np.uint8), 0, _EVERY_STATE_LIVES


def compile_node(node: Node, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """Thompson NFA, subset construction, trimming and (for small automata) minimisation; an
    embedded automaton is its own DFA."""
    if node is NOTHING:
        return _empty_dfa()
    if isinstance(node, Embedded) and not isinstance(node.dfa, PERIODIC):
        return node.dfa

    def build() -> DFA:
        if isinstance(node, Embedded):
            dense = node.dfa.dense(max_states)
            _spend(dense.num_states)
            return dense
        det = _Determiniser(node, trim=False)
        table, classes = subset_table(det, max_states)
        _spend(table.shape[0])
        return _finalise(table, np.array(det.accepting, dtype=bool), classes=classes)

    return _built_once(lambda keys: ("node", keys.key(node), max_states), build)


def intersect_nodes(first: Node, second: Node, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """The automaton of the strings both ``first`` and ``second`` accept: each operand's
    subset construction as built (not trimmed, not minimised) multiplied, then trimmed and
    minimised once, where ``compile_node(first).intersect(compile_node(second))`` finalises
    three times (a two-sided number bound: ~170 us instead of ~260). Same language."""
    def build() -> DFA:
        tables = []
        for node in (first, second):
            if node is NOTHING or isinstance(node, Embedded):
                tables.append(compile_node(node, max_states))
                continue
            det = _Determiniser(node, trim=False)
            table, classes = subset_table(det, max_states)
            _spend(table.shape[0])
            tables.append(DFA(table, np.array(det.accepting, dtype=bool), classes))  # untrimmed: an operand only
        return tables[0].intersect(tables[1], max_states)

    return _built_once(lambda keys: ("intersection", keys.key(first), keys.key(second), max_states), build)


class ByteTable(NamedTuple):
    """A table read through byte classes: the next state of ``s`` on byte ``b`` is
    ``table[s, classes[b]]`` (-1: dead)."""

    table: np.ndarray
    """int32[states, k]."""
    classes: np.ndarray
    """uint8[256]: each byte's column, numbered by first byte."""

    def spread(self) -> np.ndarray:
        """The table with one column per byte (int32[states, 256], a new array)."""
        return np.take(self.table, self.classes, axis=1)


def subset_table(det: _Determiniser, max_states: int | None) -> ByteTable:
    """Every row of ``det``'s automaton, built breadth first (the table before trimming): one
    compiled call when built (over the byte ranges no row splits), else row by row in Python
    (a column per byte)."""
    limit = _build_limit(max_states)
    if det.kernel is not None:
        found = det.kernel.table(-1 if limit is None else limit)
        if found is None:
            raise _limit_exceeded(max_states, limit)
        det.sync_accepting()
        return ByteTable(*found)
    table = np.full((64, 256), DEAD, dtype=np.int32)
    i = 0
    while i < det.num_states:
        if i == table.shape[0]:
            table = np.concatenate([table, np.full_like(table, DEAD)])
        try:
            det.row_into(i, table[i], limit)
        except SchemaTooComplexError:
            raise _limit_exceeded(max_states, limit) from None
        i += 1
    return ByteTable(table[:i], _BYTE_COLUMNS)


class AutomatonBudgetError(SchemaTooComplexError):
    """A lazy automaton passed its decode-time budget during a mask walk. Internal to the mask
    tables, which turn it into an empty mask and an ``error``: never leaves the decode loop."""


def nfa_size(node: Node) -> int:
    """Exactly how many states the Thompson NFA of ``node`` has (what :class:`_NFA` builds),
    known before it is built (see :attr:`Node.nfa_states`)."""
    return node.nfa_states


def nfa_bytes(node: Node) -> int:
    """About what the NFA of ``node`` takes at the peak of building it: ``NFA_STATE_BYTES`` per
    state, ``BLOCK_STATE_BYTES`` per embedded DFA's state (a numbered range, no stored edges)."""
    return (node.nfa_states - node.block_states) * NFA_STATE_BYTES + node.block_states * BLOCK_STATE_BYTES


def nfa_budget_size(node: Node) -> int:
    """The compile-time budget's measure (``max_nfa_states``): :func:`nfa_bytes` in NFA states
    (an embedded DFA's state counts 18/50 of one)."""
    return -(-nfa_bytes(node) // NFA_STATE_BYTES)


ROWS_PER_WALK = 1024
"""Rows a compiled walk builds before it hands back to the automaton's budget check."""
MEMORY_CHECK_ROWS = 64
"""Rows a lazy automaton builds between two sums of its bytes against ``max_automaton_bytes``
(summed at every growth of its table too): the budget is overshot by what that many rows add at
most (the subsets of the states they create), and not summed at 0.4 us a walk."""


class _TableReaderReference:
    """:class:`enforcer._kernels.TableReader` in Python: the fallback without the compiled
    kernels and the oracle of its differential test."""

    __slots__ = ("_cells", "_flags", "_num_rows")

    def __init__(self, table: np.ndarray, built: np.ndarray | None = None) -> None:
        self._num_rows = table.shape[0]
        self._cells = memoryview(table).cast("B").cast("i")
        self._flags = None if built is None else memoryview(built)

    def read(self, state: int, data: bytes, at: int = 0) -> int:
        if state < 0:
            return DEAD
        cells, flags, num_rows = self._cells, self._flags, self._num_rows
        for i in range(at, len(data)):
            if state >= num_rows or (flags is not None and not flags[state]):
                return -2 - (state | i << 32)
            state = cells[state * 256 + data[i]]
            if state < 0:
                return DEAD
        return state


def _table_reader(table: np.ndarray, built: np.ndarray | None) -> "TableReader | _TableReaderReference":
    """A reader of ``table`` (int32, 256 columns) with its built flags: compiled when built."""
    return (TableReader or _TableReaderReference)(table, built)


class LazyDFA(_Reading):
    """A DFA built on demand: the NFA when first read (or by :meth:`build_nfa`, as a tool set's
    compile does), then each state by subset construction the first time a walk reaches it.
    Creating one costs a structural emptiness check and an exact count of the NFA's states; the
    NFA costs milliseconds for a large schema; each new state tens of microseconds, then a table
    read. Same reading interface as :class:`DFA` (``read``, ``row``, ``accepting``,
    ``transitions``) once :meth:`ensure` / :meth:`row` / :meth:`read` made the states exist.
    Thread-safe for readers: states are only ever appended, under a lock.

    Budget: an NFA whose estimated size (``NFA_STATE_BYTES`` per state) exceeds ``max_bytes``
    is refused here with :class:`SchemaTooComplexError`, before any token. While decoding, once
    the automaton has more than ``max_states`` states or holds more than ``max_bytes`` (NFA,
    subsets, table, rows), :attr:`exhausted` says so and :meth:`ensure` (what mask walks call)
    raises :class:`AutomatonBudgetError` after building what it was asked for: the mask tables
    turn that into an empty mask and the matcher's ``error``. Rows are never cut: reading a
    token (``row``) stays exact, so every mask computed keeps agreeing with ``accept_token``.
    """

    def __init__(self, node: Node, max_states: int = DEFAULT_MAX_STATES,
                 max_bytes: int = DEFAULT_MAX_AUTOMATON_BYTES) -> None:
        self.is_empty = node.empty
        nfa_states = nfa_size(node) + 2
        needed = nfa_bytes(node) + 2 * NFA_STATE_BYTES
        if needed > max_bytes:
            raise SchemaTooComplexError(
                f"the automaton needs {nfa_states:,} NFA states (about {needed >> 20:,} MiB), "
                f"over its budget of {max_bytes >> 20:,} MiB (max_automaton_bytes)")
        self.max_states = max_states
        self.max_bytes = max_bytes
        self.exhausted: str | None = None
        """Why the automaton stopped growing while decoding (None: it did not)."""
        self._node: Node | None = node
        self._det: _Determiniser | None = None
        capacity = min(max(nfa_states, FIRST_TABLE_ROWS[0]), FIRST_TABLE_ROWS[1], max_states + 1)
        self._table = np.empty((capacity, 256), dtype=np.int32)  # see _grow
        self._built = np.zeros(capacity, dtype=bool)
        self._built_flags = self._built.view(np.uint8)  # the form compiled walks take
        self._num_built = 0
        self._next_memory_check = 0  # rows built when the bytes are summed next
        self._view: tuple[memoryview, memoryview] | None = None
        """The table as one int sequence (sliced into rows) and the built flags, of one table:
        replaced together when the table grows, so one read of the pair is consistent."""
        self._reader = _table_reader(self._table, self._built_flags)
        """What :meth:`read` reads tokens through: a reader of the table as it is now, replaced
        when the table grows."""
        self._lock = threading.RLock()

    _keep_nfa_states: Sequence[int] = ()
    """NFA states every subset keeps besides those that read bytes or end (a tagged union's exits)."""

    def build_nfa(self) -> None:
        """Build the NFA and its subset construction's arrays now (no state yet): what a compile
        calls while the expression is still in the caches. The same build at first use, inside
        a decode, took 2-3x longer (cold caches): create_shipment's 1,005-state NFA, 79 us
        here, 170-210 us in a K2 first pass."""
        self._determiniser()

    @property
    def nfa_built(self) -> bool:
        """Whether the NFA exists (:meth:`build_nfa`, or a first walk, built it)."""
        return self._det is not None

    def _determiniser(self) -> "_Determiniser":
        """The NFA and its subset construction, built on first use (:meth:`build_nfa`, or the
        first walk of a lone schema's automaton)."""
        det = self._det
        if det is None:
            with self._lock:
                if self._det is None:
                    self._det = _Determiniser(self._node, trim=True, keep=self._keep_nfa_states, lazy=True)
                    self._node = None
                det = self._det
        return det

    @property
    def accepting(self) -> list[bool]:
        """Whether each state created so far accepts (grows with the states)."""
        return self._determiniser().accepting

    @property
    def accepting_list(self) -> list[bool]:
        return self._determiniser().accepting

    @property
    def nfa_states(self) -> int:
        """States of the underlying NFA (builds it)."""
        return self._determiniser().num_nfa_states

    @property
    def num_states(self) -> int:
        """States created so far."""
        return self._determiniser().num_states

    @property
    def transitions(self) -> np.ndarray:
        """Rows of the states built so far (rows of unbuilt states are meaningless)."""
        return self._table

    def row(self, state: int) -> Sequence[int]:
        """The row of ``state`` as an int sequence (a view into the table, made at each call and
        kept by no one: a matcher reads tokens through :meth:`read`), the row built on demand.
        Without the lock when the row is built in the table the pair was read with: a built row
        never changes, and a table that grows is copied, so a view of it stays right."""
        view = self._view
        if view is None or state >= len(view[1]) or not view[1][state]:
            view = self._built_view(state)
        return view[0][state * 256:(state + 1) * 256]

    def _built_view(self, state: int) -> tuple[memoryview, memoryview]:
        """:attr:`_view` (made if missing) once the row of ``state`` is built. Under the lock: a
        state that a build still under way created (another thread's, whose flags a reader may
        see first) has its row and flags once that build is done."""
        with self._lock:
            if not self._built[state]:
                self._build_rows((state,))
            if self._view is None:
                self._view = (memoryview(self._table).cast("B").cast("i"), memoryview(self._built_flags))
            return self._view

    def read(self, state: int, data: bytes) -> int:
        """State after reading ``data`` from ``state`` (``-1`` when it dies), the rows it meets
        built on demand: one compiled call per token (:class:`enforcer._kernels.TableReader`),
        and a build and another call per unbuilt row it meets. Without the lock but for a build:
        a reader reads the rows its table had built, which never change."""
        result = self._reader.read(state, data, 0)
        while result < DEAD:  # -2 - (state | byte index << 32): that state's row is not built here
            code = -2 - result
            state = code & 0xFFFFFFFF
            with self._lock:  # as in _built_view
                if not self._built[state]:
                    self._build_rows((state,))
            result = self._reader.read(state, data, code >> 32)
        return result

    walk = read

    def array_row(self, state: int) -> np.ndarray:
        """The row of ``state`` as a numpy view (built on demand)."""
        if not self._built[state]:
            self._build_rows((state,))
        return self._table[state]

    def _build_rows(self, states: Iterable[int]) -> None:
        """Build the rows of ``states`` (existing states) straight into the table, then check
        the budget once. Cost: the subset construction of each row (a compiled call)."""
        det = self._determiniser()
        with self._lock:
            for state in states:
                if self._built[state]:
                    continue
                det.row_into(state, self._table[state], None)
                self._built[state] = True
                self._num_built += 1
                self._grow(det.num_states)
            self._rows_added()

    def _grow(self, n: int) -> None:
        """Room in the table and flags for ``n`` states (capacity doubles); under the lock."""
        if n > self._table.shape[0]:
            size = max(n, 2 * self._table.shape[0])
            # uninitialised: a row is read only once built (every reader checks the flags
            # first), and building writes all 256 entries; memory is touched row by row as
            # rows are built, not all at once by a fill (the p99 spikes of first passes)
            table = np.empty((size, 256), dtype=np.int32)
            # the rows of every state created so far (a walk builds rows of states it created,
            # which ``rows`` does not list yet); the rest of the capacity is unused
            known = min(self._det.num_states if self._det is not None else 0, self._table.shape[0])
            table[:known] = self._table[:known]
            built = np.zeros(size, dtype=bool)
            built[: self._built.shape[0]] = self._built
            self._view = None  # rows handed out keep viewing the former table, which stays theirs
            self._table, self._built, self._built_flags = table, built, built.view(np.uint8)
            self._reader = _table_reader(table, self._built_flags)

    def _rows_added(self) -> None:
        """After rows were built: room for the states they created, and the budget checked
        (the bytes, a sum over the parts, once ``MEMORY_CHECK_ROWS`` rows were built since the
        last sum or once the table grew: a compiled walk builds a few rows per mask)."""
        n = self._det.num_states
        grown = n > self._table.shape[0]
        if grown:
            self._grow(n)
        if self.exhausted is None:
            if n > self.max_states:
                self.exhausted = f"{self.max_states:,} states (max_states)"
            elif grown or self._num_built >= self._next_memory_check:
                self._next_memory_check = self._num_built + MEMORY_CHECK_ROWS
                if self.memory_size_bytes() > self.max_bytes:
                    self.exhausted = f"{self.max_bytes >> 20:,} MiB (max_automaton_bytes)"
            if self.exhausted is not None:
                self.exhausted = f"the automaton of this value reached its budget of {self.exhausted} while decoding"

    def memory_size_bytes(self) -> int:
        """Bytes held (estimate for the Python parts): the table as allocated, the subsets of
        the states created and the NFA once built."""
        det = self._det
        nfa = det.memory_size_bytes() if det is not None else 0
        return int(self._table.nbytes + self._built.nbytes) + nfa

    def kernel_view(self) -> tuple[np.ndarray, np.ndarray]:
        """(table, built flags as uint8) as they are now, for the compiled walk (rows of unbuilt
        states are not read)."""
        with self._lock:
            return self._table, self._built_flags

    def building_walk(self, walk: Callable[..., tuple]) -> tuple:
        """``walk(table, built flags, builder)`` under the lock, ``builder`` the compiled subset
        construction (None without it): a compiled walk may build the rows it reaches straight
        into the table and flags, and returns how many it built last in its tuple; those are
        accounted for here (new states, the budget)."""
        det = self._determiniser()
        with self._lock:
            result = walk(self._table, self._built_flags, det.kernel)
            if result[-1]:
                self._walk_built(result[-1])
        return result

    def walk_trie(self, kernel: "TrieWalk", state: int, words: np.ndarray,
                  starts: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Set in ``words`` (packed uint32) the bits of the tokens of ``kernel``'s trie that the
        automaton reads whole from ``state``, or with ``starts`` (int32 trie nodes, int32
        states) the tokens below each node that it reads whole from its state, the node's bytes
        read: the compiled walk builds up to ``ROWS_PER_WALK`` rows it reaches on the spot,
        under the lock; subtrees standing at other unbuilt rows come back, their rows are built
        here and the walk resumes there. Raises :class:`AutomatonBudgetError` once
        :attr:`exhausted`."""
        if starts is None:
            if not self._built[state]:
                self._build_rows((state,))
            nodes = states = None
        else:
            nodes, states = starts
            self.ensure(states)
        builder = self._det.kernel  # built by the rows walked from
        while True:
            with self._lock:
                nodes, states, built = kernel.walk(self._table, self._built_flags, state, words, builder,
                                                   ROWS_PER_WALK, nodes, states)
                if built:
                    self._walk_built(built)
            if nodes is None:
                return
            self.ensure(states)

    def _walk_built(self, count: int) -> None:
        """A compiled walk built ``count`` rows: account for them (under the lock)."""
        self._num_built += count
        self._det.sync_accepting()
        self._rows_added()

    def nesting(self, state: int) -> int:
        """See :meth:`_Determiniser.nesting` (``state`` must exist)."""
        return (self._det or self._determiniser()).nesting(state)

    def embedding(self, state: int) -> tuple[Block, int, np.ndarray] | None:
        """See :meth:`_Determiniser.embedding` (``state`` must exist); under the lock, as the
        closure it takes may add a level's states; while no block is registered, None at once,
        without the lock (what the determiniser answers first then; a block a level adds later
        is found by the next call)."""
        det = self._det or self._determiniser()
        if not det.blocks:
            return None
        with self._lock:
            return det.embedding(state)

    def ensure(self, states: np.ndarray) -> np.ndarray:
        """Build the rows of ``states`` (repeats allowed; built in ascending order); returns
        the (possibly reallocated) table. Raises :class:`AutomatonBudgetError` once the
        automaton is :attr:`exhausted`."""
        missing = states[~self._built[states]] if states.size else states
        if missing.size:
            self._build_rows(sorted(set(missing.tolist())))
        if self.exhausted is not None:
            raise AutomatonBudgetError(self.exhausted)
        return self._table

    def __repr__(self) -> str:
        if self._det is None:
            return "LazyDFA(not built yet)"
        return f"LazyDFA(states built={int(self._built[: self.num_states].sum())}, created={self.num_states})"


class TaggedUnion(LazyDFA):
    """The union of ``branches`` as one :class:`LazyDFA` whose states know which branch they
    end: :meth:`branch` names it at an accepting state (a call text naming one tool, read by
    the walk itself, never parsed again).

    Each branch is built as ``branch`` then an empty part, which gives it a last NFA state of
    its own (its *exit*, with one epsilon edge to the common end): without it every branch ends
    in the same subset ``{end}``, one DFA state for all. The Thompson builder numbers states in
    build order (start 0, end 1, then each alternative's ``nfa_states``, the exit first), so the
    exits are known from the nodes alone, once, here (:attr:`exits`). Cost of :meth:`branch`: a
    look at the state's NFA members (ascending), cached per state by the caller."""

    def __init__(self, branches: Sequence[Node], max_states: int = DEFAULT_MAX_STATES,
                 max_bytes: int = DEFAULT_MAX_AUTOMATON_BYTES) -> None:
        wrapped = tuple(Concat((b, EPSILON)) for b in branches)
        exits = []
        first = 2  # after the start and the end
        for part in wrapped:
            exits.append(first)
            first += part.nfa_states
        self.exits = np.array(exits, dtype=np.int64)
        """NFA state of each branch's exit, ascending (built once; kept in the subsets)."""
        self._keep_nfa_states = self.exits
        super().__init__(Union(wrapped), max_states, max_bytes)

    def branch(self, state: int) -> int | None:
        """The branch whose text a walk to ``state`` completed (None: ``state`` does not accept,
        or texts of several branches end there)."""
        if not self.accepting_list[state]:
            return None
        det = self._determiniser()
        members = set(det.members(state))
        found = [i for i, exit_state in enumerate(det.kept.tolist()) if exit_state in members]
        return found[0] if len(found) == 1 else None


class TextTrie(DFA):
    """Literal texts as one :class:`DFA`: their byte trie, whose accepting states know the text
    they end (:meth:`branch`, like :meth:`TaggedUnion.branch`). Built whole, at once, compact
    and spread, by one compiled call (:func:`enforcer._kernels.text_trie`; about 5 us for two
    call headers), with none of a lazy union's NFA and subset construction. Trimmed, not
    minimal (texts that end alike keep their own states, so each end names its text)."""

    __slots__ = ("_ends",)

    def __init__(self, texts: Sequence[bytes]) -> None:
        spread, table, classes, accepting, ends = (text_trie or _text_trie_reference)(list(texts))
        super().__init__(table, accepting, classes, compact=True)
        spread.setflags(write=False)
        self._transitions = spread
        self._ends = ends

    def branch(self, state: int) -> int | None:
        """The text a walk to ``state`` completed (None: ``state`` ends no text, or ends a text
        given twice)."""
        text = int(self._ends[state])
        return text if text >= 0 else None


def _text_trie_reference(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`enforcer._kernels.text_trie` in Python: the fallback and the oracle of its
    differential test."""
    children: list[dict[int, int]] = [{}]
    sources: list[int] = []
    labels: list[int] = []
    ending: dict[int, int] = {}
    for i, text in enumerate(texts):
        node = 0
        for byte in text:
            nxt = children[node].get(byte)
            if nxt is None:
                nxt = children[node][byte] = len(children)
                children.append({})
                sources.append(node)
                labels.append(byte)
            node = nxt
        ending[node] = -2 if node in ending else i  # a text given twice names neither
    states = len(children) if texts else 0
    table = np.full((states, 256), DEAD, dtype=np.int32)
    table[sources, labels] = np.arange(1, len(children), dtype=np.int32)
    ends = np.full(states, -1, dtype=np.int32)
    ends[list(ending)] = list(ending.values())
    compact = _compact(table)
    return table, compact.table, compact.classes, ends != -1, ends


def _live_order(transitions: np.ndarray, accepting: np.ndarray) -> Sequence[int] | None:
    """The states that can reach acceptance and be reached from the start, in breadth-first
    visiting order (None when the start cannot reach acceptance): the compiled pass when built,
    else :func:`_live_order_reference` (the same order)."""
    if live_order is None:
        return _live_order_reference(transitions, accepting)
    return live_order(np.ascontiguousarray(transitions, dtype=np.int32),
                      np.ascontiguousarray(accepting, dtype=np.uint8))


def _live_order_reference(transitions: np.ndarray, accepting: np.ndarray) -> list[int] | None:
    """:func:`_live_order` in Python: the fallback and the oracle of its differential test."""
    n = transitions.shape[0]
    if n == 0:
        return None
    # distinct (source, target) edges, vectorised
    flat = transitions.ravel()
    has = flat >= 0
    keys = sorted_distinct(np.repeat(np.arange(n, dtype=np.int64), transitions.shape[1])[has] * n + flat[has])
    forward: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip((keys // n).tolist(), (keys % n).tolist()):
        forward[a].append(b)
    reverse: list[list[int]] = [[] for _ in range(n)]
    for a, targets in enumerate(forward):
        for b in targets:
            reverse[b].append(a)
    live = _reaching(reverse, np.flatnonzero(accepting).tolist())
    if not live[0]:
        return None
    # reachability from the start through live states, numbering states in visiting order
    order = [0]
    number = {0: 0}
    k = 0
    while k < len(order):
        for t in forward[order[k]]:
            if live[t] and t not in number:
                number[t] = len(order)
                order.append(t)
        k += 1
    return order


RENUMBER_ROWS = 4096
"""Rows renumbered at a time: the kept rows are copied once and renumbered in place, block by
block (a whole-table renumbering held a second copy: 170 MB more for a 166,000-state product)."""


def _renumbered(transitions: np.ndarray, accepting: np.ndarray, order: Sequence[int],
                classes: np.ndarray | None = None) -> DFA:
    """The automaton restricted to the states ``order``, state ``order[k]`` becoming ``k``
    (``classes``: each byte's column of ``transitions``, None: a column per byte)."""
    kept = np.array(order, dtype=np.int64)
    remap = np.full(transitions.shape[0] + 1, DEAD, dtype=np.int32)
    remap[kept] = np.arange(len(kept), dtype=np.int32)
    trans = np.ascontiguousarray(transitions[kept], dtype=np.int32)
    for lo in range(0, trans.shape[0], RENUMBER_ROWS):
        block = trans[lo:lo + RENUMBER_ROWS]
        block[...] = remap[block]  # -1 (dead) indexes the last entry, which is DEAD
    return DFA(trans, accepting[kept].copy(), classes)


def _finalise(transitions: np.ndarray, accepting: np.ndarray, minimise: bool = True, compiled: bool = True,
              classes: np.ndarray | None = None) -> DFA:
    """Drop states that cannot reach acceptance or be reached, then minimise small automata:
    one compiled call (:func:`enforcer._kernels.finalised_table`) when built and ``compiled``,
    else the numpy passes below (its reference: the same table). ``classes``: each byte's
    column of ``transitions`` (None: a column per byte)."""
    if compiled and finalised_table is not None:
        found = finalised_table(np.ascontiguousarray(transitions, dtype=np.int32),
                                np.ascontiguousarray(accepting, dtype=np.uint8), MINIMISE_LIMIT if minimise else -1)
        return _empty_dfa() if found is None else DFA(*found, classes)
    order = _live_order(transitions, accepting)
    if order is None:
        return _empty_dfa()
    dfa = _renumbered(transitions, accepting, order, classes)
    if not minimise or len(order) > MINIMISE_LIMIT:
        return dfa
    return _minimise(dfa.table, dfa.accepting, dfa.classes)


_HASH_WEIGHTS = np.random.default_rng(0x5EED).integers(1, 2**62, size=257, dtype=np.int64) | 1


_ROW_WEIGHTS = np.random.default_rng(0x5EED + 1).integers(1, 2**62, size=MINIMISE_LIMIT + 1, dtype=np.int64)


def _distinct_columns(trans: np.ndarray) -> np.ndarray:
    """The distinct columns of ``trans`` (in some order): each column hashed to one int64,
    grouped by hash and checked exactly, with ``np.unique(axis=1)`` (a sort of 256 structured
    rows: ~7 ms at 30 states, against ~50 us here) on the never observed event of a collision."""
    weights = _ROW_WEIGHTS[:trans.shape[0]]
    if weights.shape[0] < trans.shape[0]:
        weights = np.random.default_rng(0x5EED).integers(1, 2**62, size=trans.shape[0], dtype=np.int64)
    _, first, inverse = np.unique(weights @ trans.astype(np.int64), return_index=True, return_inverse=True)
    columns = trans[:, first]
    if not np.array_equal(columns[:, inverse.reshape(-1)], trans):
        return np.unique(trans, axis=1)
    return columns


def _moore_classes_reference(trans: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """Moore partition refinement with numpy (the fallback without the compiled kernels and the
    oracle of their differential test): each round hashes every state's (class, successor
    classes) row to one int64 (vectorised), groups by hash, and checks the grouping exactly
    against the rows, falling back to an exact row sort on the (never observed) event of a
    collision. Returns a class per state (any numbering)."""
    # bytes that every state treats alike form one column: refine over distinct columns only
    columns = _distinct_columns(trans)
    live = columns >= 0
    safe = np.where(live, columns, 0)
    weights = _HASH_WEIGHTS[1:columns.shape[1] + 1]
    classes = acc.astype(np.int64)
    num = len(sorted_distinct(classes))
    while True:
        succ = np.where(live, classes[safe], -1)
        hashed = succ @ weights + classes * _HASH_WEIGHTS[0]
        _, first_index, new_classes = np.unique(hashed, return_index=True, return_inverse=True)
        new_classes = new_classes.reshape(-1)
        rep = first_index[new_classes]
        if not (np.array_equal(succ, succ[rep]) and np.array_equal(classes, classes[rep])):
            signature = np.concatenate([classes[:, None], succ], axis=1)
            _, new_classes = np.unique(signature, axis=0, return_inverse=True)
            new_classes = new_classes.reshape(-1)
        new_num = int(new_classes.max()) + 1
        classes = new_classes
        if new_num == num:
            return classes
        num = new_num


def _minimise(trans: np.ndarray, acc: np.ndarray, classes: np.ndarray | None = None) -> DFA:
    """The minimal automaton of ``trans`` (trimmed; ``classes``: each byte's column, None: a
    column per byte): Moore's refinement (:func:`enforcer._kernels.moore_classes` when built,
    else :func:`_moore_classes_reference`), its classes numbered in order of first appearance
    so that the start stays 0."""
    n = trans.shape[0]
    if moore_classes is not None:
        blocks = moore_classes(np.ascontiguousarray(trans, dtype=np.int32), np.ascontiguousarray(acc, dtype=np.uint8))
    else:
        blocks = _moore_classes_reference(trans, acc)
    num = int(blocks.max()) + 1 if n else 0
    if num == n:
        return DFA(np.ascontiguousarray(trans, dtype=np.int32), acc.copy(), classes)
    # renumber the blocks in order of first appearance so that the start stays 0
    cls, representative = _by_first_appearance(blocks)
    rep_rows = trans[representative]
    new_trans = np.where(rep_rows >= 0, cls[np.where(rep_rows >= 0, rep_rows, 0)], DEAD)
    return DFA(np.ascontiguousarray(new_trans, dtype=np.int32), acc[representative].copy(), classes)

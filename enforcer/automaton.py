"""Byte-level regular expressions and the deterministic automata they compile to.

Every constraint in the library (JSON values, string patterns, call ids) is expressed as a
:class:`Node` over bytes and compiled once into a trimmed, minimal :class:`DFA`: state 0 is the
start, ``transitions[s, b]`` is the next state or ``-1``, and every live state can still reach an
accepting one, so "the walk did not die" means "the text can still be completed".

Cost: Thompson construction and subset construction are linear in the size of the expression and
the resulting automaton; minimisation is vectorised with numpy. Nodes and DFAs are immutable.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .errors import SchemaTooComplexError

DEAD = -1
DEFAULT_MAX_STATES = 200_000
MINIMISE_LIMIT = 300
"""Larger automata are kept as built: refinement rounds grow with their depth, and a decoding
path visits one state per byte whether or not equivalent states were merged (masks are computed
lazily per visited state), so minimising them buys little and costs most of a compile."""


# --------------------------------------------------------------------------------------------
# Expression tree


class Node:
    """A regular expression over bytes. Build with the helper functions below."""

    __slots__ = ()


@dataclass(frozen=True, slots=True, eq=False)
class ByteSet(Node):
    """One byte out of the inclusive ranges ``((lo, hi), ...)``."""

    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True, eq=False)
class Concat(Node):
    parts: tuple[Node, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Union(Node):
    alternatives: tuple[Node, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Repeat(Node):
    """``node{minimum,maximum}``; ``maximum=None`` is unbounded."""

    node: Node
    minimum: int
    maximum: int | None


@dataclass(frozen=True, slots=True, eq=False)
class Embedded(Node):
    """An already compiled :class:`DFA` used as a sub-expression (for intersections)."""

    dfa: "DFA"


@dataclass(frozen=True, slots=True, eq=False)
class Graph(Node):
    """An automaton whose edges are expressions: ``edges`` holds ``(source, node, target)``
    over states ``0..num_states-1``; it starts at ``start`` and may end at any of ``accepting``.
    Used to lift character-level automata (regex engines) to bytes."""

    num_states: int
    start: int
    accepting: frozenset[int]
    edges: tuple[tuple[int, Node, int], ...]


@dataclass(frozen=True, slots=True, eq=False)
class _Epsilon(Node):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class _Nothing(Node):
    pass


EPSILON: Node = _Epsilon()
"""Matches the empty string."""
NOTHING: Node = _Nothing()
"""Matches no string at all."""


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
"""One shared node per byte value (nodes are immutable)."""


def literal(data: bytes | str) -> Node:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not data:
        return EPSILON
    return seq(*(_SINGLE_BYTES[b] for b in data))


def seq(*parts: Node) -> Node:
    flat: list[Node] = []
    for part in parts:
        if part is NOTHING:
            return NOTHING
        if part is EPSILON:
            continue
        if isinstance(part, Concat):
            flat.extend(part.parts)
        else:
            flat.append(part)
    if not flat:
        return EPSILON
    if len(flat) == 1:
        return flat[0]
    return Concat(tuple(flat))


def alt(*alternatives: Node) -> Node:
    """Union. Byte sets among the alternatives are merged into one; other duplicates are
    dropped by identity (structural hashing of large trees would cost more than it saves)."""
    flat: list[Node] = []
    seen: set[int] = set()
    ranges: list[tuple[int, int]] = []
    for a in alternatives:
        items = a.alternatives if isinstance(a, Union) else (a,)
        for item in items:
            if item is NOTHING or id(item) in seen:
                continue
            if isinstance(item, ByteSet):
                ranges.extend(item.ranges)
                continue
            seen.add(id(item))
            flat.append(item)
    if ranges:
        flat.insert(0, byte_set(ranges))
    if not flat:
        return NOTHING
    if len(flat) == 1:
        return flat[0]
    return Union(tuple(flat))


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
    """``item (separator item)*`` with between ``minimum`` and ``maximum`` items."""
    if maximum is not None and (maximum < minimum or maximum == 0):
        return EPSILON if minimum == 0 and (maximum is None or maximum >= 0) else NOTHING
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


def _graph_is_trim(graph: Graph) -> bool:
    """Every state of ``graph`` can reach an accepting state (edges taken as non-empty)."""
    reverse: list[list[int]] = [[] for _ in range(graph.num_states)]
    for src, sub, dst in graph.edges:
        if sub is not NOTHING:
            reverse[dst].append(src)
    return all(_reaching(reverse, graph.accepting))


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


class _NFA:
    __slots__ = ("edges", "eps", "may_dead_end")

    def __init__(self) -> None:
        self.edges: list[list[tuple[int, int, int]]] = []  # state -> [(lo, hi, target)]
        self.eps: list[list[int]] = []
        self.may_dead_end = False  # set when a part could leave states that cannot finish

    def new(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, node: Node, start: int, end: int) -> None:
        """Add ``node`` between ``start`` and ``end``."""
        if isinstance(node, ByteSet):
            for lo, hi in node.ranges:
                self.edges[start].append((lo, hi, end))
        elif node is EPSILON:
            self.eps[start].append(end)
        elif node is NOTHING:
            self.may_dead_end = True
        elif isinstance(node, Concat):
            cur = start
            for i, part in enumerate(node.parts):
                nxt = end if i == len(node.parts) - 1 else self.new()
                self.build(part, cur, nxt)
                cur = nxt
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
                self.eps[cur].append(loop)
                back = self.new()
                self.build(node.node, loop, back)
                self.eps[back].append(loop)
                self.eps[loop].append(end)
            else:
                self.eps[cur].append(end)
                for _ in range(node.maximum - node.minimum):
                    nxt = self.new()
                    self.build(node.node, cur, nxt)
                    self.eps[nxt].append(end)
                    cur = nxt
        elif isinstance(node, Graph):
            if not _graph_is_trim(node):
                self.may_dead_end = True
            local = [self.new() for _ in range(node.num_states)]
            self.eps[start].append(local[node.start])
            for a in node.accepting:
                self.eps[local[a]].append(end)
            for src, sub, dst in node.edges:
                self.build(sub, local[src], local[dst])
        elif isinstance(node, Embedded):
            dfa = node.dfa
            if dfa.is_empty:
                self.may_dead_end = True
            base = len(self.edges)
            for _ in range(dfa.num_states):
                self.new()
            for s in range(dfa.num_states):
                for lo, hi, t in dfa.ranges(s):
                    self.edges[base + s].append((lo, hi, base + t))
                if dfa.accepting[s]:
                    self.eps[base + s].append(end)
            self.eps[start].append(base)
        else:  # pragma: no cover - programming error
            raise TypeError(f"not a Node: {node!r}")


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

    def matches(self, data: bytes | str) -> bool:
        if isinstance(data, str):
            data = data.encode("utf-8")
        if self.is_empty:
            return False
        s = self.walk(0, data)
        return s >= 0 and bool(self.accepting_list[s])


class DFA(_Reading):
    """A trimmed, minimal DFA over bytes.

    ``transitions`` is an ``int32`` array of shape ``(num_states, 256)``; ``-1`` is the dead
    state. ``accepting`` is a bool array. State 0 is the start state. Immutable once built.
    """

    __slots__ = ("transitions", "accepting", "_rows", "_ranges", "_accepting_list")

    def __init__(self, transitions: np.ndarray, accepting: np.ndarray) -> None:
        self.transitions = transitions
        self.accepting = accepting
        self.transitions.setflags(write=False)
        self.accepting.setflags(write=False)
        self._rows: list[list[int]] | None = None
        self._ranges: list[list[tuple[int, int, int]]] | None = None
        self._accepting_list: list[bool] = accepting.tolist()

    @property
    def num_states(self) -> int:
        return int(self.transitions.shape[0])

    @property
    def is_empty(self) -> bool:
        """True when the DFA accepts no string."""
        return self.num_states == 0

    @property
    def rows(self) -> list[list[int]]:
        """Transitions as nested Python lists: the fastest form for byte-by-byte walks."""
        if self._rows is None:
            self._rows = self.transitions.tolist()
        return self._rows

    def row(self, state: int) -> list[int]:
        return self.rows[state]

    def array_row(self, state: int) -> np.ndarray:
        return self.transitions[state]

    @property
    def accepting_list(self) -> list[bool]:
        return self._accepting_list

    def ensure(self, states: np.ndarray) -> np.ndarray:
        """All rows exist already: the table itself."""
        return self.transitions

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
        difference follows every byte ``self`` accepts, ``other`` possibly dead (-1)."""
        index = {(0, 0 if not other.is_empty else DEAD): 0}
        pairs = list(index)
        rows: list[np.ndarray] = []
        a_t, b_t = self.transitions, other.transitions
        dead_row = np.full(256, DEAD, dtype=np.int32)
        i = 0
        while i < len(pairs):
            sa, sb = pairs[i]
            ta = a_t[sa]
            tb = b_t[sb] if sb >= 0 else dead_row
            row = np.full(256, DEAD, dtype=np.int32)
            follow = (ta >= 0) if keep_other_dead else (ta >= 0) & (tb >= 0)
            for byte in np.flatnonzero(follow):
                key = (int(ta[byte]), int(tb[byte]))
                target = index.get(key)
                if target is None:
                    target = index[key] = len(pairs)
                    pairs.append(key)
                    if len(pairs) > max_states:
                        raise SchemaTooComplexError(f"automaton exceeds {max_states} states")
                row[byte] = target
            rows.append(row)
            i += 1
        if keep_other_dead:
            acc = [bool(self.accepting[a]) and not (b >= 0 and other.accepting[b]) for a, b in pairs]
        else:
            acc = [bool(self.accepting[a]) and bool(other.accepting[b]) for a, b in pairs]
        return _finalise(np.stack(rows), np.array(acc, dtype=bool))

    def is_disjoint(self, other: "DFA") -> bool:
        return self.intersect(other).is_empty

    def __repr__(self) -> str:
        return f"DFA(states={self.num_states}, accepting={int(self.accepting.sum())})"


def counted_repeat(unit: DFA, minimum: int, maximum: int) -> DFA:
    """``unit{minimum,maximum}`` built directly as a table (no subset construction), for a
    prefix-free ``unit`` (no accepted string extends another, e.g. one encoded character).
    States are (copies done, unit state); cost linear in ``maximum * unit.num_states``."""
    acc = unit.accepting
    if unit.is_empty or acc[0]:
        raise ValueError("counted_repeat needs a non-empty unit that does not accept the empty string")
    live_from_acc = unit.transitions[acc] >= 0
    if live_from_acc.any():
        raise ValueError("counted_repeat needs a prefix-free unit")
    inner = np.flatnonzero(~acc)  # start (0) first
    q = len(inner)
    local = np.full(unit.num_states, DEAD, dtype=np.int64)
    local[inner] = np.arange(q)
    t = unit.transitions[inner]  # (q, 256)
    goes_inner = (t >= 0) & ~acc[np.where(t >= 0, t, 0)]
    completes = (t >= 0) & acc[np.where(t >= 0, t, 0)]
    copies = maximum + 1
    table = np.full((copies * q, 256), DEAD, dtype=np.int64)
    for k in range(copies):
        block = table[k * q:(k + 1) * q]
        block[goes_inner] = (k * q + local[t])[goes_inner]
        if k + 1 < copies:
            block[completes] = (k + 1) * q  # next copy's start state
    accepting = np.zeros(copies * q, dtype=bool)
    accepting[np.arange(minimum, copies) * q] = True
    return _finalise(table.astype(np.int32), accepting, minimise=False)


def _empty_dfa() -> DFA:
    return DFA(np.zeros((0, 256), dtype=np.int32), np.zeros(0, dtype=bool))


class _Determiniser:
    """Subset construction over a Thompson NFA, one DFA state at a time."""

    def __init__(self, node: Node, trim: bool) -> None:
        nfa = _NFA()
        start, self.end = nfa.new(), nfa.new()
        self.start = start
        nfa.build(node, start, self.end)
        self.edges, self.eps = nfa.edges, nfa.eps
        self.alive: list[bool] | None = None
        if trim and nfa.may_dead_end:
            self._trim()
        self._closures: dict[int, frozenset[int]] = {}
        first = self.closure(start)
        self.index: dict[frozenset[int], int] = {first: 0}
        self.sets: list[frozenset[int]] = [first]
        self.accepting: list[bool] = [self.end in first]

    def _trim(self) -> None:
        """Drop NFA edges into states that cannot reach the end: then every non-empty subset
        can reach acceptance, so lazily built DFA states need no later trimming."""
        n = len(self.edges)
        reverse: list[list[int]] = [[] for _ in range(n)]
        for s in range(n):
            for _, _, t in self.edges[s]:
                reverse[t].append(s)
            for t in self.eps[s]:
                reverse[t].append(s)
        alive = _reaching(reverse, [self.end])
        self.edges = [[e for e in es if alive[e[2]]] for es in self.edges]
        self.eps = [[t for t in ts if alive[t]] for ts in self.eps]
        self.alive = alive

    def closure(self, state: int) -> frozenset[int]:
        hit = self._closures.get(state)
        if hit is not None:
            return hit
        seen = {state}
        stack = [state]
        eps = self.eps
        while stack:
            s = stack.pop()
            for t in eps[s]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        result = frozenset(seen)
        self._closures[state] = result
        return result

    def row(self, i: int, max_states: int | None) -> tuple[list[int], list[int]]:
        """Transitions of DFA state ``i`` (creating the states they lead to) and its distinct
        successors."""
        edges = self.edges
        row = [DEAD] * 256
        succ: set[int] = set()
        outgoing = [e for s in self.sets[i] for e in edges[s]]
        if outgoing:
            # split the byte axis at every range boundary; each edge adds its target's closure
            # to the pieces it covers
            cuts = sorted({lo for lo, _, _ in outgoing} | {hi + 1 for _, hi, _ in outgoing})
            at = {c: k for k, c in enumerate(cuts)}
            pieces: list[set[int]] = [set() for _ in range(len(cuts) - 1)]
            for elo, ehi, t in outgoing:
                closure = self.closure(t)
                for k in range(at[elo], at[ehi + 1]):
                    pieces[k] |= closure
            for k, targets in enumerate(pieces):
                if not targets:
                    continue
                lo, hi = cuts[k], cuts[k + 1] - 1
                key = frozenset(targets)
                target = self.index.get(key)
                if target is None:
                    target = self.index[key] = len(self.sets)
                    self.sets.append(key)
                    self.accepting.append(self.end in key)
                    if max_states is not None and len(self.sets) > max_states:
                        raise SchemaTooComplexError(f"automaton exceeds {max_states} states")
                row[lo:hi + 1] = [target] * (hi - lo + 1)
                succ.add(target)
        return row, list(succ)


def compile_node(node: Node, max_states: int = DEFAULT_MAX_STATES) -> DFA:
    """Thompson NFA, subset construction, trimming and (for small automata) minimisation."""
    if node is NOTHING:
        return _empty_dfa()
    det = _Determiniser(node, trim=False)
    table: list[list[int]] = []
    successors: list[list[int]] = []
    i = 0
    while i < len(det.sets):
        row, succ = det.row(i, max_states)
        table.append(row)
        successors.append(succ)
        i += 1
    return _finalise(np.array(table, dtype=np.int32), np.array(det.accepting, dtype=bool), successors=successors)


def is_empty_node(node: Node) -> bool:
    """Whether ``node`` matches no string at all, read off its structure (exact: a sequence is
    empty when a part is, a union when every branch is, a graph when no path of non-empty
    edges joins its start to an accepting state). Linear in the distinct sub-nodes."""
    memo: dict[int, bool] = {}

    def empty(n: Node) -> bool:
        hit = memo.get(id(n))
        if hit is not None:
            return hit
        if n is NOTHING:
            out = True
        elif n is EPSILON:
            out = False
        elif isinstance(n, ByteSet):
            out = not n.ranges
        elif isinstance(n, Concat):
            out = any(empty(p) for p in n.parts)
        elif isinstance(n, Union):
            out = all(empty(a) for a in n.alternatives)
        elif isinstance(n, Repeat):
            out = n.minimum > 0 and empty(n.node)
        elif isinstance(n, Embedded):
            out = n.dfa.is_empty
        elif isinstance(n, Graph):
            outgoing: dict[int, list[tuple[Node, int]]] = {}
            for a, body, b in n.edges:
                outgoing.setdefault(a, []).append((body, b))
            reached = {n.start}
            stack = [n.start]
            out = n.start not in n.accepting
            while stack and out:  # depth first, stopping at the first accepting state reached
                for body, b in outgoing.get(stack.pop(), ()):
                    if b not in reached and not empty(body):
                        reached.add(b)
                        stack.append(b)
                        if b in n.accepting:
                            out = False
                            break
        else:  # pragma: no cover - programming error
            raise TypeError(f"not a Node: {n!r}")
        memo[id(n)] = out
        return out

    return empty(node)


class LazyDFA(_Reading):
    """A DFA built on demand: the NFA when first read, then each state by subset construction the
    first time a walk reaches it. Creating one costs a structural emptiness check; the NFA costs
    milliseconds for a large schema; each new state tens of microseconds, then a list index. Same reading interface as :class:`DFA` (``rows``,
    ``accepting``, ``transitions``) once :meth:`ensure` / :meth:`row` made the states exist.
    Thread-safe for readers: states are only ever appended, under a lock.
    """

    def __init__(self, node: Node) -> None:
        self._node: Node | None = node
        self._det: _Determiniser | None = None
        self.rows: list[list[int] | None] = [None]
        self._table = np.full((64, 256), DEAD, dtype=np.int32)
        self._built = np.zeros(64, dtype=bool)
        self._lock = threading.RLock()
        self.is_empty = is_empty_node(node)

    def _determiniser(self) -> "_Determiniser":
        """The NFA and its subset construction, built on first use (a tool set compiles its
        tools' expressions; each tool's automaton is built when a walk first needs it)."""
        det = self._det
        if det is None:
            with self._lock:
                if self._det is None:
                    self._det = _Determiniser(self._node, trim=True)
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
        return len(self._determiniser().edges)

    @property
    def num_states(self) -> int:
        """States created so far."""
        return len(self._determiniser().sets)

    @property
    def transitions(self) -> np.ndarray:
        """Rows of the states built so far (rows of unbuilt states are meaningless)."""
        return self._table

    def row(self, state: int) -> list[int]:
        r = self.rows[state]
        if r is None:
            r = self._build(state)
        return r

    def array_row(self, state: int) -> np.ndarray:
        """The row of ``state`` as a numpy view (built on demand)."""
        if self.rows[state] is None:
            self._build(state)
        return self._table[state]

    def _build(self, state: int) -> list[int]:
        det = self._determiniser()
        with self._lock:
            r = self.rows[state]
            if r is not None:
                return r
            r, _ = det.row(state, None)
            n = len(det.sets)
            if n > self._table.shape[0]:
                size = max(n, 2 * self._table.shape[0])
                table = np.full((size, 256), DEAD, dtype=np.int32)
                table[: self._table.shape[0]] = self._table
                built = np.zeros(size, dtype=bool)
                built[: self._built.shape[0]] = self._built
                self._table, self._built = table, built
            self.rows.extend([None] * (n - len(self.rows)))
            self._table[state] = r
            self._built[state] = True
            self.rows[state] = r
            return r

    def ensure(self, states: np.ndarray) -> np.ndarray:
        """Build the rows of ``states``; returns the (possibly reallocated) table."""
        missing = states[~self._built[states]] if states.size else states
        if missing.size:
            for s in np.unique(missing).tolist():
                self._build(s)
        return self._table

    def __repr__(self) -> str:
        if self._det is None:
            return "LazyDFA(not built yet)"
        return f"LazyDFA(states built={int(self._built[: self.num_states].sum())}, created={self.num_states})"


def _finalise(transitions: np.ndarray, accepting: np.ndarray, minimise: bool = True,
              successors: list[list[int]] | None = None) -> DFA:
    """Drop states that cannot reach acceptance or be reached, then minimise small automata.
    ``successors`` (distinct targets per state) saves recomputing them when known."""
    n = transitions.shape[0]
    if n == 0:
        return _empty_dfa()
    if successors is None:
        # distinct (source, target) edges, vectorised
        flat = transitions.ravel()
        has = flat >= 0
        keys = np.unique(np.repeat(np.arange(n, dtype=np.int64), 256)[has] * n + flat[has])
        successors = [[] for _ in range(n)]
        for a, b in zip((keys // n).tolist(), (keys % n).tolist()):
            successors[a].append(b)
    forward = successors
    reverse: list[list[int]] = [[] for _ in range(n)]
    for a, targets in enumerate(forward):
        for b in targets:
            reverse[b].append(a)
    live = _reaching(reverse, np.flatnonzero(accepting).tolist())
    if not live[0]:
        return _empty_dfa()
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
    remap = np.full(n + 1, DEAD, dtype=np.int32)
    for old, new in number.items():
        remap[old] = new
    trans = remap[transitions[order]]  # -1 (dead) indexes the last entry, which is DEAD
    acc = accepting[order]
    if not minimise or len(order) > MINIMISE_LIMIT:
        return DFA(np.ascontiguousarray(trans, dtype=np.int32), acc.copy())
    return _minimise(trans, acc)


_HASH_WEIGHTS = np.random.default_rng(0x5EED).integers(1, 2**62, size=257, dtype=np.int64) | 1


def _minimise(trans: np.ndarray, acc: np.ndarray) -> DFA:
    """Moore partition refinement. Each round hashes every state's (class, successor classes)
    row to one int64 (vectorised), groups by hash, and checks the grouping exactly against the
    rows, falling back to an exact row sort on the (never observed) event of a collision."""
    n = trans.shape[0]
    # bytes that every state treats alike form one column: refine over distinct columns only
    columns = np.unique(trans, axis=1)
    live = columns >= 0
    safe = np.where(live, columns, 0)
    weights = _HASH_WEIGHTS[1:columns.shape[1] + 1]
    classes = acc.astype(np.int64)
    num = len(np.unique(classes))
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
            break
        num = new_num
    if num == n:
        return DFA(np.ascontiguousarray(trans, dtype=np.int32), acc.copy())
    # renumber classes in order of first appearance so that the start stays 0
    _, first = np.unique(classes, return_index=True)
    order = np.argsort(first)
    relabel = np.empty(num, dtype=np.int32)
    relabel[order] = np.arange(num, dtype=np.int32)
    cls = relabel[classes]
    representative = np.sort(first)
    rep_rows = trans[representative]
    new_trans = np.where(rep_rows >= 0, cls[np.where(rep_rows >= 0, rep_rows, 0)], DEAD)
    return DFA(np.ascontiguousarray(new_trans, dtype=np.int32), acc[representative].copy())

"""How the text of one place is matched and masked: three rules with one interface.

* :class:`FreeRule` - any token of a fixed set, any number of times (prose, reasoning).
* :class:`DfaRule` - text whose bytes follow a DFA, in any tokenization (JSON arguments, values).
* :class:`ChoiceRule` - one of several texts, in any tokenization, with a payload per text that
  its accepting state knows (a call header, or a call text with JSON inside, naming a tool).
* :class:`TokenTrie` - one of a few texts, each in one fixed tokenization, with a payload per
  text (tag words and attributes a format tokenizes piece by piece).
* :class:`TrieWithFreeText` - a token trie where, from one node on, free text under a DFA may
  follow instead, then one of several fixed endings (a tag with a free attribute value).

``step(state, token) -> state | DEAD``, ``accepting(state)``, ``mask(state)`` (packed int32
words of the text tokens allowed), ``payload(state)``. Rules are immutable once built, shared
by every matcher, and build masks lazily (thread-safe: a race builds the same mask twice).
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, Sequence

import numpy as np

from .automaton import DEAD, DEFAULT_MAX_AUTOMATON_BYTES, DEFAULT_MAX_STATES, DFA, LazyDFA, Node, TaggedUnion, TextTrie
from .errors import TokenizerError
from .masks import MAX_FEW_IDS, MaskTable, TokenIndex

__all__ = ["DEAD", "ChoiceRule", "DfaRule", "FreeRule", "TokenTrie", "TrieWithFreeText"]


class FreeRule:
    """Any token whose bit is set in ``words``; one state (0), always accepting."""

    __slots__ = ("words", "_bits")

    def __init__(self, words: np.ndarray) -> None:
        self.words = words
        self._bits = np.unpackbits(words.view(np.uint8), bitorder="little").view(bool)  # 0/1 bytes: a bool view

    def step(self, state: int, token: int) -> int:
        return 0 if 0 <= token < len(self._bits) and self._bits[token] else DEAD

    def accepting(self, state: int) -> bool:
        return True

    def mask(self, state: int) -> np.ndarray:
        return self.words

    def memory_size_bytes(self) -> int:
        return int(self.words.nbytes + self._bits.nbytes)

    def payload(self, state: int) -> Any:
        return None


class DfaRule:
    """Text whose bytes walk ``dfa`` (masks from ``table``)."""

    __slots__ = ("dfa", "table", "_byte_tokens")

    def __init__(self, dfa: DFA | LazyDFA, table: MaskTable, byte_tokens: Sequence[bytes | None]) -> None:
        self.dfa = dfa
        self.table = table
        self._byte_tokens = byte_tokens

    def step(self, state: int, token: int) -> int:
        data = self._byte_tokens[token] if 0 <= token < len(self._byte_tokens) else None
        if not data or state in self.table.cut:  # cut: the automaton's budget emptied this mask
            return DEAD
        return self.dfa.read(state, data)

    def accepting(self, state: int) -> bool:
        return bool(self.dfa.accepting_list[state])

    def mask(self, state: int) -> np.ndarray:
        return self.table.mask(state)

    def memory_size_bytes(self) -> int:
        return self.dfa.memory_size_bytes() + self.table.memory_size_bytes()

    def payload(self, state: int) -> Any:
        return None


class ChoiceRule(DfaRule):
    """One of ``options`` (``(expression, payload)``: a call header's literal text, or a whole
    call text with the tool's JSON arguments inside), matched byte by byte in any tokenization,
    as one automaton whose accepting states know the option they end, so :meth:`payload` names
    it there (None elsewhere) and the text is read once, by the walk itself. Literal texts
    (every option ``bytes``) are a :class:`~enforcer.automaton.TextTrie`, built whole at once;
    expressions (every option a node) a :class:`~enforcer.automaton.TaggedUnion`, whose states
    are built as walks reach them, within ``max_states`` and ``max_bytes``. Options must not
    share a complete text. Payloads are looked up once per accepting state."""

    __slots__ = ("_payloads", "_tags")

    def __init__(self, options: Sequence[tuple[Node | bytes, Any]], index: TokenIndex,
                 byte_tokens: Sequence[bytes | None], max_states: int = DEFAULT_MAX_STATES,
                 max_bytes: int = DEFAULT_MAX_AUTOMATON_BYTES) -> None:
        expressions = [expression for expression, _ in options]
        if all(isinstance(e, bytes) for e in expressions):
            dfa: TextTrie | TaggedUnion = TextTrie(expressions)  # type: ignore[arg-type]
        else:
            dfa = TaggedUnion(expressions, max_states, max_bytes)  # type: ignore[arg-type]
        super().__init__(dfa, MaskTable(dfa, index), byte_tokens)
        self._payloads = [payload for _, payload in options]
        self._tags: dict[int, Any] = {}

    def payload(self, state: int) -> Any:
        hit = self._tags.get(state, _UNSEEN)
        if hit is _UNSEEN:
            branch = self.dfa.branch(state)
            hit = self._tags[state] = None if branch is None else self._payloads[branch]
        return hit


_UNSEEN = object()
"""Marks a state whose payload was not looked up yet."""


class TokenTrie:
    """``options`` (token ids, payload) as a trie: the only tokenization allowed for each text.
    Node 0 is the root; a node with a payload ends an option. Cost: linear in the options."""

    __slots__ = ("_children", "_payloads", "_masks", "_allowed", "_index")

    def __init__(self, options: Iterable[tuple[Sequence[int], Any]], index: TokenIndex) -> None:
        self._children: list[dict[int, int]] = [{}]
        self._payloads: list[Any] = [None]
        self._masks: dict[int, np.ndarray] = {}
        self._allowed: dict[int, tuple[int, ...] | np.ndarray] = {}
        self._index = index
        for ids, payload in options:
            node = self.path(ids)
            if self._payloads[node] is not None:
                raise TokenizerError(f"two options have the same tokens {list(ids)} ({self._payloads[node]!r}, "
                                     f"{payload!r})")
            if node == 0:
                raise TokenizerError("an option of a tag has no tokens")
            self._payloads[node] = payload

    def path(self, ids: Sequence[int]) -> int:
        """The node that ``ids`` lead to from the root, made if missing (building only)."""
        node = 0
        for t in ids:
            nxt = self._children[node].get(t)
            if nxt is None:
                nxt = self._children[node][t] = len(self._children)
                self._children.append({})
                self._payloads.append(None)
            node = nxt
        return node

    @property
    def num_nodes(self) -> int:
        return len(self._children)

    def memory_size_bytes(self) -> int:
        """Masks and listed ids made so far plus about 100 bytes per node."""
        return sum(m.nbytes for m in self._masks.values()) + 100 * len(self._children) \
            + sum(sys.getsizeof(ids) for ids in self._allowed.values() if type(ids) is tuple)

    def step(self, state: int, token: int) -> int:
        return self._children[state].get(token, DEAD)

    def accepting(self, state: int) -> bool:
        return self._payloads[state] is not None

    def next_ids(self, state: int) -> tuple[int, ...]:
        """The ids of the node's children (the tokens allowed there; a new tuple)."""
        return tuple(self._children[state])

    def mask(self, state: int) -> np.ndarray:
        """The ids of the node's children (:meth:`TokenIndex.ids_mask`), made once per node."""
        hit = self._masks.get(state)
        if hit is None:
            hit = self._masks[state] = self._index.ids_mask(self._children[state])
        return hit

    def allowed(self, state: int) -> tuple[int, ...] | np.ndarray:
        """What a row gets at the node (its own tokens only, no place's exits): the ids of its
        children (:meth:`next_ids`) when at most :data:`~enforcer.masks.MAX_FEW_IDS`, else
        their packed mask (:meth:`mask`). Made once per node: a tag's piece is filled with one
        lookup and no tuple, first time or not."""
        hit = self._allowed.get(state)
        if hit is None:
            children = self._children[state]
            hit = self._allowed[state] = tuple(children) if len(children) <= MAX_FEW_IDS else self.mask(state)
        return hit

    def payload(self, state: int) -> Any:
        return self._payloads[state]

    @property
    def is_empty(self) -> bool:
        return not self._children[0]


class TrieWithFreeText:
    """``trie``'s options, or: ``trie`` up to node ``branch``, then text walking ``free`` (an
    eager DFA, at least one token) ending where it accepts, then one of ``endings`` (a trie
    whose payloads are this rule's). The free text must not be able to continue with an
    ending's first token (an ending opens with a byte the free text cannot hold).

    State: ``extra * (trie nodes + 1) + trie node`` (trie node ``n``: the trie path is dead;
    ``extra`` 0: no free path, ``1 + d``: free text at DFA state ``d``, ``1 + F + e``: ending node
    ``e``). Both paths run side by side, since an option of the trie and a free text may share a
    prefix. Masks are cached per state."""

    __slots__ = ("trie", "branch", "free", "endings", "_span", "_free_states", "_masks")

    def __init__(self, trie: TokenTrie, branch: int, free: DfaRule, endings: TokenTrie) -> None:
        self.trie, self.branch, self.free, self.endings = trie, branch, free, endings
        self._span = trie.num_nodes + 1
        self._free_states = free.dfa.num_states
        self._masks: dict[int, np.ndarray] = {}

    def memory_size_bytes(self) -> int:
        return (self.trie.memory_size_bytes() + self.free.memory_size_bytes() + self.endings.memory_size_bytes()
                + sum(m.nbytes for m in self._masks.values()))

    def _split(self, state: int) -> tuple[int, int]:
        extra, node = divmod(state, self._span)
        return (node if node < self._span - 1 else DEAD), extra

    def _join(self, node: int, extra: int) -> int:
        return extra * self._span + (node if node != DEAD else self._span - 1)

    def step(self, state: int, token: int) -> int:
        node, extra = self._split(state)
        new_node = self.trie.step(node, token) if node != DEAD else DEAD
        new_extra = 0
        if node == self.branch:
            d = self.free.step(0, token)
            if d != DEAD:
                new_extra = 1 + d
        elif 1 <= extra <= self._free_states:
            d = self.free.step(extra - 1, token)
            if d != DEAD:
                new_extra = 1 + d
            elif self.free.accepting(extra - 1):
                e = self.endings.step(0, token)
                if e != DEAD:
                    new_extra = 1 + self._free_states + e
        elif extra:
            e = self.endings.step(extra - 1 - self._free_states, token)
            if e != DEAD:
                new_extra = 1 + self._free_states + e
        if new_node == DEAD and not new_extra:
            return DEAD
        return self._join(new_node, new_extra)

    def accepting(self, state: int) -> bool:
        node, extra = self._split(state)
        if node != DEAD and self.trie.accepting(node):
            return True
        return extra > self._free_states and self.endings.accepting(extra - 1 - self._free_states)

    def payload(self, state: int) -> Any:
        node, extra = self._split(state)
        if node != DEAD and self.trie.accepting(node):
            return self.trie.payload(node)
        return self.endings.payload(extra - 1 - self._free_states)

    def mask(self, state: int) -> np.ndarray:
        hit = self._masks.get(state)
        if hit is None:
            node, extra = self._split(state)
            parts = []
            if node != DEAD:
                parts.append(self.trie.mask(node))
                if node == self.branch:
                    parts.append(self.free.mask(0))
            if 1 <= extra <= self._free_states:
                parts.append(self.free.mask(extra - 1))
                if self.free.accepting(extra - 1):
                    parts.append(self.endings.mask(0))
            elif extra:
                parts.append(self.endings.mask(extra - 1 - self._free_states))
            hit = parts[0].copy()
            for part in parts[1:]:
                hit |= part
            hit.setflags(write=False)
            self._masks[state] = hit
        return hit

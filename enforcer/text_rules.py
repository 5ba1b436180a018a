"""How the text of one place is matched and masked: three rules with one interface.

* :class:`FreeRule` - any token of a fixed set, any number of times (prose, reasoning).
* :class:`DfaRule` - text whose bytes follow a DFA, in any tokenization (JSON arguments, values).
* :class:`TokenTrie` - one of a few texts, each in one fixed tokenization, with a payload per
  text (tag words and attributes a format tokenizes piece by piece).

``step(state, token) -> state | DEAD``, ``accepting(state)``, ``mask(state)`` (packed int32
words of the text tokens allowed), ``payload(state)``. Rules are immutable once built, shared
by every matcher, and build masks lazily (thread-safe: a race builds the same mask twice).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from .automaton import DEAD, DFA, LazyDFA
from .errors import TokenizerError
from .masks import MaskTable, TokenIndex, pack_ids

__all__ = ["DEAD", "DfaRule", "FreeRule", "TokenTrie"]


class FreeRule:
    """Any token whose bit is set in ``words``; one state (0), always accepting."""

    __slots__ = ("words", "_bits")

    def __init__(self, words: np.ndarray) -> None:
        self.words = words
        self._bits = np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool)

    def step(self, state: int, token: int) -> int:
        return 0 if 0 <= token < len(self._bits) and self._bits[token] else DEAD

    def accepting(self, state: int) -> bool:
        return True

    def mask(self, state: int) -> np.ndarray:
        return self.words

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
        if not data:
            return DEAD
        dfa = self.dfa
        rows = dfa.rows
        for b in data:
            row = rows[state]
            if row is None:
                row = dfa.row(state)
            state = row[b]
            if state == DEAD:
                return DEAD
        return state

    def accepting(self, state: int) -> bool:
        return bool(self.dfa.accepting_list[state])

    def mask(self, state: int) -> np.ndarray:
        return self.table.mask(state)

    def payload(self, state: int) -> Any:
        return None


class TokenTrie:
    """``options`` (token ids, payload) as a trie: the only tokenization allowed for each text.
    Node 0 is the root; a node with a payload ends an option. Cost: linear in the options."""

    __slots__ = ("_children", "_payloads", "_masks", "_words")

    def __init__(self, options: Iterable[tuple[Sequence[int], Any]], index: TokenIndex) -> None:
        self._children: list[dict[int, int]] = [{}]
        self._payloads: list[Any] = [None]
        self._masks: dict[int, np.ndarray] = {}
        self._words = index.words
        for ids, payload in options:
            node = 0
            for t in ids:
                nxt = self._children[node].get(t)
                if nxt is None:
                    nxt = self._children[node][t] = len(self._children)
                    self._children.append({})
                    self._payloads.append(None)
                node = nxt
            if self._payloads[node] is not None:
                raise TokenizerError(f"two options have the same tokens {list(ids)} ({self._payloads[node]!r}, "
                                     f"{payload!r})")
            if node == 0:
                raise TokenizerError("an option of a tag has no tokens")
            self._payloads[node] = payload

    def step(self, state: int, token: int) -> int:
        return self._children[state].get(token, DEAD)

    def accepting(self, state: int) -> bool:
        return self._payloads[state] is not None

    def mask(self, state: int) -> np.ndarray:
        hit = self._masks.get(state)
        if hit is None:
            hit = pack_ids(np.array(sorted(self._children[state]), dtype=np.int64), self._words)
            hit.setflags(write=False)
            self._masks[state] = hit
        return hit

    def payload(self, state: int) -> Any:
        return self._payloads[state]

    @property
    def is_empty(self) -> bool:
        return not self._children[0]

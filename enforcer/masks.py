"""Token masks: which token ids keep a byte DFA alive from a given state.

:class:`TokenIndex` lays the text tokens of a vocabulary out once (sorted, flat bytes, a token
trie, the shared string-body masks; ~0.15 s for 150k ids, shared process-wide). :class:`MaskTable`
computes, per DFA state and on first use, the packed bitmask of the tokens whose every byte the
DFA accepts from that state; results are kept for the lifetime of the compiled object and shared
by every matcher. A state inside a free string, a class body or an embedded automaton reuses
per-vocabulary masks and walks only the tokens that can leave it (a state reading any text, a
raw value's, walks none); any other state walks the token trie once (compiled, a dead byte
pruning its whole subtree): typically 5-50 µs, 2-3 ms when nearly every token lives; later
lookups are a dict hit.
"""

from __future__ import annotations

import sys
import threading
from typing import Collection, NamedTuple
from weakref import WeakKeyDictionary

import numpy as np

from .automaton import (DFA, AutomatonBudgetError, Block, CountedDFA, CountedProduct, LazyDFA, codepoints, compile_node,
                        concat_ranges, counted_repeat, star)
from .lru import LRU
from .regex import is_format_table
from .vocabulary import Vocabulary

try:
    from ._kernels import (TOKEN_BYTES_LIMIT, RowWriter, TrieWalk, ascii_byte_index, build_trie, class_body_bytes,
                           embeds_within, first_stop_in, loop_and_leaving, pack_few_ids, take_few_ids, walk_tokens)
except ImportError:  # a source tree without the built extension: the numpy walk does the work
    TOKEN_BYTES_LIMIT, TrieWalk, build_trie, class_body_bytes, embeds_within, pack_few_ids, walk_tokens = (
        0, None, None, None, None, None, None)
    RowWriter = take_few_ids = loop_and_leaving = ascii_byte_index = first_stop_in = None

MAX_FEW_IDS = 64
"""A mask of at most this many ids that a walk finds (a key's next pieces, a delimiter) is kept
and written as its ids (:meth:`MaskTable.few_ids`), not as a packed array of 20 KB."""
DEFAULT_MAX_MASK_BYTES = 256 << 20
"""Masks one :class:`MaskTable` keeps (its packed rows and id lists)."""
PRECOMPUTED_LEVELS = 4
"""How deep in free-form values ``precompute`` builds states and masks (as deep as automata
built whole take them); deeper states are built when a text first reaches them."""

_UNSEEN = object()
_WIDE = 64  # states with more live first bytes than this use whole first-byte groups

# Raw (unescaped) characters of a JSON string: the body of every free string.
_RAW_BODY_CHAR = codepoints([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)])
_RAW_STRING_DFA = compile_node(star(_RAW_BODY_CHAR))
_RAW_CHAR_DFA = compile_node(_RAW_BODY_CHAR)
# Any text, every character read raw (Kimi K3's argument values): the body of every free raw value.
_TEXT_DFA = compile_node(star(codepoints([(0, 0x10FFFF)])))
_SAFE_BYTES = np.ones(256, dtype=bool)
_SAFE_BYTES[:0x20] = False
_SAFE_BYTES[[0x22, 0x5C]] = False
_SAFE_COLUMNS = np.flatnonzero(_SAFE_BYTES)
_SAFE_FLAGS = _SAFE_BYTES.astype(np.uint8)
_STRING_BODY_FLAGS = _SAFE_FLAGS.copy()
_STRING_BODY_FLAGS[:0x20] = 1  # dead in a JSON string body: a value read raw (Kimi K3) reads them
_EVERY_BYTE = np.ones(256, dtype=bool)
_EVERY_FLAG = _EVERY_BYTE.astype(np.uint8)
_MIN_CLASS_BYTES = 16  # a body over fewer ASCII bytes (and none past ASCII) holds few tokens: walked as it stands
_MAX_LEAVING_BYTES = 4  # a class body that more ASCII bytes leave is walked as it stands
_MAX_BODY_PAIRS = 4096  # a string body spanning more (raw state, state) pairs within a token's length is not recognised
_MAX_LONG_TOKENS = 2048  # a bounded class body walks the safe tokens longer than its depth: at most this many


_SMALL_WALK = 192  # below this many candidates a plain loop beats numpy's per-call overhead


def walk_positions(index: "TokenIndex", dfa: DFA | LazyDFA, state: int, pos_idx: np.ndarray) -> np.ndarray:
    """Positions (into ``index.ids``) among ``pos_idx`` whose every byte ``dfa`` accepts from
    ``state``. Few candidates: a byte loop; many: one numpy pass per byte position, dead tokens
    dropping out as soon as they die. A lazy DFA builds the states the walk reaches."""
    if pos_idx.size == 0:
        return pos_idx
    if pos_idx.size < _SMALL_WALK:
        read, blobs = dfa.read, index.blobs
        return np.array([p for p in pos_idx.tolist() if read(state, blobs[p]) >= 0], dtype=np.int64)
    current = dfa.array_row(state)[index.first[pos_idx]]
    alive = current >= 0
    pos_idx, current = pos_idx[alive], current[alive]
    lengths = index.lengths[pos_idx]
    found = [pos_idx[lengths == 1]]
    more = lengths > 1
    pos_idx, current, lengths = pos_idx[more], current[more], lengths[more]
    starts = index.offsets[pos_idx]
    step = 1
    flat = index.flat
    while pos_idx.size:
        trans = dfa.ensure(current)
        current = trans[current, flat[starts + step]]
        step += 1
        alive = current >= 0
        finished = alive & (lengths == step)
        if finished.any():
            found.append(pos_idx[finished])
        keep = alive & (lengths > step)
        pos_idx, current, starts, lengths = pos_idx[keep], current[keep], starts[keep], lengths[keep]
    return np.concatenate(found)


def walk_mask(index: "TokenIndex", dfa: DFA | LazyDFA, state: int, positions: np.ndarray) -> np.ndarray:
    """Packed int32 mask of the tokens at ``positions`` (ascending) whose every byte ``dfa``
    accepts from ``state``: the compiled prefix-sharing walk (:mod:`enforcer._kernels`, GIL
    released); a lazy DFA builds the rows the walk stops at, and the walk resumes there.
    Same result as :func:`walk_positions` (the reference)."""
    words = np.zeros(index.words, dtype=np.uint32)
    if positions.size == 0:
        return words.view(np.int32)
    if walk_tokens is None or index.max_length >= TOKEN_BYTES_LIMIT:
        return pack_ids(index.ids[walk_positions(index, dfa, state, positions)], index.words)
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    states = np.full(positions.size, state, dtype=np.int32)
    steps = np.zeros(positions.size, dtype=np.int32)
    while True:
        table, built = dfa.kernel_view()
        size = positions.size
        pending_positions = np.empty(size, dtype=np.int64)
        pending_states = np.empty(size, dtype=np.int32)
        pending_steps = np.empty(size, dtype=np.int32)
        _, pending = walk_tokens(table, built, index.flat, index.offsets, index.lengths, index.ids, positions,
                                 states, steps, words, pending_positions, pending_states, pending_steps)
        if not pending:
            return words.view(np.int32)
        positions, states, steps = pending_positions[:pending], pending_states[:pending], pending_steps[:pending]
        dfa.ensure(states)


def trie_mask(index: "TokenIndex", dfa: DFA | LazyDFA, state: int, trie: "TokenTrie | None" = None) -> np.ndarray:
    """Packed int32 mask of every token of ``trie`` (default: the whole vocabulary's,
    :attr:`TokenIndex.trie`) whose bytes ``dfa`` accepts from ``state``: the compiled
    depth-first walk of the token trie (:class:`enforcer._kernels.TrieWalk`), where a dead byte
    prunes every token under it at once; a lazy DFA's rows are built as the walk reaches them
    (:meth:`LazyDFA.walk_trie`). Same result as :func:`reference_mask`; needs the compiled
    kernels (:attr:`TokenIndex.trie` not None)."""
    words = np.zeros(index.words, dtype=np.uint32)
    dfa.walk_trie((index.trie if trie is None else trie).kernel, state, words)
    return words.view(np.int32)


class TokenTrie(NamedTuple):
    """Tokens of a :class:`TokenIndex` (all, or a subset) as a trie in preorder (see
    :func:`enforcer._kernels.build_trie`): per node the byte read into it, where its subtree
    ends, and the range of the tokens it spells in ``ids`` (their token ids, in byte order)."""

    byte: np.ndarray
    end: np.ndarray
    first: np.ndarray
    last: np.ndarray
    ids: np.ndarray
    kernel: "TrieWalk"
    """The compiled walk over these arrays."""

    @classmethod
    def of(cls, index: "TokenIndex", positions: np.ndarray) -> "TokenTrie":
        """The trie of the tokens at ``positions`` (ascending) of ``index``."""
        arrays = (*build_trie(index.flat, index.offsets[positions], index.lengths[positions]), index.ids[positions])
        return cls(*arrays, TrieWalk(*arrays, index.max_length))


class AsciiBytes(NamedTuple):
    """Which safe tokens hold each ASCII byte (:func:`enforcer._kernels.ascii_byte_index`), and
    the string-body tokens of ASCII bytes alone: what :meth:`TokenIndex.class_body_mask` and
    :meth:`TokenIndex.positions_leaving` read (an OR of a few packed rows, a few slices: no pass
    over the vocabulary). About 5 MB for 150k ids."""

    holding: np.ndarray
    """uint32[128, words]: row ``b``, the packed ids of the safe tokens holding byte ``b``."""
    starts: np.ndarray
    """int64[129]: the positions of the safe tokens holding byte ``b`` are
    ``positions[starts[b]:starts[b + 1]]``."""
    positions: np.ndarray
    """int32: per byte, the positions (ascending) of the safe tokens holding it."""
    ascii_body: np.ndarray
    """Packed uint32 mask of the tokens a raw string body reads whole whose bytes are all ASCII."""


class ClassBody(NamedTuple):
    """A string body standing at a state that loops over one set of characters (the class
    shortcut of :meth:`MaskTable._class_body`), for every token or, in a bounded run (a
    hostname label, ``^[a-z0-9-]{1,63}$``), for the tokens of up to ``depth`` bytes."""

    inside: np.ndarray
    """256 bools: the set's safe bytes (its ASCII bytes, and the UTF-8 lead bytes when it holds
    every character past ASCII)."""
    leaving: tuple[int, ...]
    """The live ASCII bytes that leave the loop for another state (a path's ``/`` in
    ``^/dev/[^/]+(/[^/]+)*$``): tokens holding one are walked."""
    columns: np.ndarray
    """uint8[256]: the bytes the loop is checked over (safe bytes but the leaving ones)."""
    depth: int
    """The loop reads as the state does the tokens of up to this many bytes (the index's
    longest token: all of them); longer safe tokens are walked."""


class TokenIndex:
    """Text tokens sorted by their first two bytes, with their bytes in one flat array.
    Immutable; built once per vocabulary (about 0.2 s for 150k ids)."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        tokens = vocabulary.byte_tokens
        self.vocab_size = vocabulary.vocab_size
        self.words = (self.vocab_size + 31) // 32
        # sorted by bytes: tokens with a common prefix are neighbours (the compiled walk shares
        # their prefix), and so are tokens with the same first two bytes (``pair_start``)
        text_ids = sorted((i for i, t in enumerate(tokens) if t), key=tokens.__getitem__)
        keys = [tokens[i][0] * 257 + (tokens[i][1] + 1 if len(tokens[i]) > 1 else 0) for i in text_ids]
        self.ids = np.array(text_ids, dtype=np.int64)
        self.keys = np.array(keys, dtype=np.int64)
        # a tuple of bytes: the collector untracks it at its first collection; a list of 150k
        # items would be traversed by every collection it lives through (young ones: 2-5 ms
        # in some first request)
        blobs = self.blobs = tuple([tokens[i] for i in text_ids])
        self.lengths = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
        self.offsets = np.zeros(len(blobs), dtype=np.int64)
        if len(blobs) > 1:
            np.cumsum(self.lengths[:-1], out=self.offsets[1:])
        self.flat = np.frombuffer(b"".join(blobs), dtype=np.uint8)
        self.max_length = int(self.lengths.max(initial=0))
        self.first = self.flat[self.offsets] if len(blobs) else np.zeros(0, dtype=np.uint8)
        self.pair_start = np.searchsorted(self.keys, np.arange(257 * 256 + 1), side="left")
        self.all_text_ids = np.sort(self.ids)
        self.text_words = pack_ids(self.all_text_ids, self.words)
        """Packed mask of every text token (read-only): the free text of every format."""
        self.text_words.setflags(write=False)
        self._special_ids = tuple(sorted(i for i in vocabulary.special_ids if i < self.vocab_size))
        self._free_words: dict[frozenset[int], np.ndarray] = {}
        self._scratch = threading.local()
        # tokens whose first byte outside a string body is a quote or a backslash: the only
        # ones whose fate from inside a free string depends on what follows the string (a
        # control byte first kills the token inside any string)
        unsafe_at = np.flatnonzero(~_SAFE_BYTES[self.flat])
        owner = np.searchsorted(self.offsets, unsafe_at, side="right") - 1
        owners, first = np.unique(owner, return_index=True)
        leaves = np.isin(self.flat[unsafe_at[first]], (0x22, 0x5C))
        self.unsafe_positions = owners
        self.first_unsafe = self.flat[unsafe_at[first]]
        self.exit_positions = owners[leaves]
        self.safe = np.ones(len(blobs), dtype=bool)
        self.safe[owners] = False
        # the longest safe tokens: those a bounded class body walks (:meth:`safe_positions_longer`)
        at_least = np.cumsum(np.bincount(self.lengths[self.safe], minlength=self.max_length + 2)[::-1])[::-1]
        self.long_bound = int(np.argmax(at_least[1:] <= _MAX_LONG_TOKENS))
        """The fewest bytes past which at most ``_MAX_LONG_TOKENS`` safe tokens are longer."""
        long = np.flatnonzero(self.safe & (self.lengths > self.long_bound))
        self._long_positions, self._long_lengths = long, self.lengths[long]
        self.trie: TokenTrie | None = None
        """The token trie (~3 MB for 150k ids, ~5 ms to build); None without the compiled kernels."""
        self.exit_trie: TokenTrie | None = None
        """The trie of :attr:`exit_positions`' tokens (those a free string body may end with)."""
        self.unsafe_trie: TokenTrie | None = None
        """The trie of :attr:`unsafe_positions`' tokens (those holding a quote, backslash or control byte)."""
        self.root_nodes = np.full(256, -1, dtype=np.int32)
        """Per byte, the node of :attr:`trie` of the tokens starting with it (-1: none, or no trie)."""
        if build_trie is not None and len(blobs) and self.max_length < TOKEN_BYTES_LIMIT:
            self.trie = TokenTrie.of(self, np.arange(len(blobs)))
            self.exit_trie = TokenTrie.of(self, self.exit_positions)
            self.unsafe_trie = TokenTrie.of(self, self.unsafe_positions)
            node, end = 1, int(self.trie.end[0])
            while node < end:  # the root's children, in preorder
                self.root_nodes[self.trie.byte[node]] = node
                node = int(self.trie.end[node])
        self._raw_body: np.ndarray | None = None
        self._string_body_mask: np.ndarray | None = None
        self._text_body_mask: np.ndarray | None = None
        self._safe_words: np.ndarray | None = None
        self._body_chars: np.ndarray | None = None
        self._bounded: np.ndarray | None = None
        self._ascii_bytes: AsciiBytes | None = None
        self.shared: LRU[np.ndarray] = LRU(4096)
        """Masks that depend only on this vocabulary and an automaton's content, shared by every
        compiled object: per remaining length of a bounded string, per embedded state."""
        self.large_safe_parts: WeakKeyDictionary[DFA, dict[int, np.ndarray]] = WeakKeyDictionary()
        """:func:`safe_part` of embedded tables too large to key by content, per automaton
        (they live as long as it does) and state."""
        self.format_parts: LRU[np.ndarray] = LRU(FORMAT_PARTS)
        """:func:`safe_part` of the ``format`` automata (constants of the library) per automaton
        and state: kept as long as this index, whatever :func:`clear_shared_masks` drops."""

    def scratch(self) -> np.ndarray:
        """This thread's zeroed packed uint32 mask to walk into: its user leaves it zeroed, or
        keeps it and calls :meth:`release_scratch`."""
        words = getattr(self._scratch, "words", None)
        if words is None:
            words = self._scratch.words = np.zeros(self.words, dtype=np.uint32)
        return words

    def release_scratch(self) -> None:
        """This thread's scratch mask is kept by its user: the next call makes a new one."""
        self._scratch.words = None

    def free_text_words(self, controlled: frozenset[int]) -> np.ndarray:
        """Packed mask of every text token and every special token not in ``controlled``
        (read-only): a format's free text, whatever the tools. Kept per controlled set for the
        index's lifetime (a few formats; ~20 KB each for 150k ids)."""
        hit = self._free_words.get(controlled)
        if hit is None:
            specials = np.array([i for i in self._special_ids if i not in controlled], dtype=np.int64)
            hit = self.text_words | pack_ids(specials, self.words)
            hit.setflags(write=False)
            self._free_words[controlled] = hit
        return hit

    def _raw_body_positions(self) -> np.ndarray:
        """Positions of the tokens a raw string body reads from a character boundary (computed
        once: the trie walk when built, else the numpy walk over the safe tokens)."""
        if self._raw_body is None:
            if self.trie is not None:
                bits = np.unpackbits(trie_mask(self, _RAW_STRING_DFA, 0).view(np.uint8), bitorder="little")
                self._raw_body = np.flatnonzero(bits[self.ids])
            else:
                self._raw_body = walk_positions(self, _RAW_STRING_DFA, 0, np.flatnonzero(self.safe))
        return self._raw_body

    def body_chars(self) -> np.ndarray:
        """Per position: the characters a safe token starts when read inside a raw string body
        from a character boundary (a trailing partial character counts), or -1 when it cannot
        be read there. Computed once."""
        if self._body_chars is None:
            chars = np.full(len(self.ids), -1, dtype=np.int64)
            lead = ((self.flat < 0x80) | (self.flat >= 0xC0)).astype(np.int64)
            counts = np.add.reduceat(lead, self.offsets) if len(self.ids) else lead[:0]
            valid = self._raw_body_positions()
            chars[valid] = counts[valid]
            self._body_chars = chars
        return self._body_chars

    def bounded_body_mask(self, remaining: int) -> np.ndarray:
        """Packed mask of the safe tokens a raw string body accepts from a character boundary
        with room for at most ``remaining`` more characters (read-only; a row of a table made
        once per vocabulary, one row per token length in characters, ~2.5 MB for 150k ids)."""
        if self._bounded is None:
            chars = self.body_chars()
            valid = chars >= 0
            ids, counts = self.ids[valid], chars[valid]
            table = np.zeros((int(counts.max(initial=0)) + 1, self.words), dtype=np.uint32)
            np.bitwise_or.at(table, (counts, ids >> 5), np.left_shift(1, ids & 31).astype(np.uint32))
            np.bitwise_or.accumulate(table, axis=0, out=table)  # row r: every token of at most r characters
            table = table.view(np.int32)
            table.setflags(write=False)
            self._bounded = table
        return self._bounded[min(remaining, self._bounded.shape[0] - 1)]

    def safe_positions_longer(self, length: int) -> np.ndarray:
        """Positions (ascending) of the safe tokens of more than ``length`` bytes, ``length`` at
        least :attr:`long_bound` (at most ``_MAX_LONG_TOKENS`` of them; a few microseconds)."""
        if length < self.long_bound:
            raise ValueError(f"{length} bytes is below the long-token bound {self.long_bound}")
        return self._long_positions[self._long_lengths > length]

    def safe_words(self) -> np.ndarray:
        """Packed mask of the safe tokens (no quote, backslash or control byte; read-only,
        computed once)."""
        if self._safe_words is None:
            self._safe_words = pack_ids(self.ids[self.safe], self.words)
            self._safe_words.setflags(write=False)
        return self._safe_words

    def string_body_mask(self) -> np.ndarray:
        """Packed mask of the tokens a free JSON string accepts from a character boundary
        without leaving the string or using an escape (most of the vocabulary). Computed once."""
        if self._string_body_mask is None:
            self._string_body_mask = pack_ids(self.ids[self._raw_body_positions()], self.words)
        return self._string_body_mask

    def text_body_mask(self) -> np.ndarray:
        """Packed mask of the tokens a free raw value (any text, read raw: Kimi K3's argument
        values) accepts from a character boundary: every token of well-formed UTF-8 (a last
        character may be cut). Computed once (a walk of the token trie, with the index when
        the kernels are built)."""
        if self._text_body_mask is None:
            if self.trie is not None:
                hit = trie_mask(self, _TEXT_DFA, 0)
            else:
                hit = pack_ids(self.ids[walk_positions(self, _TEXT_DFA, 0, np.arange(len(self.ids)))], self.words)
            hit.setflags(write=False)
            self._text_body_mask = hit
        return self._text_body_mask

    def ids_mask(self, ids: Collection[int]) -> np.ndarray:
        """Packed mask of exactly ``ids`` (read-only). Up to ``_FEW_IDS`` ids (a tag word's
        next tokens, a place's delimiters), packed afresh, about 1 us: cheaper than a shared
        entry's key, lookup and store. More, shared per vocabulary and id set (:attr:`shared`)."""
        if len(ids) <= _FEW_IDS:
            hit = pack_ids(ids, self.words)
            hit.setflags(write=False)
            return hit
        key = ("ids", tuple(sorted(ids)))
        hit = self.shared.get(key)
        if hit is None:
            hit = pack_ids(np.array(key[1], dtype=np.int64), self.words)
            hit.setflags(write=False)
            hit = self.shared.put(key, hit)
        return hit

    def class_body_mask(self, inside: np.ndarray) -> np.ndarray:
        """Packed mask of the tokens a string body over one set of characters reads whole from
        a character boundary (read-only): ``inside`` (256 bools, safe bytes only) flags its
        ASCII bytes and, when the set holds every character past ASCII, the UTF-8 lead bytes.
        Those are the raw-body tokens holding no safe ASCII byte outside the set, and without
        lead bytes only the ASCII ones. Shared per vocabulary and set (:attr:`shared`); an OR of
        one packed row per byte outside the set (:meth:`ascii_bytes`), 30-100 us for 150k ids
        the first time a set is seen."""
        key = ("class body", np.packbits(inside).tobytes())
        hit = self.shared.get(key)
        if hit is None:
            sets = self.ascii_bytes()
            body = sets.ascii_body if not inside[0x80:].any() else self.string_body_mask().view(np.uint32)
            outside = np.flatnonzero(_SAFE_BYTES[:0x80] & ~inside[:0x80])
            hit = (body & ~np.bitwise_or.reduce(sets.holding[outside], axis=0)).view(np.int32)
            hit.setflags(write=False)
            hit = self.shared.put(key, hit)
        return hit

    def positions_leaving(self, inside: np.ndarray, leaving: tuple[int, ...]) -> np.ndarray:
        """Positions (ascending, read-only) of the safe tokens whose first byte outside a class
        body's set ``inside`` (as :class:`ClassBody` has it) is one of the bytes ``leaving``
        (any other byte outside the set kills a token inside the body), but for the tokens of
        more than one byte that start with one (walked below that byte's node of :attr:`trie`
        instead, :func:`class_body_part`): a few dozen of the tokens holding one
        (:meth:`ascii_bytes`). Shared per vocabulary, set and bytes (:attr:`shared`); 10-30 us
        for 150k ids."""
        key = ("leaving", np.packbits(inside).tobytes(), leaving)
        hit = self.shared.get(key)
        if hit is None:
            stops = np.where(inside, 0, 1).astype(np.uint8)
            if inside[0x80:].any():  # every character past ASCII: its continuation bytes too
                stops[0x80:] = 0
            stops[list(leaving)] = 2
            sets = self.ascii_bytes()
            hit = np.sort(np.concatenate([
                first_stop_in(self.flat, self.offsets, self.lengths, sets.positions[sets.starts[b]:sets.starts[b + 1]],
                              stops) for b in leaving]))
            hit = hit[np.concatenate(([True], hit[1:] != hit[:-1]))]  # a token holding two of them once
            hit.setflags(write=False)
            hit = self.shared.put(key, hit)
        return hit

    def ascii_bytes(self) -> AsciiBytes:
        """Which safe tokens hold each ASCII byte. Computed once (~7 ms for 150k ids), with the
        index (:func:`token_index`); needs the compiled kernels."""
        if self._ascii_bytes is None:
            if ascii_byte_index is None:
                raise RuntimeError("the per-byte token index needs the compiled kernels (enforcer._kernels)")
            holding, starts, positions = ascii_byte_index(self.flat, self.offsets, self.lengths, self.ids,
                                                          self.safe.view(np.uint8), self.words)
            body = self._raw_body_positions()
            ascii = np.add.reduceat((self.flat >= 0x80).astype(np.int32), self.offsets)[body] == 0
            for array in (holding, starts, positions):
                array.setflags(write=False)
            self._ascii_bytes = AsciiBytes(holding, starts, positions, pack_ids(self.ids[body[ascii]], self.words).view(
                np.uint32))
        return self._ascii_bytes

    def candidates(self, dfa: DFA | LazyDFA, state: int) -> np.ndarray:
        """Positions of the tokens whose first two bytes (or single byte) ``dfa`` accepts
        from ``state``: a superset of the allowed tokens, usually a small one."""
        row = dfa.array_row(state)
        live = np.flatnonzero(row >= 0)
        if live.size > _WIDE:
            return concat_ranges(self.pair_start[live * 257], self.pair_start[(live + 1) * 257])
        targets = row[live]
        table = dfa.ensure(targets)  # the rows after each live first byte
        first, second = np.nonzero(table[targets] >= 0)
        # single-byte tokens and pairs, as sorted keys: the positions come out ascending
        k = np.sort(np.concatenate([live * 257, live[first] * 257 + 1 + second]))
        return concat_ranges(self.pair_start[k], self.pair_start[k + 1])


_INDEX_CACHE: LRU[TokenIndex] = LRU(8)


def clear_shared_masks() -> None:
    """Forget the masks every vocabulary shares between compiled objects (per-length string
    bodies, embedded automata); the vocabularies' token tables and the masks of the library's
    ``format`` automata (:data:`FORMAT_PARTS`) stay."""
    for index in _INDEX_CACHE.values():
        index.shared.clear()
        index.large_safe_parts.clear()
    _WINDOWS.clear()


def token_index(vocabulary: Vocabulary) -> TokenIndex:
    """The shared :class:`TokenIndex` of a vocabulary (kept for the 8 most recent ones)."""
    hit = _INDEX_CACHE.get(vocabulary.fingerprint)
    if hit is not None:
        return hit
    index = TokenIndex(vocabulary)
    # per-vocabulary work, done with the index rather than on a first request
    index.string_body_mask()
    index.bounded_body_mask(0)
    index.safe_words()
    if index.trie is not None:
        index.text_body_mask()
    if ascii_byte_index is not None:  # the per-byte token index; the plain ASCII body's mask
        index.class_body_mask(_SAFE_BYTES & (np.arange(256) < 0x80))
    return _INDEX_CACHE.put(vocabulary.fingerprint, index)


_FEW_IDS = 8
"""Up to this many ids, :func:`pack_ids` sets bits one by one."""


def pack_ids(ids: np.ndarray | Collection[int], words: int) -> np.ndarray:
    """Packed int32 bitmask with the bits of ``ids`` (an int array or a collection of ints) set."""
    if len(ids) <= _FEW_IDS:  # one by one: ~0.6 us compiled, ~1.4 through a memoryview, numpy's calls ~5
        if pack_few_ids is not None:
            return pack_few_ids(ids.tolist() if isinstance(ids, np.ndarray) else ids, words)
        out = np.zeros(words, dtype=np.uint32)
        cells = memoryview(out)
        for i in ids.tolist() if isinstance(ids, np.ndarray) else ids:
            cells[i >> 5] |= 1 << (i & 31)
        return out.view(np.int32)
    ids = ids.astype(np.int64, copy=False) if isinstance(ids, np.ndarray) else np.fromiter(ids, np.int64, len(ids))
    if ids.size > words * 4:  # dense: pack a bool array
        bits = np.zeros(words * 32, dtype=bool)
        bits[ids] = True
        return np.packbits(bits, bitorder="little").view("<i4").astype(np.int32)
    # sparse: per-word sums of distinct bit values (exact in float64 below 2**53)
    values = np.bincount(ids >> 5, weights=np.left_shift(1, ids & 31).astype(np.float64), minlength=words)
    return values.astype(np.uint32).view(np.int32)


def reference_mask(index: TokenIndex, dfa: DFA | LazyDFA, state: int) -> np.ndarray:
    """The mask of ``state`` by the plain walk over every candidate token: what every shortcut
    must reproduce bit for bit (the differential tests' oracle)."""
    return pack_ids(index.ids[walk_positions(index, dfa, state, index.candidates(dfa, state))], index.words)


_RAW_UNITS: LRU[bool] = LRU(64)


def _is_raw_char_unit(unit: DFA) -> bool:
    """Whether ``unit`` reads one character of a raw string body the way a JSON string does
    over safe bytes (the same live bytes and the same ends from every reachable pair). Its
    escapes (which start with a backslash, an unsafe byte) do not matter. The compiled pair
    walk (:func:`enforcer._kernels.embeds_within`, about 10 us), each state's end read as a
    live column 0 (a control byte, which no safe column compares); cached per automaton."""
    key = unit.content_key
    hit = _RAW_UNITS.get(key)
    if hit is None:
        if embeds_within is None:
            same = _is_raw_char_unit_reference(unit)
        else:
            agreed, _ = embeds_within(_with_ends(unit), _RAW_CHAR_ENDS, _RAW_CHAR_BUILT, 0, _SAFE_AND_END,
                                      _MAX_BODY_PAIRS, _MAX_BODY_PAIRS)
            same = agreed == _MAX_BODY_PAIRS  # every pair compared (a level adds one at least)
        hit = _RAW_UNITS.put(key, same)
    return hit


_SAFE_AND_END = _SAFE_FLAGS.copy()
_SAFE_AND_END[0] = 1


def _with_ends(dfa: DFA) -> np.ndarray:
    """``dfa``'s table, one column per byte, with column 0 (byte 0x00) leading its accepting
    states back to the start and dead from the others."""
    table = dfa.transitions.copy()
    table[:, 0] = np.where(dfa.accepting, 0, -1)
    return table


_RAW_CHAR_ENDS = _with_ends(_RAW_CHAR_DFA)
_RAW_CHAR_BUILT = np.ones(len(_RAW_CHAR_ENDS), dtype=np.uint8)


def _is_raw_char_unit_reference(unit: DFA) -> bool:
    """:func:`_is_raw_char_unit` in Python, pair by pair: the fallback without the compiled
    kernels and the oracle of its differential test."""
    raw = _RAW_CHAR_DFA
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        u, r = stack.pop()
        u_row = unit.transitions[u][_SAFE_COLUMNS]
        r_row = raw.transitions[r][_SAFE_COLUMNS]
        if not np.array_equal(u_row < 0, r_row < 0) or bool(unit.accepting[u]) != bool(raw.accepting[r]):
            return False
        live = u_row >= 0
        for pair in set(zip(u_row[live].tolist(), r_row[live].tolist())):
            if pair not in seen:
                seen.add(pair)
                stack.append(pair)
    return True


_WINDOWS: LRU[DFA] = LRU(8)


def counted_window(index: TokenIndex, counted: CountedDFA, state: int) -> tuple[DFA, int]:
    """A table that reads every token from one of its states exactly as ``counted`` does from
    ``state``: a token of ``L`` bytes (``index.max_length`` at most) completes at most
    ``c = 1 + (L - 1) // m`` units of ``m`` bytes or more (the first may be under way), so
    ``c + 1`` units of the repeat (or all of them, when fewer) are enough, entered where as many
    units are left as from ``state`` (or ``c + 1``). One table per unit and vocabulary length
    (``(c + 1) * q`` rows: ~2.6 MB for 128 bytes and a JSON character, ``m = 1``), kept for the
    8 most recent; its masks are shared by every counted repeat of that unit."""
    copies = min(counted.maximum, 2 + (index.max_length - 1) // counted.shortest_unit)
    key = (counted.unit.content_key, copies)
    window = _WINDOWS.get(key)
    if window is None:
        window = _WINDOWS.put(key, counted_repeat(counted.unit, 0, copies))
    q = counted.period
    copy, inner = divmod(state, q)
    return window, max(0, copies - (counted.maximum - copy)) * q + inner


def _shares_safe_part(dfa: DFA | CountedDFA | CountedProduct, state: int, max_length: int) -> bool:
    """Whether :func:`safe_part` covers ``state``: everywhere but where a token of a counted
    product (``max_length`` units at most) may meet the count (near the bounds: the walk of the
    whole automaton decides there)."""
    return not isinstance(dfa, CountedProduct) or dfa.reads_as_loop(state, max_length)


def safe_part(index: TokenIndex, dfa: DFA | CountedDFA | CountedProduct, state: int) -> np.ndarray:
    """Packed mask of the safe tokens (no quote, backslash or control byte) that ``dfa`` reads
    from ``state`` without dying. Between two characters of a counted raw-character repeat
    (``maxLength``), the per-vocabulary mask of its remaining length; otherwise walked once per
    (automaton content, state) and shared by every compiled object of the vocabulary (a
    counted repeat's state through its :func:`counted_window`), or per automaton and state for a
    table past :data:`CONTENT_KEYED_MAX_BYTES` and for a ``format``'s (:data:`FORMAT_PARTS`)."""
    if isinstance(dfa, CountedProduct):  # away from the bounds (:func:`_shares_safe_part`)
        dfa, state = dfa.loop, state % dfa.period
    elif isinstance(dfa, CountedDFA):
        remaining = dfa.remaining(state)
        if remaining >= 0 and _is_raw_char_unit(dfa.unit):
            return index.bounded_body_mask(remaining)
        dfa, state = counted_window(index, dfa, state)
    if is_format_table(dfa):  # a constant of the library (lives as long as the process)
        kept, key = index.format_parts, (id(dfa), state)
    elif dfa.table.nbytes > CONTENT_KEYED_MAX_BYTES:  # the compact table: what the digest reads
        own = index.large_safe_parts.setdefault(dfa, {})
        hit = own.get(state)
        if hit is None:
            hit = own[state] = _safe_walk(index, dfa, state)
        return hit
    else:
        kept, key = index.shared, ("embedded", dfa.content_key, state)
    hit = kept.get(key)
    if hit is None:
        hit = kept.put(key, _safe_walk(index, dfa, state))
    return hit


FORMAT_PARTS = 1024
"""The ``format`` automata's :func:`safe_part` masks each vocabulary keeps (most recent first):
19 MB for 151,899 ids. A state's first mask walks every safe token (0.5 ms for an email's);
the tables are the library's, so every schema of the process shares them, cold or not."""

CONTENT_KEYED_MAX_BYTES = 1 << 20
"""Largest table (compact, :attr:`~enforcer.automaton.DFA.table`) whose :func:`safe_part` masks
are kept by content (a digest of the table, ~1.3 ms per MB, and then shared by every automaton
of that content): a larger one keeps them itself (a table of 18,942 states over 256 columns, as
JSON Schema Store's libman once embedded: 24 ms to digest, against well under 1 ms for the
walk)."""


def _safe_walk(index: TokenIndex, dfa: DFA, state: int) -> np.ndarray:
    """The safe tokens ``dfa`` reads from ``state`` (read-only packed mask): a class body's
    shared part (:func:`class_body_part`), else a walk."""
    body = find_class_body(index, dfa, state)
    if body is not None:
        hit = class_body_part(index, dfa, state, body)
    elif index.trie is not None:  # the trie walk (loops allowed whole), then the safe tokens kept
        hit = trie_mask(index, dfa, state) & index.safe_words()
    else:
        candidates = index.candidates(dfa, state)
        hit = walk_mask(index, dfa, state, candidates[index.safe[candidates]])
    hit.setflags(write=False)
    return hit


def class_loop(inside: np.ndarray) -> np.ndarray:
    """The automaton (a table) that reads one character of a set again and again: ``inside``
    (256 bools) flags its ASCII bytes and, for a set holding every character past ASCII, the
    UTF-8 lead bytes. Without those, one state over the flagged bytes; with them, the raw
    string body's automaton with its ASCII edges (all from its start state) cut to the flagged
    bytes."""
    if not inside[0x80:].any():
        return np.where(inside, 0, -1).astype(np.int32).reshape(1, 256)
    table = _RAW_STRING_DFA.transitions.copy()
    table[0, :0x80][~inside[:0x80]] = -1
    return table


def embedded_depth(dfa: DFA | LazyDFA, state: int, inner: np.ndarray, depth: int,
                   columns: np.ndarray = _SAFE_FLAGS) -> int:
    """For how many bytes the automaton of table ``inner`` embeds in ``dfa`` at ``state`` over
    the bytes ``columns`` flags (the safe bytes unless told): the largest ``n <= depth`` such
    that the pairs (inner state, ``dfa`` state) reached from (0, ``state``) by fewer than ``n``
    bytes agree on which of those bytes are dead (``depth``, a token's length: it embeds for
    every token). The compiled breadth-first pair walk
    (:func:`enforcer._kernels.embeds_within`; needs the kernels), building the lazy rows it
    reaches."""

    def walk(table: np.ndarray, built: np.ndarray, builder: object) -> tuple:
        return embeds_within(inner, table, built, state, columns, depth, _MAX_BODY_PAIRS, builder,
                             table if builder is not None else None, built if builder is not None else None)

    while True:
        agreed, _ = dfa.building_walk(walk)
        if agreed >= 0:
            return agreed
        dfa.row(-agreed - 2)


def find_class_body(index: TokenIndex, dfa: DFA | LazyDFA, state: int) -> ClassBody | None:
    """The string body at ``state`` when it loops over one set of characters (a ``pattern``
    such as ``^[a-z ]*$``, ``^[^/]*$``, or ``^/dev/[^/]+(/[^/]+)*$`` whose ``/`` leaves the
    loop), or None. The gate: at least ``_MIN_CLASS_BYTES`` safe ASCII bytes live there and,
    past ASCII, nothing or every UTF-8 lead byte (:func:`enforcer._kernels.class_body_bytes`).
    The live ASCII bytes whose next state is not the one most of them share (the loop) leave
    the loop, and so do those of the loop's own state (``^(/[^/]+)+$`` right after a ``/``: its
    next character enters the loop, which ``/`` leaves), at most ``_MAX_LEAVING_BYTES``
    (:func:`enforcer._kernels.loop_and_leaving`). The set's loop (:func:`class_loop`) must
    embed at ``state`` over the other safe bytes (:func:`embedded_depth`) for every token of
    ``index`` or, for a set of ASCII bytes alone, for the tokens of at least
    :attr:`TokenIndex.long_bound` bytes (a bounded run such as a hostname label; the longer
    ones are walked). Then a token made only of those bytes, within that length, is allowed
    exactly when the loop reads it whole. Needs the compiled kernels and the token trie (without
    them every such state is walked)."""
    if index.trie is None or not class_body_bytes(dfa.row(state), _MIN_CLASS_BYTES):
        return None
    loop, leaving = loop_and_leaving(dfa.row(state), state)
    if loop != state and len(leaving) <= _MAX_LEAVING_BYTES:  # the loop may start past ``state``: its leaving bytes
        leaving = tuple(sorted(set(leaving) | set(loop_and_leaving(dfa.row(loop), loop)[1])))
    if len(leaving) > _MAX_LEAVING_BYTES:
        return None
    inside, columns = (dfa.array_row(state) >= 0) & _SAFE_BYTES, _SAFE_FLAGS
    if leaving:
        columns = _SAFE_FLAGS.copy()
        inside[list(leaving)] = False
        columns[list(leaving)] = 0
    depth = embedded_depth(dfa, state, class_loop(inside), index.max_length, columns)
    if depth < index.max_length and (depth < index.long_bound or inside[0x80:].any()):
        return None
    return ClassBody(inside, leaving, columns, depth)


def class_body_part(index: TokenIndex, dfa: DFA | LazyDFA, state: int, body: ClassBody) -> np.ndarray:
    """The safe tokens ``dfa`` reads from ``state`` inside a class body: those its loop reads
    whole (shared per vocabulary, :meth:`TokenIndex.class_body_mask`; in a bounded run, those
    of up to ``body.depth`` bytes) and, walked here, those longer than a bounded run's depth
    and those holding a byte that leaves the loop: below each such live byte's node of the
    token trie, from the state it leads to (where a subtree the loop reads is allowed whole),
    and the few others one by one (:meth:`TokenIndex.positions_leaving`)."""
    mask = index.class_body_mask(body.inside)
    if body.depth < index.max_length:  # ASCII tokens: as many characters as bytes
        mask = mask & index.bounded_body_mask(body.depth)
        mask |= walk_mask(index, dfa, state, index.safe_positions_longer(body.depth))
    if body.leaving:
        mask = mask | walk_mask(index, dfa, state, index.positions_leaving(body.inside, body.leaving))
        row = dfa.row(state)
        live = [b for b in body.leaving if row[b] >= 0 and index.root_nodes[b] >= 0]
        if live:
            words = np.zeros(index.words, dtype=np.uint32)
            starts = index.root_nodes[live], np.array([row[b] for b in live], dtype=np.int32)
            dfa.walk_trie(index.trie.kernel, state, words, starts)
            mask |= words.view(np.int32) & index.safe_words()
    return mask


class MaskTable:
    """Lazily computed token masks for every state of one DFA over one vocabulary.

    Thread-safe in the sense that matters: two threads computing the same state produce the
    same array and either may be kept. Bounded: once the masks kept take ``max_bytes``, new
    masks are still computed and returned but not kept (decoding stays exact, each new state
    then costs its walk every time it is reached). Once a lazy automaton is exhausted
    (:attr:`LazyDFA.exhausted`), the mask of every state not computed yet is empty and the state
    is recorded in :attr:`cut` (matchers refuse every token from it, so masks and
    ``accept_token`` agree; an accepting state may still end the value).
    """

    def __init__(self, dfa: DFA | LazyDFA, index: TokenIndex, max_bytes: int = DEFAULT_MAX_MASK_BYTES) -> None:
        self.dfa = dfa
        self.index = index
        self.max_bytes = max_bytes
        self._masks: dict[int, np.ndarray] = {}
        self._few: dict[int, tuple[int, ...] | None] = {}
        self._allowed: dict[int, np.ndarray] = {}
        self._bytes = 0
        self.cut: set[int] = set()
        """States whose mask the automaton's budget emptied."""

    def memory_size_bytes(self) -> int:
        """Bytes of the masks computed so far (packed words and id lists)."""
        return self._bytes

    def allowed(self, state: int) -> np.ndarray:
        """Sorted token ids allowed from ``state`` (int64)."""
        hit = self._allowed.get(state)
        if hit is None:
            bits = np.unpackbits(self.mask(state).view(np.uint8), bitorder="little")
            hit = np.flatnonzero(bits).astype(np.int64)
            if self._bytes + hit.nbytes <= self.max_bytes:
                self._allowed[state] = hit
                self._bytes += hit.nbytes
        return hit

    def mask(self, state: int) -> np.ndarray:
        """Packed int32 bitmask of the tokens allowed from ``state`` (packed from its ids when
        :meth:`few_ids` found them)."""
        hit = self._masks.get(state)
        if hit is None:
            ids = self._few.get(state)
            hit = pack_ids(ids, self.index.words) if ids is not None else self._compute(state)
            self._keep(state, hit)
        return hit

    def few_ids(self, state: int, compute: bool = True) -> tuple[int, ...] | None:
        """The ids allowed from ``state``, ascending, when a walk of the token trie finds at
        most ``MAX_FEW_IDS`` of them (kept so: about 100 bytes instead of a 20 KB array, and a
        bitmask row written from them, not copied); None when the mask is packed (a string
        body or any shared-work state, more ids, a mask computed packed before). Computed on
        first call (with ``compute``; else None until then), into this thread's scratch mask."""
        hit = self._few.get(state, _UNSEEN)
        if hit is _UNSEEN:
            if not compute:
                return None
            hit = None
            if state not in self._masks and take_few_ids is not None and self.index.trie is not None:
                hit = self._walk_few(state)
                if hit is not None:
                    self._bytes += sys.getsizeof(hit)
            self._few[state] = hit
        return hit

    def _walk_few(self, state: int) -> tuple[int, ...] | None:
        """:meth:`few_ids`' work: a shared-work mask or a walk past ``MAX_FEW_IDS`` ids is kept
        packed (None); a state the automaton's budget cut allows nothing."""
        dfa = self.dfa
        try:
            if dfa.exhausted is not None:
                raise AutomatonBudgetError(dfa.exhausted)
            shared = self._shared_work_mask(state)
            if shared is not None:
                self._keep(state, shared)
                return None
            scratch = self.index.scratch()
            try:
                dfa.walk_trie(self.index.trie.kernel, state, scratch)
                if dfa.exhausted is not None:
                    raise AutomatonBudgetError(dfa.exhausted)
            except BaseException:
                scratch.fill(0)
                raise
            ids = take_few_ids(scratch, MAX_FEW_IDS)
            if ids is None:  # the scratch becomes this state's packed mask; the thread takes a new one
                self.index.release_scratch()
                self._keep(state, scratch.view(np.int32))
            return ids
        except AutomatonBudgetError:
            self.cut.add(state)
            return ()

    def _keep(self, state: int, mask: np.ndarray) -> None:
        """Keep ``mask`` (made read-only) as the packed mask of ``state``, within ``max_bytes``."""
        mask.setflags(write=False)
        if self._bytes + mask.nbytes <= self.max_bytes:
            if state not in self._masks:
                self._bytes += mask.nbytes
            self._masks[state] = mask

    def cached(self, state: int) -> np.ndarray | None:
        """The mask of ``state`` if it was computed already (no work)."""
        return self._masks.get(state)

    def is_empty(self, state: int) -> bool:
        """No token is allowed from ``state``."""
        return not self.mask(state).any()

    def precompute(self, levels: int = PRECOMPUTED_LEVELS) -> None:
        """Compute the mask of every state reachable from the start whose free-form values
        (the levels a lazy automaton adds as texts reach them, see
        :class:`~enforcer.automaton.Deferred`) nest at most ``levels`` deep: that builds a lazy
        DFA fully where it has none; deeper states are built when a text reaches them."""
        nesting = getattr(self.dfa, "nesting", None)
        seen = {0}
        stack = [0]
        while stack:
            s = stack.pop()
            self.mask(s)
            for t in set(self.dfa.row(s)):
                if t >= 0 and t not in seen and (nesting is None or nesting(t) <= levels):
                    seen.add(t)
                    stack.append(t)

    def _compute(self, state: int) -> np.ndarray:
        dfa = self.dfa
        try:
            if dfa.exhausted is not None:
                raise AutomatonBudgetError(dfa.exhausted)
            mask = self._shared_work_mask(state)
            if mask is None:
                if self.index.trie is not None:
                    mask = trie_mask(self.index, dfa, state)
                else:
                    mask = walk_mask(self.index, dfa, state, self.index.candidates(dfa, state))
            if dfa.exhausted is not None:
                raise AutomatonBudgetError(dfa.exhausted)
            return mask
        except AutomatonBudgetError:
            self.cut.add(state)
            return np.zeros(self.index.words, dtype=np.int32)

    def _shared_work_mask(self, state: int) -> np.ndarray | None:
        """The mask of ``state`` from work shared with other states (an embedded automaton that
        only unsafe bytes leave, a free string body, any text, a class body); None when none
        applies."""
        index = self.index
        dfa = self.dfa
        embedding = dfa.embedding(state) if isinstance(dfa, LazyDFA) else None
        if embedding is not None and not (embedding[2] & _SAFE_BYTES).any() \
                and _shares_safe_part(embedding[0].dfa, embedding[1], index.max_length):
            return self._embedded_mask(state, *embedding)
        if self._is_string_body(state):
            # most of the vocabulary stays inside the string: that part is shared by every free
            # string; only tokens that reach a quote or a backslash are walked here
            if index.exit_trie is not None:
                mask = trie_mask(index, dfa, state, index.exit_trie)
            else:
                exits = index.exit_positions
                live_first = dfa.array_row(state)[index.first[exits]] >= 0
                mask = walk_mask(index, dfa, state, exits[live_first])
            mask |= index.string_body_mask()
            return mask
        if self._is_text_body(state):  # every token of well-formed text: no walk
            return index.text_body_mask()
        body = self._class_body(state)
        if body is not None:
            return self._class_body_mask(state, body)
        return None

    def _class_body(self, state: int) -> ClassBody | None:
        """:func:`find_class_body` at ``state``."""
        return find_class_body(self.index, self.dfa, state)

    def _class_body_mask(self, state: int, body: ClassBody) -> np.ndarray:
        """The mask inside a class body: its safe tokens' part (:func:`class_body_part`) and the
        tokens holding an unsafe byte (quote, backslash, control), walked here."""
        mask = self._unsafe_tokens_mask(state, _EVERY_BYTE)
        mask |= class_body_part(self.index, self.dfa, state, body)
        return mask

    def _embedded_mask(self, state: int, block: Block, inner: int, leaving: np.ndarray) -> np.ndarray:
        """``state`` stands at state ``inner`` of an embedded automaton that only unsafe bytes
        (quote, backslash, control) can leave: the safe tokens' part of the mask depends on that
        automaton alone and is shared (:func:`safe_part`); the unsafe tokens whose first unsafe
        byte can be read there are walked here (usually a few hundred; by a trie walk when
        built, where a dead byte prunes its subtree)."""
        mask = self._unsafe_tokens_mask(state, leaving | block.dfa.read_bytes)
        mask |= safe_part(self.index, block.dfa, inner)
        return mask

    def _unsafe_tokens_mask(self, state: int, readable: np.ndarray) -> np.ndarray:
        """The mask of ``state`` over the tokens holding an unsafe byte (quote, backslash,
        control) whose first unsafe byte is ``readable`` (256 bools): a token whose first unsafe
        byte cannot be read dies there, so without a readable control byte only those that first
        reach a quote or a backslash are walked (by a trie walk when built)."""
        index = self.index
        if index.unsafe_trie is not None:
            trie = index.unsafe_trie if readable[:0x20].any() else index.exit_trie
            return trie_mask(index, self.dfa, state, trie)
        unsafe = index.unsafe_positions[readable[index.first_unsafe]]
        unsafe = unsafe[self.dfa.array_row(state)[index.first[unsafe]] >= 0]
        return walk_mask(index, self.dfa, state, unsafe)

    def _is_string_body(self, state: int) -> bool:
        """Whether the raw-character automaton of a free string embeds at ``state`` for every
        token: the pairs (raw-automaton state, DFA state) reachable from (start, ``state``) over
        bytes that cannot leave a string (no quote or backslash), within the longest token's
        length, agree on which bytes are dead, control bytes dead in every one. Then the tokens
        made only of safe bytes are allowed from ``state`` exactly when the shared walk allows
        them, and a token is dead at its first control byte. (Pairs rather than a map: a lazy
        DFA is not minimised, so the string loop may span several equivalent states; bounded by
        depth, a long ``maxLength`` string, one state per position, is a body too. A value read
        raw, as Kimi K3 writes argument values, reads control bytes: no JSON string body, but a
        class body, whose every token holding an unsafe byte is walked.) Checked by
        :meth:`_embedded_depth`."""
        row = self.dfa.row(state)
        if row[0x61] < 0 or row[0x20] < 0 or row[0x7E] < 0 or row[0x30] < 0:  # quick reject: a body takes these
            return False
        return self._embedded_depth(state, _RAW_STRING_DFA.transitions, _STRING_BODY_FLAGS) >= self.index.max_length

    def _is_text_body(self, state: int) -> bool:
        """Whether ``state`` reads any text from here on, as a free raw value does: the pairs
        (text-automaton state, DFA state) reachable from (start, ``state``) over every byte,
        within the longest token's length, agree on which bytes are dead. Then the tokens
        allowed from ``state`` are the shared :meth:`TokenIndex.text_body_mask`. Needs the token
        trie (without it such a state is walked)."""
        row = self.dfa.row(state)
        if self.index.trie is None or row[0x0A] < 0 or row[0x22] < 0 or row[0x5C] < 0 or row[0x61] < 0:
            return False  # quick reject: any text reads these
        return self._embedded_depth(state, _TEXT_DFA.transitions, _EVERY_FLAG) >= self.index.max_length

    def _embedded_depth(self, state: int, inner: np.ndarray, columns: np.ndarray = _SAFE_FLAGS) -> int:
        """:func:`embedded_depth` at ``state`` for this vocabulary's tokens (the Python
        reference without the compiled kernels)."""
        if embeds_within is None:
            return self._embedded_depth_reference(state, inner, columns)
        return embedded_depth(self.dfa, state, inner, self.index.max_length, columns)

    def _embedded_depth_reference(self, state: int, inner: np.ndarray, columns: np.ndarray = _SAFE_FLAGS) -> int:
        """:meth:`_embedded_depth` in Python: the fallback without the compiled kernels and the
        oracle of its differential test (same pairs, level by level)."""
        read = np.flatnonzero(columns)
        seen = {(0, state)}
        level = [(0, state)]
        for depth in range(self.index.max_length):
            following = []
            for u, d in level:
                u_row = inner[u][read]
                d_row = self.dfa.array_row(d)[read]
                if not np.array_equal(u_row < 0, d_row < 0):
                    return depth
                live = u_row >= 0
                for pair in zip(u_row[live].tolist(), d_row[live].tolist()):
                    if pair not in seen:
                        if len(seen) >= _MAX_BODY_PAIRS:
                            return depth
                        seen.add(pair)
                        following.append(pair)
            level = following
        return self.index.max_length

"""The item memory: what a matcher remembers beside its automaton so that ``uniqueItems`` holds.

A :class:`Scan` follows the JSON text the automaton has accepted (the automaton guarantees it is
well formed, so the scan only tracks containers, keys and strings): the instance path of every
open container and, in each array the :class:`~enforcer.unique_items.UniqueItemsPlan` names,
the strings already written. :func:`scan` refuses a token that would complete an item equal to
an earlier one, or leave the item (or the next one) with no string left to write: every such
check is exact, so the automaton's masks minus :func:`forbidden_tokens` are the allowed tokens.

Cost: a few microseconds per accepted token (a scan of its bytes); at a mask inside a unique
array, lookups of the strings written against what a vocabulary's quote tokens complete (read
once per vocabulary, :func:`quote_tokens`), and a scan of the few tokens those lookups cannot
settle. Scans are immutable tuples, one per token; the strings themselves live once per array
in an :class:`ItemSet` each scan sees a prefix of, so rollback is exact and memory linear.
"""

from __future__ import annotations

import bisect
import re
from array import array
from typing import Any, Iterable, Iterator, NamedTuple

import numpy as np

from .lru import LRU
from .unique_items import (CAPACITY_CAP, ITEM, MAX_ENDINGS, StringItems, UniqueItemsPlan, canonical_completions, decode_string,
                           string_bytes)
from .vocabulary import Vocabulary

FRESH_STEPS = 200_000
"""Steps of the search for a string not written yet (:func:`fresh_string_left`); past it the
search answers yes. It ends far sooner unless the items allow few strings, nearly all used."""

_VALUE, _KEY, _COLON, _AFTER, _STRING, _SCALAR = range(6)
"""Scan modes: a value is due (or ``]``), a key is due (or ``}``), ``:`` is due, ``,`` or a
close is due, inside a string, inside a number or literal."""
_SPACE = frozenset(b" \t\r\n")
_SCALAR_END = frozenset(b" \t\r\n,]}")
_STRING_STOP = re.compile(rb'["\\]')
_NEEDS_ESCAPE = re.compile(rb'["\\\x00-\x1f]')


class ItemSet:
    """The strings one unique array of one sequence has held, in order, shared by the scans of
    that sequence: a scan sees the first ``count`` of them (:class:`Seen`), so rollback keeps
    them and the next string committed at a smaller count drops those past it. O(1) per string
    to look up (a snapshot per token would cost the square of the array's length in memory);
    kept sorted by bytes too, for the strings that begin with a given text."""

    __slots__ = ("order", "index", "byte_index", "prefix_min", "by_bytes")

    def __init__(self) -> None:
        self.order: list[str] = []
        self.index: dict[str, int] = {}
        self.byte_index: dict[bytes, int] = {}
        self.prefix_min: dict[bytes, int] = {}
        """Each prefix of a string held (UTF-8) -> the least position of a string it begins
        (entries of dropped strings stay, past every count that can see them)."""
        self.by_bytes: list[tuple[bytes, int]] = []

    def add(self, value: str, count: int) -> None:
        """Hold ``value`` as string ``count`` (forgetting any rolled back past it)."""
        if len(self.order) > count:
            for dropped in self.order[count:]:
                del self.index[dropped]
                del self.byte_index[dropped.encode("utf-8", "surrogatepass")]
            del self.order[count:]
            self.by_bytes = [entry for entry in self.by_bytes if entry[1] < count]
        written = value.encode("utf-8", "surrogatepass")
        self.order.append(value)
        self.index[value] = count
        self.byte_index[written] = count
        for k in range(len(written) + 1):
            if self.prefix_min.get(written[:k], count + 1) > count:
                self.prefix_min[written[:k]] = count
        bisect.insort(self.by_bytes, (written, count))


class Seen:
    """The strings a unique array holds at one scan: the first ``count`` of ``held``, and the
    ``pending`` ones a token being tried completed (not committed). Immutable."""

    __slots__ = ("held", "count", "pending")

    def __init__(self, held: ItemSet, count: int = 0, pending: tuple[str, ...] = ()) -> None:
        self.held = held
        self.count = count
        self.pending = pending

    def __contains__(self, value: str) -> bool:
        return self.held.index.get(value, self.count) < self.count or value in self.pending

    def __len__(self) -> int:
        return self.count + len(self.pending)

    def _pending_bytes(self) -> list[bytes]:
        return [p.encode("utf-8", "surrogatepass") for p in self.pending]

    def holds_bytes(self, value: bytes) -> bool:
        """Whether a string held is written by these UTF-8 bytes."""
        return self.held.byte_index.get(value, self.count) < self.count or value in self._pending_bytes()

    def begins(self, start: bytes) -> bool:
        """Whether a string held begins with these UTF-8 bytes."""
        return self.held.prefix_min.get(start, self.count) < self.count \
            or any(p.startswith(start) for p in self._pending_bytes())

    def beginning_with(self, start: bytes) -> list[bytes]:
        """The strings held (UTF-8) that begin with ``start``."""
        by_bytes = self.held.by_bytes
        found = []
        for k in range(bisect.bisect_left(by_bytes, (start, -1)), len(by_bytes)):
            written, position = by_bytes[k]
            if not written.startswith(start):
                break
            if position < self.count:
                found.append(written)
        return found + [p for p in self._pending_bytes() if p.startswith(start)]

    def with_string(self, value: str, commit: bool) -> "Seen":
        """These strings and ``value``: committed to ``held`` (an accepted token's), or pending."""
        if commit and not self.pending:
            self.held.add(value, self.count)
            return Seen(self.held, self.count + 1)
        return Seen(self.held, self.count, self.pending + (value,))


class Container(NamedTuple):
    """One open object or array: its instance path, an object's current key, and for a unique
    array its items and the strings it holds."""

    is_array: bool
    path: tuple[Any, ...]
    key: str | None = None
    items: StringItems | None = None
    seen: Seen | None = None


class Scan(NamedTuple):
    """Where the text stands: open containers, the mode, and the raw bytes of the string being
    read when it is a key or an item of a unique array (``escaped``: its last byte is an
    unfinished backslash)."""

    containers: tuple[Container, ...] = ()
    mode: int = _VALUE
    raw: bytes = b""
    recording: bool = False
    escaped: bool = False


START = Scan()


def scan(plan: UniqueItemsPlan, state: Scan, data: bytes, commit: bool = False) -> Scan | None:
    """``state`` after the text ``data``; None when ``data`` completes an item of a unique array
    equal to an earlier one, or ends where no new string is left to write. ``commit``: the
    token is accepted, its strings join the arrays' :class:`ItemSet` (else they stay pending
    in the returned scan, and nothing shared changes)."""
    containers = list(state.containers)
    mode, raw, recording, escaped = state.mode, state.raw, state.recording, state.escaped
    i, n = 0, len(data)
    while i < n:
        if mode == _STRING:
            if escaped:
                escaped = False
                if recording:
                    raw += data[i:i + 1]
                i += 1
                continue
            found = _STRING_STOP.search(data, i)
            stop = found.start() if found else n
            if recording:
                raw += data[i:stop]
            i = stop
            if i == n:
                break
            if data[i] == 0x5C:
                escaped = True
                if recording:
                    raw += b"\\"
                i += 1
                continue
            i += 1  # the closing quote
            top = containers[-1] if containers else None
            if top is not None and not top.is_array and mode == _STRING and recording and top.key is None:
                containers[-1] = top._replace(key=decode_string(b'"' + raw + b'"'))
                mode = _COLON
            else:
                if top is not None and top.seen is not None:
                    value = decode_string(b'"' + raw + b'"')
                    if value in top.seen:
                        return None
                    containers[-1] = top._replace(seen=top.seen.with_string(value, commit))
                mode = _AFTER
            raw, recording = b"", False
            continue
        b = data[i]
        if mode == _SCALAR:
            if b not in _SCALAR_END:
                i += 1
                continue
            mode = _AFTER
        if b in _SPACE:
            i += 1
            continue
        i += 1
        if mode == _VALUE:
            top = containers[-1] if containers else None
            if b == 0x5D:  # ] of an empty array
                containers.pop()
                mode = _AFTER
            elif b == 0x22:
                mode, raw, recording = _STRING, b"", top is not None and top.items is not None
            elif b == 0x7B or b == 0x5B:
                path = _child_path(top)
                if b == 0x7B:
                    containers.append(Container(False, path))
                    mode = _KEY
                else:
                    items = plan.array_at(path)
                    containers.append(Container(True, path, items=items, seen=None if items is None else Seen(ItemSet())))
            else:
                mode = _SCALAR
        elif mode == _KEY:
            if b == 0x22:
                containers[-1] = containers[-1]._replace(key=None)
                mode, raw, recording = _STRING, b"", True
            else:  # } of an empty object
                containers.pop()
                mode = _AFTER
        elif mode == _COLON:
            mode = _VALUE
        else:  # _AFTER
            if b == 0x2C:
                mode = _VALUE if containers[-1].is_array else _KEY
            else:
                containers.pop()
    top = containers[-1] if containers else None
    if top is not None and top.items is not None and top.seen:
        if mode == _STRING and not fresh_string_left(top.items, raw, escaped, top.seen):
            return None
        if mode == _VALUE and not fresh_string_left(top.items, None, False, top.seen):
            return None
    return Scan(tuple(containers), mode, raw, recording, escaped)


def _child_path(top: Container | None) -> tuple[Any, ...]:
    if top is None:
        return ()
    return top.path + ((ITEM,) if top.is_array else (top.key,))


def fresh_string_left(items: StringItems, written: bytes | None, escaped: bool, seen: Seen) -> bool:
    """Whether an item that starts with ``written`` (None: not started) can still end as a
    string not in ``seen``: at once when more
    strings are left than ``seen`` holds (:attr:`StringItems.capacity`), else by the item's
    endings from there, or, inside an escape, by a search."""
    written = written or b""
    state = items.state_after(b'"' + written)
    if state < 0:
        return False
    if items.capacity[state] >= CAPACITY_CAP:
        return True  # infinitely many strings, however the text so far is spelt
    prefix = None if escaped else string_bytes(written)
    if prefix is not None:
        if items.capacity[state] > len(seen):
            return True
        endings = items.endings(state)
        if len(endings) <= MAX_ENDINGS:
            return any(not seen.holds_bytes(prefix + ending) for ending in endings)
    for whole in canonical_completions(items, state, written, FRESH_STEPS):
        if whole is None or decode_string(whole) not in seen:
            return True
    return False


class Completions(NamedTuple):
    """How tokens holding a quote complete strings, read from one side of a quote (inside an
    item's string, or between items): ``single`` maps the one string a token completes (its
    UTF-8 bytes; from inside, the part after the item's text so far) to the tokens; ``multiple``
    lists the tokens that complete several, with them; ``unread`` are the tokens not read so
    (an escape cut by the token's end, a quote after a bracket or colon), which are scanned.
    ``trailing`` maps each token that ends inside a new string to what that string holds so
    far, and ``at_start`` lists the tokens that end where an item is due (after a comma): where
    items may run out, those are the tokens that can end with no string left."""

    single: TokenGroups
    multiple: list[tuple[int, tuple[bytes, ...]]]
    unread: np.ndarray
    trailing: TokenGroups
    at_start: np.ndarray
    most: int
    """The most strings one token completes (what a token adds to the strings written)."""


class QuoteTokens(NamedTuple):
    """Per vocabulary: the tokens holding a quote (the only ones that can complete a string);
    the same tokens read from inside an item and from between items (:class:`Completions`); the
    tokens that can open an array and complete an item in it (a ``[`` followed by two quotes);
    and the tokens without a quote that end inside an escape (``cut``)."""

    quote_ids: np.ndarray
    inside: Completions
    between: Completions
    bracket_ids: np.ndarray
    cut_ids: np.ndarray


_QUOTE_TOKENS: LRU[QuoteTokens] = LRU(8)
_STRUCTURE = frozenset(b"[]{}:")


class _Reading(NamedTuple):
    done: tuple[bytes, ...]  # the strings completed
    trailing: bytes | None  # what the string the token leaves open holds (None: it ends outside)
    at_start: bool  # it ends after a comma, where an item is due


def _completed_strings(data: bytes, inside: bool) -> _Reading | None:
    """How a token reads when it starts inside a string (``inside``) or outside one in an
    array of strings; None when it cannot be read so: an escape its end cuts, a quote after
    a bracket or colon."""
    done: list[bytes] = []
    raw = bytearray()
    in_string, left, at_start = inside, False, False
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if in_string:
            if b == 0x5C:
                if i + 1 >= n:
                    return None
                raw += data[i:i + 2]
                i += 2
                continue
            if b == 0x22:
                written = string_bytes(bytes(raw))
                if written is None:
                    return None
                done.append(written)
                raw.clear()
                in_string = False
            else:
                raw.append(b)
        elif b == 0x22:
            if left:
                return None
            in_string, at_start = True, False
        elif b in _STRUCTURE:
            left, at_start = True, False
        elif b == 0x2C:
            at_start = not left
        i += 1
    trailing = string_bytes(bytes(raw)) if in_string else None
    if in_string and trailing is None:
        return None
    return _Reading(tuple(done), trailing, at_start)


class TokenGroups:
    """Token ids grouped by a bytes key (what each token writes into a string): a dict from
    key to group number and one array of ids in group order, so no Python container per
    group (150,000 lists of ids, the form before, made the collector walk 150,000 more objects
    at every full collection and triggered one of ~110 ms while they were built). Immutable;
    :meth:`get` returns a view."""

    __slots__ = ("_group", "_starts", "_ids")

    def __init__(self, pairs: Iterable[tuple[bytes, int]]) -> None:
        """``pairs``: (key, token id), ids kept in their order within a group. Built without a
        list as long as the vocabulary (int arrays, and a dict of bytes and ints, which the
        collector does not track): a young list of 150,000 items cost a 1.2 ms collection."""
        group: dict[bytes, int] = {}
        numbers, ids = array("q"), array("q")
        for key, token_id in pairs:
            numbers.append(group.setdefault(key, len(group)))
            ids.append(token_id)
        by_group = _int64s(numbers)
        order = np.argsort(by_group, kind="stable")
        self._group = group
        self._starts = np.searchsorted(by_group[order], np.arange(len(group) + 1))
        self._ids = _int64s(ids)[order]

    def __len__(self) -> int:
        return len(self._group)

    def get(self, key: bytes) -> np.ndarray:
        """The ids of ``key`` (empty when none)."""
        g = self._group.get(key)
        return self._ids[self._starts[g]:self._starts[g + 1]] if g is not None else self._ids[:0]

    def items(self) -> Iterator[tuple[bytes, np.ndarray]]:
        starts, ids = self._starts, self._ids
        for key, g in self._group.items():
            yield key, ids[starts[g]:starts[g + 1]]


def _int64s(values: array) -> np.ndarray:
    """An ``array("q")`` as int64 (a view; np.frombuffer refuses no bytes in older numpy)."""
    return np.frombuffer(values, dtype=np.int64) if len(values) else np.zeros(0, dtype=np.int64)


def _completions(tokens: list[tuple[int, bytes]], inside: bool) -> Completions:
    single: list[tuple[bytes, int]] = []
    multiple: list[tuple[int, tuple[bytes, ...]]] = []
    unread: list[int] = []
    trailing: list[tuple[bytes, int]] = []
    at_start: list[int] = []
    for token_id, data in tokens:
        found = _completed_strings(data, inside)
        if found is None:
            unread.append(token_id)
            continue
        if len(found.done) == 1:
            single.append((found.done[0], token_id))
        elif found.done:
            multiple.append((token_id, found.done))
        if found.trailing is not None and (found.done or not inside):
            trailing.append((found.trailing, token_id))
        if found.at_start:
            at_start.append(token_id)
    most = max([len(strings) for _, strings in multiple] + [1 if single else 0])
    return Completions(TokenGroups(single), multiple, np.array(unread, dtype=np.int64), TokenGroups(trailing),
                       np.array(at_start, dtype=np.int64), most)


_UNQUOTED: LRU[TokenGroups] = LRU(8)


def unquoted_tokens(vocabulary: Vocabulary) -> TokenGroups:
    """The tokens without a quote, by the bytes they add to a string (escapes decoded; those
    that end inside an escape left out): what items that may run out look up (kept for the 8
    most recent vocabularies; ~0.1 s for 150k ids, once)."""
    hit = _UNQUOTED.get(vocabulary.fingerprint)
    if hit is None:
        def unquoted() -> Iterator[tuple[bytes, int]]:
            for token_id, data in enumerate(vocabulary.byte_tokens):
                if data and 0x22 not in data:
                    written = string_bytes(data)
                    if written is not None:
                        yield written, token_id

        hit = _UNQUOTED.put(vocabulary.fingerprint, TokenGroups(unquoted()))
    return hit


def quote_tokens(vocabulary: Vocabulary) -> QuoteTokens:
    """:class:`QuoteTokens` of ``vocabulary`` (kept for the 8 most recent; ~20 ms for 150k ids)."""
    hit = _QUOTE_TOKENS.get(vocabulary.fingerprint)
    if hit is not None:
        return hit
    bracket, cut = [], []
    quoted: list[tuple[int, bytes]] = []
    for token_id, data in enumerate(vocabulary.byte_tokens):
        if not data or (0x22 not in data and 0x5C not in data):
            continue
        if 0x22 not in data:
            if string_bytes(data) is None:
                cut.append(token_id)
            continue
        quoted.append((token_id, data))
        opened = data.find(b"[")
        if opened >= 0 and data.count(b'"', opened) >= 2:
            bracket.append(token_id)

    def ids(values: list[int]) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    found = QuoteTokens(ids([token_id for token_id, _ in quoted]), _completions(quoted, True),
                        _completions(quoted, False), ids(bracket), ids(cut))
    return _QUOTE_TOKENS.put(vocabulary.fingerprint, found)


def forbidden_tokens(plan: UniqueItemsPlan, state: Scan, words: np.ndarray, vocabulary: Vocabulary) -> list[int]:
    """The tokens allowed by the automaton (``words``) that :func:`scan` refuses from ``state``.
    Only tokens that can complete an item, or end where few strings are left, are scanned:
    inside an item, a token without a quote or backslash can end where no new string is left
    only if the item then spells the start of an earlier one, so only those are looked up."""
    quotes = quote_tokens(vocabulary)
    top = state.containers[-1] if state.containers else None

    def refused(ids: np.ndarray) -> list[int]:
        return _refused(plan, state, ids, vocabulary)

    if top is None or top.items is None or top.seen is None:
        return refused(_allowed(words, quotes.bracket_ids))
    items, seen = top.items, top.seen
    # inside an item whose text so far writes a known string (no escape left open)
    prefix = string_bytes(state.raw) if state.mode == _STRING and not state.escaped else None
    if prefix is None and state.mode == _STRING:  # an escape is open
        if items.safe:  # only a completion can be refused
            return refused(_allowed(words, quotes.quote_ids))
        return refused(np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")))
    out = _completing_a_seen_string(plan, state, words, vocabulary, quotes, prefix or b"", seen)
    if items.safe or not seen:
        return out
    # items whose strings may run out: a token must not end where no string is left. It can
    # only if the string it ends in begins one written already, or it ends where an item is
    # due once few strings are left, so only those are scanned.
    prefix = prefix or b""
    inside = state.mode == _STRING
    reading = quotes.inside if inside else quotes.between

    def few_left(text: bytes, added: int = 0) -> bool:
        """Whether an item written ``text`` so far (plain bytes: no escape needed) may have
        no more strings left than were written, with ``added`` more (or ``text`` needs
        escapes: not looked at)."""
        if _NEEDS_ESCAPE.search(text):
            return True
        return items.capacity_after(text) <= len(seen) + added

    # a token that opens a new item has completed the current one (or more) first
    risky = [t for start, ids in reading.trailing.items() if few_left(start, reading.most) for t in ids.tolist()]
    if inside:
        ahead = {v[len(prefix):len(prefix) + k] for v in seen.beginning_with(prefix)
                 for k in range(1, len(v) - len(prefix) + 1)}
        unquoted = unquoted_tokens(vocabulary)
        risky += [t for start in ahead if 0x5C in state.raw or few_left(state.raw + start)
                  for t in unquoted.get(start).tolist()]
        # a token that ends inside an escape: each string has at most 16 spellings there (the
        # case of four hex digits), so more than 16 texts per string written leave one
        tokens_text = vocabulary.byte_tokens
        for t in _allowed(words, quotes.cut_ids).tolist():
            state_at = items.state_after(b'"' + state.raw + tokens_text[t])
            if state_at >= 0 and items.capacity[state_at] <= 16 * len(seen):
                risky.append(t)
    if items.capacity[items.rows[0][0x22]] <= len(seen) + reading.most:  # an item may be due with none left
        risky += reading.at_start.tolist()
        if not inside:  # a comma (without quotes) where the next item is due
            every = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
            risky += [t for t in every.tolist() if 0x22 not in vocabulary.byte_tokens[t]]
    return out + refused(_allowed(words, np.array(sorted(set(risky)), dtype=np.int64)))


def _completing_a_seen_string(plan: UniqueItemsPlan, state: Scan, words: np.ndarray, vocabulary: Vocabulary,
                              quotes: QuoteTokens, prefix: bytes, seen: Seen) -> list[int]:
    """The allowed tokens that complete a string already written (or two equal ones), found by
    lookups of the strings written (from inside an item, those that begin with its text so far):
    all :func:`forbidden_tokens` refuses where items never run out of strings."""
    reading = quotes.inside if state.mode == _STRING else quotes.between
    inside = state.mode == _STRING
    out: list[int] = []
    if len(seen) < len(reading.single):
        for value in seen.beginning_with(prefix if inside else b""):
            out += reading.single.get(value[len(prefix):] if inside else value).tolist()
    else:
        for completed, ids in reading.single.items():
            if seen.holds_bytes(prefix + completed if inside else completed):
                out += ids.tolist()
    for token, strings in reading.multiple:
        whole = (prefix + strings[0],) + strings[1:] if inside else strings
        if len(set(whole)) < len(whole) or any(map(seen.holds_bytes, whole)):
            out.append(token)
    out += _refused(plan, state, _allowed(words, reading.unread), vocabulary)
    return _allowed(words, np.array(out, dtype=np.int64)).tolist() if out else out


def _refused(plan: UniqueItemsPlan, state: Scan, ids: np.ndarray, vocabulary: Vocabulary) -> list[int]:
    """Those of ``ids`` that :func:`scan` refuses from ``state`` (a token tried: nothing shared
    changes)."""
    tokens = vocabulary.byte_tokens
    return [t for t in ids.tolist() if scan(plan, state, tokens[t]) is None]


def remembered_words(plan: UniqueItemsPlan, state: Scan, words: np.ndarray, vocabulary: Vocabulary) -> np.ndarray:
    """``words`` (packed, not modified) without the tokens :func:`forbidden_tokens` names: a
    copy when there are any."""
    refused = forbidden_tokens(plan, state, words, vocabulary)
    if not refused:
        return words
    out = words.copy()
    view = out.view(np.uint32)
    for t in refused:
        view[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)
    return out


def _bits(words: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Whether each of ``ids`` has its bit set in the packed ``words``."""
    return ((words.view(np.uint32)[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)


def _allowed(words: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The ids among ``ids`` whose bit is set in the packed ``words``."""
    return ids[_bits(words, ids)] if ids.size else ids

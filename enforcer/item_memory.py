"""The item memory: what a matcher remembers beside its automaton so that ``uniqueItems`` holds.

A :class:`Scan` follows the JSON text the automaton has accepted (the automaton guarantees it is
well formed, so the scan only tracks containers, keys and strings): the instance path of every
open container and, in each array the :class:`~enforcer.unique_items.UniqueItemsPlan` names,
the strings already written. :func:`scan` refuses a token that would complete an item equal to
an earlier one, or leave the item (or the next one) with no string left to write: every such
check is exact, so the automaton's masks minus :func:`forbidden_tokens` are the allowed tokens.

Cost: a few microseconds per accepted token (a scan of its bytes); at a mask inside a unique
array, one check per allowed token that holds a quote (about 1,300 of Kimi's 151,899 ids, most
answered by one set lookup), or per allowed token when the items may run out of strings (an
``enum``, a bounded pattern). Scans are immutable tuples: rollback keeps one per token.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import numpy as np

from .lru import LRU
from .unique_items import (ITEM, MAX_ENDINGS, StringItems, UniqueItemsPlan, canonical_completions, decode_string,
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


class Container(NamedTuple):
    """One open object or array: its instance path, an object's current key, and for a unique
    array its items and the strings written so far."""

    is_array: bool
    path: tuple[Any, ...]
    key: str | None = None
    items: StringItems | None = None
    seen: frozenset[str] = frozenset()
    seen_bytes: frozenset[bytes] = frozenset()


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


def scan(plan: UniqueItemsPlan, state: Scan, data: bytes) -> Scan | None:
    """``state`` after the text ``data``; None when ``data`` completes an item of a unique array
    equal to an earlier one, or ends where no new string is left to write."""
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
                if top is not None and top.items is not None:
                    value = decode_string(b'"' + raw + b'"')
                    if value in top.seen:
                        return None
                    containers[-1] = top._replace(seen=top.seen | {value},
                                                  seen_bytes=top.seen_bytes | {value.encode("utf-8", "surrogatepass")})
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
                    containers.append(Container(True, path, items=plan.array_at(path)))
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
        if mode == _STRING and not fresh_string_left(top.items, raw, escaped, top.seen, top.seen_bytes):
            return None
        if mode == _VALUE and not fresh_string_left(top.items, None, False, top.seen, top.seen_bytes):
            return None
    return Scan(tuple(containers), mode, raw, recording, escaped)


def _child_path(top: Container | None) -> tuple[Any, ...]:
    if top is None:
        return ()
    return top.path + ((ITEM,) if top.is_array else (top.key,))


def fresh_string_left(items: StringItems, written: bytes | None, escaped: bool, seen: frozenset[str],
                      seen_bytes: frozenset[bytes]) -> bool:
    """Whether an item that starts with ``written`` (None: not started) can still end as a
    string not in ``seen`` (``seen_bytes``: the same strings in UTF-8): at once when more
    strings are left than ``seen`` holds (:attr:`StringItems.capacity`), else by the item's
    endings from there, or, inside an escape, by a search."""
    written = written or b""
    state = items.state_after(b'"' + written)
    if state < 0:
        return False
    prefix = None if escaped else string_bytes(written)
    if prefix is not None:
        if items.capacity[state] > len(seen):
            return True
        endings = items.endings(state)
        if len(endings) <= MAX_ENDINGS:
            return any(prefix + ending not in seen_bytes for ending in endings)
    for whole in canonical_completions(items, state, written, FRESH_STEPS):
        if whole is None or decode_string(whole) not in seen:
            return True
    return False


class QuoteTokens(NamedTuple):
    """Per vocabulary: the tokens holding a quote (the only ones that can complete a string),
    split into ``simple`` ones (one quote, no backslash; ``before``: their bytes before it) and
    the ``other`` ones; the tokens that can open an array and complete an item in it (a ``[``
    followed by two quotes); the tokens with a backslash but no quote; and the ids of the tokens
    with neither, by their bytes."""

    simple_ids: np.ndarray
    before: list[bytes]
    other_ids: np.ndarray
    bracket_ids: np.ndarray
    backslash_ids: np.ndarray
    plain: dict[bytes, list[int]]


_QUOTE_TOKENS: LRU[QuoteTokens] = LRU(8)


def quote_tokens(vocabulary: Vocabulary) -> QuoteTokens:
    """:class:`QuoteTokens` of ``vocabulary`` (kept for the 8 most recent; ~50 ms for 150k ids)."""
    hit = _QUOTE_TOKENS.get(vocabulary.fingerprint)
    if hit is not None:
        return hit
    simple, before, other, bracket, backslash = [], [], [], [], []
    plain: dict[bytes, list[int]] = {}
    for token_id, data in enumerate(vocabulary.byte_tokens):
        if not data:
            continue
        if 0x22 not in data:
            if 0x5C in data:
                backslash.append(token_id)
            else:
                plain.setdefault(data, []).append(token_id)
            continue
        if data.count(b'"') == 1 and 0x5C not in data:
            simple.append(token_id)
            before.append(data[:data.index(b'"')])
        else:
            other.append(token_id)
        opened = data.find(b"[")
        if opened >= 0 and data.count(b'"', opened) >= 2:
            bracket.append(token_id)
    def ids(values: list[int]) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    found = QuoteTokens(ids(simple), before, ids(other), ids(bracket), ids(backslash), plain)
    return _QUOTE_TOKENS.put(vocabulary.fingerprint, found)


def forbidden_tokens(plan: UniqueItemsPlan, state: Scan, words: np.ndarray, vocabulary: Vocabulary) -> list[int]:
    """The tokens allowed by the automaton (``words``) that :func:`scan` refuses from ``state``.
    Only tokens that can complete an item, or end where few strings are left, are scanned:
    inside an item, a token without a quote or backslash can end where no new string is left
    only if the item then spells the start of an earlier one, so only those are looked up."""
    tokens = vocabulary.byte_tokens
    quotes = quote_tokens(vocabulary)
    top = state.containers[-1] if state.containers else None

    def refused(ids: np.ndarray | list[int]) -> list[int]:
        return [t for t in (ids.tolist() if isinstance(ids, np.ndarray) else ids) if scan(plan, state, tokens[t]) is None]

    if top is None or top.items is None:
        return refused(_allowed(words, quotes.bracket_ids))
    items, seen = top.items, top.seen
    # inside an item whose text so far writes a known string (no escape left open)
    prefix = string_bytes(state.raw) if state.mode == _STRING and not state.escaped else None
    if not items.safe and prefix is None:
        every = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
        return refused(every)
    out = refused(_allowed(words, quotes.other_ids))
    if state.mode != _STRING or not seen:
        return out  # a simple token opens an item at most, with infinitely many strings left
    simple = _allowed(words, quotes.simple_ids)
    if prefix is None:
        return out + refused(simple)
    seen_bytes = top.seen_bytes
    before = dict(zip(quotes.simple_ids.tolist(), quotes.before))
    if items.safe:
        return out + [t for t in simple.tolist() if prefix + before[t] in seen_bytes]
    # items that may run out: the next item must still have a string left, and a plain token
    # must not end where every ending spells an earlier item
    opened = items.rows[0][0x22]
    crowded = items.capacity[opened] <= len(seen) + 1
    out += [t for t in simple.tolist()
            if prefix + before[t] in seen_bytes or (crowded and scan(plan, state, tokens[t]) is None)]
    out += refused(_allowed(words, quotes.backslash_ids))
    starts = {v[len(prefix):len(prefix) + k] for v in seen_bytes if v.startswith(prefix)
              for k in range(1, len(v) - len(prefix) + 1)}
    plain = [t for start in starts for t in quotes.plain.get(start, ())]
    return out + refused(_allowed(words, np.array(plain, dtype=np.int64)))


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

"""Where ``uniqueItems`` applies in a schema, and what its items may be: the compile-time half of
the item memory (:mod:`enforcer.item_memory` is the per-sequence half).

A regular automaton cannot remember which strings an array already holds, so the value automaton
is built without ``uniqueItems`` and a matcher beside it remembers the items. That is exact only
when the place of an array in the instance says, by itself, whether its items must differ and
what they are. :func:`plan_unique_items` proves it or refuses, naming the pointer:

- every schema that may describe an array at that instance path is the one holding
  ``uniqueItems`` (no other ``anyOf`` branch, free-form value or recursive ``$ref`` may hold an
  array there, where uniqueness would not be required);
- its items are strings (``type: string`` with any keywords, or an ``enum``/``const`` of strings),
  each compiled to a small automaton of their own;
- no ``prefixItems``, ``contains`` or ``unevaluatedItems`` beside it, and ``minItems`` within
  the number of distinct strings the items allow.

Cost: one visit per (sub-schema, instance path), at most :data:`MAX_VISITS`; one small
automaton per distinct item schema (shared across compiles when it holds no reference).
Lifetime: one compile; the plan is immutable and shared by every matcher of the compiled
schema.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, NamedTuple, Union

import numpy as np

from .automaton import DEAD, DFA, compile_node
from .errors import EnforcerError, InvalidSchemaError, SchemaTooComplexError, UnsupportedSchemaError
from .json_schema import ANNOTATIONS, DRAFTS_IGNORING_REF_SIBLINGS, KEYWORDS, SchemaCompiler, declared_types
from .lru import LRU
from .schema_resources import escape as _escape
from .schema_resources import holds_reference

MAX_VISITS = 50_000
"""Sub-schema visits while locating arrays; a schema that needs more is refused (its
``uniqueItems`` named)."""
MAX_FINITE_VALUES = 4096
"""Distinct strings counted, at most, when the items allow finitely many (to check
``minItems``); more count as enough."""
FINITE_STEPS = 1_000_000
"""Steps of one enumeration of an item's strings (:func:`canonical_completions`)."""
MAX_ENDINGS = 4096
"""Endings of an item kept per state (:meth:`StringItems.endings`)."""
MAX_ITEM_STATES = 20_000
"""States of one item automaton."""


class OtherKey(NamedTuple):
    """A path step through ``additionalProperties``: any key but the ``excluded`` names and
    those the ``patterns`` match (``PatternKey`` steps)."""

    excluded: frozenset[str]
    patterns: tuple = ()

    def admits(self, key: str) -> bool:
        return key not in self.excluded and not any(p.admits(key) for p in self.patterns)


class PatternKey(NamedTuple):
    """A path step through ``patternProperties``: the keys ``pattern`` matches (``dfa``: over
    their raw UTF-8, as the compile builds it)."""

    pattern: str
    dfa: DFA

    def admits(self, key: str) -> bool:
        return self.dfa.matches(key.encode("utf-8", "surrogatepass"))


class _Item:
    """The path step into an array's items (every index alike)."""

    def __repr__(self) -> str:
        return "ITEM"


ITEM = _Item()
Step = Union[str, OtherKey, PatternKey, _Item]
Path = tuple[Step, ...]


def _step_matches(a: Step, b: Step) -> bool:
    """Whether some concrete step may be matched by both ``a`` and ``b`` (two key sets other
    than names are taken to meet)."""
    if a is ITEM or b is ITEM:
        return a is b
    if isinstance(b, str):
        a, b = b, a
    if isinstance(a, str):
        return a == b if isinstance(b, str) else b.admits(a)
    if isinstance(b, OtherKey):
        a, b = b, a
    if isinstance(a, OtherKey) and isinstance(b, PatternKey):
        return not any(p.pattern == b.pattern for p in a.patterns)
    return True


def _paths_meet(a: Path, b: Path) -> bool:
    return len(a) == len(b) and all(_step_matches(x, y) for x, y in zip(a, b))


def _prefix_meets(prefix: Path, path: Path) -> bool:
    return len(prefix) <= len(path) and all(_step_matches(x, y) for x, y in zip(prefix, path))


def concrete_match(pattern: Path, path: tuple[Any, ...]) -> bool:
    """Whether the instance path ``path`` (keys as ``str``, array items as :data:`ITEM`) is one
    of ``pattern``'s."""
    if len(pattern) != len(path):
        return False
    for step, actual in zip(pattern, path):
        if step is ITEM:
            if actual is not ITEM:
                return False
        elif isinstance(step, str):
            if step != actual:
                return False
        elif actual is ITEM or not step.admits(actual):
            return False
    return True


def _exact(step: Any) -> bool:
    """Whether a path step is one key name or the array's items (not a set of keys)."""
    return isinstance(step, str) or step is ITEM


class PathIndex:
    """Instance-path patterns, each with a payload, found by the path they meet: indexed by
    their steps before the first that is a set of keys, so a query looks up each head of its
    own path (a query holding a set of keys reads them all). Built once per plan."""

    __slots__ = ("_by_head", "_entries")

    def __init__(self) -> None:
        self._by_head: dict[tuple, list[tuple[Path, Any]]] = {}
        self._entries: list[tuple[Path, Any]] = []

    def add(self, path: Path, payload: Any) -> None:
        cut = next((k for k, step in enumerate(path) if not _exact(step)), len(path))
        self._by_head.setdefault(path[:cut], []).append((path, payload))
        self._entries.append((path, payload))

    def _candidates(self, path: tuple) -> Iterator[tuple[Path, Any]]:
        if all(map(_exact, path)):
            for k in range(len(path) + 1):
                yield from self._by_head.get(path[:k], ())
        else:
            yield from self._entries

    def meeting(self, path: Path) -> Iterator[Any]:
        """Payloads of the patterns some concrete path matches along with ``path``."""
        return (payload for other, payload in self._candidates(path) if _paths_meet(other, path))

    def prefixes_meeting(self, path: Path) -> Iterator[Any]:
        """Payloads of the patterns that may match a prefix of a path ``path`` matches."""
        return (payload for other, payload in self._candidates(path) if _prefix_meets(other, path))

    def matching(self, path: tuple[Any, ...]) -> Iterator[Any]:
        """Payloads of the patterns the concrete instance path ``path`` (array items as
        :data:`ITEM`) matches: a pattern's head (its names and items before any other step) is
        then a head of ``path``."""
        for k in range(len(path) + 1):
            for other, payload in self._by_head.get(path[:k], ()):
                if concrete_match(other, path):
                    yield payload


CAPACITY_CAP = 1 << 40
"""Capacities at or above this count as infinitely many strings."""


class StringItems:
    """The items of a unique array: strings, as their own automaton (``dfa``: the item's JSON
    text, quotes included). ``capacity[s]``: a lower bound on the distinct strings that complete
    the item from state ``s`` (those written without a backslash, each a different string;
    :data:`CAPACITY_CAP` when a cycle makes them infinitely many), so that excluding fewer
    strings than that never leaves the item without a way to finish. ``safe``: every state but
    the final ones has infinitely many (free strings, ``minLength``, open patterns): then only a
    token holding a quote can complete an item or end in trouble, and only those need a check.
    Immutable but for memos (:meth:`endings`, :meth:`capacity_after`); shared by every compile
    whose items are the same schema without references."""

    __slots__ = ("dfa", "capacity", "safe", "rows", "_endings", "_after")

    def __init__(self, dfa: DFA) -> None:
        self.dfa = dfa
        self.capacity = _capacity(dfa)
        final = dfa.accepting & (dfa.table == DEAD).all(axis=1)
        self.safe = bool(((self.capacity >= CAPACITY_CAP) | final).all())
        self.rows = dfa.all_rows()  # int arrays, which refer to nothing: cheap for the collector, unlike lists of ints
        self._endings: dict[int, list[bytes]] = {}
        self._after: dict[bytes, int] = {}

    def state_after(self, text: bytes) -> int:
        """The item automaton's state after ``text`` (from the opening quote on)."""
        state = 0
        rows = self.rows
        for b in text:
            state = rows[state][b]
            if state == DEAD:
                return DEAD
        return state

    def capacity_after(self, text: bytes) -> int:
        """:attr:`capacity` at the state after ``'"' + text`` (-1 when the items cannot begin
        so); memoised, for the few texts a vocabulary's tokens open items with."""
        hit = self._after.get(text)
        if hit is None:
            state = self.state_after(b'"' + text)
            hit = self._after[text] = -1 if state == DEAD else int(self.capacity[state])
        return hit

    def endings(self, state: int) -> list[bytes]:
        """What the rest of an item adds from ``state`` (outside any escape), as the bytes of
        the string it writes (UTF-8; a character the item's text so far began is finished by
        the first bytes), when there are at most :data:`MAX_ENDINGS` (else one more than that
        many: a sign to search instead); memoised."""
        hit = self._endings.get(state)
        if hit is None:
            hit = []
            for whole in canonical_completions(self, state, b"", FINITE_STEPS):
                if whole is None or len(hit) > MAX_ENDINGS:
                    break
                hit.append(string_bytes(whole[1:-1]) or b"")
            self._endings[state] = hit
        return hit

    def distinct_strings(self, limit: int) -> int:
        """How many distinct strings the items allow, counting up to ``limit``."""
        opened = self.rows[0][0x22] if self.dfa.num_states else DEAD
        if opened == DEAD:
            return 0
        if self.capacity[opened] >= limit:
            return limit
        found: set[str] = set()
        for text in canonical_completions(self, opened, b"", FINITE_STEPS):
            if text is None:
                return limit  # too many to count: enough
            found.add(decode_string(text))
            if len(found) >= limit:
                break
        return len(found)


def _capacity(dfa: DFA) -> np.ndarray:
    """Per state: :data:`CAPACITY_CAP` where a cycle is reachable (each turn of a cycle writes a
    character more, so infinitely many strings complete the item), else the texts without a
    backslash accepted from it (each a distinct string: a lower bound). Peels states whose
    successors are all finite, in an order that counts successors first; O(states x 256)."""
    n = dfa.num_states
    successors: list[dict[int, int]] = []
    for row in dfa.transitions:
        plain = np.delete(row, 0x5C)
        targets, counts = np.unique(plain[plain != DEAD], return_counts=True)
        counted = dict(zip(targets.tolist(), counts.tolist()))
        if row[0x5C] != DEAD:
            counted.setdefault(int(row[0x5C]), 0)  # a successor all the same, not counted
        successors.append(counted)
    predecessors: list[list[int]] = [[] for _ in range(n)]
    pending = [len(s) for s in successors]
    for s, targets in enumerate(successors):
        for t in targets:
            predecessors[t].append(s)
    capacity = np.full(n, CAPACITY_CAP, dtype=np.int64)
    accepting = dfa.accepting.tolist()
    ready = [s for s in range(n) if pending[s] == 0]
    while ready:
        s = ready.pop()
        total = int(accepting[s]) + sum(int(capacity[t]) * k for t, k in successors[s].items())
        capacity[s] = min(total, CAPACITY_CAP)
        for p in predecessors[s]:
            pending[p] -= 1
            if pending[p] == 0:
                ready.append(p)
    return capacity


class UniqueArray(NamedTuple):
    """One array location whose items must differ: its instance path, the pointer of the schema
    holding ``uniqueItems``, and its items."""

    path: Path
    pointer: str
    items: StringItems


class UniqueItemsPlan(NamedTuple):
    """Every instance path with a unique array (indexed by path), and the schema objects whose
    ``uniqueItems`` the compiler then leaves to the item memory."""

    arrays: tuple[UniqueArray, ...]
    holders: tuple[dict, ...]
    index: PathIndex

    def array_at(self, path: tuple[Any, ...]) -> StringItems | None:
        """The items of the unique array at the concrete instance path ``path``, if any."""
        return next((array.items for array in self.index.matching(path)), None)


_CANONICAL_AFTER_BACKSLASH = frozenset(b'"\\bfnrtu')
_LOWER_HEX = frozenset(b"0123456789abcdef")
_SHORT_ESCAPED = frozenset(b"89acd")
"""Last hex digits of ``\\u000X`` controls that have a short escape (``\\b \\t \\n \\f \\r``)."""
_BODY, _ESCAPE, _CONTROL, _OPEN_HEX, _OPEN_ESCAPE = range(5)
"""Modes of :func:`canonical_completions`: in the body; after a backslash written here; inside a
``\\u00XX`` written here; inside hex digits ``written`` left open; after a backslash it left open."""


def _open_escape(written: bytes) -> tuple[int, int]:
    """The escape ``written`` leaves open, as a mode of :func:`canonical_completions` and the
    hex digits still due."""
    i, n = 0, len(written)
    while i < n:
        if written[i] == 0x5C:
            if i + 1 == n:
                return _OPEN_ESCAPE, 0
            if written[i + 1] == 0x75:
                digits = min(4, n - i - 2)
                if digits < 4:
                    return _OPEN_HEX, 4 - digits
                i += 6
                continue
            i += 2
            continue
        i += 1
    return _BODY, 0


def _high_surrogate_last(body: bytes) -> bool:
    """Whether the string body ``body`` ends with a whole ``\\u`` escape of a high surrogate
    (whose low half must follow as an escape too)."""
    i, n, last = 0, len(body), False
    while i < n:
        if body[i] == 0x5C and i + 1 < n:
            if body[i + 1] == 0x75 and i + 6 <= n:
                last = 0xD800 <= int(body[i + 2:i + 6], 16) < 0xDC00
                i += 6
                continue
            last = False
            i += 2
            continue
        last = False
        i += 1
    return last


def canonical_completions(items: StringItems, state: int, written: bytes, budget: int) -> Iterator[bytes | None]:
    """Whole item texts ``'"' + written + rest`` the items accept from ``state`` (reached by
    ``'"' + written``), depth first, each string once in the spelling JSON serialisers write:
    a backslash only before ``"``, ``\\``, a control character's short escape or its ``\\u00XX``,
    or the low half of a surrogate pair a ``\\u`` escape began (an escape ``written`` left open
    is finished in every way). Every spelling of a string the
    item automata accept is accepted in this one too (string escapes are compiled for every
    character alike), so the strings met are exactly the strings that can complete the item.
    Yields None and stops after ``budget`` steps."""
    rows = items.rows
    accepting = items.dfa.accepting
    mode, due = _open_escape(written)
    stack: list[tuple[int, bytes, int, int]] = [(state, b"", mode, due)]
    steps = 0
    while stack:
        state, text, mode, due = stack.pop()
        steps += 1
        if steps > budget:
            yield None
            return
        if accepting[state]:
            yield b'"' + written + text
            continue
        row = rows[state]
        children: list[tuple[int, bytes, int, int]] = []
        for b in range(256):
            target = row[b]
            if target == DEAD:
                continue
            more = text + bytes((b,))
            if mode == _BODY:
                children.append((target, more, _ESCAPE if b == 0x5C else _BODY, 0))
            elif mode == _ESCAPE:
                if b == 0x75 and _high_surrogate_last(written + text[:-1]):  # the low half: any
                    children.append((target, more, _OPEN_HEX, 4))
                elif b in _CANONICAL_AFTER_BACKSLASH:
                    children.append((target, more, _CONTROL if b == 0x75 else _BODY, 0))
            elif mode == _CONTROL:  # \\u00XX, lowercase, for controls without a short escape
                if (due < 2 and b == 0x30) or (due == 2 and b in b"01") \
                        or (due == 3 and b in _LOWER_HEX and not (text[-1] == 0x30 and b in _SHORT_ESCAPED)):
                    children.append((target, more, _CONTROL if due < 3 else _BODY, due + 1))
            elif mode == _OPEN_ESCAPE:
                children.append((target, more, _OPEN_HEX if b == 0x75 else _BODY, 4))
            else:
                children.append((target, more, _OPEN_HEX if due > 1 else _BODY, due - 1))
        children.sort(key=lambda child: not accepting[child[0]])  # close the string first
        stack.extend(reversed(children))


def decode_string(text: bytes) -> str:
    """The string a whole JSON string text (quotes included, valid UTF-8) writes."""
    return json.loads(text.decode("utf-8", "surrogatepass"))


_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
_SHORT_ESCAPES = {ord(k): v for k, v in zip('"\\/bfnrt', b'"\\/\b\f\n\r\t')}


def string_bytes(body: bytes) -> bytes | None:
    """The UTF-8 bytes (lone surrogates kept) a JSON string body writes, escapes decoded; a
    partial character at either end is kept as it is. None when the body ends inside an
    escape, or right after a high surrogate's ``\\u`` escape (its pair may follow), or holds
    what is no JSON escape."""
    if 0x5C not in body:
        return body
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        b = body[i]
        if b != 0x5C:
            out.append(b)
            i += 1
            continue
        if i + 1 >= n:
            return None
        if body[i + 1] != 0x75:
            if body[i + 1] not in _SHORT_ESCAPES:
                return None  # not a JSON escape
            out.append(_SHORT_ESCAPES[body[i + 1]])
            i += 2
            continue
        if i + 6 > n:
            return None
        if not _HEX_DIGITS.issuperset(body[i + 2:i + 6]):
            return None
        code = int(body[i + 2:i + 6], 16)
        i += 6
        if 0xD800 <= code < 0xDC00:
            if i == n:
                return None
            if body[i:i + 2] == b"\\u" and i + 6 <= n and _HEX_DIGITS.issuperset(body[i + 2:i + 6]) \
                    and 0xDC00 <= int(body[i + 2:i + 6], 16) < 0xE000:
                code = 0x10000 + ((code - 0xD800) << 10) + int(body[i + 2:i + 6], 16) - 0xDC00
                i += 6
            elif body[i:i + 1] == b"\\" and i + 6 > n:
                return None  # a \\u escape follows, not whole yet: it may be the pair
        out += chr(code).encode("utf-8", "surrogatepass")
    return bytes(out)


_BINDING_APPLICATORS = ("allOf", "anyOf", "oneOf", "$ref")
"""Applicators whose sub-schemas hold at the same instance path whenever their schema does."""
_ARRAY_KEYWORDS = ("items", "prefixItems", "additionalItems", "unevaluatedItems", "contains", "minItems", "maxItems",
                   "uniqueItems", "minContains", "maxContains")


class _Producer(NamedTuple):
    path: Path
    pointer: str
    schema: dict
    entered: frozenset[int]  # the $ref targets it was reached through


class _Context(NamedTuple):
    """What the schemas met so far at one instance path, all holding together (the parent of
    an ``allOf`` part, a ``$ref``, an ``anyOf`` branch), settle for the ones below: whether
    they close the object's other keys, describe every item, and which keys they declare."""

    keys_closed: bool = False
    items_closed: bool = False
    declared: frozenset[str] = frozenset()


_OPEN = _Context()


class _Visit(NamedTuple):
    schema: Any
    pointer: str
    path: Path
    entered: frozenset[int]  # the $ref targets entered on the way (a cycle is recursion)
    context: _Context
    conjunct: bool  # reached through then/else or dependentSchemas: empty, it adds nothing


class _Walk:
    """One walk of the schema along instance paths (see :func:`plan_unique_items`)."""

    def __init__(self, compiler: SchemaCompiler) -> None:
        self.compiler = compiler
        self.strict = compiler.options.strict
        self.producers: list[_Producer] = []
        self.free: list[tuple[Path, str]] = []  # (path, pointer): anything may be below
        self.recursive: set[int] = set()  # $ref targets entered again inside themselves
        self.visits = 0
        self.first_unique = ""

    def run(self, root: Any) -> None:
        stack = [_Visit(root, "", (), frozenset(), _OPEN, False)]
        while stack:
            self.visits += 1
            if self.visits > MAX_VISITS:
                raise UnsupportedSchemaError("uniqueItems", self.first_unique,
                                             f"the schema is too large to locate its arrays (over {MAX_VISITS:,} "
                                             "sub-schema visits)")
            stack.extend(self._visit(stack.pop()))

    def _closes(self, schema: Any) -> _Context:
        """What ``schema``'s own keywords settle at its path (see :class:`_Context`)."""
        if not isinstance(schema, dict):
            return _OPEN
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        others = ("additionalProperties", "patternProperties", "unevaluatedProperties")
        keys_closed = schema.get("additionalProperties") is False \
            or (self.strict and bool(properties) and not any(k in schema for k in others))
        items = schema.get("items")
        items_closed = (key_present := "items" in schema) and not isinstance(items, list) \
            or (key_present and "additionalItems" in schema) or "unevaluatedItems" in schema
        return _Context(keys_closed, bool(items_closed), frozenset(properties))

    def _context_here(self, schema: dict, visit: _Visit) -> _Context:
        """``visit``'s context with ``schema``'s own keywords and its ``allOf`` parts' (shallow)."""
        parts = [schema] + [self.compiler.deref(part, visit.pointer) for part in schema.get("allOf", ())
                            if isinstance(schema.get("allOf"), list)]
        found = [self._closes(part) for part in parts] + [visit.context]
        return _Context(any(c.keys_closed for c in found), any(c.items_closed for c in found),
                        frozenset().union(*(c.declared for c in found)))

    def _visit(self, visit: _Visit) -> list[_Visit]:
        schema, pointer, path, entered = visit.schema, visit.pointer, visit.path, visit.entered
        if schema is False:
            return []
        if schema is True or (isinstance(schema, dict) and not set(schema) & KEYWORDS):
            if not visit.conjunct:  # an empty then/else/dependent schema adds nothing to its parent
                self.free.append((path, pointer))
            return []
        if not isinstance(schema, dict):
            return []
        if "enum" in schema or "const" in schema:
            members = schema["enum"] if isinstance(schema.get("enum"), list) else []
            if "const" in schema:
                members = [*members, schema["const"]]
            if any(_holds_array(m) for m in members):
                self.free.append((path, pointer))
            return []
        context = self._context_here(schema, visit)

        def same_path(sub: Any, sub_pointer: str, conjunct: bool, sub_entered: frozenset[int] = entered) -> _Visit:
            return _Visit(sub, sub_pointer, path, sub_entered, context, conjunct)

        children: list[_Visit] = []
        if "$dynamicRef" in schema or "$recursiveRef" in schema:
            self.free.append((path, pointer))
        if isinstance(schema.get("$ref"), str):
            target, target_pointer = self.compiler.resolve(schema["$ref"], pointer, schema)
            if id(target) in entered:
                self.free.append((path, pointer))  # recursion: any depth of it may follow
                self.recursive.add(id(target))
            else:
                children.append(same_path(target, target_pointer, False, entered | {id(target)}))
            if self.compiler.dialect in DRAFTS_IGNORING_REF_SIBLINGS or not set(schema) - ANNOTATIONS - {"$ref"}:
                return children
        for key in ("allOf", "anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                children += [same_path(sub, f"{pointer}/{key}/{i}", False) for i, sub in enumerate(schema[key])]
        for key in ("then", "else"):
            if key in schema and "if" in schema:
                children.append(same_path(schema[key], f"{pointer}/{key}", True))
        for key in ("dependentSchemas", "dependencies"):
            if isinstance(schema.get(key), dict):
                children += [same_path(sub, f"{pointer}/{key}/{_escape(name)}", True)
                             for name, sub in schema[key].items() if not isinstance(sub, list)]
        try:
            types = declared_types(schema)
        except InvalidSchemaError:
            types = {"array", "object"}
        # beside an applicator that must hold here too, what this schema leaves open is closed
        # by it (its branches are visited on their own): only its own keywords count
        bound = any(key in schema for key in _BINDING_APPLICATORS)
        if "array" in types and (not bound or any(key in schema for key in _ARRAY_KEYWORDS)):
            self.producers.append(_Producer(path, pointer, schema, entered))
            if schema.get("uniqueItems") is True and not self.first_unique:
                self.first_unique = pointer
            children += self._array_children(schema, pointer, path + (ITEM,), entered, bound or context.items_closed)
        if "object" in types:
            children += self._object_children(schema, pointer, path, entered, context, bound)
        return children

    def _array_children(self, schema: dict, pointer: str, path: Path, entered: frozenset[int],
                        closed: bool) -> list[_Visit]:
        children: list[_Visit] = []
        rest_described = False
        for key in ("prefixItems", "items"):
            value = schema.get(key)
            if isinstance(value, list):
                children += [_Visit(sub, f"{pointer}/{key}/{i}", path, entered, _OPEN, False)
                             for i, sub in enumerate(value)]
            elif key in schema:
                children.append(_Visit(value, f"{pointer}/{key}", path, entered, _OPEN, False))
                rest_described = True
        for key in ("additionalItems", "unevaluatedItems", "contains"):
            if key in schema:
                children.append(_Visit(schema[key], f"{pointer}/{key}", path, entered, _OPEN, False))
                rest_described = rest_described or key != "contains"
        if not rest_described and not closed:
            self.free.append((path, pointer))
        return children

    def _object_children(self, schema: dict, pointer: str, path: Path, entered: frozenset[int],
                         context: _Context, bound: bool) -> list[_Visit]:
        children: list[_Visit] = []
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        for name, sub in properties.items():
            children.append(_Visit(sub, f"{pointer}/properties/{_escape(name)}", path + (name,), entered, _OPEN,
                                   False))
        patterns: list[Step] = []
        if isinstance(schema.get("patternProperties"), dict):
            for pattern, sub in schema["patternProperties"].items():
                sub_pointer = f"{pointer}/patternProperties/{_escape(pattern)}"
                patterns.append(self._pattern_step(pattern, sub_pointer))
                children.append(_Visit(sub, sub_pointer, path + (patterns[-1],), entered, _OPEN, False))
        exact = tuple(p for p in patterns if isinstance(p, PatternKey))
        other = path + (OtherKey(frozenset(properties), exact if len(exact) == len(patterns) else ()),)
        described = False
        for key in ("additionalProperties", "unevaluatedProperties"):
            if key in schema:
                children.append(_Visit(schema[key], f"{pointer}/{key}", other, entered, _OPEN, False))
                described = True
        if not described and not context.keys_closed and not bound:
            # extra keys with any value; a key declared beside (by the schemas holding here too)
            # takes that declaration's schema as well, so it is not free
            self.free.append((path + (OtherKey(frozenset(properties) | context.declared, other[-1].patterns),), pointer))
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        for name in required:
            if isinstance(name, str) and name not in context.declared:
                self.free.append((path + (name,), pointer))  # required, described nowhere here
        return children

    def _pattern_step(self, pattern: str, pointer: str) -> Step:
        """The path step of a ``patternProperties`` key (any key, when the pattern is refused:
        the compile reports it)."""
        try:
            return PatternKey(pattern, self.compiler.key_pattern(pattern, pointer))
        except EnforcerError:
            return OtherKey(frozenset())


def _holds_array(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            return True
        if isinstance(v, dict):
            stack.extend(v.values())
    return False


def _only_strings(items: Any, deref: Callable[[Any], Any], levels: int = 8) -> bool:
    """Whether ``items`` admits strings at most, by its own ``type``, ``enum`` or ``const``, or
    by every branch of an ``anyOf``/``oneOf`` (or one part of an ``allOf``) doing so, ``deref``
    following references, ``levels`` unions deep (a cheap first test; the item automaton
    decides)."""
    if not isinstance(items, dict):
        return False
    if "const" in items or "enum" in items:
        members = [items["const"]] if "const" in items else items["enum"]
        return isinstance(members, list) and all(isinstance(m, str) for m in members)
    kind = items.get("type")
    if kind == "string" or kind == ["string"]:
        return True
    if levels == 0:
        return False
    for key in ("anyOf", "oneOf"):
        branches = items.get(key)
        if isinstance(branches, list) and branches \
                and all(_only_strings(deref(b), deref, levels - 1) for b in branches):
            return True
    parts = items.get("allOf")
    return isinstance(parts, list) and any(_only_strings(deref(p), deref, levels - 1) for p in parts)


_ITEMS: LRU[StringItems] = LRU(256)
"""Item automata by (items schema without references, dialect, options): shared by every compile."""


def holds_unique_items(schema: Any) -> bool:
    """Whether ``uniqueItems: true`` appears anywhere in ``schema`` (one pass over it)."""
    stack = [schema]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if v.get("uniqueItems") is True:
                return True
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def plan_unique_items(compiler: SchemaCompiler) -> UniqueItemsPlan:
    """Locate every array that ``uniqueItems`` applies to and compile its items, or raise
    :class:`~enforcer.errors.UnsupportedSchemaError` naming the ``uniqueItems`` that cannot be
    enforced exactly and why."""
    walk = _Walk(compiler)
    walk.run(compiler.root)
    free, producers = PathIndex(), PathIndex()
    for path, pointer in walk.free:
        free.add(path, pointer)
    for producer in walk.producers:
        producers.add(producer.path, producer)
    arrays: list[UniqueArray] = []
    holders: list[dict] = []
    items_of: dict[int, StringItems] = {}
    single: set[int] = set()  # maxItems 0 or 1: nothing to compare
    for unique in walk.producers:
        if unique.schema.get("uniqueItems") is not True:
            continue
        key = id(unique.schema)
        if unique.schema.get("maxItems", 2) in (0, 1):
            if key not in single:
                single.add(key)
                holders.append(unique.schema)
            continue
        _check_alone(unique, walk, free, producers)
        if key not in items_of:
            items_of[key] = _string_items(compiler, unique)
            holders.append(unique.schema)
        arrays.append(UniqueArray(unique.path, unique.pointer, items_of[key]))
    index = PathIndex()
    for array in arrays:
        index.add(array.path, array)
    return UniqueItemsPlan(tuple(arrays), tuple(holders), index)


def _check_alone(unique: _Producer, walk: _Walk, free: PathIndex, producers: PathIndex) -> None:
    """Refuse unless ``unique`` is the only schema that may describe an array at its paths, at
    paths the walk has all (not inside a recursion, which repeats them without end). ``free``
    holds the walk's loosely described regions, ``producers`` its array schemas, by path."""
    if unique.entered & walk.recursive:
        raise UnsupportedSchemaError("uniqueItems", unique.pointer, "inside a recursive $ref (its arrays lie at "
                                     "paths without end, which the item memory does not follow)")
    for pointer in free.prefixes_meeting(unique.path):
        raise UnsupportedSchemaError("uniqueItems", unique.pointer,
                                     f"a value described by {pointer or '(root)'} only loosely (free-form, or "
                                     "a recursive $ref) may hold this array, where its items need not differ")
    for other in producers.meeting(unique.path):
        if other.schema is not unique.schema:
            raise UnsupportedSchemaError("uniqueItems", unique.pointer,
                                         f"the schema at {other.pointer or '(root)'} may describe the same array, so "
                                         "whether its items must differ depends on the instance")


def _string_items(compiler: SchemaCompiler, unique: _Producer) -> StringItems:
    schema, pointer = unique.schema, unique.pointer
    for key in ("prefixItems", "contains", "unevaluatedItems"):
        if key in schema:
            raise UnsupportedSchemaError("uniqueItems", pointer, f"beside {key!r} (only arrays whose items share one "
                                         "schema are enforced)")
    items = schema.get("items", True)
    if isinstance(items, list):
        raise UnsupportedSchemaError("uniqueItems", pointer, "beside 'items' as an array (only arrays whose items "
                                     "share one schema are enforced)")
    reason = "its items may be other than strings (only arrays of strings are enforced: the item memory " \
             "compares strings)"
    if not _only_strings(compiler.deref(items, f"{pointer}/items"), lambda s: compiler.deref(s, f"{pointer}/items")):
        raise UnsupportedSchemaError("uniqueItems", pointer, reason)
    # items without references mean the same wherever they stand: built once per process
    key = (json.dumps(items, sort_keys=True), compiler.dialect, compiler.options) \
        if not holds_reference(items) else None
    found = _ITEMS.get(key) if key is not None else None
    if found is None:
        node = compiler.value(items, f"{pointer}/items", 1, ())
        try:
            dfa = compile_node(node, MAX_ITEM_STATES)
        except SchemaTooComplexError as exc:
            raise SchemaTooComplexError(f"its items' automaton ({exc.reason})", f"{pointer}/items", exc.budget,
                                        "uniqueItems") from None
        if not dfa.is_empty and (np.flatnonzero(dfa.array_row(0) != DEAD).tolist() != [0x22] or dfa.accepting[0]):
            raise UnsupportedSchemaError("uniqueItems", pointer, reason)
        found = StringItems(dfa)
        if key is not None:
            found = _ITEMS.put(key, found)
    if found.dfa.is_empty:
        return found
    minimum = schema.get("minItems", 0)
    if isinstance(minimum, (int, float)) and minimum > 1:
        available = found.distinct_strings(MAX_FINITE_VALUES)
        if available < minimum:
            raise UnsupportedSchemaError("uniqueItems", pointer, f"minItems {minimum} is more than the {available} "
                                         "distinct strings its items allow (no array satisfies it)")
    return found

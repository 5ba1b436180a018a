"""Plain JSON mode: ``compile_json_schema`` and the per-sequence :class:`JsonMatcher`.

A :class:`CompiledSchema` (DFA + lazily filled mask table) is immutable from the outside,
thread-safe, and cached by canonical key in a bounded LRU, so every request with the same schema
and vocabulary shares its masks. A matcher is a cursor: microseconds per token.
"""

from __future__ import annotations

import json
import sys
import weakref
from dataclasses import fields
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from .automaton import DEAD, DFA, LazyDFA, Node, compile_node, literal
from .errors import InvalidSchemaError, SchemaTooComplexError
from .ids import as_token_id
from .item_memory import START, Scan, remembered_words, scan
from .json_schema import SchemaCompiler, SchemaOptions
from .lru import COMPILED, LRU
from .masks import MaskTable, RowWriter, clear_shared_masks, pack_ids, token_index
from .numbers import bounded_number
from .schema_check import check_document, check_schema
from .unique_items import UniqueItemsPlan, holds_unique_items, plan_unique_items
from .vocabulary import Vocabulary


_INT32 = np.dtype(np.int32)


def check_bitmask(bitmask: Any, index: Any, words: int) -> int:
    """Validate a packed bitmask and a row before anything is written: a numpy array or torch
    tensor of dtype int32 and shape ``(batch, words)``, ``index`` an int in ``range(batch)``.
    Returns the row; raises ``ValueError`` naming the problem (API misuse, not a decode-loop
    state). O(1), well under a microsecond."""
    if isinstance(bitmask, np.ndarray):
        if bitmask.dtype is not _INT32 and bitmask.dtype != _INT32:
            raise ValueError(f"bitmask must have dtype int32, got {bitmask.dtype}")
    elif type(bitmask).__module__.partition(".")[0] == "torch":
        if bitmask.dtype is not sys.modules["torch"].int32:
            raise ValueError(f"bitmask must have dtype int32, got {bitmask.dtype}")
    else:
        raise ValueError(f"bitmask must be a numpy array or a torch tensor, got {type(bitmask).__name__}")
    shape = bitmask.shape
    if len(shape) != 2 or shape[1] != words:
        raise ValueError(f"bitmask must have shape (batch, {words}) (ceil(vocab_size / 32) int32 words per row), "
                         f"got {tuple(shape)}")
    row = index if type(index) is int else as_token_id(index)
    if row is None or not 0 <= row < shape[0]:
        raise ValueError(f"index must be an int in [0, {shape[0]}) (a row of the bitmask), got {index!r}")
    return row


class _CheckedBitmask(NamedTuple):
    """The last bitmask :func:`_checked` checked, and the numpy array its rows are written to
    (the array itself, or a CPU tensor's view; ``writer``: the compiled writer of its rows from
    ids, when built and its rows are contiguous inside and writable, else None)."""

    owner: weakref.ref
    data_ptr: int
    shape: tuple
    rows: np.ndarray | None
    writer: RowWriter | None


_last_checked: _CheckedBitmask | None = None
"""A decode loop fills the same bitmask at every step: the last one checked is remembered (by
weak reference, with its shape and a tensor's data pointer, so a tensor resized or given other
storage in place is checked again), which saves the checks and the tensor-to-numpy view, about
a microsecond of the two a step takes. Dropped with its bitmask."""


def _forget(owner: weakref.ref) -> None:
    global _last_checked
    last = _last_checked
    if last is not None and last.owner is owner:
        _last_checked = None


def _checked(bitmask: Any, index: Any, words: int) -> tuple[_CheckedBitmask, int]:
    """``bitmask`` checked for rows of ``words`` words (:func:`check_bitmask`; remembered for
    the next call) and ``index`` as a row number."""
    global _last_checked
    last = _last_checked
    if last is not None and last.owner() is bitmask and type(index) is int and 0 <= index < last.shape[0] \
            and last.shape[1] == words and bitmask.shape == last.shape \
            and (last.data_ptr < 0 or bitmask.data_ptr() == last.data_ptr):
        return last, index
    index = check_bitmask(bitmask, index, words)
    if isinstance(bitmask, np.ndarray):
        rows, data_ptr = bitmask, -1  # an array keeps its buffer while its shape stays
    elif bitmask.is_cpu:
        rows, data_ptr = bitmask.numpy(), bitmask.data_ptr()
    else:  # another device: written by a host-to-device copy, checked again each time
        return _CheckedBitmask(weakref.ref(bitmask), 0, tuple(bitmask.shape), None, None), index
    writer = RowWriter(rows) if RowWriter is not None and rows.strides[1] == 4 and rows.flags.writeable else None
    _last_checked = _CheckedBitmask(weakref.ref(bitmask, _forget), data_ptr, tuple(bitmask.shape), rows, writer)
    return _last_checked, index


def write_bitmask_row(bitmask: Any, index: int, words: np.ndarray) -> None:
    """Copy packed ``words`` into row ``index`` of a numpy or torch int32 bitmask of
    ``words.shape[0]`` columns (checked by :func:`check_bitmask`): :func:`write_row`."""
    write_row(bitmask, index, words, words.shape[0], True)


def write_bitmask_ids(bitmask: Any, index: int, ids: Sequence[int], words: int) -> None:
    """Set row ``index`` of a numpy or torch int32 bitmask of ``words`` columns (checked by
    :func:`check_bitmask`) to exactly the bits of ``ids`` (ints in ``[0, 32 * words)``):
    :func:`write_row`."""
    write_row(bitmask, index, ids, words, False)


def write_row(bitmask: Any, index: int, allowed: Any, words: int, packed: bool) -> None:
    """Row ``index`` of ``bitmask`` (``words`` columns, checked) set to ``allowed``: packed
    mask words (``packed``) or ids. Through the compiled :class:`~enforcer._kernels.RowWriter`
    where the rows allow it: one copy of the words (about 0.5 us for 150k ids, where a numpy
    row assignment costs 0.9), or a row cleared and a bit set per id (about 0.3 us, where
    packing a mask and copying it costs 1.3). Otherwise a CPU tensor is written through its
    numpy view, and a tensor on another device gets one host-to-device copy."""
    checked, index = _checked(bitmask, index, words)
    writer = checked.writer
    if writer is not None:
        if packed:
            writer.write_words(index, allowed)
        else:
            writer.write_ids(index, allowed)
        return
    row = allowed if packed else pack_ids(allowed, words)
    if checked.rows is None:
        bitmask[index].copy_(sys.modules["torch"].from_numpy(np.array(row)))
    else:
        checked.rows[index] = row


class CompiledSchema:
    """A JSON Schema compiled against one vocabulary. Build with :func:`compile_json_schema`."""

    def __init__(self, schema: Any, dfa: DFA | LazyDFA, vocabulary: Vocabulary, options: SchemaOptions,
                 unique_plan: UniqueItemsPlan | None = None) -> None:
        self.schema = schema
        self.dfa = dfa
        self.unique_plan = unique_plan
        """Where matchers remember items so that ``uniqueItems`` holds (None: nowhere)."""
        self.vocabulary = vocabulary
        self.options = options
        self.masks = MaskTable(dfa, token_index(vocabulary), options.max_mask_bytes)

    @property
    def num_states(self) -> int:
        return self.dfa.num_states

    def memory_size_bytes(self) -> int:
        """Bytes held: the automaton (estimate for its Python parts) and the masks computed so
        far. Grows as new states are reached; what the cache limit counts."""
        return self.dfa.memory_size_bytes() + self.masks.memory_size_bytes()

    def precompute(self) -> "CompiledSchema":
        """Build every state and its mask now rather than on first use (what peers do at
        compile time): later first requests run at warm speed. Free-form values are built
        ``masks.PRECOMPUTED_LEVELS`` (4) levels deep; deeper ones when a text reaches them.
        Cost: ~0.1-1 ms per state."""
        self.masks.precompute()
        return self

    def matcher(self, stop_token_ids: Iterable[int] = ()) -> "JsonMatcher":
        """A fresh cursor at the start of the value. ``stop_token_ids`` become allowed once the
        value is complete; accepting one finishes the matcher."""
        return JsonMatcher(self, tuple(stop_token_ids))

    def __repr__(self) -> str:
        return f"CompiledSchema(states={self.num_states}, vocab_size={self.vocabulary.vocab_size})"


class Matcher:
    """What every per-sequence matcher shares (subclasses define ``accept_token`` and
    ``rollback``)."""

    __slots__ = ()

    def accept_token(self, token_id: int) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def rollback(self, num_tokens: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def mask_words(self, compute: bool = True) -> np.ndarray | None:  # pragma: no cover - abstract
        """The packed int32 row of the allowed tokens; with ``compute=False``, None when it is
        not computed yet."""
        raise NotImplementedError

    @property
    def words_per_row(self) -> int:  # pragma: no cover - abstract
        """Packed int32 words of a mask row: ``ceil(vocab_size / 32)``."""
        raise NotImplementedError

    def few_allowed_ids(self, compute: bool = True) -> tuple[int, ...] | None:  # pragma: no cover - abstract
        """The allowed ids when they are few and known as ids (a key's next pieces, a tag's,
        a place's delimiters: see :data:`~enforcer.masks.MAX_FEW_IDS`), which
        :meth:`fill_bitmask` writes bit by bit; None: only :meth:`mask_words` has them. With
        ``compute`` False, None unless found before (no walk: a caller can tell a cached row
        from one that costs a new mask)."""
        raise NotImplementedError

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the allowed tokens into row ``index`` of a packed int32 bitmask (numpy array or
        torch tensor of shape ``(batch, ceil(vocab_size / 32))``); bit ``i % 32`` of word
        ``i // 32`` is set iff ``accept_token(i)`` would return True (after the stop token: no
        bit). ``ValueError`` before writing for another dtype or shape, or an ``index`` that is
        not a row (:func:`check_bitmask`)."""
        ids = self.few_allowed_ids()
        if ids is None:
            write_bitmask_row(bitmask, index, self.mask_words())
        else:
            write_bitmask_ids(bitmask, index, ids, self.words_per_row)

    def accept_tokens(self, token_ids: Sequence[int]) -> bool:
        """Accept tokens in order; on the first refusal undo them all and return False."""
        done = 0
        for t in token_ids:
            if not self.accept_token(t):
                self.rollback(done)
                return False
            done += 1
        return True


class JsonMatcher(Matcher):
    """Per-sequence cursor over a :class:`CompiledSchema`. Not thread-safe; one per sequence."""

    __slots__ = ("_compiled", "_read", "_accepting", "_tokens", "_stop", "_stop_ids", "_states", "_finished",
                 "_stop_words", "_cut", "_plan", "_scans", "_masked")

    def __init__(self, compiled: CompiledSchema, stop_token_ids: tuple[int, ...] = ()) -> None:
        self._compiled = compiled
        self._read = compiled.dfa.read
        self._accepting = compiled.dfa.accepting_list
        self._tokens = compiled.vocabulary.byte_tokens
        self._cut = compiled.masks.cut
        stop = [as_token_id(t) for t in stop_token_ids]
        size = compiled.vocabulary.vocab_size
        for given, token in zip(stop_token_ids, stop):
            if token is None or not 0 <= token < size:
                raise ValueError(f"stop token ids must be ints in [0, {size}), got {given!r}")
        self._stop = frozenset(stop)
        self._stop_ids = tuple(sorted(self._stop))
        self._stop_words = pack_ids(np.array(sorted(self._stop), dtype=np.int64),
                                    compiled.masks.index.words) if self._stop else None
        self._states: list[int] = [0]
        self._finished = False
        self._plan = compiled.unique_plan
        self._scans: list[Scan] = [START]
        """The item memory after each accepted token (only with a ``uniqueItems`` plan)."""
        self._masked: tuple[Scan, int, np.ndarray] | None = None
        """The last mask with the item memory's refusals cleared, and where it was computed."""

    # ---- advancing -----------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) when the token is not allowed, including
        anything after the stop token and any id that is not an integer in
        ``range(vocab_size)`` (see :func:`~enforcer.ids.as_token_id`)."""
        if self._finished:
            return False
        if type(token_id) is not int:
            token_id = as_token_id(token_id)
            if token_id is None:
                return False
        state = self._states[-1]
        if token_id in self._stop:
            if not self._accepting[state]:
                return False
            self._states.append(state)
            if self._plan is not None:
                self._scans.append(self._scans[-1])
            self._finished = True
            return True
        if not 0 <= token_id < len(self._tokens):
            return False
        data = self._tokens[token_id]
        if not data or state in self._cut:  # cut: the automaton's budget emptied this mask
            return False
        state = self._read(state, data)
        if state == DEAD:
            return False
        if self._plan is not None:
            scanned = scan(self._plan, self._scans[-1], data, commit=True)
            if scanned is None:
                return False
            self._scans.append(scanned)
        self._states.append(state)
        return True

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens (speculative decoding)."""
        if num_tokens < 0 or num_tokens > len(self._states) - 1:
            raise ValueError(f"cannot roll back {num_tokens} tokens; {len(self._states) - 1} accepted")
        if num_tokens:
            del self._states[-num_tokens:]
            if self._plan is not None:
                del self._scans[-num_tokens:]
            self._finished = False

    def reset(self) -> None:
        self._states = [0]
        self._scans = [START]
        self._finished = False

    # ---- masks ---------------------------------------------------------------------------

    def mask_words(self, compute: bool = True) -> np.ndarray | None:
        masks = self._compiled.masks
        if self._finished:  # nothing may follow the stop token
            return np.zeros(masks.index.words, np.int32)
        state = self._states[-1]
        words = masks.mask(state) if compute else masks.cached(state)
        if words is not None and self._plan is not None:
            words = self._remembering(state, words)
        if words is not None and self._stop_words is not None and self._accepting[state]:
            words = words | self._stop_words
        return words

    def _remembering(self, state: int, words: np.ndarray) -> np.ndarray:
        """``words`` without the tokens the item memory refuses (computed once per position)."""
        current = self._scans[-1]
        masked = self._masked
        if masked is not None and masked[0] is current and masked[1] == state:
            return masked[2]
        words = remembered_words(self._plan, current, words, self._compiled.vocabulary)
        self._masked = (current, state, words)
        return words

    @property
    def words_per_row(self) -> int:
        return self._compiled.masks.index.words

    def few_allowed_ids(self, compute: bool = True) -> tuple[int, ...] | None:
        if self._finished:  # nothing may follow the stop token
            return ()
        if self._plan is not None:  # the item memory may refuse some of them
            return None
        state = self._states[-1]
        ids = self._compiled.masks.few_ids(state, compute)
        if ids is not None and self._stop and self._accepting[state]:
            ids += self._stop_ids
        return ids

    def allowed_token_ids(self) -> list[int]:
        """The ids ``accept_token`` would accept now, ascending (empty after the stop token)."""
        if self._finished:
            return []
        state = self._states[-1]
        if self._plan is not None:
            return np.flatnonzero(np.unpackbits(self.mask_words().view(np.uint8), bitorder="little")).tolist()
        ids = self._compiled.masks.allowed(state).tolist()
        if self._stop and self._accepting[state]:
            ids = sorted(set(ids) | self._stop)
        return ids

    # ---- status --------------------------------------------------------------------------

    def is_accepting(self) -> bool:
        """What was accepted so far is one complete JSON value."""
        return bool(self._accepting[self._states[-1]])

    @property
    def is_finished(self) -> bool:
        """Nothing more may follow: a stop token was accepted, or the value is complete and
        cannot be extended (with no stop tokens configured)."""
        if self._finished:
            return True
        state = self._states[-1]
        return not self._stop and self._accepting[state] and self._compiled.masks.is_empty(state)

    @property
    def error(self) -> str | None:
        """Why no token can follow, when that happens without the value being complete."""
        if self._finished:
            return None
        state = self._states[-1]
        if not self._accepting[state] and self._compiled.masks.is_empty(state):
            return self._compiled.dfa.exhausted or "no token of the vocabulary can continue the value from here"
        return None

    @property
    def num_tokens(self) -> int:
        return len(self._states) - 1


# ---- compilation and cache ------------------------------------------------------------------

_CACHE: LRU[CompiledSchema] = LRU(512, COMPILED, CompiledSchema.memory_size_bytes)
_OPTION_NAMES = frozenset(f.name for f in fields(SchemaOptions))


def clear_cache() -> None:
    """Forget every cached :class:`CompiledSchema` and the masks shared between compiled
    objects (e.g. to measure cold compiles), and the shared literal and bounded-number nodes.
    The ``format`` automata, constants of the library built once per process at first use,
    stay, and so do their states' masks per vocabulary (:data:`enforcer.masks.FORMAT_PARTS`)."""
    _CACHE.clear()
    clear_shared_masks()
    literal.cache_clear()
    bounded_number.cache_clear()


def schema_options(options: dict[str, Any]) -> SchemaOptions:
    unknown = set(options) - _OPTION_NAMES
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; known: {sorted(_OPTION_NAMES)}")
    return SchemaOptions(**options)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=False, separators=(",", ":"), ensure_ascii=False)


def _parse(schema: Any) -> Any:
    if isinstance(schema, str):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as exc:
            raise InvalidSchemaError("", f"not JSON: {exc}") from None
        except RecursionError:
            raise SchemaTooComplexError("the schema text nests too deeply to be read") from None
    return schema


def schema_node(schema: Any, options: SchemaOptions, checked: bool = False) -> Node:
    """The byte-level expression of every accepted serialisation of ``schema`` (no caching; to
    combine with other expressions before determinising). Checked first unless ``checked``.
    Not tested for emptiness (:attr:`~enforcer.automaton.Node.empty` says whether it is)."""
    return _schema_node(schema, options, checked, item_memory=False)[0]


def _schema_node(schema: Any, options: SchemaOptions, checked: bool,
                 item_memory: bool) -> tuple[Node, UniqueItemsPlan | None]:
    """:func:`schema_node`, and with ``item_memory`` the arrays whose ``uniqueItems`` the
    matchers enforce (:func:`~enforcer.unique_items.plan_unique_items`), when there are any."""
    schema = _parse(schema)
    if not checked:
        check_schema(schema)
    try:
        compiler = SchemaCompiler(schema, options)
        plan = None
        if item_memory and "uniqueItems" in compiler.keywords_present and holds_unique_items(schema):
            plan = plan_unique_items(compiler)
            compiler.leave_unique_items_to(plan.holders)
        return compiler.compile(), plan
    except RecursionError:
        raise SchemaTooComplexError("the schema nests too deeply to compile") from None


def compile_schema_dfa(schema: Any, options: SchemaOptions, lazy: bool = True, checked: bool = False) -> DFA | LazyDFA:
    """The automaton of every accepted serialisation of ``schema`` (no caching): lazy by
    default (states are built when a walk first reaches them), or fully built. The schema is
    checked first (:func:`~enforcer.schema_check.check_schema`) unless ``checked`` says the
    caller did. ``uniqueItems`` is refused (the automaton alone cannot enforce it)."""
    return schema_automaton(schema, options, lazy, checked)[0]


def schema_automaton(schema: Any, options: SchemaOptions, lazy: bool = True, checked: bool = False,
                     item_memory: bool = False) -> tuple[DFA | LazyDFA, UniqueItemsPlan | None]:
    """:func:`compile_schema_dfa`, and with ``item_memory`` (for matchers that keep one) the
    arrays whose ``uniqueItems`` they enforce, when the schema has any."""
    node, plan = _schema_node(schema, options, checked, item_memory)
    try:
        dfa = LazyDFA(node, options.max_states, options.max_automaton_bytes) if lazy \
            else compile_node(node, options.max_states)
    except RecursionError:
        # a safety net: documents are depth-checked and schema nesting is bounded
        # (MAX_NESTING), so this is not expected; it must still never escape as a foreign error
        raise SchemaTooComplexError("the schema nests too deeply to compile") from None
    if dfa.is_empty:
        raise InvalidSchemaError("", "no JSON value satisfies this schema")
    return dfa, plan


def compile_json_schema(schema: Any, vocabulary: Vocabulary, **options: Any) -> CompiledSchema:
    """Compile ``schema`` (a dict, bool or JSON text) for ``vocabulary``.

    Options are the fields of :class:`~enforcer.json_schema.SchemaOptions`. Cached: the same
    (schema, options, vocabulary) returns the same object. The schema is validated against its
    dialect's meta-schema first. Raises :class:`~enforcer.errors.InvalidSchemaError` (a malformed
    schema) or :class:`~enforcer.errors.UnsupportedSchemaError` (a keyword that cannot be
    enforced exactly), each naming the JSON pointer, or :class:`~enforcer.errors.SchemaTooComplexError`.
    """
    return compiled_schema(_parse(schema), vocabulary, schema_options(options))


def compiled_schema(schema: Any, vocabulary: Vocabulary, opts: SchemaOptions, checked: bool = False,
                    schema_json: str | None = None) -> CompiledSchema:
    """:func:`compile_json_schema` for a parsed schema and options (``checked``: the caller
    validated the document already, as ``compile_tools`` does for each tool; ``schema_json``:
    its :func:`canonical_json` when the caller wrote it already)."""
    if not checked:
        check_document(schema)
    if schema_json is None:
        schema_json = canonical_json(schema)
    key = (schema_json, opts, vocabulary.fingerprint)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    if not checked:
        check_schema(schema, schema_json, document_checked=True)
    dfa, plan = schema_automaton(schema, opts, checked=True, item_memory=True)
    compiled = CompiledSchema(schema, dfa, vocabulary, opts, plan)
    return _CACHE.put(key, compiled)

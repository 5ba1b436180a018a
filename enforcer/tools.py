"""``compile_tools``: an OpenAI ``tools`` list + a format + a vocabulary -> :class:`CompiledTools`.

Declarations are checked before any decoding (names, duplicates, JSON Schema validity,
unsupported keywords with their pointer). The argument automata come from
:func:`~enforcer.matcher.compile_json_schema`'s cache, so tool sets that share a tool share its
masks. A :class:`CompiledTools` is immutable from the outside, thread-safe, and cached by a
canonical key in a bounded LRU; the masks it fills lazily are shared by every matcher.
"""

from __future__ import annotations

import json
import threading
import unicodedata
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Iterable, Sequence

import jsonschema
import numpy as np

from .automaton import DFA, alt, compile_node, literal
from .errors import InvalidToolsError, TokenizerError, UnsupportedSchemaError
from .formats import CallHeader, FormatSpec, JsonArguments, Token, get_format
from .masks import MaskTable, pack_ids, token_index
from .matcher import CompiledSchema, compile_json_schema, schema_options
from .matcher import clear_cache as clear_schema_cache
from .vocabulary import Vocabulary

TOOL_CHOICES = ("auto", "none", "required")


def normalize_tools(tools: Any) -> list[tuple[str, dict]]:
    """``[(name, parameters)]`` from an OpenAI ``tools`` list (``{"type": "function",
    "function": {...}}`` entries; the flat ``{"name", "parameters"}`` form is accepted too)."""
    if not isinstance(tools, (list, tuple)):
        raise InvalidToolsError(f"tools must be a list, not {type(tools).__name__}")
    out: list[tuple[str, dict]] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidToolsError(f"tools[{i}] must be an object")
        if tool.get("type", "function") != "function":
            raise InvalidToolsError(f"tools[{i}]: type {tool.get('type')!r} is not supported (only 'function')")
        fn = tool.get("function", tool)
        if not isinstance(fn, dict):
            raise InvalidToolsError(f"tools[{i}].function must be an object")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidToolsError(f"tools[{i}]: missing or empty function name")
        if name in seen:
            raise InvalidToolsError(f"tools[{i}]: duplicate function name {name!r}")
        seen.add(name)
        params = fn.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            raise InvalidToolsError(f"tool {name!r}: parameters must be a JSON Schema object")
        out.append((name, params))
    return out


def _check_name(name: str, index: int, forbidden: Iterable[str]) -> None:
    where = f"tools[{index}] ({name!r})"
    if ":" in name:
        raise InvalidToolsError(f"{where}: a name cannot contain ':' (it ends the name in the call id)")
    for ch in name:
        cat = unicodedata.category(ch)
        if ch.isspace() or cat.startswith("C"):
            raise InvalidToolsError(f"{where}: a name cannot contain whitespace or control characters")
    for marker in forbidden:
        if marker and marker in name:
            raise InvalidToolsError(f"{where}: a name cannot contain the marker {marker!r}")


@lru_cache(maxsize=4096)
def _meta_schema_error(params_json: str) -> tuple[str, str] | None:
    """(JSON pointer, message) of the first meta-schema violation, or None. Cached: the check
    costs ~4 ms per tool and tool sets share tools."""
    try:
        jsonschema.Draft202012Validator.check_schema(json.loads(params_json))
    except jsonschema.SchemaError as exc:
        return ("/" + "/".join(str(p) for p in exc.path) if exc.path else ""), exc.message
    return None


def _arguments_schema(name: str, index: int, params: dict) -> dict:
    error = _meta_schema_error(json.dumps(params, sort_keys=True))
    if error is not None:
        pointer, message = error
        raise InvalidToolsError(f"tool {name!r}: parameters are not a valid JSON Schema at "
                                f"/tools/{index}/function/parameters{pointer}: {message}")
    declared = params.get("type")
    if declared is None:
        return {**params, "type": "object"}
    types = [declared] if isinstance(declared, str) else list(declared)
    if "object" not in types:
        raise InvalidToolsError(f"tool {name!r}: arguments must be a JSON object, but parameters declare type {declared!r}")
    return {**params, "type": "object"}


class CompiledTools:
    """Tools + format + options compiled against one vocabulary. Build with
    :func:`compile_tools`; make one :meth:`matcher` per sequence."""

    def __init__(self, tools: list[tuple[str, dict]], vocabulary: Vocabulary, fmt: FormatSpec,
                 tool_choice: str, forced_name: str | None, parallel_tool_calls: bool,
                 allow_thinking: bool, schemas: list[CompiledSchema]) -> None:
        self.vocabulary = vocabulary
        self.format = fmt
        self.tool_names = tuple(n for n, _ in tools)
        self.parameters = tuple(p for _, p in tools)
        self.tool_choice = tool_choice
        self.forced_name = forced_name
        self.parallel_tool_calls = parallel_tool_calls
        self.allow_thinking = allow_thinking
        self.schemas = tuple(schemas)
        self._name_index = {n: i for i, n in enumerate(self.tool_names)}
        tid = self._token_id
        self.stop_id = tid(fmt.stop)
        self.section_begin_id = tid(fmt.section_begin)
        self.section_end_id = tid(fmt.section_end)
        self.think_begin_id = tid(fmt.think_begin) if fmt.think_begin else None
        self.think_end_id = tid(fmt.think_end) if fmt.think_end else None
        self.assistant_id = tid(fmt.assistant_header) if fmt.assistant_header else None
        self.call_begin_id = tid(fmt.call_begin) if fmt.call_begin else None
        self.structural_ids = frozenset(tid(n) for n in fmt.structural)
        self.segment_ids = tuple(tid(s.name) if isinstance(s, Token) else -1 for s in fmt.call)
        self.header_segment = next(i for i, s in enumerate(fmt.call) if isinstance(s, CallHeader))
        self.header_template = fmt.call[self.header_segment].template
        self.index = token_index(vocabulary)
        self.words = self.index.words
        self._lock = threading.Lock()
        self._headers: dict[int, tuple[DFA, MaskTable]] = {}
        self._masks: dict[tuple, np.ndarray] = {}
        self._torch: dict[tuple, Any] = {}
        self._free_rules: dict[tuple, tuple[bool, frozenset[int]]] = {}
        self._free_base = self._build_free_base()

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.stop_id,)

    def _token_id(self, name: str) -> int:
        try:
            return self.vocabulary.token_id(name)
        except (KeyError, TokenizerError) as exc:
            raise TokenizerError(f"format {self.format.name!r} needs the token {name!r}, which this "
                                 f"tokenizer does not have ({exc})") from None

    # ---- text pieces ---------------------------------------------------------------------

    def header(self, counter: int) -> tuple[DFA, MaskTable]:
        """DFA and masks of the call header for call number ``counter`` (cached)."""
        hit = self._headers.get(counter)
        if hit is not None:
            return hit
        names = [self.forced_name] if self.forced_name is not None else list(self.tool_names)
        prefix, _, suffix = self.header_template.partition("{name}")
        node = alt(*(literal(prefix.format(index=counter) + n + suffix.format(index=counter)) for n in names))
        dfa = compile_node(node)
        entry = (dfa, MaskTable(dfa, self.index))
        with self._lock:
            self._headers.setdefault(counter, entry)
        return self._headers[counter]

    def name_from_header(self, text: str, counter: int) -> str | None:
        prefix, _, suffix = self.header_template.partition("{name}")
        prefix, suffix = prefix.format(index=counter), suffix.format(index=counter)
        if text.startswith(prefix) and text.endswith(suffix):
            name = text[len(prefix):len(text) - len(suffix)]
            return name if name in self._name_index else None
        return None

    def tool_index(self, name: str) -> int:
        return self._name_index[name]

    # ---- masks ---------------------------------------------------------------------------

    def _build_free_base(self) -> np.ndarray:
        """Free text: every text token and every special token that is not structure."""
        controlled = set(self.structural_ids) | {self.stop_id}
        for t in (self.think_begin_id, self.think_end_id):
            if t is not None:
                controlled.add(t)
        specials = [i for i in self.vocabulary.special_ids if i not in controlled and i < self.vocabulary.vocab_size]
        ids = np.concatenate([self.index.all_text_ids, np.array(specials, dtype=np.int64)])
        return pack_ids(ids, self.words)

    def _ids_mask(self, ids: Sequence[int]) -> np.ndarray:
        return pack_ids(np.array(sorted(set(ids)), dtype=np.int64), self.words)

    def cached_mask(self, key: tuple, build) -> np.ndarray:
        hit = self._masks.get(key)
        if hit is None:
            hit = build()
            hit.setflags(write=False)
            self._masks[key] = hit
        return hit

    def cached_torch(self, key: tuple, words: np.ndarray):
        hit = self._torch.get(key)
        if hit is None:
            import torch

            hit = self._torch[key] = torch.from_numpy(words.copy())
        return hit

    def free_mask(self, in_think: bool, thought: bool, at_start: bool) -> np.ndarray:
        key = ("free", in_think, thought, at_start)
        return self.cached_mask(key, lambda: self._free_mask(in_think, thought, at_start))

    def free_allowed_specials(self, in_think: bool, thought: bool, at_start: bool) -> tuple[bool, frozenset[int]]:
        """(whether text is allowed, the controlled ids allowed) outside a section (cached)."""
        key = (in_think, thought, at_start)
        hit = self._free_rules.get(key)
        if hit is None:
            hit = self._free_rules[key] = self._free_rules_for(in_think, thought, at_start)
        return hit

    def _free_rules_for(self, in_think: bool, thought: bool, at_start: bool) -> tuple[bool, frozenset[int]]:
        mode = self.tool_choice
        ids: set[int] = set()
        text = True
        if mode in ("auto", "none"):
            ids.add(self.stop_id)
        if mode != "none" and self.tool_names:  # no tools: a section could hold no valid call
            ids.add(self.section_begin_id)
        if in_think:
            if self.think_end_id is not None:
                ids.add(self.think_end_id)
        else:
            if mode in ("required", "named"):
                text = False
            if at_start and not thought and self.think_begin_id is not None and \
                    (self.allow_thinking or mode in ("auto", "none")):
                ids.add(self.think_begin_id)
        return text, frozenset(ids)

    def _free_mask(self, in_think: bool, thought: bool, at_start: bool) -> np.ndarray:
        text, ids = self.free_allowed_specials(in_think, thought, at_start)
        mask = self._ids_mask(ids)
        if text:
            if self.tool_choice in ("required", "named"):
                mask |= pack_ids(self.index.all_text_ids, self.words)  # thinking: text only
            else:
                mask |= self._free_base
        return mask

    def token_mask(self, token_ids: Sequence[int]) -> np.ndarray:
        key = ("ids", tuple(sorted(token_ids)))
        return self.cached_mask(key, lambda: self._ids_mask(token_ids))

    def text_mask(self, kind: str, which: int, table: MaskTable, state: int, accepting: bool,
                  next_id: int) -> np.ndarray:
        """A text segment's mask at ``state``, plus the segment's closing token when the text
        may end there."""
        key = (kind, which, state)
        hit = self._masks.get(key)
        if hit is None:
            words = table.mask(state)
            if accepting:
                words = words | self._ids_mask([next_id])
            words.setflags(write=False)
            hit = self._masks[key] = words
        return hit

    # ---- matchers ------------------------------------------------------------------------

    def precompute(self) -> "CompiledTools":
        """Build every argument automaton and its masks now rather than on first use."""
        for schema in self.schemas:
            if schema is not None:
                schema.precompute()
        return self

    def matcher(self, prompt_ids: Sequence[int] | None = None, first_call_index: int | None = None):
        """A fresh :class:`~enforcer.engine.ToolCallMatcher` for one generated turn.

        The call counter starts at ``first_call_index``, else (for formats that count over the
        dialog) at the number of calls already in ``prompt_ids``. A prompt that ends inside an
        open think block starts the matcher in reasoning."""
        from .engine import ToolCallMatcher

        in_think = thought = False
        counter = self.format.first_index
        if prompt_ids is not None:
            ids = list(prompt_ids)
            if self.format.counter_scope == "dialog" and self.call_begin_id is not None:
                counter = self.format.first_index + ids.count(self.call_begin_id)
            start = 0
            if self.assistant_id is not None and self.assistant_id in ids:
                start = len(ids) - 1 - ids[::-1].index(self.assistant_id)
                for t in ids[start:]:
                    if t == self.think_begin_id:
                        in_think, thought = True, False
                    elif t == self.think_end_id:
                        in_think, thought = False, True
        if first_call_index is not None:
            if first_call_index < 0:
                raise ValueError("first_call_index must be >= 0")
            counter = first_call_index
        return ToolCallMatcher(self, counter, in_think, thought)

    def __repr__(self) -> str:
        return (f"CompiledTools(format={self.format.name!r}, tools={list(self.tool_names)}, "
                f"tool_choice={self.tool_choice!r}, parallel_tool_calls={self.parallel_tool_calls})")


# ---- compile and cache ------------------------------------------------------------------------

_CACHE: "OrderedDict[tuple, CompiledTools]" = OrderedDict()
_CACHE_LOCK = threading.Lock()
CACHE_SIZE = 128


def clear_cache() -> None:
    """Forget every cached :class:`CompiledTools` and :class:`CompiledSchema`."""
    with _CACHE_LOCK:
        _CACHE.clear()
    clear_schema_cache()


def _parse_tool_choice(tool_choice: Any, names: Sequence[str]) -> tuple[str, str | None]:
    if isinstance(tool_choice, str):
        if tool_choice not in TOOL_CHOICES:
            raise InvalidToolsError(f"tool_choice must be one of {TOOL_CHOICES} or a named function, got {tool_choice!r}")
        if tool_choice == "required" and not names:
            raise InvalidToolsError("tool_choice='required' needs at least one tool")
        return tool_choice, None
    if isinstance(tool_choice, dict):
        fn = tool_choice.get("function", tool_choice)
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str):
            raise InvalidToolsError(f"a named tool_choice needs function.name, got {tool_choice!r}")
        if name not in names:
            raise InvalidToolsError(f"tool_choice names {name!r}, which is not a declared tool")
        return "named", name
    raise InvalidToolsError(f"tool_choice must be a string or an object, got {type(tool_choice).__name__}")


def compile_tools(tools: Any, vocabulary: Vocabulary, *, format: str | FormatSpec = "kimi_k2",
                  tool_choice: Any = "auto", parallel_tool_calls: bool = True,
                  allow_thinking: bool = True, **schema_opts: Any) -> CompiledTools:
    """Compile an OpenAI ``tools`` list for ``vocabulary`` in ``format``.

    ``tool_choice``: ``"auto"`` (dormant until the model opens the section), ``"required"``
    (the section is forced, after any reasoning), ``"none"`` (the section is banned), or
    ``{"type": "function", "function": {"name": N}}`` (the section and that name are forced).
    ``parallel_tool_calls=False`` allows one call per section. ``allow_thinking=False`` bans
    opening a think block when a call is forced. Other keyword arguments are JSON-schema
    options (see :class:`~enforcer.json_schema.SchemaOptions`).
    """
    fmt = get_format(format)
    opts = schema_options(schema_opts)
    normalized = normalize_tools(tools)
    names = [n for n, _ in normalized]
    mode, forced = _parse_tool_choice(tool_choice, names)
    key = (json.dumps(normalized, sort_keys=False, ensure_ascii=False), fmt, mode, forced,
           bool(parallel_tool_calls), bool(allow_thinking), opts, vocabulary.fingerprint)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    markers = set(vocabulary.special_tokens) | set(fmt.structural) | {fmt.stop}
    schemas = []
    for i, (name, params) in enumerate(normalized):
        _check_name(name, i, markers)
        args = _arguments_schema(name, i, params)
        if mode == "named" and name != forced:
            schemas.append(None)
            continue
        try:
            schemas.append(compile_json_schema(args, vocabulary, **schema_opts))
        except UnsupportedSchemaError as exc:
            raise UnsupportedSchemaError(exc.keyword, f"/tools/{i}/function/parameters{exc.pointer}",
                                         f"in tool {name!r}" + (f": {exc.reason}" if exc.reason else "")) from None
    if not any(isinstance(s, JsonArguments) for s in fmt.call):
        raise InvalidToolsError(f"format {fmt.name!r} has no argument segment")
    compiled = CompiledTools(normalized, vocabulary, fmt, mode, forced, bool(parallel_tool_calls),
                             bool(allow_thinking), schemas)
    with _CACHE_LOCK:
        _CACHE[key] = compiled
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return compiled

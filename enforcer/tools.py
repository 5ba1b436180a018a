"""``compile_tools``: an OpenAI ``tools`` list + a format + a vocabulary -> :class:`CompiledTools`.

Declarations are checked before any decoding (names, duplicates, JSON Schema validity,
unsupported keywords with their pointer). The argument automata come from
:func:`~enforcer.matcher.compile_json_schema`'s cache (:func:`~enforcer.matcher.compiled_schema`), so tool sets that share a tool share its
masks. A :class:`CompiledTools` is immutable from the outside, thread-safe, and cached by a
canonical key in a bounded LRU; the masks it fills lazily are shared by every matcher.
"""

from __future__ import annotations

import sys
import threading
import unicodedata
from functools import lru_cache
from typing import Any, Iterable, Sequence

import numpy as np

from .arguments import VALUE_TYPES, SplitArguments, split_arguments
from .arguments import clear_cache as clear_arguments_cache
from .automaton import DFA, LazyDFA, Node, alt, codepoints, compile_node, literal, optional, repeat, seq
from .engine import Argument, Frame, ToolCallMatcher
from .errors import InvalidSchemaError, InvalidToolsError, TokenizerError, UnsupportedSchemaError
from .formats import (ArgumentTag, ArgumentValue, CallHeader, CallTag, FormatSpec, FreeText, JsonArguments, NamedJson,
                      Separator, Word, get_format)
from .lru import COMPILED, LRU
from .masks import MAX_FEW_IDS, MaskTable, token_index
from .matcher import CompiledSchema, canonical_json, compiled_schema, schema_node, schema_options
from .unique_items import UniqueItemsPlan
from .matcher import clear_cache as clear_schema_cache
from .json_schema import SchemaOptions
from .schema_check import check_document, check_schema
from .text_rules import ChoiceRule, DfaRule, FreeRule, TokenTrie, TrieWithFreeText
from .vocabulary import Vocabulary

TOOL_CHOICES = ("auto", "none", "required")
_UNSEEN = object()


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


def _markers_by_first_character(markers: Iterable[str]) -> dict[str, list[str]]:
    """The non-empty ``markers`` grouped by their first character (a name is searched only for
    those starting with one of its characters)."""
    grouped: dict[str, list[str]] = {}
    for marker in sorted(m for m in markers if m):
        grouped.setdefault(marker[0], []).append(marker)
    return grouped


def _check_name(name: str, index: int, forbidden: dict[str, list[str]], colon: bool) -> None:
    """Refuse a tool name that holds ``:`` (where it ends the name in a call id), whitespace or
    control characters, or one of the ``forbidden`` markers (see
    :func:`_markers_by_first_character`)."""
    where = f"tools[{index}] ({name!r})"
    if colon and ":" in name:
        raise InvalidToolsError(f"{where}: a name cannot contain ':' (it ends the name in the call id)")
    # printable ASCII holds no control character and no whitespace but the space: most names
    # need no look at each character's category
    if not (name.isascii() and name.isprintable() and " " not in name):
        for ch in name:
            if ch.isspace() or unicodedata.category(ch).startswith("C"):
                raise InvalidToolsError(f"{where}: a name cannot contain whitespace or control characters")
    for first in sorted(forbidden.keys() & set(name)):
        for marker in forbidden[first]:
            if marker in name:
                raise InvalidToolsError(f"{where}: a name cannot contain the marker {marker!r}")


def _arguments_schema(name: str, index: int, params: dict) -> dict:
    try:
        check_schema(params, document_checked=True)  # compile_tools checked every tool's document
    except InvalidSchemaError as exc:
        raise InvalidToolsError(f"tool {name!r}: parameters are not a valid JSON Schema at "
                                f"/tools/{index}/function/parameters{exc.pointer}: {exc.reason}") from None
    declared = params.get("type")
    if declared is None:
        return {**params, "type": "object"}
    types = [declared] if isinstance(declared, str) else list(declared)
    if "object" not in types:
        raise InvalidToolsError(f"tool {name!r}: arguments must be a JSON object, but parameters declare type {declared!r}")
    return {**params, "type": "object"}


@lru_cache(maxsize=64)
def _optional_text_dfa(text: str) -> DFA:
    """The DFA of exactly ``text`` or nothing: a format's fixed separator (Qwen3's call
    separator), built once per process (about 0.2 ms, mostly the automaton pipeline's fixed
    cost) and kept across :func:`clear_cache`, like the format automata of :mod:`enforcer.regex`."""
    return compile_node(optional(literal(text)))


class CompiledTools:
    """Tools + format + options compiled against one vocabulary. Build with
    :func:`compile_tools`; make one :meth:`matcher` per sequence. Text rules and masks are
    built on first use and shared by every matcher (thread-safe)."""

    def __init__(self, tools: list[tuple[str, dict]], vocabulary: Vocabulary, fmt: FormatSpec,
                 tool_choice: str, forced_name: str | None, parallel_tool_calls: bool,
                 allow_thinking: bool, schemas: list[CompiledSchema | None],
                 arguments: list[SplitArguments | None], nodes: list[Node | None],
                 schema_opts: SchemaOptions) -> None:
        self.vocabulary = vocabulary
        self.vocab_size = vocabulary.vocab_size
        self.format = fmt
        self.tool_names = tuple(n for n, _ in tools)
        self.parameters = tuple(p for _, p in tools)
        self.tool_choice = tool_choice
        self.forced_name = forced_name
        self.parallel_tool_calls = parallel_tool_calls
        self.allow_thinking = allow_thinking
        self.schemas = tuple(schemas)
        self.remembers_items = any(s is not None and s.unique_plan is not None for s in self.schemas)
        """Some tool's JSON arguments keep an item memory (:meth:`unique_plan`)."""
        self.arguments = tuple(arguments)
        self.nodes = tuple(nodes)
        """Per tool, its arguments' expression, for formats that combine it with the call text
        (:class:`~enforcer.formats.NamedJson`; built once, at compile time)."""
        self._schema_opts = schema_opts
        self._name_index = {n: i for i, n in enumerate(self.tool_names)}
        self.stop_id = self._token_id(fmt.stop)
        self.controlled_ids = frozenset(self._token_id(n) for n in fmt.controlled) | {self.stop_id}
        self.call_begin_id = self._token_id(fmt.call_begin) if fmt.call_begin else None
        self.index = token_index(vocabulary)
        self.words = self.index.words
        self._lock = threading.Lock()
        # the graph, by place index
        self.places = fmt.places
        self.place_index = {p.name: i for i, p in enumerate(fmt.places)}
        self.kinds = tuple(_kind(p.text) for p in fmt.places)
        self.after_text = tuple(self.place_index[p.after_text] if p.after_text else -1 for p in fmt.places)
        self.ends_call = tuple(p.ends_call for p in fmt.places)
        self.in_section = tuple(p.in_section for p in fmt.places)
        self.done = next((i for i, p in enumerate(fmt.places) if not p.edges and p.text is None), -1)
        self._argument_tag = next((p.text for p in fmt.places if isinstance(p.text, ArgumentTag)), None)
        self._named_json = next((p.text for p in fmt.places if isinstance(p.text, NamedJson)), None)
        self._dynamic_exits = tuple(any(e.guard in ("more_arguments", "arguments_complete") for e in p.edges)
                                    for p in fmt.places)
        self._exits: dict[tuple, dict[int, int]] = {}
        self._rules: dict[tuple, Any] = {}
        self._masks: dict[tuple, np.ndarray] = {}
        self._exit_masks: dict[tuple, np.ndarray | None] = {}
        self._few: dict[tuple, tuple[int, ...] | None] = {}
        self._allowed: dict[tuple, tuple[int, ...] | np.ndarray] = {}
        self._value_index: dict[tuple[int, Argument], CompiledSchema] = {}
        for place, text in enumerate(p.text for p in fmt.places):
            if isinstance(text, Word):  # tag words need the tokenizer's encoder: fail at compile
                self.enter(place, fmt.first_index, None, 0, None, 0)
        for i, split in enumerate(self.arguments):
            if split is None:
                continue
            for j, key in enumerate((*split.keys, split.extra) if split.extra else split.keys):
                for json_type, compiled in zip(key.types, key.values):
                    self._value_index[(i, Argument(j, VALUE_TYPES.index(json_type)))] = compiled
        # made here, not when decoding reaches it: the budget check may refuse it
        self._named_rule = self._call_text_rule(self._named_json, 0) if self._named_json else None
        if self._named_rule is not None and self._guard("may_call", None, 0):
            self._named_rule.dfa.build_nfa()  # built now, while warm, not cold at the first call mid-stream
        self._prepare_turn(self.place_index[fmt.start], fmt.first_index)

    def _prepare_turn(self, place: int, counter: int) -> None:
        """Make the first masks of a turn that starts at ``place`` with call ``counter`` (cached:
        dictionary lookups once made): its first fill's and its first call header's, with the
        header's text trie. A decode would otherwise make them on the caches it left cold: the
        first fill (about 30 us of it), the accept of a call's begin token and the header's first
        fill (about 50 us each) were three of a Kimi K2 pass's slowest tokens."""
        places = [place]
        if self._guard("may_call", None, 0):
            places += [p for p, kind in enumerate(self.kinds) if kind == "header"]
        for p in places:
            frame = self.enter(p, counter, None, 0, None, 0)
            if self.few_ids(frame, 0) is None:  # as a fill asks: few ids, else the packed mask
                self.mask(frame, 0)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.stop_id,)

    def _token_id(self, name: str) -> int:
        try:
            return self.vocabulary.token_id(name)
        except (KeyError, TokenizerError) as exc:
            raise TokenizerError(f"format {self.format.name!r} needs the token {name!r}, which this "
                                 f"tokenizer does not have ({exc})") from None

    # ---- the graph -------------------------------------------------------------------------

    def enter(self, place: int, counter: int, tool: int | None, written: int, value: Argument | None,
              start: int) -> Frame:
        """The matcher's frame on entering ``place`` (its text at its start: text state 0), with
        the place's text rule and exits resolved once (a text token reuses them)."""
        rule_key = self._rule_key(place, counter, tool, written, value)
        rule = None if rule_key is None else self._rule(rule_key, place, counter, tool, written, value)
        dynamic = (tool, written) if self._dynamic_exits[place] else None
        return Frame(place, counter, tool, written, value, start, rule, self.exits(place, tool, written),
                     self.after_text[place], (place, rule_key, dynamic))

    def _guard(self, guard: str, tool: int | None, written: int) -> bool:
        if not guard:
            return True
        if guard == "may_call":
            return self.tool_choice != "none" and bool(self.tool_names)
        if guard == "may_end":
            return self.tool_choice in ("auto", "none")
        if guard == "parallel":
            return self.parallel_tool_calls
        if guard == "may_think":
            return self.allow_thinking or self.tool_choice in ("auto", "none")
        split = self.arguments[tool]
        if guard == "more_arguments":
            return bool(self._argument_options(tool, written)) or split.extra_allowed(written, self.format.any_order)
        return split.complete(written)  # arguments_complete

    def exits(self, place: int, tool: int | None, written: int) -> dict[int, int]:
        """Control token id -> the place it leads to (-1: where the written word says), for the
        edges of ``place`` whose guard holds (cached)."""
        key = (place, tool, written) if self._dynamic_exits[place] else (place,)
        hit = self._exits.get(key)
        if hit is None:
            hit = {}
            for edge in self.places[place].edges:
                if self._guard(edge.guard, tool, written):
                    hit.setdefault(self._token_id(edge.token), self.place_index[edge.to] if edge.to else -1)
            self._exits[key] = hit
        return hit

    def _rule_key(self, place: int, counter: int, tool: int | None, written: int,
                  value: Argument | None) -> tuple | None:
        kind = self.kinds[place]
        if kind is None:
            return None
        if kind in ("free", "word", "separator"):
            return (place,)
        if kind == "named":
            return (kind,)
        if kind == "tag" or (kind == "header" and "{index}" in self.places[place].text.template):
            return (kind, counter)
        if kind == "header":  # a header without the counter (DeepSeek-V3.1's bare name): one rule
            return (kind,)
        if kind == "json":
            return (kind, tool)
        if kind == "argtag":
            return (kind, tool, written)
        return (kind, tool, value)

    def _rule(self, key: tuple, place: int, counter: int, tool: int | None, written: int,
              value: Argument | None) -> Any:
        """The text rule of ``place`` for that call, counter and argument (cached by ``key``)."""
        hit = self._rules.get(key)
        if hit is None:
            hit = self._build_rule(place, counter, tool, written, value)
            with self._lock:
                hit = self._rules.setdefault(key, hit)
        return hit

    def _build_rule(self, place: int, counter: int, tool: int | None, written: int,
                    value: Argument | None) -> Any:
        text = self.places[place].text
        kind = self.kinds[place]
        byte_tokens = self.vocabulary.byte_tokens
        if kind == "free":
            if text.forced_lead and self._forced and text.when_forced == "none":
                return self._separator_rule(text.forced_lead)
            return FreeRule(self._free_words(text))
        if kind == "word":
            options = [(self._encode_tag(word, attrs), self.place_index[to])
                       for word, attrs, to, guard in text.options if self._guard(guard, None, 0)]
            return TokenTrie(options, self.index)
        if kind == "header":  # the accepting state names the tool: the header is read once
            return self._call_text_rule(text, counter)
        if kind == "separator":
            return self._separator_rule(text.text)
        if kind == "named":
            return self._named_rule
        if kind == "tag":
            return TokenTrie([(self._encode_tag(text.word, ((text.name_attribute, name),
                                                            (text.index_attribute, str(counter)))),
                               self._name_index[name]) for name in self._callable_names()], self.index)
        if kind == "json":
            schema = self.schemas[tool]
            return DfaRule(schema.dfa, schema.masks, byte_tokens)
        if kind == "argtag":
            split = self.arguments[tool]
            keys = split.keys
            trie = TokenTrie([(self._encode_tag(text.word, ((text.key_attribute, keys[j].name),
                                                            (text.type_attribute, json_type))),
                               (j, VALUE_TYPES.index(json_type)))
                              for j in self._argument_options(tool, written) for json_type in keys[j].types],
                             self.index)
            if not split.extra_allowed(written, self.format.any_order):
                return trie
            prefix, endings = self._free_key_pieces(text, split)
            return TrieWithFreeText(trie, trie.path(prefix), self._free_key_rule(tool, text), endings)
        compiled = self._value_index[(tool, value)]
        return DfaRule(compiled.dfa, compiled.masks, byte_tokens)

    def _separator_rule(self, text: str) -> DfaRule:
        """Exactly ``text``, or nothing."""
        dfa = _optional_text_dfa(text)
        return DfaRule(dfa, MaskTable(dfa, self.index), self.vocabulary.byte_tokens)

    @property
    def _forced(self) -> bool:
        """A call must come (``tool_choice`` required or named)."""
        return self.tool_choice in ("required", "named")

    def _key_tag_pieces(self, text: ArgumentTag, json_type: str) -> tuple[list[str], list[str]]:
        """An argument tag's pieces before and after its key value, for values of ``json_type``."""
        pieces = self.format.tag_pieces(text.word, [(text.key_attribute, _PLACEHOLDER),
                                                   (text.type_attribute, json_type)])
        at = pieces.index(_PLACEHOLDER)
        return pieces[:at], pieces[at + 1:]

    def _free_key_pieces(self, text: ArgumentTag, split: SplitArguments) -> tuple[list[int], TokenTrie]:
        """The tokens before an undeclared key's text, and its possible endings (one per type
        of ``additionalProperties``)."""
        endings = []
        prefix: list[int] = []
        for json_type in split.extra.types:
            before, after = self._key_tag_pieces(text, json_type)
            prefix = self._encode_pieces(before)
            endings.append((self._encode_pieces(after), (len(split.keys), VALUE_TYPES.index(json_type))))
        return prefix, TokenTrie(endings, self.index)

    def _free_key_rule(self, tool: int, text: ArgumentTag) -> DfaRule:
        """The escaped text of an undeclared key of ``tool``: one character or more, never a
        declared name (cached per tool)."""
        key = ("free_key", tool)
        hit = self._rules.get(key)
        if hit is None:
            escaped = {char for char, _ in text.escapes}
            plain = codepoints([(lo, hi) for lo, hi in _without([(0, 0xD7FF), (0xE000, 0x10FFFF)], escaped)])
            char = alt(plain, *(literal(escape) for _, escape in text.escapes))
            dfa = compile_node(repeat(char, 1, None))
            declared = [_escape_text(name, text.escapes) for name in self.arguments[tool].declared]
            if declared:
                dfa = dfa.difference(compile_node(alt(*(literal(n) for n in declared))))
            hit = self._rules.setdefault(key, DfaRule(dfa, MaskTable(dfa, self.index), self.vocabulary.byte_tokens))
        return hit

    def extra_key_name(self, tag_text: str, type_index: int) -> str:
        """The undeclared key a complete argument tag names (unescaped)."""
        text = self._argument_tag
        before, after = (len("".join(p)) for p in self._key_tag_pieces(text, VALUE_TYPES[type_index]))
        value = tag_text[before:len(tag_text) - after]
        for char, escape in reversed(text.escapes):
            value = value.replace(escape, char)
        return value

    def _callable_names(self) -> list[str]:
        return [self.forced_name] if self.forced_name is not None else list(self.tool_names)

    def _argument_options(self, tool: int, written: int) -> list[int]:
        return self.arguments[tool].next_keys(written, self.format.any_order)

    def _encode_tag(self, word: str, attributes: Sequence[tuple[str, str]]) -> list[int]:
        """Tag text in the format's tokenization: each piece encoded on its own."""
        return self._encode_pieces(self.format.tag_pieces(word, list(attributes)))

    def _encode_pieces(self, pieces: Sequence[str]) -> list[int]:
        """``pieces`` each encoded on its own, concatenated (each piece encoded once per
        vocabulary: :meth:`~enforcer.vocabulary.Vocabulary.encode_piece`)."""
        ids: list[int] = []
        for piece in pieces:
            ids += self.vocabulary.encode_piece(piece)
        return ids

    def _call_text_rule(self, text: CallHeader | NamedJson, counter: int) -> ChoiceRule:
        """The text that names a call, one option per callable tool, as one automaton whose
        accepting state knows the tool: a header (``text.template`` with the name and
        ``counter``; a text trie, built whole at once), or a whole call text (the prefix with
        the name, that tool's arguments' expression, the suffix; built lazily, state by state,
        within the schema options' budget)."""
        options = []
        for name in self._callable_names():
            tool = self._name_index[name]
            if isinstance(text, CallHeader):
                options.append((text.template.format(name=name, index=counter).encode("utf-8"), tool))
            else:
                options.append((seq(literal(text.head(name)), self.nodes[tool], literal(text.suffix)), tool))
        opts = self._schema_opts
        return ChoiceRule(options, self.index, self.vocabulary.byte_tokens, opts.max_states, opts.max_automaton_bytes)

    def named_json_arguments(self, text: str, tool: int) -> str:
        """The arguments of a complete :class:`~enforcer.formats.NamedJson` text of ``tool``."""
        named = self._named_json
        return text[len(named.head(self.tool_names[tool])):len(text) - len(named.suffix)]

    # ---- masks ---------------------------------------------------------------------------

    def _free_words(self, text: FreeText) -> np.ndarray:
        """Free text: every text token and every special token the format does not control
        (:meth:`~enforcer.masks.TokenIndex.free_text_words`); when a call is forced, text tokens
        only (``when_forced="text"``) or nothing."""
        if self._forced:
            if text.when_forced == "none":
                return np.zeros(self.words, dtype=np.int32)
            return self.index.text_words
        return self.index.free_text_words(self.controlled_ids)

    def unique_plan(self, frame: Frame) -> UniqueItemsPlan | None:
        """Where the JSON arguments written at ``frame`` keep an item memory (None: they do
        not, or ``frame`` is not in JSON arguments)."""
        if frame.tool is None or self.kinds[frame.place] != "json":
            return None
        schema = self.schemas[frame.tool]
        return schema.unique_plan if schema is not None else None

    def few_ids(self, frame: Frame, tstate: int, compute: bool = True) -> tuple[int, ...] | None:
        """The ids allowed at ``frame`` and text state ``tstate`` when they are few (at most
        :data:`~enforcer.masks.MAX_FEW_IDS`; the same set as :meth:`mask`), else None: no text
        (the exits), a token trie's node (its next tokens, and the exits where it may end), text
        under an automaton whose walk found few (:meth:`~enforcer.masks.MaskTable.few_ids`, and
        the exits where it may end; with ``compute`` False only one walked before). Cached per
        (frame, text state), an automaton's by its mask table."""
        rule = frame.rule
        if isinstance(rule, DfaRule):
            ids = rule.table.few_ids(tstate, compute)
            if ids is not None and frame.exits and rule.accepting(tstate):
                ids += tuple(frame.exits)
            return ids
        key = (frame.mask_key, tstate)
        hit = self._few.get(key, _UNSEEN)
        if hit is _UNSEEN:
            if rule is None:
                hit = tuple(frame.exits)
            elif type(rule) is TokenTrie:
                hit = rule.next_ids(tstate)
                if frame.exits and rule.accepting(tstate):
                    hit += tuple(frame.exits)
            else:
                hit = None
            if hit is not None and len(hit) > MAX_FEW_IDS:
                hit = None
            self._few[key] = hit
        return hit

    def allowed(self, frame: Frame, tstate: int) -> tuple[int, ...] | np.ndarray:
        """What a fill writes at ``frame`` and text state ``tstate``: the few ids
        (:meth:`few_ids`, a tuple), else the packed mask (:meth:`mask`, an array). Cached per
        (frame, text state): one lookup per token once seen, where asking for the ids and then
        the mask costs two calls and a tuple each; a tag's piece where the place cannot end is
        the token trie node's own (:meth:`TokenTrie.allowed`, no key to hash)."""
        rule = frame.rule
        if type(rule) is TokenTrie and not (frame.exits and rule.accepting(tstate)):
            return rule.allowed(tstate)
        key = (frame.mask_key, tstate)
        hit = self._allowed.get(key)
        if hit is None:
            hit = self.few_ids(frame, tstate)
            if hit is None:
                hit = self.mask(frame, tstate)
            self._allowed[key] = hit
        return hit

    def cached_mask(self, frame: Frame, tstate: int) -> np.ndarray | None:
        """The mask at ``frame`` and text state ``tstate`` if it was computed already (no work)."""
        return self._masks.get((frame.mask_key, tstate))

    def mask(self, frame: Frame, tstate: int) -> np.ndarray:
        """Packed allowed-token words at ``frame`` and text state ``tstate``; cached per
        (frame, text state)."""
        key = (frame.mask_key, tstate)
        hit = self._masks.get(key)
        if hit is None:
            exits = self._exit_words(frame)
            rule = frame.rule
            if rule is None:
                hit = exits if exits is not None else np.zeros(self.words, dtype=np.int32)
            else:
                hit = rule.mask(tstate)
                if exits is not None and rule.accepting(tstate):
                    hit = hit | exits
                elif hit.flags.writeable:
                    hit = hit.copy()  # the rule's own array; a read-only (cached) mask is shared
            hit.setflags(write=False)
            self._masks[key] = hit
        return hit

    def _exit_words(self, frame: Frame) -> np.ndarray | None:
        """Packed mask of the control tokens that leave ``frame`` (read-only; None: no exit),
        made once per frame key."""
        key = frame.mask_key
        if key in self._exit_masks:
            return self._exit_masks[key]
        hit = self.index.ids_mask(frame.exits) if frame.exits else None
        self._exit_masks[key] = hit
        return hit

    def memory_size_bytes(self) -> int:
        """Bytes held: the masks of its states, its text rules (automata, tries, masks) and the
        argument automata it uses (each counted once). Grows as new states are reached."""
        own = sum(m.nbytes for m in self._masks.values()) \
            + sum(m.nbytes for m in self._exit_masks.values() if m is not None) \
            + sum(sys.getsizeof(ids) for ids in {id(ids): ids for ids in (*self._few.values(), *self._allowed.values())
                                                  if type(ids) is tuple}.values())
        seen: set[int] = set()
        parts = [r for r in self._rules.values()] + [s for s in self.schemas if s is not None] \
            + list(self._value_index.values())
        for part in parts:
            target = part.table if isinstance(part, DfaRule) else part.masks if isinstance(part, CompiledSchema) else part
            if id(target) in seen:
                continue
            seen.add(id(target))
            own += part.memory_size_bytes()
        return own

    # ---- matchers ------------------------------------------------------------------------

    def precompute(self) -> "CompiledTools":
        """Build every argument automaton and its masks now rather than on first use (see
        :meth:`~enforcer.matcher.CompiledSchema.precompute`)."""
        for schema in self.schemas:
            if schema is not None:
                schema.precompute()
        for compiled in self._value_index.values():
            compiled.precompute()
        return self

    def matcher(self, prompt_ids: Sequence[int] | None = None, first_call_index: int | None = None):
        """A fresh :class:`~enforcer.engine.ToolCallMatcher` for one generated turn.

        The call counter starts at ``first_call_index``, else (for formats that count over the
        dialog) after the calls already in ``prompt_ids``. The turn starts where the prompt left
        it (inside an open think block, for example), as the format reads it."""
        fmt = self.format
        counter = fmt.first_index
        place = fmt.start
        if prompt_ids is not None:
            ids = list(prompt_ids)
            if fmt.counter_scope == "dialog" and self.call_begin_id is not None:
                counter = fmt.first_index + ids.count(self.call_begin_id)
            if fmt.resume is not None:
                place = fmt.resume(ids, self.vocabulary) or place
        if first_call_index is not None:
            if first_call_index < 0:
                raise ValueError("first_call_index must be >= 0")
            counter = first_call_index
        if (place, counter) != (fmt.start, fmt.first_index):
            self._prepare_turn(self.place_index[place], counter)
        return ToolCallMatcher(self, self.place_index[place], counter)

    def __repr__(self) -> str:
        return (f"CompiledTools(format={self.format.name!r}, tools={list(self.tool_names)}, "
                f"tool_choice={self.tool_choice!r}, parallel_tool_calls={self.parallel_tool_calls})")


_PLACEHOLDER = "\x00"
"""Stands for an undeclared key while tag pieces are split around it (never escaped)."""


def _escape_text(value: str, escapes: Sequence[tuple[str, str]]) -> str:
    for char, escape in escapes:
        value = value.replace(char, escape)
    return value


def _without(ranges: list[tuple[int, int]], chars: set[str]) -> list[tuple[int, int]]:
    """``ranges`` minus the code points of ``chars``."""
    out = []
    cut = sorted(ord(c) for c in chars)
    for lo, hi in ranges:
        for code in cut:
            if lo <= code <= hi:
                if lo < code:
                    out.append((lo, code - 1))
                lo = code + 1
        if lo <= hi:
            out.append((lo, hi))
    return out


def _kind(text: Any) -> str | None:
    """The engine's name for a kind of place text."""
    if text is None:
        return None
    return {FreeText: "free", Word: "word", CallHeader: "header", CallTag: "tag", JsonArguments: "json",
            NamedJson: "named", Separator: "separator", ArgumentTag: "argtag", ArgumentValue: "value"}[type(text)]


# ---- compile and cache ------------------------------------------------------------------------

_CACHE: LRU[CompiledTools] = LRU(128, COMPILED, lambda tools: tools.memory_size_bytes())
_MARKERS: LRU[dict[str, list[str]]] = LRU(16)
"""Per vocabulary and format, the markers no tool name may hold, grouped once: DeepSeek-V3's
818 special tokens took ~230 us to group, a tenth of a tool set's compile."""


def clear_cache() -> None:
    """Forget every cached :class:`CompiledTools` and :class:`CompiledSchema` (the automata of
    formats' fixed texts and of JSON ``format`` values stay: they depend on no request)."""
    _CACHE.clear()
    clear_schema_cache()
    clear_arguments_cache()


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
    for i, (name, params) in enumerate(normalized):
        try:
            check_document({"name": name, "parameters": params})
        except InvalidSchemaError as exc:
            raise InvalidToolsError(f"tools[{i}] at /tools/{i}/function{exc.pointer}: {exc.reason}") from None
    names = [n for n, _ in normalized]
    mode, forced = _parse_tool_choice(tool_choice, names)
    texts = [canonical_json(params) for _, params in normalized]  # written once: the key's and each schema's
    key = (tuple(zip(names, texts)), fmt, mode, forced, bool(parallel_tool_calls), bool(allow_thinking), opts,
           vocabulary.fingerprint)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    markers_key = (vocabulary.fingerprint, fmt.controlled, fmt.stop)
    markers = _MARKERS.get(markers_key)
    if markers is None:
        markers = _MARKERS.put(markers_key, _markers_by_first_character(
            set(vocabulary.special_tokens) | set(fmt.controlled) | {fmt.stop}))
    kinds = {type(p.text) for p in fmt.places}
    schemas: list[CompiledSchema | None] = []
    arguments: list[SplitArguments | None] = []
    nodes: list[Node | None] = []
    for i, (name, params) in enumerate(normalized):
        _check_name(name, i, markers, colon=CallHeader in kinds)
        args = _arguments_schema(name, i, params)
        args_json = texts[i] if params.get("type") == "object" else None  # else a type was added or changed
        if mode == "named" and name != forced:
            schemas.append(None)
            arguments.append(None)
            nodes.append(None)
            continue
        where = f"/tools/{i}/function/parameters"
        try:
            schema = compiled_schema(args, vocabulary, opts, checked=True, schema_json=args_json) \
                if JsonArguments in kinds else None
            if schema is not None and isinstance(schema.dfa, LazyDFA):
                # now, while its expression is warm, not cold at the call's first mask, mid-stream
                schema.dfa.build_nfa()
            schemas.append(schema)
            node = schema_node(args, opts, checked=True) if NamedJson in kinds else None
            if node is not None and node.empty:
                raise InvalidSchemaError("", "no JSON value satisfies this schema")
            nodes.append(node)
            arguments.append(split_arguments(args, vocabulary, opts) if ArgumentValue in kinds else None)
        except UnsupportedSchemaError as exc:  # SchemaTooComplexError too: relocated keeps the class
            raise exc.relocated(where, f"in tool {name!r}") from None
        except InvalidSchemaError as exc:
            raise InvalidSchemaError(f"{where}{exc.pointer}", f"in tool {name!r}: {exc.reason}") from None
    compiled = CompiledTools(normalized, vocabulary, fmt, mode, forced, bool(parallel_tool_calls),
                             bool(allow_thinking), schemas, arguments, nodes, opts)
    return _CACHE.put(key, compiled)

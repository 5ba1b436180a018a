"""Peer constrained-decoding libraries (and ours) behind one matcher interface.

Every adapter is built from one :class:`Setup` (one tokenizer, one logits width, one stop id), so
all libraries judge the same token ids against masks of the same width. An adapter offers::

    compile(schema) -> compiled          # JSON-schema mode (plain JSON arguments)
    compile_k2(tools) -> compiled        # Kimi K2 tool-call section (raises Unsupported if it cannot)
    compile_k3(tools) -> compiled        # Kimi K3 turn from inside the response body (idem; K3 Setup)
    matcher(compiled) -> matcher         # a fresh per-sequence cursor over ``compiled``
    clear_cache()                        # forget compiled grammars, so the next compile is cold

and each matcher offers ``fill_bitmask(bitmask, index=0)`` (packed int32 rows, bit ``i % 32`` of
word ``i // 32`` set when id ``i`` is allowed) and ``accept_token(id) -> bool``.

Options are chosen so that the strictness is comparable; :attr:`Adapter.options` records them and
the README explains each. Cost: building the adapters costs what each library's tokenizer set-up
costs (about a second to a few seconds each; ``Setup.build_seconds`` records it); an adapter is
reused for the whole run.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from enforcer.formats import kimi_k2 as k2
from enforcer.formats import kimi_k3 as k3

__all__ = [
    "Unsupported",
    "Setup",
    "Adapter",
    "Ours",
    "XGrammar",
    "LLGuidance",
    "OutlinesCore",
    "LMFormatEnforcer",
    "ADAPTERS",
    "build_adapters",
    "close_objects",
    "library_versions",
]

WHITESPACE_BOUND = 12
"""Longest whitespace run a peer may write between JSON tokens, where the peer can bound it."""


class Unsupported(Exception):
    """The library cannot express this workload (e.g. no special-token trigger)."""


@dataclass
class Setup:
    """What every adapter shares: the tokenizer, the logits width, the stop id, the exact bytes."""

    tokenizer: Any
    vocab_size: int
    stop_id: int
    token_bytes: Sequence[bytes | None]
    """Exact bytes of each id (None for special/added ids), from ``enforcer.Vocabulary``."""
    marker_ids: dict[str, int]
    """K2 marker name -> id, read from the tokenizer (K3: the four control tokens)."""
    k3_prompt_ids: tuple[int, ...] = ()
    """K3 only: the generation prompt the turn continues, ending with ``<|open|>response<|sep|>``."""

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, vocabulary: Any) -> "Setup":
        """Read the stop id and the marker ids by name; never hard-coded."""
        names = (*k2.TOOL_TOKENS, k2.IM_END, k2.THINK_BEGIN, k2.THINK_END)
        markers = {name: vocabulary.token_id(name) for name in names}
        return cls(
            tokenizer=tokenizer,
            vocab_size=vocabulary.vocab_size,
            stop_id=markers[k2.IM_END],
            token_bytes=vocabulary.byte_tokens,
            marker_ids=markers,
        )

    @classmethod
    def for_kimi_k3(cls, tokenizer: Any, vocabulary: Any) -> "Setup":
        """A Setup for a K3-shaped tokenizer: the control ids by name, ``<|end_of_msg|>`` as the
        stop id, and the generation prompt ``<|open|>message role="assistant"<|sep|><|open|>response<|sep|>``
        (tag text piece by piece, as the format tokenizes it)."""
        markers = {name: vocabulary.token_id(name) for name in k3.CONTROL_TOKENS}

        def tag(word: str, attributes: Sequence[tuple[str, str]] = ()) -> list[int]:
            text = [t for piece in k3.tag_pieces(word, attributes) for t in vocabulary.encode_text(piece)]
            return [markers[k3.OPEN], *text, markers[k3.SEP]]

        prompt = tag(k3.MESSAGE, [("role", "assistant")]) + tag(k3.RESPONSE)
        return cls(
            tokenizer=tokenizer,
            vocab_size=vocabulary.vocab_size,
            stop_id=markers[k3.END_OF_MSG],
            token_bytes=vocabulary.byte_tokens,
            marker_ids=markers,
            k3_prompt_ids=tuple(prompt),
        )


class Adapter:
    """Base of the adapters: a name and the options in force."""

    name: str = ""
    options: dict[str, Any] = {}
    build_seconds: float = 0.0
    caches_compiles: bool = False
    """Whether compiling the same input again returns a cached result."""

    def compile(self, schema: dict[str, Any]) -> Any:
        raise NotImplementedError

    def compile_k2(self, tools: list[dict[str, Any]]) -> Any:
        raise Unsupported(f"{self.name} cannot express the Kimi K2 tool-call section")

    k3_options: dict[str, Any] = {}
    """The options of :meth:`compile_k3`, for the results file."""

    def compile_k3(self, tools: list[dict[str, Any]]) -> Any:
        raise Unsupported(f"{self.name} cannot express the Kimi K3 turn (no control-token delimiters)")

    def matcher(self, compiled: Any) -> Any:
        raise NotImplementedError

    def clear_cache(self) -> None:
        """Forget compiled grammars (no-op for libraries without a cache)."""


# --------------------------------------------------------------------------------------------
# Ours


class Ours(Adapter):
    """``enforcer``: ``compile_json_schema`` / ``compile_tools``; the matchers are used as they are."""

    name = "enforcer"
    caches_compiles = True

    def __init__(self, setup: Setup, vocabulary: Any) -> None:
        import enforcer

        self._enforcer = enforcer
        self.vocabulary = vocabulary
        self.k3_prompt_ids = setup.k3_prompt_ids
        self.options = {"compile_json_schema": "defaults (strict)", "compile_tools": {"tool_choice": "auto"}}
        self.k3_options = {"compile_tools": {"format": "kimi_k3", "tool_choice": "auto"},
                           "matcher": "prompt_ids = the generation prompt (ends <|open|>response<|sep|>)"}

    def compile(self, schema: dict[str, Any]) -> Any:
        return self._enforcer.compile_json_schema(schema, self.vocabulary)

    def compile_k2(self, tools: list[dict[str, Any]]) -> Any:
        return self._enforcer.compile_tools(tools, self.vocabulary, format="kimi_k2", tool_choice="auto")

    def compile_k3(self, tools: list[dict[str, Any]]) -> Any:
        return self._enforcer.compile_tools(tools, self.vocabulary, format="kimi_k3", tool_choice="auto")

    def matcher(self, compiled: Any) -> Any:
        if hasattr(compiled, "stop_token_ids"):
            if compiled.format.name == "kimi_k3":  # the turn continues the generation prompt
                return compiled.matcher(prompt_ids=self.k3_prompt_ids)
            return compiled.matcher(first_call_index=0)  # K2: the section starts the dialog
        return compiled.matcher()

    def clear_cache(self) -> None:
        """Empty the compile caches (not the per-vocabulary token index, which the peers also keep)."""
        import enforcer

        enforcer.clear_cache()


# --------------------------------------------------------------------------------------------
# xgrammar


class _XGrammarMatcher:
    __slots__ = ("_m",)

    def __init__(self, matcher: Any) -> None:
        self._m = matcher

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        self._m.fill_next_token_bitmask(bitmask, index)

    def accept_token(self, token_id: int) -> bool:
        return bool(self._m.accept_token(token_id))


_XGR_INFO: dict[int, Any] = {}
"""One xgrammar TokenizerInfo per Setup (both xgrammar adapters share it)."""


class XGrammar(Adapter):
    """xgrammar: ``GrammarCompiler.compile_json_schema`` / the built-in ``kimi`` structural tag.

    ``token_markers=False`` is what xgrammar ships for Kimi (markers matched as *text*, the way
    vLLM uses it). ``token_markers=True`` rebinds the markers to their token ids with xgrammar's
    private ``_bind_marker_tokens`` (the public ``token_markers=`` flag refuses ``"kimi"``).
    """

    caches_compiles = True

    def __init__(self, setup: Setup, *, token_markers: bool = False) -> None:
        import xgrammar as xgr

        self._xgr = xgr
        self.setup = setup
        self.token_markers = token_markers
        self.name = "xgrammar-tok" if token_markers else "xgrammar"
        start = time.perf_counter()
        self.info = _XGR_INFO.get(id(setup))
        if self.info is None:
            self.info = _XGR_INFO[id(setup)] = xgr.TokenizerInfo.from_huggingface(
                setup.tokenizer, vocab_size=setup.vocab_size, stop_token_ids=[setup.stop_id]
            )
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=True)
        self.build_seconds = time.perf_counter() - start
        self.options = {
            "any_whitespace": True,
            "max_whitespace_cnt": WHITESPACE_BOUND,
            "strict_mode": True,
            "any_order": False,
            "max_threads": 1,
            "kimi": {"reasoning": "disabled", "tool_choice": "auto", "token_markers": token_markers},
        }
        self.k3_options = {
            "get_model_structural_tag": {"model": "kimi_k3", "tool_choice": "auto", "reasoning": "disabled",
                                         "max_whitespace_cnt": WHITESPACE_BOUND, "exclude_special_tokens": True},
            "markers": "rebound to token ids (_bind_marker_tokens)" if token_markers else "matched as text (as shipped)",
            "end": "the tag ends with <|close|>message<|sep|>; <|end_of_msg|> is accepted as the stop token",
        }

    def compile(self, schema: dict[str, Any]) -> Any:
        return self.compiler.compile_json_schema(
            json.dumps(schema),
            any_whitespace=True,
            max_whitespace_cnt=WHITESPACE_BOUND,
            strict_mode=True,
        )

    def k2_structural_tag(self, tools: list[dict[str, Any]]) -> Any:
        """xgrammar's built-in ``kimi`` structural tag (K2-Instruct: no reasoning block)."""
        tag = self._xgr.get_model_structural_tag(
            "kimi", tools=tools, tool_choice="auto", reasoning="disabled", max_whitespace_cnt=WHITESPACE_BOUND
        )
        if self.token_markers:
            from xgrammar.builtin_structural_tag import _bind_marker_tokens

            tag = _bind_marker_tokens(tag, [k2.THINK_BEGIN, k2.THINK_END, *k2.TOOL_TOKENS])
        return tag

    def compile_k2(self, tools: list[dict[str, Any]]) -> Any:
        return self.compiler.compile_structural_tag(self.k2_structural_tag(tools))

    def k3_structural_tag(self, tools: list[dict[str, Any]]) -> Any:
        """xgrammar's built-in ``kimi_k3`` structural tag: starts inside the response body (thinking
        off), ends with ``<|close|>message<|sep|>``; ``<|end_of_msg|>`` is the matcher's stop token.
        ``token_markers``: ``<|open|>``/``<|close|>``/``<|sep|>`` rebound to their ids by the private
        ``_bind_marker_tokens`` (markers inside the argument schema stay strings, as it documents)."""
        tag = self._xgr.get_model_structural_tag(
            "kimi_k3", tools=tools, tool_choice="auto", reasoning="disabled", max_whitespace_cnt=WHITESPACE_BOUND
        )
        if self.token_markers:
            from xgrammar.builtin_structural_tag import _bind_marker_tokens

            tag = _bind_marker_tokens(tag, [k3.OPEN, k3.CLOSE, k3.SEP])
        return tag

    def compile_k3(self, tools: list[dict[str, Any]]) -> Any:
        return self.compiler.compile_structural_tag(self.k3_structural_tag(tools))

    def matcher(self, compiled: Any) -> _XGrammarMatcher:
        return _XGrammarMatcher(self._xgr.GrammarMatcher(compiled))

    def clear_cache(self) -> None:
        self.compiler.clear_cache()


# --------------------------------------------------------------------------------------------
# llguidance


def close_objects(schema: Any) -> Any:
    """A copy of ``schema`` with ``additionalProperties: false`` on every object schema lacking it.

    llguidance follows JSON Schema (absent ``additionalProperties`` allows extra keys); xgrammar's
    ``strict_mode`` and ours forbid them. This makes llguidance equally strict.
    """
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        if ("properties" in node or node.get("type") == "object") and "additionalProperties" not in node:
            if "patternProperties" not in node and "unevaluatedProperties" not in node:
                node["additionalProperties"] = False
        for key, value in node.items():
            if key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
                if isinstance(value, dict):
                    for sub in value.values():
                        walk(sub)
            elif key in ("enum", "const", "default", "examples", "required"):
                continue
            else:
                walk(value)

    walk(schema)
    return schema


class _LLGuidanceMatcher:
    __slots__ = ("_m", "_fill")

    def __init__(self, matcher: Any, fill: Callable[..., None]) -> None:
        self._m = matcher
        self._fill = fill

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        self._fill(self._m, bitmask, index)

    def accept_token(self, token_id: int) -> bool:
        return bool(self._m.consume_token(token_id))


class LLGuidance(Adapter):
    """llguidance: ``LLMatcher`` over a JSON-schema grammar, or a Lark grammar for the K2 section.

    llguidance has no compile-once object in Python: the grammar string is compiled by the
    ``LLMatcher`` constructor. ``compile`` builds one matcher and keeps it as the template;
    ``matcher`` returns ``template.deep_copy()`` (what an engine does to reuse a grammar).
    """

    name = "llguidance"

    def __init__(self, setup: Setup) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self._llg = llguidance
        self._fill = llguidance.torch.fill_next_token_bitmask
        self.setup = setup
        start = time.perf_counter()
        self.tokenizer = llguidance.hf.from_tokenizer(
            setup.tokenizer, n_vocab=setup.vocab_size, eos_token=setup.stop_id
        )
        self.build_seconds = time.perf_counter() - start
        self.json_options = {
            "whitespace_flexible": True,
            "whitespace_pattern": "[\\x20\\x0A\\x0D\\x09]{0,%d}" % WHITESPACE_BOUND,
        }
        self.options = {**self.json_options, "schema": "additionalProperties:false added where absent"}
        self.k3_options = {**self.json_options, "grammar": "Lark: control tokens as <[id]>, tag text as literals, "
                           "string values /(?s:.*)/ (enum: literals), other values %json of the property schema, "
                           "index [0-9]+, <|end_of_msg|> as EOS"}

    def _matcher_for(self, grammar: str) -> Any:
        matcher = self._llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise Unsupported(matcher.get_error())
        return matcher

    def compile(self, schema: dict[str, Any]) -> Any:
        grammar = self._llg.LLMatcher.grammar_from_json_schema(close_objects(schema), overrides=self.json_options)
        return self._matcher_for(grammar)

    def k2_lark(self, tools: list[dict[str, Any]]) -> str:
        """A Lark grammar for the K2 section: markers by token id (``<[ID]>``), ``%json`` arguments.

        Free text first (text can never produce a special token in llguidance), then optionally
        the section, then ``<|im_end|>``. The counter is ``[0-9]+``: a context-free grammar
        cannot count calls without enumerating them.
        """
        ids = self.setup.marker_ids
        ref = {name: f"<[{ids[name]}]>" for name in ids}
        lines = [
            f"start: TEXT section? {ref[k2.IM_END]}",
            "TEXT: /(?s:.*)/",
            f"section: {ref[k2.SECTION_BEGIN]} call+ {ref[k2.SECTION_END]}",
            f"call: {ref[k2.CALL_BEGIN]} ({' | '.join(f'call_{i}' for i in range(len(tools)))}) {ref[k2.CALL_END]}",
        ]
        for i, tool in enumerate(tools):
            function = tool["function"]
            schema = {**close_objects(function.get("parameters") or {}), "x-guidance": self.json_options}
            lines.append(
                f"call_{i}: {json.dumps(k2.CALL_ID_PREFIX + function['name'] + k2.CALL_ID_SEPARATOR)} "
                f"/[0-9]+/ {ref[k2.ARGUMENT_BEGIN]} args_{i}"
            )
            lines.append(f"args_{i}: %json {json.dumps(schema)}")
        return "\n".join(lines) + "\n"

    def compile_k2(self, tools: list[dict[str, Any]]) -> Any:
        return self._matcher_for(self._llg.LLMatcher.grammar_from_lark(self.k2_lark(tools)))

    def k3_lark(self, tools: list[dict[str, Any]]) -> str:
        """A Lark grammar for a K3 turn from inside the response body (thinking off).

        Control tokens by id (``<[ID]>``), tag text as literals, one rule per declared argument in
        declared order (``?`` when not required). A ``string`` value is a lexeme ``/(?s:.*)/`` (raw
        text: only the ``<|close|>`` id ends it), or its ``enum``/``const`` literals; any other
        type is ``%json`` of the property's schema. The index is ``[0-9]+`` (a context-free
        grammar cannot count calls without enumerating them). ``<|end_of_msg|>`` is the EOS.
        """
        ids = self.setup.marker_ids
        o, c, sep = (f"<[{ids[name]}]>" for name in (k3.OPEN, k3.CLOSE, k3.SEP))

        def close(word: str) -> str:
            return f"{c} {json.dumps(word)} {sep}"

        lines = [
            f"start: TEXT {close(k3.RESPONSE)} tools? {close(k3.MESSAGE)}",
            "TEXT: /(?s:.*)/",
            "INDEX: /[0-9]+/",
            f"tools: {o} {json.dumps(k3.TOOLS)} {sep} call+ {close(k3.TOOLS)}",
            f"call: {' | '.join(f'call_{i}' for i in range(len(tools)))}",
        ]
        for i, tool in enumerate(tools):
            function = tool["function"]
            params = close_objects(function.get("parameters") or {})
            if params.get("type", "object") != "object" or params.get("additionalProperties", False) is not False:
                raise Unsupported(f"{function['name']}: arguments must be a closed object to split them")
            required = set(params.get("required", ()))
            head = json.dumps(k3.tag_text(k3.CALL, [("tool", function["name"])]) + ' index="')
            args = []
            for j, (key, sub) in enumerate((params.get("properties") or {}).items()):
                args.append(f"arg_{i}_{j}" + ("" if key in required else "?"))
                lines += self._k3_argument(f"arg_{i}_{j}", key, sub, o, c, sep)
            lines.append(f"call_{i}: {o} {head} INDEX {json.dumps(chr(34))} {sep} {' '.join(args)} {close(k3.CALL)}")
        return "\n".join(lines) + "\n"

    def _k3_argument(self, rule: str, key: str, schema: Any, o: str, c: str, sep: str) -> list[str]:
        """Rules for one argument tag: one alternative per JSON type the property allows."""
        types = schema.get("type") if isinstance(schema, dict) else None
        if isinstance(types, str):
            types = [types]
        if not types:
            raise Unsupported(f"argument {key!r}: no 'type', so its type attribute is unknown")
        alternatives, lines = [], []
        for n, json_type in enumerate(dict.fromkeys("number" if t == "integer" else t for t in types)):
            attribute = json.dumps(k3.tag_text(k3.ARGUMENT, [("key", key), ("type", json_type)]))
            value = f"{rule}_v{n}"
            if json_type == "string" and ("enum" in schema or "const" in schema):
                options = schema["enum"] if "enum" in schema else [schema["const"]]
                lines.append(f"{value}: " + " | ".join(json.dumps(s) for s in options if isinstance(s, str)))
            elif json_type == "string":
                if any(k in schema for k in ("pattern", "format", "minLength", "maxLength")):
                    raise Unsupported(f"argument {key!r}: raw-string constraints are not expressed in this grammar")
                lines.append(f"{value}: TEXT")
            else:
                typed = [t for t in types if ("number" if t == "integer" else t) == json_type]
                sub = {**schema, "type": typed[0] if len(typed) == 1 else typed, "x-guidance": self.json_options}
                lines.append(f"{value}: %json {json.dumps(sub)}")
            alternatives.append(f"{o} {attribute} {sep} {value} {c} {json.dumps(k3.ARGUMENT)} {sep}")
        return [f"{rule}: " + " | ".join(alternatives), *lines]

    def compile_k3(self, tools: list[dict[str, Any]]) -> Any:
        return self._matcher_for(self._llg.LLMatcher.grammar_from_lark(self.k3_lark(tools)))

    def matcher(self, compiled: Any) -> _LLGuidanceMatcher:
        return _LLGuidanceMatcher(compiled.deep_copy(), self._fill)


# --------------------------------------------------------------------------------------------
# outlines-core


class _OutlinesMatcher:
    __slots__ = ("_g",)

    def __init__(self, guide: Any) -> None:
        self._g = guide

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        row = bitmask[index]
        self._g.write_mask_into(row.data_ptr(), row.numel(), 4)

    def accept_token(self, token_id: int) -> bool:
        try:
            self._g.advance(token_id, return_tokens=False)
        except ValueError:
            return False
        return True


class OutlinesCore(Adapter):
    """outlines-core: ``build_regex_from_schema`` -> ``Index`` (the compiled object) -> ``Guide``.

    The vocabulary is built from the exact bytes of every text id (``Setup.token_bytes``), so it
    matches ours id for id; special and added ids are absent (outlines cannot name them), apart
    from the stop id, which outlines allows in final states.
    """

    name = "outlines-core"

    def __init__(self, setup: Setup) -> None:
        import outlines_core

        self._oc = outlines_core
        start = time.perf_counter()
        by_bytes: dict[bytes, list[int]] = {}
        for token_id, data in enumerate(setup.token_bytes):
            if data is not None and token_id != setup.stop_id:
                by_bytes.setdefault(data, []).append(token_id)
        self.vocabulary = outlines_core.Vocabulary(setup.stop_id, by_bytes)
        self.build_seconds = time.perf_counter() - start
        self.options = {"whitespace_pattern": "default ([ ]?)", "additionalProperties": "absent = no extra keys"}

    def compile(self, schema: dict[str, Any]) -> Any:
        regex = self._oc.json_schema.build_regex_from_schema(json.dumps(schema))
        return self._oc.Index(regex, self.vocabulary)

    def matcher(self, compiled: Any) -> _OutlinesMatcher:
        return _OutlinesMatcher(self._oc.Guide(compiled))


# --------------------------------------------------------------------------------------------
# lm-format-enforcer


class _LMFEMatcher:
    __slots__ = ("_enforcer", "_tokens", "_last")

    def __init__(self, enforcer: Any) -> None:
        self._enforcer = enforcer
        self._tokens: list[int] = []
        self._last: Any = None

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        self._last = self._enforcer.get_allowed_tokens(self._tokens)
        bitmask[index].copy_(self._last.allowed_tokens)

    def accept_token(self, token_id: int) -> bool:
        if self._last is None:
            self._last = self._enforcer.get_allowed_tokens(self._tokens)
        if not self._last.is_token_allowed(token_id):
            return False
        self._tokens.append(token_id)
        self._last = None
        return True


def _drop_lmfe_tracebacks(record: logging.LogRecord) -> bool:
    return "lmformatenforcer" not in record.pathname


class LMFormatEnforcer(Adapter):
    """lm-format-enforcer: ``JsonSchemaParser`` (the compiled object) + a ``TokenEnforcer`` per sequence.

    Its transformers integration does not import under transformers 5, so the tokenizer data is
    built here the way that integration does (every non-special id decoded as text, word-start
    flag from decoding after ``"0"``), with ``use_bitmask=True``. Like lm-format-enforcer in the
    field, the added-but-not-special K2 markers are ordinary text to it.
    """

    name = "lm-format-enforcer"

    def __init__(self, setup: Setup) -> None:
        from lmformatenforcer import JsonSchemaParser, TokenEnforcer
        from lmformatenforcer.tokenenforcer import TokenEnforcerTokenizerData

        # On a schema it cannot handle it logs a traceback on the root logger and allows only
        # EOS; the benchmark records that as a refused token, so the traceback is dropped.
        logging.getLogger().addFilter(_drop_lmfe_tracebacks)

        self._parser = JsonSchemaParser
        self._enforcer = TokenEnforcer
        tokenizer = setup.tokenizer
        start = time.perf_counter()
        special = set(tokenizer.all_special_ids)
        zero = tokenizer.encode("0", add_special_tokens=False)[-1]
        regular = []
        for token_id in range(len(tokenizer)):
            if token_id in special:
                continue
            after_zero = tokenizer.decode([zero, token_id])[1:]
            alone = tokenizer.decode([token_id])
            regular.append((token_id, after_zero, len(after_zero) > len(alone)))

        def decode(ids: list[int]) -> str:
            return tokenizer.decode(ids).rstrip("\ufffd")

        self.data = TokenEnforcerTokenizerData(regular, decode, setup.stop_id, True, setup.vocab_size)
        self.build_seconds = time.perf_counter() - start
        self.options = {"use_bitmask": True, "whitespace": "library default (max 12 consecutive)"}

    def compile(self, schema: dict[str, Any]) -> Any:
        return self._parser(schema)

    def matcher(self, compiled: Any) -> _LMFEMatcher:
        return _LMFEMatcher(self._enforcer(self.data, compiled))


# --------------------------------------------------------------------------------------------

ADAPTERS: dict[str, Callable[[Setup], Adapter]] = {
    "xgrammar": XGrammar,
    "xgrammar-tok": lambda setup: XGrammar(setup, token_markers=True),
    "llguidance": LLGuidance,
    "outlines-core": OutlinesCore,
    "lm-format-enforcer": LMFormatEnforcer,
}
"""Peer name -> constructor."""


@dataclass
class Built:
    """The adapters of a run, ours first, and the peers that could not be set up."""

    adapters: list[Adapter]
    failed: dict[str, str] = field(default_factory=dict)


def build_adapters(setup: Setup, vocabulary: Any, names: Iterable[str]) -> Built:
    """Ours plus the named peers; a peer that is missing or fails to set up is reported, not fatal."""
    built = Built([Ours(setup, vocabulary)])
    for name in names:
        try:
            built.adapters.append(ADAPTERS[name](setup))
        except Exception as exc:  # a missing or broken peer must not stop the other measurements
            built.failed[name] = f"{type(exc).__name__}: {exc}"
    return built


def library_versions() -> dict[str, str | None]:
    """Installed versions of ours, the peers, and what they run on."""
    versions: dict[str, str | None] = {}
    for package in (
        "toolcall-enforcer", "xgrammar", "llguidance", "outlines_core", "lm-format-enforcer",
        "torch", "numpy", "transformers", "tokenizers",
    ):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions

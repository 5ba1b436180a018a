"""vLLM tool parsers, one per format family (``kimi_k2_enforced``, ``kimi_k3_enforced``, and
``{family}_enforced`` for every family in :mod:`enforcer.formats.registry`): the server's side of
enforced tool calls. The classes (``{Family}EnforcedToolParser``, ``{Family}EnforcedParser``)
are made from the registry when this module is imported.

``vllm serve ... --enable-auto-tool-choice --tool-call-parser kimi_k2_enforced`` (each
registered by the package's ``vllm.general_plugins`` entry point,
:func:`enforcer.integrations.vllm.register_tool_parser`).

- :class:`KimiK2EnforcedParser` / :class:`KimiK3EnforcedParser` (what the server uses for these
  names) read the output by token id with :func:`enforcer.parser.parse_tool_calls` and the
  streaming parser, so the reply agrees exactly with what the logits processor enforced, and
  markers never reach ``content`` or ``reasoning``, even when the text spells one. Generation
  starts in reasoning when the prompt opened it (K2: an unclosed ``<think>``; K3: the prompt
  ends with ``<|open|>think<|sep|>``).
- ``adjust_request`` copies the request's ``tools``, ``tool_choice`` and
  ``parallel_tool_calls`` (and for K3 ``"format": "kimi_k3"``, so validation applies K3's rules)
  into ``vllm_xargs["enforcer"]``: the processor then enforces exactly what the client asked
  (``required``, a named function, ``none``), and a declaration it cannot enforce is answered
  with HTTP 400 and the reason. No structured-output grammar is added: the processor is the
  only constraint.
- :class:`KimiK2EnforcedToolParser` / :class:`KimiK3EnforcedToolParser` alone (if vLLM's parser
  composition changes and the routing in ``register_tool_parser`` no longer applies) still
  stream by id; their non-streaming path only sees text, which they re-encode (text that spells
  a marker would then count as one).

Cost: one :class:`~enforcer.vocabulary.Vocabulary` per tokenizer (cached), then O(1) per token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import (DeltaFunctionCall, DeltaMessage, DeltaToolCall,
                                                     ExtractedToolCallInformation, FunctionCall, ToolCall)
from vllm.parser.abstract_parser import DelegatingParser
from vllm.tool_parsers.abstract_tool_parser import ToolParser

from ..formats.registry import FormatFamily, families, family_of
from ..parser import Delta, StreamingToolCallParser, parse_tool_calls
from ..vocabulary import Vocabulary
from .vllm_settings import SETTINGS_KEY

NAME = "kimi_k2_enforced"
K3_NAME = "kimi_k3_enforced"

_VOCABULARIES: dict[tuple, Vocabulary] = {}
_LOCK = threading.Lock()


def vocabulary_for(tokenizer: Any, width: int | None = None) -> Vocabulary:
    """The vocabulary of the server's tokenizer (cached per tokenizer and width)."""
    key = (id(tokenizer), getattr(tokenizer, "name_or_path", None), len(tokenizer), width)
    with _LOCK:
        hit = _VOCABULARIES.get(key)
        if hit is None:
            size = max(width or 0, len(tokenizer)) or None
            hit = _VOCABULARIES[key] = Vocabulary.from_tokenizer(tokenizer, vocab_size=size)
    return hit


def _tool_choice(request: Any) -> Any:
    choice = getattr(request, "tool_choice", None)
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        return choice
    function = getattr(choice, "function", None)
    name = getattr(function, "name", None) or getattr(choice, "name", None)
    return {"type": "function", "function": {"name": name}}


def _tool_dict(tool: Any) -> dict[str, Any]:
    data = tool.model_dump(exclude_none=True) if hasattr(tool, "model_dump") else dict(tool)
    if "function" not in data and "name" in data:  # Responses API: flat function tools
        data = {"type": "function", "function": {k: v for k, v in data.items() if k != "type"}}
    return data


def enforcer_settings(request: Any, format: str | None = None) -> str | None:
    """The JSON text of the enforcer settings a request's tool fields ask for (with ``format``
    when given), or None when it declares no tools."""
    tools = getattr(request, "tools", None)
    if not tools:
        return None
    parallel = getattr(request, "parallel_tool_calls", None)
    settings: dict[str, Any] = {
        "tools": [_tool_dict(tool) for tool in tools],
        "tool_choice": _tool_choice(request),
        "parallel_tool_calls": True if parallel is None else bool(parallel),
    }
    if format is not None:
        settings["format"] = format
    return json.dumps(settings, ensure_ascii=False)


def _add_settings(request: Any, format: str | None = None) -> Any:
    """Put the settings into ``vllm_xargs`` unless the client sent its own."""
    settings = enforcer_settings(request, format)
    xargs = dict(getattr(request, "vllm_xargs", None) or {})
    if settings is not None and SETTINGS_KEY not in xargs and hasattr(request, "vllm_xargs"):
        xargs[SETTINGS_KEY] = settings
        request.vllm_xargs = xargs
    return request


def _delta_message(deltas: Sequence[Delta], include_tools: bool) -> DeltaMessage | None:
    """One OpenAI delta from the parser's deltas (fragments of one call are joined)."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[DeltaToolCall] = []
    for delta in deltas:
        if delta.content is not None:
            content.append(delta.content)
        elif delta.reasoning_content is not None:
            reasoning.append(delta.reasoning_content)
        elif delta.tool_call is not None and include_tools:
            part = delta.tool_call
            function = part.get("function", {})
            fragment = function.get("arguments", "")
            if calls and calls[-1].index == part["index"] and "id" not in part:
                last = calls[-1].function
                assert last is not None
                last.arguments = (last.arguments or "") + fragment
                continue
            calls.append(DeltaToolCall(index=part["index"], id=part.get("id"), type=part.get("type"),
                                       function=DeltaFunctionCall(name=function.get("name"), arguments=fragment)))
    if not (content or reasoning or calls):
        return None
    return DeltaMessage(content="".join(content) or None, reasoning="".join(reasoning) or None, tool_calls=calls)


class _EnforcedToolParser(ToolParser):
    """The registered tool parser of one format: request adjustment, id-based streaming, text
    fallback. ``format``: the parser's format; ``settings_format``: the ``format`` setting
    ``adjust_request`` adds (None: none, the engine's)."""

    format = "kimi_k2"
    """The format whose reader parses the output (set per family by :func:`_parser_classes`)."""
    settings_format: str | None = None
    supports_required_and_named = False  # required/named calls are the format's tags, not JSON lists

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self.vocabulary = vocabulary_for(tokenizer)
        self._stream: StreamingToolCallParser | None = None

    def adjust_request(self, request: Any) -> Any:
        return _add_settings(request, self.settings_format)

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        """Text-only fallback: re-encodes the text (the server routes to the id-based parser
        instead)."""
        ids = self.model_tokenizer.encode(model_output, add_special_tokens=False)
        parsed = parse_tool_calls(ids, self.vocabulary, format=self.format)
        calls = [ToolCall(id=c["id"], function=FunctionCall(id=c["id"], name=c["function"]["name"],
                                                            arguments=c["function"]["arguments"]))
                 for c in parsed["tool_calls"]]
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls, content=parsed["content"])

    def extract_tool_calls_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                     previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                     delta_token_ids: Sequence[int], request: Any) -> DeltaMessage | None:
        if self._stream is None:
            self._stream = StreamingToolCallParser(self.vocabulary, self.format)
        return _delta_message(self._stream.feed_many(delta_token_ids), include_tools=True)


class _EnforcedParser(DelegatingParser):
    """What the server uses for an enforced parser name: content, reasoning and tool calls read
    from the generated ids (streamed and not). One per request, not shared."""

    always_adjust_request = True  # tool_choice="none" must reach the processor too
    tool_parser_cls: type[_EnforcedToolParser] = _EnforcedToolParser

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None, *args: Any, model_config: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(tokenizer, tools, *args, model_config=model_config, **kwargs)
        width = int(model_config.get_vocab_size()) if model_config is not None else None
        self.vocabulary = vocabulary_for(tokenizer, width)
        self._prompt_ids: list[int] | None = None
        self._stream: StreamingToolCallParser | None = None

    @property
    def _format(self) -> str:
        return self.tool_parser_cls.format

    def _in_reasoning(self, prompt_ids: Sequence[int] | None) -> bool:
        return family_of(self._format).prompt_function("opens_reasoning", "reasoning reader")(prompt_ids, self.vocabulary)

    def adjust_request(self, request: Any) -> Any:
        return _add_settings(super().adjust_request(request), self.tool_parser_cls.settings_format)

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self._prompt_ids = list(prompt_token_ids)

    def is_reasoning_end(self, input_ids: list[int]) -> bool:
        return not self._in_reasoning(input_ids)

    def parse(self, model_output: str, request: Any, enable_auto_tools: bool = False,
              model_output_token_ids: Sequence[int] = ()) -> tuple[str | None, str | None, list[FunctionCall] | None]:
        """(reasoning, content, tool calls) of a finished output, by token id; a call the output
        was cut off inside (finish reason ``length``) is not among the calls."""
        if not model_output_token_ids and model_output:
            return super().parse(model_output, request, enable_auto_tools, model_output_token_ids)
        parsed = parse_tool_calls(model_output_token_ids, self.vocabulary, format=self._format,
                                  in_reasoning=self._in_reasoning(self._prompt_ids))
        calls = None
        if request.tool_choice != "none" and (enable_auto_tools or request.tool_choice != "auto"):
            calls = [FunctionCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
                     for c in parsed["tool_calls"]]
        return parsed["reasoning_content"], parsed["content"], calls

    def parse_delta(self, delta_text: str, delta_token_ids: list[int], request: Any,
                    prompt_token_ids: list[int] | None = None, *, finished: bool) -> DeltaMessage | None:
        """The delta of the newest ids, by token id."""
        if self._stream is None:
            opened = self._in_reasoning(prompt_token_ids or self._prompt_ids)
            self._stream = StreamingToolCallParser(self.vocabulary, self._format, in_reasoning=opened)
        deltas = self._stream.feed_many(delta_token_ids)
        if finished:
            deltas += self._stream.finish()
        message = _delta_message(deltas, include_tools=request.tool_choice != "none")
        if message is not None and not getattr(request, "include_reasoning", True):
            message.reasoning = None
            if not message.content and not message.tool_calls:
                return None
        return message


def _parser_classes(family: FormatFamily) -> tuple[type[_EnforcedToolParser], type[_EnforcedParser]]:
    """The registered tool parser of ``family`` (``{Family}EnforcedToolParser``) and the server's
    id-based parser the lookup routes its name to (``{Family}EnforcedParser``)."""
    stem = family.parser_class
    tool_parser = type(f"{stem}EnforcedToolParser", (_EnforcedToolParser,), {
        "__doc__": f"The registered ``{family.tool_parser_name}`` tool parser.", "__module__": __name__,
        "format": family.default_format, "settings_format": family.settings_format})
    parser = type(f"{stem}EnforcedParser", (_EnforcedParser,), {
        "__doc__": f"The server's parser for ``--tool-call-parser {family.tool_parser_name}``.", "__module__": __name__,
        "tool_parser_cls": tool_parser})
    return tool_parser, parser


__all__ = ["K3_NAME", "NAME", "enforcer_settings", "vocabulary_for"]
for _family in families():
    for _cls in _parser_classes(_family):
        globals()[_cls.__name__] = _cls
        __all__.append(_cls.__name__)

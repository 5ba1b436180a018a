"""Prompt helpers every family shares: checking an OpenAI ``tools`` list, reading a message's
text, the compact key-sorted JSON of the tools, the bytes of text tokens, and where a turn
resumes after a prompt that opened reasoning. Pure; linear."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import InvalidToolsError

__all__ = ["HistoryCall", "check_tools", "content_text", "history_calls", "text_bytes", "think_resume", "tools_json"]


def check_tools(tools: Any) -> list[Mapping[str, Any]]:
    """The tools as a list, or ``InvalidToolsError`` naming the first bad entry."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise InvalidToolsError(f"tools must be a list of OpenAI tool objects, got {type(tools).__name__}")
    for position, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidToolsError(f"tools[{position}] must be an object, got {type(tool).__name__}")
        if tool.get("type", "function") != "function":
            raise InvalidToolsError(f"tools[{position}]: type {tool.get('type')!r} is not 'function'")
        function = tool.get("function")
        if not isinstance(function, Mapping):
            raise InvalidToolsError(f"tools[{position}] lacks a 'function' object")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidToolsError(f"tools[{position}].function.name must be a non-empty string")
        parameters = function.get("parameters", {})
        if not isinstance(parameters, (Mapping, bool)):
            raise InvalidToolsError(f"tool {name!r}: parameters must be a JSON Schema object")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise InvalidToolsError(f"tool {name!r}: description must be a string")
    return list(tools)


def content_text(message: Mapping[str, Any], where: str) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise ValueError(f"{where}: only text content parts can be rendered, got {part!r:.80}")
        return "".join(texts)
    raise ValueError(f"{where}: content must be a string, a list of text parts or null")


def tools_json(tools: Sequence[Mapping[str, Any]], **dumps: Any) -> str:
    """``json.dumps`` of the checked tools, non-ASCII kept (``InvalidToolsError`` when they are
    not JSON-serialisable); ``dumps`` overrides the compact key-sorted default."""
    options = {"ensure_ascii": False, "separators": (",", ":"), "sort_keys": True, **dumps}
    try:
        return json.dumps(check_tools(tools), **options)
    except (TypeError, ValueError) as exc:
        raise InvalidToolsError(f"tools are not JSON-serialisable: {exc}") from exc


def text_bytes(vocabulary: Any, token_id: Any) -> bytes | None:
    """The token's text bytes, or None for markers and ids that are not token ids at all."""
    try:
        token_id = int(token_id)
        if not 0 <= token_id < vocabulary.vocab_size:
            return None
        return vocabulary.token_bytes(token_id)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def think_resume(prompt_ids: Sequence[int], special_tokens: Mapping[str, int], turn_opener: str,
                 think_begin: str, think_end: str) -> str | None:
    """The place a turn starts in after ``prompt_ids``: ``"think"`` when the last
    ``turn_opener`` token is followed by an open ``think_begin``, ``"content"`` when
    ``think_end`` closed it, otherwise ``None`` (the start, where a think block may still open).
    By id only; linear in the prompt."""
    ids = list(prompt_ids)
    opener = special_tokens.get(turn_opener)
    if opener is None or opener not in ids:
        return None
    begin, end = special_tokens.get(think_begin), special_tokens.get(think_end)
    place = None
    for t in ids[len(ids) - 1 - ids[::-1].index(opener):]:
        if t == begin:
            place = "think"
        elif t == end:
            place = "content"
    return place


class HistoryCall(NamedTuple):
    """One call of an assistant message in a prompt's history."""

    id: Any
    """The message's own call id (``None`` when it gives none)."""
    name: str
    arguments: Any
    """As given: a JSON text or a JSON value."""

    @property
    def arguments_text(self) -> str:
        """The arguments as JSON text (a text as given; a value compact, raw UTF-8)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


def history_calls(calls: Any, where: str, error: type[Exception] = ValueError) -> list[HistoryCall]:
    """An assistant message's ``tool_calls``, checked: a list whose every entry has a
    ``function.name``; otherwise ``error`` naming ``where`` and the position."""
    if not isinstance(calls, list):
        raise error(f"{where}: tool_calls must be a list")
    found = []
    for position, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise error(f"{where}: tool_calls[{position}] needs function.name")
        found.append(HistoryCall(call.get("id"), name, function.get("arguments", "{}")))
    return found

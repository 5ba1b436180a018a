"""Kimi K2 prompt text: the tool declaration, the chat layout, and reading the declaration back.

``render_tool_declaration`` and ``render_chat`` produce text with the marker names spelled out;
the caller encodes it with the model's tokenizer, which maps marker text to the marker ids at
prompt time. ``read_tool_declaration`` and ``count_tool_calls`` work on prompt ids, recognising
structure by id only. All functions are pure; cost is linear in the size of their input.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Iterable

from .errors import InvalidToolsError
from .formats import kimi_k2

if TYPE_CHECKING:
    from .vocabulary import Vocabulary

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "count_tool_calls",
    "read_tool_declaration",
    "render_chat",
    "render_tool_declaration",
]

DEFAULT_SYSTEM_PROMPT = "You are Kimi, an AI assistant created by Moonshot AI."
"""The system message K2's template inserts when the dialog does not start with one."""

TOOL_DECLARE_ROLE = "tool_declare"


# --------------------------------------------------------------------------------------------
# Tool declaration


def _check_tools(tools: Any) -> list[Mapping[str, Any]]:
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


def render_tool_declaration(tools: Sequence[Mapping[str, Any]], style: str = "json") -> str:
    """The body of K2's ``tool_declare`` system message.

    ``style="json"``: the OpenAI tools array as compact JSON (separators ``,`` ``:``), keys sorted
    recursively, non-ASCII kept (Kimi K2, K2-0905, K2-Thinking). ``style="typescript"``: one
    ``namespace functions { ... }`` block with a ``type NAME = (_: {...}) => any;`` per tool
    (the K2.5+ idea). Raises ``InvalidToolsError`` for a malformed tools list.
    """
    checked = _check_tools(tools)
    if style == "json":
        try:
            return json.dumps(checked, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise InvalidToolsError(f"tools are not JSON-serialisable: {exc}") from exc
    if style == "typescript":
        return _TypeScript.render(checked)
    raise ValueError(f"unknown declaration style {style!r} (known: json, typescript)")


_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_INDENT = "  "


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _comment(text: str, pad: str) -> list[str]:
    return [f"{pad}// {line}".rstrip() for line in text.splitlines() or [""]]


def _union(types: Iterable[str]) -> str:
    unique = list(dict.fromkeys(types))
    return " | ".join(unique) if unique else "never"


def _grouped(type_text: str) -> str:
    """Parenthesise a union or intersection before ``[]`` or ``&`` binds to it."""
    return f"({type_text})" if (" | " in type_text or " & " in type_text) else type_text


class _TypeScript:
    """JSON Schema -> TypeScript type text for one tool's parameters (local ``$ref`` inlined)."""

    def __init__(self, root: Any) -> None:
        self._root = root

    @classmethod
    def render(cls, tools: list[Mapping[str, Any]]) -> str:
        blocks = []
        for tool in tools:
            function = tool["function"]
            lines = _comment(function["description"], "") if function.get("description") else []
            parameters = function.get("parameters", {})
            type_text = cls(parameters).type_of(parameters, 0, frozenset())
            argument = "" if type_text in ("object", "any") else f"_: {type_text}"
            lines.append(f"type {function['name']} = ({argument}) => any;")
            blocks.append("\n".join(lines))
        return "namespace functions {\n" + "\n\n".join(blocks) + "\n}"

    def type_of(self, schema: Any, depth: int, refs: frozenset[str]) -> str:
        if schema is False:
            return "never"
        if not isinstance(schema, Mapping):
            return "any"
        if isinstance(schema.get("$ref"), str):
            return self._reference(schema["$ref"], depth, refs)
        if "const" in schema:
            return _literal(schema["const"])
        if isinstance(schema.get("enum"), list):
            return _union(_literal(value) for value in schema["enum"])
        for keyword in ("anyOf", "oneOf"):
            if isinstance(schema.get(keyword), list):
                return _union(self.type_of(s, depth, refs) for s in schema[keyword])
        if isinstance(schema.get("allOf"), list):
            return " & ".join(_grouped(self.type_of(s, depth, refs)) for s in schema["allOf"]) or "any"
        kind = schema.get("type")
        if isinstance(kind, list):
            return _union(self._typed(schema, k, depth, refs) for k in kind)
        if kind is None:
            if "properties" in schema:
                kind = "object"
            elif "items" in schema or "prefixItems" in schema:
                kind = "array"
        return self._typed(schema, kind, depth, refs)

    def _typed(self, schema: Mapping[str, Any], kind: Any, depth: int, refs: frozenset[str]) -> str:
        if kind == "string":
            return "string"
        if kind in ("integer", "number"):
            return "number"
        if kind == "boolean":
            return "boolean"
        if kind == "null":
            return "null"
        if kind == "array":
            if isinstance(schema.get("prefixItems"), list):
                return "[" + ", ".join(self.type_of(s, depth, refs) for s in schema["prefixItems"]) + "]"
            items = schema.get("items")
            return f"{_grouped(self.type_of(items, depth, refs))}[]" if items is not None else "any[]"
        if kind == "object":
            if isinstance(schema.get("properties"), Mapping) and schema["properties"]:
                return self.object_block(schema, depth, refs)
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping):
                return f"Record<string, {self.type_of(extra, depth, refs)}>"
            return "object"
        return "any"

    def object_block(self, schema: Mapping[str, Any], depth: int, refs: frozenset[str]) -> str:
        pad = _INDENT * (depth + 1)
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        lines = ["{"]
        for name, prop in schema["properties"].items():
            if isinstance(prop, Mapping):
                if isinstance(prop.get("description"), str) and prop["description"]:
                    lines += _comment(prop["description"], pad)
                if "default" in prop:
                    lines.append(f"{pad}// default: {_literal(prop['default'])}")
            key = name if _IDENTIFIER.fullmatch(name) else _literal(name)
            optional = "" if name in required else "?"
            lines.append(f"{pad}{key}{optional}: {self.type_of(prop, depth + 1, refs)},")
        lines.append(_INDENT * depth + "}")
        return "\n".join(lines)

    def _reference(self, ref: str, depth: int, refs: frozenset[str]) -> str:
        if ref in refs or not ref.startswith("#"):
            return "any"
        target: Any = self._root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return "any"
        return self.type_of(target, depth, refs | {ref})


# --------------------------------------------------------------------------------------------
# Chat layout


def _content_text(message: Mapping[str, Any], where: str) -> str:
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


class _CallIds:
    """Gives every history call its K2 id ``functions.NAME:N`` and maps tool results to it."""

    def __init__(self) -> None:
        self.count = 0
        self._pending: dict[str, deque[str]] = {}
        self._last: dict[str, str] = {}

    def assign(self, original: Any, name: str) -> str:
        new = kimi_k2.call_id(name, self.count)
        self.count += 1
        if isinstance(original, str):
            self._pending.setdefault(original, deque()).append(new)
            self._last[original] = new
        return new

    def result_id(self, original: str) -> str:
        queue = self._pending.get(original)
        if queue:
            return queue.popleft()
        return self._last.get(original, original)


def _render_calls(calls: Any, ids: _CallIds, where: str) -> str:
    if not isinstance(calls, list):
        raise ValueError(f"{where}: tool_calls must be a list")
    parts = [kimi_k2.SECTION_BEGIN]
    for position, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: tool_calls[{position}] needs function.name")
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        parts += [kimi_k2.CALL_BEGIN, ids.assign(call.get("id"), name), kimi_k2.ARGUMENT_BEGIN]
        parts += [arguments, kimi_k2.CALL_END]
    parts.append(kimi_k2.SECTION_END)
    return "".join(parts)


def _header(message: Mapping[str, Any], role: str) -> str:
    name = message.get("name") or role
    opener = {"user": kimi_k2.IM_USER, "assistant": kimi_k2.IM_ASSISTANT}.get(role, kimi_k2.IM_SYSTEM)
    return f"{opener}{name}{kimi_k2.IM_MIDDLE}"


def render_chat(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
    thinking: bool = False,
    tool_style: str = "json",
) -> str:
    """The K2 chat layout of ``messages`` as text with the marker names spelled out.

    Tools are declared first (``tool_style`` as in ``render_tool_declaration``); the default
    system message is added when the dialog does not start with a system one. History call ids
    become ``functions.NAME:N`` (N counts every call from 0) and tool results follow them.
    ``thinking=False`` is the K2-Instruct layout (no think blocks); ``thinking=True`` the
    K2-Thinking one: assistant turns up to the last one without tool calls get an empty
    ``<think></think>``, later ones ``<think>{reasoning_content}</think>``. Raises
    ``ValueError`` naming the message for malformed input, ``InvalidToolsError`` for bad tools.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ValueError("messages must be a list of message objects")
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ValueError(f"messages[{position}] must be an object with a string 'role'")
    parts = []
    if tools:
        declaration = render_tool_declaration(tools, tool_style)
        parts.append(f"{kimi_k2.IM_SYSTEM}{TOOL_DECLARE_ROLE}{kimi_k2.IM_MIDDLE}{declaration}{kimi_k2.IM_END}")
    if not messages or messages[0]["role"] != "system":
        parts.append(f"{kimi_k2.IM_SYSTEM}system{kimi_k2.IM_MIDDLE}{DEFAULT_SYSTEM_PROMPT}{kimi_k2.IM_END}")
    last_plain_answer = max(
        (i for i, m in enumerate(messages) if m["role"] == "assistant" and not m.get("tool_calls")),
        default=-1,
    )
    ids = _CallIds()
    for position, message in enumerate(messages):
        role = message["role"]
        where = f"messages[{position}] ({role})"
        body = _content_text(message, where)
        if role == "assistant":
            if thinking:
                reasoning = message.get("reasoning_content") if position > last_plain_answer else None
                body = f"{kimi_k2.THINK_BEGIN}{reasoning or ''}{kimi_k2.THINK_END}{body}"
            if message.get("tool_calls"):
                body += _render_calls(message["tool_calls"], ids, where)
        elif role == "tool":
            original = message.get("tool_call_id")
            if not isinstance(original, str):
                raise ValueError(f"{where}: a tool result needs a string tool_call_id")
            body = f"## Return of {ids.result_id(original)}\n{body}"
        parts.append(f"{_header(message, role)}{body}{kimi_k2.IM_END}")
    if add_generation_prompt:
        parts.append(f"{kimi_k2.IM_ASSISTANT}assistant{kimi_k2.IM_MIDDLE}")
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# Reading prompts


def count_tool_calls(prompt_ids: Iterable[int], vocabulary: Vocabulary) -> int:
    """Number of ``<|tool_call_begin|>`` ids in the prompt: the next call's K2 counter."""
    call_begin = vocabulary.token_id(kimi_k2.CALL_BEGIN)
    return sum(1 for token_id in prompt_ids if token_id == call_begin)


def _text_bytes(vocabulary: Vocabulary, token_id: Any) -> bytes | None:
    """The token's text bytes, or None for markers and ids that are not token ids at all."""
    try:
        token_id = int(token_id)
        if not 0 <= token_id < vocabulary.vocab_size:
            return None
        return vocabulary.token_bytes(token_id)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def read_tool_declaration(prompt_ids: Iterable[int], vocabulary: Vocabulary) -> list[Any] | None:
    """The tools of the prompt's first ``tool_declare`` message (K2 JSON style), or None.

    None when there is no declaration, when it is not closed by ``<|im_end|>``, when its body
    holds a non-text id (the text cannot be read exactly) or when it is not a JSON array.
    TypeScript declarations (K2.5+) give None: they drop facts (integer vs number, formats,
    bounds) and cannot be parsed back exactly. Never raises on a strange prompt; raises
    ``TokenizerError`` if the vocabulary lacks the K2 role tokens. Cost: O(len(prompt_ids)).
    """
    system = vocabulary.token_id(kimi_k2.IM_SYSTEM)
    middle = vocabulary.token_id(kimi_k2.IM_MIDDLE)
    end = vocabulary.token_id(kimi_k2.IM_END)
    ids = list(prompt_ids)
    role_name = TOOL_DECLARE_ROLE.encode()
    for start, token_id in enumerate(ids):
        if token_id != system:
            continue
        position, name = start + 1, bytearray()
        while position < len(ids) and ids[position] != middle and len(name) <= len(role_name):
            data = _text_bytes(vocabulary, ids[position])
            if data is None:
                break
            name += data
            position += 1
        if bytes(name) != role_name or position >= len(ids) or ids[position] != middle:
            continue
        body = bytearray()
        for token_id in ids[position + 1 :]:
            if token_id == end:
                break
            data = _text_bytes(vocabulary, token_id)
            if data is None:
                return None
            body += data
        else:
            return None
        try:
            tools = json.loads(body.decode("utf-8"))
        except (ValueError, RecursionError):
            return None
        return tools if isinstance(tools, list) else None
    return None

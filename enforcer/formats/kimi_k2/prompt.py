"""Kimi K2 prompts: the tool declaration (JSON or TypeScript), the chat layout as text with the
marker names spelled out (the caller encodes it with the model's tokenizer, which maps marker text
to the marker ids at prompt time), and reading a prompt back by id (the declared tools, the call
counter, an open think block). Pure functions; cost linear in the input."""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Iterable

from ...schema_resources import follow_pointer
from ..messages import check_tools, content_text, history_calls, text_bytes, tools_json
from . import (ARGUMENT_BEGIN, CALL_BEGIN, CALL_END, IM_ASSISTANT, IM_END, IM_MIDDLE, IM_SYSTEM, IM_USER, SECTION_BEGIN,
               SECTION_END, THINK_BEGIN, THINK_END, call_id)

if TYPE_CHECKING:
    from ...vocabulary import Vocabulary

__all__ = ["DEFAULT_SYSTEM_PROMPT", "TOOL_DECLARE_ROLE", "count_tool_calls", "opens_reasoning", "read_tool_declaration",
           "render_chat", "render_tool_declaration"]

DEFAULT_SYSTEM_PROMPT = "You are Kimi, an AI assistant created by Moonshot AI."
"""The system message K2's template inserts when the dialog does not start with one."""

TOOL_DECLARE_ROLE = "tool_declare"


def render_tool_declaration(tools: Sequence[Mapping[str, Any]], style: str = "json") -> str:
    """The body of K2's ``tool_declare`` message: ``style="json"`` is the OpenAI tools array as
    compact JSON (separators ``,`` ``:``), keys sorted recursively, non-ASCII kept (Kimi K2,
    K2-0905, K2-Thinking); ``style="typescript"`` one ``namespace functions { ... }`` block with a
    ``type NAME = (_: {...}) => any;`` per tool (the K2.5+ idea). ``InvalidToolsError`` for a
    malformed tools list, ``ValueError`` for an unknown style."""
    if style == "json":
        return tools_json(tools)
    if style == "typescript":
        return _TypeScript.render(check_tools(tools))
    raise ValueError(f"unknown declaration style {style!r} for kimi_k2 (known: json, typescript)")


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
        found = follow_pointer(self._root, ref[1:])
        if found is None:
            return "any"
        return self.type_of(found[0], depth, refs | {ref})


class _CallIds:
    """Gives every history call its K2 id ``functions.NAME:N`` and maps tool results to it."""

    def __init__(self) -> None:
        self.count = 0
        self._pending: dict[str, deque[str]] = {}
        self._last: dict[str, str] = {}

    def assign(self, original: Any, name: str) -> str:
        new = call_id(name, self.count)
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
    parts = [SECTION_BEGIN]
    for call in history_calls(calls, where):
        parts += [CALL_BEGIN, ids.assign(call.id, call.name), ARGUMENT_BEGIN]
        parts += [call.arguments_text, CALL_END]
    parts.append(SECTION_END)
    return "".join(parts)


def _header(message: Mapping[str, Any], role: str) -> str:
    name = message.get("name") or role
    opener = {"user": IM_USER, "assistant": IM_ASSISTANT}.get(role, IM_SYSTEM)
    return f"{opener}{name}{IM_MIDDLE}"


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
        parts.append(f"{IM_SYSTEM}{TOOL_DECLARE_ROLE}{IM_MIDDLE}{declaration}{IM_END}")
    if not messages or messages[0]["role"] != "system":
        parts.append(f"{IM_SYSTEM}system{IM_MIDDLE}{DEFAULT_SYSTEM_PROMPT}{IM_END}")
    last_plain_answer = max(
        (i for i, m in enumerate(messages) if m["role"] == "assistant" and not m.get("tool_calls")),
        default=-1,
    )
    ids = _CallIds()
    for position, message in enumerate(messages):
        role = message["role"]
        where = f"messages[{position}] ({role})"
        body = content_text(message, where)
        if role == "assistant":
            if thinking:
                reasoning = message.get("reasoning_content") if position > last_plain_answer else None
                body = f"{THINK_BEGIN}{reasoning or ''}{THINK_END}{body}"
            if message.get("tool_calls"):
                body += _render_calls(message["tool_calls"], ids, where)
        elif role == "tool":
            original = message.get("tool_call_id")
            if not isinstance(original, str):
                raise ValueError(f"{where}: a tool result needs a string tool_call_id")
            body = f"## Return of {ids.result_id(original)}\n{body}"
        parts.append(f"{_header(message, role)}{body}{IM_END}")
    if add_generation_prompt:
        parts.append(f"{IM_ASSISTANT}assistant{IM_MIDDLE}")
    return "".join(parts)


def count_tool_calls(prompt_ids: Iterable[int], vocabulary: Vocabulary) -> int:
    """Number of ``<|tool_call_begin|>`` ids in the prompt: the next call's K2 counter."""
    call_begin = vocabulary.token_id(CALL_BEGIN)
    return sum(1 for token_id in prompt_ids if token_id == call_begin)



def read_tool_declaration(prompt_ids: Iterable[int], vocabulary: Vocabulary) -> list[Any] | None:
    """The tools of the prompt's first ``tool_declare`` message (K2 JSON style), or None.

    None when there is no declaration, when it is not closed by ``<|im_end|>``, when its body
    holds a non-text id (the text cannot be read exactly) or when it is not a JSON array.
    TypeScript declarations (K2.5+) give None: they drop facts (integer vs number, formats,
    bounds) and cannot be parsed back exactly. Never raises on a strange prompt; raises
    ``TokenizerError`` if the vocabulary lacks the K2 role tokens. Cost: O(len(prompt_ids)).
    """
    system = vocabulary.token_id(IM_SYSTEM)
    middle = vocabulary.token_id(IM_MIDDLE)
    end = vocabulary.token_id(IM_END)
    ids = list(prompt_ids)
    role_name = TOOL_DECLARE_ROLE.encode()
    for start, token_id in enumerate(ids):
        if token_id != system:
            continue
        position, name = start + 1, bytearray()
        while position < len(ids) and ids[position] != middle and len(name) <= len(role_name):
            data = text_bytes(vocabulary, ids[position])
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
            data = text_bytes(vocabulary, token_id)
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


def opens_reasoning(prompt_ids: Sequence[int] | None, vocabulary: "Vocabulary") -> bool:
    """Whether the prompt's last assistant header is followed by an unclosed ``<think>``."""
    if not prompt_ids:
        return False
    special = vocabulary.special_tokens
    think_begin, think_end = special.get(THINK_BEGIN), special.get(THINK_END)
    assistant = special.get(IM_ASSISTANT)
    if think_begin is None or think_end is None:
        return False
    for token in reversed(list(prompt_ids)):
        if token == think_begin:
            return True
        if token == think_end or token == assistant:
            return False
    return False

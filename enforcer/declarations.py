"""Kimi prompts: the tool declaration, the chat layout, and reading the declaration back.

K2: ``render_tool_declaration`` and ``render_chat`` produce text with the marker names spelled
out; the caller encodes it with the model's tokenizer, which maps marker text to the marker ids
at prompt time. ``read_tool_declaration`` and ``count_tool_calls`` work on prompt ids,
recognising structure by id only. K3: ``encode_chat`` builds the prompt ids directly, control
tokens by id and every text piece encoded on its own, so message text never yields a control
id. All functions are pure; cost is linear in the size of their input.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .errors import InvalidToolsError
from .formats import kimi_k2, kimi_k3

if TYPE_CHECKING:
    from .vocabulary import Vocabulary

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "count_tool_calls",
    "encode_chat",
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


K3_TOOLS_SENTENCE = "You may call the following functions."
"""The one sentence of K3's tool declaration (wording of this project)."""


def render_tool_declaration(
    tools: Sequence[Mapping[str, Any]], style: str = "json", format: str = "kimi_k2"
) -> str:
    """The body of the tool-declaration system message.

    ``format="kimi_k2"`` (K2's ``tool_declare`` message): ``style="json"`` is the OpenAI tools
    array as compact JSON (separators ``,`` ``:``), keys sorted recursively, non-ASCII kept (Kimi
    K2, K2-0905, K2-Thinking); ``style="typescript"`` one ``namespace functions { ... }`` block
    with a ``type NAME = (_: {...}) => any;`` per tool (the K2.5+ idea).

    ``format="kimi_k3"`` (the ``type="tool-declare"`` system message; ``style="json"`` only)::

        # Tools\n\nYou may call the following functions.\n\n```json\nJSON\n```

    where JSON is the same compact key-sorted array. Raises ``InvalidToolsError`` for a
    malformed tools list, ``ValueError`` for an unknown style or format.
    """
    if format not in ("kimi_k2", "kimi_k3"):
        raise ValueError(f"unknown tool-call format {format!r} (known: kimi_k2, kimi_k3)")
    checked = _check_tools(tools)
    if style == "json":
        try:
            text = json.dumps(checked, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise InvalidToolsError(f"tools are not JSON-serialisable: {exc}") from exc
        if format == "kimi_k3":
            return f"# Tools\n\n{K3_TOOLS_SENTENCE}\n\n```json\n{text}\n```"
        return text
    if style == "typescript" and format == "kimi_k2":
        return _TypeScript.render(checked)
    known = "json, typescript" if format == "kimi_k2" else "json"
    raise ValueError(f"unknown declaration style {style!r} for {format} (known: {known})")


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
# Kimi K3 prompt ids

K3_TOOL_DECLARE_TYPE = "tool-declare"
_K3_ROLES = ("system", "user", "assistant", "tool")


class _K3Prompt:
    """Accumulates K3 prompt ids: control tokens by id, each text piece encoded on its own."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.ids: list[int] = []
        self._encode = vocabulary.encode_text
        self._open = vocabulary.token_id(kimi_k3.OPEN)
        self._close = vocabulary.token_id(kimi_k3.CLOSE)
        self._sep = vocabulary.token_id(kimi_k3.SEP)
        self._end = vocabulary.token_id(kimi_k3.END_OF_MSG)

    def text(self, piece: str) -> None:
        if piece:
            self.ids += self._encode(piece)

    def open(self, tag: str, attributes: Iterable[tuple[str, str]] = ()) -> None:
        self.ids.append(self._open)
        for piece in kimi_k3.tag_pieces(tag, attributes):
            self.text(piece)
        self.ids.append(self._sep)

    def close(self, tag: str) -> None:
        self.ids.append(self._close)
        self.text(tag)
        self.ids.append(self._sep)

    def element(self, tag: str, attributes: Iterable[tuple[str, str]], body: str) -> None:
        self.open(tag, attributes)
        self.text(body)
        self.close(tag)

    def message(self, attributes: Sequence[tuple[str, str]], body: Callable[[], None]) -> None:
        self.open(kimi_k3.MESSAGE, attributes)
        body()
        self.close(kimi_k3.MESSAGE)
        self.ids.append(self._end)


def _k3_arguments(prompt: _K3Prompt, arguments: Any, where: str) -> None:
    """One call's body: an ``argument`` per top-level key, or the ``json`` form for a string
    that is not a JSON object."""
    if isinstance(arguments, Mapping):
        value: Any = arguments
    elif isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except (ValueError, RecursionError):
            value = None
    else:
        raise InvalidToolsError(f"{where}: function.arguments must be a JSON string, got {type(arguments).__name__}")
    if not isinstance(value, Mapping):
        prompt.element(kimi_k3.JSON_TAG, [("type", "object")], arguments)
        return
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidToolsError(f"{where}: argument names must be strings, got {key!r}")
        try:
            json_type = kimi_k3.value_type(item)
            text = item if json_type == "string" else json.dumps(item, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidToolsError(f"{where}: argument {key!r} is not a JSON value: {exc}") from exc
        prompt.element(kimi_k3.ARGUMENT, [("key", key), ("type", json_type)], text)


def _k3_calls(prompt: _K3Prompt, calls: Any, where: str) -> list[tuple[Any, str]]:
    """The tools section of an assistant message; returns each call's (original id, name)."""
    if not isinstance(calls, list):
        raise InvalidToolsError(f"{where}: tool_calls must be a list")
    named = []
    prompt.open(kimi_k3.TOOLS)
    for position, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise InvalidToolsError(f"{where}: tool_calls[{position}] needs function.name")
        index = str(kimi_k3.FIRST_INDEX + position)
        prompt.open(kimi_k3.CALL, [("tool", name), ("index", index)])
        _k3_arguments(prompt, function.get("arguments", "{}"), f"{where} tool_calls[{position}]")
        prompt.close(kimi_k3.CALL)
        named.append((call.get("id"), name))
    prompt.close(kimi_k3.TOOLS)
    return named


def encode_chat(
    messages: Sequence[Mapping[str, Any]],
    vocabulary: Vocabulary,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    format: str = "kimi_k3",
    add_generation_prompt: bool = True,
    thinking: bool = True,
) -> list[int]:
    """The prompt ids of ``messages`` in Kimi K3's layout (``format="kimi_k3"`` only).

    Every message is ``<|open|>message role="ROLE"[ attrs]<|sep|>BODY<|close|>message<|sep|>
    <|end_of_msg|>``; ``tools`` come first as a ``role="system" type="tool-declare"`` message
    (body: :func:`render_tool_declaration` with ``format="kimi_k3"``). An assistant body is its
    think block (when it has ``reasoning_content``), its response block (``content``) and its
    tools section: one ``call tool="NAME" index="N"`` per call (N from 1), whose arguments (an
    OpenAI JSON string, or an object) are split one level deep into ``argument key type``
    elements (strings raw, other values ``json.dumps``), or carried whole in ``json
    type="object"`` when they are not a JSON object. A tool result is ``role="tool"
    tool="NAME" index="N"`` of the call its ``tool_call_id`` names; consecutive results are put
    in call order. The generation prompt opens the assistant message and its think block
    (``thinking=True``) or its response block. Control tokens are added by id and every text
    piece (tag words, attribute keys, ``="``, values, bodies) is encoded on its own with
    :meth:`Vocabulary.encode_text`, so no text yields a control id.

    Raises ``InvalidToolsError`` naming the message for malformed messages or tools,
    ``TokenizerError`` when the vocabulary lacks a control token or cannot encode a piece,
    ``ValueError`` for another format. Cost: linear in the size of the dialog.
    """
    if format != "kimi_k3":
        raise ValueError(f"encode_chat supports format 'kimi_k3' only, got {format!r}")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidToolsError("messages must be a list of message objects")
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in _K3_ROLES:
            raise InvalidToolsError(f"messages[{position}] must be an object with role one of {', '.join(_K3_ROLES)}")
    prompt = _K3Prompt(vocabulary)
    if tools:
        declaration = render_tool_declaration(tools, "json", "kimi_k3")
        prompt.message([("role", "system"), ("type", K3_TOOL_DECLARE_TYPE)], lambda: prompt.text(declaration))
    calls: dict[str, tuple[str, int, int]] = {}  # original id -> (name, index, order of the call)
    results: list[tuple[int, str, str, int]] = []  # pending run of tool results: (order, name, body, index)
    order = 0

    def flush_results() -> None:
        for _, name, body, index in sorted(results, key=lambda result: result[0]):
            attributes = [("role", "tool"), ("tool", name), ("index", str(index))]
            prompt.message(attributes, lambda: prompt.text(body))
        results.clear()

    for position, message in enumerate(messages):
        role = message["role"]
        where = f"messages[{position}] ({role})"
        try:
            body = _content_text(message, where)
        except ValueError as exc:
            raise InvalidToolsError(str(exc)) from exc
        if role == "tool":
            original = message.get("tool_call_id")
            if not isinstance(original, str) or original not in calls:
                raise InvalidToolsError(f"{where}: tool_call_id {original!r} names no earlier tool call")
            name, index, call_order = calls[original]
            results.append((call_order, name, body, index))
            continue
        flush_results()
        if role != "assistant":
            prompt.message([("role", role)], lambda: prompt.text(body))
            continue
        reasoning = message.get("reasoning_content")
        if reasoning is not None and not isinstance(reasoning, str):
            raise InvalidToolsError(f"{where}: reasoning_content must be a string")
        named: list[tuple[Any, str]] = []

        def assistant_body() -> None:
            if reasoning:
                prompt.element(kimi_k3.THINK, (), reasoning)
            prompt.element(kimi_k3.RESPONSE, (), body)
            if message.get("tool_calls"):
                named.extend(_k3_calls(prompt, message["tool_calls"], where))

        prompt.message([("role", "assistant")], assistant_body)
        for offset, (original, name) in enumerate(named):
            if isinstance(original, str):
                calls[original] = (name, kimi_k3.FIRST_INDEX + offset, order)
            order += 1
    flush_results()
    if add_generation_prompt:
        prompt.open(kimi_k3.MESSAGE, [("role", "assistant")])
        prompt.open(kimi_k3.THINK if thinking else kimi_k3.RESPONSE)
    return prompt.ids


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
